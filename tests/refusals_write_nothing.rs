//! A refusal or a dry run writes nothing: not the sink's identity, not a job's directory, not
//! a lock file. And the kind of a lake (plain files or a Delta table) is fixed when it is
//! created, before its first job wrote anything.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use common::cli::*;
use common::tree;

const EXIT_USAGE: i32 = 2;
const EXIT_CONFLICT: i32 = 3;

fn records(path: &Path, ids: std::ops::Range<i64>, extra: &str) {
    let text: String = ids
        .map(|i| format!("{{\"id\":{i},\"day\":\"2026-12-0{}\"{extra}}}\n", 1 + i % 2))
        .collect();
    fs::write(path, text).unwrap();
}

/// A Delta table another engine wrote (here: filesink's own table without its `_filesink/`),
/// and jobs it cannot take: another column, other partition columns, another type. Each is
/// refused with nothing written.
#[test]
fn an_ingest_refused_by_a_foreign_table_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.jsonl");
    records(&input, 0..100, "");
    let table = d.join("table");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&table),
        "--table",
        "delta",
        "--partition-by",
        "day",
    ]);
    fs::remove_dir_all(table.join("_filesink")).unwrap();
    let before = tree(&table);
    let other = d.join("other.jsonl");
    for (extra, args) in [
        (",\"more\":true", &["--partition-by", "day"][..]),
        ("", &[][..]),
        (",\"day2\":1", &["--partition-by", "day2"][..]),
    ] {
        records(&other, 100..110, extra);
        let mut a = vec!["ingest", s(&other), "--to", s(&table), "--table", "delta"];
        a.extend_from_slice(args);
        let o = filesink(&a);
        assert_ne!(o.status.code(), Some(0), "{extra} {args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("nothing was written") || !stderr(&o).is_empty());
        assert_eq!(tree(&table), before, "{extra} {args:?}: {}", stderr(&o));
    }
    // A job of the table's own shape is taken.
    records(&other, 100..110, "");
    run_ok(&[
        "ingest",
        s(&other),
        "--to",
        s(&table),
        "--table",
        "delta",
        "--partition-by",
        "day",
    ]);
}

/// `compact`, `vacuum`, `abort` and `commit` with `--dry-run` change nothing, on a table with
/// small files to merge and on a plain lake with a killed run's leftovers.
#[test]
fn dry_runs_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let table = d.join("table");
    for i in 0..3 {
        let input = d.join(format!("t{i}.jsonl"));
        records(&input, i * 100..i * 100 + 100, "");
        run_ok(&[
            "ingest",
            s(&input),
            "--to",
            s(&table),
            "--table",
            "delta",
            "--partition-by",
            "day",
        ]);
    }
    let before = tree(&table);
    let o = run_ok(&["compact", s(&table), "--dry-run", "--json"]);
    assert!(stdout(&o).contains("bins") || !stdout(&o).is_empty());
    for args in [
        &["vacuum", s(&table), "--dry-run"][..],
        &["abort", s(&table), "--dry-run"][..],
        &["commit", s(&table), "--dry-run"][..],
        &["ls", s(&table)][..],
    ] {
        run_ok(args);
    }
    assert_eq!(tree(&table), before);
    // The real round then merges what the dry run listed.
    run_ok(&["compact", s(&table)]);
    assert_ne!(tree(&table), before);

    // A foreign table (no `_filesink/`): a dry run still creates nothing.
    fs::remove_dir_all(table.join("_filesink")).unwrap();
    let before = tree(&table);
    let _ = filesink(&["compact", s(&table), "--dry-run"]);
    assert_eq!(tree(&table), before);
}

