//! The `filesink` binary, run as a user would: ingest, ls, commit, abort, inspect, and what
//! each does after a crash, on bad input and on bad arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

mod common;

use common::cli::*;

const EXIT_ERROR: i32 = 1;
const EXIT_USAGE: i32 = 2;
const EXIT_REFUSED: i32 = 5;
const EXIT_CORRUPT: i32 = 6;

/// Every file under `base` (hidden ones and metadata included) with its size and mtime.
/// Every file under `base` with its length and modification time, except the job locks
/// (`_filesink/jobs/<job>/owner.lock`): a command that takes a job writes who holds it there.
fn snapshot(base: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    // A run refused before it created the lake leaves no directory: nothing in it.
    let mut stack: Vec<PathBuf> = base
        .exists()
        .then(|| base.to_path_buf())
        .into_iter()
        .collect();
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else if e.file_name() != "owner.lock" {
                out.insert(e.path(), (meta.len(), meta.modified().unwrap()));
            }
        }
    }
    out
}

/// Visible data files: no component of the path below `base` starts with `.` or `_`.
fn visible_files(base: &Path) -> Vec<PathBuf> {
    snapshot(base)
        .into_keys()
        .filter(|p| {
            p.strip_prefix(base).unwrap().components().all(|c| {
                let n = c.as_os_str().to_str().unwrap();
                !n.starts_with('.') && !n.starts_with('_')
            })
        })
        .collect()
}

/// Hidden in-progress part files anywhere under `base`.
fn in_progress_files(base: &Path) -> Vec<PathBuf> {
    snapshot(base)
        .into_keys()
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with('.') && n.contains(".inprogress.")
        })
        .collect()
}

/// The `id` of every record in the visible Parquet files whose name contains `filter`.
fn visible_ids(base: &Path, filter: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    for path in visible_files(base) {
        if !path.file_name().unwrap().to_str().unwrap().contains(filter) {
            continue;
        }
        assert_eq!(
            path.extension().and_then(|e| e.to_str()),
            Some("parquet"),
            "{path:?}"
        );
        ids.extend(common::read_ids(&path, &filesink::FileFormat::parquet()));
    }
    ids.sort_unstable();
    ids
}

/// `n` JSON lines like the fixture's, ids `0..n`.
fn write_jsonl(path: &Path, n: usize) {
    let mut out = String::with_capacity(n * 64);
    for i in 0..n {
        out.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"user\":\"user_{}\",\"amount\":{}.25}}\n",
            25 + i % 6,
            i % 97,
            i % 1000
        ));
    }
    fs::write(path, out).unwrap();
}

