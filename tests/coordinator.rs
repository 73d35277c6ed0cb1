//! The standalone coordinator: the manifest is the completion point; restarts resume from the
//! latest manifest; damaged, future or foreign manifests are refused by name.

mod common;

use common::job::run_two_writers;
use common::*;
use filesink::job::manifest::{checkpoints_dir, list_checkpoints, manifest_path};
use filesink::{Coordinator, Error, FileFormat, RollingPolicy, Sink};

fn sink(dir: &std::path::Path, format: FileFormat) -> Sink {
    Sink::local(dir)
        .unwrap()
        .format(format)
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::default())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_job_killed_mid_way_resumes_from_its_manifest_exactly_once() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path(), format.clone());
        for stop in [7, 3, 11] {
            let c = run_two_writers(&sink, "orders", 0, 3000, 4, Some(stop)).await;
            drop(c); // crash
        }
        run_two_writers(&sink, "orders", 0, 3000, 4, None)
            .await
            .unwrap();
        assert_exactly_once(dir.path(), &format, 3000);
        assert!(
            hidden_files(dir.path()).is_empty(),
            "{:?}",
            hidden_files(dir.path())
        );
        // A rerun of the finished job is a no-op.
        assert!(run_two_writers(&sink, "orders", 0, 3000, 4, None)
            .await
            .is_none());
        assert_exactly_once(dir.path(), &format, 3000);
    }
}

#[tokio::test]
async fn old_manifests_are_pruned_to_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), FileFormat::parquet());
    let mut c = Coordinator::open(&sink, "daily", 1)
        .await
        .unwrap()
        .with_retention(2);
    for i in 0..5 {
        c.writer().write(&batch(i * 10, 10)).await.unwrap();
        let report = c.checkpoint(&(i * 10 + 10)).await.unwrap();
        assert_eq!(report.checkpoint_id, i as u64 + 1);
    }
    let ids: Vec<u64> = list_checkpoints(sink.storage().as_ref(), "daily")
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, vec![4, 5]);
}

async fn job_with_manifest(dir: &std::path::Path) -> (Sink, std::path::PathBuf) {
    let sink = sink(dir, FileFormat::parquet());
    let mut c = Coordinator::open(&sink, "j", 1).await.unwrap();
    c.writer().write(&batch(0, 10)).await.unwrap();
    c.checkpoint(&10).await.unwrap();
    (sink, dir.join(manifest_path("j", 1)))
}

#[tokio::test]
async fn a_truncated_manifest_is_refused_by_name_and_never_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = job_with_manifest(dir.path()).await;
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = Coordinator::open(&sink, "j", 1).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(&manifest_path("j", 1)), "{err}");
}

#[tokio::test]
async fn an_edited_manifest_fails_its_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = job_with_manifest(dir.path()).await;
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("\"source_position\":10", "\"source_position\":11", 1),
    )
    .unwrap();
    let err = Coordinator::open(&sink, "j", 1).await.unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

#[tokio::test]
async fn a_manifest_from_another_sink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = job_with_manifest(dir.path()).await;
    let other = tempfile::tempdir().unwrap();
    let (other_sink, _) = job_with_manifest(other.path()).await;
    // Replace the other sink's checkpoint 1 with ours, and add it as checkpoint 2.
    let target = other.path().join(manifest_path("j", 2));
    std::fs::copy(&path, &target).unwrap();
    let err = Coordinator::open(&other_sink, "j", 1).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("belongs to sink") || msg.contains("lives at"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_manifest_of_a_future_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, path) = job_with_manifest(dir.path()).await;
    // Re-encode the body with version 9 and a valid checksum.
    let env: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut body = env["body"].clone();
    body["version"] = 9.into();
    let body_text = serde_json::to_string(&body).unwrap();
    let crc = crc32c::crc32c(body_text.as_bytes());
    std::fs::write(&path, format!("{{\"crc32c\":{crc},\"body\":{body_text}}}")).unwrap();
    let err = Coordinator::open(&sink, "j", 1).await.unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedVersion { found: 9, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn two_coordinators_racing_on_one_job_cannot_both_complete_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), FileFormat::parquet());
    // A deployment that vouches for one run per job itself; the manifest still refuses.
    let external = || {
        Coordinator::builder(&sink, "race")
            .ownership(filesink::Ownership::External)
            .open()
    };
    let mut a = external().await.unwrap();
    let mut b = external().await.unwrap();
    a.writer().write(&batch(0, 10)).await.unwrap();
    b.writer().write(&batch(0, 10)).await.unwrap();
    a.checkpoint(&10).await.unwrap();
    let err = b.checkpoint(&10).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 10);
    let ids = list_checkpoints(sink.storage().as_ref(), "race")
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    assert!(dir.path().join(checkpoints_dir("race")).is_dir());
}

