//! Values are never silently dropped or retyped on the way into the lake: a JSON key given
//! twice is a bad record (arrow's decoder would keep the last value), and every type a job can
//! write reads back as that type, with the same values, in pyarrow, DuckDB and delta-rs, from
//! JSON lines and from CSV.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

mod common;

use common::cli::*;

const EXIT_ERROR: i32 = 1;

fn field(name: &str, data_type: Value) -> Value {
    json!({
        "name": name, "data_type": data_type, "nullable": true,
        "dict_id": 0, "dict_is_ordered": false, "metadata": {}
    })
}

fn bad_lines(path: &Path) -> Vec<(String, String)> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let source = v["source"].as_str().unwrap();
            let line = source.rsplit(':').next().unwrap().to_owned();
            (line, v["error"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// A key given twice, at the top or inside a struct, spelt alike or with an escape, is a
/// malformed record: the run stops naming its line, or the record goes to `--bad-records`
/// and every other record is kept.
#[test]
fn a_key_given_twice_is_a_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flat = d.join("flat.jsonl");
    fs::write(
        &flat,
        concat!(
            "{\"id\":1,\"a\":\"first\",\"a\":\"second\"}\n",
            "{\"id\":2,\"a\":\"ok\"}\n",
            "{\"id\":3,\"a\":\"y\",\"id\":30}\n",
            "{\"id\":4,\"a\":\"x\",\"\\u0061\":\"y\"}\n",
            "{\"id\":5,\"a\":\"fine\"}\n",
        ),
    )
    .unwrap();
    let nested = d.join("nested.jsonl");
    fs::write(
        &nested,
        concat!(
            "{\"id\":1,\"s\":{\"b\":1,\"c\":[1]}}\n",
            "{\"id\":2,\"s\":{\"b\":1,\"b\":2,\"c\":[]}}\n",
            "{\"id\":3,\"s\":{\"b\":3,\"c\":[2,3]}}\n",
        ),
    )
    .unwrap();
    for (input, bad, kept) in [
        (&flat, vec!["1", "3", "4"], vec![2, 5]),
        (&nested, vec!["2"], vec![1, 3]),
    ] {
        let lake = d.join(format!(
            "lake-{}",
            input.file_stem().unwrap().to_str().unwrap()
        ));
        let o = run_expect(&["ingest", s(input), "--to", s(&lake)], EXIT_ERROR);
        assert!(
            stderr(&o).contains(&format!(":{}", bad[0])) && stderr(&o).contains("twice"),
            "{}",
            stderr(&o)
        );
        assert_eq!(common::visible_parquet_ids(&lake), Vec::<i64>::new());

        let bad_file = d.join(format!(
            "bad-{}",
            input.file_name().unwrap().to_str().unwrap()
        ));
        run_ok(&[
            "ingest",
            s(input),
            "--to",
            s(&lake),
            "--bad-records",
            s(&bad_file),
        ]);
        let got = bad_lines(&bad_file);
        assert_eq!(
            got.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(),
            bad,
            "{got:?}"
        );
        assert!(got.iter().all(|(_, e)| e.contains("twice")), "{got:?}");
        assert_eq!(common::visible_parquet_ids(&lake), kept);
    }
}

/// The readers' Python (`./scripts/test` installs pyarrow, DuckDB and deltalake into
/// `target/delta-py`), or `None` outside CI.
fn python() -> Option<String> {
    match std::env::var("FILESINK_DELTA_PYTHON") {
        Ok(p) => Some(p),
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("CI must read the lakes back: FILESINK_DELTA_PYTHON is not set")
        }
        Err(_) => {
            eprintln!("\n*** READ-BACK NOT RUN: FILESINK_DELTA_PYTHON is not set ***\n");
            None
        }
    }
}

