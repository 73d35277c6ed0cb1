//! The job's writers encoding at the same time ([`Coordinator::write`] with 1, 2 and 4
//! writers) against one single-threaded `ArrowWriter` per partition on the same batches.
//!
//! The same 1 Mi rows as `partitioned_ingest` (id int64, day string with 24 values, user
//! string, amount double), Snappy Parquet, 128 batches of 8,192 rows:
//!
//! - `arrow_writer/24`: the batches split by `day` with the same Hive partitioner, one
//!   `ArrowWriter` per partition into memory (`Vec<u8>`), no files, no fsync: the encoding
//!   floor on one thread;
//! - `coordinator/24/{1,2,4}`: the job through `Coordinator::write` with that many writers,
//!   one checkpoint at the end (files fsynced, renamed, directories fsynced) on a
//!   multi-threaded runtime with as many threads as the machine has cores.
//!
//! Throughput is in rows. The ratio `coordinator/24/N` over `arrow_writer/24` is what the
//! writers gain over one thread, after paying for durability; on this 2-core machine, with
//! nothing else running, 2 writers can at best halve the encoding time.
//!
//! Files go to `$FILESINK_BENCH_DIR` (default: the system temp dir), a fresh directory per
//! iteration, removed outside the timing.

mod common;

use std::collections::HashMap;

use common::{bench_root, generate_with_users, test_mode, Scratch, Users};
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use filesink::bucket::{BucketAssigner, HivePartitioner};
use filesink::{Coordinator, FileFormat, Sink};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

fn bench(c: &mut Criterion) {
    let test = test_mode();
    let (n_batches, rows_per_batch) = if test { (4, 512) } else { (128, 8192) };
    let batches = generate_with_users(n_batches, rows_per_batch, Users::EachFirst(1000));
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let root = bench_root("parallel_encode");
    let partitioner = HivePartitioner::new(["day"]).expect("partitioner");

    let mut group = c.benchmark_group("parallel_encode");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(rows));

    group.bench_function(BenchmarkId::new("arrow_writer", 24), |b| {
        b.iter(|| {
            let props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build();
            let mut writers: HashMap<String, ArrowWriter<Vec<u8>>> = HashMap::new();
            for batch in &batches {
                for (bucket, sub) in partitioner
                    .assign(batch, chrono::Utc::now())
                    .expect("assign")
                {
                    let w = writers.entry(bucket.to_string()).or_insert_with(|| {
                        ArrowWriter::try_new(Vec::new(), sub.schema(), Some(props.clone()))
                            .expect("writer")
                    });
                    w.write(&sub).expect("write");
                }
            }
            writers
                .into_values()
                .map(|w| w.into_inner().expect("finish").len())
                .sum::<usize>()
        })
    });

    for writers in [1usize, 2, 4] {
        group.bench_function(BenchmarkId::new("coordinator/24", writers), |b| {
            b.iter_batched(
                || Scratch::new(&root.0),
                |dir| {
                    rt.block_on(async {
                        let sink = Sink::local(&dir.0)
                            .expect("sink")
                            .format(FileFormat::parquet())
                            .bucket_assigner(HivePartitioner::new(["day"]).expect("partitioner"))
                            .build()
                            .expect("build");
                        let mut job = Coordinator::builder(&sink, "bench")
                            .parallelism(writers)
                            .open()
                            .await
                            .expect("open");
                        for batch in &batches {
                            job.write(batch).await.expect("write");
                        }
                        let report = job.finish(&rows).await.expect("finish");
                        assert_eq!(report.committed_records, rows);
                        job.close().await.expect("close");
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
