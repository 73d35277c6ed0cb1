//! Measurement 3: the same generated rows through the sink and through the format's plain
//! writer, with the peak resident memory of the sink's run.

use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use filesink::SinkBuilder;

use super::floor::create_new;
use super::payload::splitmix64;
use super::report::Ingest;
use super::roll::sink_builder;
use super::work::Progress;
use super::{BenchArgs, BenchFormat, BoxError};

/// Rows of the ingest measurement.
pub(super) const INGEST_ROWS: usize = 32 * INGEST_BATCH_ROWS;

/// Rows per batch of the ingest measurement.
pub(super) const INGEST_BATCH_ROWS: usize = 8192;

/// Measurement 3: generated rows through the sink (one checkpoint) and through the format's
/// plain writer (one file, one fdatasync).
pub(super) async fn ingest(args: &BenchArgs, work: &Path) -> Result<Ingest, BoxError> {
    let batches = ingest_batches(args.partitions);
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
    let progress = Progress::start("ingest", 2 * batches.len() as u64);

    let plain_dir = work.join("ingest-plain");
    std::fs::create_dir_all(&plain_dir)?;
    let t0 = Instant::now();
    plain_write(
        args.format,
        &plain_dir.join(format!("data.{}", args.format.name())),
        &batches,
        &progress,
    )?;
    let plain_seconds = t0.elapsed().as_secs_f64();

    let sink = sink_builder(&work.join("ingest-sink"), args.format, args.partitions)?.build()?;
    let rss_before_bytes = trim_and_reset_peak_rss();
    let t0 = Instant::now();
    let mut writer = sink.create_writer();
    for batch in &batches {
        writer.write(batch).await?;
        progress.advance(1);
    }
    writer.end_of_input().await?;
    let committables = writer.prepare_commit(1).await?.committables;
    let summary = sink.committer().commit_all(&committables).await?;
    let sink_seconds = t0.elapsed().as_secs_f64();
    let sink_peak_rss_bytes = proc_status_bytes("VmHWM:");
    progress.finish(&format!(
        "{:.0} rows/s through the sink",
        rows as f64 / sink_seconds
    ));

    Ok(Ingest {
        rows,
        partitions: args.partitions,
        files: summary.committed,
        sink_seconds,
        sink_rows_per_sec: rows as f64 / sink_seconds,
        plain_seconds,
        plain_rows_per_sec: rows as f64 / plain_seconds,
        time_ratio: sink_seconds / plain_seconds,
        sink_peak_rss_bytes,
        rss_before_bytes,
        buffer_bytes_max: SinkBuilder::DEFAULT_BUFFER_BYTES_MAX,
    })
}

pub(super) fn plain_write(
    format: BenchFormat,
    path: &Path,
    batches: &[RecordBatch],
    progress: &Progress,
) -> Result<(), BoxError> {
    let file = create_new(path)?;
    let file = match format {
        BenchFormat::Parquet => {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build();
            let mut w =
                parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(props))?;
            for b in batches {
                w.write(b)?;
                progress.advance(1);
            }
            w.finish()?;
            // The footer is written; the writer only hands out its file by reference now.
            w.inner().try_clone()?
        }
        BenchFormat::Jsonl => {
            let mut w = arrow::json::LineDelimitedWriter::new(BufWriter::new(file));
            for b in batches {
                w.write(b)?;
                progress.advance(1);
            }
            w.finish()?;
            w.into_inner().into_inner().map_err(|e| e.into_error())?
        }
        BenchFormat::Csv => {
            let mut w = arrow::csv::Writer::new(BufWriter::new(file));
            for b in batches {
                w.write(b)?;
                progress.advance(1);
            }
            w.into_inner().into_inner().map_err(|e| e.into_error())?
        }
    };
    file.sync_data()?;
    Ok(())
}

/// Ingest rows: id int64, part string (`partitions` values), user string, amount double.
pub(super) fn ingest_batches(partitions: u64) -> Vec<RecordBatch> {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let mut rng = 0x5eed_u64;
    (0..INGEST_ROWS / INGEST_BATCH_ROWS)
        .map(|b| {
            let start = (b * INGEST_BATCH_ROWS) as i64;
            let mut parts = Vec::with_capacity(INGEST_BATCH_ROWS);
            let mut users = Vec::with_capacity(INGEST_BATCH_ROWS);
            let mut amounts = Vec::with_capacity(INGEST_BATCH_ROWS);
            for i in 0..INGEST_BATCH_ROWS {
                let r = splitmix64(&mut rng);
                let row = b * INGEST_BATCH_ROWS + i;
                // The first rows name every partition once, the rest are random.
                let p = if (row as u64) < partitions {
                    row as u64
                } else {
                    r % partitions
                };
                parts.push(p.to_string());
                users.push(format!("user-{:05}", (r >> 8) % 100_000));
                amounts.push(((r >> 32) % 1_000_000) as f64 / 100.0);
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(
                    start..start + INGEST_BATCH_ROWS as i64,
                )),
                Arc::new(StringArray::from(parts)),
                Arc::new(StringArray::from(users)),
                Arc::new(Float64Array::from(amounts)),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("columns match the schema")
        })
        .collect()
}

/// Frees what the allocator holds, resets the kernel's peak-RSS mark to the current resident
/// set, and returns that resident set. `None` where `/proc` does not tell.
pub(super) fn trim_and_reset_peak_rss() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    // "5" resets VmHWM (Linux 4.0 and later).
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    proc_status_bytes("VmRSS:")
}

pub(super) fn proc_status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}
