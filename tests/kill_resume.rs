//! Kill `filesink ingest` with SIGKILL at random moments, rerun it, and check that the output
//! holds every input record exactly once.
//!
//! The kill moments come from a seeded xorshift generator. The seed is printed at the start;
//! rerun a failure with `FILESINK_SEED=<seed> cargo test --test kill_resume`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const RECORDS: usize = 200_000;
const KILLS: usize = 10;
const DEFAULT_SEED: u64 = 0x5EED_F11E_5EED_0001;

/// xorshift64* (Vigna): small, fast, and the same sequence on every platform.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }

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

fn files(base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn is_hidden_below(base: &Path, p: &Path) -> bool {
    p.strip_prefix(base).unwrap().components().any(|c| {
        let n = c.as_os_str().to_str().unwrap();
        n.starts_with('.') || n.starts_with('_')
    })
}

/// Every id in the visible Parquet files, sorted.
fn visible_ids(base: &Path) -> Vec<i64> {
    let mut ids = Vec::new();
    for path in files(base) {
        if is_hidden_below(base, &path) {
            continue;
        }
        let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&path).unwrap())
            .unwrap_or_else(|e| panic!("visible file {path:?} is not a complete Parquet file: {e}"))
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let col = batch.column_by_name("id").unwrap();
            let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
            ids.extend(col.values().iter().copied());
        }
    }
    ids.sort_unstable();
    ids
}

/// The visible ids must be exactly `0..n` for some `n`: a single ordered input whose
/// checkpoints commit whole prefixes, nothing twice, nothing skipped.
#[track_caller]
fn assert_prefix_exactly_once(ids: &[i64], seed: u64, when: &str) -> usize {
    for (i, id) in ids.iter().enumerate() {
        if *id != i as i64 {
            let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
            for id in ids {
                *counts.entry(*id).or_default() += 1;
            }
            let dup: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).take(10).collect();
            panic!(
                "{when} (seed {seed}): visible ids are not 0..{}: first difference at index {i} \
                 (id {id}); duplicated (first 10): {dup:?}",
                ids.len()
            );
        }
    }
    ids.len()
}

#[test]
fn ingest_killed_at_random_moments_then_rerun_writes_every_record_exactly_once() {
    killed_at_random_moments("2000rows");
}

/// The same with a time schedule: the decoding threads read the file in ranges, and every
/// checkpoint's position is put together from them (see `ingest::source::ranges`).
#[test]
fn ingest_reading_ranges_killed_at_random_moments_writes_every_record_exactly_once() {
    killed_at_random_moments("20ms");
}

/// Kills `ingest` with checkpoints `every` at random moments, then runs it to the end.
fn killed_at_random_moments(every: &str) {
    let seed = seed_from_env(DEFAULT_SEED);
    eprintln!("kill_resume seed: {seed} (reproduce with FILESINK_SEED={seed})");
    let mut rng = XorShift::new(seed);

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let mut text = String::with_capacity(RECORDS * 72);
    for i in 0..RECORDS {
        text.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"user\":\"user_{}\",\"amount\":{}.5}}\n",
            25 + i % 6,
            i % 101,
            i % 977
        ));
    }
    fs::write(&input, text).unwrap();
    let lake = dir.path().join("lake");
    let args = [
        "ingest",
        input.to_str().unwrap(),
        "--to",
        lake.to_str().unwrap(),
        "--checkpoint-every",
        every,
        "--parallelism",
        "2",
    ];
    let started = Instant::now();

    let mut killed = 0;
    let mut finished_early = false;
    for round in 0..KILLS {
        // A run of the whole input takes a few hundred milliseconds; kills land anywhere from
        // startup and restore through a few checkpoints in, so the job is still unfinished
        // after all of them (early rounds kill sooner, around the first checkpoints).
        let delay = Duration::from_millis(rng.between(1, if round < 3 { 30 } else { 100 }));
        let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(args)
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
            Some(status) => {
                assert!(
                    status.success(),
                    "round {round} (seed {seed}): ingest failed: {status}"
                );
                finished_early = true;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                killed += 1;
            }
        }
        let n = assert_prefix_exactly_once(
            &visible_ids(&lake),
            seed,
            &format!("after kill {round} at {delay:?}"),
        );
        let what = if finished_early {
            "finished before"
        } else {
            "killed after"
        };
        eprintln!("round {round}: {what} {delay:?}, {n} records visible");
        if finished_early {
            break;
        }
    }
    assert!(killed > 0, "seed {seed}: no run was killed");

    // Run to completion.
    let out = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "final run (seed {seed}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = assert_prefix_exactly_once(&visible_ids(&lake), seed, "after the final run");
    assert_eq!(
        n, RECORDS,
        "seed {seed}: records missing after the final run"
    );
    let in_progress: Vec<PathBuf> = files(&lake)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with('.') && name.contains(".inprogress.")
        })
        .collect();
    assert!(
        in_progress.is_empty(),
        "seed {seed}: in-progress files left: {in_progress:?}"
    );
    eprintln!(
        "{killed} kills, {RECORDS} records exactly once, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Parses FILESINK_SEED (decimal or 0x hex), or the default.
fn seed_from_env(default: u64) -> u64 {
    std::env::var("FILESINK_SEED")
        .ok()
        .map(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            }
            .expect("FILESINK_SEED must be an integer")
        })
        .unwrap_or(default)
}

