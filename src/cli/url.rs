//! Where a sink lives: the one place that turns a `--to`/`<URL>` argument into a location.
//!
//! Today only local directories are supported: `./lake`, `/abs/lake`, `file:///abs/lake`.
//! Other schemes (`s3://…`) are recognised and refused with a clear message; a new backend
//! adds a variant to [`Location`] and an arm to [`Location::parse`].

use std::fmt;
use std::path::{Path, PathBuf};

use super::exit::{CliError, CliResult};

/// A parsed sink location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on a local (POSIX) file system.
    Local(PathBuf),
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
            other => Err(CliError::usage(format!(
                "`{other}://` locations are not supported yet; use a local directory \
                 (`./lake`, `/abs/lake` or `file:///abs/lake`)"
            ))),
        }
    }

    /// The local directory, for the local backend.
    pub fn local_path(&self) -> &Path {
        match self {
            Location::Local(p) => p,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
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
    fn other_schemes_are_not_supported_yet() {
        let e = Location::parse("s3://bucket/lake").unwrap_err();
        assert!(
            e.to_string()
                .contains("`s3://` locations are not supported yet"),
            "{e}"
        );
        assert!(Location::parse("file://host/abs").is_err());
    }
}
