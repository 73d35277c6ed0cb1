//! What goes into a checkpoint: [`Committable`]s (handles to pending files) and the
//! [`WriterState`] (files still open and resumable).
//!
//! Both are serde types with an explicit `version`. [`Committable::from_json`] and
//! [`WriterState::from_json`] refuse versions newer than [`FORMAT_VERSION`] and validate every
//! path, so state that is corrupt or foreign is reported, never acted on. Golden files under
//! `fixtures/state/v1/` pin the version-1 encoding: every later build must keep reading them.
//!
//! All paths are relative to the sink's base location, `/`-separated, and checked by
//! [`validate_rel_path`] before any backend touches them: a hostile or damaged state cannot name
//! a file outside the base, and only names of the form `.<final>.inprogress.<id>` are ever
//! treated as the sink's own hidden files.

use serde::{Deserialize, Serialize};

use crate::bucket::BucketId;
use crate::{Error, Result};

/// The newest serialization format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The marker between a part file's final name and its random id in an in-progress name.
pub(crate) const IN_PROGRESS_MARKER: &str = ".inprogress.";

/// A handle to one pending part file: durable, invisible, and committable by any process.
///
/// Produced by [`crate::SinkWriter::prepare_commit`]; consumed by [`crate::Committer::commit`].
/// Store it in the checkpoint; replaying it after a crash is always safe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committable {
    /// Serialization format version ([`FORMAT_VERSION`] when written by this build).
    pub version: u32,
    /// The identity of the writer that produced the file.
    pub writer_id: String,
    /// The checkpoint at which the file became pending.
    pub checkpoint_id: u64,
    /// The bucket (partition directory) of the file.
    pub bucket: BucketId,
    /// Where the file becomes visible, relative to the base location.
    pub final_path: String,
    /// The file's exact size.
    pub size_bytes: u64,
    /// CRC-32C of the file's content, checked before reporting "already committed".
    pub crc32c: u32,
    /// Records in the file.
    pub record_count: u64,
    /// Where the pending bytes are, per backend.
    pub pending: PendingHandle,
    /// Hidden files made obsolete by this one (the originals of resumed row files); removed
    /// after this committable is committed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
}

/// Where a pending file's bytes wait for commit. One variant per commit primitive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PendingHandle {
    /// A closed, fsynced hidden file beside its final name, committed by rename without replace.
    LocalFile {
        /// The hidden in-progress path, relative to the base location.
        in_progress_path: String,
    },
    /// An S3 multipart upload to the final key with every part uploaded, committed by
    /// CompleteMultipartUpload.
    Multipart {
        /// The upload id S3 gave at CreateMultipartUpload.
        upload_id: String,
        /// Every uploaded part, in order.
        parts: Vec<UploadedPart>,
    },
    /// A hidden staging object beside the final key on a store without multipart uploads,
    /// committed by copy-if-not-exists.
    Staged {
        /// The hidden staging object, relative to the base location.
        staging_path: String,
    },
}

/// One uploaded part of a multipart upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadedPart {
    /// The part number, from 1.
    pub number: u32,
    /// The ETag S3 returned for the part.
    pub etag: String,
}

impl PendingHandle {
    /// The identifier under which a backend lists this pending file as a leftover
    /// ([`crate::storage::Leftover::path`]): the hidden path, or `<final path>#<upload id>`.
    pub fn leftover_id(&self, final_path: &str) -> String {
        match self {
            PendingHandle::LocalFile { in_progress_path } => in_progress_path.clone(),
            PendingHandle::Multipart { upload_id, .. } => upload_leftover_id(final_path, upload_id),
            PendingHandle::Staged { staging_path } => staging_path.clone(),
        }
    }
}

/// The leftover id of the multipart upload `upload_id` to `final_path`.
pub fn upload_leftover_id(final_path: &str, upload_id: &str) -> String {
    format!("{final_path}#{upload_id}")
}

/// The part of a writer that must survive a restart: row-format files kept open across the
/// checkpoint, each with the length that is durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterState {
    /// Serialization format version ([`FORMAT_VERSION`] when written by this build).
    pub version: u32,
    /// The identity of the writer the state belongs to.
    pub writer_id: String,
    /// The format the files are written in (`parquet`, `jsonl`, `csv`); a state is only
    /// restored into a sink of the same format.
    pub format: String,
    /// The checkpoint this state was taken at.
    pub checkpoint_id: u64,
    /// Files still in progress that a restored writer continues.
    pub in_progress: Vec<ResumableFile>,
}

/// One in-progress row-format file as of a checkpoint (Flink's `ResumeRecoverable`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumableFile {
    /// The bucket of the file.
    pub bucket: BucketId,
    /// The hidden in-progress path, relative to the base location.
    pub in_progress_path: String,
    /// The final path the file would have had.
    pub final_path: String,
    /// Bytes that were durable at the checkpoint. Bytes after them are discarded on restore.
    pub durable_len_bytes: u64,
    /// CRC-32C of the durable bytes, checked when they are restored.
    pub crc32c: u32,
    /// Records in the durable bytes.
    pub record_count: u64,
    /// When the file was created, in milliseconds since the Unix epoch (for the rollover
    /// interval).
    pub created_at_ms: i64,
    /// Hidden files this one already supersedes (see [`Committable::supersedes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
}

