//! [`BucketId`]: the validated relative directory a part file lives in, as it appears in
//! committables and writer states.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Longest directory name, in bytes, that a bucket component may have (the `NAME_MAX` of ext4,
/// XFS, btrfs, APFS and NTFS).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// A validated relative directory path under the sink's base directory, components joined by
/// `/`. The empty path is the base directory itself.
///
/// Every component is non-empty, is not `.` or `..`, contains no `/`, `\` or NUL, is at most
/// [`MAX_COMPONENT_BYTES`] bytes long and does not start with `.` or `_` (readers treat such
/// names as hidden, and filesink keeps its own files hidden that way). So joining a `BucketId`
/// under a base directory can never leave it or reach filesink's own files.
///
/// Ordered by its string form, so sorting bucket ids sorts directories.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketId(pub(crate) String);

impl BucketId {
    /// The base directory itself (the empty path).
    pub fn root() -> Self {
        BucketId(String::new())
    }

    /// Builds a bucket id from its directory names, validating each.
    ///
    /// No components gives [`BucketId::root`]. Errors with [`Error::InvalidInput`] naming the
    /// offending component when one is empty, `.` or `..`, contains `/`, `\` or NUL, is longer
    /// than [`MAX_COMPONENT_BYTES`] bytes, or starts with `.` or `_`.
    pub fn from_components<I: IntoIterator<Item = S>, S: AsRef<str>>(
        components: I,
    ) -> Result<Self> {
        let mut path = String::new();
        for (i, component) in components.into_iter().enumerate() {
            let component = component.as_ref();
            check_component(component).map_err(|problem| {
                Error::InvalidInput(format!(
                    "invalid bucket directory name {:?}: {problem}",
                    truncate_for_message(component)
                ))
            })?;
            if i > 0 {
                path.push('/');
            }
            path.push_str(component);
        }
        Ok(BucketId(path))
    }

    /// Parses and validates a bucket id as stored in serialized state (`"a=1/b=2"`, or `""` for
    /// the root), with the same rules as [`BucketId::from_components`].
    pub fn parse(s: &str) -> Result<Self> {
        Self::parse_inner(s).map_err(|problem| {
            Error::InvalidInput(format!(
                "invalid bucket id {:?}: {problem}",
                truncate_for_message(s)
            ))
        })
    }

    /// [`BucketId::parse`] with the bare reason as error, for callers that word it themselves.
    pub(crate) fn parse_inner(s: &str) -> std::result::Result<Self, String> {
        if s.is_empty() {
            return Ok(Self::root());
        }
        for component in s.split('/') {
            check_component(component).map_err(|problem| {
                format!(
                    "directory name {:?} {problem}",
                    truncate_for_message(component)
                )
            })?;
        }
        Ok(BucketId(s.to_owned()))
    }

    /// The path as a string, components joined by `/`; `""` for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the base directory itself.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The directory names, outermost first; none for the root.
    pub fn components(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// This bucket's directory under `base`, joined component by component so the result uses
    /// the platform's separator.
    pub fn path_under(&self, base: &Path) -> PathBuf {
        let mut path = base.to_path_buf();
        path.extend(self.components());
        path
    }
}

impl fmt::Display for BucketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for BucketId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Checks one directory name against the [`BucketId`] rules; the error says what is wrong.
fn check_component(c: &str) -> std::result::Result<(), String> {
    if c.is_empty() {
        return Err("is empty".to_owned());
    }
    if c == "." || c == ".." {
        return Err("is a relative path".to_owned());
    }
    if c.contains('/') {
        return Err("contains '/'".to_owned());
    }
    if c.contains('\\') {
        return Err("contains '\\'".to_owned());
    }
    if c.contains('\0') {
        return Err("contains a nul byte".to_owned());
    }
    if c.len() > MAX_COMPONENT_BYTES {
        return Err(format!(
            "is {} bytes long, more than the {MAX_COMPONENT_BYTES}-byte limit",
            c.len()
        ));
    }
    if c.starts_with('.') || c.starts_with('_') {
        return Err("starts with '.' or '_', which readers treat as hidden".to_owned());
    }
    Ok(())
}

/// Why partition path `path` cannot be written: it is longer than `max` bytes
/// ([`crate::Sink::partition_path_bytes_max`]).
/// The one rule of partition path lengths: a bucket whose path is longer than `max` bytes
/// (the store's limit on a path less the lake's base and a part file's name,
/// `Sink::partition_path_bytes_max`; `None`: no limit) is refused, with this message. The
/// sink's writers and the coordinator refuse such a batch before writing any of it; the
/// ingest sets such a record aside as a bad record.
pub(crate) fn check_partition_path(bucket: &BucketId, max: Option<usize>) -> Result<(), String> {
    match max {
        Some(max) if bucket.as_str().len() > max => {
            Err(partition_path_too_long(bucket.as_str(), max))
        }
        _ => Ok(()),
    }
}

/// The refusal of [`check_partition_path`].
fn partition_path_too_long(path: &str, max: usize) -> String {
    format!(
        "partition path `{}` is longer than the {max} bytes this lake's store takes (its \
         limit on a path, less the lake's base and a part file's name)",
        truncate_for_message(path)
    )
}

/// At most 64 bytes of `s` (cut at a character boundary) for an error message.
pub(crate) fn truncate_for_message(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
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
