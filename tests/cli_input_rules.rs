//! The input rules of `filesink ingest`, through the real binary: how JSON values are typed,
//! what a bad record is and where it goes, empty inputs, byte order marks, invalid arguments;
//! and the small contracts of `ls` and `bench` around them.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::cli::*;

const EXIT_ERROR: i32 = 1;
const EXIT_USAGE: i32 = 2;
const EXIT_CORRUPT: i32 = 6;

/// Every visible JSON-lines record under `lake` (no path component starting with `.`/`_`).
fn visible_records(lake: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for f in common::visible_files(lake) {
        for line in fs::read_to_string(&f).unwrap().lines() {
            out.push(serde_json::from_str(line).unwrap());
        }
    }
    out
}

/// The `source` (`file:line`) of every line of a `--bad-records` file.
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

fn write_schema(path: &Path, fields: Value) {
    fs::write(
        path,
        serde_json::to_vec(&serde_json::json!({ "fields": fields, "metadata": {} })).unwrap(),
    )
    .unwrap();
}

fn field(name: &str, data_type: Value, nullable: bool) -> Value {
    serde_json::json!({
        "name": name, "data_type": data_type, "nullable": nullable,
        "dict_id": 0, "dict_is_ordered": false, "metadata": {}
    })
}

/// Ingests `lines` (as `name`) with `extra` arguments into a fresh JSON-lines lake, with
/// `--bad-records`; returns the lake, the visible records and the bad records' lines.
fn ingest_collecting(
    dir: &Path,
    name: &str,
    lines: &[String],
    extra: &[&str],
) -> (PathBuf, Vec<Value>, Vec<u64>) {
    let input = dir.join(name);
    fs::write(&input, lines.join("\n") + "\n").unwrap();
    let lake = dir.join(format!("lake-{name}"));
    let bad = dir.join(format!("bad-{name}"));
    let mut args = vec![
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--format",
        "jsonl",
        "--bad-records",
        s(&bad),
    ];
    args.extend_from_slice(extra);
    run_ok(&args);
    let bad_lines = bad_sources(&bad)
        .iter()
        .map(|src| {
            let (file, line) = src.rsplit_once(':').unwrap();
            assert_eq!(file, s(&input));
            line.parse().unwrap()
        })
        .collect();
    (lake.clone(), visible_records(&lake), bad_lines)
}

#[test]
fn a_json_value_that_does_not_fit_its_column_is_a_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    // Every type the typing rule covers; a good value and values that do not fit each.
    let columns: Vec<(&str, Value, &str, Vec<&str>)> = vec![
        (
            "i8",
            "Int8".into(),
            "-128",
            vec!["128", "1.0", "1.5", "\"1\"", "true"],
        ),
        ("i16", "Int16".into(), "32767", vec!["32768", "1e3"]),
        (
            "i32",
            "Int32".into(),
            "-2147483648",
            vec!["-2147483649", "2.9"],
        ),
        (
            "i64",
            "Int64".into(),
            "9223372036854775807",
            vec![
                "9223372036854775808",
                "1.75",
                "1e3",
                "1.0",
                "\"5\"",
                "[1]",
                "{\"a\":1}",
            ],
        ),
        ("u8", "UInt8".into(), "255", vec!["256", "-1"]),
        ("u16", "UInt16".into(), "65535", vec!["65536"]),
        ("u32", "UInt32".into(), "4294967295", vec!["4294967296"]),
        (
            "u64",
            "UInt64".into(),
            "18446744073709551615",
            vec!["18446744073709551616", "-1"],
        ),
        (
            "f32",
            "Float32".into(),
            "1.5",
            vec!["1e39", "\"1.5\"", "false"],
        ),
        (
            "f64",
            "Float64".into(),
            "-2.5e-3",
            vec!["1e309", "\"NaN\"", "true"],
        ),
        ("b", "Boolean".into(), "true", vec!["\"true\"", "1"]),
        (
            "s",
            "Utf8".into(),
            "\"x\"",
            vec!["5", "true", "[\"x\"]", "{\"x\":1}"],
        ),
        (
            "d",
            "Date32".into(),
            "\"2026-11-30\"",
            vec!["\"2026-11-30T10:00:00\"", "\"2026-13-01\"", "20000"],
        ),
        (
            "ts",
            serde_json::json!({"Timestamp": ["Millisecond", null]}),
            "\"2026-11-30T10:00:00.123Z\"",
            vec![
                "\"2026-11-30T10:00:00.1234Z\"",
                "1.5",
                "\"yesterday\"",
                // Digits past the ninth, which arrow's parser drops unseen.
                "\"2026-11-30T10:00:00.0000000001Z\"",
            ],
        ),
        (
            "tn",
            serde_json::json!({"Timestamp": ["Nanosecond", null]}),
            "\"2026-11-30T10:00:00.1234567890Z\"",
            vec![
                "\"2026-11-30T10:00:00.1234567891Z\"",
                "\"2026-11-30T10:00:00.0000000001+01:00\"",
            ],
        ),
        (
            "l",
            serde_json::json!({"List": field("item", "Int64".into(), true)}),
            "[1,2]",
            vec!["1", "[1.5]", "[\"1\"]"],
        ),
        (
            "st",
            serde_json::json!({"Struct": [field("a", "Int64".into(), true)]}),
            "{\"a\":1}",
            vec!["1", "{\"a\":1.5}"],
        ),
        (
            "dec",
            serde_json::json!({"Decimal128": [10, 2]}),
            "12.30",
            vec![
                "12.345",
                "\"12.345\"",
                "1e-3",
                "100000000",
                "\"1,5\"",
                "\" 1\"",
                "true",
            ],
        ),
        (
            "dec256",
            serde_json::json!({"Decimal256": [50, 3]}),
            "\"-99999999999999999999999999999999999999999999999.125\"",
            vec!["1.0625", "1e47"],
        ),
        ("req", "Int64".into(), "7", vec!["null"]),
    ];
    let schema_file = dir.path().join("schema.json");
    write_schema(
        &schema_file,
        Value::Array(
            columns
                .iter()
                .map(|(n, t, _, _)| field(n, t.clone(), *n != "req"))
                .collect(),
        ),
    );
    // Records are written as text: the values must reach filesink as written (`1e309`,
    // `18446744073709551616`), not as a JSON library would rewrite them.
    let record = |replace: Option<(&str, &str)>, drop: Option<&str>| -> String {
        let fields: Vec<String> = columns
            .iter()
            .filter(|(n, ..)| Some(*n) != drop)
            .map(|(n, _, good, _)| match replace {
                Some((r, v)) if r == *n => format!("\"{n}\":{v}"),
                _ => format!("\"{n}\":{good}"),
            })
            .collect();
        format!("{{{}}}", fields.join(","))
    };
    let mut lines = vec![record(None, None)];
    let mut expected_bad = Vec::new();
    for (name, _, _, bads) in &columns {
        for bad in bads {
            lines.push(record(Some((name, bad)), None));
            expected_bad.push(lines.len() as u64);
        }
    }
    // A record without the non-nullable column does not fit either.
    lines.push(record(None, Some("req")));
    expected_bad.push(lines.len() as u64);
    lines.push(record(None, None));

    let (lake, visible, bad) = ingest_collecting(
        dir.path(),
        "typed.jsonl",
        &lines,
        &["--schema", s(&schema_file)],
    );
    assert_eq!(bad, expected_bad, "bad records");
    assert_eq!(visible.len(), 2, "{visible:?}");
    // Decimals are written as JSON numbers, exact (read as text: a float would round them).
    for f in common::visible_files(&lake) {
        for line in fs::read_to_string(&f).unwrap().lines() {
            assert!(line.contains("\"dec\":12.30,"), "{line}");
            assert!(
                line.contains(&format!("\"dec256\":-{}.125,", "9".repeat(47))),
                "{line}"
            );
        }
    }
    for v in &visible {
        for (name, _, value, _) in &columns {
            if name.starts_with("dec") {
                continue; // above
            }
            let expected: Value = match *name {
                "ts" => "2026-11-30T10:00:00.123".into(),
                "tn" => "2026-11-30T10:00:00.123456789".into(),
                _ => serde_json::from_str(value).unwrap(),
            };
            let got = &v[*name];
            let same = match (got.as_f64(), expected.as_f64()) {
                (Some(a), Some(b)) if got.is_f64() || expected.is_f64() => a == b,
                _ => *got == expected,
            };
            assert!(same, "column {name}: {got} != {expected}");
        }
    }

    // Without --bad-records the first value that does not fit stops the run, naming its line,
    // with nothing visible.
    let input = dir.path().join("strict.jsonl");
    fs::write(&input, format!("{}\n{}\n", lines[0], lines[3])).unwrap();
    let lake = dir.path().join("lake-strict");
    let o = run_expect(
        &[
            "ingest",
            s(&input),
            "--to",
            s(&lake),
            "--schema",
            s(&schema_file),
        ],
        EXIT_ERROR,
    );
    assert!(
        stderr(&o).contains(&format!("{}:2: ", s(&input))),
        "{}",
        stderr(&o)
    );
    assert!(common::visible_files(&lake).is_empty());

    // Inferred types follow the same rule: a column inferred as Int64 from the sample keeps
    // later fractions out; mixed ints and floats in the sample make a Float64 column; ints
    // beyond Int64 (all non-negative) make a UInt64 column, exact.
    let mut lines: Vec<String> = (0..1100).map(|i| format!("{{\"n\":{i}}}")).collect();
    lines.push("{\"n\":1.75}".into());
    lines.push("{\"n\":2}".into());
    let (_, visible, bad) = ingest_collecting(dir.path(), "late.jsonl", &lines, &[]);
    assert_eq!(bad, vec![1101]);
    assert_eq!(visible.len(), 1101);
    assert!(visible.iter().all(|v| v["n"].is_i64()), "nothing truncated");

    let lines = vec!["{\"x\":1}".to_string(), "{\"x\":1.5}".to_string()];
    let (_, visible, bad) = ingest_collecting(dir.path(), "mixed.jsonl", &lines, &[]);
    assert!(bad.is_empty());
    assert_eq!(visible[1]["x"].as_f64(), Some(1.5));

    let lines = vec![
        "{\"big\":5}".to_string(),
        "{\"big\":9223372036854775808}".to_string(),
        "{\"big\":18446744073709551615}".to_string(),
    ];
    let (_, visible, bad) = ingest_collecting(dir.path(), "big.jsonl", &lines, &[]);
    assert!(bad.is_empty());
    let got: Vec<u64> = visible.iter().map(|v| v["big"].as_u64().unwrap()).collect();
    assert_eq!(got, vec![5, 9223372036854775808, 18446744073709551615]);

    // Negative integers and integers beyond Int64 fit no integer type: no silent float.
    let input = dir.path().join("neg.jsonl");
    fs::write(&input, "{\"n\":-5}\n{\"n\":9223372036854775808}\n").unwrap();
    let o = run_expect(
        &["ingest", s(&input), "--to", s(&dir.path().join("lake-neg"))],
        EXIT_ERROR,
    );
    assert!(stderr(&o).contains("column `n`"), "{}", stderr(&o));
    assert!(
        !dir.path().join("lake-neg").exists(),
        "a failed new job creates nothing"
    );
}

