//! The Delta commands as an operator runs them: `ingest --table delta` and its usage errors,
//! `ls` showing the table and how far each job is in its log, `compact` (dry run and a round).

mod common;

use common::cli::{json_of, run_expect, run_ok, s, stderr, stdout};

fn input(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let path = dir.join("events.jsonl");
    let text: String = (0..n)
        .map(|i| format!("{{\"id\":{i},\"day\":\"2026-11-{:02}\"}}\n", 25 + i % 3))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_table_takes_parquet_only_and_single_writer_needs_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 10);
    let lake = dir.path().join("lake");
    let o = run_expect(
        &[
            "ingest",
            s(&events),
            "--to",
            s(&lake),
            "--table",
            "delta",
            "--format",
            "jsonl",
        ],
        2,
    );
    assert!(
        stderr(&o).contains("--table delta holds Parquet files"),
        "{}",
        stderr(&o)
    );
    let o = run_expect(
        &["ingest", s(&events), "--to", s(&lake), "--single-writer"],
        2,
    );
    assert!(stderr(&o).contains("needs --table delta"), "{}", stderr(&o));
    assert!(!lake.exists(), "a usage error creates nothing");
}

#[test]
fn ls_shows_the_table_and_compact_merges_its_small_files() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 3000);
    let lake = dir.path().join("lake");
    run_ok(&[
        "ingest",
        s(&events),
        "--to",
        s(&lake),
        "--table",
        "delta",
        "--partition-by",
        "day",
        "--checkpoint-every",
        "500rows",
        "--job",
        "events",
    ]);
    let ls = stdout(&run_ok(&["ls", s(&lake)]));
    assert!(ls.contains("delta table: version"), "{ls}");
    assert!(ls.contains("in the table's log up to checkpoint"), "{ls}");
    let v = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    let files_before = v["table"]["live_files"].as_u64().unwrap();
    assert!(files_before >= 6, "{v}");
    assert!(v["jobs"][0]["in_table_log"].as_i64().is_some(), "{v}");

    let dry = json_of(&run_ok(&["compact", s(&lake), "--dry-run", "--json"]));
    assert_eq!(dry["report"]["bins"].as_array().unwrap().len(), 3, "{dry}");
    let again = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(
        again["table"]["live_files"], v["table"]["live_files"],
        "a dry run changes nothing"
    );

    let out = stdout(&run_ok(&["compact", s(&lake)]));
    assert!(out.contains("merged"), "{out}");
    let after = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(after["table"]["live_files"], 3, "{after}");
    assert!(after["table"]["tombstones"].as_u64().unwrap() >= files_before);
    let out = stdout(&run_ok(&["compact", s(&lake)]));
    assert!(out.contains("nothing to compact"), "{out}");
}

#[test]
fn compact_refuses_a_directory_that_is_not_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 10);
    let lake = dir.path().join("lake");
    run_ok(&["ingest", s(&events), "--to", s(&lake)]);
    let o = run_expect(&["compact", s(&lake)], 1);
    assert!(
        stderr(&o).contains("is not a Delta table"),
        "{}",
        stderr(&o)
    );
}
