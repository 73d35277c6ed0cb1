//! The `filesink` binary against a 3-node Garage cluster (replication factor 3: writes and
//! reads need a quorum of two nodes), with nodes killed (SIGKILL) under a running `ingest`.
//!
//! - One node down: invisible to the run, which completes; every record exactly once.
//! - Two nodes down: the run fails with an error naming the store, nothing partial is visible,
//!   and the same ingest rerun after the nodes return completes, exactly once.
//!
//! The cluster comes from `FILESINK_GARAGE_CLUSTER`, the directory of `scripts/garage
//! cluster-start DIR` (`./scripts/test` starts one and exports it): `DIR/env` holds the `AWS_*`
//! variables of node 1, which the tests talk to; they kill and restart nodes 2 and 3 with
//! `scripts/garage node-stop|node-start DIR I`. Without it these tests say loudly that they did
//! not run (and fail under `CI`).
//!
//! No timing decides an outcome: the tests feed the input on standard input and move on when
//! `filesink ls` shows a checkpoint, so every kill lands at a known point of the run (a part
//! file open, checkpoints behind it), and every wait is a bounded poll.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::ClientConfigKey;
use serde_json::Value;

mod common;

use common::cli::{assert_exactly_once, stderr};

/// The tests kill nodes of one shared cluster: one test at a time.
static CLUSTER: Mutex<()> = Mutex::new(());

/// How long any wait below may take before the test fails.
const WAIT: Duration = Duration::from_secs(120);

/// Records per checkpoint.
const CHECKPOINT_ROWS: usize = 2000;

/// Exit code of a run refused because another run holds the job (a failed run's claim lives
/// until it expires).
const EXIT_REFUSED: i32 = 5;

struct Cluster {
    dir: PathBuf,
    /// The variables of `DIR/env`: node 1's S3 endpoint, credentials, bucket.
    env: Vec<(String, String)>,
    bucket: String,
}

/// The cluster of the environment, or `None` (after saying so) if there is none.
fn cluster() -> Option<Cluster> {
    let dir = match std::env::var_os("FILESINK_GARAGE_CLUSTER") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI must run the Garage cluster tests: FILESINK_GARAGE_CLUSTER is not set \
             (./scripts/test starts a 3-node cluster and exports it)"
        ),
        _ => {
            eprintln!(
                "\n*** GARAGE CLUSTER TESTS NOT RUN: FILESINK_GARAGE_CLUSTER is not set; run \
                 ./scripts/test (starts a 3-node Garage cluster on 127.0.0.1), or \
                 `scripts/garage cluster-start DIR` and export FILESINK_GARAGE_CLUSTER=DIR ***\n"
            );
            return None;
        }
    };
    let text = std::fs::read_to_string(dir.join("env"))
        .unwrap_or_else(|e| panic!("{}/env: {e}", dir.display()));
    let env: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let bucket = env
        .iter()
        .find(|(k, _)| k == "FILESINK_S3_BUCKET")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("{}/env has no FILESINK_S3_BUCKET", dir.display()));
    Some(Cluster { dir, env, bucket })
}

impl Cluster {
    fn var(&self, name: &str) -> &str {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{}/env has no {name}", self.dir.display()))
    }

    /// A fresh `s3://bucket/prefix` for one test.
    fn fresh_url(&self, what: &str) -> (String, String) {
        let prefix = format!("cluster/{what}-{}", uuid::Uuid::now_v7().simple());
        (format!("s3://{}/{prefix}", self.bucket), prefix)
    }