#[test]
fn a_field_outside_the_schema_is_a_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    let schema_file = dir.path().join("schema.json");
    write_schema(
        &schema_file,
        serde_json::json!([
            field("id", "Int64".into(), false),
            field(
                "st",
                serde_json::json!({"Struct": [field("a", "Int64".into(), true)]}),
                true
            ),
        ]),
    );
    let lines: Vec<String> = vec![
        r#"{"id":1,"st":{"a":1}}"#.into(),
        r#"{"id":2,"extra":1}"#.into(),
        r#"{"id":3,"st":{"a":1,"b":2}}"#.into(),
        r#"{"id":4,"extra":null}"#.into(),
        r#"{"id":5}"#.into(),
    ];
    let (_, visible, bad) = ingest_collecting(
        dir.path(),
        "fields.jsonl",
        &lines,
        &["--schema", s(&schema_file)],
    );
    assert_eq!(bad, vec![2, 3, 4]);
    let ids: Vec<i64> = visible.iter().map(|v| v["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![1, 5]);

    // A field that first appears after the records the schema was inferred from.
    let mut lines: Vec<String> = (0..1001).map(|i| format!("{{\"id\":{i}}}")).collect();
    lines.push(r#"{"id":1001,"late":true}"#.into());
    lines.push(r#"{"id":1002}"#.into());
    let (_, visible, bad) = ingest_collecting(dir.path(), "late.jsonl", &lines, &[]);
    assert_eq!(bad, vec![1002]);
    assert_eq!(visible.len(), 1002);
    assert!(visible.iter().all(|v| v.get("late").is_none()));

    // Without --bad-records: the run stops naming the field and the line.
    let input = dir.path().join("strict.jsonl");
    fs::write(&input, "{\"id\":1}\n{\"id\":2,\"extra\":1}\n").unwrap();
    let o = run_expect(
        &[
            "ingest",
            s(&input),
            "--to",
            s(&dir.path().join("lake-strict")),
            "--schema",
            s(&schema_file),
        ],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:2: ", s(&input))), "{err}");
    assert!(err.contains("`extra`"), "{err}");
}

#[test]
fn invalid_arguments_exit_2_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let jsonl = d.join("in.jsonl");
    fs::write(&jsonl, "{\"id\":1,\"day\":\"x\"}\n").unwrap();
    let csv = d.join("in.csv");
    fs::write(&csv, "id,day\n1,x\n").unwrap();
    let txt = d.join("in.txt");
    fs::write(&txt, "{\"id\":1}\n").unwrap();
    let schema = d.join("schema.json");
    write_schema(
        &schema,
        serde_json::json!([field("id", "Int64".into(), true)]),
    );
    // A type outside the typing rule.
    let decimal = d.join("decimal32.json");
    write_schema(
        &decimal,
        serde_json::json!([field("id", serde_json::json!({"Decimal32": [5, 2]}), true)]),
    );
    // Decimals a Parquet file cannot hold, or arrow cannot: refused before the job exists
    // (it would keep a schema it can never write).
    let bad_decimals: Vec<PathBuf> = [
        serde_json::json!({"Decimal128": [10, -2]}),
        serde_json::json!({"Decimal128": [5, 7]}),
        serde_json::json!({"Decimal128": [0, 0]}),
        serde_json::json!({"Decimal128": [40, 2]}),
        serde_json::json!({"Decimal256": [80, 0]}),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, t)| {
        let path = d.join(format!("bad-decimal-{i}.json"));
        write_schema(
            &path,
            serde_json::json!([field("id", t, true), field("day", "Utf8".into(), true)]),
        );
        path
    })
    .collect();
    let not_schema = d.join("not-schema.json");
    fs::write(&not_schema, "{\"x\":1}").unwrap();
    let twice = d.join("twice.json");
    write_schema(
        &twice,
        serde_json::json!([
            field("id", "Int64".into(), true),
            field("id", "Utf8".into(), true)
        ]),
    );
    let twice_csv = d.join("twice.csv");
    fs::write(&twice_csv, "id,id\n1,2\n").unwrap();
    let nested = d.join("nested.jsonl");
    fs::write(&nested, "{\"id\":1,\"l\":[\"a, b\"],\"s\":{\"a\":1}}\n").unwrap();
    let a_dir = d.join("a-dir");
    fs::create_dir(&a_dir).unwrap();
    let lake = d.join("lake");
    let missing = d.join("missing.json");
    let (j, c, t, l) = (s(&jsonl), s(&csv), s(&txt), s(&lake));
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["ingest", j, "--to", l, "--partition-by", "_x"],
        vec!["ingest", j, "--to", l, "--partition-by", ".x"],
        vec!["ingest", j, "--to", l, "--partition-by", ""],
        vec!["ingest", j, "--to", l, "--partition-by", "day,day"],
        vec!["ingest", j, "--to", l, "--partition-by", "day,"],
        vec!["ingest", j, "--to", l, "--partition-by", "nope"],
        vec![
            "ingest",
            j,
            "--to",
            l,
            "--partition-by",
            "day",
            "--schema",
            s(&schema),
        ],
        vec!["ingest", j, "--to", l, "--schema", s(&missing)],
        vec!["ingest", j, "--to", l, "--schema", s(&not_schema)],
        vec!["ingest", j, "--to", l, "--schema", s(&decimal)],
        // A column name twice: Parquet readers refuse such a file.
        vec!["ingest", j, "--to", l, "--schema", s(&twice)],
        vec!["ingest", s(&twice_csv), "--to", l],
        // A list or a structure has no one directory name.
        vec!["ingest", s(&nested), "--to", l, "--partition-by", "l"],
        vec!["ingest", s(&nested), "--to", l, "--partition-by", "s"],
        // Nested columns in CSV output; a directory as the bad records file.
        vec!["ingest", s(&nested), "--to", l, "--format", "csv"],
        vec!["ingest", j, "--to", l, "--bad-records", s(&a_dir)],
        vec!["ingest", j, "--to", l, "--checkpoint-every", "0rows"],
        vec!["ingest", j, "--to", l, "--checkpoint-every", "often"],
        vec!["ingest", j, "--to", l, "--max-part-size", "0"],
        vec!["ingest", j, "--to", l, "--job", "bad-name"],
        vec!["ingest", j, "--to", l, "--format", "xml"],
        vec!["ingest", j, "--to", "gs://bucket/lake"],
        vec!["ingest", j, c, "--to", l],
        vec!["ingest", t, "--to", l],
        vec!["ingest", j, j, "--to", l],
        vec!["ingest", "-", "--to", l],
        vec!["ingest", j],
        vec!["ls", l, "--bogus"],
        vec!["commit", l, "--checkpoint", "soon"],
        vec!["abort", l, "--older-than", "soon"],
        vec!["inspect"],
        vec!["bench", "--to", l, "--files", "0"],
        vec!["bench", "--to", l, "--file-size", "0"],
        vec!["bench", "--to", l, "--format", "xml"],
    ];
    for schema in &bad_decimals {
        cases.push(vec!["ingest", j, "--to", l, "--schema", s(schema)]);
        cases.push(vec!["ingest", c, "--to", l, "--schema", s(schema)]);
    }
    for args in &cases {
        let o = filesink(args);
        assert_eq!(
            o.status.code(),
            Some(EXIT_USAGE),
            "filesink {args:?}\n{}",
            stderr(&o)
        );
        assert!(!lake.exists(), "filesink {args:?} created `{l}`");
    }
}

#[test]
fn a_csv_with_a_byte_order_mark_is_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let bom = "\u{feff}";
    let csv = dir.path().join("bom.csv");
    fs::write(&csv, format!("{bom}id,day\n1,a\n2,b\n")).unwrap();
    let jsonl = dir.path().join("bom.jsonl");
    fs::write(
        &jsonl,
        format!("{bom}{{\"id\":1,\"day\":\"a\"}}\n{{\"id\":2,\"day\":\"b\"}}\n"),
    )
    .unwrap();
    let schema = dir.path().join("schema.json");
    write_schema(
        &schema,
        serde_json::json!([
            field("id", "Int64".into(), true),
            field("day", "Utf8".into(), true)
        ]),
    );
    for (input, extra) in [
        (&csv, None),
        (&csv, Some(&schema)),
        (&jsonl, None),
        (&jsonl, Some(&schema)),
    ] {
        let lake = dir.path().join(format!("lake-{}", extra.is_some()));
        let _ = fs::remove_dir_all(&lake);
        let mut args = vec!["ingest", s(input), "--to", s(&lake), "--format", "jsonl"];
        if let Some(schema) = extra {
            args.extend(["--schema", s(schema)]);
        }
        run_ok(&args);
        let mut records = visible_records(&lake);
        records.sort_by_key(|v| v["id"].as_i64());
        assert_eq!(
            records,
            vec![
                serde_json::json!({"id": 1, "day": "a"}),
                serde_json::json!({"id": 2, "day": "b"})
            ],
            "{args:?}"
        );
    }
}