/// The lake read back by `tests/readers/read_back.py`; JSON lines and CSV (which carry no
/// types) with the types of `cols`, as a user of those files tells the readers.
fn read_back(python: &str, lake: &Path, kind: &str, cols: &[Col]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/readers/read_back.py");
    let mut command = Command::new(python);
    command.arg(script).arg(lake).arg(kind);
    if kind == "jsonl" || kind == "csv" {
        let mut types = vec![json!({"name": "id", "pyarrow": "int64", "duckdb": "BIGINT"})];
        types.extend(
            cols.iter()
                .map(|c| json!({"name": c.name, "pyarrow": c.pyarrow, "duckdb": c.duckdb})),
        );
        command.arg(serde_json::to_string(&types).unwrap());
    }
    let o = command.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// One column: its name, its arrow type in `--schema`, its value in the first record as
/// JSON, as CSV, and what each reader must say of it.
struct Col {
    name: &'static str,
    arrow: Value,
    json: &'static str,
    csv: &'static str,
    /// pyarrow's type, DuckDB's type (DuckDB has no decimal wider than 38 digits: it reads a
    /// wider one as DOUBLE), and the value as pyarrow casts it to text.
    pyarrow: &'static str,
    duckdb: &'static str,
    value: &'static str,
    delta: bool,
}

fn columns() -> Vec<Col> {
    let c = |name, arrow, json, csv, pyarrow, duckdb, value, delta| Col {
        name,
        arrow,
        json,
        csv,
        pyarrow,
        duckdb,
        value,
        delta,
    };
    vec![
        c(
            "b",
            json!("Boolean"),
            "true",
            "true",
            "bool",
            "BOOLEAN",
            "true",
            true,
        ),
        c(
            "i8",
            json!("Int8"),
            "-128",
            "-128",
            "int8",
            "TINYINT",
            "-128",
            true,
        ),
        c(
            "i16",
            json!("Int16"),
            "-32768",
            "-32768",
            "int16",
            "SMALLINT",
            "-32768",
            true,
        ),
        c(
            "i32",
            json!("Int32"),
            "-2147483648",
            "-2147483648",
            "int32",
            "INTEGER",
            "-2147483648",
            true,
        ),
        c(
            "i64",
            json!("Int64"),
            "-9223372036854775808",
            "-9223372036854775808",
            "int64",
            "BIGINT",
            "-9223372036854775808",
            true,
        ),
        c(
            "u8",
            json!("UInt8"),
            "255",
            "255",
            "uint8",
            "UTINYINT",
            "255",
            false,
        ),
        c(
            "u16",
            json!("UInt16"),
            "65535",
            "65535",
            "uint16",
            "USMALLINT",
            "65535",
            false,
        ),
        c(
            "u32",
            json!("UInt32"),
            "4294967295",
            "4294967295",
            "uint32",
            "UINTEGER",
            "4294967295",
            false,
        ),
        c(
            "u64",
            json!("UInt64"),
            "18446744073709551615",
            "18446744073709551615",
            "uint64",
            "UBIGINT",
            "18446744073709551615",
            false,
        ),
        c(
            "f32",
            json!("Float32"),
            "1.5",
            "1.5",
            "float",
            "FLOAT",
            "1.5",
            true,
        ),
        c(
            "f64",
            json!("Float64"),
            "-2.25",
            "-2.25",
            "double",
            "DOUBLE",
            "-2.25",
            true,
        ),
        c(
            "s",
            json!("Utf8"),
            "\"h\\u00e9llo\"",
            "héllo",
            "string",
            "VARCHAR",
            "héllo",
            true,
        ),
        c(
            "ls",
            json!("LargeUtf8"),
            "\"large\"",
            "large",
            "large_string",
            "VARCHAR",
            "large",
            false,
        ),
        c(
            "d",
            json!("Date32"),
            "\"2026-11-30\"",
            "2026-11-30",
            "date32[day]",
            "DATE",
            "2026-11-30",
            true,
        ),
        c(
            "ts_s",
            json!({"Timestamp": ["Second", null]}),
            "\"2026-11-30T13:05:00\"",
            "2026-11-30T13:05:00",
            "timestamp[ms]",
            "TIMESTAMP",
            "2026-11-30 13:05:00.000",
            false,
        ),
        c(
            "ts_ms",
            json!({"Timestamp": ["Millisecond", null]}),
            "\"2026-11-30T13:05:00.123\"",
            "2026-11-30T13:05:00.123",
            "timestamp[ms]",
            "TIMESTAMP",
            "2026-11-30 13:05:00.123",
            false,
        ),
        c(
            "ts_us",
            json!({"Timestamp": ["Microsecond", null]}),
            "\"2026-11-30T13:05:00.123456\"",
            "2026-11-30T13:05:00.123456",
            "timestamp[us]",
            "TIMESTAMP",
            "2026-11-30 13:05:00.123456",
            true,
        ),
        c(
            "ts_ns",
            json!({"Timestamp": ["Nanosecond", null]}),
            "\"2026-11-30T13:05:00.123456789\"",
            "2026-11-30T13:05:00.123456789",
            "timestamp[ns]",
            "TIMESTAMP_NS",
            "2026-11-30 13:05:00.123456789",
            false,
        ),
        c(
            "ts_tz",
            json!({"Timestamp": ["Microsecond", "+00:00"]}),
            "\"2026-11-30T13:05:00Z\"",
            "2026-11-30T13:05:00Z",
            "timestamp[us, tz=+00:00]",
            "TIMESTAMP WITH TIME ZONE",
            "2026-11-30 13:05:00.000000+0000",
            true,
        ),
        c(
            "dec",
            json!({"Decimal128": [10, 2]}),
            "12.34",
            "12.34",
            "decimal128(10, 2)",
            "DECIMAL(10,2)",
            "12.34",
            true,
        ),
        c(
            "dec256",
            json!({"Decimal256": [40, 5]}),
            "123456789012345678901234567890.12345",
            "123456789012345678901234567890.12345",
            "decimal256(40, 5)",
            "DOUBLE",
            "123456789012345678901234567890.12345",
            false,
        ),
    ]
}

/// Every type a job can write, from JSON lines and from CSV, into plain Parquet, a Delta
/// table, JSON lines and CSV: each reader sees the column's own type (a timestamp as a
/// timestamp, never an integer; in JSON lines and CSV, which carry no types, the reader is
/// told them) and the value that went in; a record of nulls reads back as nulls.
#[test]
fn every_type_reads_back_as_its_type_in_every_reader() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for kind in ["parquet", "delta", "jsonl", "csv"] {
        let cols: Vec<Col> = columns()
            .into_iter()
            .filter(|c| kind == "parquet" || c.delta)
            .collect();
        let mut fields = vec![field("id", json!("Int64"))];
        fields.extend(cols.iter().map(|c| field(c.name, c.arrow.clone())));
        let schema = d.join(format!("schema-{kind}.json"));
        fs::write(
            &schema,
            serde_json::to_vec(&json!({ "fields": fields, "metadata": {} })).unwrap(),
        )
        .unwrap();
        let json_line = format!(
            "{{\"id\":1,{}}}\n{{\"id\":2}}\n",
            cols.iter()
                .map(|c| format!("\"{}\":{}", c.name, c.json))
                .collect::<Vec<_>>()
                .join(",")
        );
        let csv = format!(
            "id,{}\n1,{}\n2,{}\n",
            cols.iter().map(|c| c.name).collect::<Vec<_>>().join(","),
            cols.iter().map(|c| c.csv).collect::<Vec<_>>().join(","),
            vec![""; cols.len()].join(",")
        );
        for (input, text) in [("in.jsonl", json_line), ("in.csv", csv)] {
            let input = d.join(format!("{kind}-{input}"));
            fs::write(&input, text).unwrap();
            let lake = d.join(format!(
                "lake-{}",
                input.file_name().unwrap().to_str().unwrap()
            ));
            let mut args = vec![
                "ingest",
                s(&input),
                "--to",
                s(&lake),
                "--schema",
                s(&schema),
            ];
            match kind {
                "delta" => args.extend(["--table", "delta"]),
                "jsonl" | "csv" => args.extend(["--format", kind]),
                _ => {}
            }
            run_ok(&args);
            let got = read_back(&python, &lake, kind, &cols);
            let what = format!("{kind} from {}", input.display());
            for c in &cols {
                let py = &got["pyarrow"][c.name];
                assert!(
                    py["type"].as_str().unwrap().starts_with(c.pyarrow),
                    "{what}: pyarrow reads `{}` as {py}",
                    c.name
                );
                let duck = &got["duckdb"][c.name];
                assert_eq!(
                    duck["type"], c.duckdb,
                    "{what}: DuckDB reads `{}` as {duck}",
                    c.name
                );
                for reader in ["pyarrow", "duckdb", "delta-rs"] {
                    let Some(col) = got.get(reader).map(|r| &r[c.name]) else {
                        continue;
                    };
                    let values = col["values"].as_array().unwrap();
                    assert_eq!(values.len(), 2, "{what}: {reader} `{}`: {col}", c.name);
                    // delta-rs names the zone of a Delta `timestamp` `UTC` (the same instants).
                    let utc = |v: &Value| {
                        v.as_str()
                            .unwrap_or_default()
                            .replace("tz=UTC", "tz=+00:00")
                            .replace(".000000Z", ".000000+0000")
                    };
                    if reader == "duckdb" {
                        assert!(!values[0].is_null(), "{what}: {reader} `{}`", c.name);
                    } else {
                        assert_eq!(utc(&values[0]), c.value, "{what}: {reader} `{}`", c.name);
                        assert_eq!(
                            utc(&col["type"]),
                            utc(&py["type"]),
                            "{what}: {reader} `{}`",
                            c.name
                        );
                    }
                    assert!(values[1].is_null(), "{what}: {reader} `{}`: {col}", c.name);
                }
            }
        }
    }
}

