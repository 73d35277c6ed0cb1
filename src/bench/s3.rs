//! `filesink bench --to s3://…`: roll and commit through the sink on an object store, next to
//! the store's own floor (one PUT of the same bytes per file, one after another).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use filesink::bucket::HivePartitioner;
use filesink::storage::{ObjectStorage, Storage};
use filesink::{Sink, SinkBuilder};
use futures_util::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::Serialize;

use super::payload::payload_bytes;
use super::report::Roll;
use super::roll::roll_with;
use super::work::{note, WorkDir};
use super::{BenchArgs, BenchFormat, BoxError};
use crate::cli::util::human_bytes;

#[derive(Debug, Serialize)]
struct S3Report {
    pub(super) location: String,
    pub(super) format: BenchFormat,
    pub(super) file_size_bytes: u64,
    pub(super) files_per_checkpoint: u64,
    pub(super) partitions: u64,
    pub(super) roll: Roll,
    /// One PUT per file of the same size, sequential: the store's floor.
    pub(super) put_floor_files_per_sec: f64,
    pub(super) put_floor_mb_per_sec: f64,
    pub(super) sink_vs_put_floor: f64,
}

pub(super) async fn run(args: &BenchArgs, url: &str) -> Result<(), BoxError> {
    let location = format!(
        "{}/filesink-bench-{}",
        url.trim_end_matches('/'),
        uuid::Uuid::now_v7().simple()
    );
    let storage = ObjectStorage::s3(&location)?;
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::aws::AmazonS3Builder::from_env()
            .with_url(url)
            .build()?,
    );
    let prefix = object_store::path::Path::parse(
        location
            .trim_start_matches("s3://")
            .split_once('/')
            .map_or("", |(_, p)| p),
    )?;
    note(&format!(
        "measuring at `{location}`; it is removed at the end"
    ));
    let work = WorkDir::create(&std::env::current_dir()?)?;
    let shared: Arc<dyn Storage> = Arc::new(storage.clone());
    let mut base = Sink::builder_shared(shared.clone()).format(args.format.file_format());
    if args.partitions > 1 {
        base = base.bucket_assigner(HivePartitioner::new(["part"])?);
    }
    let result = measure(args, &work.0, base, store.as_ref(), &prefix).await;
    // Clean up whatever happened: uploads first, then objects.
    for leftover in shared.list_leftovers().await.unwrap_or_default() {
        let _ = shared.remove_leftover(&leftover.path).await;
    }
    let listed: Vec<object_store::ObjectMeta> = store
        .list(Some(&prefix))
        .try_collect()
        .await
        .unwrap_or_default();
    for meta in listed {
        let _ = store.delete(&meta.location).await;
    }
    let (roll, put_secs) = result?;
    let put_floor = roll.files as f64 / put_secs;
    let report = S3Report {
        location,
        format: args.format,
        file_size_bytes: args.file_size,
        files_per_checkpoint: args.files_per_checkpoint,
        partitions: args.partitions,
        put_floor_files_per_sec: put_floor,
        put_floor_mb_per_sec: roll.bytes as f64 / put_secs / 1e6,
        sink_vs_put_floor: roll.files_per_sec / put_floor,
        roll,
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        let r = &report;
        format!(
            "filesink bench on {} ({} files of {}, {} per checkpoint, format {})\n\
             sink (multipart upload + complete):  {:>9.1} files/s {:>8.1} MB/s  checkpoint p50 {:.1} ms, p99 {:.1} ms\n\
             store floor (one PUT per file):      {:>9.1} files/s {:>8.1} MB/s\n\
             sink vs floor: {:.2}x\n",
            r.location,
            r.roll.files,
            human_bytes(r.roll.file_bytes),
            r.files_per_checkpoint,
            r.format.name(),
            r.roll.files_per_sec,
            r.roll.mb_per_sec,
            r.roll.checkpoint_latency_ms.p50,
            r.roll.checkpoint_latency_ms.p99,
            r.put_floor_files_per_sec,
            r.put_floor_mb_per_sec,
            r.sink_vs_put_floor,
        )
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

async fn measure(
    args: &BenchArgs,
    work: &Path,
    base: SinkBuilder,
    store: &dyn ObjectStore,
    prefix: &object_store::path::Path,
) -> Result<(Roll, f64), BoxError> {
    let roll = roll_with(args, work, base).await?;
    let bytes = payload_bytes(roll.file_bytes as usize);
    let start = Instant::now();
    for i in 0..roll.files {
        let key = prefix.clone().join("floor").join(format!("f{i}"));
        store.put(&key, PutPayload::from(bytes.clone())).await?;
    }
    Ok((roll, start.elapsed().as_secs_f64()))
}
