//! S3 through the sink against object_store's own multipart upload,
//! and committing 100 pending uploads in parallel against one by one.
//!
//! Needs an S3 server: `FILESINK_S3_BUCKET` and the usual `AWS_*` variables (`AWS_ENDPOINT`,
//! `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`);
//! `scripts/garage start DIR && . DIR/env` provides them on 127.0.0.1. Without
//! `FILESINK_S3_BUCKET` the bench prints why and measures nothing.
//!
//! Group `s3_upload` (throughput in bytes), the same bytes on both sides: JSON lines of one
//! string column, 1 MiB per batch (1,024 lines of 1 KiB), encoded by arrow-json:
//!
//! - `sink/<files>x<size>`: `ObjectStorage::s3` with its defaults (8 MiB parts, 4 part uploads
//!   in flight per file), one `write` per batch, `prepare_commit` (last parts, wait for all)
//!   and `commit_all` (CompleteMultipartUpload). With 8 files the batches go round-robin to 8
//!   Hive partitions (`part=0` .. `part=7`; the partition column is not written), so 8 uploads
//!   are open at once, as in a partitioned job.
//! - `object_store_multipart/<files>x<size>`: `WriteMultipart` over `put_multipart`, the same
//!   part size, `wait_for_capacity(4)` before each write of the same encoded batch, the files
//!   written round-robin the same way, then `finish` of every file at once. No encoding: the
//!   bytes are encoded once, before the timing. This is the baseline the issue names.
//! - `object_store_multipart_encode/<files>x<size>`: the same, but each batch is encoded with
//!   arrow-json into a reused buffer before it is written, as the sink does: what a user would
//!   write by hand without the protocol. The difference to the previous line is the encoding.
//!
//! Group `s3_commit` (throughput in files): 100 pending uploads of 4 KiB, each one part,
//! created and sealed by the sink before the timing (`iter_custom`); timed is only the commit:
//!
//! - `parallel/100`: one `Committer::commit_all` with all 100 committables (the storage runs up
//!   to 32 CompleteMultipartUpload calls at once).
//! - `sequential/100`: `commit_all` with one committable at a time.
//! - `object_store_parallel/100`, `object_store_sequential/100`: the store's own floor, 100
//!   one-part uploads of the same size completed by `MultipartStore::complete_multipart`, all
//!   at once (no bound) or one after another.
//!
//! Criterion runs one configuration after another, so drift on a shared machine (another
//! build starting) lands on some configurations and not others. With
//! `FILESINK_BENCH_INTERLEAVED_ROUNDS=R` the bench first runs R rounds in which every
//! configuration of a group runs once, in rotating order, and prints each one's median and
//! its time relative to the group's first configuration of the same shape (the median of the
//! per-round ratios).
//!
//! Every object and upload the bench creates lives under `filesink-bench-s3-<uuid>/` and is
//! removed after each iteration, outside the timing, and once more at the end.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::json::LineDelimitedWriter;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use common::{encode_json_lines, payload_batch, test_mode};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use filesink::bucket::HivePartitioner;
use filesink::storage::{Listing, ObjectStorage, Storage};
use filesink::{Committable, FileFormat, RollingPolicy, Sink};
use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};

/// Part uploads in flight per file, on both sides (the sink's default).
const UPLOADS_IN_FLIGHT_MAX: usize = ObjectStorage::DEFAULT_UPLOADS_IN_FLIGHT_MAX;
/// Part size, on both sides (the sink's default).
const PART_SIZE_BYTES: usize = ObjectStorage::DEFAULT_PART_SIZE_BYTES;
/// Pending uploads committed per iteration in `s3_commit`.
const PENDING_UPLOADS: usize = 100;

struct Env {
    bucket: String,
    /// `filesink-bench-s3-<uuid>`: everything the bench writes is under it.
    root: String,
    store: Arc<AmazonS3>,
    rt: tokio::runtime::Runtime,
}

impl Env {
    fn url(&self, sub: &str) -> String {
        format!("s3://{}/{}/{sub}", self.bucket, self.root)
    }

    fn path(&self, sub: &str) -> Path {
        Path::parse(format!("{}/{sub}", self.root)).expect("key")
    }

    /// Aborts every upload and deletes every object under `sub` of the bench's root.
    async fn clean(&self, sub: &str) {
        if let Ok(storage) = ObjectStorage::s3(&self.url(sub)) {
            for leftover in storage.list_leftovers().await.unwrap_or_default() {
                let _ = storage.remove_leftover(&leftover.path).await;
            }
        }
        let prefix = self.path(sub);
        let listed: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap_or_default();
        for meta in listed {
            let _ = self.store.delete(&meta.location).await;
        }
    }
}

