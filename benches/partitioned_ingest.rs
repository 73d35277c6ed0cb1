//! Partitioned Parquet ingest with 1, 24 and 1,000 partitions.
//!
//! The same 1 Mi rows (id int64, day string with 24 values, user string with 1,000 values,
//! amount double) go through the sink with Snappy Parquet, in 128 batches of 8,192 rows, and
//! one checkpoint at the end (`prepare_commit` + `commit_all`), as a batch job would:
//!
//! - `sink/1`: no partitioning (the base directory),
//! - `sink/24`: Hive partitioning by `day`,
//! - `sink/1000`: Hive partitioning by `user`.
//!
//! Throughput is in rows. The sink is configured with a memory budget
//! (`SinkBuilder::buffer_bytes_max`) of [`BUFFER_BYTES_MAX`] for 1 and 24 partitions and
//! [`WIDE_BUFFER_BYTES_MAX`] for 1,000: an open Parquet file holding any rows needs about
//! 150 KiB (parquet-rs's dictionary tables), so 1,000 of them cannot fit in 16 MiB; below
//! that the sink keeps the budget by rolling files early, about 114,000 of them here.
//! `FILESINK_BENCH_WIDE_BUDGET_MIB=16` measures that case. Before the timed runs, each
//! configuration runs once more, untimed, to measure memory: the peak resident set
//! (`VmHWM` of `/proc/self/status`, reset through `/proc/self/clear_refs`) above the resident
//! set before the run, and the largest `SinkWriter::buffered_bytes` seen after a write. The
//! results are printed and written to `<target>/criterion/partitioned_ingest/memory.json`.
//!
//! Files go to `$FILESINK_BENCH_DIR` (default: the system temp dir), into a fresh directory
//! per iteration, removed outside the timing.

mod common;

use std::path::{Path, PathBuf};

use common::{bench_root, generate_with_users, test_mode, Scratch, Users};
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use filesink::bucket::HivePartitioner;
use filesink::{FileFormat, Sink};

/// The memory budget the sink is configured with, for 1 and 24 partitions.
const BUFFER_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// The memory budget for 1,000 partitions: room for 1,000 open Parquet files and some data.
const WIDE_BUFFER_BYTES_MAX: u64 = 256 * 1024 * 1024;

fn bench(c: &mut Criterion) {
    let test = test_mode();
    let (n_batches, rows_per_batch) = if test { (4, 512) } else { (128, 8192) };
    // Under `cargo test --benches` the widest case has 40 partitions, not 1,000: every
    // partition costs a few fsyncs, and test mode must stay quick.
    let users = if test { 40 } else { 1000 };
    let batches = generate_with_users(n_batches, rows_per_batch, Users::EachFirst(users));
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let root = bench_root("partitioned_ingest");
    let wide_budget = std::env::var("FILESINK_BENCH_WIDE_BUDGET_MIB")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .map_or(WIDE_BUFFER_BYTES_MAX, |m| m * 1024 * 1024);
    let configs: [(usize, Option<&str>, u64); 3] = [
        (1, None, BUFFER_BYTES_MAX),
        (24, Some("day"), BUFFER_BYTES_MAX),
        (users, Some("user"), wide_budget),
    ];

    let build = |dir: &Path, column: Option<&str>, budget: u64| {
        let mut builder = Sink::local(dir)
            .expect("sink")
            .format(FileFormat::parquet())
            .buffer_bytes_max(budget);
        if let Some(column) = column {
            builder = builder.bucket_assigner(HivePartitioner::new([column]).expect("partitioner"));
        }
        builder.build().expect("build")
    };
    let ingest = |sink: &Sink, max_buffered: &mut u64| {
        rt.block_on(async {
            let mut writer = sink.create_writer();
            for batch in &batches {
                writer.write(batch).await.expect("write");
                *max_buffered = (*max_buffered).max(writer.buffered_bytes());
            }
            let committables = writer
                .prepare_commit(1)
                .await
                .expect("prepare")
                .committables;
            let summary = sink
                .committer()
                .commit_all(&committables)
                .await
                .expect("commit");
            summary.committed
        })
    };

    if !test {
        let mut report = Vec::new();
        for (partitions, column, budget) in configs {
            let dir = Scratch::new(&root.0);
            let sink = build(&dir.0, column, budget);
            let rss_before = trim_and_reset_peak();
            let mut max_buffered = 0;
            let files = ingest(&sink, &mut max_buffered);
            let peak = proc_status_kib("VmHWM:").unwrap_or(0) * 1024;
            let above = peak.saturating_sub(rss_before);
            println!(
                "partitioned_ingest/sink/{partitions}: {files} files, peak RSS {:.1} MiB \
                 ({:.1} MiB above the {:.1} MiB before), max buffered_bytes {:.1} MiB, \
                 budget {:.1} MiB",
                mib(peak),
                mib(above),
                mib(rss_before),
                mib(max_buffered),
                mib(budget)
            );
            report.push(serde_json::json!({
                "partitions": partitions,
                "files": files,
                "rows": rows,
                "rss_before_bytes": rss_before,
                "peak_rss_bytes": peak,
                "peak_rss_above_before_bytes": above,
                "max_buffered_bytes": max_buffered,
                "buffer_bytes_max": budget,
            }));
        }
        let out = target_dir().join("criterion/partitioned_ingest");
        if std::fs::create_dir_all(&out).is_ok() {
            let _ = std::fs::write(
                out.join("memory.json"),
                serde_json::to_vec_pretty(&report).expect("json"),
            );
        }
    }

    let mut group = c.benchmark_group("partitioned_ingest");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(rows));
    for (partitions, column, budget) in configs {
        group.bench_function(BenchmarkId::new("sink", partitions), |b| {
            b.iter_batched(
                || {
                    let dir = Scratch::new(&root.0);
                    let sink = build(&dir.0, column, budget);
                    (dir, sink)
                },
                |(dir, sink)| {
                    let files = ingest(&sink, &mut 0);
                    // More files than partitions when the memory budget rolled some early.
                    assert!(
                        files >= partitions,
                        "{files} files for {partitions} partitions"
                    );
                    dir
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// Returns freed heap to the system, resets the peak resident set to the current one, and
/// returns the current resident set in bytes.
fn trim_and_reset_peak() -> u64 {
    // SAFETY: malloc_trim has no preconditions.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
    // "5" resets VmHWM to the current RSS (Linux 4.0+); ignore failure (then VmHWM is the
    // process's peak so far, an upper bound).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    proc_status_kib("VmRSS:").unwrap_or(0) * 1024
}

fn proc_status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
