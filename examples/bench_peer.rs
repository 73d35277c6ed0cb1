//! The filesink side of `scripts/bench-peers`: reads a Parquet input into memory (not timed),
//! then writes it through the sink with Hive partitioning and Snappy Parquet (timed: from
//! building the sink to the last commit), and prints one JSON line with the timing.
//!
//! ```text
//! cargo run --release --example bench_peer -- --input data.parquet --output out/ \
//!     [--partition-by day] [--batch-rows 65536] [--checkpoint-rows 0]
//! ```
//!
//! `--checkpoint-rows 0` (the default) takes one checkpoint at the end, as a batch job (and
//! the peers, which write once) would; `N` takes a checkpoint every N rows.

use std::fs::File;
use std::path::PathBuf;
use std::time::Instant;

use filesink::bucket::HivePartitioner;
use filesink::{FileFormat, Sink};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    input: PathBuf,
    output: PathBuf,
    partition_by: String,
    batch_rows: usize,
    checkpoint_rows: u64,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut input = None;
    let mut output = None;
    let mut partition_by = "day".to_string();
    let mut batch_rows = 65_536usize;
    let mut checkpoint_rows = 0u64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--input" => input = Some(PathBuf::from(value()?)),
            "--output" => output = Some(PathBuf::from(value()?)),
            "--partition-by" => partition_by = value()?,
            "--batch-rows" => batch_rows = value()?.parse()?,
            "--checkpoint-rows" => checkpoint_rows = value()?.parse()?,
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    Ok(Args {
        input: input.ok_or("--input is required")?,
        output: output.ok_or("--output is required")?,
        partition_by,
        batch_rows,
        checkpoint_rows,
    })
}

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let read_start = Instant::now();
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&args.input)?)?
        .with_batch_size(args.batch_rows)
        .build()?;
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    let read_seconds = read_start.elapsed().as_secs_f64();
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let start = Instant::now();
    let (files, checkpoints) = runtime.block_on(async {
        let mut builder = Sink::local(&args.output)?.format(FileFormat::parquet());
        if !args.partition_by.is_empty() {
            builder = builder.bucket_assigner(HivePartitioner::new([args.partition_by.as_str()])?);
        }
        let sink = builder.build()?;
        let committer = sink.committer();
        let mut writer = sink.create_writer();
        let (mut files, mut checkpoint, mut since) = (0usize, 0u64, 0u64);
        for batch in &batches {
            writer.write(batch).await?;
            since += batch.num_rows() as u64;
            if args.checkpoint_rows > 0 && since >= args.checkpoint_rows {
                checkpoint += 1;
                let committables = writer.prepare_commit(checkpoint).await?.committables;
                files += committer.commit_all(&committables).await?.committed;
                since = 0;
            }
        }
        checkpoint += 1;
        let committables = writer.prepare_commit(checkpoint).await?.committables;
        files += committer.commit_all(&committables).await?.committed;
        Ok::<_, BoxError>((files, checkpoint))
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let peak_rss_bytes = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line["VmHWM:".len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024);
    println!(
        "{}",
        serde_json::json!({
            "tool": "filesink",
            "rows": rows,
            "files": files,
            "checkpoints": checkpoints,
            "read_seconds": read_seconds,
            "write_seconds": seconds,
            "peak_rss_bytes": peak_rss_bytes,
        })
    );
    Ok(())
}