fn bench(c: &mut Criterion) {
    let bucket = match std::env::var("FILESINK_S3_BUCKET") {
        Ok(b) if !b.is_empty() => b,
        _ => {
            println!(
                "s3_throughput: skipped: FILESINK_S3_BUCKET is not set. Start an S3 server \
                 (`scripts/garage start DIR && . DIR/env` runs Garage on 127.0.0.1) or set \
                 FILESINK_S3_BUCKET and AWS_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID, \
                 AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP."
            );
            return;
        }
    };
    let test = test_mode();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let store = Arc::new(
        AmazonS3Builder::from_env()
            .with_bucket_name(&bucket)
            .build()
            .expect("S3 client from AWS_* variables"),
    );
    let env = Env {
        bucket,
        root: format!("filesink-bench-s3-{}", uuid::Uuid::now_v7().simple()),
        store,
        rt,
    };
    let configs = configs(&env, test);

    let rounds: usize = std::env::var("FILESINK_BENCH_INTERLEAVED_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    if rounds > 0 && !test {
        interleaved(&env, &configs, rounds);
    }

    for (group_name, members) in &configs {
        let mut group = c.benchmark_group(*group_name);
        group.sampling_mode(SamplingMode::Flat);
        for config in members {
            group.throughput(config.throughput.clone());
            group.bench_function(BenchmarkId::new(config.name, &config.param), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| config.run(&env)).sum())
            });
        }
        group.finish();
    }
    env.rt.block_on(env.clean(""));
}

/// One benchmark: a name, a parameter, and what one iteration does.
struct Config {
    name: &'static str,
    param: String,
    throughput: Throughput,
    kind: Kind,
}

enum Kind {
    /// The sink uploads `batches` (round-robin to `files` partitions) and commits.
    SinkUpload {
        storage: Arc<dyn Storage>,
        sub: String,
        batches: Vec<RecordBatch>,
        files: usize,
        total_bytes: u64,
    },
    /// `WriteMultipart` uploads the same bytes, pre-encoded or encoded here.
    RawUpload {
        sub: String,
        payload: RecordBatch,
        encoded: Bytes,
        files: usize,
        per_file: usize,
        encode: bool,
    },
    /// The sink commits `n` pending uploads it created untimed.
    SinkCommit {
        storage: Arc<dyn Storage>,
        sub: String,
        payload: RecordBatch,
        n: usize,
        parallel: bool,
    },
    /// object_store completes `n` one-part uploads it created untimed.
    RawCommit {
        sub: String,
        bytes: Bytes,
        n: usize,
        parallel: bool,
    },
}

