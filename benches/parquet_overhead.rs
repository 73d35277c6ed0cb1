//! Parquet through the sink vs raw `parquet::arrow::ArrowWriter`.
//!
//! The same batches (id int64, day string with 24 values, user string, amount double), the
//! same `WriterProperties` (Snappy, parquet's defaults otherwise), one partition. Each
//! iteration writes every batch once:
//!
//! - `raw_arrow_writer/one_file`: `ArrowWriter<File>` writes one file, no fsync (the baseline
//!   the issue names; what a user without exactly-once would write).
//! - `raw_arrow_writer_fsync/<K>`: a new file every K batches, each fdatasynced at its end:
//!   the durability the sink pays for, without the protocol.
//! - `sink/<K>`: the sink with a checkpoint every K batches (`prepare_commit` + `commit_all`;
//!   Parquet rolls at every checkpoint, so one file per checkpoint).
//!
//! The sink's overhead is `sink/<K>` over `raw_arrow_writer/one_file`; `scripts/bench-plot`
//! computes the ratios from one run. Files go to `$FILESINK_BENCH_DIR` (default: the system
//! temp dir); each iteration writes into a fresh directory that is removed outside the timing.

mod common;

use std::fs::File;

use common::{bench_root, generate, test_mode, write_with_checkpoints, Scratch};
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use filesink::{FileFormat, Sink};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// Checkpoint intervals, in batches.
const CHECKPOINT_EVERY_BATCHES: [usize; 3] = [8, 32, 128];

fn bench(c: &mut Criterion) {
    let test = test_mode();
    // 128 batches of 8,192 rows (1 Mi rows) when measuring; a few small ones under
    // `cargo test --benches`, which runs every routine once.
    let (n_batches, rows_per_batch) = if test { (8, 256) } else { (128, 8192) };
    let batches = generate(n_batches, rows_per_batch);
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let root = bench_root("parquet_overhead");

    let mut group = c.benchmark_group("parquet_overhead");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(rows));

    group.bench_function(BenchmarkId::new("raw_arrow_writer", "one_file"), |b| {
        b.iter_batched(
            || Scratch::new(&root.0),
            |dir| {
                let file = File::create(dir.0.join("part-0.parquet")).expect("create");
                let mut w = ArrowWriter::try_new(file, batches[0].schema(), Some(props.clone()))
                    .expect("writer");
                for batch in &batches {
                    w.write(batch).expect("write");
                }
                w.close().expect("close");
                dir
            },
            BatchSize::PerIteration,
        )
    });

    // Under `cargo test --benches` there are fewer batches than the longest interval.
    let mut intervals: Vec<usize> = CHECKPOINT_EVERY_BATCHES
        .iter()
        .map(|&k| k.min(n_batches))
        .collect();
    intervals.dedup();
    for k in intervals {
        group.bench_function(BenchmarkId::new("raw_arrow_writer_fsync", k), |b| {
            b.iter_batched(
                || Scratch::new(&root.0),
                |dir| {
                    for (i, chunk) in batches.chunks(k).enumerate() {
                        let file =
                            File::create(dir.0.join(format!("part-{i}.parquet"))).expect("create");
                        let mut w =
                            ArrowWriter::try_new(file, chunk[0].schema(), Some(props.clone()))
                                .expect("writer");
                        for batch in chunk {
                            w.write(batch).expect("write");
                        }
                        w.finish().expect("finish");
                        w.inner().sync_data().expect("fdatasync");
                    }
                    dir
                },
                BatchSize::PerIteration,
            )
        });

        group.bench_function(BenchmarkId::new("sink", k), |b| {
            b.iter_batched(
                || {
                    let dir = Scratch::new(&root.0);
                    let sink = Sink::local(&dir.0)
                        .expect("sink")
                        .format(FileFormat::parquet_with(props.clone()))
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
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
