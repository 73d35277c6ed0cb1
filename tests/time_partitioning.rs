//! Time directories from a timestamp column (`--partition-by-time`, `Ingest::partition_by_time`):
//! where each record lands, alone and after `--partition-by` directories, in UTC and in other
//! time zones; values that are not times; hostile patterns; resume identity; usage errors.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, Int64Array};
use arrow::datatypes::DataType;
use chrono::{DateTime, FixedOffset};
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

mod common;

use common::cli::*;

const EXIT_ERROR: i32 = 1;
const EXIT_USAGE: i32 = 2;

/// 2026-11-30T13:05:00Z.
const T: i64 = 1_796_043_900;
const PATTERN: &str = "ts=dt=%Y-%m-%d/hour=%H";

/// Record `i`: an id, a country (one of them hostile) and a time 2026-11-30 onwards, about
/// three minutes apart, written with one of three offsets.
fn record(i: i64) -> Value {
    let secs = T + i * 173;
    let offset = match i % 3 {
        0 => 0,
        1 => 2 * 3_600,
        _ => -(7 * 3_600 + 30 * 60),
    };
    let at = DateTime::from_timestamp(secs, 0)
        .unwrap()
        .with_timezone(&FixedOffset::east_opt(offset).unwrap());
    let country = ["DE", "FR", "../x"][(i % 7 % 3) as usize];
    serde_json::json!({"id": i, "country": country, "ts": at.to_rfc3339()})
}

/// The lines of records `0..n`, with the lines in `replace` (1-based) replaced.
fn input(dir: &Path, name: &str, n: i64, replace: &[(usize, &str)]) -> PathBuf {
    let mut lines: Vec<String> = (0..n).map(|i| record(i).to_string()).collect();
    for (line, text) in replace {
        lines[line - 1] = text.to_string();
    }
    let path = dir.join(name);
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The directory (relative to the lake) and the columns of every visible Parquet row:
/// `(dir, id, ts)` with `ts` as the data holds it.
fn parquet_rows(lake: &Path) -> Vec<(String, i64, Option<String>, Vec<String>)> {
    let mut out = Vec::new();
    for path in common::visible_files(lake) {
        let dir = path
            .parent()
            .unwrap()
            .strip_prefix(lake)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let columns: Vec<String> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let ids = batch.column_by_name("id").unwrap();
            let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
            let ts = batch.column_by_name("ts").unwrap();
            let ts: Vec<Option<String>> = match ts.data_type() {
                DataType::Utf8 => ts
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.map(str::to_owned))
                    .collect(),
                _ => (0..ts.len())
                    .map(|r| {
                        (!ts.is_null(r))
                            .then(|| arrow::util::display::array_value_to_string(ts, r).unwrap())
                    })
                    .collect(),
            };
            for (r, t) in ts.into_iter().enumerate() {
                out.push((dir.clone(), ids.value(r), t, columns.clone()));
            }
        }
    }
    out
}

/// The time directories of an RFC 3339 time in the time zone `offset_secs` east of UTC.
fn time_dirs(ts: &str, offset_secs: i32) -> String {
    let at = DateTime::parse_from_rfc3339(ts)
        .unwrap()
        .with_timezone(&FixedOffset::east_opt(offset_secs).unwrap());
    at.format("dt=%Y-%m-%d/hour=%H").to_string()
}