#[test]
fn empty_inputs_follow_one_rule() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("empty.jsonl", ""),
        ("blank.jsonl", "\n  \n\t\n"),
        ("empty.csv", ""),
        ("blank.csv", "\n\n"),
        ("header.csv", "id,day\n"),
    ];
    for (name, content) in cases {
        let input = dir.path().join(name);
        fs::write(&input, content).unwrap();
        for extra in [&[][..], &["--partition-by", "day"][..]] {
            let lake = dir.path().join(format!("lake-{name}-{}", extra.len()));
            let mut args = vec!["ingest", s(&input), "--to", s(&lake), "--json"];
            args.extend_from_slice(extra);
            let v = json_of(&run_ok(&args));
            assert_eq!(v["records"], 0, "{name}: {v}");
            assert!(common::visible_files(&lake).is_empty(), "{name}");
            // And a rerun is the finished job's no-op.
            let v = json_of(&run_ok(&args));
            assert_eq!(v["status"], "already_finished", "{name}: {v}");
        }
    }
    // Standard input without records.
    let lake = dir.path().join("lake-stdin");
    let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(["ingest", "-", "--job", "stdin", "--to", s(&lake), "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_of(&o)["records"], 0);

    // An empty first input says nothing about the columns: they come from the next one.
    let empty = dir.path().join("empty.jsonl");
    let full = dir.path().join("full.jsonl");
    fs::write(
        &full,
        "{\"id\":1,\"day\":\"a\"}\n{\"id\":2,\"day\":\"b\"}\n",
    )
    .unwrap();
    let lake = dir.path().join("lake-two");
    run_ok(&[
        "ingest",
        s(&empty),
        s(&full),
        "--to",
        s(&lake),
        "--format",
        "jsonl",
        "--partition-by",
        "day",
    ]);
    assert_eq!(visible_records(&lake).len(), 2);
}

/// A job whose runs saw no records yet (an empty or blank file, a CSV header alone, an empty
/// stream) has no schema that could hold any: its first run that sees records takes their
/// columns. Its later records were all "malformed" (or all bad records, exit 0), and a CSV
/// header alone gave columns of type Null, which kept none of the values appended later
/// ("2 records" written as `{}`).
#[test]
fn a_job_that_saw_no_records_takes_the_columns_of_its_first_records() {
    let dir = tempfile::tempdir().unwrap();
    let rows_jsonl = "{\"id\":1,\"day\":\"a\"}\n{\"id\":2,\"day\":\"b\"}\n";
    let rows_csv = "1,a\n2,b\n";
    let cases = [
        ("empty.jsonl", "", rows_jsonl),
        ("blank.jsonl", "\n  \n", rows_jsonl),
        ("header.csv", "id,day\n", rows_csv),
        ("empty.csv", "", "id,day\n1,a\n2,b\n"),
    ];
    for (name, first, appended) in cases {
        for extra in [&[][..], &["--partition-by", "day"][..]] {
            let input = dir.path().join(name);
            fs::write(&input, first).unwrap();
            let lake = dir.path().join(format!("lake-{name}-{}", extra.len()));
            let mut args = vec!["ingest", s(&input), "--to", s(&lake), "--format", "jsonl"];
            args.extend_from_slice(extra);
            run_ok(&args);
            let mut f = fs::OpenOptions::new().append(true).open(&input).unwrap();
            f.write_all(appended.as_bytes()).unwrap();
            drop(f);
            let o = run_ok(&args);
            assert!(
                stderr(&o).contains("has written no record yet"),
                "{name}: {}",
                stderr(&o)
            );
            // The values keep their types (numbers stay numbers); a partition column is in
            // the directory names.
            let mut got: Vec<String> = common::visible_files(&lake)
                .iter()
                .flat_map(|f| {
                    let dir = f.parent().unwrap().file_name().unwrap().to_str().unwrap();
                    let dir = dir.strip_prefix("day=").unwrap_or("").to_string();
                    fs::read_to_string(f)
                        .unwrap()
                        .lines()
                        .map(|l| {
                            let r: Value = serde_json::from_str(l).unwrap();
                            format!("{}/{}{dir}", r["id"], r["day"].as_str().unwrap_or(""))
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            got.sort();
            assert_eq!(got, ["1/a", "2/b"], "{name} {extra:?}");
            // Decided now: a record of other columns is refused as before.
            let mut f = fs::OpenOptions::new().append(true).open(&input).unwrap();
            let other = match name.ends_with(".csv") {
                true => "x,y,z\n",
                false => "{\"other\":1}\n",
            };
            f.write_all(other.as_bytes()).unwrap();
            drop(f);
            run_expect(&args, EXIT_ERROR);
            assert_eq!(visible_records(&lake).len(), 2, "{name}");
        }
    }

    // Standard input: an empty stream, then one with records.
    let lake = dir.path().join("lake-stdin");
    let feed = dir.path().join("feed.jsonl");
    let run = |text: &str| {
        fs::write(&feed, text).unwrap();
        let args = [
            "ingest",
            "-",
            "--job",
            "piped",
            "--to",
            s(&lake),
            "--format",
            "jsonl",
        ];
        let o = filesink_with_stdin(&args, &feed);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    run("");
    run(rows_jsonl);
    assert_eq!(visible_records(&lake).len(), 2);
    run(rows_jsonl);
    assert_eq!(
        visible_records(&lake).len(),
        2,
        "the same stream again: nothing new"
    );

    // A CSV stream of a header alone, then an empty stream (a rerun without a pipe: nothing
    // to do, as for any finished stream job), then the stream with rows.
    let lake = dir.path().join("lake-stdin-csv");
    let run_csv = |text: &str| {
        fs::write(&feed, text).unwrap();
        let args = [
            "ingest",
            "-",
            "--job",
            "piped",
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--input-format",
            "csv",
        ];
        let o = filesink_with_stdin(&args, &feed);
        assert_eq!(o.status.code(), Some(0), "{text:?}: {}", stderr(&o));
        o
    };
    run_csv("id,day\n");
    let o = run_csv("");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    run_csv(&format!("id,day\n{rows_csv}"));
    let records = visible_records(&lake);
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r["id"].is_i64()), "{records:?}");

    // A header alone in the first of two inputs: the second gives the types.
    let header = dir.path().join("day1.csv");
    let rows = dir.path().join("day2.csv");
    fs::write(&header, "id,day\n").unwrap();
    fs::write(&rows, format!("id,day\n{rows_csv}")).unwrap();
    let lake = dir.path().join("lake-two-csv");
    run_ok(&[
        "ingest",
        s(&header),
        s(&rows),
        "--to",
        s(&lake),
        "--format",
        "jsonl",
    ]);
    let records = visible_records(&lake);
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r["id"].is_i64()), "{records:?}");
}

/// A CSV stream job with a `--schema` whose first stream held blank lines only has read no
/// header: the next stream's header is checked, not written as a record.
#[test]
fn a_csv_streams_header_after_blank_lines_is_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    write_schema(
        &schema,
        serde_json::json!([
            field("id", serde_json::json!("Utf8"), true),
            field("day", serde_json::json!("Utf8"), true),
        ]),
    );
    let lake = dir.path().join("lake");
    let feed = dir.path().join("feed.csv");
    let run_job = |job: &str, text: &str, code: i32| {
        fs::write(&feed, text).unwrap();
        let args = [
            "ingest",
            "-",
            "--job",
            job,
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--input-format",
            "csv",
            "--schema",
            s(&schema),
        ];
        let o = filesink_with_stdin(&args, &feed);
        assert_eq!(o.status.code(), Some(code), "{text:?}: {}", stderr(&o));
    };
    let run = |text: &str, code: i32| run_job("piped", text, code);
    run("\n\n", 0);
    run("\n\nid,day\n1,a\n", 0);
    let records = visible_records(&lake);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["id"], "1");
    // Another header is refused (another job, the same start).
    run_job("other", "\n\n", 0);
    run_job("other", "\n\nx,y\n1,a\n2,b\n", EXIT_ERROR);
    assert_eq!(visible_records(&lake).len(), 1);
}

