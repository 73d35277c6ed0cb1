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
    let o = run_expect(&["ingest", s(&events), "--to", s(&lake), "--compact"], 2);
    assert!(stderr(&o).contains("needs --table delta"), "{}", stderr(&o));
    for flag in [
        ["--compact-every", "10s"],
        ["--compact-target-size", "1MiB"],
    ] {
        let mut args = vec!["ingest", s(&events), "--to", s(&lake), "--table", "delta"];
        args.extend(flag);
        let o = run_expect(&args, 2);
        assert!(stderr(&o).contains("needs --compact"), "{}", stderr(&o));
    }
    assert!(!lake.exists(), "a usage error creates nothing");
}

#[test]
fn ingest_compact_compacts_the_table_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 3000);
    let lake = dir.path().join("lake");
    let o = run_ok(&[
        "ingest",
        s(&events),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
        "--checkpoint-every",
        "500rows",
        "--job",
        "events",
        "--table",
        "delta",
        "--compact",
        "--compact-target-size",
        "1MiB",
    ]);
    let text = stdout(&o);
    // The default interval (60 s) is longer than the run: the last round does the work.
    assert!(
        text.contains("compaction (job `events_compact`): 1 round(s) merged"),
        "{text}"
    );
    assert!(text.contains("0 abandoned, 0 skipped"), "{text}");
    let o = run_ok(&["ls", s(&lake), "--json"]);
    let v = json_of(&o);
    let live = v["table"]["live_files"].as_u64().unwrap();
    assert_eq!(live, 3, "one file per partition: {v}");
    // The rounds' job never finishes: `ls` says how far it is, not "unfinished".
    let jobs = v["jobs"].as_array().unwrap();
    let job = |name: &str| jobs.iter().find(|j| j["job"] == name).unwrap().clone();
    assert_eq!(job("events_compact")["compaction_round"], 1, "{v}");
    assert!(job("events")["compaction_round"].is_null(), "{v}");
    let ls = stdout(&run_ok(&["ls", s(&lake)]));
    assert!(
        ls.contains("events_compact  compaction, last round 1, in the table's log"),
        "{ls}"
    );
    assert!(!ls.contains("unfinished"), "{ls}");
}

/// A finished table job rerun with `--compact` runs one round: the run that finished it may
/// have died in its last round (`kill -9` just after its last checkpoint), which the rerun
/// used to leave as it was ("nothing to do", the table uncompacted, the round's leftovers).
#[test]
fn a_finished_table_jobs_rerun_with_compact_runs_a_round() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 3000);
    let lake = dir.path().join("lake");
    let mut args = vec![
        "ingest",
        s(&events),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
        "--checkpoint-every",
        "500rows",
        "--job",
        "events",
        "--table",
        "delta",
    ];
    run_ok(&args);
    let live = |lake: &std::path::Path| {
        json_of(&run_ok(&["ls", s(lake), "--json"]))["table"]["live_files"]
            .as_u64()
            .unwrap()
    };
    assert!(live(&lake) > 3);
    args.extend(["--compact", "--compact-target-size", "1MiB"]);
    let text = stdout(&run_ok(&args));
    assert!(text.contains("nothing to do"), "{text}");
    assert!(
        text.contains("compaction (job `events_compact`): 1 round(s) merged"),
        "{text}"
    );
    assert_eq!(live(&lake), 3, "one file per partition");
    let mut json = args.clone();
    json.push("--json");
    let v = json_of(&run_ok(&json));
    assert_eq!(v["status"], "already_finished", "{v}");
    assert_eq!(v["compaction"]["failed"], 0, "{v}");
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

    // A partition with no live file is named as such, not "nothing to compact".
    let o = run_expect(
        &["compact", s(&lake), "--partition", "day=nope", "--dry-run"],
        1,
    );
    assert!(
        stderr(&o).contains("partition `day=nope` has no live file"),
        "{}",
        stderr(&o)
    );
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

