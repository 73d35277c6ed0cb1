//! The three crash cases of the two-phase-commit argument
//! (`shared/reference/exactly-once-two-phase-commit-sink.md`, "Walking the failure cases"),
//! each on every format: the job crashes at the named point, restarts from its latest complete
//! checkpoint, replays the source from the checkpointed position, and the visible output holds
//! every record exactly once, read back through the real readers.

mod common;

use common::*;
use filesink::bucket::HivePartitioner;
use filesink::{CommitOutcome, FileFormat, RollingPolicy, Sink};

const BATCHES: usize = 12;
const BATCH_LEN: i64 = 50;
const N: i64 = BATCHES as i64 * BATCH_LEN;

fn sink(dir: &std::path::Path, format: FileFormat) -> Sink {
    Sink::local(dir)
        .unwrap()
        .format(format)
        .bucket_assigner(
            HivePartitioner::new(["day"])
                .unwrap()
                .keep_partition_columns(true),
        )
        .rolling_policy(RollingPolicy::default())
        .build()
        .unwrap()
}

async fn started_job(dir: &std::path::Path, format: FileFormat) -> Job {
    let mut job = Job::new(sink(dir, format), BATCHES, BATCH_LEN);
    let restored = job.start().await;
    job.writer = Some(restored.writer);
    // Checkpoint 1 completes and commits normally.
    job.write(3).await;
    job.checkpoint(true, true).await;
    job
}

fn assert_clean(dir: &std::path::Path) {
    let hidden = hidden_files(dir);
    assert!(
        hidden.is_empty(),
        "leftovers after the final commit: {hidden:?}"
    );
}

#[tokio::test]
async fn crash_before_precommit_replays_from_the_last_checkpoint() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = started_job(dir.path(), format.clone()).await;
        job.write(4).await; // written, never voted on
        job.crash();
        // Nothing of the crashed attempt is visible.
        assert_visible_at_most_once_below(dir.path(), &format, 3 * BATCH_LEN);
        job.restart_and_finish(2).await;
        assert_exactly_once(dir.path(), &format, N);
        assert_clean(dir.path());
    }
}

#[tokio::test]
async fn crash_between_precommit_and_commit_when_the_checkpoint_completed() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = started_job(dir.path(), format.clone()).await;
        job.write(4).await;
        let cp = job.checkpoint(true, false).await; // stored, not committed
        assert!(!cp.committables.is_empty() || format.is_resumable());
        job.crash();
        let restored = job.start().await;
        assert_eq!(restored.commit_outcomes.len(), cp.committables.len());
        assert!(restored
            .commit_outcomes
            .iter()
            .all(|o| *o == CommitOutcome::Committed));
        job.writer = Some(restored.writer);
        while job.position < job.total_batches {
            job.write(3).await;
            job.checkpoint(true, true).await;
        }
        job.finish().await;
        assert_exactly_once(dir.path(), &format, N);
        assert_clean(dir.path());
    }
}

#[tokio::test]
async fn crash_between_precommit_and_commit_when_the_checkpoint_did_not_complete() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = started_job(dir.path(), format.clone()).await;
        job.write(4).await;
        let cp = job.checkpoint(false, false).await; // voted, never stored
        job.crash();
        // Its pending files exist, hidden.
        if !cp.committables.is_empty() {
            assert!(!hidden_files(dir.path()).is_empty());
        }
        let restored = job.start().await;
        for c in &cp.committables {
            let filesink::PendingHandle::LocalFile { in_progress_path } = &c.pending else {
                unreachable!()
            };
            assert!(
                restored.removed_leftovers.contains(in_progress_path),
                "pending file of the incomplete checkpoint was not aborted: {in_progress_path}"
            );
        }
        job.writer = Some(restored.writer);
        while job.position < job.total_batches {
            job.write(3).await;
            job.checkpoint(true, true).await;
        }
        job.finish().await;
        assert_exactly_once(dir.path(), &format, N);
        assert_clean(dir.path());
    }
}

#[tokio::test]
async fn crash_after_commit_restores_without_rewriting() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = started_job(dir.path(), format.clone()).await;
        job.write(4).await;
        let cp = job.checkpoint(true, true).await;
        job.crash();
        let restored = job.start().await;
        assert_eq!(restored.commit_outcomes.len(), cp.committables.len());
        assert!(restored
            .commit_outcomes
            .iter()
            .all(|o| *o == CommitOutcome::AlreadyCommitted));
        job.writer = Some(restored.writer);
        while job.position < job.total_batches {
            job.write(5).await;
            job.checkpoint(true, true).await;
        }
        job.finish().await;
        assert_exactly_once(dir.path(), &format, N);
        assert_clean(dir.path());
    }
}

#[tokio::test]
async fn repeated_crashes_at_every_step_still_give_exactly_once() {
    // Crash after every possible step of a few checkpoints, in turn.
    for format in formats() {
        for crash_at in 0..4 {
            let dir = tempfile::tempdir().unwrap();
            let mut job = started_job(dir.path(), format.clone()).await;
            for round in 0..3 {
                job.write(2).await;
                if crash_at == 0 {
                    job.crash();
                } else {
                    job.checkpoint(crash_at >= 2, crash_at >= 3).await;
                    job.crash();
                }
                let restored = job.start().await;
                job.writer = Some(restored.writer);
                let _ = round;
            }
            job.crash();
            job.restart_and_finish(3).await;
            assert_exactly_once(dir.path(), &format, N);
            assert_clean(dir.path());
        }
    }
}

/// Only ids below `limit` are visible, none twice (row formats may keep the first
/// checkpoint's records in a file that is still open, so some may not be visible yet).
fn assert_visible_at_most_once_below(dir: &std::path::Path, format: &FileFormat, limit: i64) {
    for (id, count) in visible_id_counts(dir, format) {
        assert!(id < limit, "id {id} is visible but was never checkpointed");
        assert_eq!(count, 1, "id {id} is visible {count} times");
    }
}