/// A position is the caller's own serde type: it comes back as that type after a restart, and
/// a position that is not of the type asked for is refused as corrupt, not misread.
#[tokio::test]
async fn a_source_position_comes_back_typed_and_a_foreign_one_is_refused() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Offsets {
        file: String,
        line: u64,
    }
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), FileFormat::parquet());
    let mut c = Coordinator::open(&sink, "typed", 1).await.unwrap();
    assert_eq!(c.source_position::<Offsets>().unwrap(), None);
    c.writer().write(&batch(0, 10)).await.unwrap();
    let at = Offsets {
        file: "a.jsonl".into(),
        line: 10,
    };
    c.checkpoint(&at).await.unwrap();
    c.close().await.unwrap();

    let c = Coordinator::open(&sink, "typed", 1).await.unwrap();
    assert_eq!(c.source_position::<Offsets>().unwrap(), Some(at));
    let err = c.source_position::<u64>().unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains("source position of job `typed`"),
        "{err}"
    );
}

/// Committing in the background: the checkpoint is complete (its manifest written) when
/// `checkpoint_then_commit` returns; its files become visible when the commit settles, which
/// the next checkpoint and `finish` wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_committed_in_the_background_is_complete_at_once_and_settled_before_the_next()
{
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), FileFormat::parquet());
    let mut c = Coordinator::open(&sink, "orders", 2).await.unwrap();
    c.write(&batch(0, 500)).await.unwrap();
    let r = c.checkpoint_then_commit(&500i64).await.unwrap();
    assert_eq!((r.checkpoint_id, r.committed_files), (1, 0));
    assert!(dir.path().join(manifest_path("orders", 1)).exists());
    let settled = c.committed().await.unwrap().expect("a commit ran");
    assert_eq!(settled.checkpoint_id, 1);
    assert_eq!(settled.committed_records, 500);
    assert!(c.committed().await.unwrap().is_none());
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 500);

    // Not settled by hand: the next checkpoint settles it, and `finish` the one after.
    c.write(&batch(500, 500)).await.unwrap();
    c.checkpoint_then_commit(&1000i64).await.unwrap();
    c.write(&batch(1000, 500)).await.unwrap();
    c.checkpoint_then_commit(&1500i64).await.unwrap();
    c.write(&batch(1500, 500)).await.unwrap();
    c.finish(&2000i64).await.unwrap();
    assert!(c.committed().await.unwrap().is_none());
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 2000);
    assert!(hidden_files(dir.path()).is_empty());
}

/// A coordinator dropped while its background commit runs (a crash at any step of that
/// commit): the checkpoint is complete, and the next run's restore commits the rest. Ten
/// rounds, each dropping at once after the manifest, land at different steps of the commit;
/// every interleaving must give the same result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_dropped_with_its_commit_running_leaves_a_complete_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), FileFormat::parquet());
    for round in 0..10i64 {
        let mut c = Coordinator::open(&sink, "orders", 2).await.unwrap();
        let next = c.source_position::<i64>().unwrap().unwrap_or(0);
        assert_eq!(
            next,
            round * 300,
            "the complete checkpoint of the last round"
        );
        c.write(&batch(next, 300)).await.unwrap();
        c.checkpoint_then_commit(&(next + 300)).await.unwrap();
        c.write(&batch(next + 300, 100)).await.unwrap(); // never checkpointed
        drop(c);
    }
    let mut c = Coordinator::open(&sink, "orders", 2).await.unwrap();
    assert_eq!(c.source_position::<i64>().unwrap(), Some(3000));
    c.finish(&3000i64).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 3000);
    assert!(hidden_files(dir.path()).is_empty());
}