#[tokio::test]
async fn filesink_commit_writes_the_log_entry_a_crashed_run_left_out() {
    use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
    use filesink::storage::{LocalStorage, Storage};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    // The run dies after its files are committed, before its log entry.
    let faulty = FaultyStorage::new(
        storage.clone(),
        Some(FaultPlan {
            point: FaultPoint::PutLogEntry,
            occurrence: 1,
            mode: FaultMode::Before,
        }),
    );
    let sink = filesink::Sink::builder_shared(Arc::new(faulty.clone()))
        .format(filesink::FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let mut c = filesink::Coordinator::builder(&sink, "orders")
        .delta_table(
            filesink::table::delta::DeltaOptions::new()
                .schema(common::schema())
                .partition_by(["day"]),
        )
        .open()
        .await
        .unwrap();
    c.write(&common::batch(0, 50)).await.unwrap();
    assert!(c.checkpoint(&50).await.is_err());
    drop(c);
    drop(faulty);
    filesink::storage::ownership::settle_releases().await;
    assert!(common::delta::read_log(storage.as_ref())
        .await
        .versions
        .is_empty());

    // The table does not exist yet: only the job knows its schema, so commit says so.
    let o = common::cli::filesink(&["commit", s(dir.path())]);
    assert!(!o.status.success());
    let out = stdout(&o);
    assert!(out.contains("delta log entry: not written"), "{out}");
    assert!(out.contains("is not a Delta table"), "{out}");
    // The job's next run creates the table with the entry.
    drop(
        filesink::Coordinator::builder(&sink_on(&storage), "orders")
            .delta_table(
                filesink::table::delta::DeltaOptions::new()
                    .schema(common::schema())
                    .partition_by(["day"]),
            )
            .open()
            .await
            .unwrap(),
    );
    filesink::storage::ownership::settle_releases().await;
    common::delta::assert_table_exactly_once(storage.as_ref(), 50, "after the restore").await;
}

fn sink_on(storage: &std::sync::Arc<dyn filesink::storage::Storage>) -> filesink::Sink {
    filesink::Sink::builder_shared(storage.clone())
        .format(filesink::FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap()
}

#[tokio::test]
async fn filesink_commit_writes_a_later_checkpoints_missing_entry() {
    use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
    use filesink::storage::{LocalStorage, Storage};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    // Checkpoint 1 lands in the log; checkpoint 2's run dies before its entry.
    let faulty = FaultyStorage::new(
        storage.clone(),
        Some(FaultPlan {
            point: FaultPoint::PutLogEntry,
            occurrence: 2,
            mode: FaultMode::Before,
        }),
    );
    let options = filesink::table::delta::DeltaOptions::new()
        .schema(common::schema())
        .partition_by(["day"]);
    let mut c =
        filesink::Coordinator::builder(&sink_on(&(Arc::new(faulty.clone()) as _)), "orders")
            .delta_table(options)
            .open()
            .await
            .unwrap();
    c.write(&common::batch(0, 50)).await.unwrap();
    c.checkpoint(&50).await.unwrap();
    c.write(&common::batch(50, 50)).await.unwrap();
    assert!(c.checkpoint(&100).await.is_err());
    drop(c);
    drop(faulty);
    filesink::storage::ownership::settle_releases().await;
    assert_eq!(
        common::delta::read_log(storage.as_ref())
            .await
            .versions
            .len(),
        1
    );

    let out = stdout(&run_ok(&["commit", s(dir.path())]));
    assert!(
        out.contains("delta log entry: committed at table version 1"),
        "{out}"
    );
    common::delta::assert_table_exactly_once(storage.as_ref(), 100, "after filesink commit").await;
    let again = stdout(&run_ok(&["commit", s(dir.path())]));
    assert!(
        again.contains("delta log entry: already in the log"),
        "{again}"
    );
}

/// A metadata write that died between its temporary file and the rename leaves
/// `.<name>.tmp.<UUIDv7>` behind, in a job's checkpoint directory or in the log. `abort`
/// lists them in a dry run, then removes those the rule allows: a held job's at once, the
/// log's and the identity's once an hour old; a younger one in the log, and any name of
/// another shape (a Spark temporary file), stay. The table reads the same afterwards.
#[test]
fn abort_removes_the_temporary_files_of_metadata_writes_that_died() {
    use filesink::protocol::metadata_temp_name;
    use std::time::{Duration, SystemTime};
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 300);
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
        "100rows",
        "--job",
        "events",
    ]);
    let before = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    let plant = |rel: &str, age: Duration| {
        let path = lake.join(rel);
        std::fs::write(&path, b"{\"partial\":").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
        path
    };
    let hour = Duration::from_secs(3600);
    let job_dir = "_filesink/jobs/events/checkpoints";
    let gone = [
        plant(
            &format!(
                "{job_dir}/{}",
                metadata_temp_name("00000000000000000009.json")
            ),
            Duration::ZERO,
        ),
        plant(
            &format!(
                "_delta_log/{}",
                metadata_temp_name("00000000000000000009.json")
            ),
            2 * hour,
        ),
        plant(
            &format!("_filesink/{}", metadata_temp_name("sink.json")),
            2 * hour,
        ),
    ];
    let kept = [
        plant(
            &format!(
                "_delta_log/{}",
                metadata_temp_name("00000000000000000010.json")
            ),
            Duration::ZERO,
        ),
        plant("_delta_log/.00000000000000000009.json.3f1a.tmp", 2 * hour),
        plant(
            &format!("{job_dir}/.00000000000000000009.json.tmp.not-a-uuid"),
            2 * hour,
        ),
    ];

    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(ls["metadata_temps"].as_array().unwrap().len(), 4, "{ls}");
    let dry = json_of(&run_ok(&["abort", s(&lake), "--dry-run", "--json"]));
    let listed: Vec<&str> = dry["remove_metadata_temps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 3, "{dry}");
    assert_eq!(dry["kept_metadata_temps"], 1, "{dry}");
    assert!(
        gone.iter().chain(&kept).all(|p| p.exists()),
        "a dry run removes nothing"
    );

    let text = stdout(&run_ok(&["abort", s(&lake)]));
    assert!(
        text.contains("temporary files of unfinished metadata writes: 4"),
        "{text}"
    );
    for p in &gone {
        assert!(!p.exists(), "{} should be gone: {text}", p.display());
    }
    for p in &kept {
        assert!(p.exists(), "{} should stay: {text}", p.display());
    }
    let after = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    assert_eq!(
        after["metadata_temps"].as_array().unwrap().len(),
        1,
        "{after}"
    );
    assert_eq!(after["table"], before["table"], "the table is the same");
    assert_eq!(after["committed"], before["committed"]);
}

