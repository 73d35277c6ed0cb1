//! Shared test harness: a deterministic source of records with ids, a checkpoint store that
//! plays the job's checkpoint storage, and readers that read the visible output back through
//! the real Parquet, JSON and CSV readers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray};

use arrow::record_batch::RecordBatch;
use filesink::FileFormat;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

#[allow(unused_imports)]
pub use filesink::conformance::harness::{batch, schema, Checkpoint, Job};

/// Every visible (non-hidden) data file under `base`, recursively, sorted.
pub fn visible_files(base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if name.starts_with('.') || name.starts_with('_') {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// Every hidden part file (`.*.inprogress.*`) under `base`.
pub fn hidden_files(base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else if name.starts_with('.') && name.contains(".inprogress.") {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// Reads the `id` column of every visible file with the format's real reader, and returns
/// how many times each id is visible.
pub fn visible_id_counts(base: &Path, format: &FileFormat) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for path in visible_files(base) {
        for id in read_ids(&path, format) {
            *counts.entry(id).or_insert(0) += 1;
        }
    }
    counts
}

pub mod backend;
pub mod cli;
pub mod delta;
pub mod delta_py;
pub mod job;
pub mod kafka;

/// The `id` column of one file's bytes, read with the format's real reader.
pub fn ids_in_bytes(bytes: Vec<u8>, format: &FileFormat) -> Vec<i64> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, bytes).unwrap();
    read_ids(&path, format)
}

pub fn read_ids(path: &Path, format: &FileFormat) -> Vec<i64> {
    let mut ids = Vec::new();
    match format {
        FileFormat::Parquet(_) => {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let col = batch.column_by_name("id").unwrap();
                let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
                ids.extend(col.iter().map(|v| v.unwrap()));
            }
        }
        FileFormat::JsonLines => {
            for line in BufReader::new(File::open(path).unwrap()).lines() {
                let v: serde_json::Value = serde_json::from_str(&line.unwrap())
                    .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
                ids.push(v["id"].as_i64().unwrap());
            }
        }
        FileFormat::Csv(_) => {
            let file = File::open(path).unwrap();
            let format = arrow::csv::reader::Format::default().with_header(true);
            let (inferred, _) = format.infer_schema(&file, None).unwrap();
            let file = File::open(path).unwrap();
            let reader = arrow::csv::ReaderBuilder::new(Arc::new(inferred))
                .with_header(true)
                .build(file)
                .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let col = batch.column_by_name("id").unwrap();
                let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
                ids.extend(col.iter().map(|v| v.unwrap()));
            }
        }
        other => panic!("no reader for {other:?}"),
    }
    ids
}

/// Asserts that ids `0..n` are each visible exactly once, with a readable message otherwise.
pub fn assert_exactly_once(base: &Path, format: &FileFormat, n: i64) {
    let counts = visible_id_counts(base, format);
    if let Err(wrong) = filesink::conformance::harness::exactly_once(&counts, 0..n) {
        panic!(
            "not exactly once in {format:?} under {} ({} visible files): {wrong}",
            base.display(),
            visible_files(base).len()
        );
    }
}

pub fn formats() -> Vec<FileFormat> {
    vec![
        FileFormat::parquet(),
        FileFormat::json_lines(),
        FileFormat::csv(),
    ]
}

pub fn column_strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let col = batch.column_by_name(name).unwrap();
    let col = col.as_any().downcast_ref::<StringArray>().unwrap();
    (0..col.len())
        .map(|i| col.is_valid(i).then(|| col.value(i).to_string()))
        .collect()
}

/// Every id in the visible Parquet files under `lake`, sorted (none if there is no lake).
pub fn visible_parquet_ids(lake: &Path) -> Vec<i64> {
    if !lake.exists() {
        return Vec::new();
    }
    let mut out: Vec<i64> = visible_files(lake)
        .iter()
        .flat_map(|p| read_ids(p, &FileFormat::parquet()))
        .collect();
    out.sort_unstable();
    out
}

/// Every path under `dir` with its length and time of last change: two listings are equal
/// only if nothing under `dir` was created, removed or written.
pub fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            }
            out.insert(e.path(), (m.len(), m.modified().unwrap()));
        }
    }
    out
}

/// A live run of `job` in the local lake `lake` that holds `input`, as its process holds it
/// before reading: the job's lock, and the input taken in the lake's ledger. The run lives
/// until the lease is released.
pub async fn live_run_holding(
    lake: &Path,
    job: &str,
    input: &Path,
) -> Box<dyn filesink::storage::JobLease> {
    use filesink::ingest::{ledger, Input};
    use filesink::storage::{LeaseOptions, LocalStorage, Storage};
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(lake).unwrap());
    let lease = storage
        .acquire_job(job, &LeaseOptions::default())
        .await
        .unwrap();
    let settle = ledger::Settle {
        lease: LeaseOptions::default(),
        location: lake.display().to_string(),
        single_writer: false,
    };
    let input = Input::file(input).unwrap();
    ledger::take(&storage, job, &[ledger::Claim::of_input(&input)], &settle)
        .await
        .unwrap();
    lease
}