type Group = (&'static str, Vec<Config>);

fn configs(env: &Env, test: bool) -> Vec<Group> {
    let batch_bytes = if test { 64 << 10 } else { 1 << 20 };
    // (files, batches per file)
    let shapes: &[(usize, usize)] = if test {
        &[(1, 4), (2, 2)]
    } else {
        &[(1, 64), (8, 16)]
    };
    let payload = payload_batch(batch_bytes);
    let encoded = Bytes::from(encode_json_lines(&payload));
    assert_eq!(encoded.len(), batch_bytes, "one batch encodes to its size");
    let mut upload = Vec::new();
    for &(files, per_file) in shapes {
        let file_bytes = per_file * batch_bytes;
        let param = if test {
            format!("{files}x{}KiB", file_bytes >> 10)
        } else {
            format!("{files}x{}MiB", file_bytes >> 20)
        };
        // Batch i goes to file i % files: a `part` column the partitioner removes.
        let batches: Vec<RecordBatch> = (0..files * per_file)
            .map(|i| with_part_column(&payload, i % files))
            .collect();
        let sub = format!("sink-{param}");
        let throughput = Throughput::Bytes((files * file_bytes) as u64);
        upload.push(Config {
            name: "sink",
            param: param.clone(),
            throughput: throughput.clone(),
            kind: Kind::SinkUpload {
                storage: Arc::new(ObjectStorage::s3(&env.url(&sub)).expect("s3 storage")),
                sub,
                batches,
                files,
                total_bytes: (files * file_bytes) as u64,
            },
        });
        for (name, encode) in [
            ("object_store_multipart", false),
            ("object_store_multipart_encode", true),
        ] {
            upload.push(Config {
                name,
                param: param.clone(),
                throughput: throughput.clone(),
                kind: Kind::RawUpload {
                    sub: format!("{name}-{param}"),
                    payload: payload.clone(),
                    encoded: encoded.clone(),
                    files,
                    per_file,
                    encode,
                },
            });
        }
    }
    let mut groups: Vec<Group> = vec![("s3_upload", upload)];

    let n = if test { 4 } else { PENDING_UPLOADS };
    let small = payload_batch(4 << 10);
    let mut commit = Vec::new();
    for (name, parallel) in [("parallel", true), ("sequential", false)] {
        let sub = format!("commit-{name}");
        commit.push(Config {
            name,
            param: n.to_string(),
            throughput: Throughput::Elements(n as u64),
            kind: Kind::SinkCommit {
                storage: Arc::new(ObjectStorage::s3(&env.url(&sub)).expect("s3 storage")),
                sub,
                payload: small.clone(),
                n,
                parallel,
            },
        });
    }
    let bytes = Bytes::from(encode_json_lines(&small));
    for (name, parallel) in [
        ("object_store_parallel", true),
        ("object_store_sequential", false),
    ] {
        commit.push(Config {
            name,
            param: n.to_string(),
            throughput: Throughput::Elements(n as u64),
            kind: Kind::RawCommit {
                sub: format!("commit-{name}"),
                bytes: bytes.clone(),
                n,
                parallel,
            },
        });
    }
    groups.push(("s3_commit", commit));
    groups
}

impl Config {
    /// Runs one iteration and returns the timed part; cleans up after it, untimed.
    fn run(&self, env: &Env) -> Duration {
        let rt = &env.rt;
        match &self.kind {
            Kind::SinkUpload {
                storage,
                sub,
                batches,
                files,
                total_bytes,
            } => {
                let sink = Sink::builder_shared(storage.clone())
                    .format(FileFormat::json_lines())
                    .bucket_assigner(HivePartitioner::new(["part"]).expect("partitioner"))
                    .rolling_policy(
                        RollingPolicy::default().with_part_size_bytes_max(u64::MAX >> 1),
                    )
                    .build()
                    .expect("sink");
                let mut writer = sink.create_writer();
                let committer = sink.committer();
                let start = Instant::now();
                let committables = rt.block_on(async {
                    for batch in batches {
                        writer.write(batch).await.expect("write");
                    }
                    let committables = writer
                        .prepare_commit(1)
                        .await
                        .expect("prepare")
                        .committables;
                    committer.commit_all(&committables).await.expect("commit");
                    committables
                });
                let timed = start.elapsed();
                assert_eq!(committables.len(), *files);
                let written: u64 = committables.iter().map(|c| c.size_bytes).sum();
                assert_eq!(written, *total_bytes, "the sink wrote the same bytes");
                rt.block_on(env.clean(sub));
                timed
            }
            Kind::RawUpload {
                sub,
                payload,
                encoded,
                files,
                per_file,
                encode,
            } => {
                let (files, per_file) = (*files, *per_file);
                let id = uuid::Uuid::now_v7().simple();
                let keys: Vec<Path> = (0..files)
                    .map(|f| env.path(&format!("{sub}/part={f}/{id}.jsonl")))
                    .collect();
                let mut scratch = Vec::new();
                let start = Instant::now();
                rt.block_on(async {
                    let mut uploads = Vec::with_capacity(files);
                    for i in 0..files * per_file {
                        let f = i % files;
                        if uploads.len() == f {
                            let upload = env.store.put_multipart(&keys[f]).await.expect("create");
                            uploads
                                .push(WriteMultipart::new_with_chunk_size(upload, PART_SIZE_BYTES));
                        }
                        let upload = &mut uploads[f];
                        upload
                            .wait_for_capacity(UPLOADS_IN_FLIGHT_MAX)
                            .await
                            .expect("upload part");
                        if *encode {
                            scratch.clear();
                            let mut w = LineDelimitedWriter::new(&mut scratch);
                            w.write(payload).expect("encode");
                            w.finish().expect("finish");
                            upload.write(&scratch);
                        } else {
                            upload.write(encoded);
                        }
                    }
                    futures_util::future::try_join_all(
                        uploads.into_iter().map(WriteMultipart::finish),
                    )
                    .await
                    .expect("complete");
                });
                let timed = start.elapsed();
                let size = rt.block_on(env.store.head(&keys[0])).expect("head").size;
                assert_eq!(size, (per_file * encoded.len()) as u64);
                rt.block_on(env.clean(sub));
                timed
            }
            Kind::SinkCommit {
                storage,
                sub,
                payload,
                n,
                parallel,
            } => {
                let sink = Sink::builder_shared(storage.clone())
                    .format(FileFormat::json_lines())
                    .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(1))
                    .build()
                    .expect("sink");
                let committer = sink.committer();
                let committables: Vec<Committable> = rt.block_on(async {
                    let mut writer = sink.create_writer();
                    for _ in 0..*n {
                        writer.write(payload).await.expect("write");
                    }
                    writer
                        .prepare_commit(1)
                        .await
                        .expect("prepare")
                        .committables
                });
                assert_eq!(committables.len(), *n, "one pending upload per write");
                let start = Instant::now();
                let committed = rt.block_on(async {
                    if *parallel {
                        committer
                            .commit_all(&committables)
                            .await
                            .expect("commit")
                            .committed
                    } else {
                        let mut committed = 0;
                        for c in &committables {
                            committed += committer
                                .commit_all(std::slice::from_ref(c))
                                .await
                                .expect("commit")
                                .committed;
                        }
                        committed
                    }
                });
                let timed = start.elapsed();
                assert_eq!(committed, *n);
                rt.block_on(env.clean(sub));
                timed
            }
            Kind::RawCommit {
                sub,
                bytes,
                n,
                parallel,
            } => {
                let id = uuid::Uuid::now_v7().simple();
                let pending: Vec<(Path, String, PartId)> = rt
                    .block_on(futures_util::future::try_join_all((0..*n).map(|i| {
                        let (store, bytes) = (env.store.clone(), bytes.clone());
                        let key = env.path(&format!("{sub}/{id}-{i}.jsonl"));
                        async move {
                            let upload = store.create_multipart(&key).await?;
                            let part = store.put_part(&key, &upload, 0, bytes.into()).await?;
                            Ok::<_, object_store::Error>((key, upload, part))
                        }
                    })))
                    .expect("pending uploads");
                let complete = |(key, upload, part): &(Path, String, PartId)| {
                    let store = env.store.clone();
                    let (key, upload, part) = (key.clone(), upload.clone(), part.clone());
                    async move { store.complete_multipart(&key, &upload, vec![part]).await }
                };
                let start = Instant::now();
                rt.block_on(async {
                    if *parallel {
                        futures_util::future::try_join_all(pending.iter().map(complete))
                            .await
                            .expect("complete");
                    } else {
                        for p in &pending {
                            complete(p).await.expect("complete");
                        }
                    }
                });
                let timed = start.elapsed();
                rt.block_on(env.clean(sub));
                timed
            }
        }
    }
}

