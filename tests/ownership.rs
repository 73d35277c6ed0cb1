//! Job ownership where it expires: the claims of object stores (`storage::ownership`), on the
//! in-memory store, Garage and Ceph.
//!
//! A "process" here is a thread with its own runtime and its own view of the store. It dies by
//! stopping its runtime with its coordinator leaked (no renewal, no release), and it pauses
//! by blocking its thread (no renewal, as under SIGSTOP). The waits below only ever wait for a
//! claim to expire: a slower machine makes them wait longer than needed, never too little.
//! Local disk has no expiry: the kernel releases the lock with the process, which the CLI
//! tests check with a real SIGKILL (`tests/cli.rs`, `tests/kill_resume.rs`).

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::backend::Backend;
use common::batch;
use filesink::storage::{LeaseOptions, Storage};
use filesink::{Coordinator, Error, FileFormat, Ownership, Sink};

fn sink_on(storage: std::sync::Arc<dyn Storage>) -> Sink {
    Sink::builder_shared(storage)
        .format(FileFormat::json_lines())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap()
}

fn with_ttl(ttl: Duration) -> Ownership {
    Ownership::Lease(LeaseOptions { ttl })
}

/// Longer than any claim of `ttl` can stay live: its time to live, the stores' timestamp
/// slack (1 s) and a margin.
fn expiry(ttl: Duration) -> Duration {
    ttl + Duration::from_secs(2)
}

/// Runs `body` as another process: a thread with its own current-thread runtime, stopped
/// (every task dropped, as by a crash) when `body` returns.
fn in_another_process<T, F>(body: impl FnOnce() -> F + Send + 'static) -> std::thread::JoinHandle<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(body());
        rt.shutdown_background();
        out
    })
}

/// A run of `job` with a lease of `ttl` that checkpointed records 0..40 and wrote 40..80.
async fn checkpointed_then_writing(
    storage: std::sync::Arc<dyn Storage>,
    job: &str,
    ttl: Duration,
) -> Coordinator {
    let s = sink_on(storage);
    let mut c = Coordinator::builder(&s, job)
        .ownership(with_ttl(ttl))
        .open()
        .await
        .unwrap();
    c.writer().write(&batch(0, 40)).await.unwrap();
    c.checkpoint(&40).await.unwrap();
    c.writer().write(&batch(40, 40)).await.unwrap();
    c
}

/// A run that dies keeps its job until its claim expires: a rerun at once is refused and
/// changes nothing; a rerun after the time to live takes the job over, restores from the
/// dead run's checkpoint and finishes exactly once.
async fn a_crashed_runs_claim_blocks_its_job_until_it_expires(b: Backend) {
    let ttl = Duration::from_secs(10);
    let storage = b.reopen();
    in_another_process(move || async move {
        let c = checkpointed_then_writing(storage, "crashy", ttl).await;
        std::mem::forget(c); // the process dies: no drop, no release
    })
    .join()
    .unwrap();
    let died = Instant::now();
    let s = sink_on(b.reopen());
    let visible = b.visible().await;
    let err = Coordinator::open(&s, "crashy", 1).await.unwrap_err();
    assert!(
        died.elapsed() < ttl,
        "[{}] the machine stalled for the whole lease; rerun the test",
        b.name
    );
    assert!(
        matches!(&err, Error::JobBusy { reason, .. } if reason.contains("expires")),
        "[{}] a rerun while the dead run's claim is live: {err:?}",
        b.name
    );
    assert_eq!(
        b.visible().await,
        visible,
        "[{}] the refused rerun changed output",
        b.name
    );
    tokio::time::sleep(expiry(ttl).saturating_sub(died.elapsed())).await;
    let mut c = Coordinator::open(&s, "crashy", 1).await.unwrap();
    assert_eq!(c.source_position::<i64>().unwrap(), Some(40));
    c.writer().write(&batch(40, 40)).await.unwrap();
    c.finish(&80).await.unwrap();
    c.close().await.unwrap();
    b.assert_exactly_once(&FileFormat::json_lines(), 80).await;
    assert!(
        b.storage.list_leftovers().await.unwrap().is_empty(),
        "[{}] the dead run's uploads were not cleaned up",
        b.name
    );
}

/// A run paused for longer than its lease (SIGSTOP, a stalled VM) while another run took the
/// job over cannot complete a checkpoint when it wakes up: its check finds the new owner's
/// claim, it writes no manifest, and the output stays exactly once.
async fn a_run_that_lost_its_job_cannot_complete_a_checkpoint(b: Backend) {
    let ttl = Duration::from_secs(4);
    let storage = b.reopen();
    let (paused_tx, paused_rx) = tokio::sync::oneshot::channel::<()>();
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    let zombie = in_another_process(move || async move {
        let mut c = checkpointed_then_writing(storage, "paused", ttl).await;
        paused_tx.send(()).unwrap();
        // Paused: the whole runtime stops, renewals included.
        wake_rx.recv().unwrap();
        let result = c.checkpoint(&80).await;
        drop(c);
        result
    });
    paused_rx.await.unwrap();
    tokio::time::sleep(expiry(ttl)).await;
    let s = sink_on(b.reopen());
    let mut successor = Coordinator::open(&s, "paused", 1).await.unwrap();
    assert_eq!(successor.source_position::<i64>().unwrap(), Some(40));
    successor.writer().write(&batch(40, 40)).await.unwrap();
    successor.checkpoint(&80).await.unwrap();
    let visible = b.visible().await;
    wake_tx.send(()).unwrap();
    let result = tokio::task::spawn_blocking(move || zombie.join().unwrap())
        .await
        .unwrap();
    assert!(
        matches!(&result, Err(Error::JobBusy { job, .. }) if job == "paused"),
        "[{}] the paused run must not complete a checkpoint: {result:?}",
        b.name
    );
    assert_eq!(
        b.visible().await,
        visible,
        "[{}] the paused run changed output",
        b.name
    );
    successor.writer().write(&batch(80, 40)).await.unwrap();
    successor.finish(&120).await.unwrap();
    successor.close().await.unwrap();
    b.assert_exactly_once(&FileFormat::json_lines(), 120).await;
}

/// A lease shorter than the stores' timestamp resolution could expire between two
/// renewals: refused.
async fn a_lease_shorter_than_a_second_is_refused(b: Backend) {
    let s = sink_on(b.reopen());
    let err = Coordinator::builder(&s, "short")
        .ownership(with_ttl(Duration::from_millis(200)))
        .open()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "[{}] {err:?}", b.name);
}

macro_rules! on_object_stores {
    ($($check:ident),* $(,)?) => {
        mod memory {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
              async fn $check() { super::$check(Backend::memory()).await })*
        }
        mod s3 {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
              async fn $check() { if let Some(b) = common::backend::s3_or_explain() { super::$check(b).await } })*
        }
        mod ceph {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
              async fn $check() { if let Some(b) = common::backend::ceph_or_explain() { super::$check(b).await } })*
        }
    };
}

on_object_stores!(
    a_crashed_runs_claim_blocks_its_job_until_it_expires,
    a_run_that_lost_its_job_cannot_complete_a_checkpoint,
    a_lease_shorter_than_a_second_is_refused,
);
