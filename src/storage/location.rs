//! Where a sink lives: the one parser that turns a location string into a [`Location`], used by
//! [`crate::storage::open_url`], by [`crate::storage::ObjectStorage::s3`] and by every command
//! of the CLI.
//!
//! - local directories: `./lake`, `/abs/lake`, `file:///abs/lake` (percent-escapes decoded,
//!   `file://localhost/…` accepted);
//! - S3 and S3-compatible stores: `s3://bucket/prefix` (`s3a://` is the same). The prefix is
//!   taken as written, byte for byte, the way the AWS CLI takes keys: `s3://b/my lake` and
//!   `s3://b/my%20lake` are two different prefixes. A prefix has no empty, `.` or `..`
//!   component; trailing `/` are dropped; a query or fragment is refused.
//!
//! Other schemes (`gs://…`, `http://…`) are recognised and refused with a clear message; a new
//! backend adds a variant to [`Location`] and an arm to [`Location::parse`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Storage;

/// A parsed sink location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on a local (POSIX) file system.
    Local(PathBuf),
    /// A key prefix in an S3 bucket (empty for the whole bucket).
    S3 {
        /// The bucket name.
        bucket: String,
        /// The key prefix, without leading or trailing `/`.
        prefix: String,
    },
}

/// A location string that does not parse, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationError(String);

impl fmt::Display for LocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LocationError {}

impl From<LocationError> for crate::Error {
    fn from(e: LocationError) -> Self {
        crate::Error::Config(e.0)
    }
}

fn invalid(message: impl Into<String>) -> LocationError {
    LocationError(message.into())
}

impl Location {
    /// Parses a location: a plain path, or a URL `scheme://…`.
    ///
    /// ```
    /// use filesink::storage::Location;
    /// assert_eq!(Location::parse("./lake").unwrap(), Location::Local("./lake".into()));
    /// let s3 = Location::parse("s3://raw/events/").unwrap();
    /// assert_eq!(s3.to_string(), "s3://raw/events");
    /// assert!(Location::parse("s3://raw/a/../b").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<Location, LocationError> {
        if s.is_empty() {
            return Err(invalid("the location is empty"));
        }
        let Some((scheme, rest)) = split_scheme(s) else {
            return Ok(Location::Local(PathBuf::from(s)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                // file:///abs/path or file://localhost/abs/path
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(invalid(format!(
                        "`{s}` is not a local file URL: use file:///absolute/path"
                    )));
                }
                Ok(Location::Local(PathBuf::from(percent_decode(path)?)))
            }
            "s3" | "s3a" => parse_s3(s, rest),
            other => Err(invalid(format!(
                "`{other}://` locations are not supported yet; use a local directory \
                 (`./lake`, `/abs/lake` or `file:///abs/lake`) or `s3://bucket/prefix`"
            ))),
        }
    }

    /// What follows the scheme of an `s3://` (or `s3a://`, any case) URL; `None` for anything
    /// else. The one place that tells an S3 URL: locations, inputs and the benchmark ask it.
    ///
    /// ```
    /// use filesink::storage::Location;
    /// assert_eq!(Location::s3_rest("S3a://raw/a*.jsonl"), Some("raw/a*.jsonl"));
    /// assert_eq!(Location::s3_rest("./s3://x"), None);
    /// ```
    pub fn s3_rest(s: &str) -> Option<&str> {
        let (scheme, rest) = split_scheme(s)?;
        matches!(scheme.to_ascii_lowercase().as_str(), "s3" | "s3a").then_some(rest)
    }

    /// The local directory, for the local backend; `None` for other locations.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::S3 { .. } => None,
        }
    }

    /// Opens the storage of this location: a [`super::LocalStorage`] (which creates the
    /// directory if it is missing) or, with the `s3` feature, an [`super::ObjectStorage`]
    /// configured from the `AWS_*` environment variables.
    pub fn open(&self) -> crate::Result<Arc<dyn Storage>> {
        match self {
            Location::Local(path) => Ok(Arc::new(super::LocalStorage::new(path)?)),
            #[cfg(feature = "s3")]
            Location::S3 { .. } => Ok(Arc::new(super::ObjectStorage::s3_at(self)?)),
            #[cfg(not(feature = "s3"))]
            Location::S3 { .. } => Err(crate::Error::NotSupported(format!(
                "`{self}`: this build of filesink has no `s3` feature"
            ))),
        }
    }
}