/// A CSV column empty in every record schema inference reads is text: it was inferred as
/// Null, and the CSV decoder dropped every later value of a Null column (exit 0, no bad
/// record). A `--schema` with a Null column is refused for CSV input.
#[test]
fn a_csv_column_empty_in_the_first_records_keeps_its_later_values() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("sparse.csv");
    let mut text = String::from("id,msg\n");
    for i in 0..1500 {
        let msg = if i >= 1200 {
            format!("hello {i}")
        } else {
            String::new()
        };
        text.push_str(&format!("{i},{msg}\n"));
    }
    fs::write(&input, &text).unwrap();
    let lake = dir.path().join("lake");
    run_ok(&["ingest", s(&input), "--to", s(&lake), "--format", "jsonl"]);
    let records = visible_records(&lake);
    assert_eq!(records.len(), 1500);
    let mut msgs: Vec<&str> = records.iter().filter_map(|r| r["msg"].as_str()).collect();
    msgs.sort_unstable();
    assert_eq!(msgs.len(), 300);
    assert_eq!(msgs[0], "hello 1200");

    let schema = dir.path().join("schema.json");
    write_schema(
        &schema,
        serde_json::json!([
            field("id", serde_json::json!("Int64"), false),
            field("msg", serde_json::json!("Null"), true),
        ]),
    );
    let lake = dir.path().join("lake-null");
    let o = run_expect(
        &[
            "ingest",
            s(&input),
            "--to",
            s(&lake),
            "--schema",
            s(&schema),
        ],
        EXIT_USAGE,
    );
    assert!(stderr(&o).contains("type Null"), "{}", stderr(&o));
    assert!(!lake.exists());
}

