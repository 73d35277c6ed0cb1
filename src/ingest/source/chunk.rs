//! What the reading and decoding stages hand on: a [`RawChunk`] of framed records with the
//! position after them, the [`Chunk`] of Arrow records decoded from it, and the
//! [`BadRecord`]s that did not decode.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use serde::Serialize;

use super::position::{Cursor, Prefix};
use crate::bucket::BucketId;

/// A record that could not be decoded, as written to `--bad-records`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadRecord {
    /// `file:line`.
    pub source: String,
    /// The record's text (lossy UTF-8, without its line end).
    pub line: String,
    /// Why it was rejected.
    pub error: String,
}

/// Whole records framed by [`InputSource::next_raw`](super::InputSource::next_raw), not decoded yet, and the position right
/// after them: the unit decoders work on in parallel.
#[derive(Debug)]
pub struct RawChunk {
    /// The input's name, for errors and bad records.
    pub(super) display: Arc<str>,
    /// The records, each ending with `\n`.
    pub(super) buf: Vec<u8>,
    /// (first line, start, end) of each record in `buf`.
    pub(super) spans: Vec<(u64, usize, usize)>,
    /// The next unread record after this chunk.
    pub(super) cursor: Cursor,
    /// As [`Chunk::read`].
    pub(super) read: Vec<(usize, Prefix)>,
    /// Records too long to read, set aside by a run that sets bad records aside: after the
    /// records of `spans`, in the input.
    pub(super) too_long: Vec<BadRecord>,
    /// As [`Chunk::position`].
    pub(super) position: Option<serde_json::Value>,
    /// As [`Chunk::parts`].
    pub(super) parts: Option<PartsChange>,
}

impl RawChunk {
    /// How many records it holds (good and bad).
    pub fn records(&self) -> usize {
        self.spans.len()
    }

    /// How many bytes its records take.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }
}

/// Decoded records and the position right after them.
#[derive(Debug)]
#[non_exhaustive]
pub struct Chunk {
    /// The good records; `None` if there were none, or if they are in [`Chunk::buckets`].
    pub batch: Option<RecordBatch>,
    /// The good records split by the bucket assigner the source was given
    /// ([`InputSource::with_assigner`](super::InputSource::with_assigner)): each bucket's records in input order. Empty without an
    /// assigner (and if the assigner refused the batch, which then stays whole in `batch`).
    pub buckets: Vec<(BucketId, RecordBatch)>,
    /// Records set aside (only when bad records are collected).
    pub bad: Vec<BadRecord>,
    /// The next unread record after this chunk.
    pub cursor: Cursor,
    /// What is read of each input whose [`Prefix`] moved since the previous chunk (this
    /// chunk's input, and inputs passed over without records).
    pub read: Vec<(usize, Prefix)>,
    /// The position a [`Source`](super::Source) gave with these records (`None` for inputs).
    pub position: Option<serde_json::Value>,
    /// The parts the source reads changed after these records (a chunk of none).
    pub(crate) parts: Option<PartsChange>,
}

/// A change of the parts a [`Source`](super::Source) reads ([`Next::Assigned`](super::Next::Assigned),
/// [`Next::Revoked`](super::Next::Revoked)), handed down the pipeline in order with the
/// records, so that the writing loop sees it after every record read before it.
#[derive(Debug)]
pub(crate) enum PartsChange {
    /// Parts to take in the ledger; the offsets to read them from go back through `reply`
    /// (the reader waits for them).
    Assigned {
        parts: Vec<String>,
        reply: std::sync::mpsc::SyncSender<BTreeMap<String, u64>>,
    },
    /// Parts given up: no record of them comes after this.
    Revoked(Vec<String>),
    /// Records passed over, reported as possible loss.
    Skipped(super::Skipped),
}

impl Chunk {
    /// How many good records the chunk holds, whole or in buckets.
    pub fn records(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::num_rows)
            + self
                .buckets
                .iter()
                .map(|(_, b)| b.num_rows())
                .sum::<usize>()
    }
}