fn bad_sources(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["source"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn column_then_time_directories_hold_every_record_once_in_its_time_zone() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    let null_line = r#"{"id":10,"country":"DE","ts":null}"#;
    let missing_line = r#"{"id":11,"country":"FR"}"#;
    let garbage = [
        (100, r#"{"id":99,"country":"DE","ts":"garbage"}"#),
        (
            1_500,
            r#"{"id":1499,"country":"DE","ts":"2026-11-30T13:05:00"}"#,
        ),
        (2_001, r#"{"id":2000,"country":"DE","ts":""}"#),
    ];
    let mut replace = vec![(11, null_line), (12, missing_line)];
    replace.extend(garbage);
    let events = input(dir.path(), "events.jsonl", n, &replace);
    // West of UTC, so records late in a UTC day land on the day before, and across midnight.
    for (zone, offset) in [
        ("-05:00", -5 * 3_600),
        ("UTC", 0),
        ("+05:45", 5 * 3_600 + 45 * 60),
    ] {
        let lake = dir.path().join(format!("lake{zone}"));
        let bad = dir.path().join(format!("bad{zone}.jsonl"));
        let o = run_ok(&[
            "ingest",
            s(&events),
            "--to",
            s(&lake),
            "--partition-by",
            "country",
            "--partition-by-time",
            PATTERN,
            "--time-zone",
            zone,
            "--checkpoint-every",
            "500rows",
            "--bad-records",
            s(&bad),
            "--json",
        ]);
        let summary = json_of(&o);
        assert_eq!(summary["bad_records"], 3, "{summary}");
        let src = |l: usize| format!("{}:{l}", s(&events));
        assert_eq!(bad_sources(&bad), vec![src(100), src(1_500), src(2_001)]);

        let rows = parquet_rows(&lake);
        let mut ids: Vec<i64> = rows.iter().map(|r| r.1).collect();
        ids.sort_unstable();
        let expected: Vec<i64> = (0..n).filter(|i| ![99, 1499, 2000].contains(i)).collect();
        assert_exactly_once(&ids, expected);
        let mut midnight_crossed = false;
        for (dir, id, ts, columns) in &rows {
            // The partition column is in the path only; the time column stays in the data.
            assert_eq!(columns, &["id", "ts"], "{dir}");
            let country = match record(*id)["country"].as_str().unwrap() {
                "../x" => "..%2Fx".to_owned(),
                c => c.to_owned(),
            };
            let want = match ts {
                Some(ts) => {
                    assert_eq!(ts, record(*id)["ts"].as_str().unwrap());
                    let local = time_dirs(ts, offset);
                    let utc = time_dirs(ts, 0);
                    midnight_crossed |= local[..13] != utc[..13];
                    format!("country={country}/{local}")
                }
                None => {
                    assert!([10, 11].contains(id), "{id}");
                    format!(
                        "country={country}/dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__"
                    )
                }
            };
            assert_eq!(dir, &want, "id {id}");
        }
        assert_eq!(midnight_crossed, offset != 0, "{zone}");
    }
    // One example by name: 2026-11-30T13:05:00Z, at -05:00.
    assert!(dir
        .path()
        .join("lake-05:00/country=DE/dt=2026-11-30/hour=08")
        .is_dir());
}

#[test]
fn a_time_that_is_not_one_stops_the_run_naming_its_line_with_nothing_after_it_visible() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(
        dir.path(),
        "e.jsonl",
        400,
        &[(250, r#"{"id":249,"country":"DE","ts":"30/11/2026 13:05"}"#)],
    );
    let lake = dir.path().join("lake");
    let o = run_expect(
        &[
            "ingest",
            s(&events),
            "--to",
            s(&lake),
            "--partition-by-time",
            PATTERN,
            "--checkpoint-every",
            "100rows",
        ],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:250: ", s(&events))), "{err}");
    assert!(err.contains("RFC 3339"), "{err}");
    let rows = parquet_rows(&lake);
    assert!(
        rows.iter().all(|r| r.1 < 249),
        "nothing at or after line 250"
    );
    // Directories only: no partition columns, country stays in the data.
    assert!(
        rows.iter().all(|r| r.3 == ["country", "id", "ts"]),
        "{:?}",
        rows.first()
    );
}

#[test]
fn timestamp_and_date_columns_of_a_schema_and_csv_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("typed.jsonl");
    fs::write(
        &events,
        [
            r#"{"id":0,"ts":"2026-11-30T23:30:00Z","day":"2026-11-30"}"#,
            r#"{"id":1,"ts":"2026-12-01T00:30:00+02:00","day":"2026-12-01"}"#,
            r#"{"id":2,"ts":null,"day":null}"#,
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let schema = dir.path().join("schema.json");
    let field = |name: &str, t: Value| {
        serde_json::json!({"name": name, "data_type": t, "nullable": true,
            "dict_id": 0, "dict_is_ordered": false, "metadata": {}})
    };
    fs::write(
        &schema,
        serde_json::json!({"fields": [
            field("id", "Int64".into()),
            field("ts", serde_json::json!({"Timestamp": ["Millisecond", null]})),
            field("day", "Date32".into()),
        ], "metadata": {}})
        .to_string(),
    )
    .unwrap();
    let dirs = |lake: &Path| -> BTreeMap<i64, String> {
        parquet_rows(lake)
            .into_iter()
            .map(|(d, id, _, _)| (id, d))
            .collect()
    };
    // A timestamp column, in +09:00: both land on 2026-12-01.
    let lake = dir.path().join("ts");
    let base = [
        "ingest",
        s(&events),
        "--schema",
        s(&schema),
        "--to",
        s(&lake),
    ];
    run_ok(
        &[
            &base[..],
            &["--partition-by-time", PATTERN, "--time-zone", "+09:00"],
        ]
        .concat(),
    );
    assert_eq!(
        dirs(&lake),
        BTreeMap::from([
            (0, "dt=2026-12-01/hour=08".to_owned()),
            (1, "dt=2026-12-01/hour=07".to_owned()),
            (
                2,
                "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__".to_owned()
            ),
        ])
    );
    // A date column is a day, not shifted by the time zone.
    let lake = dir.path().join("day");
    let base = [
        "ingest",
        s(&events),
        "--schema",
        s(&schema),
        "--to",
        s(&lake),
    ];
    run_ok(
        &[
            &base[..],
            &[
                "--partition-by-time",
                "day=d=%Y-%m-%d",
                "--time-zone",
                "-11:00",
            ],
        ]
        .concat(),
    );
    assert_eq!(
        dirs(&lake),
        BTreeMap::from([
            (0, "d=2026-11-30".to_owned()),
            (1, "d=2026-12-01".to_owned()),
            (2, "d=__HIVE_DEFAULT_PARTITION__".to_owned()),
        ])
    );

    // CSV: whatever type inference gives the column, the directories are the same.
    let csv = dir.path().join("e.csv");
    fs::write(
        &csv,
        "id,ts\n0,2026-11-30T23:30:00Z\n1,2026-12-01T00:30:00+02:00\n",
    )
    .unwrap();
    let lake = dir.path().join("csv");
    run_ok(&[
        "ingest",
        s(&csv),
        "--to",
        s(&lake),
        "--partition-by-time",
        PATTERN,
    ]);
    assert_eq!(
        dirs(&lake),
        BTreeMap::from([
            (0, "dt=2026-11-30/hour=23".to_owned()),
            (1, "dt=2026-11-30/hour=22".to_owned()),
        ])
    );
}

/// The source position of the latest manifest of the only job in `lake`.
fn latest_position(lake: &Path) -> Value {
    let jobs = lake.join("_filesink/jobs");
    let job = fs::read_dir(&jobs).unwrap().next().unwrap().unwrap().path();
    let mut manifests: Vec<PathBuf> = fs::read_dir(job.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    manifests.sort();
    let latest = manifests.pop().unwrap();
    let bytes = fs::read(&latest).unwrap();
    filesink::job::Manifest::decode(s(&latest), &bytes, None)
        .unwrap()
        .source_position
}

#[test]
fn a_job_keeps_its_time_partitioning() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), "e.jsonl", 50, &[]);
    let lake = dir.path().join("lake");
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = ["ingest", s(&events), "--to", s(&lake), "--job", "j"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |extra: &[&'static str], code: i32| {
        let a = args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_expect(&a, code)
    };
    let first = [
        "--partition-by-time",
        "ts=dt=%Y-%m-%d",
        "--time-zone",
        "+01:00",
    ];
    run(&first, 0);
    let p = latest_position(&lake);
    assert_eq!(p["version"], 3, "{p}");
    assert_eq!(
        p["partition_by_time"],
        serde_json::json!({"column": "ts", "pattern": "dt=%Y-%m-%d", "time_zone": "+01:00"})
    );
    let before = common::visible_files(&lake);
    for other in [
        &[
            "--partition-by-time",
            "ts=dt=%Y-%m-%d/hour=%H",
            "--time-zone",
            "+01:00",
        ][..],
        &["--partition-by-time", "ts=dt=%Y-%m-%d"][..],
        &[
            "--partition-by-time",
            "ts=dt=%Y-%m-%d",
            "--time-zone",
            "UTC",
        ][..],
        &[][..],
        &["--partition-by", "country"][..],
    ] {
        let o = run(other, EXIT_ERROR);
        let err = stderr(&o);
        assert!(
            err.contains(
                "job `j` was started with `--partition-by-time ts=dt=%Y-%m-%d --time-zone +01:00`"
            ) || err.contains("was started with --partition-by ``"),
            "{other:?}: {err}"
        );
    }
    assert_eq!(common::visible_files(&lake), before, "nothing changed");
    // The same arguments: the finished job's no-op.
    let o = run(&[&first[..], &["--json"]].concat(), 0);
    assert_eq!(json_of(&o)["status"], "already_finished");

    // A job without time partitioning writes the position it always did, and is refused one.
    let lake2 = dir.path().join("lake2");
    run_ok(&["ingest", s(&events), "--to", s(&lake2), "--job", "k"]);
    let p = latest_position(&lake2);
    assert_eq!(p["version"], 2, "{p}");
    assert!(p.get("partition_by_time").is_none(), "{p}");
    let o = run_expect(
        &[
            "ingest",
            s(&events),
            "--to",
            s(&lake2),
            "--job",
            "k",
            "--partition-by-time",
            PATTERN,
        ],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(
        err.contains("was started with no --partition-by-time, not `--partition-by-time"),
        "{err}"
    );
}

#[tokio::test]
async fn a_crashed_job_resumes_into_the_same_directories_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), "e.jsonl", 1_000, &[]);
    let lake = dir.path().join("lake");
    let ingest = |zone: &str| -> Ingest {
        Ingest::new([Input::file(&events).unwrap()])
            .to_local(&lake)
            .partition_by(["country"])
            .partition_by_time("ts", "dt=%Y-%m-%d/hour=%H")
            .time_zone(filesink::bucket::parse_time_zone(zone).unwrap())
            .checkpoint_every(CheckpointEvery::Rows(100))
            .job("crash")
    };
    let first = ingest("-03:00")
        .stop_after_records(450)
        .run()
        .await
        .unwrap();
    assert_eq!(first.status, IngestStatus::Stopped);
    // Another time zone would put the rest elsewhere: refused, nothing changed.
    let e = ingest("+03:00").run().await.unwrap_err();
    assert!(matches!(e, filesink::Error::InvalidInput(_)), "{e}");
    assert!(e.to_string().contains("--time-zone -03:00"), "{e}");
    let second = ingest("-03:00").run().await.unwrap();
    assert_eq!(second.status, IngestStatus::Finished);
    assert!(second.resumed);
    assert_eq!(second.records_total, 1_000);
    let rows = parquet_rows(&lake);
    let mut ids: Vec<i64> = rows.iter().map(|r| r.1).collect();
    ids.sort_unstable();
    assert_exactly_once(&ids, 0..1_000);
    for (d, id, ts, _) in rows {
        assert!(
            d.ends_with(&time_dirs(ts.as_deref().unwrap(), -3 * 3_600)),
            "{id}: {d}"
        );
    }
}

#[test]
fn invalid_time_partitioning_is_a_usage_error_that_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let events = input(dir.path(), "e.jsonl", 5, &[]);
    let lake = dir.path().join("lake");
    let (e, l) = (s(&events), s(&lake));
    let long = format!("ts=dt=%Y{}", "x".repeat(300));
    let cases: Vec<Vec<&str>> = vec![
        vec!["--partition-by-time", "ts"],
        vec!["--partition-by-time", "ts="],
        vec!["--partition-by-time", "=dt=%Y"],
        vec!["--partition-by-time", "ts=%Y-%m-%d"],
        vec!["--partition-by-time", "ts=dt=%Y/%H"],
        vec!["--partition-by-time", "ts=dt=%Y//hour=%H"],
        vec!["--partition-by-time", "ts=/dt=%Y"],
        vec!["--partition-by-time", "ts=dt=%Y/"],
        vec!["--partition-by-time", "ts=..=%Y"],
        vec!["--partition-by-time", "ts=../x=%Y"],
        vec!["--partition-by-time", "ts=_dt=%Y"],
        vec!["--partition-by-time", "ts=.dt=%Y"],
        vec!["--partition-by-time", "ts=d\\t=%Y"],
        vec!["--partition-by-time", "ts=dt=%Y/dt=%m"],
        vec!["--partition-by-time", "ts=dt="],
        vec!["--partition-by-time", "ts=dt=%Q"],
        vec!["--partition-by-time", "ts=dt=%"],
        vec!["--partition-by-time", &long],
        vec!["--partition-by-time", "nope=dt=%Y"],
        vec!["--partition-by-time", "id=dt=%Y"],
        vec!["--partition-by-time", "ts=id=%Y"],
        vec![
            "--partition-by-time",
            "ts=country=%Y",
            "--partition-by",
            "country",
        ],
        vec![
            "--partition-by-time",
            PATTERN,
            "--time-zone",
            "Europe/Berlin",
        ],
        vec!["--partition-by-time", PATTERN, "--time-zone", "+24:00"],
        vec!["--partition-by-time", PATTERN, "--time-zone", "+1"],
        vec!["--time-zone", "+01:00"],
    ];
    for extra in &cases {
        let args = [&["ingest", e, "--to", l][..], extra].concat();
        let o = filesink(&args);
        assert_eq!(
            o.status.code(),
            Some(EXIT_USAGE),
            "{args:?}\n{}",
            stderr(&o)
        );
        assert!(!lake.exists(), "{args:?} created the lake");
    }
    let o = filesink(&["ingest", e, "--to", l, "--partition-by-time", "ts=%Y-%m-%d"]);
    let err = stderr(&o);
    assert!(
        err.contains("name=") && err.contains("dt=%Y-%m-%d/hour=%H"),
        "{err}"
    );

    let help = stdout(&run_ok(&["ingest", "--help"]));
    assert!(help.contains("--partition-by-time <COL=PATTERN>"), "{help}");
    assert!(help.contains("--time-zone <UTC|+HH:MM|-HH:MM>"), "{help}");
    assert!(help.contains("`UTC` (the default)"), "{help}");
}
