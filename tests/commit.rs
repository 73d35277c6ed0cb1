//! Commit is idempotent, resumable and never overwrites: the committer's contract on local disk.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;

use common::*;
use filesink::bucket::HivePartitioner;
use filesink::{CommitOutcome, Committable, Error, FileFormat, PendingHandle, RollingPolicy, Sink};

async fn pending_files(dir: &std::path::Path, format: FileFormat) -> (Sink, Vec<Committable>) {
    let sink = Sink::local(dir)
        .unwrap()
        .format(format)
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::on_checkpoint())
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 500)).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    assert_eq!(committables.len(), 5, "one file per day");
    (sink, committables)
}

fn in_progress(c: &Committable) -> &str {
    match &c.pending {
        PendingHandle::LocalFile { in_progress_path } => in_progress_path,
        other => panic!("{other:?}"),
    }
}

/// (path, size, inode, mtime) of every visible file: proof that nothing changed.
fn fingerprint(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64, u64, i64, Vec<u8>)> {
    visible_files(dir)
        .into_iter()
        .map(|p| {
            let m = fs::metadata(&p).unwrap();
            let bytes = fs::read(&p).unwrap();
            (p, m.len(), m.ino(), m.mtime_nsec(), bytes)
        })
        .collect()
}

#[tokio::test]
async fn pending_files_are_hidden_until_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (_sink, committables) = pending_files(dir.path(), FileFormat::parquet()).await;
    assert!(visible_files(dir.path()).is_empty());
    assert_eq!(hidden_files(dir.path()).len(), committables.len());
    for c in &committables {
        let name = in_progress(c).rsplit('/').next().unwrap();
        assert!(name.starts_with('.'), "{name} is not hidden");
        assert!(
            !name.ends_with(".parquet"),
            "{name} matches *.parquet globs"
        );
    }
}

#[tokio::test]
async fn commit_twice_and_from_a_fresh_committer_reports_already_committed() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, committables) = pending_files(dir.path(), FileFormat::parquet()).await;
    let first = sink.committer().commit(&committables).await;
    assert!(first
        .iter()
        .all(|r| matches!(r, Ok(CommitOutcome::Committed))));
    let before = fingerprint(dir.path());
    assert_eq!(before.len(), committables.len());

    let second = sink.committer().commit(&committables).await;
    assert!(
        second
            .iter()
            .all(|r| matches!(r, Ok(CommitOutcome::AlreadyCommitted))),
        "{second:?}"
    );

    // A fresh process: a new sink on the same directory, committables through JSON.
    let reloaded: Vec<Committable> = committables
        .iter()
        .map(|c| Committable::from_json(&c.to_json()).unwrap())
        .collect();
    let fresh = Sink::local(dir.path()).unwrap().build().unwrap();
    let third = fresh.committer().commit_all(&reloaded).await.unwrap();
    assert_eq!(third.already_committed, committables.len());
    assert_eq!(third.committed, 0);

    assert_eq!(
        fingerprint(dir.path()),
        before,
        "an idempotent commit changed files"
    );
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 500);
    assert!(hidden_files(dir.path()).is_empty());
}

#[tokio::test]
async fn crash_between_two_renames_of_one_commit_call_is_finished_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, committables) = pending_files(dir.path(), FileFormat::json_lines()).await;
    // The first call got through two renames and died.
    sink.committer()
        .commit_all(&committables[..2])
        .await
        .unwrap();
    let outcomes: Vec<CommitOutcome> = sink
        .committer()
        .commit(&committables)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        outcomes,
        [
            CommitOutcome::AlreadyCommitted,
            CommitOutcome::AlreadyCommitted,
            CommitOutcome::Committed,
            CommitOutcome::Committed,
            CommitOutcome::Committed
        ]
    );
    assert_exactly_once(dir.path(), &FileFormat::json_lines(), 500);
}

