//! The library in one page: a job that writes partitioned Parquet with exactly-once
//! checkpoints, crashes in the middle, restarts and finishes; every record is visible once.
//!
//! Run with `cargo run --example quickstart -- ./lake-example`.

use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use filesink::bucket::HivePartitioner;
use filesink::{Coordinator, FileFormat, Sink};

fn batch(schema: &Arc<Schema>, start: i64, len: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..start + len).collect();
    let days: Vec<String> = ids
        .iter()
        .map(|i| format!("2026-11-{:02}", 28 + i % 3))
        .collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(days)),
        ],
    )
    .expect("columns match the schema")
}

#[tokio::main]
async fn main() -> filesink::Result<()> {
    let base = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "lake-example".to_string());
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
    ]));
    let sink = Sink::local(&base)?
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(["day"])?)
        .build()?;

    // First run: 3 checkpoints of 1,000 records, then a "crash" with 500 records unvoted.
    let mut job = Coordinator::open(&sink, "quickstart", 1).await?;
    let mut next: i64 = job.source_position::<i64>()?.unwrap_or(0);
    if job.is_finished() {
        println!("job `quickstart` in {base} is finished already; nothing to do");
        return Ok(());
    }
    for _ in 0..3 {
        job.writer().write(&batch(&schema, next, 1_000)).await?;
        next += 1_000;
        let report = job.checkpoint(&next).await?;
        println!(
            "checkpoint {}: {} files committed",
            report.checkpoint_id, report.committed_files
        );
    }
    job.writer().write(&batch(&schema, next, 500)).await?;
    drop(job); // the process dies here: the 500 records are in hidden in-progress files

    // Restart: resume from the last complete checkpoint and finish the input.
    let mut job = Coordinator::open(&sink, "quickstart", 1).await?;
    let mut next = job.source_position::<i64>()?.unwrap_or(0);
    println!("restarted at record {next}");
    while next < 5_000 {
        job.writer().write(&batch(&schema, next, 1_000)).await?;
        next += 1_000;
        job.checkpoint(&next).await?;
    }
    let report = job.finish(&next).await?;
    println!(
        "finished at checkpoint {}; output in {base}/day=*/",
        report.checkpoint_id
    );
    Ok(())
}
