//! A job with several writers that encode and vote at the same time, each on its own task
//! ([`Coordinator::write`]): every bucket stays with one writer for the whole job, every record
//! is visible exactly once, also after a crash with writes of several writers in flight, and a
//! resumed job keeps the number of writers it started with.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::*;
use filesink::bucket::HivePartitioner;
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input, Observer, Step};
use filesink::{Coordinator, Error, FileFormat, Sink};

fn sink(dir: &Path, partitioned: bool) -> Sink {
    let b = Sink::local(dir).unwrap().format(FileFormat::parquet());
    let b = if partitioned {
        b.bucket_assigner(HivePartitioner::new(["day"]).unwrap())
    } else {
        b
    };
    b.build().unwrap()
}

/// Writer id (`<job>_<i>`) of every visible file, by partition directory.
fn writers_by_partition(dir: &Path, job: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in visible_files(dir) {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        let writer = name
            .split('-')
            .find(|p| p.starts_with(&format!("{job}_")))
            .unwrap_or_else(|| panic!("no writer id of job `{job}` in `{name}`"))
            .to_string();
        let partition = f
            .parent()
            .unwrap()
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        out.entry(partition).or_default().insert(writer);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_partition_stays_with_one_writer_across_checkpoints_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), true);
    // Two runs of the job, the first one crashing after writes to every writer.
    let mut c = Coordinator::open(&sink, "par", 3).await.unwrap();
    for i in 0..10 {
        c.write(&batch(i * 100, 100)).await.unwrap();
        if i % 3 == 2 {
            c.checkpoint(&(i * 100 + 100)).await.unwrap();
        }
    }
    drop(c); // a crash: the writes after checkpoint 3 (ids 900..1000) are not covered
    let mut c = Coordinator::open(&sink, "par", 3).await.unwrap();
    let mut next: i64 = c.source_position().unwrap().unwrap();
    assert_eq!(next, 900);
    while next < 3000 {
        c.write(&batch(next, 100)).await.unwrap();
        next += 100;
        c.checkpoint(&next).await.unwrap();
    }
    c.finish(&next).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 3000);
    assert!(
        hidden_files(dir.path()).is_empty(),
        "{:?}",
        hidden_files(dir.path())
    );
    let by_partition = writers_by_partition(dir.path(), "par");
    assert_eq!(by_partition.len(), 5, "{by_partition:?}");
    for (partition, writers) in &by_partition {
        assert_eq!(
            writers.len(),
            1,
            "partition {partition} written by {writers:?}"
        );
    }
    // The five days spread over more than one writer.
    let used: BTreeSet<&String> = by_partition.values().flatten().collect();
    assert!(used.len() > 1, "{by_partition:?}");
}

#[tokio::test]
async fn unpartitioned_batches_take_turns_among_the_writers() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), false);
    let mut c = Coordinator::open(&sink, "flat", 2).await.unwrap();
    for i in 0..6 {
        c.write(&batch(i * 50, 50)).await.unwrap();
    }
    let report = c.finish(&300).await.unwrap();
    assert_eq!(report.committed_files, 2, "{report:?}");
    assert_eq!(report.committed_records, 300, "{report:?}");
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 300);
}

#[tokio::test]
async fn an_error_of_one_writer_fails_the_write_and_the_job_resumes_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), true);
    let mut c = Coordinator::open(&sink, "bad", 2).await.unwrap();
    c.write(&batch(0, 100)).await.unwrap();
    c.checkpoint(&100).await.unwrap();
    // A batch of another schema: the writers that hold open files of its buckets refuse it.
    let other = arrow::record_batch::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("day", arrow::datatypes::DataType::Utf8, false),
            arrow::datatypes::Field::new("x", arrow::datatypes::DataType::Int64, false),
        ])),
        vec![
            std::sync::Arc::new(arrow::array::StringArray::from(vec!["2026-11-25"; 3])),
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![1, 2, 3])),
        ],
    )
    .unwrap();
    c.write(&batch(100, 100)).await.unwrap();
    let e = c.write(&other).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    drop(c);
    let mut c = Coordinator::open(&sink, "bad", 2).await.unwrap();
    let mut next: i64 = c.source_position().unwrap().unwrap();
    assert_eq!(next, 100);
    while next < 500 {
        c.write(&batch(next, 100)).await.unwrap();
        next += 100;
    }
    c.finish(&next).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 500);
}

fn jsonl(path: &Path, n: i64) {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"v\":\"x{}\"}}\n",
            1 + i % 24,
            i % 7
        ));
    }
    std::fs::write(path, out).unwrap();
}

