//! JSON lines through the sink vs a plain buffered writer.
//!
//! The same batches are encoded by the same encoder (arrow-json's `LineDelimitedWriter`), so
//! both sides produce the same bytes. A checkpoint every K batches:
//!
//! - `raw_bufwriter/<K>`: `LineDelimitedWriter<BufWriter<File>>`, one file; at each checkpoint
//!   `flush` + `fdatasync`. The baseline the issue names.
//! - `sink/<K>`: the sink with its default rolling policy: the file stays open across
//!   checkpoints and is persisted (fdatasync) at each `prepare_commit`; the last checkpoint
//!   rolls it (`end_of_input`) and commits it.
//! - `sink_roll_on_checkpoint/<K>`: the sink with `RollingPolicy::on_checkpoint()`: one file
//!   per checkpoint, each sealed and committed (rename + directory fsync).
//!
//! Throughput is in bytes of JSON written. Files go to `$FILESINK_BENCH_DIR` (default: the
//! system temp dir), into a fresh directory per iteration, removed outside the timing.

mod common;

use std::fs::File;
use std::io::{BufWriter, Write};

use arrow::json::LineDelimitedWriter;
use common::{bench_root, generate, test_mode, write_with_checkpoints, Scratch};
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use filesink::{FileFormat, RollingPolicy, Sink};

/// Checkpoint intervals, in batches.
const CHECKPOINT_EVERY_BATCHES: [usize; 3] = [4, 16, 64];

fn bench(c: &mut Criterion) {
    let test = test_mode();
    let (n_batches, rows_per_batch) = if test { (8, 256) } else { (64, 4096) };
    let batches = generate(n_batches, rows_per_batch);
    let json_bytes = {
        let mut out = Vec::new();
        let mut w = LineDelimitedWriter::new(&mut out);
        for b in &batches {
            w.write(b).expect("encode");
        }
        w.finish().expect("finish");
        out.len() as u64
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let root = bench_root("jsonl_overhead");

    let mut group = c.benchmark_group("jsonl_overhead");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Bytes(json_bytes));

    // Under `cargo test --benches` there are fewer batches than the longest interval.
    let mut intervals: Vec<usize> = CHECKPOINT_EVERY_BATCHES
        .iter()
        .map(|&k| k.min(n_batches))
        .collect();
    intervals.dedup();
    for k in intervals {
        group.bench_function(BenchmarkId::new("raw_bufwriter", k), |b| {
            b.iter_batched(
                || Scratch::new(&root.0),
                |dir| {
                    let file = File::create(dir.0.join("part-0.jsonl")).expect("create");
                    let mut w = LineDelimitedWriter::new(BufWriter::new(file));
                    for chunk in batches.chunks(k) {
                        for batch in chunk {
                            w.write(batch).expect("write");
                        }
                        let inner = w.get_mut();
                        inner.flush().expect("flush");
                        inner.get_ref().sync_data().expect("fdatasync");
                    }
                    dir
                },
                BatchSize::PerIteration,
            )
        });

        for (name, policy) in [
            ("sink", RollingPolicy::default()),
            ("sink_roll_on_checkpoint", RollingPolicy::on_checkpoint()),
        ] {
            group.bench_function(BenchmarkId::new(name, k), |b| {
                b.iter_batched(
                    || {
                        let dir = Scratch::new(&root.0);
                        let sink = Sink::local(&dir.0)
                            .expect("sink")
                            .format(FileFormat::json_lines())
                            .rolling_policy(policy.clone())
                            .build()
                            .expect("build");
                        (dir, sink)
                    },
                    |(dir, sink)| {
                        rt.block_on(async {
                            write_with_checkpoints(&sink, &batches, k).await;
                        });
                        dir
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