/// `FILESINK_BENCH_INTERLEAVED_ROUNDS=R`: before criterion, runs every configuration of a
/// group once per round, round-robin, so that drift on a shared machine hits all of them
/// alike; prints each configuration's median and its ratio to the group's first one (the
/// median of the per-round ratios).
fn interleaved(env: &Env, groups: &[Group], rounds: usize) {
    for (group_name, members) in groups {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); members.len()];
        for round in 0..rounds {
            // Rotate the order each round so no configuration always runs first.
            for k in 0..members.len() {
                let i = (k + round) % members.len();
                times[i].push(members[i].run(env).as_secs_f64());
            }
        }
        for (i, config) in members.iter().enumerate() {
            // Compare within a shape: against the first configuration with the same parameter.
            let base_i = members
                .iter()
                .position(|c| c.param == config.param)
                .expect("its own shape");
            let ratios: Vec<f64> = times[i]
                .iter()
                .zip(&times[base_i])
                .map(|(t, b)| t / b)
                .collect();
            println!(
                "interleaved {group_name}/{}/{}: median {:.1} ms over {rounds} rounds; time / {}: {:.2}x (median of per-round ratios)",
                config.name,
                config.param,
                median(&times[i]) * 1e3,
                members[base_i].name,
                median(&ratios),
            );
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `batch` with a `part` column of one value, which the Hive partitioner turns into the
/// directory `part=<part>` and removes from the data.
fn with_part_column(batch: &RecordBatch, part: usize) -> RecordBatch {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("part", DataType::Utf8, false));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec![part.to_string(); batch.num_rows()])) as ArrayRef);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("batch")
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