/// `s3://bucket[/prefix]`: a bucket is required; the prefix is a `/`-separated key prefix
/// without empty, `.` or `..` components (trailing `/` are dropped).
fn parse_s3(s: &str, rest: &str) -> Result<Location, LocationError> {
    if rest.contains(['?', '#']) {
        return Err(invalid(format!(
            "`{s}`: an S3 location takes no query or fragment; use s3://bucket/prefix"
        )));
    }
    let rest = rest.trim_end_matches('/');
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(invalid(format!(
            "`{s}` names no bucket; use s3://bucket/prefix"
        )));
    }
    // Lenient on purpose (old buckets and S3 clones allow capitals and `_`); the store has the
    // last word.
    if !bucket
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(invalid(format!(
            "`{bucket}` in `{s}` is not an S3 bucket name (letters, digits, `-`, `.` or `_`)"
        )));
    }
    if !prefix.is_empty() {
        if prefix
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(invalid(format!(
                "`{s}`: the prefix `{prefix}` has an empty, `.` or `..` component"
            )));
        }
        crate::protocol::validate_rel_path(prefix).map_err(|e| invalid(format!("`{s}`: {e}")))?;
    }
    Ok(Location::S3 {
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
    })
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

impl std::str::FromStr for Location {
    type Err = LocationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Location::parse(s)
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

fn percent_decode(s: &str) -> Result<String, LocationError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid(format!("bad percent escape in `{s}`")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(format!("`{s}` is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, prefix: &str) -> Location {
        Location::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
        }
    }

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
            Location::parse("my lake").unwrap(),
            Location::Local("my lake".into())
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
    fn s3_urls_need_a_bucket_and_keep_their_prefix_as_written() {
        assert_eq!(
            Location::parse("s3://bucket/lake").unwrap(),
            s3("bucket", "lake")
        );
        assert_eq!(
            Location::parse("S3://bucket/a/b/").unwrap(),
            s3("bucket", "a/b")
        );
        assert_eq!(
            Location::parse("s3a://bucket/a").unwrap(),
            s3("bucket", "a")
        );
        assert_eq!(Location::parse("s3://bucket").unwrap(), s3("bucket", ""));
        assert_eq!(Location::parse("s3://bucket/").unwrap(), s3("bucket", ""));
        // Keys are not URL paths: no percent-decoding, no encoding of spaces.
        assert_eq!(
            Location::parse("s3://bucket/my lake").unwrap(),
            s3("bucket", "my lake")
        );
        assert_eq!(
            Location::parse("s3://bucket/my%20lake").unwrap(),
            s3("bucket", "my%20lake")
        );
        assert_eq!(
            Location::parse("s3a://bucket/lake/").unwrap().to_string(),
            "s3://bucket/lake"
        );
        assert_eq!(
            Location::parse("s3://bucket/lake").unwrap().local_path(),
            None
        );
        for bad in [
            "",
            "s3://",
            "s3:///lake",
            "s3://buc ket/lake",
            "s3://bu%63ket/lake",
            "s3://bucket//lake",
            "s3://bucket/a/../b",
            "s3://bucket/./b",
            "s3://bucket/lake?x=1",
            "s3://bucket/lake#top",
            "s3://bucket/a\0b",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn other_schemes_are_not_supported_yet() {
        let e = Location::parse("gs://bucket/lake").unwrap_err();
        assert!(
            e.to_string()
                .contains("`gs://` locations are not supported yet"),
            "{e}"
        );
        assert!(Location::parse("file://host/abs").is_err());
        assert!(Location::parse("file:///abs/%zz").is_err());
    }
}
