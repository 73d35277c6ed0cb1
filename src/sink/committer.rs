//! Phase two: making pending files visible.

use std::sync::Arc;
use std::time::Instant;

use crate::protocol::{CommitOutcome, Committable};
use crate::storage::Storage;
use crate::Result;

/// Counts of a [`Committer::commit_all`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitSummary {
    /// Files made visible by this call.
    pub committed: usize,
    /// Files that were already visible.
    pub already_committed: usize,
}

/// Commits pending files (Flink's `Committer`). Stateless and idempotent: safe to call any
/// number of times with the same committables, from any process.
#[derive(Debug, Clone)]
pub struct Committer {
    storage: Arc<dyn Storage>,
}

impl Committer {
    pub(crate) fn new(storage: Arc<dyn Storage>) -> Self {
        Committer { storage }
    }

    /// Commits every committable and returns one result per committable, in order. An error
    /// says through [`crate::Error::is_retryable`] whether calling again can help; the other
    /// committables are committed regardless.
    ///
    /// Call it only with committables of a *complete* checkpoint.
    #[tracing::instrument(
        name = "commit",
        skip_all,
        fields(
            writer = committables.first().map_or("", |c| c.writer_id.as_str()),
            checkpoint = committables.first().map(|c| c.checkpoint_id),
            files = committables.len(),
            committed = tracing::field::Empty,
            bytes = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        )
    )]
    pub async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>> {
        if committables.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let results = self.storage.commit(committables).await;
        let elapsed = started.elapsed();
        let (mut files, mut bytes, mut records) = (0u64, 0u64, 0u64);
        for (c, result) in committables.iter().zip(&results) {
            match result {
                Ok(CommitOutcome::Committed) => {
                    files += 1;
                    bytes += c.size_bytes;
                    records += c.record_count;
                    tracing::debug!(file = %c.final_path, bytes = c.size_bytes, "committed");
                }
                Ok(CommitOutcome::AlreadyCommitted) => {
                    tracing::debug!(file = %c.final_path, bytes = c.size_bytes, "already committed");
                }
                Err(e) => {
                    tracing::info!(file = %c.final_path, error = %e, "commit failed");
                }
            }
        }
        let span = tracing::Span::current();
        span.record("committed", files);
        span.record("bytes", bytes);
        span.record("duration_ms", elapsed.as_millis() as u64);
        tracing::debug!(committed = files, bytes, "commit done");
        metrics::counter!(crate::protocol::metric::FILES_COMMITTED).increment(files);
        metrics::counter!(crate::protocol::metric::BYTES_COMMITTED).increment(bytes);
        metrics::counter!(crate::protocol::metric::RECORDS_COMMITTED).increment(records);
        metrics::histogram!(crate::protocol::metric::COMMIT_DURATION).record(elapsed.as_secs_f64());
        results
    }

    /// Like [`Committer::commit`], but returns the first error after trying every committable.
    pub async fn commit_all(&self, committables: &[Committable]) -> Result<CommitSummary> {
        let mut summary = CommitSummary::default();
        let mut first_error = None;
        for result in self.commit(committables).await {
            match result {
                Ok(CommitOutcome::Committed) => summary.committed += 1,
                Ok(CommitOutcome::AlreadyCommitted) => summary.already_committed += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(summary),
        }
    }
}
