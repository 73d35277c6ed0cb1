//! `filesink ingest`'s Parquet options (`--compression`, `--row-group-size`, `--statistics`,
//! `--dictionary`), checked in the footers of the files it commits, and refused when they do
//! not apply or do not parse.

use std::fs;
use std::path::{Path, PathBuf};

use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::{FileReader, SerializedFileReader};

mod common;

use common::cli::*;

const EXIT_USAGE: i32 = 2;
const RECORDS: i64 = 1000;

/// `RECORDS` JSON lines with an id, a day from a few and a user from a few (dictionary
/// friendly).
fn write_input(dir: &Path) -> PathBuf {
    let path = dir.join("events.jsonl");
    let lines: String = (0..RECORDS)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"day\":\"2026-12-0{}\",\"user\":\"user_{}\"}}\n",
                1 + i % 3,
                i % 7
            )
        })
        .collect();
    fs::write(&path, lines).unwrap();
    path
}

/// The visible Parquet files of `lake` (no partitions).
fn parquet_files(lake: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(lake)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            !n.starts_with('.') && !n.starts_with('_') && n.ends_with(".parquet")
        })
        .collect();
    files.sort();
    files
}

fn footer(path: &Path) -> ParquetMetaData {
    let reader = SerializedFileReader::new(fs::File::open(path).unwrap()).unwrap();
    reader.metadata().clone()
}

/// Every id in the files, sorted.
fn ids(files: &[PathBuf]) -> Vec<i64> {
    let mut ids: Vec<i64> = files
        .iter()
        .flat_map(|f| common::read_ids(f, &filesink::FileFormat::parquet()))
        .collect();
    ids.sort_unstable();
    ids
}

/// Ingests the input into a new lake with `extra` arguments; the lake and the JSON summary.
fn ingest(dir: &Path, name: &str, input: &Path, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let lake = dir.join(name);
    let mut args = vec!["ingest", s(input), "--to", s(&lake), "--json"];
    args.extend_from_slice(extra);
    let out = run_ok(&args);
    (lake, json_of(&out))
}

/// Arguments, the codec's name in the summary, and a check of the footer's codec.
type Case = (
    &'static [&'static str],
    &'static str,
    fn(Compression) -> bool,
);

#[test]
fn each_codec_lands_in_the_footer_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path());
    let cases: [Case; 7] = [
        (&[], "snappy", |c| c == Compression::SNAPPY),
        (&["--compression", "snappy"], "snappy", |c| {
            c == Compression::SNAPPY
        }),
        (&["--compression", "zstd"], "zstd=3", |c| {
            matches!(c, Compression::ZSTD(_))
        }),
        (&["--compression", "zstd=19"], "zstd=19", |c| {
            matches!(c, Compression::ZSTD(_))
        }),
        (&["--compression", "gzip=9"], "gzip=9", |c| {
            matches!(c, Compression::GZIP(_))
        }),
        (&["--compression", "lz4"], "lz4", |c| {
            c == Compression::LZ4_RAW
        }),
        (&["--compression", "none"], "none", |c| {
            c == Compression::UNCOMPRESSED
        }),
    ];
    for (i, (args, name, is_codec)) in cases.into_iter().enumerate() {
        let (lake, summary) = ingest(dir.path(), &format!("lake{i}"), &input, args);
        assert_eq!(summary["compression"], name, "{args:?}: {summary}");
        let ratio = summary["compression_ratio"].as_f64().unwrap();
        let expected =
            summary["input_bytes"].as_f64().unwrap() / summary["bytes"].as_f64().unwrap();
        assert!((ratio - expected).abs() < 1e-9 && ratio > 0.0, "{summary}");
        // Where the run spent its time, and the stage that limits it.
        let stage = |s: &str| summary["stage_seconds"][s].as_f64().unwrap();
        let spent = stage("input") + stage("write") + stage("checkpoint");
        assert!(
            spent > 0.0 && spent <= summary["elapsed_s"].as_f64().unwrap(),
            "{summary}"
        );
        assert!(
            ["input", "write", "checkpoint"].contains(&summary["limited_by"].as_str().unwrap()),
            "{summary}"
        );
        let files = parquet_files(&lake);
        assert!(!files.is_empty(), "{args:?}");
        for f in &files {
            for rg in footer(f).row_groups() {
                for col in rg.columns() {
                    assert!(
                        is_codec(col.compression()),
                        "{args:?}: column {} is {:?}",
                        col.column_path(),
                        col.compression()
                    );
                }
            }
        }
        assert_eq!(ids(&files), (0..RECORDS).collect::<Vec<_>>(), "{args:?}");
    }
    // A zstd file of repetitive records is smaller than an uncompressed one.
    let size = |lake: &str| -> u64 {
        parquet_files(&dir.path().join(lake))
            .iter()
            .map(|f| f.metadata().unwrap().len())
            .sum()
    };
    assert!(
        size("lake3") < size("lake6"),
        "zstd=19 is not smaller than none"
    );
}

#[test]
fn the_text_summary_names_the_codec_and_its_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path());
    let lake = dir.path().join("lake");
    let out = run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--compression",
        "gzip",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("compression gzip=6: ratio ",)
            && text.contains("(uncompressed input bytes read / bytes committed)"),
        "{text}"
    );
}

