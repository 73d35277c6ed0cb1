//! Where a sink lives: the one place that turns a `--to`/`<URL>` argument into a location.
//!
//! Two kinds of location are supported:
//!
//! - local directories: `./lake`, `/abs/lake`, `file:///abs/lake`;
//! - S3 (and S3-compatible stores such as Garage or MinIO): `s3://bucket/prefix`, configured
//!   from the usual `AWS_*` environment variables (`AWS_ENDPOINT`, `AWS_REGION`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`).
//!
//! Other schemes (`gs://…`, `http://…`) are recognised and refused with a clear message (exit
//! code 2); a new backend adds a variant to [`Location`] and an arm to [`Location::parse`].

use std::fmt;
use std::path::{Path, PathBuf};

use super::exit::{CliError, CliResult};

/// A parsed sink location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on a local (POSIX) file system.
    Local(PathBuf),
    /// A prefix in an S3 bucket.
    S3 {
        /// `s3://bucket/prefix`, without a trailing `/`.
        url: String,
    },
}

impl Location {
    /// Parses a location argument: a plain path, or a URL `scheme://…`.
    pub fn parse(s: &str) -> CliResult<Location> {
        if s.is_empty() {
            return Err(CliError::usage("the location is empty"));
        }
        let Some((scheme, rest)) = split_scheme(s) else {
            return Ok(Location::Local(PathBuf::from(s)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                // file:///abs/path or file://localhost/abs/path
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(CliError::usage(format!(
                        "`{s}` is not a local file URL: use file:///absolute/path"
                    )));
                }
                Ok(Location::Local(PathBuf::from(percent_decode(path)?)))
            }
            "s3" => parse_s3(s, rest),
            other => Err(CliError::usage(format!(
                "`{other}://` locations are not supported yet; use a local directory \
                 (`./lake`, `/abs/lake` or `file:///abs/lake`) or `s3://bucket/prefix`"
            ))),
        }
    }

    /// The local directory, for the local backend; `None` for other locations.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::S3 { .. } => None,
        }
    }
}

/// `s3://bucket[/prefix]`: a bucket is required; the prefix is a `/`-separated key prefix
/// without empty, `.` or `..` components (trailing `/` are dropped).
fn parse_s3(s: &str, rest: &str) -> CliResult<Location> {
    if rest.contains(['?', '#']) {
        return Err(CliError::usage(format!(
            "`{s}`: an S3 location takes no query or fragment; use s3://bucket/prefix"
        )));
    }
    let rest = rest.trim_end_matches('/');
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(CliError::usage(format!(
            "`{s}` names no bucket; use s3://bucket/prefix"
        )));
    }
    // Lenient on purpose (old buckets and S3 clones allow capitals and `_`); the store has the
    // last word.
    if !bucket
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(CliError::usage(format!(
            "`{bucket}` in `{s}` is not an S3 bucket name (letters, digits, `-`, `.` or `_`)"
        )));
    }
    if !prefix.is_empty()
        && prefix
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(CliError::usage(format!(
            "`{s}`: the prefix `{prefix}` has an empty, `.` or `..` component"
        )));
    }
    let url = if prefix.is_empty() {
        format!("s3://{bucket}")
    } else {
        format!("s3://{bucket}/{prefix}")
    };
    Ok(Location::S3 { url })
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { url } => f.write_str(url),
        }
    }
}

/// `scheme://rest` with an RFC 3986 scheme (a letter, then letters, digits, `+`, `-`, `.`).
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    let i = s.find("://")?;
    let scheme = &s[..i];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic()
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    Some((scheme, &s[i + 3..]))
}

fn percent_decode(s: &str) -> CliResult<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| CliError::usage(format!("bad percent escape in `{s}`")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| CliError::usage(format!("`{s}` is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_and_file_urls_are_local() {
        assert_eq!(
            Location::parse("./lake").unwrap(),
            Location::Local("./lake".into())
        );
        assert_eq!(
            Location::parse("/abs").unwrap(),
            Location::Local("/abs".into())
        );
        assert_eq!(
            Location::parse("file:///abs/my%20lake").unwrap(),
            Location::Local("/abs/my lake".into())
        );
        assert_eq!(
            Location::parse("file://localhost/abs").unwrap(),
            Location::Local("/abs".into())
        );
    }

    #[test]
    fn s3_urls_need_a_bucket_and_keep_their_prefix() {
        let s3 = |url: &str| Location::S3 { url: url.into() };
        assert_eq!(
            Location::parse("s3://bucket/lake").unwrap(),
            s3("s3://bucket/lake")
        );
        assert_eq!(
            Location::parse("S3://bucket/a/b/").unwrap(),
            s3("s3://bucket/a/b")
        );
        assert_eq!(Location::parse("s3://bucket").unwrap(), s3("s3://bucket"));
        assert_eq!(Location::parse("s3://bucket/").unwrap(), s3("s3://bucket"));
        assert_eq!(
            Location::parse("s3://bucket/lake").unwrap().to_string(),
            "s3://bucket/lake"
        );
        assert_eq!(
            Location::parse("s3://bucket/lake").unwrap().local_path(),
            None
        );
        for bad in [
            "s3://",
            "s3:///lake",
            "s3://buc ket/lake",
            "s3://bu%63ket/lake",
            "s3://bucket//lake",
            "s3://bucket/a/../b",
            "s3://bucket/lake?x=1",
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert_eq!(e.code(), crate::cli::exit::USAGE, "{bad}: {e}");
        }
    }

    #[test]
    fn other_schemes_are_not_supported_yet() {
        let e = Location::parse("gs://bucket/lake").unwrap_err();
        assert_eq!(e.code(), crate::cli::exit::USAGE);
        assert!(
            e.to_string()
                .contains("`gs://` locations are not supported yet"),
            "{e}"
        );
        assert!(Location::parse("file://host/abs").is_err());
    }
}
