//! The deferral paths of a table job's log step, driven by injected transient store errors
//! (the process lives on): a log entry that cannot be written after its retries is deferred,
//! and the next checkpoint's entry carries both checkpoints' files; a put that landed but
//! whose answer was lost is found by the retry's refresh and not written twice; a file commit
//! that fails defers the entry with it; the last checkpoint's entry cannot wait, so `finish`
//! fails and the next run writes it. In every case each file is in the log once and delta-rs
//! reads each row once.

mod common;

use std::sync::Arc;

use common::backend::Backend;
use common::delta::{assert_table_exactly_once, read_log};
use common::delta_py::{reader_or_explain, table_location};
use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
use filesink::storage::Storage;
use filesink::table::delta::{DeltaOptions, TableOutcome};
use filesink::{Coordinator, FileFormat};

const PER_CHECKPOINT: i64 = 100;

async fn open(storage: Arc<dyn Storage>) -> filesink::Result<Coordinator> {
    let sink = filesink::Sink::builder_shared(storage)
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()?;
    Coordinator::builder(&sink, "orders")
        .delta_table(
            DeltaOptions::new()
                .schema(common::schema())
                .partition_by(["day"]),
        )
        .open()
        .await
}

/// Checks the log of `b` after `checkpoints` checkpoints: each file in one `add`, each
/// checkpoint's `txn` at most once, in order, the last one `checkpoints`; and delta-rs reads
/// ids `0..n` once.
async fn check(b: &Backend, checkpoints: i64, ctx: &str) {
    let n = checkpoints * PER_CHECKPOINT;
    assert_table_exactly_once(b.storage.as_ref(), n, ctx).await;
    let log = read_log(b.storage.as_ref()).await;
    assert!(
        log.live.values().all(|adds| *adds == 1),
        "{ctx}: {:?}",
        log.live
    );
    let txns: Vec<i64> = log.txn_history.iter().map(|(_, _, n)| *n).collect();
    assert!(txns.windows(2).all(|w| w[0] < w[1]), "{ctx}: {txns:?}");
    assert_eq!(txns.last(), Some(&checkpoints), "{ctx}: {txns:?}");
    if let Some(reader) = reader_or_explain() {
        assert_eq!(
            reader.ids(&table_location(b), None),
            (0..n).collect::<Vec<_>>(),
            "{ctx}: delta-rs"
        );
    }
}

/// Runs checkpoints 1..=`checkpoints` through `storage`, returning each one's log outcome.
async fn run(storage: Arc<dyn Storage>, checkpoints: i64) -> Vec<Option<TableOutcome>> {
    let mut c = open(storage).await.unwrap();
    let mut outcomes = Vec::new();
    for k in 0..checkpoints {
        c.write(&common::batch(k * PER_CHECKPOINT, PER_CHECKPOINT))
            .await
            .unwrap();
        let report = c.checkpoint(&((k + 1) * PER_CHECKPOINT)).await.unwrap();
        outcomes.push(report.table_outcome);
    }
    c.close().await.unwrap();
    outcomes
}

fn faulty(b: &Backend, point: FaultPoint, occurrence: usize, mode: FaultMode) -> FaultyStorage {
    FaultyStorage::new(
        b.storage.clone(),
        Some(FaultPlan {
            point,
            occurrence,
            mode,
        }),
    )
}

#[tokio::test]
async fn a_log_entry_the_store_keeps_refusing_rides_in_the_next_checkpoints_entry() {
    let b = Backend::local();
    // Checkpoint 2's entry (the second log put) fails four times: the loop's three retries,
    // then the coordinator defers it.
    let storage = faulty(
        &b,
        FaultPoint::PutLogEntry,
        2,
        FaultMode::Transient {
            times: 4,
            applied: false,
        },
    );
    let outcomes = run(Arc::new(storage.clone()), 4).await;
    assert!(storage.fired());
    assert_eq!(outcomes[1], Some(TableOutcome::Deferred), "{outcomes:?}");
    assert!(
        matches!(outcomes[2], Some(TableOutcome::Committed(_))),
        "{outcomes:?}"
    );
    let log = read_log(b.storage.as_ref()).await;
    let txns: Vec<i64> = log.txn_history.iter().map(|(_, _, n)| *n).collect();
    assert_eq!(
        txns,
        [1, 3, 4],
        "checkpoint 2 rides in checkpoint 3's version"
    );
    check(&b, 4, "deferred entry").await;
}

#[tokio::test]
async fn a_log_entry_whose_answer_was_lost_is_found_and_not_written_twice() {
    for times in [1, 4] {
        let b = Backend::local();
        let storage = faulty(
            &b,
            FaultPoint::PutLogEntry,
            2,
            FaultMode::Transient {
                times,
                applied: true,
            },
        );
        let outcomes = run(Arc::new(storage.clone()), 4).await;
        assert!(storage.fired());
        // The put landed; the retry's refresh reads it: already committed.
        assert_eq!(
            outcomes[1],
            Some(TableOutcome::AlreadyCommitted),
            "{outcomes:?}"
        );
        let log = read_log(b.storage.as_ref()).await;
        assert_eq!(log.versions.len(), 4, "one version per checkpoint");
        check(&b, 4, &format!("answer lost {times}x")).await;
    }
}

#[tokio::test]
async fn a_file_commit_that_fails_defers_the_entry_with_its_files() {
    let b = Backend::local();
    // Checkpoint 2's file commit fails once (its files stay pending): no entry for it; the
    // next checkpoint commits them and writes one entry for both.
    let storage = faulty(
        &b,
        FaultPoint::Commit,
        2,
        FaultMode::Transient {
            times: 1,
            applied: false,
        },
    );
    let outcomes = run(Arc::new(storage.clone()), 4).await;
    assert!(storage.fired());
    assert_eq!(outcomes[1], Some(TableOutcome::Deferred), "{outcomes:?}");
    let log = read_log(b.storage.as_ref()).await;
    let txns: Vec<i64> = log.txn_history.iter().map(|(_, _, n)| *n).collect();
    assert_eq!(txns, [1, 3, 4]);
    check(&b, 4, "deferred file commit").await;
}

#[tokio::test]
async fn the_last_checkpoints_entry_cannot_wait_so_finish_fails_and_the_next_run_writes_it() {
    let b = Backend::local();
    let storage = faulty(
        &b,
        FaultPoint::PutLogEntry,
        3,
        FaultMode::Transient {
            times: 4,
            applied: false,
        },
    );
    let mut c = open(Arc::new(storage.clone())).await.unwrap();
    for k in 0..3 {
        c.write(&common::batch(k * PER_CHECKPOINT, PER_CHECKPOINT))
            .await
            .unwrap();
        let end = (k + 1) * PER_CHECKPOINT;
        if k < 2 {
            c.checkpoint(&end).await.unwrap();
        } else {
            let err = c.finish(&end).await.unwrap_err();
            assert!(err.is_retryable(), "{err}");
        }
    }
    drop(c);
    filesink::storage::ownership::settle_releases().await;
    assert!(storage.fired());
    let log = read_log(b.storage.as_ref()).await;
    assert_eq!(log.versions.len(), 2, "checkpoint 3's entry is missing");
    // The next run's restore writes it; the job is finished.
    let c = open(b.storage.clone()).await.unwrap();
    assert!(c.is_finished());
    c.close().await.unwrap();
    check(&b, 3, "finish deferred").await;
}
