//! What the checks run on: records with ids, a job in miniature with its own checkpoint store,
//! and readers that read the visible output back through the real Parquet, JSON and CSV
//! readers.

use std::collections::BTreeMap;
use std::io::{BufRead, Cursor};
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::Location;
use crate::format::FileFormat;
use crate::job::Coordinator;
use crate::protocol::{Committable, WriterState};
use crate::sink::{Restored, Sink, SinkWriter};

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
    .expect("the batch matches its schema")
}

/// The `id` column of one file's bytes, read with the format's real reader.
pub fn ids_in_bytes(bytes: Vec<u8>, format: &FileFormat) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut take = |batch: RecordBatch| {
        let col = batch.column_by_name("id").expect("an `id` column");
        let col = col
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("`id` is Int64");
        ids.extend(col.iter().map(|v| v.expect("no null ids")));
    };
    match format {
        FileFormat::Parquet(_) => {
            let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
                .expect("a Parquet file")
                .build()
                .expect("a Parquet reader");
            for batch in reader {
                take(batch.expect("a Parquet batch"));
            }
        }
        FileFormat::JsonLines => {
            for line in Cursor::new(bytes).lines() {
                let line = line.expect("UTF-8 lines");
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON line: {e}: {line}"));
                ids.push(v["id"].as_i64().expect("an integer `id`"));
            }
        }
        FileFormat::Csv(_) => {
            let format = arrow::csv::reader::Format::default().with_header(true);
            let (inferred, _) = format
                .infer_schema(Cursor::new(&bytes), None)
                .expect("a CSV file");
            let reader = arrow::csv::ReaderBuilder::new(Arc::new(inferred))
                .with_header(true)
                .build(Cursor::new(bytes))
                .expect("a CSV reader");
            for batch in reader {
                take(batch.expect("a CSV batch"));
            }
        }
    }
    ids
}

/// How often each id is visible at `location`, reading every visible file with the real
/// reader.
pub async fn id_counts(location: &dyn Location, format: &FileFormat) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for (_, bytes) in location.visible().await {
        for id in ids_in_bytes(bytes, format) {
            *counts.entry(id).or_insert(0) += 1;
        }
    }
    counts
}

/// Asserts that ids `0..n` are each visible exactly once at `location`, and no other id.
pub async fn assert_exactly_once(location: &dyn Location, format: &FileFormat, n: i64) {
    let counts = id_counts(location, format).await;
    if let Err(wrong) = exactly_once(&counts, 0..n) {
        panic!(
            "[{}] not exactly once in {format:?}: {wrong}",
            location.name()
        );
    }
}

/// The one check of exactly-once, which every suite's assertion makes: each id of
/// `expected` counted once in `counts` (how often each id is visible), and no other id.
/// `Err` says what is wrong: how many ids are missing, duplicated and unexpected, and the
/// first few of each.
pub fn exactly_once(
    counts: &BTreeMap<i64, usize>,
    expected: impl IntoIterator<Item = i64>,
) -> Result<(), String> {
    let expected: std::collections::BTreeSet<i64> = expected.into_iter().collect();
    let missing: Vec<i64> = expected
        .iter()
        .copied()
        .filter(|i| !counts.contains_key(i))
        .collect();
    let duplicated: Vec<(i64, usize)> = counts
        .iter()
        .filter(|(i, c)| **c > 1 && expected.contains(i))
        .map(|(i, c)| (*i, *c))
        .collect();
    let unexpected: Vec<i64> = counts
        .keys()
        .copied()
        .filter(|i| !expected.contains(i))
        .collect();
    if missing.is_empty() && duplicated.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    let first = |v: &[i64]| v.iter().take(5).copied().collect::<Vec<_>>();
    Err(format!(
        "{} missing (first {:?}), {} duplicated (first (id, times) {:?}), {} unexpected (first \
         {:?})",
        missing.len(),
        first(&missing),
        duplicated.len(),
        &duplicated[..duplicated.len().min(5)],
        unexpected.len(),
        first(&unexpected)
    ))
}

/// A complete checkpoint as a job's checkpoint storage would hold it.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The checkpoint id.
    pub id: u64,
    /// The source position: the next batch index to read.
    pub source_position: usize,
    /// The writer's state at the checkpoint.
    pub state: WriterState,
    /// The checkpoint's committables.
    pub committables: Vec<Committable>,
}

/// A job in miniature: a source of `total_batches` batches of `batch_len` records with ids,
/// the sink's writer, and the checkpoint storage. A crash is dropping the writer: the process
/// stops wherever it is, and every file it left stays where it is.
pub struct Job {
    /// The sink the job writes through.
    pub sink: Sink,
    /// Batches in the source.
    pub total_batches: usize,
    /// Records per batch.
    pub batch_len: i64,
    /// The complete checkpoints, oldest first.
    pub completed: Vec<Checkpoint>,
    /// The running writer; `None` after a crash.
    pub writer: Option<SinkWriter>,
    /// The next batch to read.
    pub position: usize,
    /// The id of the next checkpoint.
    pub next_checkpoint: u64,
}

impl Job {
    /// A job that has not started.
    pub fn new(sink: Sink, total_batches: usize, batch_len: i64) -> Self {
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
    pub async fn start(&mut self) -> Restored {
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

    /// The running writer.
    pub fn writer(&mut self) -> &mut SinkWriter {
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

    /// Restarts from the latest complete checkpoint and runs to the end of the source,
    /// checkpointing every `every` batches.
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

/// Runs `job` from its latest manifest over ids `offset..offset + total` in batches of 100 on
/// two writers (two parallel subtasks: even and odd batches), checkpointing every `every`
/// batches; stops after `stop_after` batches of this run (a crash) unless it reaches the end.
/// `None` if the job had finished already.
pub async fn run_two_writers(
    s: &Sink,
    job: &str,
    offset: i64,
    total: i64,
    every: i64,
    stop_after: Option<i64>,
) -> Option<Coordinator> {
    let mut c = Coordinator::open(s, job, 2).await.expect("open the job");
    if c.is_finished() {
        return None;
    }
    let mut next = c.source_position::<i64>().expect("position").unwrap_or(0);
    let mut written = 0;
    while next < total {
        let w = ((next / 100) % 2) as usize;
        c.writers()[w]
            .write(&batch(offset + next, 100))
            .await
            .expect("write");
        next += 100;
        written += 1;
        if stop_after == Some(written) {
            return Some(c);
        }
        if written % every == 0 {
            c.checkpoint(&next).await.expect("checkpoint");
        }
    }
    c.finish(&next).await.expect("finish");
    Some(c)
}