#[derive(Deserialize)]
struct VersionProbe {
    version: Option<u32>,
}

fn decode<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T> {
    let probe: VersionProbe = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(what, format!("not a JSON object: {e}")))?;
    match probe.version {
        None => return Err(Error::corrupt(what, "no `version` field")),
        Some(v) if v == 0 || v > FORMAT_VERSION => {
            return Err(Error::UnsupportedVersion {
                what: what.to_string(),
                found: v,
                supported: FORMAT_VERSION,
            })
        }
        Some(_) => {}
    }
    serde_json::from_slice(bytes).map_err(|e| Error::corrupt(what, e.to_string()))
}

impl Committable {
    /// Serializes to JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("committables always serialize")
    }

    /// Reads JSON written by [`Committable::to_json`] of this or an older build, and checks that
    /// every path in it is safe to act on.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let c: Committable = decode("committable", bytes)?;
        c.validate()?;
        Ok(c)
    }

    /// Checks the invariants a backend relies on: relative paths inside the base, a hidden
    /// pending name in the final file's directory, a visible final name.
    pub fn validate(&self) -> Result<()> {
        let what = || format!("committable for `{}`", self.final_path);
        if self.version == 0 || self.version > FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                what: what(),
                found: self.version,
                supported: FORMAT_VERSION,
            });
        }
        validate_writer_id(&self.writer_id).map_err(|e| Error::corrupt(what(), e))?;
        validate_final_path(&self.final_path, &self.bucket)
            .map_err(|e| Error::corrupt(what(), e))?;
        match &self.pending {
            PendingHandle::LocalFile { in_progress_path } => {
                validate_in_progress_path(in_progress_path, &self.final_path)
                    .map_err(|e| Error::corrupt(what(), e))?;
            }
            PendingHandle::Staged { staging_path } => {
                validate_in_progress_path(staging_path, &self.final_path)
                    .map_err(|e| Error::corrupt(what(), e))?;
            }
            PendingHandle::Multipart { upload_id, parts } => {
                if upload_id.is_empty() || upload_id.contains(['/', '#', '\0']) {
                    return Err(Error::corrupt(what(), "bad upload id"));
                }
                if parts.is_empty() || parts.len() > 10_000 {
                    return Err(Error::corrupt(
                        what(),
                        "a multipart upload has 1 to 10,000 parts",
                    ));
                }
                for (i, p) in parts.iter().enumerate() {
                    if p.number as usize != i + 1 || p.etag.is_empty() {
                        return Err(Error::corrupt(
                            what(),
                            "parts must be numbered 1, 2, … with ETags",
                        ));
                    }
                }
            }
        }
        for s in &self.supersedes {
            validate_hidden_path(s).map_err(|e| Error::corrupt(what(), e))?;
        }
        Ok(())
    }
}

impl WriterState {
    /// Serializes to JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("writer state always serializes")
    }

    /// Reads JSON written by [`WriterState::to_json`] of this or an older build, and checks that
    /// every path in it is safe to act on.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let s: WriterState = decode("writer state", bytes)?;
        s.validate()?;
        Ok(s)
    }

    /// Checks version, writer id and every path.
    pub fn validate(&self) -> Result<()> {
        let what = || format!("writer state of writer `{}`", self.writer_id);
        if self.version == 0 || self.version > FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                what: what(),
                found: self.version,
                supported: FORMAT_VERSION,
            });
        }
        validate_writer_id(&self.writer_id).map_err(|e| Error::corrupt(what(), e))?;
        for f in &self.in_progress {
            validate_final_path(&f.final_path, &f.bucket).map_err(|e| Error::corrupt(what(), e))?;
            validate_in_progress_path(&f.in_progress_path, &f.final_path)
                .map_err(|e| Error::corrupt(what(), e))?;
            for s in &f.supersedes {
                validate_hidden_path(s).map_err(|e| Error::corrupt(what(), e))?;
            }
        }
        Ok(())
    }
}

/// A writer id is what tells one parallel writer's files from another's, so it must be short,
/// non-empty and unable to be confused with a name separator.
pub(crate) fn validate_writer_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 64 {
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

/// Splits a relative path into (directory, file name); the directory is "" at the base.
pub fn split_rel(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

fn validate_final_path(final_path: &str, bucket: &BucketId) -> Result<(), String> {
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

fn validate_hidden_path(path: &str) -> Result<(), String> {
    validate_rel_path(path)?;
    let (_, name) = split_rel(path);
    if parse_hidden_name(name).is_none() {
        return Err(format!("`{path}` is not an in-progress part name"));
    }
    Ok(())
}

fn validate_in_progress_path(in_progress: &str, final_path: &str) -> Result<(), String> {
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

impl Serialize for BucketId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BucketId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        BucketId::parse(&s).map_err(serde::de::Error::custom)
    }
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
}
