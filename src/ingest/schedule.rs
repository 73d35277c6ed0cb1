//! The checkpoint schedule: the one place that knows [`CheckpointEvery`]. It says when a
//! checkpoint is due, how long the writing loop may wait for the next chunk before one is,
//! and what a schedule implies upstream: how long a stream's inference and its chunks wait
//! for records, and where a chunk must end for a checkpoint by record count to fall between
//! two records.

use std::time::{Duration, Instant};

use super::source::{self, Cursor};
use super::CheckpointEvery;
use crate::error::{Error, Result};

/// Longest a chunk of standard input waits for more records after its first (shorter with a
/// shorter checkpoint interval).
const STDIN_LINGER_MAX: Duration = Duration::from_millis(100);

/// A valid [`CheckpointEvery`], and what it implies before the writing starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule(CheckpointEvery);

impl Schedule {
    /// `every`, checked: a count of at least one record.
    pub(super) fn new(every: CheckpointEvery) -> Result<Schedule> {
        if let CheckpointEvery::Rows(0) = every {
            return Err(Error::Config(
                "the checkpoint interval must be at least 1 row".into(),
            ));
        }
        Ok(Schedule(every))
    }

    /// When standard input's inference stops waiting for records, if inference began at
    /// `began`: the first checkpoint's deadline (the records a stream's inference waited for
    /// are due then). A schedule by record count waits for its records.
    pub(super) fn inference_deadline(self, began: Instant) -> Option<Instant> {
        match self.0 {
            CheckpointEvery::Interval(d) => Some(began + d),
            CheckpointEvery::Rows(_) => None,
        }
    }

    /// The most records inference waits for on standard input: no more than the first
    /// checkpoint does.
    pub(super) fn inference_records(self) -> usize {
        match self.0 {
            CheckpointEvery::Interval(_) => source::INFER_NULL_RECORDS,
            CheckpointEvery::Rows(n) => usize::try_from(n).unwrap_or(usize::MAX),
        }
    }

    /// Where chunks must end: every this many records (a schedule by record count cuts
    /// chunks at exact record numbers, so a checkpoint falls between two records).
    pub(super) fn rows_every(self) -> Option<u64> {
        match self.0 {
            CheckpointEvery::Rows(n) => Some(n),
            CheckpointEvery::Interval(_) => None,
        }
    }

    /// How long a chunk of a stream waits for more records after its first.
    pub(super) fn linger(self) -> Duration {
        match self.0 {
            CheckpointEvery::Interval(d) => (d / 4).min(STDIN_LINGER_MAX),
            CheckpointEvery::Rows(_) => STDIN_LINGER_MAX,
        }
    }

    /// The writing loop's clock, the last checkpoint taken at `last_at`, at `cursor`.
    pub(super) fn clock(self, last_at: Instant, cursor: Cursor) -> Clock {
        Clock {
            every: self.0,
            last_at,
            since: 0,
            checkpointed: cursor,
        }
    }
}

/// When the next checkpoint is due, as the writing loop goes.
#[derive(Debug)]
pub(super) struct Clock {
    every: CheckpointEvery,
    /// When the last checkpoint was taken (for a new job's first: when inference began).
    last_at: Instant,
    /// Records written since the last checkpoint.
    since: u64,
    /// Where the last checkpoint stood.
    checkpointed: Cursor,
}

impl Clock {
    /// When the loop must stop waiting for the next chunk: with a time interval and records
    /// not checkpointed yet (or files held open that are not visible yet), when the interval
    /// is up, whether or not another chunk has come by then.
    pub(super) fn wake_at(&self, cursor: Cursor, held_open: bool) -> Option<Instant> {
        match self.every {
            CheckpointEvery::Interval(d) if cursor != self.checkpointed || held_open => {
                Some(self.last_at + d)
            }
            _ => None,
        }
    }

    /// Counts `records` written.
    pub(super) fn wrote(&mut self, records: u64) {
        self.since += records;
    }

    /// Whether a checkpoint is due now, the source at `cursor`: the schedule says so, and
    /// there is something to checkpoint (records, or files held open).
    pub(super) fn due(&self, cursor: Cursor, held_open: bool) -> bool {
        let due = match self.every {
            CheckpointEvery::Rows(n) => self.since >= n,
            CheckpointEvery::Interval(d) => self.last_at.elapsed() >= d,
        };
        due && (cursor != self.checkpointed || held_open)
    }

    /// A checkpoint was just taken at `cursor`.
    pub(super) fn checkpointed(&mut self, cursor: Cursor) {
        self.since = 0;
        self.last_at = Instant::now();
        self.checkpointed = cursor;
    }
}