#[test]
fn row_groups_hold_at_most_the_given_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path());
    let (lake, _) = ingest(dir.path(), "lake", &input, &["--row-group-size", "300"]);
    let files = parquet_files(&lake);
    assert_eq!(files.len(), 1);
    let meta = footer(&files[0]);
    let rows: Vec<i64> = meta.row_groups().iter().map(|rg| rg.num_rows()).collect();
    assert_eq!(rows, [300, 300, 300, 100]);
    assert_eq!(ids(&files), (0..RECORDS).collect::<Vec<_>>());

    // Without the option, one row group holds the whole checkpoint.
    let (lake, _) = ingest(dir.path(), "default", &input, &[]);
    let meta = footer(&parquet_files(&lake)[0]);
    assert_eq!(meta.num_row_groups(), 1);
}

#[test]
fn statistics_and_dictionary_settings_show_in_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path());
    let column = |lake: &Path, name: &str| {
        let meta = footer(&parquet_files(lake)[0]);
        let rg = &meta.row_groups()[0];
        rg.columns()
            .iter()
            .find(|c| c.column_path().string() == name)
            .unwrap()
            .clone()
    };
    let dictionary = |c: &parquet::file::metadata::ColumnChunkMetaData| {
        c.dictionary_page_offset().is_some()
            || c.encodings()
                .any(|e| e == Encoding::RLE_DICTIONARY || e == Encoding::PLAIN_DICTIONARY)
    };

    let (none, _) = ingest(dir.path(), "none", &input, &["--statistics", "none"]);
    let c = column(&none, "id");
    assert!(c.statistics().is_none(), "{:?}", c.statistics());
    assert!(c.column_index_offset().is_none());

    let (chunk, _) = ingest(dir.path(), "chunk", &input, &["--statistics", "chunk"]);
    let c = column(&chunk, "id");
    let stats = c.statistics().expect("chunk statistics");
    assert_eq!(stats.min_bytes_opt(), Some(&0i64.to_le_bytes()[..]));
    assert_eq!(
        stats.max_bytes_opt(),
        Some(&(RECORDS - 1).to_le_bytes()[..])
    );
    assert!(c.column_index_offset().is_none(), "a page index with chunk");

    let (page, _) = ingest(dir.path(), "page", &input, &["--statistics", "page"]);
    let c = column(&page, "id");
    assert!(c.statistics().is_some());
    assert!(c.column_index_offset().is_some(), "no page index with page");

    let (on, _) = ingest(dir.path(), "dict_on", &input, &["--dictionary", "on"]);
    assert!(dictionary(&column(&on, "user")));
    let (off, _) = ingest(dir.path(), "dict_off", &input, &["--dictionary", "off"]);
    let c = column(&off, "user");
    assert!(!dictionary(&c), "{:?}", c.encodings().collect::<Vec<_>>());
    assert_eq!(ids(&parquet_files(&off)), (0..RECORDS).collect::<Vec<_>>());
}

#[test]
fn bad_values_and_parquet_options_on_row_formats_exit_2_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(dir.path());
    let lake = dir.path().join("lake");
    let cases: [(&[&str], &str); 13] = [
        (&["--compression", "brotli"], "unknown codec `brotli`"),
        (
            &["--compression", "zstd=0"],
            "zstd level must be a whole number from 1 to 22",
        ),
        (&["--compression", "zstd=23"], "from 1 to 22"),
        (
            &["--compression", "gzip=10"],
            "gzip level must be a whole number from 0 to 9",
        ),
        (&["--compression", "gzip=x"], "from 0 to 9"),
        (&["--compression", "snappy=2"], "snappy takes no level"),
        (&["--row-group-size", "0"], "at least 1"),
        (&["--row-group-size", "many"], "not a row count"),
        (&["--statistics", "full"], "full"),
        (&["--dictionary", "maybe"], "maybe"),
        (
            &["--compression", "zstd", "--format", "jsonl"],
            "--compression applies to Parquet output only, not to --format jsonl",
        ),
        (
            &["--compression", "none", "--format", "csv"],
            "--compression applies to Parquet output only, not to --format csv",
        ),
        (
            &["--format", "jsonl", "--row-group-size", "10"],
            "--row-group-size applies to Parquet output only",
        ),
    ];
    for (extra, message) in cases {
        let mut args = vec!["ingest", s(&input), "--to", s(&lake)];
        args.extend_from_slice(extra);
        let out = run_expect(&args, EXIT_USAGE);
        assert!(
            stderr(&out).contains(message),
            "{extra:?}: {}",
            stderr(&out)
        );
        assert!(!lake.exists(), "{extra:?} created the lake");
    }
    for extra in [["--statistics", "chunk"], ["--dictionary", "off"]] {
        let mut args = vec!["ingest", s(&input), "--to", s(&lake), "--format", "csv"];
        args.extend_from_slice(&extra);
        let out = run_expect(&args, EXIT_USAGE);
        assert!(
            stderr(&out).contains("applies to Parquet output only"),
            "{}",
            stderr(&out)
        );
    }
    assert!(!lake.exists());
}