#[tokio::test]
async fn crash_between_link_and_unlink_is_finished_by_the_next_call() {
    // Where renameat2 is missing, commit is link + unlink; a crash between them leaves both
    // names on one inode.
    let dir = tempfile::tempdir().unwrap();
    let (sink, committables) = pending_files(dir.path(), FileFormat::parquet()).await;
    let c = &committables[0];
    fs::hard_link(
        dir.path().join(in_progress(c)),
        dir.path().join(&c.final_path),
    )
    .unwrap();
    let outcomes = sink.committer().commit(&committables).await;
    assert!(
        matches!(outcomes[0], Ok(CommitOutcome::AlreadyCommitted)),
        "{outcomes:?}"
    );
    assert!(outcomes[1..]
        .iter()
        .all(|r| matches!(r, Ok(CommitOutcome::Committed))));
    assert!(hidden_files(dir.path()).is_empty());
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 500);
}

#[tokio::test]
async fn a_final_file_with_other_content_is_a_conflict_and_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, committables) = pending_files(dir.path(), FileFormat::parquet()).await;
    let c = &committables[0];
    let theirs = dir.path().join(&c.final_path);
    fs::write(&theirs, b"somebody else's data").unwrap();
    let outcomes = sink.committer().commit(&committables).await;
    match &outcomes[0] {
        Err(Error::Conflict { path, .. }) => assert_eq!(path, &theirs),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(!outcomes[0].as_ref().unwrap_err().is_retryable());
    // The others still committed; the conflicting file is untouched; our pending file is kept.
    assert!(outcomes[1..]
        .iter()
        .all(|r| matches!(r, Ok(CommitOutcome::Committed))));
    assert_eq!(fs::read(&theirs).unwrap(), b"somebody else's data");
    assert!(dir.path().join(in_progress(c)).exists());

    // Same size, other bytes: still a conflict, proven by the checksum.
    fs::remove_file(&theirs).unwrap();
    let mut forged = fs::read(dir.path().join(in_progress(c))).unwrap();
    let mid = forged.len() / 2;
    forged[mid] ^= 0xff;
    fs::write(&theirs, &forged).unwrap();
    let outcome = sink.committer().commit(&committables[..1]).await;
    assert!(
        matches!(outcome[0], Err(Error::Conflict { .. })),
        "{outcome:?}"
    );
    assert_eq!(fs::read(&theirs).unwrap(), forged);
}

#[tokio::test]
async fn pending_and_final_both_gone_is_data_lost_not_success() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, committables) = pending_files(dir.path(), FileFormat::csv()).await;
    fs::remove_file(dir.path().join(in_progress(&committables[2]))).unwrap();
    let outcomes = sink.committer().commit(&committables).await;
    assert!(
        matches!(outcomes[2], Err(Error::DataLost { .. })),
        "{outcomes:?}"
    );
    assert!(!outcomes[2].as_ref().unwrap_err().is_retryable());
    for (i, r) in outcomes.iter().enumerate() {
        if i != 2 {
            assert!(matches!(r, Ok(CommitOutcome::Committed)));
        }
    }
}

#[tokio::test]
async fn committables_that_point_outside_the_base_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, committables) = pending_files(dir.path(), FileFormat::parquet()).await;
    let victim = dir.path().parent().unwrap().join("victim.parquet");
    let mut hostile = committables[0].clone();
    hostile.final_path = "../victim.parquet".into();
    let mut hidden_target = committables[1].clone();
    hidden_target.pending = PendingHandle::LocalFile {
        in_progress_path: "day=2026-11-25/not-ours.txt".into(),
    };
    let outcomes = sink.committer().commit(&[hostile, hidden_target]).await;
    assert!(
        outcomes
            .iter()
            .all(|r| matches!(r, Err(Error::Corrupt { .. }))),
        "{outcomes:?}"
    );
    assert!(!victim.exists());
    assert!(visible_files(dir.path()).is_empty());
}
