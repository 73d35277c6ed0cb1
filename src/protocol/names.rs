//! The name grammar: which relative paths a backend may act on, and the exact shape of the
//! sink's part file names.
//!
//! All paths in the protocol are relative to the sink's base location, `/`-separated, and
//! checked by [`validate_rel_path`] before any backend touches them: a hostile or damaged state
//! cannot name a file outside the base. Only names that parse as a [`PartName`] of the form
//! `.<final>.inprogress.<id>` are ever treated as the sink's own hidden files.

use super::BucketId;
use crate::Result;

/// The marker between a part file's final name and its random id in an in-progress name.
pub(crate) const IN_PROGRESS_MARKER: &str = ".inprogress.";

/// The marker between a metadata object's name and the id of a temporary file that writes it
/// ([`metadata_temp_name`]).
const METADATA_TEMP_MARKER: &str = ".tmp.";

/// The temporary file that a durable metadata write on local disk fills, fsyncs and renames to
/// `name`: `.<name>.tmp.<UUIDv7, 32 hex digits>`. One the write did not rename (its process
/// died between the two) stays behind; [`is_metadata_temp_name`] tells such names from any
/// other, so that cleanup (`crate::lake::may_remove_temp`) touches no other file.
pub fn metadata_temp_name(name: &str) -> String {
    format!(
        ".{name}{METADATA_TEMP_MARKER}{}",
        uuid::Uuid::now_v7().simple()
    )
}

/// Whether `name` (a file name, no `/`) is exactly of the shape [`metadata_temp_name`] makes:
/// a dot, a non-empty name, `.tmp.` and 32 lowercase hex digits of a version 7 UUID.
pub fn is_metadata_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some((object, id)) = rest.rsplit_once(METADATA_TEMP_MARKER) else {
        return false;
    };
    !object.is_empty()
        && !object.contains('/')
        && id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && uuid::Uuid::try_parse(id).is_ok_and(|u| u.get_version_num() == 7)
}

/// The longest writer id, in bytes.
pub(crate) const WRITER_ID_BYTES_MAX: usize = 64;

/// A writer id is what tells one parallel writer's files from another's, so it must be short,
/// non-empty and unable to be confused with a name separator.
pub(crate) fn validate_writer_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > WRITER_ID_BYTES_MAX {
        return Err(format!("writer id `{id}` must be 1 to 64 characters"));
    }
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!(
            "writer id `{id}` may only contain ASCII letters, digits and `_`"
        ));
    }
    Ok(())
}

/// Checks that `path` is relative, `/`-separated, and has only normal components (no `.`,
/// `..`, empty component, backslash or NUL), so that joined under the base it stays inside.
pub fn validate_rel_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("empty path".into());
    }
    for component in path.split('/') {
        if component.is_empty() || component == "." || component == ".." {
            return Err(format!("path `{path}` has a `{component}` component"));
        }
        if component.contains(['\0', '\\']) {
            return Err(format!("path `{path}` contains NUL or a backslash"));
        }
        if component.len() > 255 {
            return Err(format!("path `{path}` has a component over 255 bytes"));
        }
    }
    Ok(())
}

/// Checks a directory of the metadata namespace: a valid relative path
/// ([`validate_rel_path`]) whose first component is `_filesink` or `_delta_log`
/// ([`super::paths::METADATA_NAMESPACES`]). The metadata methods of
/// [`crate::storage::Storage`] act there and nowhere else, so none of them can write, replace,
/// read or delete a data file or a part file.
pub fn validate_metadata_dir(dir: &str) -> Result<(), String> {
    validate_rel_path(dir)?;
    let first = dir.split('/').next().unwrap_or_default();
    if !super::paths::METADATA_NAMESPACES.contains(&first) {
        return Err(format!(
            "`{dir}` is outside the metadata directories `{}`",
            super::paths::METADATA_NAMESPACES.join("/`, `")
        ));
    }
    Ok(())
}

/// Checks the path of a metadata object: inside a directory of the metadata namespace
/// ([`validate_metadata_dir`]), not the directory itself.
pub fn validate_metadata_path(path: &str) -> Result<(), String> {
    validate_metadata_dir(path)?;
    if !path.contains('/') {
        return Err(format!(
            "`{path}` is a metadata directory, not an object in one"
        ));
    }
    Ok(())
}

/// Checks the path of a visible data file: a valid relative path ([`validate_rel_path`])
/// none of whose components starts with `.` or `_` (the names readers list; never inside
/// `_filesink/` or `_delta_log/`, never a hidden part file).
pub fn validate_visible_path(path: &str) -> Result<(), String> {
    validate_rel_path(path)?;
    if path.split('/').any(|c| c.starts_with(['.', '_'])) {
        return Err(format!(
            "`{path}` is not a visible data file: a component starts with `.` or `_`"
        ));
    }
    Ok(())
}

