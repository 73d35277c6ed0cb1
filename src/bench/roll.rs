//! Measurement 1: part files through the sink, rolled and committed a checkpoint at a time.

use std::path::Path;
use std::time::Instant;

use filesink::bucket::HivePartitioner;
use filesink::{RollingPolicy, Sink, SinkBuilder};

use super::payload::{payload_batch, payload_batches, payload_value_len};
use super::report::{Percentiles, Roll};
use super::work::Progress;
use super::{BenchArgs, BenchFormat, BoxError};

/// Measurement 1: files through the sink, `--files-per-checkpoint` per checkpoint.
pub(super) async fn roll_and_commit(args: &BenchArgs, work: &Path) -> Result<Roll, BoxError> {
    let base = sink_builder(&work.join("roll"), args.format, args.partitions)?;
    roll_with(args, work, base).await
}

/// Measurement 1 on any sink: `work` is a local scratch directory for the calibration.
pub(super) async fn roll_with(
    args: &BenchArgs,
    work: &Path,
    base: SinkBuilder,
) -> Result<Roll, BoxError> {
    let value_len = payload_value_len(args.file_size);
    let rows_per_file = calibrate(
        args.format,
        args.file_size,
        value_len,
        &work.join("calibrate"),
    )
    .await?;
    let batches = payload_batches(rows_per_file, value_len, args.partitions);
    let sink = base
        .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(1))
        .build()?;
    let mut writer = sink.create_writer();
    let committer = sink.committer();

    let progress = Progress::start("roll and commit", args.files);
    let (mut checkpoint_ms, mut prepare_ms, mut commit_ms) = (Vec::new(), Vec::new(), Vec::new());
    let (mut files, mut bytes, mut checkpoint) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    while files < args.files {
        let n = args.files_per_checkpoint.min(args.files - files);
        for i in 0..n {
            writer
                .write(&batches[((files + i) % args.partitions) as usize])
                .await?;
        }
        checkpoint += 1;
        let t0 = Instant::now();
        let committables = writer.prepare_commit(checkpoint).await?.committables;
        let t1 = Instant::now();
        let summary = committer.commit_all(&committables).await?;
        let t2 = Instant::now();
        if committables.len() as u64 != n || summary.committed as u64 != n {
            return Err(format!(
                "checkpoint {checkpoint} committed {} of {n} files",
                summary.committed
            )
            .into());
        }
        prepare_ms.push(t1 - t0);
        commit_ms.push(t2 - t1);
        checkpoint_ms.push(t2 - t0);
        bytes += committables.iter().map(|c| c.size_bytes).sum::<u64>();
        files += n;
        progress.advance(n);
    }
    let seconds = start.elapsed().as_secs_f64();
    progress.finish(&format!("{:.0} files/s", files as f64 / seconds));
    Ok(Roll {
        files,
        checkpoints: checkpoint,
        file_bytes: bytes / files.max(1),
        bytes,
        seconds,
        files_per_sec: files as f64 / seconds,
        mb_per_sec: bytes as f64 / seconds / 1e6,
        checkpoint_latency_ms: Percentiles::of(checkpoint_ms),
        prepare_commit_latency_ms: Percentiles::of(prepare_ms),
        commit_latency_ms: Percentiles::of(commit_ms),
    })
}

pub(super) fn sink_builder(
    base: &Path,
    format: BenchFormat,
    partitions: u64,
) -> Result<SinkBuilder, BoxError> {
    let builder = Sink::local(base)?.format(format.file_format());
    Ok(if partitions > 1 {
        builder.bucket_assigner(HivePartitioner::new(["part"])?)
    } else {
        builder
    })
}

/// Rows of `value_len`-byte values per part file so that a file is about `file_size` bytes:
/// two probe files through the sink give the per-row and fixed bytes of the format.
pub(super) async fn calibrate(
    format: BenchFormat,
    file_size: u64,
    value_len: usize,
    dir: &Path,
) -> Result<usize, BoxError> {
    let sink = Sink::local(dir)?
        .format(format.file_format())
        .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(1))
        .build()?;
    let mut writer = sink.create_writer();
    let (r1, r2) = (4usize, 8usize);
    writer.write(&payload_batch(r1, value_len, None)).await?;
    writer.write(&payload_batch(r2, value_len, None)).await?;
    let committables = writer.prepare_commit(1).await?.committables;
    sink.committer().commit_all(&committables).await?;
    let (s1, s2) = match committables.as_slice() {
        [a, b] => (a.size_bytes as f64, b.size_bytes as f64),
        _ => return Err("calibration did not produce two files".into()),
    };
    let per_row = ((s2 - s1) / (r2 - r1) as f64).max(1.0);
    let fixed = (s1 - per_row * r1 as f64).max(0.0);
    let rows = ((file_size as f64 - fixed) / per_row).round();
    std::fs::remove_dir_all(dir)?;
    Ok(rows.max(1.0) as usize)
}