/// CSV output tells an empty string from a null: a null is an empty field, an empty string
/// is `""`, and pyarrow and DuckDB, told so, read each back as it went in; a string with the
/// delimiter, a quote or a line end is quoted, its quotes doubled.
#[test]
fn csv_output_tells_an_empty_string_from_a_null() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.jsonl");
    fs::write(
        &input,
        concat!(
            "{\"id\":1,\"s\":\"\"}\n",
            "{\"id\":2}\n",
            "{\"id\":3,\"s\":\"a,b \\\"c\\\"\\nd\"}\n",
            "{\"id\":4,\"s\":\"x\"}\n",
        ),
    )
    .unwrap();
    let lake = d.join("lake");
    run_ok(&["ingest", s(&input), "--to", s(&lake), "--format", "csv"]);
    let files = common::visible_files(&lake);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = fs::read_to_string(&files[0]).unwrap();
    assert_eq!(text, "id,s\n1,\"\"\n2,\n3,\"a,b \"\"c\"\"\nd\"\n4,x\n");
    let Some(python) = python() else { return };
    let cols = [Col {
        name: "s",
        arrow: json!("Utf8"),
        json: "",
        csv: "",
        pyarrow: "string",
        duckdb: "VARCHAR",
        value: "",
        delta: false,
    }];
    let got = read_back(&python, &lake, "csv", &cols);
    for reader in ["pyarrow", "duckdb"] {
        let values = &got[reader]["s"]["values"];
        assert_eq!(
            values,
            &json!(["", null, "a,b \"c\"\nd", "x"]),
            "{reader}: {got}"
        );
    }
}
