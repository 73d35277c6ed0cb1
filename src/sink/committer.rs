//! Phase two: making pending files visible.

use std::sync::Arc;

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
    pub async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>> {
        if committables.is_empty() {
            return Vec::new();
        }
        self.storage.commit(committables).await
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
