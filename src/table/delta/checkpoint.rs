//! Placeholder until the Parquet checkpoint reader lands (design section 8): the names the
//! log reader uses, no checkpoint support yet.

use serde::Deserialize;

use super::actions::Entry;
use crate::{Error, Result};

/// `_delta_log/_last_checkpoint`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct LastCheckpoint {
    pub(crate) version: i64,
    pub(crate) parts: Option<i64>,
}

impl LastCheckpoint {
    pub(crate) fn new(version: i64, parts: Option<i64>) -> Self {
        LastCheckpoint { version, parts }
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt("_delta_log/_last_checkpoint", e.to_string()))
    }
}

/// A file of the log directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFile {
    Commit(i64),
    Checkpoint {
        version: i64,
        part: Option<(i32, i32)>,
    },
}

pub(crate) fn parse_log_file_name(name: &str) -> Option<LogFile> {
    let (digits, rest) = name.split_at_checked(20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let version = digits.parse().ok()?;
    match rest {
        ".json" => Some(LogFile::Commit(version)),
        ".checkpoint.parquet" => Some(LogFile::Checkpoint {
            version,
            part: None,
        }),
        _ => None,
    }
}

pub(crate) fn checkpoint_file_names(version: i64, parts: Option<i64>) -> Vec<String> {
    match parts {
        None => vec![format!("{version:020}.checkpoint.parquet")],
        Some(n) => (1..=n)
            .map(|i| format!("{version:020}.checkpoint.{i:010}.{n:010}.parquet"))
            .collect(),
    }
}

pub(crate) fn read_checkpoint(_parts: &[bytes::Bytes], what: &str) -> Result<Entry> {
    Err(Error::NotSupported(format!(
        "reading the Delta log checkpoint `{what}` is not implemented yet"
    )))
}
