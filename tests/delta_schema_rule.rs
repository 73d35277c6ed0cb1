//! One schema rule for appending to a Delta table, merging and compacting it: columns match by
//! name, a nullable column may be missing from a job, a job's non-nullable column fits a
//! nullable one, `UTC` is `+00:00`. Whatever an append is accepted with, compaction takes too.
//! And schema evolution: a job may add nullable columns to the table, on request.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

mod common;

use common::cli::*;

const EXIT_CONFLICT: i32 = 3;

fn field(name: &str, data_type: Value, nullable: bool) -> Value {
    json!({
        "name": name, "data_type": data_type, "nullable": nullable,
        "dict_id": 0, "dict_is_ordered": false, "metadata": {}
    })
}

fn schema_file(dir: &Path, name: &str, fields: Vec<Value>) -> std::path::PathBuf {
    let path = dir.join(name);
    fs::write(
        &path,
        serde_json::to_vec(&json!({ "fields": fields, "metadata": {} })).unwrap(),
    )
    .unwrap();
    path
}

/// The ids delta-rs reads from the table, sorted (`None` outside CI without the reader).
fn delta_ids(table: &Path) -> Option<Vec<i64>> {
    let python = std::env::var("FILESINK_DELTA_PYTHON").ok()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/delta/read_table.py");
    let o = Command::new(python)
        .arg(script)
        .arg(table)
        .arg("ids")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut ids: Vec<i64> = v["ids"]
        .as_array()
        .or_else(|| v.as_array())
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|i| i.as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    Some(ids)
}

#[test]
fn appends_the_table_accepts_are_compacted_together() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let table = d.join("table");
    let ts = |tz: &str| json!({"Timestamp": ["Microsecond", tz]});
    // The table: id, a, ts (UTC as an offset), all nullable.
    let base = schema_file(
        d,
        "base.json",
        vec![
            field("id", json!("Int64"), true),
            field("a", json!("Utf8"), true),
            field("ts", ts("+00:00"), true),
        ],
    );
    let input = |name: &str, text: &str| {
        let p = d.join(name);
        fs::write(&p, text).unwrap();
        p
    };
    let first = input(
        "first.jsonl",
        "{\"id\":1,\"a\":\"x\",\"ts\":\"2026-12-01T00:00:00Z\"}\n",
    );
    run_ok(&[
        "ingest",
        s(&first),
        "--to",
        s(&table),
        "--table",
        "delta",
        "--schema",
        s(&base),
    ]);
    let cases = [
        // Columns in another order.
        (
            "reordered",
            vec![
                field("ts", ts("+00:00"), true),
                field("a", json!("Utf8"), true),
                field("id", json!("Int64"), true),
            ],
            "{\"id\":2,\"a\":\"y\",\"ts\":\"2026-12-02T00:00:00Z\"}\n",
        ),
        // A nullable column missing.
        (
            "missing",
            vec![
                field("id", json!("Int64"), true),
                field("a", json!("Utf8"), true),
            ],
            "{\"id\":3,\"a\":\"z\"}\n",
        ),
        // Non-nullable in the job, nullable in the table.
        (
            "required",
            vec![
                field("id", json!("Int64"), false),
                field("a", json!("Utf8"), false),
                field("ts", ts("+00:00"), false),
            ],
            "{\"id\":4,\"a\":\"w\",\"ts\":\"2026-12-04T00:00:00Z\"}\n",
        ),
        // Another spelling of UTC.
        (
            "utc",
            vec![
                field("id", json!("Int64"), true),
                field("a", json!("Utf8"), true),
                field("ts", ts("UTC"), true),
            ],
            "{\"id\":5,\"a\":\"v\",\"ts\":\"2026-12-05T00:00:00Z\"}\n",
        ),
    ];
    for (name, fields, text) in cases {
        let schema = schema_file(d, &format!("{name}.json"), fields);
        let path = input(&format!("{name}.jsonl"), text);
        run_ok(&[
            "ingest",
            s(&path),
            "--to",
            s(&table),
            "--table",
            "delta",
            "--schema",
            s(&schema),
        ]);
    }
    let o = run_ok(&["compact", s(&table), "--target-size", "1MiB", "--json"]);
    let report = &json_of(&o)["report"];
    assert_eq!(report["output_files"], 1, "{report}");
    assert_eq!(report["records"], 5, "{report}");
    if let Some(ids) = delta_ids(&table) {
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    }
}

#[test]
fn schema_evolution_adds_nullable_columns_on_request_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let table = d.join("table");
    let first = d.join("first.jsonl");
    fs::write(&first, "{\"id\":1,\"a\":\"x\",\"day\":\"2026-12-01\"}\n").unwrap();
    let args = |input: &Path, extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = ["ingest", s(input), "--to", s(&table), "--table", "delta"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        a.extend(["--partition-by".into(), "day".into()]);
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let run = |a: &[String], code: i32| {
        run_expect(&a.iter().map(String::as_str).collect::<Vec<_>>(), code)
    };
    run(&args(&first, &[]), 0);
    let log = || -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(table.join("_delta_log"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".json"))
            .collect();
        v.sort();
        v
    };
    let before = log();
    let wider = d.join("wider.jsonl");
    fs::write(
        &wider,
        "{\"id\":2,\"a\":\"y\",\"b\":7,\"c\":{\"k\":\"v\"},\"day\":\"2026-12-02\"}\n",
    )
    .unwrap();
    // Without the option: refused, nothing written.
    let o = run(&args(&wider, &[]), EXIT_CONFLICT);
    assert!(
        stderr(&o).contains("`b`") || stderr(&o).contains("`c`"),
        "{}",
        stderr(&o)
    );
    assert_eq!(log(), before);
    // With it: one entry adds both columns with the job's first files.
    run(&args(&wider, &["--schema-evolution", "add-columns"]), 0);
    let after = log();
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    let entry = fs::read_to_string(table.join("_delta_log").join(after.last().unwrap())).unwrap();
    let metadata: Vec<Value> = entry
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|v| v.get("metaData").cloned())
        .collect();
    assert_eq!(metadata.len(), 1, "{entry}");
    let schema: Value =
        serde_json::from_str(metadata[0]["schemaString"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["id", "a", "b", "c", "day"], "{schema}");
    assert!(schema["fields"].as_array().unwrap()[2]["nullable"] == true);
    // A job of the old columns goes on; compaction merges old and new files.
    let third = d.join("third.jsonl");
    fs::write(&third, "{\"id\":3,\"a\":\"z\",\"day\":\"2026-12-02\"}\n").unwrap();
    run(&args(&third, &[]), 0);
    run_ok(&["compact", s(&table), "--target-size", "1MiB"]);
    if let Some(ids) = delta_ids(&table) {
        assert_eq!(ids, vec![1, 2, 3]);
    }
}