/// CSV follows the typing rule of JSON input: a date or a timestamp that its column would
/// cut (a fraction below a timestamp's unit, a date-time in a date column) is a bad record,
/// never stored shortened; types outside the rule are refused in `--schema`.
#[test]
fn a_csv_value_that_does_not_fit_its_column_is_a_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec!["id,ts,ms,day".to_string()];
    // The first 1000 records type the columns: Int64, Timestamp(Second) (written as
    // milliseconds: Parquet has no seconds), Timestamp(Millisecond), Date32.
    for i in 0..1000 {
        lines.push(format!(
            "{i},2024-01-01 10:00:{:02},2024-01-01T10:00:00.123,2024-01-02",
            i % 60
        ));
    }
    let later = [
        "1000,2024-01-01 10:00:00.7505,2024-01-01T10:00:00.123,2024-01-02",
        "1001,2024-01-01 10:00:00,2024-01-01T10:00:00.1234,2024-01-02",
        "1002,2024-01-01 10:00:00,2024-01-01T10:00:00.123,2024-01-01T23:30:00-05:00",
        "1003,2024-01-01 10:00:00,2024-01-01T10:00:00.123,2024-01-01 10:00",
        "1004,2024-01-01T10:00:00+01:00,2024-01-01T10:00:00.5Z,2024-01-03",
        "1005,,,",
    ];
    lines.extend(later.iter().map(|l| l.to_string()));
    let (_, records, bad) = ingest_collecting(dir.path(), "typed.csv", &lines, &[]);
    // Header on line 1: record `id` is on line id + 2.
    assert_eq!(bad, vec![1002, 1003, 1004, 1005]);
    assert_eq!(records.len(), 1002);
    let of = |id: i64| records.iter().find(|r| r["id"] == id).unwrap().clone();
    // A value with an offset is its instant, in UTC; an empty field is null.
    assert_eq!(of(1004)["ts"], "2024-01-01T09:00:00");
    assert_eq!(of(1004)["ms"], "2024-01-01T10:00:00.500");
    assert_eq!(of(1004)["day"], "2024-01-03");
    assert_eq!(of(1005)["ts"], Value::Null);
    assert_eq!(of(0)["ms"], "2024-01-01T10:00:00.123");

    // Without --bad-records the run stops at the first, naming its line and column.
    let input = dir.path().join("typed.csv");
    let lake = dir.path().join("lake-strict");
    let o = run_expect(
        &["ingest", s(&input), "--to", s(&lake), "--format", "jsonl"],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(err.contains(":1002") && err.contains("`ts`"), "{err}");

    // Decimals are exact or bad records, as in JSON input (arrow's CSV parser would round
    // `12.345` to `12.35`); with an exponent, a sign, without a leading digit; empty is null.
    let schema = dir.path().join("decimal.json");
    write_schema(
        &schema,
        serde_json::json!([
            field("id", "Int64".into(), false),
            field("amount", serde_json::json!({"Decimal128": [10, 2]}), true),
        ]),
    );
    let lines: Vec<String> = [
        "id,amount",
        "1,12.34",
        "2,12.345",
        "3,-0.5",
        "4,1.5e2",
        "5,abc",
        "6,",
        "7,100000000",
        "8,\"12.30\"",
        "9, 12.3",
        "10,.25",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let (lake, _, bad) =
        ingest_collecting(dir.path(), "decimal.csv", &lines, &["--schema", s(&schema)]);
    assert_eq!(bad, vec![3, 6, 8, 10]);
    let mut amounts: Vec<String> = common::visible_files(&lake)
        .iter()
        .flat_map(|f| {
            fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    amounts.sort();
    assert_eq!(
        amounts,
        [
            "{\"id\":1,\"amount\":12.34}",
            "{\"id\":10,\"amount\":0.25}",
            "{\"id\":3,\"amount\":-0.50}",
            "{\"id\":4,\"amount\":150.00}",
            "{\"id\":6}",
            "{\"id\":8,\"amount\":12.30}",
        ]
    );

    // Types outside the rule are refused before anything is read or created.
    for (name, data_type) in [
        ("decimal32", serde_json::json!({"Decimal32": [5, 2]})),
        ("date64", serde_json::json!("Date64")),
        ("time", serde_json::json!({"Time32": "Second"})),
        ("binary", serde_json::json!("Binary")),
        (
            "list",
            serde_json::json!({"List": field("item", "Int64".into(), true)}),
        ),
    ] {
        let schema = dir.path().join(format!("{name}.json"));
        write_schema(
            &schema,
            serde_json::json!([
                field("id", "Int64".into(), false),
                field("ts", data_type, true),
                field("ms", "Utf8".into(), true),
                field("day", "Utf8".into(), true),
            ]),
        );
        let lake = dir.path().join(format!("lake-{name}"));
        let o = run_expect(
            &[
                "ingest",
                s(&input),
                "--to",
                s(&lake),
                "--schema",
                s(&schema),
            ],
            EXIT_USAGE,
        );
        let err = stderr(&o);
        assert!(
            err.contains("`ts`") && err.contains("CSV input does not support"),
            "{name}: {err}"
        );
        assert!(!lake.exists(), "{name}");
    }
}

#[test]
fn a_record_level_error_names_its_line_and_goes_to_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("h.jsonl");
    let long = "v".repeat(300);
    let mut lines = Vec::new();
    for i in 1..=40 {
        let h = match i {
            24 => long.clone(),
            31 => "é".repeat(130), // 260 bytes (non-ASCII is kept as it is)
            _ => format!("h{}", i % 3),
        };
        lines.push(serde_json::json!({"id": i, "h": h}).to_string());
    }
    fs::write(&input, lines.join("\n") + "\n").unwrap();

    // Without --bad-records: the run stops at the first, naming its line; nothing visible.
    let lake = dir.path().join("lake");
    let o = run_expect(
        &[
            "ingest",
            s(&input),
            "--to",
            s(&lake),
            "--partition-by",
            "h",
            "--checkpoint-every",
            "10rows",
        ],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:24: ", s(&input))), "{err}");
    assert!(!err.contains("row "), "names the line, not a row: {err}");
    // Checkpoints before the chunk holding line 24 may have committed lines before it, never
    // line 24 or after.
    let visible: BTreeSet<i64> = common::visible_files(&lake)
        .iter()
        .flat_map(|f| common::read_ids(f, &filesink::FileFormat::parquet()))
        .collect();
    assert!(visible.iter().all(|id| *id < 24), "{visible:?}");

    // With --bad-records: both go there, every other record is written.
    let lake = dir.path().join("lake-bad");
    let bad = dir.path().join("bad.jsonl");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--partition-by",
        "h",
        "--checkpoint-every",
        "10rows",
        "--bad-records",
        s(&bad),
    ]);
    assert_eq!(
        bad_sources(&bad),
        vec![format!("{}:24", s(&input)), format!("{}:31", s(&input))]
    );
    let mut ids: Vec<i64> = common::visible_files(&lake)
        .iter()
        .flat_map(|f| common::read_ids(f, &filesink::FileFormat::parquet()))
        .collect();
    ids.sort_unstable();
    let expected: Vec<i64> = (1..=40).filter(|i| *i != 24 && *i != 31).collect();
    assert_eq!(ids, expected);
}

/// The longest partition path a Parquet lake at `lake` takes, as the library computes it.
fn partition_path_bytes_max(lake: &str) -> usize {
    filesink::Sink::builder_shared(filesink::storage::open_url(lake).unwrap())
        .format(filesink::FileFormat::parquet())
        .build()
        .unwrap()
        .partition_path_bytes_max()
        .expect("the store has a limit on a path")
}

/// Values of columns `c00`, `c01`, … (`columns` of them) that make a partition path of
/// exactly `len` bytes: `first` (with the bytes its directory name takes once escaped), then
/// runs of `x`.
fn values_of_path(columns: usize, len: usize, first: Option<&(Value, usize)>) -> Vec<Value> {
    let mut values: Vec<Value> = first.iter().map(|(v, _)| v.clone()).collect();
    let taken: usize = first.iter().map(|(_, n)| n + 1).sum();
    let mut left = (len + 1)
        .checked_sub(taken + 5 * (columns - values.len()))
        .expect("the path fits its columns");
    for _ in values.len()..columns {
        let n = left.min(251);
        values.push(Value::from("x".repeat(n)));
        left -= n;
    }
    assert_eq!(left, 0, "{len} bytes do not fit {columns} columns");
    values
}

#[test]
fn a_partition_path_longer_than_the_store_takes_is_a_bad_record() {
    const COLUMNS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let max = partition_path_bytes_max(s(&lake));
    let names: Vec<String> = (0..COLUMNS).map(|c| format!("c{c:02}")).collect();
    let record = |id: i64, values: Vec<Value>, ts: &str| {
        let mut r = serde_json::Map::new();
        r.insert("id".into(), id.into());
        r.insert("ts".into(), ts.into());
        for (n, v) in names.iter().zip(values) {
            r.insert(n.clone(), v);
        }
        Value::Object(r).to_string()
    };
    let t = "2026-11-30T10:00:00Z";
    let null = (Value::Null, "c00=__HIVE_DEFAULT_PARTITION__".len());
    let slash = (Value::from("a/b"), "c00=a%2Fb".len());
    let accents = (Value::from("é".repeat(40)), 4 + 2 * 40); // kept as UTF-8
    let lines = [
        record(1, values_of_path(COLUMNS, 5 * COLUMNS - 1, None), t),
        record(2, values_of_path(COLUMNS, max, None), t),
        record(3, values_of_path(COLUMNS, max + 1, None), t),
        record(4, values_of_path(COLUMNS, max, Some(&null)), t),
        record(5, values_of_path(COLUMNS, max + 1, Some(&null)), t),
        record(6, values_of_path(COLUMNS, max, Some(&slash)), t),
        record(7, values_of_path(COLUMNS, max + 1, Some(&slash)), t),
        record(8, values_of_path(COLUMNS, max, Some(&accents)), t),
        record(9, values_of_path(COLUMNS, max + 1, Some(&accents)), t),
    ];
    fs::write(dir.path().join("in.jsonl"), lines.join("\n") + "\n").unwrap();
    let by = names.join(",");

    // The lake named relative to the working directory: its base is the directory it names.
    let ingest = |lake: &str, extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .current_dir(dir.path())
            .args(["ingest", "in.jsonl", "--to", lake, "--partition-by", &by])
            .args(["--bad-records", "bad.jsonl"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    ingest("lake", &[]);
    let ids = |lake: &Path| {
        let mut ids: Vec<i64> = common::visible_files(lake)
            .iter()
            .flat_map(|f| common::read_ids(f, &filesink::FileFormat::parquet()))
            .collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(ids(&lake), vec![1, 2, 4, 6, 8]);
    let longest = common::visible_files(&lake)
        .iter()
        .map(|f| {
            f.parent()
                .unwrap()
                .strip_prefix(&lake)
                .unwrap()
                .as_os_str()
                .len()
        })
        .max();
    assert_eq!(longest, Some(max));
    let bad = bad_records(&dir.path().join("bad.jsonl"));
    let lines_of = |bad: &[Value]| -> Vec<String> {
        bad.iter()
            .map(|b| b["source"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        lines_of(&bad),
        ["in.jsonl:3", "in.jsonl:5", "in.jsonl:7", "in.jsonl:9"]
    );
    for b in &bad {
        let error = b["error"].as_str().unwrap();
        assert!(
            error.contains(&format!(
                "({} bytes)` is longer than the {max} bytes",
                max + 1
            )),
            "{error}"
        );
    }
    // A rerun finds nothing new.
    ingest("lake", &[]);
    assert_eq!(ids(&lake), vec![1, 2, 4, 6, 8]);

    // With time directories after the columns' own, the whole path counts.
    let time = "dt=2026-11-30/hour=10".len() + 1;
    let lines = [
        record(1, values_of_path(COLUMNS, max - time, None), t),
        record(2, values_of_path(COLUMNS, max - time + 1, None), t),
        record(
            3,
            values_of_path(COLUMNS, max - time, None),
            "2026-11-30T10:00:00.5Z",
        ),
    ];
    fs::write(dir.path().join("in.jsonl"), lines.join("\n") + "\n").unwrap();
    fs::remove_file(dir.path().join("bad.jsonl")).unwrap();
    let lake = dir.path().join("lak2");
    assert_eq!(partition_path_bytes_max(s(&lake)), max, "same base length");
    ingest("./lak2", &["--partition-by-time", "ts=dt=%Y-%m-%d/hour=%H"]);
    assert_eq!(ids(&lake), vec![1, 3]);
    let bad = bad_records(&dir.path().join("bad.jsonl"));
    assert_eq!(lines_of(&bad), ["in.jsonl:2"]);
}

#[test]
fn non_finite_floats_are_bad_records_in_every_input_format() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f.csv");
    fs::write(&input, "id,x\n1,1.5\n2,NaN\n3,inf\n4,-inf\n5,2.5\n").unwrap();
    let lake = dir.path().join("lake");
    let bad = dir.path().join("bad.jsonl");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--format",
        "jsonl",
        "--bad-records",
        s(&bad),
    ]);
    let src = |l: u32| format!("{}:{l}", s(&input));
    assert_eq!(bad_sources(&bad), vec![src(3), src(4), src(5)]);
    let mut records = visible_records(&lake);
    records.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(
        records,
        vec![
            serde_json::json!({"id": 1, "x": 1.5}),
            serde_json::json!({"id": 5, "x": 2.5})
        ]
    );
    // Strict: the run stops at line 3.
    let o = run_expect(
        &["ingest", s(&input), "--to", s(&dir.path().join("lake2"))],
        EXIT_ERROR,
    );
    assert!(
        stderr(&o).contains(&format!("{}: ", src(3))),
        "{}",
        stderr(&o)
    );
}

#[test]
fn ls_says_unknown_for_files_of_a_job_with_a_corrupt_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let schema = dir.path().join("schema.json");
    write_schema(
        &schema,
        serde_json::json!([field("id", "Int64".into(), true)]),
    );
    // A job on standard input checkpoints after 2 records and waits for more, its JSON-lines
    // part file open (resumable); killed there, the file is promised by its latest manifest.
    let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args([
            "ingest",
            "-",
            "--job",
            "live",
            "--to",
            s(&lake),
            "--format",
            "jsonl",
        ])
        .args(["--schema", s(&schema), "--checkpoint-every", "2rows"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n")
        .unwrap();
    let checkpoints = lake.join("_filesink/jobs/live/checkpoints");
    let manifest = checkpoints.join(format!("{:020}.json", 2));
    let deadline = Instant::now() + Duration::from_secs(60);
    let resumable = loop {
        // The checkpoint after the first 2 records (checkpoint 1 holds none), with the file.
        let hidden = if lake.is_dir() {
            common::hidden_files(&lake)
        } else {
            Vec::new()
        };
        let data: Vec<_> = hidden
            .iter()
            .filter(|p| p.to_str().unwrap().contains(".inprogress."))
            .collect();
        // Once the first 2 records are committed, the file open is the third record's: before,
        // it may be theirs, about to be renamed.
        let committed = lake.is_dir() && !common::visible_files(&lake).is_empty();
        if manifest_with_records(&checkpoints) && committed && !data.is_empty() {
            break data[0].clone();
        }
        assert!(child.try_wait().unwrap().is_none(), "ingest ended early");
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = manifest;

    // Corrupt the latest manifest.
    let latest = latest_manifest(&checkpoints);
    let bytes = fs::read(&latest).unwrap();
    fs::write(&latest, &bytes[..bytes.len() / 2]).unwrap();

    let rel = resumable
        .strip_prefix(&lake)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let o = run_expect(&["ls", s(&lake), "--json"], EXIT_CORRUPT);
    let v = json_of(&o);
    let paths = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(paths("leftovers").is_empty(), "{v}");
    assert_eq!(paths("unknown"), vec![rel.clone()], "{v}");
    let o = run_expect(&["ls", s(&lake)], EXIT_CORRUPT);
    let text = stdout(&o);
    assert!(text.contains("unknown state"), "{text}");
    assert!(
        text.contains("needed by no manifest): 0"),
        "not listed as a leftover: {text}"
    );
    // abort does not remove it either, --force or not.
    for args in [vec!["abort", s(&lake)], vec!["abort", s(&lake), "--force"]] {
        run_expect(&args, EXIT_CORRUPT);
        assert!(resumable.is_file(), "{args:?} removed `{rel}`");
    }
}

/// Whether a manifest after checkpoint 1 (which holds no records) is there.
fn manifest_with_records(checkpoints: &Path) -> bool {
    fs::read_dir(checkpoints).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let n = e.file_name().to_str().unwrap().to_string();
            !n.starts_with('.')
                && n.ends_with(".json")
                && n.trim_end_matches(".json")
                    .parse::<u64>()
                    .is_ok_and(|id| id >= 2)
        })
    })
}

fn latest_manifest(checkpoints: &Path) -> PathBuf {
    let mut all: Vec<PathBuf> = fs::read_dir(checkpoints)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            !n.starts_with('.') && n.ends_with(".json")
        })
        .collect();
    all.sort();
    all.pop().unwrap()
}

