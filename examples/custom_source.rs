//! A source written outside filesink, ingested exactly once across a crash.
//!
//! `OrderLog` stands for a replayable log such as a message queue's partition: records are
//! read from an offset, and the offset is the position. It implements [`Source`]:
//!
//! - `next` hands out records with the offset after them;
//! - `seek` places the log where a checkpoint said;
//! - `seek` refuses an offset the log no longer holds.
//!
//! The steps:
//!
//! 1. The first run stops after 250 records, before their checkpoint, as a killed process
//!    would.
//! 2. The second run seeks the log to the last complete checkpoint and finishes.
//! 3. More orders arrive, and a third run takes only those.
//!
//! Reading the lake back finds every order exactly once.
//!
//! Run with `cargo run --example custom_source` (it works in a temporary directory, or in the
//! directory given as its argument, which must not exist yet).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::AsArray;
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Next, Source};
use filesink::FileFormat;
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

/// The log: every order ever appended, as JSON, shared by the writer of the log and the
/// source that reads it.
type Log = Arc<Mutex<Vec<String>>>;

/// A reader of the log from an offset.
struct OrderLog {
    log: Log,
    offset: usize,
}

impl Source for OrderLog {
    fn name(&self) -> String {
        "orders".into()
    }

    fn seek(&mut self, position: Option<&serde_json::Value>) -> filesink::Result<()> {
        let offset = match position {
            None => 0,
            Some(p) => p["offset"].as_u64().unwrap_or(u64::MAX) as usize,
        };
        if offset > self.log.lock().unwrap().len() {
            return Err(filesink::Error::InputChanged(format!(
                "the order log ends before offset {offset}, which the job has read up to"
            )));
        }
        self.offset = offset;
        Ok(())
    }

    fn next(&mut self, records_max: usize, _deadline: Instant) -> filesink::Result<Next> {
        let log = self.log.lock().unwrap();
        if self.offset == log.len() {
            // A log that others append to would wait until the deadline and say `Idle`; this
            // one ends where it ends, so each run takes what is there.
            return Ok(Next::End);
        }
        let end = log.len().min(self.offset + records_max);
        let records = log[self.offset..end]
            .iter()
            .map(|r| r.as_bytes().to_vec())
            .collect();
        self.offset = end;
        Ok(Next::Records {
            records,
            position: serde_json::json!({ "offset": end }),
        })
    }
}

fn append_orders(log: &Log, ids: std::ops::Range<i64>) {
    let mut log = log.lock().unwrap();
    for id in ids {
        let day = 1 + id % 3;
        log.push(format!(
            r#"{{"id":{id},"day":"2026-12-0{day}","amount":{}}}"#,
            id * 10
        ));
    }
}

fn ingest(log: &Log, lake: &Path) -> Ingest {
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, true),
    ]);
    let source = OrderLog {
        log: log.clone(),
        offset: 0,
    };
    Ingest::from_source(source)
        .job("orders")
        .schema(schema)
        .to_local(lake)
        .format(FileFormat::parquet())
        .partition_by(["day"])
        .checkpoint_every(CheckpointEvery::Rows(100))
}

/// Every `id` in the Parquet files under `dir`, recursively, sorted.
fn read_ids(dir: &Path) -> Vec<i64> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable lake") {
        let path = entry.expect("readable lake").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && !name.starts_with('_') {
            ids.extend(read_ids(&path));
        } else if name.ends_with(".parquet") && !name.starts_with('.') {
            let file = std::fs::File::open(&path).expect("readable file");
            for batch in ParquetRecordBatchReader::try_new(file, 1024).expect("a Parquet file") {
                let batch = batch.expect("readable batch");
                let id = batch.column_by_name("id").expect("an id column");
                ids.extend(id.as_primitive::<Int64Type>().values().iter().copied());
            }
        }
    }
    ids.sort();
    ids
}

#[tokio::main]
async fn main() -> filesink::Result<()> {
    let temp = tempfile::tempdir().expect("a temporary directory");
    let lake: PathBuf = match std::env::args().nth(1) {
        Some(dir) => dir.into(),
        None => temp.path().join("lake"),
    };
    let log: Log = Arc::default();
    append_orders(&log, 0..1_000);

    // The crash: records after the 200th are written, never checkpointed.
    let first = ingest(&log, &lake).stop_after_records(250).run().await?;
    assert_eq!(first.status, IngestStatus::Stopped);
    println!("first run: stopped after {} records", first.records);

    // The restart seeks the log to offset 200, the last complete checkpoint.
    let second = ingest(&log, &lake).run().await?;
    assert_eq!(second.status, IngestStatus::Finished);
    println!(
        "second run: {} records from the last checkpoint on, {} in the lake",
        second.records, second.records_total
    );
    assert_eq!(read_ids(&lake), (0..1_000).collect::<Vec<_>>());

    // More orders arrive; the finished job takes only those.
    append_orders(&log, 1_000..1_300);
    let third = ingest(&log, &lake).run().await?;
    assert_eq!(third.records, 300);
    println!("third run: {} new records", third.records);

    // And with nothing new, a rerun changes nothing.
    let fourth = ingest(&log, &lake).run().await?;
    assert_eq!(fourth.status, IngestStatus::AlreadyFinished);

    assert_eq!(read_ids(&lake), (0..1_300).collect::<Vec<_>>());
    println!("every order is in the lake exactly once");
    Ok(())
}
