//! An ingest holds a part file open per partition it is writing. `filesink` raises its soft
//! limit of open files to the hard limit at start, and a run that still reaches the limit
//! fails saying what to do, with nothing made visible that its restart would not own.

use std::fs;
use std::process::{Command, Output, Stdio};

mod common;

use common::cli::*;

/// `filesink args` under `ulimit` settings given as shell words (`-Sn 64`).
fn filesink_limited(limit: &str, args: &[&str]) -> Output {
    let mut script = format!("ulimit {limit} && exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${i}\""));
    }
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run sh")
}

/// Records spread over `partitions` partitions.
fn input(dir: &std::path::Path, partitions: usize) -> std::path::PathBuf {
    let path = dir.join("in.jsonl");
    let lines: String = (0..partitions * 2)
        .map(|i| format!("{{\"id\":{i},\"key\":\"k{:04}\"}}\n", i % partitions))
        .collect();
    fs::write(&path, lines).unwrap();
    path
}

/// `filesink ingest INPUT --to LAKE --partition-by key`.
fn ingest_args<'a>(input: &'a std::path::Path, lake: &'a std::path::Path) -> [&'a str; 6] {
    ["ingest", s(input), "--to", s(lake), "--partition-by", "key"]
}

/// A soft limit below the partitions being written is raised to the hard limit: the run
/// finishes, every record once.
#[test]
fn a_low_soft_limit_of_open_files_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 300);
    let lake = dir.path().join("lake");
    let o = filesink_limited("-Sn 64", &ingest_args(&input, &lake));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_exactly_once(&common::visible_parquet_ids(&lake), 0..600);
}

/// A hard limit below the partitions being written fails the run with the limit and what to
/// do; nothing is visible, and a rerun with room takes every record once.
#[test]
fn a_run_out_of_open_files_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 300);
    let lake = dir.path().join("lake");
    let args = ingest_args(&input, &lake);
    let o = filesink_limited("-n 64", &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("ulimit -n"), "{err}");
    assert!(err.contains("64 here, at most 64"), "{err}");
    assert!(common::visible_parquet_ids(&lake).is_empty());
    run_ok(&args);
    assert_exactly_once(&common::visible_parquet_ids(&lake), 0..600);
}