#[test]
fn bench_creates_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let args = |to: &Path| {
        vec![
            "bench".to_string(),
            "--to".into(),
            to.to_str().unwrap().into(),
            "--files".into(),
            "2".into(),
            "--files-per-checkpoint".into(),
            "1".into(),
            "--file-size".into(),
            "4KiB".into(),
            "--json".into(),
        ]
    };
    // A directory that does not exist yet, two levels deep: made, then removed.
    let to = dir.path().join("new/sub");
    let a = args(&to);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    run_ok(&a);
    assert!(!dir.path().join("new").exists(), "bench left what it made");
    // An existing one stays, with what was in it.
    let to = dir.path().join("mine");
    fs::create_dir(&to).unwrap();
    fs::write(to.join("keep.txt"), "x").unwrap();
    let a = args(&to);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    run_ok(&a);
    let left: Vec<_> = fs::read_dir(&to)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("keep.txt")]);
}

/// A JSON record of exactly `bytes` bytes (its line end included when `line_end`), `id` first.
fn record_of_bytes(id: i64, bytes: u64, line_end: bool) -> Vec<u8> {
    let head = format!("{{\"id\":{id},\"pad\":\"");
    let tail = if line_end { "\"}\n" } else { "\"}" };
    let pad = bytes as usize - head.len() - tail.len();
    let mut rec = Vec::with_capacity(bytes as usize);
    rec.extend_from_slice(head.as_bytes());
    rec.resize(head.len() + pad, b'x');
    rec.extend_from_slice(tail.as_bytes());
    rec
}