fn manifests(lake: &Path) -> Vec<PathBuf> {
    let jobs = lake.join("_filesink/jobs");
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(&jobs) else {
        return out;
    };
    for job in entries {
        let dir = job.unwrap().path().join("checkpoints");
        if let Ok(files) = fs::read_dir(dir) {
            for f in files {
                let p = f.unwrap().path();
                let name = p.file_name().unwrap().to_str().unwrap();
                if name.ends_with(".json") && !name.starts_with('.') {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

fn string_set(v: &Value, key: &str) -> BTreeSet<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array `{key}` in {v}"))
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn ingest_writes_every_fixture_record_once_and_ls_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = fixture("events.jsonl");
    let o = run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
    ]);
    let summary = stdout(&o);
    assert!(summary.contains("5000 records"), "{summary}");
    assert!(summary.contains("records/s"), "{summary}");
    assert_exactly_once(&visible_ids(&lake, ""), 0..5000);
    for p in visible_files(&lake) {
        let dir = p.parent().unwrap().file_name().unwrap().to_str().unwrap();
        assert!(dir.starts_with("day=2026-11-"), "{p:?}");
    }

    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert!(ls["sink"]["sink_id"].is_string(), "{ls}");
    assert_eq!(
        ls["committed"]["files"].as_u64().unwrap() as usize,
        visible_files(&lake).len()
    );
    assert_eq!(
        ls["committed"]["partitions"].as_array().unwrap().len(),
        6,
        "{ls}"
    );
    assert_eq!(ls["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(ls["jobs"][0]["finished"], true);
    assert_eq!(ls["jobs"][0]["records"], 5000);
    assert!(ls["jobs"][0]["job"]
        .as_str()
        .unwrap()
        .starts_with("events_"));
    assert_eq!(ls["pending"].as_array().unwrap().len(), 0);
    assert_eq!(ls["leftovers"].as_array().unwrap().len(), 0);

    let text = stdout(&run_ok(&["ls", s(&lake)]));
    assert!(text.contains("day=2026-11-25"), "{text}");
    assert!(
        text.contains("leftovers (hidden, in progress, needed by no manifest): 0"),
        "{text}"
    );

    // The latest manifest, in human form and as JSON.
    let latest = manifests(&lake).pop().unwrap();
    let text = stdout(&run_ok(&["inspect", s(&latest)]));
    assert!(text.contains("finished: yes"), "{text}");
    assert!(text.contains("5000 records written"), "{text}");
    assert!(
        text.contains("schema: id Int64, day Utf8, user Utf8, amount Float64"),
        "{text}"
    );
    let v = json_of(&run_ok(&["inspect", s(&lake), "--json"]));
    assert_eq!(v["manifest"]["finished"], true);
    assert_eq!(v["manifest"]["source_position"]["records"], 5000);
}

/// Files the sink did not write (a README, another tool's output, a file named like a part
/// of a job this sink does not have) are listed apart by `ls`, not counted as committed: they
/// were, so an operator checking a job's output against `ls` saw other people's files as it.
/// A part of the sink's job under a prefix its latest manifest does not show still counts.
#[test]
fn ls_lists_files_the_sink_did_not_write_apart_from_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
        "--job",
        "events",
    ]);
    let ours = visible_files(&lake);
    let part = ours[0].clone();
    let name = part.file_name().unwrap().to_str().unwrap().to_string();
    let partition = part.parent().unwrap().to_path_buf();
    // Another prefix, the same writer's name otherwise: the job's file under a library
    // user's prefix.
    let renamed = partition.join(name.replacen("part-", "events-", 1));
    fs::copy(&part, &renamed).unwrap();
    let foreign = [
        lake.join("README.txt"),
        partition.join("notes.csv"),
        partition.join(name.replacen("-events_", "-other_", 1)),
    ];
    for f in &foreign {
        assert!(!f.exists(), "{f:?}");
        fs::write(f, "not ours").unwrap();
    }
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(
        ls["committed"]["files"].as_u64().unwrap() as usize,
        ours.len() + 1,
        "{ls}"
    );
    assert_eq!(ls["other_files"]["files"], 3, "{ls}");
    assert_eq!(ls["other_files"]["bytes"], 3 * 8, "{ls}");
    let mut listed: Vec<&str> = ls["other_files"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut want: Vec<String> = foreign
        .iter()
        .map(|f| f.strip_prefix(&lake).unwrap().to_str().unwrap().to_string())
        .collect();
    want.sort_unstable();
    assert_eq!(listed, want);
    let text = stdout(&run_ok(&["ls", s(&lake)]));
    assert!(
        text.contains(&format!("committed: {} file(s)", ours.len() + 1)),
        "{text}"
    );
    assert!(
        text.contains("other files (visible, not parts of this sink's jobs"),
        "{text}"
    );
    assert!(text.contains("README.txt"), "{text}");

    // A directory that is no sink: everything in it is another's.
    let plain = dir.path().join("plain");
    fs::create_dir(&plain).unwrap();
    fs::write(plain.join("a.parquet"), "x").unwrap();
    let ls = json_of(&run_ok(&["ls", s(&plain), "--json"]));
    assert_eq!(ls["committed"]["files"], 0, "{ls}");
    assert_eq!(ls["other_files"]["files"], 1, "{ls}");
    // The foreign files are still there: ls touches nothing.
    for f in &foreign {
        assert!(f.exists(), "{f:?}");
    }
}

#[test]
fn csv_input_and_output_formats_work() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = fixture("events.csv");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "1000rows",
    ]);
    assert_exactly_once(&visible_ids(&lake, ""), 0..5000);

    // JSON lines out, from CSV in, through a file:// URL.
    let lake2 = dir.path().join("lake2");
    let url = format!("file://{}", lake2.display());
    run_ok(&["ingest", s(&input), "--to", &url, "--format", "jsonl"]);
    let mut lines = 0;
    for p in visible_files(&lake2) {
        assert_eq!(p.extension().unwrap(), "jsonl");
        lines += fs::read_to_string(&p).unwrap().lines().count();
    }
    assert_eq!(lines, 5000);
}