fn ingest(input: &Path, lake: &Path) -> Ingest {
    Ingest::new([Input::file(input).unwrap()])
        .to_local(lake)
        .partition_by(["day"])
        .checkpoint_every(CheckpointEvery::Rows(1000))
        .job("events")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingest_killed_with_several_writers_resumes_exactly_once_and_keeps_its_writers() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let lake = dir.path().join("lake");
    jsonl(&input, 20_000);
    for stop in [2_500, 9_000] {
        let s = ingest(&input, &lake)
            .parallelism(3)
            .stop_after_records(stop)
            .run()
            .await
            .unwrap();
        assert_eq!(s.status, IngestStatus::Stopped);
    }
    // Given explicitly, another number of writers is refused, before anything changes.
    let e = ingest(&input, &lake)
        .parallelism(2)
        .run()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("3 writers"), "{e}");
    // Not given: the job keeps its three.
    let s = ingest(&input, &lake).run().await.unwrap();
    assert_eq!(s.status, IngestStatus::Finished);
    assert_eq!(visible_parquet_ids(&lake), (0..20_000).collect::<Vec<_>>());
    let by_partition = writers_by_partition(&lake, "events");
    assert_eq!(by_partition.len(), 24);
    let used: BTreeSet<&String> = by_partition.values().flatten().collect();
    assert_eq!(used.len(), 3, "{by_partition:?}");
    for (partition, writers) in &by_partition {
        assert_eq!(
            writers.len(),
            1,
            "partition {partition} written by {writers:?}"
        );
    }
}

/// Where a run failed.
#[derive(Default)]
struct FailedAt(Option<Step>);

impl Observer for FailedAt {
    fn failed(&mut self, step: Step, _: &Error) {
        self.0 = Some(step);
    }
}

/// An ingest with several writers queues each writer its share and goes on without waiting
/// for the write. A queued write that fails (the store dies as a file is created, at moments
/// early and late in the run, or as bytes are appended; or it fails one create and lives on,
/// where a checkpoint taken after the failure would skip records and the rerun would miss
/// them) stops the run as a failed write, before any checkpoint could cover records it did
/// not write; the rerun restores the last complete checkpoint and finishes exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_write_that_fails_stops_the_run_before_a_checkpoint_and_the_rerun_is_exactly_once()
{
    use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
    use filesink::storage::LocalStorage;
    use std::sync::Arc;
    let plans = [
        (FaultPoint::Create, 3, FaultMode::Before),
        (FaultPoint::Create, 100, FaultMode::Before),
        (FaultPoint::Create, 230, FaultMode::AfterApplied),
        (FaultPoint::Create, 400, FaultMode::Before),
        (
            FaultPoint::Create,
            150,
            FaultMode::Transient {
                times: 1,
                applied: false,
            },
        ),
        (FaultPoint::Write, 7, FaultMode::Before),
        (FaultPoint::Write, 300, FaultMode::AfterApplied),
    ];
    for (point, occurrence, mode) in plans {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("events.jsonl");
        let lake = dir.path().join("lake");
        jsonl(&input, 20_000);
        let faulty = FaultyStorage::new(
            Arc::new(LocalStorage::new(&lake).unwrap()),
            Some(FaultPlan {
                point,
                occurrence,
                mode,
            }),
        );
        let mut failed = FailedAt::default();
        let plan = format!("{point:?} #{occurrence} {mode:?}");
        let e = ingest(&input, &lake)
            .to_storage(Arc::new(faulty.clone()))
            .parallelism(2)
            .run_with(&mut failed)
            .await
            .expect_err(&plan);
        assert!(faulty.fired(), "{plan}: {e}");
        assert!(
            !e.to_string().contains("reopen"),
            "{plan}: not the write's own error: {e}"
        );
        if point == FaultPoint::Create {
            // Files are created only by the writes: the run learns of it as a write's error.
            assert!(
                matches!(failed.0, Some(Step::Write(_))),
                "{plan}: failed at {:?}: {e}",
                failed.0
            );
        }
        let s = ingest(&input, &lake).parallelism(2).run().await.unwrap();
        assert_eq!(s.status, IngestStatus::Finished, "{plan}");
        assert_eq!(
            visible_parquet_ids(&lake),
            (0..20_000).collect::<Vec<_>>(),
            "{plan}"
        );
        assert_eq!(
            hidden_files(&lake),
            Vec::<std::path::PathBuf>::new(),
            "{plan}"
        );
    }
}