/// A background commit that fails (the store dies under it) fails the run at the next
/// checkpoint, not silently; the checkpoint is complete, and a restart commits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_commit_that_fails_is_reported_and_redone_by_the_next_run() {
    use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
    use std::sync::Arc;
    let b = common::backend::Backend::local();
    let faulty = FaultyStorage::new(
        b.storage.clone(),
        Some(FaultPlan {
            point: FaultPoint::Commit,
            occurrence: 1,
            mode: FaultMode::Before,
        }),
    );
    let sink_on = |storage: Arc<dyn filesink::storage::Storage>| {
        Sink::builder_shared(storage)
            .format(FileFormat::parquet())
            .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
            .build()
            .unwrap()
    };
    let sink = sink_on(Arc::new(faulty.clone()));
    let mut c = Coordinator::open(&sink, "orders", 2).await.unwrap();
    c.write(&batch(0, 500)).await.unwrap();
    c.checkpoint_then_commit(&500i64).await.unwrap();
    // The commit failed on its task (and the store is dead from then on): settling it says
    // so, and so does every call after.
    assert!(c.committed().await.is_err());
    assert!(faulty.fired());
    let next = async {
        c.write(&batch(500, 500)).await?;
        c.checkpoint(&1000i64).await
    };
    assert!(next.await.is_err());
    drop(c);
    // Nothing of the second 500 is visible; the first 500 at most once.
    for (id, count) in b.id_counts(&FileFormat::parquet()).await {
        assert!(id < 500 && count == 1, "id {id} visible {count} times");
    }

    let sink = sink_on(b.storage.clone());
    let mut c = Coordinator::open(&sink, "orders", 2).await.unwrap();
    assert_eq!(c.source_position::<i64>().unwrap(), Some(500));
    c.write(&batch(500, 500)).await.unwrap();
    c.finish(&1000i64).await.unwrap();
    b.assert_exactly_once(&FileFormat::parquet(), 1000).await;
}

/// A manifest write that died between its temporary file and the rename leaves
/// `.<name>.tmp.<UUIDv7>` in the job's checkpoint directory; the job's next run, which owns
/// the job, removes it before it writes anything, and only its own job's, only that shape.
#[tokio::test]
async fn a_restore_removes_the_temporary_files_of_its_jobs_dead_manifest_writes() {
    use filesink::protocol::metadata_temp_name;
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), FileFormat::parquet());
    let mut c = Coordinator::open(&sink, "mine", 1).await.unwrap();
    c.writer().write(&batch(0, 10)).await.unwrap();
    c.checkpoint(&10).await.unwrap();
    drop(c);
    let mut other = Coordinator::open(&sink, "other", 1).await.unwrap();
    other.checkpoint(&0).await.unwrap();
    drop(other);
    let plant = |job: &str, name: String| {
        let path = dir.path().join(checkpoints_dir(job)).join(name);
        std::fs::write(&path, b"{\"crc32c\":").unwrap();
        path
    };
    let dead = plant("mine", metadata_temp_name("00000000000000000002.json"));
    let others = plant("other", metadata_temp_name("00000000000000000002.json"));
    let foreign = plant("mine", ".00000000000000000002.json.tmp.x".into());

    let mut c = Coordinator::open(&sink, "mine", 1).await.unwrap();
    assert!(!dead.exists(), "the job's own temporary file is removed");
    assert!(others.exists(), "another job's is not this run's to remove");
    assert!(foreign.exists(), "a name of another shape is never removed");
    c.writer().write(&batch(10, 10)).await.unwrap();
    c.checkpoint(&20).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 20);
}

/// A checkpoint that rolls every open file makes every record before it visible, row files
/// the rolling policy would keep open included, and the job writes on after it (what a job
/// hands a Kafka partition on at).
#[tokio::test]
async fn a_checkpoint_rolling_every_file_leaves_nothing_hidden_and_the_job_goes_on() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path(), format.clone());
        let mut c = Coordinator::open(&sink, "handover", 1).await.unwrap();
        c.writer().write(&batch(0, 10)).await.unwrap();
        let report = c.checkpoint_rolling_all(&10).await.unwrap();
        assert_eq!(report.deferred, 0);
        assert_exactly_once(dir.path(), &format, 10);
        assert_eq!(c.writer().open_files(), 0, "{format:?}");
        c.writer().write(&batch(10, 10)).await.unwrap();
        c.checkpoint_rolling_all(&20).await.unwrap();
        assert_exactly_once(dir.path(), &format, 20);
        assert!(!c.is_finished());
        c.close().await.unwrap();
    }
}