#[test]
fn a_crashed_run_leaves_leftovers_that_abort_removes_and_a_rerun_completes_exactly_once() {
    const N: usize = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = dir.path().join("big.jsonl");
    write_jsonl(&input, N);
    let ingest = [
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "500rows",
    ];

    // Kill a run soon after a manifest appears, until the kill leaves a leftover behind (there
    // is none between a commit and the next write; a test must not depend on luck).
    let mut ls = Value::Null;
    for attempt in 0.. {
        assert!(attempt < 5, "no kill left a leftover behind");
        let before = manifests(&lake).len();
        let before_ids: Vec<u64> = manifests(&lake)
            .iter()
            .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
            .collect();
        let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(ingest)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ids: Vec<u64> = manifests(&lake)
                .iter()
                .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
                .collect();
            if ids.iter().max() > before_ids.iter().max() || (before == 0 && !ids.is_empty()) {
                break;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "ingest ended before its first checkpoint"
            );
            assert!(Instant::now() < deadline, "no checkpoint within 60 s");
            std::thread::sleep(Duration::from_millis(2));
        }
        // Right after a manifest appears the job commits it: let it get back to writing.
        std::thread::sleep(Duration::from_millis(5 + 10 * attempt));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "ingest finished before it was killed");
        ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
        if !ls["leftovers"].as_array().unwrap().is_empty() {
            break;
        }
    }
    assert_eq!(ls["jobs"][0]["finished"], false, "{ls}");
    let leftovers = string_set(&ls, "leftovers");
    for l in &leftovers {
        assert!(lake.join(l).is_file(), "{l}");
        assert!(l.contains(".inprogress."), "{l}");
    }
    // Nothing visible twice, even now.
    let ids = visible_ids(&lake, "");
    assert_exactly_once(&ids, 0..ids.len() as i64);

    // A dry run lists exactly those leftovers and changes nothing.
    let before = snapshot(&lake);
    let dry = json_of(&run_ok(&[
        "abort",
        s(&lake),
        "--dry-run",
        "--force",
        "--json",
    ]));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(string_set(&dry, "remove"), leftovers, "{dry}");
    let would_commit: BTreeSet<String> = dry["commit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["final_path"].as_str().unwrap().to_string())
        .collect();
    let pending: BTreeSet<String> = ls["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["final_path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(would_commit, pending);
    assert_eq!(snapshot(&lake), before, "abort --dry-run changed the lake");

    // commit makes pending files visible; a second commit finds them committed.
    let c = json_of(&run_ok(&["commit", s(&lake), "--json"]));
    assert_eq!(c["failed"], 0, "{c}");
    let c2 = json_of(&run_ok(&["commit", s(&lake), "--json"]));
    assert_eq!(c2["committed"], 0, "{c2}");
    assert_eq!(
        c2["already_committed"],
        c2["jobs"][0]["files"].as_array().unwrap().len()
    );
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert!(ls["pending"].as_array().unwrap().is_empty(), "{ls}");

    // abort removes exactly the leftovers. The killed run's job is known dead (the kernel
    // dropped its lock with the process), so abort needs no --force, however fresh they are.
    let a = json_of(&run_ok(&["abort", s(&lake), "--json"]));
    assert_eq!(string_set(&a, "remove"), leftovers, "{a}");
    assert!(
        in_progress_files(&lake).is_empty(),
        "{:?}",
        in_progress_files(&lake)
    );
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert!(ls["leftovers"].as_array().unwrap().is_empty(), "{ls}");
    assert!(ls["pending"].as_array().unwrap().is_empty(), "{ls}");
    let visible_before_rerun = visible_ids(&lake, "");
    assert_exactly_once(&visible_before_rerun, 0..visible_before_rerun.len() as i64);

    // The same command resumes and completes: every id once.
    let o = run_ok(&ingest);
    assert!(stderr(&o).contains("resuming job"), "{}", stderr(&o));
    assert_exactly_once(&visible_ids(&lake, ""), 0..N as i64);
    assert!(in_progress_files(&lake).is_empty());
}

#[test]
fn rerunning_a_finished_job_is_a_no_op_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = fixture("events.jsonl");
    let args = ["ingest", s(&input), "--to", s(&lake)];
    run_ok(&args);
    let before = visible_files(&lake);
    let o = run_ok(&args);
    assert!(stdout(&o).contains("already finished"), "{}", stdout(&o));
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(visible_files(&lake), before);
    assert_exactly_once(&visible_ids(&lake, ""), 0..5000);
}