/// A table job that has not written its first log entry yet (standard input, no record so
/// far) already fixes the lake's kind: a plain job beside it is refused, nothing of it written;
/// the other way round too.
#[test]
fn the_kind_of_a_lake_is_fixed_when_it_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let schema = d.join("schema.json");
    fs::write(
        &schema,
        r#"{"fields":[{"name":"id","data_type":"Int64","nullable":true,"dict_id":0,"dict_is_ordered":false,"metadata":{}}],"metadata":{}}"#,
    )
    .unwrap();
    let plain_in = d.join("p.jsonl");
    fs::write(&plain_in, "{\"id\":1}\n").unwrap();
    for (first_table, second_table) in [(true, false), (false, true)] {
        let lake = d.join(format!("lake-{first_table}"));
        let mut args = vec!["ingest", "-", "--job", "first", "--to", s(&lake)];
        args.extend(["--schema", s(&schema), "--checkpoint-every", "1s"]);
        if first_table {
            args.extend(["--table", "delta"]);
        }
        let mut child = spawn_with_piped_stdin(&args);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !lake.join("_filesink/jobs/first/checkpoints").exists() {
            assert!(Instant::now() < deadline, "the first job never opened");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut a = vec!["ingest", s(&plain_in), "--job", "second", "--to", s(&lake)];
        if second_table {
            a.extend(["--table", "delta"]);
        }
        let o = run_expect(&a, EXIT_CONFLICT);
        assert!(
            stderr(&o).contains(s(&lake)),
            "the message names the place: {}",
            stderr(&o)
        );
        assert!(!lake.join("_filesink/jobs/second").exists());
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{{\"id\":7}}").unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(lake.join("_delta_log").exists(), first_table);
    }
}

/// Every option the engine refuses (alone, or beside another) is a usage error that names the
/// option by its flag, and writes nothing: the checks live in the library's plan of the run,
/// and the CLI only names their flags.
#[test]
fn an_option_the_engine_refuses_is_named_by_its_flag_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.jsonl");
    records(&input, 0..10, ",\"ts\":\"2026-12-01T10:00:00Z\"");
    let lake = d.join("lake");
    let bad_schema = d.join("schema.json");
    // A JSON lines job cannot take a column of a type JSON input has no spelling for.
    let schema = arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
        "id",
        arrow::datatypes::DataType::Binary,
        true,
    )]);
    fs::write(&bad_schema, serde_json::to_vec(&schema).unwrap()).unwrap();
    let bad_in_lake = lake.join("bad.jsonl");
    let cases: &[(&[&str], &str)] = &[
        (&["--partition-by", "_hidden"], "invalid --partition-by:"),
        (&["--partition-by", "day,day"], "invalid --partition-by:"),
        (
            &["--partition-by-time", "ts=%Y/%Q"],
            "invalid --partition-by-time:",
        ),
        (
            &["--partition-by", "day", "--partition-by-time", "ts=day=%d"],
            "invalid --partition-by-time:",
        ),
        (&["--time-zone", "+01:00"], "--time-zone applies"),
        (&["--schema", s(&bad_schema)], "invalid --schema:"),
        (&["--bad-records", s(&input)], "--bad-records `"),
        (&["--bad-records", s(&bad_in_lake)], "is inside the lake"),
        (&["--lease-ttl", "500ms"], "--lease-ttl: a lease must live"),
        (
            &["--table", "delta", "--format", "csv"],
            "--table delta holds Parquet files",
        ),
        (
            &["--merge-small-files", "1MiB", "--format", "jsonl"],
            "--merge-small-files merges",
        ),
        (
            &["--merge-small-files", "1MiB", "--table", "delta"],
            "--merge-small-files is for plain directories",
        ),
        (
            &["--max-visibility-delay", "10s"],
            "--max-visibility-delay keeps row files",
        ),
        (
            &["--compact"],
            "--compact rewrites a Delta table's files; it needs --table delta",
        ),
        (
            &["--table", "delta", "--compact", "--compact-every", "0s"],
            "the interval of --compact",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["ingest", s(&input), "--to", s(&lake)];
        args.extend_from_slice(flags);
        let o = run_expect(&args, EXIT_USAGE);
        assert!(stderr(&o).contains(says), "{flags:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("`partition_by"), "{}", stderr(&o));
        assert!(!lake.exists(), "{flags:?} created the lake");
    }
    // Standard input without a job name: named by `--job`.
    let o = run_expect(&["ingest", "-", "--to", s(&lake)], EXIT_USAGE);
    assert!(stderr(&o).contains("needs --job"), "{}", stderr(&o));
    assert!(!lake.exists());
}