    /// `filesink args` configured for node 1 of the cluster.
    fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_filesink"));
        c.args(args).envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run filesink")
    }

    /// `scripts/garage ACTION DIR I`, which waits until it is done (node-start: until node 1
    /// and node I see each other up again).
    fn node(&self, action: &str, i: u32) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/garage");
        let started = Instant::now();
        let o = Command::new(script)
            .args([action, self.dir.to_str().unwrap(), &i.to_string()])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "scripts/garage {action} {i} failed:\n{}",
            stderr(&o)
        );
        eprintln!(
            "garage_cluster: {action} {i} took {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }

    /// `ls --json` of `url`, or `None` if it failed.
    fn ls(&self, url: &str) -> Option<Value> {
        let o = self.run(&["ls", url, "--json"]);
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).ok())
            .flatten()
    }

    /// The records of the latest checkpoint of the only job at `url` (0 before the first).
    fn records(&self, url: &str) -> u64 {
        self.ls(url)
            .and_then(|v| v["jobs"].get(0).and_then(|j| j["records"].as_u64()))
            .unwrap_or(0)
    }

    /// Waits (bounded) until a checkpoint of the job at `url` holds `records`; fails if
    /// `child` exits first.
    fn wait_for_records(&self, url: &str, records: u64, child: &mut Child, what: &str) {
        let deadline = Instant::now() + WAIT;
        while self.records(url) < records {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{what}: ingest exited ({status}) before a checkpoint of {records} records");
            }
            assert!(
                Instant::now() < deadline,
                "{what}: no checkpoint of {records} records within {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The store node 1 serves, for reading the output back.
    fn store(&self) -> object_store::aws::AmazonS3 {
        AmazonS3Builder::new()
            .with_config(AmazonS3ConfigKey::Endpoint, self.var("AWS_ENDPOINT"))
            .with_config(AmazonS3ConfigKey::Region, self.var("AWS_REGION"))
            .with_config(
                AmazonS3ConfigKey::AccessKeyId,
                self.var("AWS_ACCESS_KEY_ID"),
            )
            .with_config(
                AmazonS3ConfigKey::SecretAccessKey,
                self.var("AWS_SECRET_ACCESS_KEY"),
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp),
                "true",
            )
            .with_bucket_name(&self.bucket)
            .build()
            .unwrap()
    }

    /// The visible objects under `prefix`: (path relative to it, bytes).
    fn visible(&self, prefix: &str) -> Vec<(String, Vec<u8>)> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(common::backend::list_store(&self.store(), prefix))
    }

    /// Every id in the visible Parquet objects under `prefix`, sorted, read back with the real
    /// reader.
    fn visible_ids(&self, prefix: &str) -> Vec<i64> {
        let mut ids = Vec::new();
        for (rel, bytes) in self.visible(prefix) {
            assert!(rel.ends_with(".parquet"), "visible object {rel}");
            ids.extend(common::ids_in_bytes(
                bytes,
                &filesink::FileFormat::parquet(),
            ));
        }
        ids.sort_unstable();
        ids
    }

    /// Asserts that the job at `url` (under `prefix`) finished with `records` records, every
    /// one visible exactly once, and left nothing behind: no pending file, no leftover, no
    /// live claim, and no orphan multipart upload but Garage's phantoms.
    ///
    /// Garage after a node outage: ListMultipartUploads can go on listing an upload that was
    /// completed (same upload id; its object is visible) when a node missed the completion,
    /// and AbortMultipartUpload does not remove it: a phantom, reported and allowed. Any other
    /// orphan upload (one Garage answered `503` for but stored on the one node it reached)
    /// must have been started before `not_after_ms` (by a failed run, not by the run that
    /// completed) and is removed by `filesink abort`, bounded; the records are read back after
    /// the abort.
    fn assert_done(&self, url: &str, prefix: &str, records: usize, not_after_ms: u128) {
        let deadline = Instant::now() + WAIT;
        let phantoms = loop {
            let ls = self.ls(url).expect("ls --json");
            let visible: Vec<String> = self.visible(prefix).into_iter().map(|(r, _)| r).collect();
            let (phantoms, real): (Vec<&Value>, Vec<&Value>) = ls["orphan_uploads"]
                .as_array()
                .unwrap()
                .iter()
                .partition(|u| visible.iter().any(|v| u["final_path"] == v.as_str()));
            if real.is_empty() {
                break phantoms.len();
            }
            for u in &real {
                let initiated = u["initiated_ms"].as_u64().unwrap() as u128;
                assert!(
                    initiated < not_after_ms,
                    "an orphan upload started by the run that completed: {u}\n{ls}"
                );
            }
            eprintln!(
                "garage_cluster: {} orphan upload(s) of the failed run outlived the rerun's \
                 cleanup; removing them with `filesink abort`: {real:?}",
                real.len()
            );
            let o = self.run(&["abort", url]);
            assert!(o.status.success(), "abort failed:\n{}", stderr(&o));
            assert!(
                Instant::now() < deadline,
                "orphan uploads stayed for {WAIT:?}: {ls}"
            );
        };
        if phantoms > 0 {
            eprintln!(
                "garage_cluster: Garage lists {phantoms} completed upload(s) as orphan uploads \
                 (a node missed the completion)"
            );
        }
        assert_exactly_once(&self.visible_ids(prefix), 0..records as i64);
        let ls = self.ls(url).expect("ls --json");
        assert_eq!(ls["jobs"][0]["finished"], true, "{ls}");
        assert_eq!(ls["jobs"][0]["records"], records, "{ls}");
        assert_eq!(ls["jobs"][0]["live"], false, "{ls}");
        for key in ["pending", "unknown"] {
            assert!(ls[key].as_array().unwrap().is_empty(), "{key}: {ls}");
        }
        // `leftovers` lists the orphan uploads too. Whether Garage lists a phantom changes from
        // one listing to the next: every one left must be a phantom.
        let orphans = ls["orphan_uploads"].as_array().unwrap();
        assert_eq!(
            ls["leftovers"].as_array().unwrap().len(),
            orphans.len(),
            "{ls}"
        );
        let visible: Vec<String> = self.visible(prefix).into_iter().map(|(r, _)| r).collect();
        for u in orphans {
            assert!(
                visible.iter().any(|v| u["final_path"] == v.as_str()),
                "an orphan upload that is not a phantom: {u}\n{ls}"
            );
        }
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Records `from..to`, one JSON line each.
fn lines(from: usize, to: usize) -> Vec<u8> {
    let mut out = String::with_capacity((to - from) * 72);
    for i in from..to {
        out.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"user\":\"user_{}\",\"amount\":{}.5}}\n",
            25 + i % 6,
            i % 101,
            i % 977
        ));
    }
    out.into_bytes()
}