#[test]
fn two_inputs_into_one_lake_are_two_jobs_both_fully_visible() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let a = dir.path().join("first.jsonl");
    let b = dir.path().join("second.jsonl");
    write_jsonl(&a, 3000);
    write_jsonl(&b, 2000);
    run_ok(&[
        "ingest",
        s(&a),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "700rows",
    ]);
    let first_files = visible_files(&lake);
    run_ok(&[
        "ingest",
        s(&b),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "700rows",
    ]);
    // The first job's files are untouched.
    for f in &first_files {
        assert!(f.is_file(), "{f:?} went away");
    }
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    let jobs: Vec<&str> = ls["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"].as_str().unwrap())
        .collect();
    assert_eq!(jobs.len(), 2, "{ls}");
    let first = jobs.iter().find(|j| j.starts_with("first_")).unwrap();
    let second = jobs.iter().find(|j| j.starts_with("second_")).unwrap();
    assert!(ls["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|j| j["finished"] == true));
    // Part files carry their writer id `<job>_<writer>`.
    assert_exactly_once(&visible_ids(&lake, &format!("-{first}_")), 0..3000);
    assert_exactly_once(&visible_ids(&lake, &format!("-{second}_")), 0..2000);
    assert_eq!(visible_ids(&lake, "").len(), 5000);
}

/// 1500 good lines with one bad line at `bad_line` (1-based).
fn input_with_bad_line(path: &Path, bad_line: usize, bad: &str) {
    let mut out = String::new();
    for i in 0..1500 {
        if i + 1 == bad_line {
            out.push_str(bad);
        } else {
            out.push_str(&format!(
                "{{\"id\":{i},\"day\":\"2026-11-25\",\"amount\":1.5}}"
            ));
        }
        out.push('\n');
    }
    fs::write(path, out).unwrap();
}

#[test]
fn a_malformed_line_stops_the_run_naming_file_and_line_with_nothing_visible() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bad_line, bad) in [
        ("broken.jsonl", 57, "{\"id\": 56, \"day\": "),
        (
            "wrongtype.jsonl",
            1234,
            "{\"id\":\"not a number\",\"day\":\"2026-11-25\",\"amount\":1.5}",
        ),
    ] {
        let lake = dir.path().join(format!("lake-{name}"));
        let input = dir.path().join(name);
        input_with_bad_line(&input, bad_line, bad);
        let o = run_expect(&["ingest", s(&input), "--to", s(&lake)], EXIT_ERROR);
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "error: malformed record at {}:{bad_line}: ",
                s(&input)
            )),
            "{err}"
        );
        assert_eq!(err.matches("error:").count(), 1, "printed once: {err}");
        assert!(
            visible_files(&lake).is_empty(),
            "{:?}",
            visible_files(&lake)
        );
    }

    // CSV with a wrong field count.
    let lake = dir.path().join("lake-csv");
    let input = dir.path().join("short.csv");
    fs::write(
        &input,
        "id,day,amount\n1,2026-11-25,1.5\n2,2026-11-26\n3,2026-11-27,2.5\n",
    )
    .unwrap();
    let o = run_expect(&["ingest", s(&input), "--to", s(&lake)], EXIT_ERROR);
    assert!(
        stderr(&o).contains(&format!("malformed record at {}:3: ", s(&input))),
        "{}",
        stderr(&o)
    );
    assert!(visible_files(&lake).is_empty());
}

