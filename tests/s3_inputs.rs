//! Inputs on an S3 store (a real server: Garage, started by `./scripts/test`): an `s3://` glob
//! over an object listing, read exactly once, resumed after a crash, an object replaced under
//! the job refused, an object replaced by a longer one with the same beginning read on.
//!
//! The server comes from the environment (`AWS_*`, `FILESINK_S3_BUCKET`); without it these
//! tests say loudly that they did not run (and fail under `CI`).

use std::path::Path;
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

mod common;

use common::cli::*;
use common::visible_parquet_ids;
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input};
use filesink::Error;

const EXIT_INPUT_CHANGED: i32 = 7;
const EXIT_INPUTS_REFUSED: i32 = 8;

fn bucket() -> Option<String> {
    match std::env::var("FILESINK_S3_BUCKET") {
        Ok(b) if !b.is_empty() => Some(b),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI must run the S3 input tests: FILESINK_S3_BUCKET is not set")
        }
        _ => {
            eprintln!(
                "\n*** S3 INPUT TESTS NOT RUN: no S3 server configured (FILESINK_S3_BUCKET is \
                 not set); run ./scripts/test ***\n"
            );
            None
        }
    }
}

fn store(bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .unwrap(),
    )
}

/// JSON lines with ids `ids`.
fn jsonl(ids: std::ops::Range<i64>) -> Vec<u8> {
    ids.map(|i| {
        format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"note\":\"n{}\"}}\n",
            25 + i % 5,
            i % 10
        )
    })
    .collect::<String>()
    .into_bytes()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

async fn put(store: &Arc<dyn ObjectStore>, key: &str, bytes: Vec<u8>) {
    store
        .put(&ObjectPath::from(key), PutPayload::from(bytes))
        .await
        .unwrap();
}

/// A fresh key prefix for one test.
fn fresh() -> String {
    format!("inputs/{}", uuid::Uuid::now_v7().simple())
}

fn ingest(inputs: Vec<Input>, lake: &Path) -> Ingest {
    Ingest::new(inputs)
        .to_local(lake)
        .partition_by(["day"])
        .checkpoint_every(CheckpointEvery::Rows(300))
        .job("objects")
}

