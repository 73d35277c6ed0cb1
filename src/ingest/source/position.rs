//! Positions: the [`Cursor`] of the next unread record, the [`Prefix`] of each input a job
//! read (bytes and CRC-32C), and the [`SourcePosition`] every manifest stores.

use std::collections::BTreeMap;

use arrow::datatypes::Schema;
use serde::{Deserialize, Serialize};

use super::input::InputFormat;
use crate::error::{Error, Result};

/// Where the source stands: the next unread record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Index of the input being read (equal to the number of inputs once all are read).
    pub input: usize,
    /// Byte offset of the next unread record in that input (0: not started; for CSV the
    /// header comes next).
    pub offset: u64,
    /// Line number (1-based) of that record.
    pub line: u64,
}

impl Cursor {
    /// The start of the first input.
    pub const START: Cursor = Cursor {
        input: 0,
        offset: 0,
        line: 1,
    };
}

/// What a job has read of one input: every byte before `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefix {
    /// Bytes read: the offset of the next unread record.
    pub offset: u64,
    /// Line number (1-based) of the next unread record.
    pub line: u64,
    /// CRC-32C of the bytes before `offset`. `None` only for a position written by a build
    /// that did not record it: those bytes are then read again to compute it, unchecked.
    pub crc32c: Option<u32>,
}

impl Prefix {
    /// Nothing read yet.
    pub const START: Prefix = Prefix {
        offset: 0,
        line: 1,
        crc32c: Some(0),
    };
}

/// The source position stored in every checkpoint of an `ingest` job (the opaque JSON of
/// [`crate::Coordinator::checkpoint`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourcePosition {
    /// Version of this layout.
    pub version: u32,
    /// The job's inputs, canonical absolute paths (or `-`).
    pub inputs: Vec<String>,
    /// Their format.
    pub input_format: InputFormat,
    /// The partition columns the job writes with.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// The time directories the job writes with (absent in a position of a job without them,
    /// and in every position before version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_by_time: Option<TimePartitionBy>,
    /// The next unread record.
    #[serde(flatten)]
    pub cursor: Cursor,
    /// Per input, what the job has read of it (empty in a version 1 position, which recorded
    /// only the cursor).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<Prefix>,
    /// Records written up to this checkpoint.
    pub records: u64,
    /// Bad records set aside up to this checkpoint.
    #[serde(default)]
    pub bad_records: u64,
    /// Where in the `--bad-records` file a run resumed from this checkpoint looks for lines
    /// its job wrote after the checkpoint (finding them by their tags, place and text, it does
    /// not write them again): the file's length at this checkpoint, or less while a killed
    /// run's lines are still ahead (see `ingest::bad_records`). The file is never cut back
    /// (other jobs may append to it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_records_len: Option<u64>,
    /// The absolute path of that `--bad-records` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_records_file: Option<String>,
    /// CRC-32C of the (up to 4 KiB) bytes of that file before `bad_records_len`: a file
    /// truncated or replaced since, and grown past that length again, is told apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_records_tail: Option<u32>,
    /// The schema every record is decoded with.
    pub schema: Schema,
    /// The position of a [`Source`](super::Source) (version 4): what it gave with the last
    /// records before this checkpoint, which a resumed job seeks it to. Its `inputs` is then
    /// the source's name alone, and `read` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

/// The time partitioning of a job ([`super::Ingest::partition_by_time`](crate::ingest::Ingest::partition_by_time)), as its identity
/// records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimePartitionBy {
    /// The time column.
    pub column: String,
    /// The pattern of the time directories (`dt=%Y-%m-%d/hour=%H`).
    pub pattern: String,
    /// The time zone ([`crate::bucket::time_zone_name`]: `UTC`, `+HH:MM`).
    pub time_zone: String,
}

impl std::fmt::Display for TimePartitionBy {
    /// As the command line gives it: `--partition-by-time ts=… --time-zone …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--partition-by-time {}={} --time-zone {}",
            self.column, self.pattern, self.time_zone
        )
    }
}

impl SourcePosition {
    /// Current version of the layout. Version 2 added [`SourcePosition::read`], version 3
    /// [`SourcePosition::partition_by_time`], version 4 [`SourcePosition::source`]. A position
    /// is written with the lowest version that holds it ([`SourcePosition::version_for`]), so
    /// that an older build resumes what it can, and refuses the rest instead of writing
    /// another layout.
    pub const VERSION: u32 = 4;

    /// The version of a position of a [`Source`](super::Source).
    pub const VERSION_SOURCE: u32 = 4;

    /// The version a new position of inputs with this time partitioning is written as.
    pub fn version_for(partition_by_time: Option<&TimePartitionBy>) -> u32 {
        match partition_by_time {
            Some(_) => 3,
            None => 2,
        }
    }

    /// As JSON for a checkpoint.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("source positions serialize")
    }

    /// Reads a checkpoint's source position.
    pub fn from_json(job: &str, v: &serde_json::Value) -> Result<SourcePosition> {
        let what = || format!("source position of job `{job}`");
        let p: SourcePosition = serde_json::from_value(v.clone()).map_err(|e| {
            Error::corrupt(
                what(),
                format!("it is not one the ingestion engine wrote ({e})"),
            )
        })?;
        if p.version == 0 || p.version > Self::VERSION {
            return Err(Error::UnsupportedVersion {
                what: what(),
                found: p.version,
                supported: Self::VERSION,
            });
        }
        Ok(p)
    }
}

/// The position of a [`Source`](super::Source) with parts
/// ([`Source::parts`](super::Source::parts)): per part, the next offset to read, and what
/// the source keeps to tell the part it read from another of the same name. As JSON:
/// `{"parts": {"kafka://c1/orders/0": 1200, ...}, "identities": {...}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartOffsets {
    /// Per part, the next offset to read.
    pub parts: BTreeMap<String, u64>,
    /// Per part, the source's own identity of it (the Kafka source: the last record it
    /// read), kept as the source gave it and handed back with the offsets. Empty in a
    /// position of a build that recorded none; [`PartOffsets::at_least`] leaves it as it is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub identities: BTreeMap<String, serde_json::Value>,
}

impl PartOffsets {
    /// As JSON, for [`Next::Records`](super::Next::Records).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("part offsets serialize")
    }

    /// Reads the part offsets of a source's position; `None` if it is not of this form.
    pub fn from_json(v: &serde_json::Value) -> Option<PartOffsets> {
        serde_json::from_value(v.clone()).ok()
    }

    /// Moves each part on to `bases`' offset where that is later.
    pub fn at_least(&mut self, bases: &BTreeMap<String, u64>) {
        for (part, base) in bases {
            let at = self.parts.entry(part.clone()).or_insert(*base);
            *at = (*at).max(*base);
        }
    }
}

impl SourcePosition {
    /// What this position says was read of `identity`, a ledgered input or a part of a
    /// source: an input's prefix (if it has a CRC-32C), or a part's next offset as the
    /// prefix's `offset` (its `crc32c` `None`: a part's records are not checked by bytes).
    pub fn read_of(&self, identity: &str) -> Option<Prefix> {
        if let Some(i) = self.inputs.iter().position(|c| c == identity) {
            return self.read.get(i).copied().filter(|r| r.crc32c.is_some());
        }
        let parts = PartOffsets::from_json(self.source.as_ref()?)?;
        let offset = *parts.parts.get(identity)?;
        Some(Prefix {
            offset,
            line: 1,
            crc32c: None,
        })
    }
}