#[test]
fn bad_records_are_collected_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = dir.path().join("events.jsonl");
    input_with_bad_line(&input, 57, "{\"id\": 56, \"day\": ");
    let bad = dir.path().join("bad.jsonl");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--bad-records",
        s(&bad),
        "--checkpoint-every",
        "100rows",
    ]);
    let lines: Vec<Value> = fs::read_to_string(&bad)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["source"], format!("{}:57", s(&input)));
    assert_eq!(lines[0]["line"], "{\"id\": 56, \"day\": ");
    assert!(lines[0]["error"].as_str().unwrap().len() > 3);
    let expected: Vec<i64> = (0..1500).filter(|&i| i != 56).collect();
    assert_exactly_once(&visible_ids(&lake, ""), expected);
}

#[test]
fn abort_refuses_a_directory_that_is_not_a_filesink_output_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_lake = dir.path().join("data");
    fs::create_dir_all(not_a_lake.join("day=1")).unwrap();
    fs::write(not_a_lake.join("day=1/file.parquet"), b"x").unwrap();
    fs::write(
        not_a_lake.join("day=1/.part-0.parquet.inprogress.abc123"),
        b"y",
    )
    .unwrap();
    let before = snapshot(&not_a_lake);
    let o = run_expect(&["abort", s(&not_a_lake), "--force"], EXIT_REFUSED);
    assert!(
        stderr(&o).contains("not a filesink output"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&not_a_lake), before);
    run_expect(
        &["abort", s(&dir.path().join("missing")), "--force"],
        EXIT_REFUSED,
    );
    // Every command that reads a lake says the same of a missing one.
    for cmd in ["ls", "commit", "vacuum"] {
        let o = run_expect(&[cmd, s(&dir.path().join("missing"))], EXIT_REFUSED);
        assert!(
            stderr(&o).contains("is not a filesink output"),
            "{cmd}: {}",
            stderr(&o)
        );
    }
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn a_truncated_manifest_is_corrupt_state_named_by_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "2000rows",
    ]);
    let latest = manifests(&lake).pop().unwrap();
    let bytes = fs::read(&latest).unwrap();
    fs::write(&latest, &bytes[..bytes.len() / 2]).unwrap();
    let o = run_expect(&["inspect", s(&latest)], EXIT_CORRUPT);
    assert!(stderr(&o).contains(s(&latest)), "{}", stderr(&o));
    assert!(stderr(&o).contains("corrupt manifest"), "{}", stderr(&o));
    let o = run_expect(&["inspect", s(&lake)], EXIT_CORRUPT);
    assert!(stderr(&o).contains("corrupt manifest"), "{}", stderr(&o));
    // ls still shows what it can, then says what is wrong.
    let o = run_expect(&["ls", s(&lake)], EXIT_CORRUPT);
    assert!(
        stdout(&o).contains("latest manifest unreadable"),
        "{}",
        stdout(&o)
    );
    // abort will not guess which hidden files the job needs.
    let before = snapshot(&lake);
    run_expect(&["abort", s(&lake), "--force"], EXIT_CORRUPT);
    assert_eq!(snapshot(&lake), before);
}

