//! One live run per job, through the real binary on local disk: a run that overlaps a live
//! one (a cron job started again before the last run ended) is refused at once and changes
//! nothing; `abort` and `commit` leave a live job alone; a killed run's job is free at once.
//!
//! The live run reads standard input that the test holds open, so it stays live exactly as
//! long as the test wants; the test waits for it (bounded) through `ls --json`.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::*;
use common::{read_ids, visible_files};
use filesink::FileFormat;

const EXIT_REFUSED: i32 = 5;

fn line(id: i64) -> String {
    format!("{{\"id\":{id},\"day\":\"d{}\"}}\n", id % 3)
}

/// Starts `ingest - --to <lake> --job cron` with its standard input held by the test.
fn start_live_run(lake: &Path) -> (Child, ChildStdin) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args([
            "ingest",
            "-",
            "--to",
            s(lake),
            "--job",
            "cron",
            "--format",
            "jsonl",
            "--partition-by",
            "day",
            "--checkpoint-every",
            "10rows",
            "--schema",
            s(&schema_file(lake)),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}

fn schema_file(lake: &Path) -> PathBuf {
    let path = lake.with_extension("schema.json");
    std::fs::write(
        &path,
        r#"{"fields":[
            {"name":"id","data_type":"Int64","nullable":false,"dict_id":0,"dict_is_ordered":false,"metadata":{}},
            {"name":"day","data_type":"Utf8","nullable":false,"dict_id":0,"dict_is_ordered":false,"metadata":{}}
        ],"metadata":{}}"#,
    )
    .unwrap();
    path
}