#[test]
fn bad_records_of_a_replayed_interval_are_listed_once_after_kills() {
    bad_records_listed_once_after_kills("1500rows", false);
}

/// The same with the file read in ranges on the decoding threads (a time schedule): each
/// bad record names its own line, counted from range to range.
#[test]
fn bad_records_of_ranges_are_listed_once_after_kills() {
    bad_records_listed_once_after_kills("10ms", false);
}

/// Killed runs with `--bad-records` between runs without it, which checkpoint up to the next
/// bad record and stop there: the killed runs' lines ahead of those checkpoints are found
/// all the same.
#[test]
fn bad_records_are_listed_once_after_kills_and_runs_without_the_file() {
    bad_records_listed_once_after_kills("300rows", true);
}

/// Runs the job killed at random times, then to its end; `without_file`: every other run
/// without `--bad-records`.
fn bad_records_listed_once_after_kills(every: &str, without_file: bool) {
    const LINES: usize = 60_000;
    let seed = seed_from_env(DEFAULT_SEED ^ 0xBAD);
    eprintln!("kill_resume bad-records seed: {seed} (reproduce with FILESINK_SEED={seed})");
    let mut rng = XorShift::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    // Sparse enough, without the file, for a run to checkpoint before it meets one.
    let spacing = if without_file { 7000 } else { 1000 };
    let is_bad = |i: usize| i % spacing == spacing - 1;
    let mut text = String::new();
    for i in 0..LINES {
        if is_bad(i) {
            text.push_str(&format!("{{\"id\":{i},\"day\":\n"));
        } else {
            text.push_str(&format!("{{\"id\":{i},\"day\":\"2026-11-25\"}}\n"));
        }
    }
    fs::write(&input, text).unwrap();
    let lake = dir.path().join("lake");
    let bad = dir.path().join("bad.jsonl");
    let args = [
        "ingest",
        input.to_str().unwrap(),
        "--to",
        lake.to_str().unwrap(),
        "--checkpoint-every",
        every,
        "--parallelism",
        "2",
        "--bad-records",
        bad.to_str().unwrap(),
    ];
    for round in 0..6 {
        if without_file && round % 2 == 1 {
            let out = Command::new(env!("CARGO_BIN_EXE_filesink"))
                .args(&args[..args.len() - 2])
                .output()
                .unwrap();
            assert!(!out.status.success(), "a bad record stops it (seed {seed})");
            continue;
        }
        let delay = Duration::from_millis(rng.between(5, 60));
        let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_some() {
            break;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        eprintln!("round {round}: killed after {delay:?}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "final run (seed {seed}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Vec<i64> = (0..LINES)
        .filter(|i| !is_bad(*i))
        .map(|i| i as i64)
        .collect();
    assert_eq!(visible_ids(&lake), expected, "seed {seed}");
    let listed: Vec<String> = fs::read_to_string(&bad)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["source"].as_str().unwrap().to_string()
        })
        .collect();
    let expected: Vec<String> = (0..LINES)
        .filter(|i| is_bad(*i))
        .map(|i| format!("{}:{}", input.to_str().unwrap(), i + 1))
        .collect();
    assert_eq!(listed, expected, "seed {seed}: bad records listed wrongly");
}
