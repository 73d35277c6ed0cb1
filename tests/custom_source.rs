//! A `Source` written outside the crate (`Ingest::from_source`): exactly once wherever a run
//! stops or is dropped, on local disk, in memory and on S3; a source that cannot seek to the
//! checkpoint refused; a job refused another source; an unbounded source visible within the
//! interval and resumed after a crash; bad records named by the source.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Field, Schema};
use common::backend::{s3_or_explain, Backend};
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Next, Skipped, Source};
use filesink::{Error, FileFormat, Setting};

/// A replayable log of records with ids, read from an offset: the position.
#[derive(Clone)]
struct LogSource {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    offset: usize,
    /// Whether the log ends where it ends (`Next::End`), or waits for more (`Next::Idle`).
    ends: bool,
}

impl LogSource {
    fn new(records: i64) -> LogSource {
        let source = LogSource {
            name: "log",
            log: Arc::default(),
            offset: 0,
            ends: true,
        };
        source.append(0..records);
        source
    }

    fn append(&self, ids: std::ops::Range<i64>) {
        let mut log = self.log.lock().unwrap();
        for id in ids {
            log.push(format!(r#"{{"id":{id},"part":"p{}"}}"#, id % 4));
        }
    }
}

impl Source for LogSource {
    fn name(&self) -> String {
        self.name.into()
    }

    fn seek(&mut self, position: Option<&serde_json::Value>) -> filesink::Result<()> {
        let offset = position.map_or(0, |p| p["offset"].as_u64().unwrap() as usize);
        if offset > self.log.lock().unwrap().len() {
            return Err(Error::InputChanged(format!(
                "log `{}` is shorter than offset {offset}",
                self.name
            )));
        }
        self.offset = offset;
        Ok(())
    }

    fn next(&mut self, records_max: usize, deadline: Instant) -> filesink::Result<Next> {
        loop {
            let log = self.log.lock().unwrap();
            if self.offset < log.len() {
                let end = log.len().min(self.offset + records_max);
                let records = log[self.offset..end]
                    .iter()
                    .map(|r| r.as_bytes().to_vec())
                    .collect();
                self.offset = end;
                return Ok(Next::Records {
                    records,
                    position: serde_json::json!({ "offset": end }),
                });
            }
            if self.ends {
                return Ok(Next::End);
            }
            drop(log);
            if Instant::now() >= deadline {
                return Ok(Next::Idle);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, false),
    ])
}

fn ingest(b: &Backend, source: &LogSource) -> Ingest {
    Ingest::from_source(source.clone())
        .job("log")
        .schema(schema())
        .to_storage(b.storage.clone())
        .checkpoint_every(CheckpointEvery::Rows(100))
}

fn backends() -> Vec<Backend> {
    let mut out = vec![Backend::local(), Backend::memory()];
    out.extend(s3_or_explain());
    out
}

/// A run that stops after any number of records (before their checkpoint, as a killed
/// process would) and its rerun: every record once, with one writer or two, partitioned or
/// not.
#[tokio::test]
async fn a_custom_source_is_ingested_exactly_once_wherever_the_run_stops() {
    for stop in [1, 99, 100, 101, 457, 999] {
        for (writers, partitioned) in [(1, false), (2, true)] {
            for b in backends() {
                let source = LogSource::new(1_000);
                let configured = |i: Ingest| {
                    let i = i.parallelism(writers);
                    match partitioned {
                        true => i.partition_by(["part"]),
                        false => i,
                    }
                };
                let first = configured(ingest(&b, &source))
                    .stop_after_records(stop)
                    .run()
                    .await
                    .unwrap();
                assert_eq!(first.status, IngestStatus::Stopped);
                let second = configured(ingest(&b, &source)).run().await.unwrap();
                assert_eq!(second.status, IngestStatus::Finished);
                assert_eq!(second.records_total, 1_000);
                b.assert_exactly_once(&FileFormat::parquet(), 1_000).await;
            }
        }
    }
}

/// A run dropped at any moment (its future with it, as a crash takes a process), then
/// resumed, and then given more records: every record once.
#[tokio::test]
async fn a_run_dropped_at_any_moment_resumes_exactly_once() {
    for after_ms in [0, 1, 3, 10, 30, 100] {
        let b = Backend::local();
        let source = LogSource::new(5_000);
        let cut =
            tokio::time::timeout(Duration::from_millis(after_ms), ingest(&b, &source).run()).await;
        if let Ok(run) = cut {
            run.unwrap();
        }
        ingest(&b, &source).run().await.unwrap();
        source.append(5_000..6_000);
        let more = ingest(&b, &source).run().await.unwrap();
        assert_eq!(more.records, 1_000, "after {after_ms} ms");
        b.assert_exactly_once(&FileFormat::parquet(), 6_000).await;
    }
}

/// A source that can no longer give what followed the checkpoint's position refuses to
/// seek: the run fails with `InputChanged` and the lake is as it was.
#[tokio::test]
async fn a_source_that_cannot_seek_to_the_checkpoint_is_refused() {
    let b = Backend::local();
    let source = LogSource::new(500);
    ingest(&b, &source).run().await.unwrap();
    let before = b.visible().await;
    source.log.lock().unwrap().truncate(100);
    let e = ingest(&b, &source).run().await.unwrap_err();
    assert!(matches!(e, Error::InputChanged(_)), "{e}");
    assert_eq!(b.visible().await, before);
}

/// A job that read one source does not take another under its name: the refusal names the
/// source the job read.
#[tokio::test]
async fn a_job_is_refused_a_source_of_another_name() {
    let b = Backend::local();
    let source = LogSource::new(300);
    ingest(&b, &source).run().await.unwrap();
    let other = LogSource {
        name: "other-log",
        ..source.clone()
    };
    let e = ingest(&b, &other).run().await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    assert!(e.to_string().contains("source:log"), "{e}");
}

/// A custom source comes with a job name and a schema, and alone; a refusal creates nothing.
#[tokio::test]
async fn a_custom_source_needs_a_job_and_a_schema_and_comes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let source = LogSource::new(10);
    let cases = [
        (
            Ingest::from_source(source.clone()).schema(schema()),
            Setting::Job,
        ),
        (
            Ingest::from_source(source.clone()).job("log"),
            Setting::Schema,
        ),
    ];
    for (ingest, refused) in cases {
        let e = ingest.to_local(&lake).run().await.unwrap_err();
        assert!(
            matches!(e, Error::Setting { setting, .. } if setting == refused),
            "{e}"
        );
        assert!(!lake.exists());
    }
}

/// A source that does not end: with a time interval, its records become visible while the
/// run goes on; a crash (the run dropped) and a rerun take each record once.
#[tokio::test]
async fn an_unbounded_source_is_visible_within_the_interval_and_resumes_after_a_crash() {
    let b = Backend::local();
    let source = LogSource {
        ends: false,
        ..LogSource::new(100)
    };
    let run = |source: &LogSource| {
        let ingest = Ingest::from_source(source.clone())
            .job("log")
            .schema(schema())
            .to_storage(b.storage.clone())
            .checkpoint_every(CheckpointEvery::Interval(Duration::from_millis(200)));
        tokio::spawn(async move { ingest.run().await })
    };
    let first = run(&source);
    wait_until_visible(&b, 100).await;
    first.abort();
    let _ = first.await;
    source.append(100..150);
    let second = run(&source);
    wait_until_visible(&b, 150).await;
    second.abort();
    let _ = second.await;
    b.assert_exactly_once(&FileFormat::parquet(), 150).await;
}

/// Waits until `n` distinct ids are visible (up to a minute: a bound for a stuck run, not a
/// measure of speed).
async fn wait_until_visible(b: &Backend, n: usize) {
    let start = Instant::now();
    while b.id_counts(&FileFormat::parquet()).await.len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{n} records not visible after a minute"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A record that does not decode goes to the bad-records file, named by the source and its
/// record number, and the rest are ingested.
#[tokio::test]
async fn bad_records_of_a_custom_source_are_named_by_it() {
    let b = Backend::local();
    let source = LogSource::new(10);
    source.log.lock().unwrap()[4] = "{\"id\": not json".into();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    let summary = ingest(&b, &source).bad_records(&bad).run().await.unwrap();
    assert_eq!((summary.records, summary.bad_records), (9, 1));
    let text = std::fs::read_to_string(&bad).unwrap();
    assert!(text.contains("log:5"), "{text}");
}

/// A source that passed records over because it could no longer give them (as the Kafka
/// source does on request, when retention deleted what the lake had not read) says so: the
/// run's summary reports them as possible loss, and the records after them are written.
#[tokio::test]
async fn records_a_source_passed_over_are_reported_as_possible_loss() {
    /// A log whose first ten records expired before the lake read them.
    struct Expired {
        log: LogSource,
        told: bool,
    }
    impl Source for Expired {
        fn name(&self) -> String {
            self.log.name()
        }
        fn seek(&mut self, position: Option<&serde_json::Value>) -> filesink::Result<()> {
            self.log.seek(position)
        }
        fn next(&mut self, records_max: usize, deadline: Instant) -> filesink::Result<Next> {
            if !self.told && self.log.offset < 10 {
                self.told = true;
                let from = self.log.offset as u64;
                self.log.offset = 10;
                return Ok(Next::Skipped(Skipped {
                    part: "log".into(),
                    from,
                    to: 10,
                    reason: "expired".into(),
                }));
            }
            self.log.next(records_max, deadline)
        }
    }
    let b = Backend::memory();
    let source = Expired {
        log: LogSource::new(100),
        told: false,
    };
    let summary = Ingest::from_source(source)
        .job("log")
        .schema(schema())
        .to_storage(b.storage.clone())
        .checkpoint_every(CheckpointEvery::Rows(30))
        .run()
        .await
        .unwrap();
    assert_eq!(summary.status, IngestStatus::Finished);
    assert_eq!(summary.records_total, 90);
    let expected = Skipped {
        part: "log".into(),
        from: 0,
        to: 10,
        reason: "expired".into(),
    };
    assert_eq!(summary.skipped, [expected]);
}