/// `_filesink/sink.json` deleted while jobs have checkpoints: no new identity is made (it
/// would turn every manifest foreign, and their pending files committable by nothing); the
/// error names the identity to put back, and with it back the job goes on.
#[test]
fn a_lost_sink_identity_is_not_replaced_while_jobs_have_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let ingest = |job: &str, code: i32| {
        run_expect(
            &[
                "ingest",
                s(&fixture("events.jsonl")),
                "--to",
                s(&lake),
                "--checkpoint-every",
                "2000rows",
                "--job",
                job,
            ],
            code,
        )
    };
    ingest("first", 0);
    let identity = lake.join("_filesink/sink.json");
    let original = fs::read(&identity).unwrap();
    let sink_id = serde_json::from_slice::<Value>(&original).unwrap()["sink_id"]
        .as_str()
        .unwrap()
        .to_owned();
    fs::remove_file(&identity).unwrap();
    let before = snapshot(&lake);
    for job in ["first", "second"] {
        let o = ingest(job, EXIT_CORRUPT);
        assert!(stderr(&o).contains("is missing"), "{}", stderr(&o));
        assert!(stderr(&o).contains(&sink_id), "{}", stderr(&o));
    }
    assert!(!identity.exists(), "no identity made");
    assert_eq!(snapshot(&lake), before);
    // Written back as the message says: the jobs are the sink's again.
    fs::write(
        &identity,
        format!("{{\"version\":1,\"sink_id\":\"{sink_id}\",\"created_at_ms\":0}}"),
    )
    .unwrap();
    assert!(stdout(&ingest("first", 0)).contains("nothing to do"));
    ingest("second", 0);
}

#[test]
fn usage_errors_exit_2() {
    let o = run_expect(&["ingest", "x.jsonl"], EXIT_USAGE); // no --to
    assert!(stderr(&o).contains("--to"), "{}", stderr(&o));
    run_expect(&["frobnicate"], EXIT_USAGE);
    run_expect(&["abort", ".", "--older-than", "soon"], EXIT_USAGE);
    let o = run_expect(
        &[
            "ingest",
            s(&fixture("events.jsonl")),
            "--to",
            "gs://bucket/lake",
        ],
        EXIT_USAGE,
    );
    assert!(
        stderr(&o).contains("`gs://` locations are not supported yet"),
        "{}",
        stderr(&o)
    );
    let o = run_expect(&["ingest", "-", "--to", "lake"], EXIT_USAGE);
    assert!(stderr(&o).contains("--job"), "{}", stderr(&o));
}

#[test]
fn help_documents_the_exit_codes() {
    let o = run_ok(&["--help"]);
    for code in [
        "0  ok",
        "1  error",
        "2  usage",
        "3  conflict",
        "4  data lost",
        "5  refused",
        "6  corrupt state",
    ] {
        assert!(
            stdout(&o).contains(code),
            "{code} missing from\n{}",
            stdout(&o)
        );
    }
    let o = run_ok(&["ingest", "--help"]);
    assert!(stdout(&o).contains("--checkpoint-every"), "{}", stdout(&o));
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
    ]);
    // Like `filesink ls lake | head -1`: the reader goes away before everything is written.
    let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(["ls", s(&lake)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn a_schema_file_sets_the_types_and_rejects_records_that_do_not_fit() {
    use arrow::datatypes::{DataType, Field, Schema};
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, true),
        Field::new("amount", DataType::Float32, true),
    ]);
    let schema_file = dir.path().join("schema.json");
    fs::write(&schema_file, serde_json::to_vec(&schema).unwrap()).unwrap();
    let lake = dir.path().join("lake");
    let input = fixture("events.jsonl");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--schema",
        s(&schema_file),
    ]);
    assert_exactly_once(&visible_ids(&lake, ""), 0..5000);
    let file = visible_files(&lake).pop().unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(file).unwrap()).unwrap();
    let amount = reader.schema().field_with_name("amount").unwrap().clone();
    assert_eq!(amount.data_type(), &DataType::Float32);

    // A record without the non-nullable `day` does not fit.
    let bad = dir.path().join("noday.jsonl");
    fs::write(&bad, "{\"id\":1,\"day\":\"d\"}\n{\"id\":2}\n").unwrap();
    let o = run_expect(
        &[
            "ingest",
            s(&bad),
            "--to",
            s(&lake),
            "--schema",
            s(&schema_file),
        ],
        EXIT_ERROR,
    );
    assert!(
        stderr(&o).contains(&format!("malformed record at {}:2: ", s(&bad))),
        "{}",
        stderr(&o)
    );
}