/// `filesink ingest -` of job `job` into `url`, reading standard input from the pipe the test
/// writes, its standard error into `log`.
fn spawn_ingest(c: &Cluster, url: &str, job: &str, log: &Path) -> (Child, ChildStdin) {
    let mut child = c
        .command(&ingest_args(url, job))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}

fn ingest_args(url: &str, job: &str) -> Vec<String> {
    [
        "ingest",
        "-",
        "--job",
        job,
        "--to",
        url,
        "--checkpoint-every",
        &format!("{CHECKPOINT_ROWS}rows"),
        // A failed run cannot delete its claim while the store has no quorum: the rerun
        // waits for it to expire.
        "--lease-ttl",
        "2s",
    ]
    .map(String::from)
    .to_vec()
}

/// Waits (bounded) for `child` to exit.
fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: ingest still running after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the ingest of `input` (a file fed on standard input) to completion, retrying while a
/// failed run's claim still holds the job (bounded).
fn rerun_until_done(c: &Cluster, url: &str, job: &str, input: &Path) -> Output {
    let deadline = Instant::now() + WAIT;
    loop {
        let o = c
            .command(&ingest_args(url, job))
            .stdin(std::fs::File::open(input).unwrap())
            .output()
            .unwrap();
        if o.status.code() != Some(EXIT_REFUSED) {
            return o;
        }
        assert!(
            Instant::now() < deadline,
            "the job stayed held for {WAIT:?}:\n{}",
            stderr(&o)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Kills node 2 with a part file open and checkpoints behind it, restarts it, then the same
/// with node 3: each time checkpoints complete while the node is down (two of three nodes are
/// a quorum), and the run completes with every record exactly once.
#[test]
fn one_node_killed_during_an_ingest_the_run_completes_exactly_once() {
    let Some(c) = cluster() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let (url, prefix) = c.fresh_url("one-down");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("ingest.log");
    let started_ms = now_ms();
    let (mut child, mut stdin) = spawn_ingest(&c, &url, "one_down", &log);

    // Phases of 10,000 records each, fed 1,000 records ahead of the checkpoint waited for, so
    // that each kill and restart lands with a part file open (its upload started).
    const PHASE: usize = 10_000;
    let mut fed = 0;
    let feed = |stdin: &mut ChildStdin, fed: &mut usize, to: usize| {
        if let Err(e) = stdin
            .write_all(&lines(*fed, to))
            .and_then(|()| stdin.flush())
        {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("feeding records {fed}..{to}: {e}; the ingest ended:\n{log}");
        }
        *fed = to;
    };
    feed(&mut stdin, &mut fed, PHASE + 1000);
    c.wait_for_records(&url, PHASE as u64, &mut child, "all up");
    for node in [2, 3] {
        c.node("node-stop", node);
        let target = c.records(&url) as usize + PHASE;
        feed(&mut stdin, &mut fed, target + 1000);
        c.wait_for_records(
            &url,
            target as u64,
            &mut child,
            &format!("node {node} down"),
        );
        c.node("node-start", node);
        let target = c.records(&url) as usize + PHASE / 2;
        feed(&mut stdin, &mut fed, target + 1000);
        c.wait_for_records(
            &url,
            target as u64,
            &mut child,
            &format!("node {node} back"),
        );
    }
    let total = fed + PHASE;
    feed(&mut stdin, &mut fed, total);
    drop(stdin);
    let status = wait_exit(&mut child, "after the last restart");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "ingest failed ({status}):\n{log_text}");

    // No run failed: every orphan upload but Garage's phantoms fails the test.
    c.assert_done(&url, &prefix, total, started_ms);
    eprintln!(
        "garage_cluster: {total} records exactly once across two single-node outages, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Two nodes down: a run started then fails at once, and one that loses them mid-run fails
/// at its next store call; both say which store, neither leaves anything partial visible, and
/// the same ingest rerun after the nodes return completes exactly once.
#[test]
fn two_nodes_down_the_ingest_fails_naming_the_store_and_a_rerun_completes_exactly_once() {
    let Some(c) = cluster() else { return };
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    const TOTAL: usize = 40_000;
    let input = tmp.path().join("events.jsonl");
    std::fs::write(&input, lines(0, TOTAL)).unwrap();

    // 1. Both down before the run.
    let (url, prefix) = c.fresh_url("two-down-before");
    c.node("node-stop", 2);
    c.node("node-stop", 3);
    let started = Instant::now();
    let o = c
        .command(&ingest_args(&url, "two_down"))
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let failed_after = started.elapsed();
    let err = stderr(&o);
    eprintln!(
        "garage_cluster: with two nodes down the ingest failed after {:.1} s ({:?}):\n{err}",
        failed_after.as_secs_f64(),
        o.status
    );
    assert!(!o.status.success(), "ingest succeeded without a quorum");
    assert!(
        err.contains(&url),
        "the error does not name the store `{url}`:\n{err}"
    );
    c.node("node-start", 2);
    c.node("node-start", 3);
    assert_eq!(
        c.visible_ids(&prefix),
        Vec::<i64>::new(),
        "visible after a failed run"
    );
    let rerun_started_ms = now_ms();
    let o = rerun_until_done(&c, &url, "two_down", &input);
    assert!(o.status.success(), "rerun failed:\n{}", stderr(&o));
    c.assert_done(&url, &prefix, TOTAL, rerun_started_ms);

    // 2. Both killed mid-run, with checkpoints behind and a part file open.
    let (url, prefix) = c.fresh_url("two-down-mid-run");
    let log = tmp.path().join("mid-run.log");
    let (mut child, mut stdin) = spawn_ingest(&c, &url, "two_down", &log);
    let text = std::fs::read(&input).unwrap();
    let upto = |records: usize| -> usize {
        // The byte offset just past record `records - 1`.
        text.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(records - 1)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    let first = 5 * CHECKPOINT_ROWS;
    stdin.write_all(&text[..upto(first + 1000)]).unwrap();
    stdin.flush().unwrap();
    c.wait_for_records(&url, first as u64, &mut child, "before the kills");
    c.node("node-stop", 2);
    c.node("node-stop", 3);
    let killed = Instant::now();
    // The rest of the input: the run fails at its next call to the store (writes to a run
    // that has exited fail with a broken pipe, which is expected).
    let _ = stdin.write_all(&text[upto(first + 1000)..]);
    drop(stdin);
    let status = wait_exit(&mut child, "two nodes down");
    let failed_after = killed.elapsed();
    let err = std::fs::read_to_string(&log).unwrap();
    eprintln!(
        "garage_cluster: two nodes killed mid-run; the run failed {:.1} s later ({status}):\n{err}",
        failed_after.as_secs_f64()
    );
    assert!(!status.success(), "ingest succeeded without a quorum");
    assert!(
        err.contains(&url),
        "the error does not name the store `{url}`:\n{err}"
    );
    c.node("node-start", 2);
    c.node("node-start", 3);
    // Nothing partial: what is visible is a whole prefix of the input (each checkpoint commits
    // the records before its position), no more than the latest checkpoint holds (its files
    // may still be pending: the rerun commits them).
    let ids = c.visible_ids(&prefix);
    assert_exactly_once(&ids, 0..ids.len() as i64);
    let latest = c.records(&url) as usize;
    assert!(
        ids.len() <= latest,
        "{} records visible, the latest checkpoint holds {latest}",
        ids.len()
    );
    eprintln!(
        "garage_cluster: after the failed run {} records visible, the latest checkpoint holds \
         {latest}",
        ids.len()
    );
    let rerun_started_ms = now_ms();
    let o = rerun_until_done(&c, &url, "two_down", &input);
    assert!(o.status.success(), "rerun failed:\n{}", stderr(&o));
    c.assert_done(&url, &prefix, TOTAL, rerun_started_ms);
}