/// Checks the path of a committed part file of the exact shape filesink writes: a visible
/// path ([`validate_visible_path`]) whose file name parses as a final [`PartName`]. Whose
/// part it is (which sink's jobs, prefixes and suffixes) is decided above the storage layer
/// (`job::OwnNames`).
pub fn validate_final_part_path(path: &str) -> Result<(), String> {
    validate_visible_path(path)?;
    if PartName::parse_final(split_rel(path).1).is_none() {
        return Err(format!(
            "`{path}` is not a final part name of the shape filesink writes"
        ));
    }
    Ok(())
}

/// Splits a relative path into (directory, file name); the directory is "" at the base.
pub fn split_rel(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

pub(crate) fn validate_final_path(final_path: &str, bucket: &BucketId) -> Result<(), String> {
    validate_rel_path(final_path)?;
    let (dir, name) = split_rel(final_path);
    if dir != bucket.as_str() {
        return Err(format!(
            "final path `{final_path}` is not in its bucket `{bucket}`"
        ));
    }
    if name.starts_with('.') || name.starts_with('_') || name.contains(IN_PROGRESS_MARKER) {
        return Err(format!("final path `{final_path}` is a hidden name"));
    }
    Ok(())
}

/// The length of the incarnation id and of the in-progress id in a part name: a UUID in
/// simple form (32 lowercase hex digits).
const NAME_ID_LEN: usize = 32;

/// A part file name of the exact shape filesink writes, parsed.
///
/// The grammar, the one place it is written down (the name builder of
/// [`crate::SinkWriter`] and every cleanup path use it):
///
/// ```text
/// final name:        <prefix>-<writer id>-<incarnation>-<counter><suffix>
/// in-progress name:  .<final name>.inprogress.<in-progress id>
/// ```
///
/// - `prefix`: [`crate::OutputFileConfig::prefix`]: not empty, not starting with `.` or `_`
///   (it may contain `-`);
/// - `writer id`: 1 to 64 ASCII letters, digits and `_` (a [`crate::Coordinator`]'s writers
///   are `<job>_<i>`);
/// - `incarnation` and `in-progress id`: 32 lowercase hex digits (a UUID);
/// - `counter`: a decimal number without leading zeros;
/// - `suffix`: [`crate::OutputFileConfig::suffix`], not starting with a digit.
///
/// A name that only looks like one (`.notes.inprogress.1`, another tool's
/// `.backup.csv.inprogress.2024`) does not parse: it is foreign, and cleanup never removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartName {
    /// The final (visible) name.
    pub final_name: String,
    /// The file name prefix.
    pub prefix: String,
    /// The writer that wrote the file.
    pub writer_id: String,
    /// The writer incarnation that wrote the file.
    pub incarnation: String,
    /// The writer incarnation's counter.
    pub counter: u64,
    /// The file name suffix.
    pub suffix: String,
    /// The in-progress id, for an in-progress name; `None` for a final name.
    pub in_progress_id: Option<String>,
}

impl PartName {
    /// The final name of a part: `<prefix>-<writer id>-<incarnation>-<counter><suffix>`.
    pub(crate) fn final_name_of(
        prefix: &str,
        writer_id: &str,
        incarnation: &str,
        counter: u64,
        suffix: &str,
    ) -> String {
        format!("{prefix}-{writer_id}-{incarnation}-{counter}{suffix}")
    }

    /// The in-progress name of the part named `final_name`: `.<final name>.inprogress.<id>`.
    pub(crate) fn in_progress_name_of(final_name: &str, in_progress_id: &str) -> String {
        format!(".{final_name}{IN_PROGRESS_MARKER}{in_progress_id}")
    }

    /// Parses a hidden in-progress name; `None` unless it has exactly the shape filesink
    /// writes.
    pub fn parse_in_progress(name: &str) -> Option<PartName> {
        let rest = name.strip_prefix('.')?;
        let i = rest.rfind(IN_PROGRESS_MARKER)?;
        let (final_name, id) = (&rest[..i], &rest[i + IN_PROGRESS_MARKER.len()..]);
        if !is_name_id(id) {
            return None;
        }
        let mut parsed = PartName::parse_final(final_name)?;
        parsed.in_progress_id = Some(id.to_string());
        Some(parsed)
    }

