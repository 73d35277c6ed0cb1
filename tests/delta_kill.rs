//! `filesink ingest --table delta` killed with SIGKILL at random moments, then rerun to the
//! end: after every kill the table (read through its log) holds a prefix of the input, each
//! record once; at the end delta-rs reads every record exactly once, the job's `txn` is its
//! last checkpoint, and no checkpoint has two versions.
//!
//! The kill moments come from a seeded xorshift generator; rerun a failure with
//! `FILESINK_SEED=<seed> cargo test --test delta_kill`.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::backend::{ceph_or_explain, Backend};
use common::delta::{read_log, table_id_counts};
use common::delta_py::{reader_or_explain, table_location};
use filesink::storage::Storage;

const RECORDS: usize = 100_000;
const KILLS: usize = 10;
const DEFAULT_SEED: u64 = 0x5EED_DE17_A000_0001;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn seed() -> u64 {
    std::env::var("FILESINK_SEED")
        .ok()
        .map(|s| s.trim().parse().expect("FILESINK_SEED must be an integer"))
        .unwrap_or(DEFAULT_SEED)
}

/// The ids of the table must be `0..n`, each once: checkpoints commit whole prefixes.
async fn table_prefix(storage: &dyn Storage, when: &str) -> usize {
    let counts = table_id_counts(storage).await;
    for (i, (id, count)) in counts.iter().enumerate() {
        assert_eq!(*count, 1, "{when}: id {id} is in the table {count} times");
        assert_eq!(
            *id, i as i64,
            "{when}: the table is not a prefix of the input (id {id} at {i})"
        );
    }
    let log = read_log(storage).await;
    let mut seen = BTreeSet::new();
    for (v, app, n) in &log.txn_history {
        assert!(
            seen.insert((app.clone(), *n)),
            "{when}: checkpoint {n} of `{app}` again at version {v}"
        );
    }
    counts.len()
}

#[tokio::test]
async fn delta_ingest_killed_at_random_moments_then_rerun_holds_every_record_exactly_once() {
    killed_and_rerun(Backend::local(), RECORDS, 1, false).await;
}

/// The same with `--compact`: the kills also fall inside compaction rounds (one every 20 ms),
/// which the next run's rounds finish or abandon.
#[tokio::test]
async fn delta_ingest_compacting_in_the_background_killed_at_random_moments_holds_every_record_exactly_once(
) {
    killed_and_rerun(Backend::local(), RECORDS, 1, true).await;
}

#[tokio::test]
async fn delta_ingest_on_ceph_killed_at_random_moments_then_rerun_holds_every_record_exactly_once()
{
    if let Some(b) = ceph_or_explain() {
        // Every S3 round trip costs milliseconds: fewer records, later kills.
        killed_and_rerun(b, RECORDS / 5, 10, false).await;
    }
}

async fn killed_and_rerun(b: Backend, records: usize, slower: u64, compact: bool) {
    let seed = seed();
    eprintln!(
        "[{}] delta_kill seed: {seed} (reproduce with FILESINK_SEED={seed})",
        b.name
    );
    let mut rng = XorShift(seed.max(1));
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let mut text = String::with_capacity(records * 60);
    for i in 0..records {
        text.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"amount\":{}.5}}\n",
            25 + i % 6,
            i % 977
        ));
    }
    fs::write(&input, text).unwrap();
    let (url, env) = b.cli_url();
    let mut args = vec![
        "ingest",
        input.to_str().unwrap(),
        "--to",
        url.as_str(),
        "--table",
        "delta",
        "--partition-by",
        "day",
        "--checkpoint-every",
        "2000rows",
        "--job",
        "events",
    ];
    if url.starts_with("s3://") {
        // A killed run keeps its job on S3 until its claim expires: keep that short.
        args.extend(["--lease-ttl", "1s"]);
    }
    if compact {
        args.extend(["--compact", "--compact-every", "20ms"]);
        args.extend(["--compact-target-size", "1MiB"]);
    }
    let started = Instant::now();
    let mut killed = 0;
    for round in 0..KILLS {
        let delay =
            Duration::from_millis(slower * rng.between(1, if round < 3 { 40 } else { 150 }));
        let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + delay;
        let mut exited = None;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                exited = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match exited {
            // The killed run's claim has not expired yet (S3): nothing was changed.
            Some(status) if status.code() == Some(5) => {
                std::thread::sleep(Duration::from_millis(1100));
                continue;
            }
            Some(status) => {
                assert!(
                    status.success(),
                    "[{}] round {round} (seed {seed}): ingest failed",
                    b.name
                );
                break;
            }
            None => {
                child.kill().unwrap();
                child.wait().unwrap();
                killed += 1;
            }
        }
        let when = format!("[{}] seed {seed}, after kill {round} at {delay:?}", b.name);
        let n = table_prefix(b.storage.as_ref(), &when).await;
        eprintln!("round {round}: killed after {delay:?}, {n} records in the table");
    }
    assert!(killed > 0, "[{}] seed {seed}: no run was killed", b.name);
    // A run killed on S3 keeps its job until its claim expires: wait for it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let out = loop {
        let out = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        if out.status.code() == Some(5) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_secs(1));
            continue;
        }
        break out;
    };
    assert!(
        out.status.success(),
        "[{}] final run (seed {seed}) failed:\n{}",
        b.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let when = format!("[{}] seed {seed}, after the final run", b.name);
    let n = table_prefix(b.storage.as_ref(), &when).await;
    assert_eq!(n, records, "{when}: records missing from the table");

    let Some(reader) = reader_or_explain() else {
        return;
    };
    let location = table_location(&b);
    assert_eq!(
        reader.ids(&location, None),
        (0..records as i64).collect::<Vec<_>>(),
        "{when}: delta-rs"
    );
    let log = read_log(b.storage.as_ref()).await;
    let (app, txn) = log
        .txns
        .iter()
        .find(|(app, _)| app.ends_with("-events"))
        .expect("a txn of the ingest");
    let last = filesink::job::manifest::latest_manifest(b.storage.as_ref(), "events", None)
        .await
        .unwrap()
        .unwrap();
    assert!(*txn as u64 <= last.checkpoint_id);
    if compact {
        // The finished run's last round, at least, swapped files in.
        assert!(
            log.txns.keys().any(|app| app.ends_with("-events_compact")),
            "{when}: no compaction round in the log: {:?}",
            log.txns
        );
    }
    assert_eq!(reader.txn(&location, app, None), Some(*txn));
    eprintln!(
        "[{}] {killed} kills, {records} records exactly once in the table, {:.1} s",
        b.name,
        started.elapsed().as_secs_f64()
    );
}