#[test]
fn commit_takes_a_job_and_checkpoint_and_refuses_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = fixture("events.csv");
    let o = run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "1000rows",
        "--json",
    ]);
    let summary = json_of(&o);
    let job = summary["job"].as_str().unwrap().to_string();
    let last = summary["last_checkpoint"].as_u64().unwrap();
    assert_eq!(summary["records"], 5000);

    let o = run_ok(&[
        "commit",
        s(&lake),
        "--job",
        &job,
        "--checkpoint",
        &(last - 1).to_string(),
        "--json",
    ]);
    let v = json_of(&o);
    assert_eq!(v["committed"], 0, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert!(v["already_committed"].as_u64().unwrap() >= 1, "{v}");
    let text = stdout(&run_ok(&["commit", s(&lake), "--dry-run"]));
    assert!(text.contains("total: would commit 0"), "{text}");

    // Manifests older than the retention are gone: a clear error, not "corrupt".
    let o = run_expect(
        &["commit", s(&lake), "--job", &job, "--checkpoint", "1"],
        EXIT_ERROR,
    );
    assert!(
        stderr(&o).contains("has no manifest for checkpoint 1"),
        "{}",
        stderr(&o)
    );
    run_expect(&["commit", s(&lake), "--job", "nosuchjob"], EXIT_ERROR);
}

#[test]
fn the_committed_fixtures_are_what_gen_fixtures_writes() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gen-fixtures");
    let status = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .status()
        .expect("python3 runs scripts/gen-fixtures");
    assert!(status.success());
    for name in ["events.jsonl", "events.csv"] {
        let fresh = fs::read(dir.path().join(name)).unwrap();
        let committed = fs::read(fixture(name)).unwrap();
        assert!(
            fresh == committed,
            "fixtures/input/{name} differs from what scripts/gen-fixtures writes"
        );
    }
    let lines = fs::read_to_string(fixture("events.csv"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, 5001);
}

/// Several jobs in one lake (as several `ingest` processes leave it); in one job's latest
/// manifest one file is put back to its pending name, as a crash between the manifest and the
/// commit leaves it. `abort` commits that file and only that one: the files that are visible
/// with their size and have no pending file left are not probed, listed or touched.
#[test]
fn abort_on_a_lake_of_several_jobs_commits_only_what_is_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    for (job, n) in [("day_1", 1200), ("day_2", 900), ("day_3", 600)] {
        let input = dir.path().join(format!("{job}.jsonl"));
        write_jsonl(&input, n);
        run_ok(&[
            "ingest",
            s(&input),
            "--to",
            s(&lake),
            "--job",
            job,
            "--partition-by",
            "day",
        ]);
    }
    let all = visible_files(&lake);
    let inspect = json_of(&run_ok(&["inspect", s(&lake), "--job", "day_2", "--json"]));
    let c = &inspect["manifest"]["committables"][0];
    let final_path = c["final_path"].as_str().unwrap();
    let pending = c["pending"]["in_progress_path"].as_str().unwrap();
    fs::rename(lake.join(final_path), lake.join(pending)).unwrap();

    let dry = json_of(&run_ok(&["abort", s(&lake), "--dry-run", "--json"]));
    let commits: Vec<(&str, &str)> = dry["commit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["final_path"].as_str().unwrap(),
                c["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(commits.len(), 1, "{dry}");
    assert_eq!(commits[0].0, final_path, "{dry}");
    assert!(dry["remove"].as_array().unwrap().is_empty(), "{dry}");

    let done = json_of(&run_ok(&["abort", s(&lake), "--json"]));
    assert_eq!(done["committed"], 1, "{done}");
    assert_eq!(done["removed"], 0, "{done}");
    assert_eq!(visible_files(&lake), all);
    assert!(!lake.join(pending).exists());
    assert_exactly_once(&visible_ids(&lake, "-day_1_"), 0..1200);
    assert_exactly_once(&visible_ids(&lake, "-day_2_"), 0..900);
    assert_exactly_once(&visible_ids(&lake, "-day_3_"), 0..600);
}