/// The objects a glob matches are read in key order, hidden and non-matching ones are not,
/// compressed ones are decompressed; the CLI reads the same glob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glob_over_a_listing_reads_every_matching_object_once() {
    let Some(bucket) = bucket() else { return };
    let s = store(&bucket);
    let p = fresh();
    put(&s, &format!("{p}/day1/b.jsonl"), jsonl(1000..2000)).await;
    put(&s, &format!("{p}/day1/a.jsonl"), jsonl(0..1000)).await;
    put(
        &s,
        &format!("{p}/day1/c.jsonl.gz"),
        gzip(&jsonl(2000..2500)),
    )
    .await;
    put(&s, &format!("{p}/day1/skip.csv"), b"id\n99999\n".to_vec()).await;
    put(&s, &format!("{p}/day1/_tmp.jsonl"), jsonl(90_000..90_010)).await;
    put(&s, &format!("{p}/day2/d.jsonl"), jsonl(90_100..90_110)).await;

    let url = format!("s3://{bucket}/{p}/day1/*.jsonl*");
    let inputs = Input::s3(&url).await.unwrap();
    let names: Vec<&str> = inputs.iter().map(|i| i.display.as_str()).collect();
    assert_eq!(
        names,
        ["a.jsonl", "b.jsonl", "c.jsonl.gz"]
            .map(|n| format!("s3://{bucket}/{p}/day1/{n}"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let summary = ingest(inputs, &lake).run().await.unwrap();
    assert_eq!(summary.records, 2500);
    assert_eq!(visible_parquet_ids(&lake), (0..2500).collect::<Vec<_>>());

    // The CLI, with `**` across components: both days, hidden objects still skipped.
    let cli_lake = dir.path().join("cli-lake");
    let o = run_ok(&[
        "ingest",
        &format!("s3://{bucket}/{p}/**/*.jsonl"),
        "--to",
        s_(&cli_lake),
        "--json",
    ]);
    let v = json_of(&o);
    assert_eq!(v["records"], 2010, "{v}");
    let mut expected: Vec<i64> = (0..2000).chain(90_100..90_110).collect();
    expected.sort_unstable();
    assert_eq!(visible_parquet_ids(&cli_lake), expected);

    // No match: an empty set of inputs (the glob rule, as for files), said so, exit 0,
    // nothing created.
    let o = run_ok(&[
        "ingest",
        &format!("s3://{bucket}/{p}/nothing/*.jsonl"),
        "--to",
        s_(&dir.path().join("none")),
    ]);
    assert!(stdout(&o).contains("no input matches"), "{}", stdout(&o));
    assert!(!dir.path().join("none").exists());
}

fn s_(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A run killed mid-way resumes after what the job read of each object: every record once.
/// An object replaced by another with the same beginning and more records counts as grown;
/// one whose read part changed is refused and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_resume_exactly_once_and_a_replaced_object_is_refused() {
    let Some(bucket) = bucket() else { return };
    let s = store(&bucket);
    let p = fresh();
    put(&s, &format!("{p}/a.jsonl"), jsonl(0..1500)).await;
    put(&s, &format!("{p}/b.jsonl"), gzip(&jsonl(1500..3000))).await;
    let url = format!("s3://{bucket}/{p}/*");
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    for stop in [700, 2100] {
        let s = ingest(Input::s3(&url).await.unwrap(), &lake)
            .stop_after_records(stop)
            .run()
            .await
            .unwrap();
        assert_eq!(s.status, IngestStatus::Stopped);
    }
    let s1 = ingest(Input::s3(&url).await.unwrap(), &lake)
        .run()
        .await
        .unwrap();
    assert_eq!(s1.status, IngestStatus::Finished);
    assert_eq!(visible_parquet_ids(&lake), (0..3000).collect::<Vec<_>>());

    // `a.jsonl` replaced by a longer object with the same first 1500 records: read on.
    put(&s, &format!("{p}/a.jsonl"), jsonl(0..1600)).await;
    let more = ingest(Input::s3(&url).await.unwrap(), &lake)
        .run()
        .await
        .unwrap();
    assert_eq!(more.records, 100);
    let mut expected: Vec<i64> = (0..3000).chain(1500..1600).collect();
    expected.sort_unstable();
    // Ids 1500..1600 now come from both objects: a.jsonl's new records repeat b's ids.
    assert_eq!(visible_parquet_ids(&lake), expected);

    // `a.jsonl` replaced by other bytes where the job already read: refused, nothing written.
    let mut other = jsonl(0..1600);
    other[10] = b'9';
    put(&s, &format!("{p}/a.jsonl"), other).await;
    let e = ingest(Input::s3(&url).await.unwrap(), &lake)
        .run()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InputChanged(_)), "{e}");
    assert!(e.to_string().contains("a.jsonl"), "{e}");
    let o = filesink(&[
        "ingest",
        &url,
        "--to",
        s_(&lake),
        "--job",
        "objects",
        "--partition-by",
        "day",
        "--checkpoint-every",
        "300rows",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_INPUT_CHANGED), "{}", stderr(&o));
    assert_eq!(visible_parquet_ids(&lake), expected);
}

