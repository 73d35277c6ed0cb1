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
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use filesink::{Committable, FileFormat, WriterState};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// `id` (unique per record), `day` (5 distinct values), `payload`.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

/// Records `start..start+len` as one batch.
pub fn batch(start: i64, len: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..start + len).collect();
    let days: Vec<String> = ids
        .iter()
        .map(|i| format!("2026-11-{:02}", 25 + i % 5))
        .collect();
    let payloads: Vec<String> = ids
        .iter()
        .map(|i| format!("record-{i}-{}", "x".repeat((i % 7) as usize)))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(days)),
            Arc::new(StringArray::from(payloads)),
        ],
    )
    .unwrap()
}

/// A complete checkpoint as a job's checkpoint storage would hold it.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub id: u64,
    /// The source position: the next batch index to read.
    pub source_position: usize,
    pub state: WriterState,
    pub committables: Vec<Committable>,
}

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
pub mod job;

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
    let missing: Vec<i64> = (0..n).filter(|i| !counts.contains_key(i)).collect();
    let duplicated: Vec<(i64, usize)> = counts
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(i, c)| (*i, *c))
        .collect();
    let foreign: Vec<i64> = counts
        .keys()
        .copied()
        .filter(|i| *i < 0 || *i >= n)
        .collect();
    assert!(
        missing.is_empty() && duplicated.is_empty() && foreign.is_empty(),
        "not exactly once in {format:?} under {} ({} visible files): {} missing (first {:?}), {} duplicated (first {:?}), {} unexpected",
        base.display(),
        visible_files(base).len(),
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>(),
        duplicated.len(),
        duplicated.iter().take(5).collect::<Vec<_>>(),
        foreign.len()
    );
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

/// A job in miniature: a source of `total_batches` batches of `batch_len` records with ids,
/// the sink's writer, and the checkpoint storage. A crash is dropping the writer: the process
/// stops wherever it is, and every file it left stays on disk.
pub struct Job {
    pub sink: filesink::Sink,
    pub total_batches: usize,
    pub batch_len: i64,
    pub completed: Vec<Checkpoint>,
    pub writer: Option<filesink::SinkWriter>,
    pub position: usize,
    pub next_checkpoint: u64,
}

impl Job {
    pub fn new(sink: filesink::Sink, total_batches: usize, batch_len: i64) -> Self {
        Job {
            sink,
            total_batches,
            batch_len,
            completed: Vec::new(),
            writer: None,
            position: 0,
            next_checkpoint: 1,
        }
    }

    /// Starts or restarts from the latest complete checkpoint, as a restarted job does.
    pub async fn start(&mut self) -> filesink::Restored {
        let latest = self.completed.last().cloned();
        let restored = self
            .sink
            .restore_writer(
                latest.as_ref().map(|c| &c.state),
                latest.as_ref().map_or(&[][..], |c| &c.committables),
            )
            .await
            .expect("restore");
        self.position = latest.as_ref().map_or(0, |c| c.source_position);
        self.next_checkpoint = latest.as_ref().map_or(1, |c| c.id + 1);
        restored
    }

    pub fn writer(&mut self) -> &mut filesink::SinkWriter {
        self.writer.as_mut().expect("job not started")
    }

    /// Writes the next `n` batches of the source (fewer at its end).
    pub async fn write(&mut self, n: usize) {
        for _ in 0..n {
            if self.position >= self.total_batches {
                return;
            }
            let b = batch(self.position as i64 * self.batch_len, self.batch_len);
            self.writer().write(&b).await.expect("write");
            self.position += 1;
        }
    }

    /// Takes a checkpoint: the vote, then (if `complete`) storing it, then (if `commit`) the
    /// commit. Returns the checkpoint.
    pub async fn checkpoint(&mut self, complete: bool, commit: bool) -> Checkpoint {
        let id = self.next_checkpoint;
        self.next_checkpoint += 1;
        let prepared = self
            .writer()
            .prepare_commit(id)
            .await
            .expect("prepare_commit");
        let cp = Checkpoint {
            id,
            source_position: self.position,
            state: prepared.state,
            committables: prepared.committables,
        };
        if complete {
            self.completed.push(cp.clone());
            if commit {
                self.sink
                    .committer()
                    .commit_all(&cp.committables)
                    .await
                    .expect("commit");
            }
        }
        cp
    }

    /// The process dies: nothing more happens, files stay as they are.
    pub fn crash(&mut self) {
        self.writer = None;
    }

    /// Restarts and runs to the end of the source, checkpointing every `every` batches.
    pub async fn restart_and_finish(&mut self, every: usize) {
        let restored = self.start().await;
        self.writer = Some(restored.writer);
        while self.position < self.total_batches {
            self.write(every).await;
            self.checkpoint(true, true).await;
        }
        self.finish().await;
    }

    /// The end of the input: every open file rolls, and a last checkpoint commits it.
    pub async fn finish(&mut self) -> Checkpoint {
        self.writer().end_of_input().await.expect("end_of_input");
        self.checkpoint(true, true).await
    }
}