/// A write whose future is dropped halfway (a timeout around it) takes the writers with it:
/// the job refuses every later write and checkpoint (a checkpoint then would skip records
/// the writers may not have written) until it is reopened; reopened, it is exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_halfway_refuses_later_checkpoints_until_the_job_is_reopened() {
    use filesink::storage::fault::FaultyStorage;
    use filesink::storage::LocalStorage;
    use std::sync::Arc;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let local = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let faulty = FaultyStorage::new(local.clone(), None);
    let sink = |storage: Arc<dyn filesink::storage::Storage>| {
        Sink::builder_shared(storage)
            .format(FileFormat::parquet())
            .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
            .build()
            .unwrap()
    };
    let mut c = Coordinator::open(&sink(Arc::new(faulty.clone())), "cut", 2)
        .await
        .unwrap();
    c.write(&batch(0, 100)).await.unwrap();
    c.checkpoint(&100u64).await.unwrap();
    // The next write opens new files (both writers have buckets in it), each create now
    // taking 60 s: cut off after 20 ms. Its writer tasks stop with it, before they create.
    let _ = faulty.clone().with_create_latency(Duration::from_secs(60));
    let cut = tokio::time::timeout(Duration::from_millis(20), c.write(&batch(100, 100))).await;
    assert!(cut.is_err(), "the write ended within 20 ms");
    let e = c.checkpoint(&200u64).await.unwrap_err();
    assert!(e.to_string().contains("reopen the job"), "{e}");
    let e = c.write(&batch(100, 100)).await.unwrap_err();
    assert!(e.to_string().contains("reopen the job"), "{e}");
    assert_eq!(c.last_checkpoint(), 1);
    drop(c);
    let mut c = Coordinator::open(&sink(local), "cut", 2).await.unwrap();
    assert_eq!(c.source_position::<u64>().unwrap(), Some(100));
    c.write(&batch(100, 100)).await.unwrap();
    c.finish(&200u64).await.unwrap();
    assert_eq!(hidden_files(dir.path()), Vec::<std::path::PathBuf>::new());
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 200);
}

/// The first batch after a checkpoint opens a file in every partition it touches; a writer
/// opens them together (on S3 each is a CreateMultipartUpload round trip), not one after
/// another.
#[tokio::test]
async fn a_writer_opens_the_files_of_a_batch_together() {
    use filesink::storage::fault::FaultyStorage;
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new(
        std::sync::Arc::new(filesink::storage::LocalStorage::new(dir.path()).unwrap()),
        None,
    )
    .with_create_latency(std::time::Duration::from_millis(20));
    let sink = Sink::builder_shared(std::sync::Arc::new(storage.clone()))
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let mut c = Coordinator::open(&sink, "wide", 1).await.unwrap();
    c.write(&batch(0, 100)).await.unwrap();
    // The five days of the batch: five files opened at once.
    assert_eq!(storage.creates_in_flight_max(), 5);
    c.finish(&100).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 100);
}

/// A batch with one partition path longer than the store takes is refused by the job as a
/// whole, before any writer writes its share: nothing of it is committed, and the job goes
/// on with the next batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_partition_path_too_long_is_refused_before_any_writer_writes() {
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let columns: Vec<String> = (0..20).map(|c| format!("c{c:02}")).collect();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(columns.clone()).unwrap())
        .build()
        .unwrap();
    let max = sink.partition_path_bytes_max().unwrap();
    // Rows 0..20 in short directories of their own (spread over the writers); row 20's path
    // is one byte too long when `long`.
    let batch = |long: bool| {
        let mut fields: Vec<(String, arrow::array::ArrayRef)> = vec![(
            "id".into(),
            Arc::new(Int64Array::from((0..21).collect::<Vec<i64>>())),
        )];
        let mut left = max + long as usize + 1 - 5 * 20;
        for name in &columns {
            let n = left.min(251);
            left -= n;
            let mut values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
            values.push("x".repeat(n));
            fields.push((name.clone(), Arc::new(StringArray::from(values))));
        }
        arrow::record_batch::RecordBatch::try_from_iter(fields).unwrap()
    };
    let mut c = Coordinator::open(&sink, "long", 3).await.unwrap();
    let err = c.write(&batch(true)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("partition path"), "{err}");
    c.checkpoint(&1).await.unwrap();
    assert!(
        visible_files(dir.path()).is_empty(),
        "nothing of the refused batch"
    );
    c.write(&batch(false)).await.unwrap();
    let report = c.finish(&2).await.unwrap();
    assert_eq!(report.committed_records, 21, "{report:?}");
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 21);
}