/// The bad records of a `--bad-records` file, as JSON.
fn bad_records(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A record longer than the most a record may take (`RECORD_BYTES_MAX`) stops a run that does
/// not collect bad records, naming its line. With `--bad-records` it is set aside like any
/// bad record (its first KiB kept, its length said) and the run goes on: it is read past, in
/// a file or a stream, as the first record (which schema inference passes over too), as a
/// record one byte over the limit with its line end (the next record is not lost), as a CSV
/// record whose quoted field spans lines (the lines after it keep their numbers), and as the
/// last record without a line end. The job's position ends at the input's end: rerunning the
/// finished job, or feeding its stream again, finds it unchanged.
#[test]
fn a_record_too_long_to_read_is_a_bad_record_and_the_run_goes_on() {
    let max = filesink::ingest::source::RECORD_BYTES_MAX;
    let dir = tempfile::tempdir().unwrap();
    let ids = |lake: &Path| -> Vec<i64> {
        let mut ids: Vec<i64> = visible_records(lake)
            .iter()
            .map(|v| v["id"].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };

    // JSON lines: too long first (over by 10), fine, over by one byte exactly at its line end,
    // fine, fine, too long again without a line end at the end of the input.
    let json = dir.path().join("long.jsonl");
    let mut bytes = record_of_bytes(1, max + 10, true);
    bytes.extend_from_slice(b"{\"id\":2}\n");
    bytes.extend_from_slice(&record_of_bytes(3, max + 1, true));
    bytes.extend_from_slice(b"{\"id\":4}\n\n{\"id\":6}\n");
    bytes.extend_from_slice(&record_of_bytes(7, max + 3, false));
    fs::write(&json, &bytes).unwrap();
    drop(bytes);

    // Without --bad-records: the first stops the run, naming its line.
    let lake = dir.path().join("strict");
    let o = run_expect(
        &["ingest", s(&json), "--to", s(&lake), "--format", "jsonl"],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(
        err.contains("line 1 ") && err.contains("longer than"),
        "{err}"
    );
    assert!(!lake.exists() || common::visible_files(&lake).is_empty());

    let src = |input: &Path, line: u64| format!("{}:{line}", s(input));
    for stdin in [false, true] {
        let lake = dir.path().join(format!("lake-{stdin}"));
        let bad = dir.path().join(format!("bad-{stdin}.jsonl"));
        let input = if stdin { "-" } else { s(&json) };
        let args = [
            "ingest",
            input,
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--job",
            "long",
            "--bad-records",
            s(&bad),
        ];
        let run = || match stdin {
            true => filesink_with_stdin(&args, &json),
            false => filesink(&args),
        };
        let o = run();
        assert_eq!(o.status.code(), Some(0), "stdin {stdin}: {}", stderr(&o));
        assert_eq!(ids(&lake), vec![2, 4, 6], "stdin {stdin}");
        let set_aside = bad_records(&bad);
        let name = if stdin { "<stdin>" } else { s(&json) };
        let sources: Vec<&str> = set_aside
            .iter()
            .map(|b| b["source"].as_str().unwrap())
            .collect();
        let want: Vec<String> = [1, 3, 7].iter().map(|l| format!("{name}:{l}")).collect();
        assert_eq!(sources, want, "stdin {stdin}");
        let lengths = [max + 10, max + 1, max + 3];
        for (b, (id, len)) in
            set_aside
                .iter()
                .zip([(1, lengths[0]), (3, lengths[1]), (7, lengths[2])])
        {
            let text = b["line"].as_str().unwrap();
            assert!(
                text.starts_with(&format!("{{\"id\":{id},\"pad\":\"xxx")),
                "{text:.40}"
            );
            assert_eq!(text.len(), 1024);
            let error = b["error"].as_str().unwrap();
            assert!(error.contains(&format!("{len} bytes")), "{error}");
        }
        // Its position is the input's end: the finished job finds it unchanged.
        let o = run();
        assert_eq!(o.status.code(), Some(0), "stdin {stdin}: {}", stderr(&o));
        assert_eq!(ids(&lake), vec![2, 4, 6], "stdin {stdin}");
        assert_eq!(bad_records(&bad).len(), 3, "stdin {stdin}");
    }

    // CSV: a quoted field of 3 lines that makes its record too long; the lines after it keep
    // their numbers (a row with a field too many at line 7 is named so).
    let csv = dir.path().join("long.csv");
    let mut bytes = b"id,note\n1,a\n2,\"x\nx\n".to_vec();
    bytes.resize(bytes.len() + max as usize, b'x');
    bytes.extend_from_slice(b"\"\n3,c\n4,d,extra\n5,e\n");
    fs::write(&csv, &bytes).unwrap();
    drop(bytes);
    let lake = dir.path().join("lake-csv");
    let bad = dir.path().join("bad-csv.jsonl");
    let args = [
        "ingest",
        s(&csv),
        "--to",
        s(&lake),
        "--format",
        "jsonl",
        "--bad-records",
        s(&bad),
    ];
    run_ok(&args);
    assert_eq!(ids(&lake), vec![1, 3, 5]);
    assert_eq!(bad_sources(&bad), vec![src(&csv, 3), src(&csv, 7)]);
    run_ok(&args);
    assert_eq!(ids(&lake), vec![1, 3, 5]);
}

/// A JSON field that is `null` in every one of the first 1000 records (and in many more)
/// takes the type of its first value, in a file and on standard input, instead of `Null`
/// (which made every later value a bad record). Inference reads on for it up to
/// `INFER_NULL_RECORDS` records; a field null even in all of those is still `Null`.
#[test]
fn a_json_field_null_in_the_first_records_takes_the_type_of_its_first_value() {
    let limit = filesink::ingest::source::INFER_NULL_RECORDS as i64;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("nulls.jsonl");
    let mut text = String::new();
    for i in 0..1500 {
        let x = if i < 1200 {
            Value::Null
        } else {
            Value::from(i)
        };
        let s = if i < 1400 {
            Value::Null
        } else {
            Value::from(format!("s{i}"))
        };
        text.push_str(&serde_json::json!({"id": i, "x": x, "s": s}).to_string());
        text.push('\n');
    }
    fs::write(&input, &text).unwrap();
    for stdin in [false, true] {
        let lake = dir.path().join(format!("lake-{stdin}"));
        let args = [
            "ingest",
            if stdin { "-" } else { s(&input) },
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--job",
            "nulls",
        ];
        let o = match stdin {
            true => filesink_with_stdin(&args, &input),
            false => filesink(&args),
        };
        assert_eq!(o.status.code(), Some(0), "stdin {stdin}: {}", stderr(&o));
        let mut records = visible_records(&lake);
        records.sort_by_key(|v| v["id"].as_i64());
        assert_eq!(records.len(), 1500, "stdin {stdin}");
        for (i, r) in records.iter().enumerate() {
            let i = i as i64;
            assert_eq!(r["x"].as_i64(), (i >= 1200).then_some(i), "stdin {stdin}");
            let s = (i >= 1400).then(|| format!("s{i}"));
            assert_eq!(r["s"].as_str(), s.as_deref(), "stdin {stdin}");
        }
    }

    // A stream that pauses after its first 1500 records, longer than the first checkpoint's
    // interval: inference takes what has come by then, which holds the first values.
    let lake = dir.path().join("lake-paused");
    let mut child = spawn_with_piped_stdin(&[
        "ingest",
        "-",
        "--to",
        s(&lake),
        "--format",
        "jsonl",
        "--job",
        "paused",
        "--checkpoint-every",
        "1s",
    ]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    stdin
        .write_all(b"{\"id\":1500,\"x\":1,\"s\":\"last\"}\n")
        .unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let records = visible_records(&lake);
    assert_eq!(records.len(), 1501);
    assert_eq!(records.iter().filter(|r| r["x"].is_i64()).count(), 301);

    // Null beyond what inference reads: its values are bad records, as before.
    let lines: Vec<String> = (0..limit + 10)
        .map(|i| {
            let x = if i < limit {
                Value::Null
            } else {
                Value::from(i)
            };
            serde_json::json!({"id": i, "x": x}).to_string()
        })
        .collect();
    let (_, visible, bad) = ingest_collecting(dir.path(), "late.jsonl", &lines, &[]);
    assert_eq!(
        bad,
        ((limit + 1) as u64..=(limit + 10) as u64).collect::<Vec<_>>()
    );
    assert_eq!(visible.len() as i64, limit);
}

/// Where a record too long to read cannot be set aside, the run stops, also with
/// `--bad-records`: a CSV record whose quoted field is still open at the end of the input
/// (a stray quote, or a file cut while it was written: taken as one record, its rest would
/// later become records of its own), and a CSV header on standard input (without it nothing
/// can be read). And a record too long in a strict run stops it where the run reaches it,
/// after the records before it, even where schema inference read past it.
#[test]
fn a_record_too_long_stops_the_run_where_it_cannot_be_set_aside() {
    let max = filesink::ingest::source::RECORD_BYTES_MAX as usize;
    let dir = tempfile::tempdir().unwrap();

    let open_quote = dir.path().join("open-quote.csv");
    let mut bytes = b"id,note\n1,a\n2,\"oops\n".to_vec();
    while bytes.len() < max + 100 {
        bytes.extend_from_slice(b"3,x\n");
    }
    fs::write(&open_quote, &bytes).unwrap();
    let lake = dir.path().join("lake-quote");
    let bad = dir.path().join("bad-quote.jsonl");
    let o = run_expect(
        &[
            "ingest",
            s(&open_quote),
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--bad-records",
            s(&bad),
        ],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(err.contains("ends inside a quoted field"), "{err}");
    let visible = if lake.exists() {
        visible_records(&lake)
    } else {
        Vec::new()
    };
    let ids: Vec<i64> = visible.iter().map(|v| v["id"].as_i64().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == 1), "{ids:?}");

    let long_header = dir.path().join("long-header.csv");
    let mut bytes = b"id,".to_vec();
    bytes.resize(max + 10, b'h');
    bytes.extend_from_slice(b"\n1,2\n");
    fs::write(&long_header, &bytes).unwrap();
    drop(bytes);
    let lake = dir.path().join("lake-header");
    let o = filesink_with_stdin(
        &[
            "ingest",
            "-",
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--job",
            "header",
            "--input-format",
            "csv",
            "--bad-records",
            s(&dir.path().join("bad-header.jsonl")),
        ],
        &long_header,
    );
    assert_eq!(o.status.code(), Some(EXIT_ERROR), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("line 1 ") && err.contains("longer than"),
        "{err}"
    );

    // Strict: x is null until record 1100, so inference reads past line 1150, too long.
    let strict = dir.path().join("strict.jsonl");
    let mut bytes = Vec::new();
    for i in 0..1200i64 {
        if i == 1149 {
            bytes.extend_from_slice(b"{\"id\":1149,\"pad\":\"");
            bytes.resize(bytes.len() + max, b'x');
            bytes.extend_from_slice(b"\"}\n");
            continue;
        }
        let x = if i < 1100 {
            Value::Null
        } else {
            Value::from(i)
        };
        bytes.extend_from_slice(serde_json::json!({"id": i, "x": x}).to_string().as_bytes());
        bytes.push(b'\n');
    }
    fs::write(&strict, &bytes).unwrap();
    drop(bytes);
    let lake = dir.path().join("lake-strict");
    let o = run_expect(
        &[
            "ingest",
            s(&strict),
            "--to",
            s(&lake),
            "--checkpoint-every",
            "100rows",
        ],
        EXIT_ERROR,
    );
    let err = stderr(&o);
    assert!(
        err.contains(":1150") && err.contains("longer than"),
        "{err}"
    );
    // Parquet files roll at every checkpoint: the 11 before it are visible.
    assert_eq!(
        common::visible_parquet_ids(&lake),
        (0..1100).collect::<Vec<i64>>()
    );
}