/// A live run ([`start_live_run`]) fed the records `ids`, once it holds its job.
fn live_run_fed(lake: &Path, ids: std::ops::Range<i64>) -> (Child, ChildStdin) {
    let (mut live, mut stdin) = start_live_run(lake);
    for id in ids {
        stdin.write_all(line(id).as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    wait_until_live(lake, &mut live);
    (live, stdin)
}

/// Feeds the records `ids` to a live run, ends its input and waits for it to succeed.
fn finish_with(run: Child, mut stdin: ChildStdin, ids: std::ops::Range<i64>) {
    for id in ids {
        stdin.write_all(line(id).as_bytes()).unwrap();
    }
    drop(stdin);
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits (bounded) until `ls --json` shows job `cron` held by a live run: the run has taken
/// its job.
fn wait_until_live(lake: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the live run ended ({status}) before it took its job");
        }
        let o = filesink(&["ls", s(lake), "--json"]);
        if o.status.success() {
            let v = json_of(&o);
            let live = v["jobs"]
                .as_array()
                .is_some_and(|jobs| jobs.iter().any(|j| j["job"] == "cron" && j["live"] == true));
            if live {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "ls never showed the job held by the live run: {}",
            stdout(&o)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until job `cron` has checkpointed `records` records.
fn wait_until_checkpointed(lake: &Path, records: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = json_of(&run_ok(&["ls", s(lake), "--json"]));
        if v["jobs"][0]["records"].as_i64() == Some(records)
            && v["pending"].as_array().is_some_and(|p| p.is_empty())
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{records} records never checkpointed: {v}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `dir` with its length and content, hidden and metadata included, except
/// the lock file (its content names the holder) — what a refused run must not change.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_name() != "owner.lock" {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn visible_ids(lake: &Path) -> Vec<i64> {
    let mut ids: Vec<i64> = visible_files(lake)
        .iter()
        .flat_map(|p| read_ids(p, &FileFormat::json_lines()))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_run_that_overlaps_a_live_run_of_its_job_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let (live, stdin) = live_run_fed(&lake, 0..20);
    // Once the 20 records are checkpointed the live run waits for input and changes nothing.
    wait_until_checkpointed(&lake, 20);
    let before = snapshot(&lake);

    // The same command, and variants of it that name the same job: each refused at once.
    let input = dir.path().join("more.jsonl");
    std::fs::write(&input, (100..110).map(line).collect::<String>()).unwrap();
    let schema = schema_file(&lake);
    let variants: Vec<Vec<&str>> = vec![
        vec![
            "ingest",
            "-",
            "--to",
            s(&lake),
            "--job",
            "cron",
            "--format",
            "jsonl",
            "--partition-by",
            "day",
            "--schema",
            s(&schema),
        ],
        vec![
            "ingest",
            s(&input),
            "--to",
            s(&lake),
            "--job",
            "cron",
            "--format",
            "jsonl",
            "--partition-by",
            "day",
        ],
        vec![
            "ingest",
            s(&input),
            "--to",
            s(&lake),
            "--job",
            "cron",
            "--format",
            "parquet",
        ],
    ];
    let lake_rel = format!("{}/../lake", s(&lake));
    let other_spelling = vec!["ingest", s(&input), "--to", &lake_rel, "--job", "cron"];
    for args in variants.iter().chain(std::iter::once(&other_spelling)) {
        let o = run_expect(args, EXIT_REFUSED);
        let err = stderr(&o);
        assert!(
            err.contains("job `cron` is owned by another run")
                && err.contains("nothing was changed"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("pid {}", live.id())),
            "names the live run: {err}"
        );
        assert_eq!(snapshot(&lake), before, "{args:?} changed the lake");
    }

    // A second run reading a standard input that never ends is refused at once too: it does
    // not wait for input to infer a schema first.
    let (mut second, second_stdin) = {
        let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(["ingest", "-", "--to", s(&lake), "--job", "cron"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        (child, stdin)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            second.kill().unwrap();
            panic!("a second run with an open standard input was not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(second_stdin);
    assert_eq!(status.code(), Some(EXIT_REFUSED));
    assert_eq!(snapshot(&lake), before, "the second run changed the lake");

    // abort leaves the live job alone (its files, its manifests), and says so.
    let a = json_of(&run_ok(&["abort", s(&lake), "--json"]));
    assert_eq!(a["live_jobs"][0]["job"], "cron", "{a}");
    assert!(a["remove"].as_array().unwrap().is_empty(), "{a}");
    assert!(a["commit"].as_array().unwrap().is_empty(), "{a}");
    assert_eq!(snapshot(&lake), before, "abort touched a live job");
    // commit of the live job is refused; of every job, the live one is skipped.
    run_expect(&["commit", s(&lake), "--job", "cron"], EXIT_REFUSED);
    let c = json_of(&run_ok(&["commit", s(&lake), "--json"]));
    assert_eq!(c["skipped_live_jobs"][0]["job"], "cron", "{c}");
    assert_eq!(snapshot(&lake), before, "commit touched a live job");

    // The live run goes on and finishes, exactly once; then the job is free.
    finish_with(live, stdin, 20..40);
    assert_exactly_once(&visible_ids(&lake), 0..40);
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(ls["jobs"][0]["live"], false, "{ls}");
}

#[test]
fn a_killed_run_frees_its_job_at_once_on_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    // Fewer records than a checkpoint takes: the rerun starts the job afresh.
    let (mut live, stdin) = live_run_fed(&lake, 0..5);
    live.kill().unwrap(); // SIGKILL: the kernel closes the lock with the process
    live.wait().unwrap();
    drop(stdin);
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(ls["jobs"][0]["live"], false, "{ls}");
    // A rerun of the job takes it at once and resumes from the dead run's last checkpoint.
    let (mut rerun, stdin) = start_live_run(&lake);
    wait_until_live(&lake, &mut rerun);
    finish_with(rerun, stdin, 0..40);
    assert_exactly_once(&visible_ids(&lake), 0..40);
}

/// `abort` lists each leftover it keeps once, under its first reason: the in-progress files
/// of a live run are the live run's, not also "younger than `--older-than`" (as they are).
#[test]
fn abort_lists_each_kept_leftover_once() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    // Fewer records than a checkpoint takes: they stay in the run's in-progress files.
    let (live, stdin) = live_run_fed(&lake, 0..5);
    let deadline = Instant::now() + Duration::from_secs(30);
    let a = loop {
        let a = json_of(&run_ok(&[
            "abort",
            s(&lake),
            "--dry-run",
            "--older-than",
            "1h",
            "--json",
        ]));
        if !a["kept_live"].as_array().unwrap().is_empty() {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "the live run's in-progress files never showed: {a}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let live_paths: Vec<&serde_json::Value> = a["kept_live"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["path"])
        .collect();
    for path in a["kept_younger"].as_array().unwrap() {
        assert!(!live_paths.contains(&path), "{path} listed twice: {a}");
    }
    finish_with(live, stdin, 5..10);
    assert_exactly_once(&visible_ids(&lake), 0..10);
}
