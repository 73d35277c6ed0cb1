//! Issue 5, measurement 1: Parquet through the sink vs raw `parquet::arrow::ArrowWriter`.
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

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
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
                        let mut writer = sink.create_writer();
                        let committer = sink.committer();
                        for (i, chunk) in batches.chunks(k).enumerate() {
                            for batch in chunk {
                                writer.write(batch).await.expect("write");
                            }
                            let committables =
                                writer.prepare_commit(i as u64 + 1).await.expect("prepare");
                            committer.commit_all(&committables).await.expect("commit");
                        }
                    });
                    dir
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// `cargo test --benches` runs the binary without `--bench`: criterion then runs every
/// routine once, and the data is kept small so that this takes a second.
fn test_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--test")
}

/// Deterministic data: id int64, day string (24 values), user string, amount double.
fn generate(n_batches: usize, rows_per_batch: usize) -> Vec<RecordBatch> {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let mut rng = 0x5eed_u64;
    (0..n_batches)
        .map(|b| {
            let start = (b * rows_per_batch) as i64;
            let ids = Int64Array::from_iter_values(start..start + rows_per_batch as i64);
            let mut days = Vec::with_capacity(rows_per_batch);
            let mut users = Vec::with_capacity(rows_per_batch);
            let mut amounts = Vec::with_capacity(rows_per_batch);
            for _ in 0..rows_per_batch {
                let r = splitmix64(&mut rng);
                days.push(format!("2026-01-{:02}", 1 + r % 24));
                users.push(format!("user-{:05}", (r >> 8) % 100_000));
                amounts.push(((r >> 32) % 1_000_000) as f64 / 100.0);
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(ids),
                Arc::new(StringArray::from(days)),
                Arc::new(StringArray::from(users)),
                Arc::new(Float64Array::from(amounts)),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("batch")
        })
        .collect()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A directory removed when dropped (criterion drops routine outputs outside the timing).
struct Scratch(PathBuf);

impl Scratch {
    fn new(root: &Path) -> Scratch {
        Scratch::named(root, "")
    }

    fn named(root: &Path, prefix: &str) -> Scratch {
        let dir = root.join(format!("{prefix}{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bench_root(name: &str) -> Scratch {
    let base = std::env::var_os("FILESINK_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    Scratch::named(&base, &format!("filesink-bench-{name}-"))
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