/// Compaction rounds and ingest checkpoints are not one job's: `compact --job` refuses an
/// ingest's job (also when the ingest took the default name `compact`), and `ingest --job`
/// a compaction job's; exit 3, neither job's checkpoints touched.
#[test]
fn compact_and_ingest_refuse_each_others_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), 3000);
    let lake = dir.path().join("lake");
    let ingest = |job: &str, code: i32| {
        run_expect(
            &[
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
                job,
            ],
            code,
        )
    };
    let checkpoints = |job: &str| {
        std::fs::read_dir(lake.join("_filesink/jobs").join(job).join("checkpoints"))
            .unwrap()
            .count()
    };
    ingest("compact", 0);
    ingest("events", 0);
    let before = (checkpoints("compact"), checkpoints("events"));
    for args in [
        &["compact", s(&lake)][..],
        &["compact", s(&lake), "--job", "events"],
    ] {
        let o = run_expect(args, 3);
        assert!(
            stderr(&o).contains("is not a compaction job"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!((checkpoints("compact"), checkpoints("events")), before);
    // Both ingests are still theirs: nothing to do.
    assert!(stdout(&ingest("compact", 0)).contains("nothing to do"));
    assert!(stdout(&ingest("events", 0)).contains("nothing to do"));

    // A compaction job of its own merges; an ingest under its name is refused.
    let out = stdout(&run_ok(&["compact", s(&lake), "--job", "tidy"]));
    assert!(out.contains("merged"), "{out}");
    let rounds = checkpoints("tidy");
    let o = ingest("tidy", 3);
    assert!(stderr(&o).contains("is a compaction job"), "{}", stderr(&o));
    assert_eq!(checkpoints("tidy"), rounds);
    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
    let tidy = ls["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == "tidy")
        .unwrap();
    assert!(tidy["compaction_round"].as_u64().is_some(), "{ls}");
}