/// The cron case on S3, into a local lake and into an `s3://` lake: the same command over a
/// glob whose objects are added, deleted, grown and replaced between runs. Each run is a new
/// job (its list changed); the lake's ledger still takes every object once, reads a grown one
/// on and refuses a replaced one, taking the others (exit 8; exit 7 with nothing else to read,
/// nothing written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glob_that_changes_between_runs_is_ingested_exactly_once() {
    let Some(bucket) = bucket() else { return };
    let s = store(&bucket);
    let p = fresh();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("lake");
    let remote = format!("s3://{bucket}/{p}/lake");
    for lake in [s_(&local).to_owned(), remote.clone()] {
        let raw = format!("{p}/raw-{}", if lake == remote { "s3" } else { "local" });
        let glob = format!("s3://{bucket}/{raw}/*.jsonl");
        let run = |code: i32| {
            run_expect(
                &[
                    "ingest",
                    &glob,
                    "--to",
                    &lake,
                    "--json",
                    "--checkpoint-every",
                    "400rows",
                ],
                code,
            )
        };
        let records = |o: &std::process::Output| json_of(o)["records"].as_i64().unwrap();
        put(&s, &format!("{raw}/a.jsonl"), jsonl(0..1000)).await;
        put(&s, &format!("{raw}/b.jsonl"), jsonl(1000..2000)).await;
        assert_eq!(records(&run(0)), 2000);
        // An object added: only it is read.
        put(&s, &format!("{raw}/c.jsonl"), jsonl(2000..2500)).await;
        assert_eq!(records(&run(0)), 500, "{lake}");
        // One deleted: nothing new, nothing read twice.
        s.delete(&ObjectPath::from(format!("{raw}/a.jsonl")))
            .await
            .unwrap();
        assert_eq!(records(&run(0)), 0, "{lake}");
        // One replaced by a longer object with the same beginning: read on.
        put(
            &s,
            &format!("{raw}/b.jsonl"),
            [jsonl(1000..2000), jsonl(2500..2600)].concat(),
        )
        .await;
        assert_eq!(records(&run(0)), 100, "{lake}");
        // The first object back as it was, and another added: the first is not read again.
        put(&s, &format!("{raw}/a.jsonl"), jsonl(0..1000)).await;
        put(&s, &format!("{raw}/d.jsonl"), jsonl(2600..2700)).await;
        assert_eq!(records(&run(0)), 100, "{lake}");
        let want: Vec<i64> = (0..2700).collect();
        let ids = || async {
            match lake == remote {
                false => visible_parquet_ids(&local),
                true => visible_object_ids(&s, &format!("{p}/lake"), dir.path()).await,
            }
        };
        assert_eq!(ids().await, want, "{lake}");
        // One replaced by other records: refused and named, while the object added beside it
        // is taken (exit 8); then, with nothing else to read, refused alone (exit 7).
        put(&s, &format!("{raw}/c.jsonl"), jsonl(9000..9500)).await;
        put(&s, &format!("{raw}/e.jsonl"), jsonl(2700..2800)).await;
        let o = run(EXIT_INPUTS_REFUSED);
        assert!(stderr(&o).contains("c.jsonl"), "{}", stderr(&o));
        let refused = json_of(&o)["refused"].to_string();
        assert!(refused.contains("c.jsonl"), "{refused}");
        let want: Vec<i64> = (0..2800).collect();
        assert_eq!(ids().await, want, "{lake}");
        let o = run(EXIT_INPUT_CHANGED);
        assert!(stderr(&o).contains("c.jsonl"), "{}", stderr(&o));
        assert_eq!(ids().await, want, "{lake}");
    }
}

