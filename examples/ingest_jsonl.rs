//! Ingestion through the library: a JSON-lines file into a lake partitioned by day, as
//! Parquet, exactly once. The first run stops once it has written 2,500 records, before
//! their checkpoint, as a killed process would; the second run resumes from the last complete
//! checkpoint and finishes. Reading the lake back finds every record exactly once.
//!
//! Run with `cargo run --example ingest_jsonl -- ./lake-example`, naming a directory that
//! does not exist yet.

use std::collections::BTreeSet;
use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use arrow::record_batch::RecordBatch;
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, IngestSummary, Input};
use filesink::FileFormat;
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

const RECORDS: i64 = 10_000;

fn pipeline(input: &Path, lake: &Path) -> filesink::Result<Ingest> {
    Ok(Ingest::new([Input::file(input)?])
        .to_local(lake)
        .format(FileFormat::parquet())
        .partition_by(["day"])
        .checkpoint_every(CheckpointEvery::Rows(1_000)))
}

fn report(run: &str, s: &IngestSummary) {
    println!(
        "{run}: {:?}, {} records this run, {} in the job's last checkpoint ({}), {} file(s) \
         committed in {} checkpoint(s)",
        s.status, s.records, s.records_total, s.last_checkpoint, s.files, s.checkpoints
    );
}

/// Every `id` in the Parquet files under `dir`, recursively.
fn read_ids(dir: &Path, ids: &mut Vec<i64>) -> filesink::Result<()> {
    for entry in std::fs::read_dir(dir).expect("readable lake") {
        let path = entry.expect("readable lake").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('_') || name.starts_with('.') {
            continue; // the sink's metadata, hidden files
        }
        if path.is_dir() {
            read_ids(&path, ids)?;
        } else if name.ends_with(".parquet") {
            let file = std::fs::File::open(&path).expect("readable part file");
            for batch in ParquetRecordBatchReader::try_new(file, 8192)? {
                let batch: RecordBatch = batch?;
                let col = batch.column_by_name("id").expect("an id column");
                ids.extend(col.as_primitive::<Int64Type>().values().iter().copied());
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> filesink::Result<()> {
    let lake = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "lake-example".to_string());
    let lake = Path::new(&lake);
    if lake.exists() {
        eprintln!(
            "`{}` exists; name a directory that does not",
            lake.display()
        );
        std::process::exit(2);
    }
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let input = scratch.path().join("events.jsonl");
    let lines: String = (0..RECORDS)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"amount\":{}.5}}\n",
                28 + i % 3,
                i % 100
            )
        })
        .collect();
    std::fs::write(&input, lines).expect("a writable temporary directory");

    // Run 1: "crashes" once 2,500 records are written (at 3,000: records come in chunks that
    // end at the checkpoints); the records after the 2,000th are written, never checkpointed.
    let first = pipeline(&input, lake)?
        .job("example")
        .stop_after_records(2_500)
        .run()
        .await?;
    report("run 1", &first);
    assert_eq!(first.status, IngestStatus::Stopped);

    // Run 2: the same pipeline restores checkpoint "2,000 records", removes what came after
    // it, and reads on from there.
    let second = pipeline(&input, lake)?.job("example").run().await?;
    report("run 2", &second);
    assert_eq!(second.status, IngestStatus::Finished);
    assert_eq!(second.records_total, RECORDS as u64);

    // Exactly once: every id, once.
    let mut ids = Vec::new();
    read_ids(lake, &mut ids)?;
    let distinct: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), RECORDS as usize, "no record twice");
    assert_eq!(distinct, (0..RECORDS).collect(), "no record lost");
    println!(
        "{} records in `{}`, each exactly once",
        ids.len(),
        lake.display()
    );

    // Run 3: the job is finished; nothing to do.
    let third = pipeline(&input, lake)?.job("example").run().await?;
    report("run 3", &third);
    assert_eq!(third.status, IngestStatus::AlreadyFinished);
    Ok(())
}
