//! Compaction of an ingest's Delta table in the background ([`Ingest::compact_in_background`]):
//! while the ingest appends one log version per checkpoint, rounds of
//! [`maintain::compact()`](crate::maintain::compact()) run beside it in the same process, one
//! every interval, and one more after the last checkpoint of a finished run, so a table that
//! is fresh at every checkpoint is also compact at the end.
//!
//! A round is a job of its own (default `<job>_compact`), with its own manifests and restore:
//! its crash points are those of a `filesink compact` round (see [`crate::maintain`]), and its
//! entries and the ingest's never conflict (appends only add files, a round only removes files
//! that are still live when it commits). So a round that fails does not fail the ingest: it is
//! logged and counted ([`CompactionSummary::failed`]), and the next round (or a later
//! `filesink compact` of the same job name) finishes or abandons what it left. A round skipped
//! because another compactor of the same job name runs is counted too
//! ([`CompactionSummary::busy`]).
//!
//! On a store without conditional puts, in single-writer mode, the rounds share the ingest's
//! table claim (one claim per table in a process) and take turns with it to read the log and
//! put an entry, so neither replaces the other's entry.
//!
//! [`Ingest::compact_in_background`]: super::Ingest::compact_in_background

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::maintain::{compact, CompactOptions};
use crate::protocol::paths::JOB_NAME_MAX_BYTES;
use crate::storage::Storage;
use crate::Error;

/// What the compaction rounds beside an ingest did ([`super::IngestSummary::compaction`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionSummary {
    /// The compaction job's name.
    pub job: String,
    /// Rounds that swapped files in the table: one log version each.
    pub rounds: u64,
    /// Rounds abandoned because another writer removed one of their inputs meanwhile.
    pub abandoned: u64,
    /// Rounds skipped because another compactor of the same job name was running.
    pub busy: u64,
    /// Rounds that failed. The next round of the job finishes or abandons what such a round
    /// left; the records are in the table either way.
    pub failed: u64,
    /// Files the rounds removed from the table (merged into others).
    pub files_removed: u64,
    /// Files they added.
    pub files_added: u64,
    /// Bytes in the files they added.
    pub bytes_added: u64,
    /// The error of the last failed round.
    pub last_error: Option<String>,
}

impl CompactionSummary {
    /// Counts the outcome of one round.
    fn count(&mut self, result: crate::Result<crate::maintain::CompactReport>) {
        let job = self.job.as_str();
        match result {
            Ok(report) => {
                if report.abandoned {
                    self.abandoned += 1;
                } else if let Some(version) = report.version {
                    self.rounds += 1;
                    let removed: usize = report.bins.iter().map(|b| b.inputs.len()).sum();
                    self.files_removed += removed as u64;
                    self.files_added += report.output_files as u64;
                    self.bytes_added += report.output_bytes;
                    tracing::info!(
                        job,
                        version,
                        files_removed = removed,
                        files_added = report.output_files,
                        bytes_added = report.output_bytes,
                        "compaction round done"
                    );
                }
            }
            Err(Error::JobBusy { .. }) => {
                self.busy += 1;
                tracing::info!(job, "compaction round skipped: another compactor runs");
            }
            Err(e) => {
                self.failed += 1;
                tracing::warn!(job, error = %e, "compaction round failed; the next one goes on");
                self.last_error = Some(e.to_string());
            }
        }
    }
}

/// The compaction job name of ingest job `job`: `<job>_compact`, or for a name too long for
/// that, its first 31 bytes, a hash of the whole name, and `_compact`.
pub(crate) fn compaction_job(job: &str) -> String {
    let name = format!("{job}_compact");
    if name.len() <= JOB_NAME_MAX_BYTES {
        return name;
    }
    let hash = crc32c::crc32c(job.as_bytes());
    // Job names are ASCII: any byte index is a char boundary.
    format!("{}_{hash:08x}_compact", &job[..31])
}

/// Rounds running beside an ingest, one every interval, until [`Background::finish`].
#[derive(Debug)]
pub(crate) struct Background {
    stop: watch::Sender<bool>,
    task: JoinHandle<CompactionSummary>,
    storage: Arc<dyn Storage>,
    options: CompactOptions,
    job: String,
}

impl Background {
    /// Starts the rounds on `storage`'s table: the first `every` from now.
    pub(crate) fn start(
        storage: Arc<dyn Storage>,
        options: CompactOptions,
        every: Duration,
    ) -> Self {
        let job = options.job_name().unwrap_or("compact").to_owned();
        let (stop, mut stopped) = watch::channel(false);
        let task = {
            let storage = storage.clone();
            let options = options.clone();
            let job = job.clone();
            tokio::spawn(
                async move {
                    let mut summary = CompactionSummary {
                        job: job.clone(),
                        ..CompactionSummary::default()
                    };
                    loop {
                        tokio::select! {
                            _ = stopped.changed() => break,
                            () = tokio::time::sleep(every) => {}
                        }
                        // A round runs to its end once begun: `finish` waits for it.
                        summary.count(compact(storage.clone(), &options).await);
                    }
                    summary
                }
                .instrument(tracing::info_span!("compaction")),
            )
        };
        Background {
            stop,
            task,
            storage,
            options,
            job,
        }
    }

    /// Stops the rounds: waits for the round under way, then runs one last round if `last`
    /// (a finished run: what its last checkpoints added is compacted too).
    pub(crate) async fn finish(self, last: bool) -> CompactionSummary {
        let _ = self.stop.send(true);
        let mut summary = match self.task.await {
            Ok(summary) => summary,
            Err(e) => CompactionSummary {
                job: self.job.clone(),
                failed: 1,
                last_error: Some(format!("the compaction task ended abnormally: {e}")),
                ..CompactionSummary::default()
            },
        };
        if last {
            let result = compact(self.storage.clone(), &self.options)
                .instrument(tracing::info_span!("compaction"))
                .await;
            summary.count(result);
        }
        summary
    }

    /// Runs one round on `storage`'s table now (a finished job's rerun: it finishes a round
    /// that a crash left, or merges what is small).
    pub(crate) async fn once(
        storage: Arc<dyn Storage>,
        options: &CompactOptions,
    ) -> CompactionSummary {
        let mut summary = CompactionSummary {
            job: options.job_name().unwrap_or("compact").to_owned(),
            ..CompactionSummary::default()
        };
        let result = compact(storage, options)
            .instrument(tracing::info_span!("compaction"))
            .await;
        summary.count(result);
        summary
    }

    /// Stops the rounds at once, as a crash would: a round under way is dropped, and the next
    /// run of the compaction job finishes or abandons it.
    pub(crate) fn abort(self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::paths::validate_job_name;

    #[test]
    fn the_compaction_job_of_a_long_job_name_is_a_valid_distinct_name() {
        assert_eq!(compaction_job("orders"), "orders_compact");
        let a = "a".repeat(JOB_NAME_MAX_BYTES);
        let b = format!("{}b", "a".repeat(JOB_NAME_MAX_BYTES - 1));
        for job in [&a, &b, &"x".repeat(40), &"x".repeat(41)] {
            let c = compaction_job(job);
            validate_job_name(&c).unwrap_or_else(|e| panic!("{job}: {e}"));
            assert!(c.ends_with("_compact"), "{c}");
        }
        assert_ne!(compaction_job(&a), compaction_job(&b));
    }
}