/// The ids of every visible Parquet object of the lake under `prefix` (no component starting
/// with `.` or `_`), read through a local copy in `scratch`.
async fn visible_object_ids(s: &Arc<dyn ObjectStore>, prefix: &str, scratch: &Path) -> Vec<i64> {
    use futures_util::TryStreamExt;
    let mirror = scratch.join(format!("mirror-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&mirror).unwrap();
    let objects: Vec<_> = s
        .list(Some(&ObjectPath::from(prefix)))
        .try_collect()
        .await
        .unwrap();
    for (n, o) in objects.iter().enumerate() {
        let key = o.location.as_ref();
        let rel = &key[prefix.len() + 1..];
        if rel
            .split('/')
            .any(|c| c.starts_with('.') || c.starts_with('_'))
            || !rel.ends_with(".parquet")
        {
            continue;
        }
        let bytes = s.get(&o.location).await.unwrap().bytes().await.unwrap();
        std::fs::write(mirror.join(format!("{n}.parquet")), bytes).unwrap();
    }
    visible_parquet_ids(&mirror)
}

/// An object whose name does not give its compression is found compressed or not from its
/// first bytes once a run reads it, whether its index digest (a rerun with nothing new) or its
/// ledger entries (the index gone) tell that it holds nothing new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objects_compression_is_found_from_its_bytes_when_its_name_does_not_give_it() {
    let Some(bucket) = bucket() else { return };
    let s = store(&bucket);
    let p = fresh();
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    put(&s, &format!("{p}/raw/x.log"), gzip(&jsonl(0..300))).await;
    put(&s, &format!("{p}/raw/y.log"), jsonl(300..400)).await;
    let glob = format!("s3://{bucket}/{p}/raw/*.log");
    let run = || {
        let o = run_ok(&[
            "ingest",
            &glob,
            "--to",
            s_(&lake),
            "--input-format",
            "jsonl",
            "--json",
        ]);
        json_of(&o)["records"].as_i64().unwrap()
    };
    assert_eq!(run(), 400);
    assert_eq!(run(), 0, "nothing new, by the index");
    std::fs::remove_dir_all(lake.join("_filesink/finished")).unwrap();
    assert_eq!(run(), 0, "nothing new, by the ledger's entries");
    put(&s, &format!("{p}/raw/z.log"), gzip(&jsonl(400..500))).await;
    assert_eq!(run(), 100);
    assert_eq!(visible_parquet_ids(&lake), (0..500).collect::<Vec<_>>());
}

/// A lake on S3 retires its finished jobs as a local one does: `vacuum` deletes every object
/// of their directories, their files stay the lake's own, a rerun with nothing new writes
/// nothing, and a job that comes back under a retired name (its object grew) goes on exactly
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_of_a_lake_on_s3_are_retired() {
    let Some(bucket) = bucket() else { return };
    let s = store(&bucket);
    let p = fresh();
    let dir = tempfile::tempdir().unwrap();
    let lake = format!("s3://{bucket}/{p}/lake");
    let glob = format!("s3://{bucket}/{p}/raw/*.jsonl");
    let run = || json_of(&run_ok(&["ingest", &glob, "--to", &lake, "--json"]))["records"].clone();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let from = i as i64 * 1000;
        put(
            &s,
            &format!("{p}/raw/{name}.jsonl"),
            jsonl(from..from + 1000),
        )
        .await;
        assert_eq!(run(), 1000);
    }
    let job_objects = || async {
        s.list_with_delimiter(Some(&ObjectPath::from(format!("{p}/lake/_filesink/jobs"))))
            .await
            .unwrap()
            .common_prefixes
            .len()
    };
    assert_eq!(job_objects().await, 3);
    let vacuum =
        || json_of(&run_ok(&["vacuum", &lake, "--retain", "0s", "--json"]))["ledger"].clone();
    assert_eq!(vacuum()["jobs_retired"], 3);
    assert_eq!(
        job_objects().await,
        0,
        "no object of a job directory is left"
    );
    let ls = json_of(&run_ok(&["ls", &lake, "--json"]));
    assert_eq!(ls["other_files"]["files"], 0, "{ls}");
    assert_eq!(run(), 0, "nothing new");
    // `a` grows: a job under its retired name reads the new records only.
    put(
        &s,
        &format!("{p}/raw/a.jsonl"),
        [jsonl(0..1000), jsonl(5000..5100)].concat(),
    )
    .await;
    assert_eq!(run(), 100);
    assert_eq!(vacuum()["jobs_retired"], 1);
    let want: Vec<i64> = (0..3000).chain(5000..5100).collect();
    assert_eq!(
        visible_object_ids(&s, &format!("{p}/lake"), dir.path()).await,
        want
    );
}
