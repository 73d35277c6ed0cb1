//! An ingest holds a part file open per partition it is writing, up to each writer's share of
//! the limit of open files and of the memory budget; `filesink` raises its soft limit of open
//! files to the hard limit at start. Partitions beyond that are gathered until the
//! checkpoint, and still get one file each.

use std::fs;
use std::process::{Command, Output, Stdio};

mod common;

use common::cli::*;

/// `filesink args` under `ulimit` settings given as shell words (`-Sn 64`).
fn filesink_limited(limit: &str, args: &[&str]) -> Output {
    let mut script = format!("ulimit {limit} && exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${{{i}}}\""));
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

/// A hard limit far below the partitions being written: each writer keeps at most its share
/// of the limit open and gathers the other partitions' records until the checkpoint, where
/// each is written into one file. The run finishes, every record once, one file per
/// partition; so does a rerun over a grown input, and a run with a tiny memory budget, whose
/// gathered records go through the scratch file.
#[test]
fn partitions_beyond_the_open_files_limit_are_gathered_one_file_each() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 300);
    let lake = dir.path().join("lake");
    let args = ingest_args(&input, &lake);
    let o = filesink_limited("-n 64", &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_exactly_once(&common::visible_parquet_ids(&lake), 0..600);
    assert_eq!(parquet_files(&lake), 300, "one file per partition");

    // The same records again as a second input, with checkpoints every 150 records and a
    // budget that keeps one file open per writer: each checkpoint writes one file per
    // partition it touched.
    let more = dir.path().join("more.jsonl");
    let lines: String = (600..1200)
        .map(|i| format!("{{\"id\":{i},\"key\":\"k{:04}\"}}\n", i % 300))
        .collect();
    fs::write(&more, lines).unwrap();
    let tiny = dir.path().join("tiny");
    let o = filesink_limited(
        "-n 64",
        &[
            "ingest",
            s(&more),
            "--to",
            s(&tiny),
            "--partition-by",
            "key",
            "--checkpoint-every",
            "150rows",
            "--memory",
            "1MiB",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_exactly_once(&common::visible_parquet_ids(&tiny), 600..1200);
    // 4 checkpoints of 150 records over 300 partitions: 150 files each.
    assert_eq!(
        parquet_files(&tiny),
        600,
        "one file per partition per checkpoint"
    );
}

/// The visible Parquet files under `lake`.
fn parquet_files(lake: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path, n: &mut usize) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(['.', '_']) {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), n);
            } else if name.ends_with(".parquet") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(lake, &mut n);
    n
}

/// A resumed job keeps the writers it started with, and they share the limit of open files
/// (and the memory budget) among themselves: a job of 8 writers rerun over its grown input
/// on a machine whose new jobs would have fewer stays within the limit, every record once.
#[test]
fn a_resumed_job_shares_the_limits_among_its_own_writers() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 300);
    let lake = dir.path().join("lake");
    let mut args = ingest_args(&input, &lake).to_vec();
    args.extend(["--parallelism", "8"]);
    let o = filesink_limited("-n 64", &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut grown = fs::read_to_string(&input).unwrap();
    grown.extend((600..1200).map(|i| format!("{{\"id\":{i},\"key\":\"k{:04}\"}}\n", i % 300)));
    fs::write(&input, grown).unwrap();
    let o = filesink_limited("-n 64", &ingest_args(&input, &lake));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_exactly_once(&common::visible_parquet_ids(&lake), 0..1200);
}