    /// Parses a final name (the key of an S3 multipart upload); `None` unless it has exactly
    /// the shape filesink writes.
    pub fn parse_final(name: &str) -> Option<PartName> {
        if name.contains(['/', '\\', '\0']) || name.contains(IN_PROGRESS_MARKER) {
            return None;
        }
        let bytes = name.as_bytes();
        // The incarnation is the first `-<32 hex>-<digit>` after a writer id.
        for (at, _) in name.match_indices('-') {
            let inc = at + 1;
            let after = inc + NAME_ID_LEN;
            if bytes.get(after) != Some(&b'-')
                || !is_name_id(&name[inc..after])
                || !bytes.get(after + 1).is_some_and(u8::is_ascii_digit)
            {
                continue;
            }
            let Some(w) = name[..at].rfind('-') else {
                continue;
            };
            let (prefix, writer_id) = (&name[..w], &name[w + 1..at]);
            if prefix.is_empty()
                || prefix.starts_with(['.', '_'])
                || validate_writer_id(writer_id).is_err()
            {
                continue;
            }
            let digits = name[after + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            let (counter, suffix) = name[after + 1..].split_at(digits);
            if counter.len() > 1 && counter.starts_with('0') {
                continue;
            }
            let Ok(n) = counter.parse::<u64>() else {
                continue;
            };
            return Some(PartName {
                final_name: name.to_string(),
                prefix: prefix.to_string(),
                writer_id: writer_id.to_string(),
                incarnation: name[inc..after].to_string(),
                counter: n,
                suffix: suffix.to_string(),
                in_progress_id: None,
            });
        }
        None
    }
}

/// A UUID in simple form: 32 lowercase hex digits.
fn is_name_id(s: &str) -> bool {
    s.len() == NAME_ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether a file name merely looks like an in-progress name (`.<anything>.inprogress.<hex>`),
/// the loose pattern of filesink's own names: what cleanup reports as foreign when
/// [`PartName::parse_in_progress`] refuses it.
pub fn looks_in_progress(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    rest.rfind(IN_PROGRESS_MARKER).is_some_and(|i| {
        let id = &rest[i + IN_PROGRESS_MARKER.len()..];
        i > 0 && !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// Whether a file name is one of filesink's hidden part names, of exactly the shape it writes
/// ([`PartName::parse_in_progress`]). Returns the final name it belongs to.
pub fn parse_hidden_name(name: &str) -> Option<&str> {
    PartName::parse_in_progress(name)?;
    let rest = &name[1..];
    Some(&rest[..rest.rfind(IN_PROGRESS_MARKER)?])
}

/// Checks the path of a hidden part file: a valid relative path whose file name is an
/// in-progress name of exactly the shape filesink writes ([`parse_hidden_name`]).
pub fn validate_hidden_path(path: &str) -> Result<(), String> {
    validate_rel_path(path)?;
    let (_, name) = split_rel(path);
    if parse_hidden_name(name).is_none() {
        return Err(format!("`{path}` is not an in-progress part name"));
    }
    Ok(())
}

pub(crate) fn validate_in_progress_path(in_progress: &str, final_path: &str) -> Result<(), String> {
    validate_hidden_path(in_progress)?;
    let (dir, name) = split_rel(in_progress);
    let (final_dir, final_name) = split_rel(final_path);
    if dir != final_dir || parse_hidden_name(name) != Some(final_name) {
        return Err(format!(
            "in-progress path `{in_progress}` does not belong to `{final_path}`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INC: &str = "019ad2f1c0c87b2a9d6f3b8e5a1c2d3e";
    const ID: &str = "5f2b9a0c4d1e4f7a8b6c3d2e1f0a9b8c";

    #[test]
    fn names_the_builder_makes_parse_back_to_their_parts() {
        for (prefix, writer, counter, suffix) in [
            ("part", "0", 0, ".parquet"),
            ("part", "nightly_3", 17, ".jsonl"),
            ("my-data", "job_with_under_0", u64::MAX, ".csv"),
            ("part", "w", 5, ""),
            ("p-1-2", "A9_", 10, "-x.parquet"),
        ] {
            let final_name = PartName::final_name_of(prefix, writer, INC, counter, suffix);
            let hidden = PartName::in_progress_name_of(&final_name, ID);
            let expected = PartName {
                final_name: final_name.clone(),
                prefix: prefix.into(),
                writer_id: writer.into(),
                incarnation: INC.into(),
                counter,
                suffix: suffix.into(),
                in_progress_id: None,
            };
            assert_eq!(PartName::parse_final(&final_name), Some(expected.clone()));
            let parsed = PartName::parse_in_progress(&hidden);
            assert_eq!(
                parsed,
                Some(PartName {
                    in_progress_id: Some(ID.into()),
                    ..expected
                })
            );
            assert_eq!(parse_hidden_name(&hidden), Some(final_name.as_str()));
        }
    }

    #[test]
    fn names_that_only_look_like_ours_do_not_parse() {
        let ok = format!(".part-w_0-{INC}-3.parquet.inprogress.{ID}");
        assert!(PartName::parse_in_progress(&ok).is_some());
        for bad in [
            ".notes.inprogress.1".to_string(),
            ".backup.csv.inprogress.2024".to_string(),
            ".part.inprogress.".to_string(),
            ".part.inprogress.xyz".to_string(),
            ".hidden".to_string(),
            "part-0-1.parquet".to_string(),
            format!("part-w_0-{INC}-3.parquet.inprogress.{ID}"),
            format!(".part-w_0-{INC}-3.parquet.inprogress.{}", &ID[..31]),
            format!(".part-w_0-{INC}-3.parquet.inprogress.{}", ID.to_uppercase()),
            format!(".part-w_0-{INC}-3.parquet.inprogress.{ID}0"),
            format!(".part-w_0-{}-3.parquet.inprogress.{ID}", &INC[..31]),
            format!(".part-w_0-{INC}-03.parquet.inprogress.{ID}"),
            format!(".part-w_0-{INC}-.parquet.inprogress.{ID}"),
            format!(".part-w-0-{INC}x-3.parquet.inprogress.{ID}"),
            format!(".-w_0-{INC}-3.parquet.inprogress.{ID}"),
            format!("._p-w_0-{INC}-3.parquet.inprogress.{ID}"),
            format!(".part--{INC}-3.parquet.inprogress.{ID}"),
            format!(".part-w.0-{INC}-3.parquet.inprogress.{ID}"),
            format!(".part-w_0-{INC}-3.parquet.inprogress.{ID}.inprogress.{ID}"),
        ] {
            assert_eq!(PartName::parse_in_progress(&bad), None, "{bad}");
            assert_eq!(parse_hidden_name(&bad), None, "{bad}");
        }
        assert!(looks_in_progress(".notes.inprogress.1"));
        assert!(!looks_in_progress(".notes"));
    }

    #[test]
    fn rel_paths_cannot_escape_the_base() {
        for bad in ["", "/abs", "a/../b", "..", "./a", "a//b", "a/\0", "a\\b"] {
            assert!(validate_rel_path(bad).is_err(), "{bad:?} accepted");
        }
        assert!(validate_rel_path("a=1/b=%2F/part-0.parquet").is_ok());
    }

    #[test]
    fn metadata_paths_stay_in_the_metadata_directories() {
        for ok in [
            "_filesink/sink.json",
            "_filesink/jobs/j/checkpoints/00000000000000000001.json",
            "_delta_log/00000000000000000000.json",
            "_delta_log/_last_checkpoint",
        ] {
            assert_eq!(validate_metadata_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "_filesink",
            "_delta_log",
            "/_filesink/sink.json",
            "_filesink/../x",
            "_delta_log/../../etc/passwd",
            "_delta_log/a\0b",
            "_delta_log/a\\b",
            "_delta_log//x",
            "./_delta_log/x",
            "x/_delta_log/0.json",
            "_other/x",
            "_delta_logs/x",
            "part-0.parquet",
            "day=1/part-0.parquet",
        ] {
            assert!(validate_metadata_path(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(validate_metadata_dir("_delta_log"), Ok(()));
        assert!(validate_metadata_dir("").is_err());
        assert!(validate_metadata_dir("day=1").is_err());
    }

    #[test]
    fn final_part_paths_are_visible_and_of_the_exact_shape() {
        let name = format!("part-w_0-{INC}-3.parquet");
        assert_eq!(validate_final_part_path(&name), Ok(()));
        assert_eq!(validate_final_part_path(&format!("day=1/{name}")), Ok(()));
        for bad in [
            format!("_delta_log/{name}"),
            format!("_filesink/{name}"),
            format!(".hidden/{name}"),
            format!(".{name}.inprogress.{ID}"),
            format!("../{name}"),
            format!("/{name}"),
            "notes.txt".to_string(),
            "part-0-1.parquet".to_string(),
            format!("day=1/{name}\0"),
        ] {
            assert!(validate_final_part_path(&bad).is_err(), "{bad:?} accepted");
        }
        assert!(validate_visible_path("day=1/notes.txt").is_ok());
        assert!(validate_visible_path("_delta_log/0.json").is_err());
    }
}
