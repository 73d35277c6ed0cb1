//! One rule for inputs without records and columns without values, whatever the output: an
//! empty input, blank lines on standard input or a CSV header alone finish with 0 records
//! (exit 0), and the job takes the columns of its first run that sees records; a column null
//! in every record of a job appending to a Delta table takes the table's type for it.

use std::fs;

mod common;

use common::cli::*;
use common::visible_parquet_ids;

fn outputs() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("parquet", vec![]),
        ("jsonl", vec!["--format", "jsonl"]),
        ("csv", vec!["--format", "csv"]),
        ("delta", vec!["--table", "delta"]),
    ]
}

#[test]
fn inputs_without_records_finish_with_nothing_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, extra) in outputs() {
        for (input, text) in [
            ("empty.jsonl", ""),
            ("blank.jsonl", "\n\n  \n"),
            ("header.csv", "id,a\n"),
        ] {
            let path = d.join(format!("{name}-{input}"));
            fs::write(&path, text).unwrap();
            let lake = d.join(format!("lake-{name}-{input}"));
            let mut args = vec!["ingest", s(&path), "--to", s(&lake), "--json"];
            args.extend(extra.iter().copied());
            let o = run_ok(&args);
            assert_eq!(json_of(&o)["records"], 0, "{name} {input}");
            // Standard input with the same bytes.
            let piped = d.join(format!("piped-{name}-{input}"));
            let mut args = vec!["ingest", "-", "--job", "p", "--to", s(&piped), "--json"];
            if input.ends_with(".csv") {
                args.extend(["--input-format", "csv"]);
            }
            args.extend(extra.iter().copied());
            let o = filesink_with_stdin(&args, &path);
            assert_eq!(o.status.code(), Some(0), "{name} {input}: {}", stderr(&o));
            // Records come: the job takes their columns.
            let more = match input.ends_with(".csv") {
                true => "1,x\n2,y\n",
                false => "{\"id\":1,\"a\":\"x\"}\n{\"id\":2,\"a\":\"y\"}\n",
            };
            fs::write(&path, format!("{text}{more}")).unwrap();
            let mut args = vec!["ingest", s(&path), "--to", s(&lake), "--json"];
            args.extend(extra.iter().copied());
            let o = run_ok(&args);
            assert_eq!(json_of(&o)["records"], 2, "{name} {input}: {}", stderr(&o));
            if name == "parquet" || name == "delta" {
                assert_eq!(visible_parquet_ids(&lake), vec![1, 2], "{name} {input}");
            }
        }
    }
}

#[test]
fn a_column_null_in_every_record_takes_the_tables_type() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lake = d.join("table");
    let first = d.join("first.jsonl");
    fs::write(&first, "{\"id\":1,\"a\":\"x\",\"n\":1.5}\n").unwrap();
    run_ok(&["ingest", s(&first), "--to", s(&lake), "--table", "delta"]);
    let nulls = d.join("nulls.jsonl");
    fs::write(
        &nulls,
        "{\"id\":2,\"a\":null,\"n\":null}\n{\"id\":3,\"n\":null}\n",
    )
    .unwrap();
    run_ok(&["ingest", s(&nulls), "--to", s(&lake), "--table", "delta"]);
    assert_eq!(visible_parquet_ids(&lake), vec![1, 2, 3]);
    // Compaction takes the files of both jobs as one table.
    let o = run_ok(&["compact", s(&lake), "--target-size", "1MiB", "--json"]);
    let report = &json_of(&o)["report"];
    assert_eq!(report["output_files"], 1, "{report}");
    assert_eq!(report["records"], 3, "{report}");
}
