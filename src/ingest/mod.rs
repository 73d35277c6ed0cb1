//! Ingestion: JSON lines or CSV into a lake, exactly once, resumable after a crash. The
//! inputs are files ([`Input::file`]) or streams: standard input ([`Input::stdin`]) or any
//! reader ([`Input::reader`]), read once and checked as a resumed run skips what it read.
//! Any of them may be compressed with gzip or zstd ([`InputCompression`]); positions then
//! count decompressed bytes.
//!
//! [`Ingest`] is the pipeline, in three stages:
//!
//! ```text
//!  reader thread        decoding threads (N)     writing loop          writer subtasks (N)
//!  Source::next_raw ─▶  Decoder::decode ─┐ in    Coordinator::     ─▶ queue ─▶ encode, roll
//!  frame records,   ─▶  decode, check,  ─┼─────▶  write_queued       ─▶ queue ─▶ (by bucket)
//!  position, CRC    ─▶  split by bucket ─┘ order checkpoint when due
//! ```
//!
//! The reader thread ([`Source`]) frames the inputs into chunks of whole records, each tagged
//! with the position after it; it hands them round-robin to `N` decoding threads
//! ([`Decoder`], `N` = [`Ingest::parallelism`]), and the writing loop takes the decoded chunks
//! back in the same round, so in input order whatever order the decoders finish in. Plain
//! files of JSON lines on a time schedule have no reader thread: each decoding thread reads
//! its own byte ranges of them, in the same round ([`Ranges`]), and hands the position on
//! from range to range, so that every chunk carries the same exact position a reader thread
//! would have given it (a schedule by record counts cuts chunks at record numbers, which a
//! range cannot know). With
//! partition columns the decoding threads also split each chunk by bucket, with the sink's own
//! assigner ([`Source::with_assigner`]), so that the one writing loop only hands the buckets
//! on. The loop hands each chunk to the [`Coordinator`], which queues each writer subtask its
//! share and returns without waiting for the writes: a writer that has much to encode (every
//! file of its buckets reaching a round at once) holds back only its own queue, and the
//! decoding threads go on meanwhile. On the checkpoint schedule ([`CheckpointEvery`]) the
//! loop checkpoints with the position of the last chunk handed over ([`SourcePosition`],
//! stored in the checkpoint's manifest): a checkpoint cuts the input at one position however many chunks are in flight
//! behind it, and those are read again by a resumed run. Before it votes, a checkpoint waits
//! for every queued write: the files it makes pending hold every record before its position,
//! and none after it. Every queue between the stages is bounded (one chunk per decoder each
//! way, two shares per writer), so a slow stage holds the others back and memory stays within
//! the budget ([`Ingest::memory_bytes_max`]).
//!
//! A run that is killed at any moment and started again with the same inputs restores from
//! the last complete checkpoint (the coordinator removes what came after it) and reads on
//! from its position, so every record is written once. An input that changed under the job
//! is refused ([`Error::InputChanged`]); an input that only grew is read on, unless what came
//! continues a last line that a run read without its line end (refused too: that record was
//! written as it was). A job that has taken no record yet (none written, none set aside) is
//! bound by nothing it read: it reads all its inputs from their start, and an input that
//! changed is not refused.
//!
//! With a time interval, a checkpoint is due once the interval has passed with records not
//! yet checkpointed, whether or not the next chunk has come: a timer wakes the loop, so
//! records that trickle in become visible within about one interval plus the commit.
//!
//! The schema is given ([`Ingest::schema`]) or inferred from the first records of the first
//! input that has any ([`infer_schema`]); JSON values are typed by the rule of
//! [`json_types`]. A malformed record stops the run, naming its line, unless bad records go to
//! a file ([`Ingest::bad_records`], which describes its lines).
//!
//! A run tells an [`Observer`] what an operator should know (a resumed job, an input that
//! grew), its progress, each checkpoint, and at which [`Step`] it failed; `filesink ingest`
//! draws its progress bar from it.
//!
//! # Example: exactly once across a crash
//!
//! A first run stops once it has written 250 of 1000 records (at 300: chunks end where
//! checkpoints fall), the way a killed process would: what it wrote after its last checkpoint
//! stays hidden. The second run resumes and completes; reading
//! the lake back finds every record once.
//!
//! ```
//! use arrow::array::AsArray;
//! use arrow::datatypes::Int64Type;
//! use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input};
//! use filesink::FileFormat;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> filesink::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let input = dir.path().join("events.jsonl");
//! let lines: String = (0..1000)
//!     .map(|i| format!("{{\"id\":{i},\"day\":\"2026-12-0{}\"}}\n", 1 + i % 3))
//!     .collect();
//! std::fs::write(&input, lines).unwrap();
//! let lake = dir.path().join("lake");
//!
//! let ingest = || -> filesink::Result<Ingest> {
//!     Ok(Ingest::new([Input::file(&input)?])
//!         .to_local(&lake)
//!         .format(FileFormat::parquet())
//!         .partition_by(["day"])
//!         .checkpoint_every(CheckpointEvery::Rows(100)))
//! };
//! // The simulated crash: the records after the 200th are written but never checkpointed.
//! let first = ingest()?.stop_after_records(250).run().await?;
//! assert_eq!(first.status, IngestStatus::Stopped);
//! // The rerun restores checkpoint "200 records", removes the rest, and reads on.
//! let second = ingest()?.run().await?;
//! assert_eq!(second.status, IngestStatus::Finished);
//! assert_eq!(second.records_total, 1000);
//!
//! // Read the lake back: every id exactly once.
//! let mut ids = Vec::new();
//! for day in ["2026-12-01", "2026-12-02", "2026-12-03"] {
//!     for f in std::fs::read_dir(lake.join(format!("day={day}"))).unwrap() {
//!         let file = std::fs::File::open(f.unwrap().path()).unwrap();
//!         let reader =
//!             parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024)?;
//!         for batch in reader {
//!             let batch = batch?;
//!             let col = batch.column_by_name("id").unwrap().as_primitive::<Int64Type>();
//!             ids.extend(col.values().iter().copied());
//!         }
//!     }
//! }
//! ids.sort();
//! assert_eq!(ids, (0..1000).collect::<Vec<i64>>());
//! # Ok(())
//! # }
//! ```

mod bad_records;
mod compaction;
mod flat_json;
pub mod json_types;
pub mod ledger;
mod rules;
pub mod source;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::Schema;
use tracing::Instrument;

use crate::bucket::{time_zone_name, HivePartitioner, TimePartitioning};
use crate::error::{Error, Result};
use crate::format::FileFormat;
use crate::job::manifest;
use crate::job::{CheckpointReport, Coordinator, Ownership};
use crate::sink::{RollingPolicy, Sink};
use crate::storage::{LeaseOptions, LocalStorage, Storage};
use crate::table::delta::DeltaOptions;
use bad_records::BadRecords;
pub use compaction::CompactionSummary;
pub use json_types::{check_schema, StrictJson};
pub use rules::{check_bad_records_path, check_distinct, default_job_name, describe_schema};
use rules::{
    check_inputs_outside_lake, check_not_inside_a_sink, check_output_columns,
    check_partition_columns, check_same_job, infer_from_inputs, legacy_read, partition_check,
};
pub use source::{
    check_csv_schema, check_read, infer_schema, BadRecord, Chunk, Cursor, Decoder, Input,
    InputCompression, InputFormat, Lane, LaneNext, Prefix, Ranges, RawChunk, RowCheck, Source,
    SourcePosition, StdinRecords, TimePartitionBy,
};

/// Most records decoded and written as one batch, while the writers hold few files.
pub const CHUNK_RECORDS_MAX: usize = 8192;
/// How many times [`CHUNK_RECORDS_MAX`] records (and [`source::CHUNK_BYTES_MAX`] bytes) a
/// chunk of a file may grow to while the writers hold many open files ([`chunk_scale`]).
const CHUNK_SCALE_MAX: usize = 3;
/// Rows per open file a chunk is sized for, up to [`CHUNK_SCALE_MAX`].
const CHUNK_ROWS_PER_FILE: usize = 32;
/// Chunks that wait, per decoding thread, for it (framed) and for the writing loop
/// (decoded): with the one it decodes, the one the reader frames and the one the loop hands
/// on, at most `3 × decoders + 2` chunks are in flight (each counted twice, framed and
/// decoded); with several writers, also the shares each writer's queue holds
/// (`Coordinator::write_queued`) and the one it writes, each at most a whole decoded chunk.
const CHUNKS_QUEUED: usize = 1;
/// Longest a chunk of standard input waits for more records after its first (shorter with a
/// shorter checkpoint interval).
const STDIN_LINGER_MAX: Duration = Duration::from_millis(100);

/// How often an [`Ingest`] checkpoints (makes the output visible and records the input
/// position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointEvery {
    /// After this many records.
    Rows(u64),
    /// After this much time. Records become visible within about one interval plus the
    /// commit, however slowly they arrive.
    Interval(Duration),
}

impl Default for CheckpointEvery {
    fn default() -> Self {
        CheckpointEvery::Rows(Ingest::DEFAULT_CHECKPOINT_ROWS)
    }
}

/// What a running [`Ingest`] tells its caller: notes for an operator and progress. Every
/// method has an empty default; `()` observes nothing.
pub trait Observer: Send {
    /// Something an operator should know: a resumed job, pending files committed on restore,
    /// an input that grew since the job finished, a position written by an older build.
    fn note(&mut self, message: &str) {
        let _ = message;
    }
    /// Reading starts at `position` (a new job's start, or the restored checkpoint's
    /// position).
    fn started(&mut self, inputs: &[Input], position: &SourcePosition) {
        let _ = (inputs, position);
    }
    /// Records up to `position` are handed to the writers (not yet checkpointed).
    fn advanced(&mut self, position: &SourcePosition) {
        let _ = position;
    }
    /// A checkpoint before the last completed.
    fn checkpointed(&mut self, report: &CheckpointReport, position: &SourcePosition) {
        let _ = (report, position);
    }
    /// The last checkpoint completed: the job is finished.
    fn finished(&mut self) {}
    /// The run stopped at [`Ingest::stop_after_records`].
    fn stopped(&mut self) {}
    /// The run failed at `step` with `error` (which the run returns).
    fn failed(&mut self, step: Step, error: &Error) {
        let _ = (step, error);
    }
    /// Where the run has spent its time so far (after every chunk, with
    /// [`Observer::advanced`]): the stage that limits it.
    fn stage_times(&mut self, times: &StageTimes) {
        let _ = times;
    }
}

/// Where the writing loop of an [`Ingest`] run spent its time. The loop is the middle of the
/// pipeline: while it waits for decoded records, reading or decoding limits the run; while it
/// writes, encoding (and the backend's writes) does; checkpoints take their own share (the
/// vote's flushes and fsyncs, the manifest, the commit). Bounded queues make the slowest stage
/// set the pace, so the largest share names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Waiting for decoded records.
    pub input: Duration,
    /// Writing records through the writers.
    pub write: Duration,
    /// Checkpoints.
    pub checkpoint: Duration,
}

/// A stage of the pipeline, as [`StageTimes::limiting`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading and decoding the inputs.
    Input,
    /// Encoding and writing the records.
    Write,
    /// Checkpoints.
    Checkpoint,
}

impl Stage {
    /// `input (read, decode)`, `write (encode)` or `checkpoints`.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Input => "input (read, decode)",
            Stage::Write => "write (encode)",
            Stage::Checkpoint => "checkpoints",
        }
    }
}

impl StageTimes {
    /// The stage the run spent the most time on, if any time was spent.
    pub fn limiting(&self) -> Option<Stage> {
        let stages = [
            (self.input, Stage::Input),
            (self.write, Stage::Write),
            (self.checkpoint, Stage::Checkpoint),
        ];
        stages
            .iter()
            .filter(|(d, _)| !d.is_zero())
            .max_by_key(|(d, _)| *d)
            .map(|(_, s)| *s)
    }

    /// Each stage's share of the time, in percent (input, write, checkpoint).
    pub fn shares(&self) -> (f64, f64, f64) {
        let total = (self.input + self.write + self.checkpoint).as_secs_f64();
        if total == 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let pct = |d: Duration| 100.0 * d.as_secs_f64() / total;
        (pct(self.input), pct(self.write), pct(self.checkpoint))
    }

    /// `limited by write (encode): input 20%, write 71%, checkpoints 9%`.
    pub fn describe(&self) -> String {
        let Some(limiting) = self.limiting() else {
            return String::new();
        };
        let (i, w, c) = self.shares();
        format!(
            "limited by {}: input {i:.0}%, write {w:.0}%, checkpoints {c:.0}%",
            limiting.describe()
        )
    }
}

impl Observer for () {}

/// Where an [`Ingest`] run failed ([`Observer::failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Before the job is opened (settings, inputs, schema), or between the steps below.
    Prepare,
    /// Opening the job: taking its ownership and restoring its last checkpoint.
    Open,
    /// The first checkpoint of a new job (its start: schema, no records).
    FirstCheckpoint,
    /// Reading the inputs.
    Read,
    /// Writing the records before this position. The writes are queued: the failed one may be
    /// of any records before it not yet checkpointed.
    Write(Cursor),
    /// A checkpoint before the last.
    Checkpoint,
    /// The last checkpoint, which finishes the job.
    LastCheckpoint,
}

/// How an [`Ingest`] run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestStatus {
    /// Every input is read and the job's last checkpoint is complete.
    Finished,
    /// The job had finished before and no input grew since: nothing was done.
    AlreadyFinished,
    /// The run stopped at [`Ingest::stop_after_records`], as a crash would: what it wrote
    /// after its last checkpoint stays hidden, and the next run resumes from that checkpoint.
    Stopped,
}

/// What an [`Ingest`] run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestSummary {
    /// The job.
    pub job: String,
    /// How the run ended.
    pub status: IngestStatus,
    /// Whether the run resumed a job that had a checkpoint.
    pub resumed: bool,
    /// Records this run wrote.
    pub records: u64,
    /// Records the job has written in all, up to its last checkpoint.
    pub records_total: u64,
    /// Bad records this run set aside.
    pub bad_records: u64,
    /// Files this run's checkpoints made visible.
    pub files: usize,
    /// Bytes in those files.
    pub bytes: u64,
    /// Checkpoints this run completed.
    pub checkpoints: u64,
    /// Input bytes this run read.
    pub input_bytes: u64,
    /// The job's last complete checkpoint.
    pub last_checkpoint: u64,
    /// Where the run spent its time.
    pub stage_times: StageTimes,
    /// What the compaction rounds beside the run did ([`Ingest::compact_in_background`]).
    pub compaction: Option<CompactionSummary>,
}

/// Where an [`Ingest`] writes.
#[derive(Debug, Clone)]
enum Output {
    /// A local directory, created (with the sink) only once the job is known to be startable.
    Local(PathBuf),
    /// A storage the caller opened.
    Storage(Arc<dyn Storage>),
}

/// The ingestion pipeline: inputs, their format and schema, the lake and its layout, the
/// checkpoint schedule and the job. [`Ingest::run`] opens the job's [`Coordinator`], resumes
/// from its last checkpoint and drives it to the end of the inputs (see the
/// [module doc](self)).
#[derive(Debug)]
pub struct Ingest {
    inputs: Vec<Input>,
    input_format: Option<InputFormat>,
    output: Option<Output>,
    format: FileFormat,
    partition_by: Vec<String>,
    partition_by_time: Option<(String, String)>,
    time_zone: chrono::FixedOffset,
    schema: Option<Schema>,
    checkpoint_every: CheckpointEvery,
    part_size_bytes_max: Option<u64>,
    bad_records: Option<PathBuf>,
    job: Option<String>,
    lease_ttl: Duration,
    stop_after_records: Option<u64>,
    parallelism: Option<usize>,
    memory_bytes_max: u64,
    table: Option<DeltaOptions>,
    merge: Option<crate::sink::MergePolicy>,
    compact: Option<(crate::maintain::CompactOptions, Duration)>,
    row_visibility_delay: Option<Duration>,
}

/// Whether a job's schema is not decided yet: it has written no record, and its schema can
/// hold none (no columns, inferred from inputs without records; or only columns of type
/// `Null`, inferred by an earlier build from a CSV header alone). Its next run that sees
/// records takes their schema; until then nothing was written that the change could break.
fn undecided_schema(p: &SourcePosition) -> bool {
    p.records == 0
        && p.schema
            .fields()
            .iter()
            .all(|f| f.data_type() == &arrow::datatypes::DataType::Null)
}

/// Sets `p` to read every input from its start (`took_none` in `Ingest::run_inner`).
fn read_from_start(p: &mut SourcePosition) {
    p.read = vec![Prefix::START; p.read.len()];
    p.cursor = Cursor::START;
}

/// Moves `p` on to where the lake stands in each input another job read further
/// (`ledger::take`); a position without read prefixes (an older layout) is left alone.
fn take_over(p: &mut SourcePosition, inherited: &[Option<Prefix>]) {
    if p.read.len() != inherited.len() {
        return;
    }
    for (read, taken) in p.read.iter_mut().zip(inherited) {
        if let Some(t) = taken {
            if t.offset > read.offset {
                *read = *t;
            }
        }
    }
}

/// The source position of `job`'s latest manifest, if it has one.
async fn peek_position(storage: &dyn Storage, job: &str) -> Result<Option<SourcePosition>> {
    match manifest::latest_manifest(storage, job, None).await? {
        Some(m) if crate::maintain::compaction_round(&m).is_none() => {
            SourcePosition::from_json(job, &m.source_position).map(Some)
        }
        _ => Ok(None),
    }
}

/// The record schema of job `job` as its latest manifest says, if it has one.
async fn peek_schema(storage: &dyn Storage, job: &str) -> Result<Option<Schema>> {
    let Some(m) = manifest::latest_manifest(storage, job, None).await? else {
        return Ok(None);
    };
    if crate::maintain::compaction_round(&m).is_some() {
        return Err(Error::conflict(
            crate::protocol::job_dir(job),
            format!(
                "job `{job}` is a compaction job (`filesink compact`, an ingest's \
                 `<job>_compact`), not an ingest: choose another job name"
            ),
        ));
    }
    Ok(Some(
        SourcePosition::from_json(job, &m.source_position)?.schema,
    ))
}

/// A message down the pipeline: from the reader thread to a decoder (`Msg<RawChunk>`), and
/// from a decoder to the writing loop (`Msg<Chunk>`).
enum Msg<C> {
    /// Records: framed, or decoded.
    Chunk(C),
    /// Every input is read: the final position, what is read of each input, and the bytes
    /// read.
    End(Cursor, Vec<Prefix>, u64),
    /// Reading failed; nothing after the last chunk may be checkpointed.
    Failed(Error),
}

/// A decoding thread's step: decodes `msg`'s records (or passes its end or failure on) and
/// sends the outcome to the writing loop. False when the thread is done: it sent its last
/// message (an end or a failure), or the loop is gone.
fn decode_and_send(
    decoder: &Decoder,
    msg: Msg<RawChunk>,
    tx: &tokio::sync::mpsc::Sender<Msg<Chunk>>,
) -> bool {
    let msg = match msg {
        Msg::Chunk(raw) => match decoder.decode(raw) {
            Ok(chunk) => Msg::Chunk(chunk),
            Err(e) => Msg::Failed(e),
        },
        Msg::End(cursor, read, bytes) => Msg::End(cursor, read, bytes),
        Msg::Failed(e) => Msg::Failed(e),
    };
    let last = !matches!(msg, Msg::Chunk(_));
    tx.blocking_send(msg).is_ok() && !last
}

impl Ingest {
    /// Records between checkpoints by default.
    pub const DEFAULT_CHECKPOINT_ROWS: u64 = 100_000;

    /// A pipeline over `inputs`, read in order ([`Input::file`], [`Input::stdin`]); output
    /// Parquet, no partitioning, a checkpoint every [`Ingest::DEFAULT_CHECKPOINT_ROWS`]
    /// records, the schema inferred, the first malformed record an error. Name the lake with
    /// [`Ingest::to_local`] or [`Ingest::to_storage`].
    pub fn new(inputs: impl IntoIterator<Item = Input>) -> Ingest {
        Ingest {
            inputs: inputs.into_iter().collect(),
            input_format: None,
            output: None,
            format: FileFormat::parquet(),
            partition_by: Vec::new(),
            partition_by_time: None,
            time_zone: chrono::FixedOffset::east_opt(0).expect("UTC is an offset"),
            schema: None,
            checkpoint_every: CheckpointEvery::default(),
            part_size_bytes_max: None,
            bad_records: None,
            job: None,
            lease_ttl: LeaseOptions::DEFAULT_TTL,
            stop_after_records: None,
            parallelism: None,
            memory_bytes_max: crate::sink::SinkBuilder::DEFAULT_BUFFER_BYTES_MAX,
            table: None,
            merge: None,
            compact: None,
            row_visibility_delay: None,
        }
    }

    /// Commits every checkpoint into a Delta table at the output as well (`--table delta`):
    /// each checkpoint becomes one table version whose `txn` names the job and the checkpoint
    /// (`docs/design/delta.md`). The pipeline fills in the schema and the partitioning;
    /// `options` say whether this is the table's only writer and how messages name it. The
    /// output must be Parquet.
    pub fn delta_table(mut self, options: DeltaOptions) -> Ingest {
        self.table = Some(options);
        self
    }

    /// Compacts the Delta table while the run appends to it ([`Ingest::delta_table`] needed):
    /// a round of [`crate::maintain::compact()`] with `options` every `every` (the first one
    /// `every` after the table exists), and one more after the last checkpoint of a finished
    /// run. The rounds are a job of their own, `<job>_compact` unless `options` name one; a
    /// failed round does not fail the run ([`IngestSummary::compaction`] counts it, and the
    /// next round finishes what it left). See [`CompactionSummary`] and the module
    /// `compaction` of this one for the details.
    pub fn compact_in_background(
        mut self,
        options: crate::maintain::CompactOptions,
        every: Duration,
    ) -> Ingest {
        self.compact = Some((options, every));
        self
    }

    /// Holds back small Parquet files and merges them before they are committed (the
    /// pre-commit merge, [`crate::sink::SinkBuilder::merge_small_files`]): plain directories,
    /// on local disk and on object stores (on S3 only files below the part size); the run
    /// fails with [`crate::Error::Config`] with a Delta table or a row format.
    pub fn merge_small_files(mut self, policy: crate::sink::MergePolicy) -> Ingest {
        self.merge = Some(policy);
        self
    }

    /// Writes into the local directory `dir`, created with the sink when the job starts (not
    /// when an argument, the schema or a live run of the job refuses it first).
    pub fn to_local(mut self, dir: impl Into<PathBuf>) -> Ingest {
        self.output = Some(Output::Local(dir.into()));
        self
    }

    /// Writes into `storage` (an S3 prefix, or any [`Storage`]).
    pub fn to_storage(mut self, storage: Arc<dyn Storage>) -> Ingest {
        self.output = Some(Output::Storage(storage));
        self
    }

    /// The format of the inputs; by default the one their file extensions say
    /// ([`InputFormat::from_path`]; standard input: JSON lines).
    pub fn input_format(mut self, format: InputFormat) -> Ingest {
        self.input_format = Some(format);
        self
    }

    /// The format of the output files (default Parquet).
    pub fn format(mut self, format: FileFormat) -> Ingest {
        self.format = format;
        self
    }

    /// Partitions the output Hive-style by these columns (`day=2026-11-30/`), outermost first;
    /// the columns move from the data into the directory names. A job keeps its columns.
    pub fn partition_by<I: IntoIterator<Item = S>, S: Into<String>>(mut self, cols: I) -> Ingest {
        self.partition_by = cols.into_iter().map(Into::into).collect();
        self
    }

    /// Adds time directories from the time in `column` after the column directories:
    /// `pattern` is `/`-separated `name=strftime` components, each one Hive directory
    /// (`dt=%Y-%m-%d/hour=%H` gives `dt=2026-11-30/hour=13`), in the time zone of
    /// [`Ingest::time_zone`] (UTC by default). The column is a timestamp, a date, or strings
    /// holding RFC 3339 timestamps, and stays in the data; a record whose time is not one is a
    /// bad record of its line, a null time goes to `__HIVE_DEFAULT_PARTITION__` (see
    /// [`TimePartitioning`]). A job keeps its time partitioning.
    pub fn partition_by_time(
        mut self,
        column: impl Into<String>,
        pattern: impl Into<String>,
    ) -> Ingest {
        self.partition_by_time = Some((column.into(), pattern.into()));
        self
    }

    /// The time zone of the time directories ([`Ingest::partition_by_time`]): a fixed offset
    /// from UTC ([`crate::bucket::parse_time_zone`]), UTC by default.
    pub fn time_zone(mut self, offset: chrono::FixedOffset) -> Ingest {
        self.time_zone = offset;
        self
    }

    /// Decodes every record with `schema` instead of inferring one from the first records. A
    /// job keeps the schema it started with.
    pub fn schema(mut self, schema: Schema) -> Ingest {
        self.schema = Some(schema);
        self
    }

    /// The checkpoint schedule (default every [`Ingest::DEFAULT_CHECKPOINT_ROWS`] records).
    pub fn checkpoint_every(mut self, every: CheckpointEvery) -> Ingest {
        self.checkpoint_every = every;
        self
    }

    /// Rolls a part file once it reaches this size (default: [`RollingPolicy::default`]).
    pub fn part_size_bytes_max(mut self, bytes: u64) -> Ingest {
        self.part_size_bytes_max = Some(bytes);
        self
    }

    /// Row formats (JSON lines, CSV): keeps a part file open across checkpoints for up to
    /// `delay` (and while it stays below its size limit), so that a slow trickle of records
    /// makes fewer, larger files; a record is then visible at most `delay` plus one checkpoint
    /// interval after it is read. By default every part file rolls at every checkpoint, as
    /// Parquet files always do: a record is visible once the checkpoint after it commits.
    pub fn max_visibility_delay(mut self, delay: Duration) -> Ingest {
        self.row_visibility_delay = Some(delay);
        self
    }

    /// Appends malformed records to the file at `path` and goes on; by default the first
    /// malformed record stops the run. The file holds JSON lines
    /// `{"source":"file:line","line":…,"error":…,"input":…,"job":…,"sink_id":…,"seq":…}`
    /// (`input`: the input's canonical path; `seq`: the job's n-th bad record). Several jobs
    /// may share the file; nothing in it is ever removed, and a resumed job lists each of its
    /// bad records once. It must be outside the lake and not be one of the inputs.
    pub fn bad_records(mut self, path: impl Into<PathBuf>) -> Ingest {
        self.bad_records = Some(path.into());
        self
    }

    /// The job's name; by default derived from the inputs ([`default_job_name`]), so that a
    /// rerun over the same inputs resumes the same job. Standard input needs one.
    pub fn job(mut self, name: impl Into<String>) -> Ingest {
        self.job = Some(name.into());
        self
    }

    /// On an object store, how long a killed run keeps its job from a rerun (default
    /// [`LeaseOptions::DEFAULT_TTL`]). On local disk the job is free the moment the run dies.
    pub fn lease_ttl(mut self, ttl: Duration) -> Ingest {
        self.lease_ttl = ttl;
        self
    }

    /// Number of writer subtasks that encode at the same time, each on its own task from a
    /// queue of its own (see [`Coordinator::write`] for how records are shared among them),
    /// and of threads that
    /// decode the input records at the same time. Default: a new job gets
    /// as many as there are cores ([`std::thread::available_parallelism`]), a resumed job keeps
    /// the number it started with. Given explicitly, a resumed job must have been started with
    /// the same number (rescaling is refused).
    pub fn parallelism(mut self, writers: usize) -> Ingest {
        self.parallelism = Some(writers);
        self
    }

    /// What the pipeline may hold in memory (default
    /// [`crate::sink::SinkBuilder::DEFAULT_BUFFER_BYTES_MAX`]): the chunks in flight between
    /// reading, decoding and writing (at most `3 × parallelism + 2` chunks of about
    /// [`source::CHUNK_BYTES_MAX`] input bytes, counted twice: framed and decoded; with
    /// several writers another 3 decoded chunks per writer, queued or being written; up to three
    /// times larger while the writers hold many open files, as far as half the budget holds
    /// them) are set aside first, and the writers share the rest equally for their encoder
    /// and backend buffers (at least half of the budget).
    pub fn memory_bytes_max(mut self, bytes: u64) -> Ingest {
        self.memory_bytes_max = bytes;
        self
    }

    /// Stops once this run has written at least `records` records, before their checkpoint,
    /// the way a crash would ([`IngestStatus::Stopped`]): for tests and demonstrations of
    /// resuming.
    pub fn stop_after_records(mut self, records: u64) -> Ingest {
        self.stop_after_records = Some(records);
        self
    }

    /// Runs the pipeline to the end of the inputs (see the [module doc](self)), observing
    /// nothing.
    pub async fn run(self) -> Result<IngestSummary> {
        self.run_with(&mut ()).await
    }

    /// Runs the pipeline, telling `observer` what happens.
    pub async fn run_with(self, observer: &mut dyn Observer) -> Result<IngestSummary> {
        let mut step = Step::Prepare;
        let started = Instant::now();
        let result = self
            .run_inner(observer, &mut step)
            .instrument(tracing::info_span!("ingest"))
            .await;
        match &result {
            Ok(summary) => tracing::info!(
                job = %summary.job,
                status = ?summary.status,
                checkpoint = summary.last_checkpoint,
                records = summary.records,
                bad_records = summary.bad_records,
                files = summary.files,
                bytes = summary.bytes,
                checkpoints = summary.checkpoints,
                duration_ms = started.elapsed().as_millis() as u64,
                "ingest run done"
            ),
            Err(e) => {
                tracing::info!(step = ?step, error = %e, "ingest run failed");
                observer.failed(step, e);
            }
        }
        result
    }

    async fn run_inner(
        self,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<IngestSummary> {
        let Ingest {
            inputs,
            input_format,
            output,
            format,
            partition_by,
            partition_by_time,
            time_zone,
            schema: explicit,
            checkpoint_every,
            part_size_bytes_max,
            bad_records: bad_records_path,
            job,
            lease_ttl,
            stop_after_records,
            parallelism,
            memory_bytes_max,
            table,
            merge,
            compact,
            row_visibility_delay,
        } = self;
        // Seconds are written as milliseconds: a Parquet file cannot say "seconds".
        let explicit = explicit.map(json_types::exact_in_every_format);
        let output = output.ok_or_else(|| {
            Error::Config("an ingestion needs an output: `to_local` or `to_storage`".into())
        })?;
        if inputs.is_empty() {
            return Err(Error::Config(
                "an ingestion needs at least one input".into(),
            ));
        }
        let input_format = match input_format {
            Some(f) => f,
            None => InputFormat::of_inputs(&inputs)?,
        };
        let job = match job {
            Some(j) => j,
            None => default_job_name(&inputs).ok_or_else(|| {
                Error::Config(
                    "a job that reads standard input needs a name: a job name cannot be derived \
                     from it"
                        .into(),
                )
            })?,
        };
        manifest::validate_job_name(&job)?;
        let mut compact = match (compact, &table) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::Config(
                    "background compaction rewrites a Delta table's files; it needs a table \
                     (delta_table, --table delta)"
                        .into(),
                ))
            }
            (Some((_, every)), Some(_)) if every.is_zero() => {
                return Err(Error::Config(
                    "the interval of background compaction must be above 0".into(),
                ))
            }
            (Some((options, every)), Some(t)) => {
                let options = match options.job_name() {
                    None => options.job(compaction::compaction_job(&job)),
                    Some(c) if c == job => {
                        return Err(Error::Config(format!(
                            "the compaction job needs a name of its own, not the ingest's \
                             (`{job}`)"
                        )))
                    }
                    Some(_) => options,
                };
                Some((options.single_writer(t.single_writer), every))
            }
        };
        if let CheckpointEvery::Rows(0) = checkpoint_every {
            return Err(Error::Config(
                "the checkpoint interval must be at least 1 row".into(),
            ));
        }
        if lease_ttl < LeaseOptions::MIN_TTL {
            return Err(Error::Config(format!(
                "a lease must live at least {} s",
                LeaseOptions::MIN_TTL.as_secs()
            )));
        }
        let time = match &partition_by_time {
            Some((column, pattern)) => {
                Some(TimePartitioning::new(column.clone(), pattern)?.with_offset(time_zone))
            }
            None => None,
        };
        let time_by = time.as_ref().map(|t| TimePartitionBy {
            column: t.column().to_owned(),
            pattern: t.pattern().to_owned(),
            time_zone: time_zone_name(t.offset()),
        });
        let partitioner = match (partition_by.as_slice(), time.clone()) {
            ([], None) => None,
            ([], Some(t)) => Some(HivePartitioner::by_time(t)),
            (cols, t) => {
                let p = HivePartitioner::new(cols.to_vec())?;
                Some(match t {
                    Some(t) => p.with_time(t)?,
                    None => p,
                })
            }
        };
        let strict = bad_records_path.is_none();
        let bad_records_path = match &bad_records_path {
            Some(p) => {
                let lake_dir = match &output {
                    Output::Local(dir) => Some(dir.as_path()),
                    Output::Storage(_) => None,
                };
                Some(check_bad_records_path(p, lake_dir, &inputs)?)
            }
            None => None,
        };
        if let Output::Local(dir) = &output {
            if dir.exists() && !dir.is_dir() {
                return Err(Error::Config(format!(
                    "`{}` is a file, not a directory: a sink is a directory",
                    dir.display()
                )));
            }
            check_inputs_outside_lake(&inputs, dir)?;
        }
        match (&explicit, input_format) {
            (Some(schema), InputFormat::Jsonl) => {
                check_schema(schema).map_err(|e| Error::Config(format!("schema: {e}")))?
            }
            (Some(schema), InputFormat::Csv) => {
                check_csv_schema(schema).map_err(|e| Error::Config(format!("schema: {e}")))?
            }
            (None, _) => {}
        }
        // A run that overlaps a live run of its job is refused at once, before inference
        // reads any input (standard input may never end); opening the job below decides for
        // certain. A local directory that does not exist holds no job and is not created yet.
        let early: Option<Arc<dyn Storage>> = match &output {
            Output::Local(p) if !p.exists() => None,
            Output::Local(p) => Some(Arc::new(LocalStorage::new(p)?) as Arc<dyn Storage>),
            Output::Storage(s) => Some(s.clone()),
        };
        if let Some(storage) = &early {
            if let Some(holder) = storage.job_holder(&job).await? {
                return Err(Error::job_busy(
                    &job,
                    format!("{holder}; nothing was changed"),
                ));
            }
        }
        // Standard input takes what arrived by the first checkpoint's deadline for inference
        // (which counts from here: the records a stream's inference waited for are due then).
        let inference_began = Instant::now();
        let inference_deadline = match checkpoint_every {
            CheckpointEvery::Interval(d) => Some(inference_began + d),
            CheckpointEvery::Rows(_) => None,
        };
        // And waits for no more records than the first checkpoint does.
        let inference_records = match checkpoint_every {
            CheckpointEvery::Interval(_) => source::INFER_NULL_RECORDS,
            CheckpointEvery::Rows(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        // The schema a new job would take: the given one, else inferred from the inputs (the
        // first with records). A job that exists keeps its own: nothing to infer, and its
        // standard input is read from the start by the source, which compares what the job
        // read of it byte for byte (inference would take its first records first).
        let new_job = match &early {
            None => true,
            Some(s) => manifest::list_checkpoints(s.as_ref(), &job)
                .await?
                .is_empty(),
        };
        // So does a job that has not decided its schema yet ([`undecided_schema`]): it takes
        // the one inferred at its first run that sees records.
        let undecided = match &early {
            Some(s) if !new_job => peek_position(s.as_ref(), &job)
                .await?
                .is_some_and(|p| undecided_schema(&p)),
            _ => false,
        };
        let (mut fresh_schema, stdin_prefix) = match explicit.clone() {
            Some(s) => (Ok(s), None),
            None if !new_job && !undecided => (
                Err(Error::InvalidInput(format!(
                    "job `{job}` lost its checkpoints while this run opened it; run it again"
                ))),
                None,
            ),
            None => {
                let inputs = inputs.clone();
                let inferred = tokio::task::spawn_blocking(move || {
                    infer_from_inputs(
                        &inputs,
                        input_format,
                        strict,
                        inference_deadline,
                        inference_records,
                    )
                })
                .await
                .map_err(|e| Error::io("infer a schema from", "the inputs", e.into()))?;
                match inferred {
                    Ok((s, prefix)) => (Ok(json_types::exact_in_every_format(s)), prefix),
                    Err(e) => (Err(e), None),
                }
            }
        };
        match &fresh_schema {
            // A schema without columns comes from inputs without records: nothing to
            // partition.
            Ok(schema) if explicit.is_some() || !schema.fields().is_empty() => {
                check_partition_columns(&partition_by, time.as_ref(), schema)?;
                if new_job || undecided {
                    check_output_columns(&format, schema, &partition_by)?;
                }
            }
            Ok(_) | Err(_) => {}
        }
        let storage: Arc<dyn Storage> = match early {
            Some(s) => s,
            None => {
                // No lake, so no job to resume: the job is new, and an inference error stops
                // it now, before anything is created.
                if let Err(e) = fresh_schema {
                    return Err(e);
                }
                match &output {
                    Output::Local(p) => {
                        check_not_inside_a_sink(p)?;
                        Arc::new(LocalStorage::new(p)?) as Arc<dyn Storage>
                    }
                    Output::Storage(s) => s.clone(),
                }
            }
        };

        let writers = match parallelism {
            Some(0) => {
                return Err(Error::Config(
                    "parallelism must be at least 1 writer".into(),
                ))
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let decoders = writers;
        // Chunks grow with the open files only as far as half the budget holds them in flight
        // (see `CHUNKS_QUEUED`).
        let queued = match writers {
            1 => 0,
            n => n as u64 * (crate::job::SHARES_QUEUED as u64 + 1),
        };
        let per_scale = ((3 * decoders as u64 + 2) * 2 + queued) * source::CHUNK_BYTES_MAX as u64;
        let scale_max = (memory_bytes_max / 2 / per_scale).clamp(1, CHUNK_SCALE_MAX as u64);
        let in_flight = per_scale * scale_max;
        let for_writers = memory_bytes_max
            .saturating_sub(in_flight)
            .max(memory_bytes_max / 2);
        let mut builder = Sink::builder_shared(storage.clone())
            .format(format)
            .buffer_bytes_max((for_writers / writers as u64).max(1));
        if let Some(p) = &partitioner {
            builder = builder.bucket_assigner(p.clone());
        }
        // One visibility rule for every format: a part file rolls at every checkpoint, unless
        // row files may stay open up to an explicit delay.
        let mut rolling = match row_visibility_delay {
            Some(d) if d.is_zero() => {
                return Err(Error::Config(
                    "the longest visibility delay must be above 0".into(),
                ))
            }
            Some(d) => RollingPolicy::default()
                .with_rollover_interval(d)
                .with_inactivity_interval(d),
            None => RollingPolicy::on_checkpoint(),
        };
        if let Some(bytes) = part_size_bytes_max {
            rolling = rolling.with_part_size_bytes_max(bytes);
        }
        builder = builder.rolling_policy(rolling);
        if let Some(policy) = merge {
            if table.is_some() {
                return Err(Error::Config(
                    "a Delta table does not take a pre-commit merge: its small files are \
                     compacted after they are visible"
                        .into(),
                ));
            }
            builder = builder.merge_small_files(policy);
        }
        let sink = builder.build()?;
        // The ledger settles a Delta table job it takes inputs from as `commit` would.
        let settle = ledger::Settle {
            lease: LeaseOptions { ttl: lease_ttl },
            location: match (&table, &output) {
                (
                    Some(DeltaOptions {
                        location: Some(l), ..
                    }),
                    _,
                ) => l.clone(),
                (_, Output::Local(p)) => p.display().to_string(),
                (_, Output::Storage(s)) => s.place(),
            },
            single_writer: table.as_ref().is_some_and(|t| t.single_writer),
        };
        // A table's schema is the job's: the one it was started with when it resumes (read
        // from its latest manifest before the job is opened, and checked again after).
        let mut table_schema = None;
        let table = match table {
            Some(options) => {
                let schema = match peek_schema(storage.as_ref(), &job).await? {
                    Some(s) if !crate::table::delta::is_undecided(&s) => s,
                    // A new job, or one that has seen no record yet: this run's columns, a
                    // column null in all of them typed as the table has it.
                    _ => {
                        let s =
                            crate::table::delta::fill_null_columns(storage.as_ref(), fresh_schema?)
                                .await?;
                        fresh_schema = Ok(s.clone());
                        s
                    }
                };
                table_schema = Some(schema.clone());
                let location = match (&options.location, &output) {
                    (Some(l), _) => l.clone(),
                    (None, Output::Local(p)) => p.display().to_string(),
                    (None, Output::Storage(s)) => s.place(),
                };
                if let Some((c, _)) = &mut compact {
                    *c = c.clone().location(location.clone());
                }
                Some(
                    options
                        .schema(Arc::new(schema))
                        .partition_by(partition_by.clone())
                        .time_directories(time.iter().flat_map(|t| t.names().map(str::to_owned)))
                        .single_writer_lease(LeaseOptions { ttl: lease_ttl })
                        .location(location),
                )
            }
            None => None,
        };
        *step = Step::Open;
        let mut builder = Coordinator::builder(&sink, &job)
            .ownership(Ownership::Lease(LeaseOptions { ttl: lease_ttl }));
        if let Some(options) = table {
            builder = builder.delta_table(options);
        }
        let mut coordinator = match parallelism {
            Some(n) => builder.parallelism(n),
            None => builder.parallelism_of_new_job(writers),
        }
        .open()
        .await?;
        *step = Step::Prepare;
        // What the lake already took of each input, whichever job took it (`ledger`): taken
        // before anything is read, the job holding its own job meanwhile.
        let taken = ledger::take(&storage, &job, &inputs, &settle).await?;
        let inherited: Vec<Option<Prefix>> =
            taken.iter().map(|t| t.as_ref().map(|t| t.read)).collect();
        for (input, t) in inputs.iter().zip(&taken) {
            if let Some(ledger::Taken {
                read,
                from: Some(from),
            }) = t
            {
                if from != &job {
                    observer.note(&format!(
                        "`{}` was taken by job `{from}` up to byte {}: reading on from there",
                        input.display, read.offset
                    ));
                }
            }
        }

        let canonical: Vec<String> = inputs.iter().map(|i| i.canonical.clone()).collect();
        let mut restored = coordinator
            .source_position::<serde_json::Value>()?
            .map(|v| SourcePosition::from_json(&job, &v))
            .transpose()?;
        // A position of an older filesink, which recorded no read prefixes (filled in below).
        let legacy = restored.as_ref().is_some_and(|p| p.read.is_empty());
        // A finished job is read again for its files that grew, and for a stream (standard
        // input, a reader), which is read again to tell (below).
        let finished_before = coordinator.is_finished();
        let mut files_grew = false;
        if let Some(p) = &mut restored {
            check_same_job(
                &job,
                p,
                &canonical,
                input_format,
                &partition_by,
                time_by.as_ref(),
            )?;
            // A job that has taken no record is bound by nothing it read: the bytes before
            // its position held blank lines at most (or a CSV header), so it reads all its
            // inputs from their start, whatever they hold now: an input that is not what it
            // read is not refused, standard input is not compared, and a CSV header is read
            // (and checked against the columns this run takes) wherever it now is, also in a
            // file that held blank lines only and grew. Inputs are checked first, against
            // what was read, so that only a file that grew or changed is said to have (and
            // reopens a finished job).
            let took_none = p.records == 0 && p.bad_records == 0;
            // Inputs another job read on since this one's checkpoint start where it stopped.
            take_over(p, &inherited);
            if !p.read.is_empty() {
                // Input by input, so that a job that took no record knows which one changed
                // and checks the others too.
                let checked = {
                    let (job, inputs, read) = (job.clone(), inputs.clone(), p.read.clone());
                    let bound: Vec<bool> = inherited.iter().map(Option::is_some).collect();
                    tokio::task::spawn_blocking(move || {
                        let mut out = Vec::with_capacity(inputs.len());
                        for (i, r) in inputs.iter().zip(&read) {
                            let c =
                                check_read(&job, std::slice::from_ref(i), std::slice::from_ref(r));
                            let last = match &c {
                                Ok(_) => false,
                                Err(Error::InputChanged(_)) => !took_none || bound[out.len()],
                                Err(_) => true,
                            };
                            out.push(c);
                            if last {
                                break;
                            }
                        }
                        out
                    })
                    .await
                    .map_err(|e| Error::io("check", "the inputs", e.into()))?
                };
                let mut grew = Vec::with_capacity(checked.len());
                let mut changed = false;
                for (i, checked) in checked.into_iter().enumerate() {
                    match checked {
                        Ok(g) => grew.extend(g),
                        Err(Error::InputChanged(_)) if took_none && inherited[i].is_none() => {
                            observer.note(&format!(
                                "job `{job}` has taken no record yet, and `{}` is not what it \
                                 read: reading its inputs from their start",
                                inputs[i].display
                            ));
                            changed = true;
                            grew.push(false);
                        }
                        Err(e) => return Err(e),
                    }
                }
                if changed && finished_before {
                    coordinator.reopen();
                    files_grew = true;
                }
                if finished_before && grew.iter().any(|g| *g) {
                    let names: Vec<&str> = inputs
                        .iter()
                        .zip(&grew)
                        .filter(|(_, g)| **g)
                        .map(|(i, _)| i.display.as_str())
                        .collect();
                    // A job that took no record reads its inputs whole again (below).
                    let what = match took_none {
                        true => "reading its inputs from their start, as it took no record yet",
                        false => "ingesting what was added",
                    };
                    observer.note(&format!(
                        "job `{job}` finished at checkpoint {}, and since then `{}` grew: {what}",
                        coordinator.last_checkpoint(),
                        names.join("`, `")
                    ));
                    coordinator.reopen();
                    files_grew = true;
                }
            } else if !finished_before {
                p.read = legacy_read(&job, p, &inputs, observer);
                take_over(p, &inherited);
            }
            if took_none && !p.read.is_empty() {
                read_from_start(p);
                take_over(p, &inherited);
            }
        } else if inherited.iter().any(Option::is_some) {
            // A new job that names inputs the lake took checks them as a resumed job does:
            // one replaced under the lake is refused before anything is written.
            let (inputs, read) = (inputs.clone(), inherited.clone());
            let owners: Vec<String> = taken
                .iter()
                .map(|t| t.as_ref().and_then(|t| t.from.clone()).unwrap_or_default())
                .collect();
            tokio::task::spawn_blocking(move || {
                for ((input, r), owner) in inputs.iter().zip(&read).zip(&owners) {
                    if let Some(r) = r {
                        check_read(owner, std::slice::from_ref(input), std::slice::from_ref(r))?;
                    }
                }
                Ok::<_, Error>(())
            })
            .await
            .map_err(|e| Error::io("check", "the inputs", e.into()))??;
        }
        // A stream cannot be looked at without reading it: a finished job reads it again. It
        // must begin with what the job read (else `Error::InputChanged`), and what follows is
        // new; one that brings nothing more leaves the job finished as it was, no checkpoint.
        // (Not reading it would drop whatever a rerun with more input piped in.)
        // A terminal is not read again: nobody pipes records into a finished job from one.
        let rereads_stream = finished_before
            && restored.as_ref().is_some_and(|p| !p.read.is_empty())
            && inputs.iter().any(|i| {
                i.is_stdin()
                    && (i.stream.is_some() || !std::io::IsTerminal::is_terminal(&std::io::stdin()))
            });
        if rereads_stream {
            coordinator.reopen();
        }
        let (records_before, bad_before) = restored
            .as_ref()
            .map_or((0, 0), |p| (p.records, p.bad_records));
        let mut nothing_new = false;
        if coordinator.is_finished() {
            // A table job with background compaction runs one round even so: the run that
            // finished the job may have died in its last round, which this one finishes.
            let compaction = match compact.take() {
                Some((options, _))
                    if coordinator.table().is_some_and(|t| t.version().is_some()) =>
                {
                    Some(compaction::Background::once(storage.clone(), &options).await)
                }
                _ => None,
            };
            return Ok(IngestSummary {
                job,
                status: IngestStatus::AlreadyFinished,
                resumed: true,
                records: 0,
                records_total: restored.as_ref().map_or(0, |p| p.records),
                bad_records: 0,
                files: 0,
                bytes: 0,
                checkpoints: 0,
                input_bytes: 0,
                last_checkpoint: coordinator.last_checkpoint(),
                stage_times: StageTimes::default(),
                compaction,
            });
        }
        // Only files that became visible now: a rerun re-commits the latest checkpoint's
        // files, which are mostly there already (`AlreadyCommitted`).
        let restored_commits = coordinator
            .restored_outcomes()
            .iter()
            .filter(|o| **o == crate::protocol::CommitOutcome::Committed)
            .count();
        if let Some(p) = &restored {
            let at = p
                .inputs
                .get(p.cursor.input)
                .and_then(|c| inputs.iter().find(|i| &i.canonical == c))
                .map_or("the end of the input".to_string(), |i| {
                    format!("{}:{}", i.display, p.cursor.line)
                });
            observer.note(&format!(
                "resuming job `{job}` from checkpoint {} at {at} ({} records written)",
                coordinator.last_checkpoint(),
                p.records
            ));
        }
        if restored_commits > 0 {
            observer.note(&format!(
                "committed {restored_commits} pending file(s) of checkpoint {}",
                coordinator.last_checkpoint()
            ));
        }

        // The schema: the job's own when resuming, else the given one, else inferred.
        let schema = match (&restored, explicit) {
            // The job wrote nothing its schema could hold: the one given or inferred now.
            (Some(p), _) if undecided_schema(p) => {
                if !undecided {
                    return Err(Error::InvalidInput(format!(
                        "job `{job}` changed while this run opened it; run it again"
                    )));
                }
                let s = fresh_schema?;
                if !s.fields().is_empty() {
                    observer.note(&format!(
                        "job `{job}` has written no record yet: it takes the columns of this \
                         run's records ({})",
                        describe_schema(&s)
                    ));
                }
                s
            }
            (Some(p), Some(s)) if s.fields() != p.schema.fields() => {
                return Err(Error::InvalidInput(format!(
                    "job `{job}` was started with another schema ({}); use another --job for \
                     this one",
                    describe_schema(&p.schema)
                )));
            }
            (Some(p), _) => p.schema.clone(),
            (None, Some(_)) => fresh_schema?,
            (None, None) => {
                let s = fresh_schema?;
                if !s
                    .fields()
                    .iter()
                    .all(|f| f.data_type() == &arrow::datatypes::DataType::Null)
                {
                    observer.note(&format!(
                        "columns inferred from the first records of the inputs (up to {}): \
                         {}; later values that do not fit them are bad records (pass --schema \
                         to choose)",
                        source::INFER_RECORDS,
                        describe_schema(&s)
                    ));
                }
                s
            }
        };
        if table_schema
            .as_ref()
            .is_some_and(|t| t.fields() != schema.fields())
        {
            return Err(Error::InvalidInput(format!(
                "job `{job}` changed while this run opened it (its schema is not the one the \
                 table was opened with); run it again"
            )));
        }

        let sink_id = manifest::sink_identity(sink.storage().as_ref(), false)
            .await?
            .map(|s| s.sink_id)
            .unwrap_or_default();
        let (mut bad_file, note) = BadRecords::open(
            bad_records_path.as_deref(),
            restored.as_ref(),
            legacy,
            &job,
            &sink_id,
            inputs
                .iter()
                .map(|i| bad_records::InputName {
                    display: i.display.clone(),
                    canonical: i.canonical.clone(),
                })
                .collect(),
        )
        .await?;
        if let Some(note) = note {
            observer.note(&note);
        }

        let mut position = restored.clone().unwrap_or_else(|| SourcePosition {
            version: SourcePosition::version_for(time_by.as_ref()),
            inputs: canonical.clone(),
            input_format,
            partition_by: partition_by.clone(),
            partition_by_time: time_by.clone(),
            cursor: Cursor::START,
            read: vec![Prefix::START; inputs.len()],
            records: 0,
            bad_records: 0,
            bad_records_len: None,
            bad_records_file: None,
            bad_records_tail: None,
            schema: schema.clone(),
        });
        position.schema = schema.clone();
        if restored.is_none() {
            take_over(&mut position, &inherited);
        }
        // Restored from an older layout (version 1, no read prefixes), the position this run
        // writes has the current one: it says so.
        position.version = position
            .version
            .max(SourcePosition::version_for(time_by.as_ref()));
        // A run without a bad-records file writes no line: the checkpoints it takes keep
        // where the restored one said to look (`bad_records`).
        let mut summary = IngestSummary {
            job: job.clone(),
            status: IngestStatus::Finished,
            resumed: restored.is_some(),
            records: 0,
            records_total: position.records,
            bad_records: 0,
            files: 0,
            bytes: 0,
            checkpoints: 0,
            input_bytes: 0,
            last_checkpoint: coordinator.last_checkpoint(),
            stage_times: StageTimes::default(),
            compaction: None,
        };
        // Background compaction starts once the table exists.
        let mut compacting: Option<compaction::Background> = None;
        let mut start_compaction = |coordinator: &Coordinator| {
            if compacting.is_none() && coordinator.table().is_some_and(|t| t.version().is_some()) {
                if let Some((options, every)) = compact.take() {
                    compacting = Some(compaction::Background::start(
                        storage.clone(),
                        options,
                        every,
                    ));
                }
            }
        };
        start_compaction(&coordinator);
        if restored.is_none() {
            // Checkpoint 1 of a new job holds no records, only the start: the schema just
            // inferred (standard input cannot be read twice) and the length of the bad-records
            // file, so that a run killed before its first real checkpoint resumes with both.
            bad_file.sync(&mut position).await?;
            *step = Step::FirstCheckpoint;
            let report = coordinator.checkpoint(&position).await?;
            *step = Step::Prepare;
            summary.checkpoints += 1;
            summary.last_checkpoint = report.checkpoint_id;
        }

        // The reader thread frames records and hands the chunks round-robin to the decoding
        // threads; the loop below takes the decoded chunks back in the same round, so in
        // input order, whatever order the decoders finish in.
        let rows_every = match checkpoint_every {
            CheckpointEvery::Rows(n) => Some(n),
            CheckpointEvery::Interval(_) => None,
        };
        let linger = match checkpoint_every {
            CheckpointEvery::Interval(d) => (d / 4).min(STDIN_LINGER_MAX),
            CheckpointEvery::Rows(_) => STDIN_LINGER_MAX,
        };
        let mut source = Source::new(
            inputs.clone(),
            input_format,
            Arc::new(schema.clone()),
            strict,
            position.read.clone(),
            stdin_prefix,
            finished_before && !rereads_stream,
            linger,
        );
        if rereads_stream {
            source = source.with_stream_reread();
        }
        if let Some(p) = &partitioner {
            // The decoding threads check the partition values and split each chunk by them,
            // with the sink's own assigner.
            source = source
                .with_row_check(partition_check(p.clone(), sink.partition_path_bytes_max()))
                .with_assigner(Arc::new(p.clone()));
        }
        // The chunk size the writing loop asks of the reader (see `chunk_scale`).
        let scale = Arc::new(AtomicUsize::new(1));
        let mut threads = Vec::with_capacity(decoders + 1);
        let mut decoded = Vec::with_capacity(decoders);
        // Files of JSON lines with a time schedule: each decoding thread reads its own ranges
        // of them (`source::Ranges`), in the same round; anything else has a reader thread.
        match source.ranges().filter(|_| rows_every.is_none()) {
            Some(ranges) => {
                for d in 0..decoders {
                    let (tx, rx) = tokio::sync::mpsc::channel::<Msg<Chunk>>(CHUNKS_QUEUED);
                    let decoder = source.decoder();
                    let mut lane = ranges.lane(d, decoders);
                    let scale = scale.clone();
                    let thread = std::thread::Builder::new()
                        .name(format!("filesink-decode-{d}"))
                        .spawn(move || loop {
                            let k = scale.load(Ordering::Relaxed);
                            let msg = match lane.next(source::CHUNK_BYTES_MAX * k) {
                                None => return,
                                Some(LaneNext::Records(raw)) => Msg::Chunk(raw),
                                Some(LaneNext::End(cursor, read, bytes)) => {
                                    Msg::End(cursor, read, bytes)
                                }
                                Some(LaneNext::Failed(e)) => Msg::Failed(e),
                                // An error of the records before comes first in the input.
                                Some(LaneNext::FailedAfter(before, e)) => {
                                    Msg::Failed(decoder.decode(before).err().unwrap_or(e))
                                }
                            };
                            if !decode_and_send(&decoder, msg, &tx) {
                                return;
                            }
                        })
                        .map_err(|e| Error::io("start a decoding thread for", "the inputs", e))?;
                    threads.push(thread);
                    decoded.push(rx);
                }
            }
            None => {
                let mut to_decoders = Vec::with_capacity(decoders);
                for d in 0..decoders {
                    let (raw_tx, raw_rx) =
                        std::sync::mpsc::sync_channel::<Msg<RawChunk>>(CHUNKS_QUEUED);
                    let (tx, rx) = tokio::sync::mpsc::channel::<Msg<Chunk>>(CHUNKS_QUEUED);
                    let decoder = source.decoder();
                    let thread = std::thread::Builder::new()
                        .name(format!("filesink-decode-{d}"))
                        .spawn(move || {
                            for msg in raw_rx {
                                if !decode_and_send(&decoder, msg, &tx) {
                                    return;
                                }
                            }
                        })
                        .map_err(|e| Error::io("start a decoding thread for", "the inputs", e))?;
                    threads.push(thread);
                    to_decoders.push(raw_tx);
                    decoded.push(rx);
                }
                let reader_scale = scale.clone();
                let reader = std::thread::Builder::new()
                    .name("filesink-source".into())
                    .spawn(move || {
                        let mut produced: u64 = 0;
                        for turn in (0..to_decoders.len()).cycle() {
                            let k = reader_scale.load(Ordering::Relaxed);
                            let records = CHUNK_RECORDS_MAX * k;
                            let max = match rows_every {
                                Some(n) => (n - produced % n).min(records as u64) as usize,
                                None => records,
                            };
                            let msg = match source.next_raw_within(max, source::CHUNK_BYTES_MAX * k)
                            {
                                Ok(Some(raw)) => {
                                    produced += raw.records() as u64;
                                    Msg::Chunk(raw)
                                }
                                Ok(None) => Msg::End(
                                    source.cursor(),
                                    source.read().to_vec(),
                                    source.bytes_read(),
                                ),
                                Err(e) => Msg::Failed(e),
                            };
                            let last = !matches!(msg, Msg::Chunk(_));
                            if to_decoders[turn].send(msg).is_err() || last {
                                return;
                            }
                        }
                    })
                    .map_err(|e| Error::io("start a reader thread for", "the inputs", e))?;
                threads.push(reader);
            }
        }
        let mut turn = 0;

        observer.started(&inputs, &position);
        let mut since_checkpoint: u64 = 0;
        // A new job's first records are due one interval after inference began, however long
        // it waited for them.
        let mut last_checkpoint_at = match restored {
            None => inference_began,
            Some(_) => Instant::now(),
        };
        let mut checkpointed_cursor = position.cursor;
        // Row files kept open across checkpoints (`max_visibility_delay`) hold records that are
        // not visible yet: checkpoints go on while they do, so that each rolls once it is due.
        let holds_open = |c: &Coordinator| row_visibility_delay.is_some() && c.open_files() > 0;
        let mut held_open = holds_open(&coordinator);
        // The checkpoint whose commit runs in the background, and its position.
        let mut committing: Option<SourcePosition> = None;

        let outcome: Result<bool> = async {
            loop {
                // With a time interval and records not checkpointed yet, the checkpoint is due
                // when the interval is up, whether or not another chunk has come by then: the timer
                // hands the loop an empty chunk at the current position.
                let wake = match checkpoint_every {
                    CheckpointEvery::Interval(d)
                        if position.cursor != checkpointed_cursor || held_open =>
                    {
                        Some(last_checkpoint_at + d)
                    }
                    _ => None,
                };
                let waiting = Instant::now();
                let msg = match wake {
                    Some(at) => tokio::select! {
                        m = decoded[turn].recv() => {
                            turn = (turn + 1) % decoders;
                            m
                        }
                        () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                            Some(Msg::Chunk(Chunk {
                                batch: None,
                                buckets: Vec::new(),
                                bad: Vec::new(),
                                cursor: position.cursor,
                                read: Vec::new(),
                            }))
                        }
                    },
                    None => {
                        let m = decoded[turn].recv().await;
                        turn = (turn + 1) % decoders;
                        m
                    }
                };
                summary.stage_times.input += waiting.elapsed();
                match msg {
                    Some(Msg::Chunk(chunk)) => {
                        let writing = Instant::now();
                        let records = chunk.records() as u64;
                        if !chunk.bad.is_empty() {
                            let n = chunk.bad.len() as u64;
                            bad_file.write(chunk.bad, position.bad_records + 1).await?;
                            summary.bad_records += n;
                            position.bad_records += n;
                        }
                        if records > 0 {
                            *step = Step::Write(chunk.cursor);
                            let buckets = chunk.buckets.len();
                            coordinator
                                .write_queued(chunk.batch.as_ref(), chunk.buckets)
                                .await?;
                            *step = Step::Prepare;
                            scale.store(
                                chunk_scale(&coordinator, buckets, scale_max),
                                Ordering::Relaxed,
                            );
                            summary.records += records;
                            position.records += records;
                            since_checkpoint += records;
                        }
                        position.cursor = chunk.cursor;
                        for (i, p) in chunk.read {
                            position.read[i] = p;
                        }
                        summary.stage_times.write += writing.elapsed();
                        observer.advanced(&position);
                        observer.stage_times(&summary.stage_times);
                        if stop_after_records.is_some_and(|n| summary.records >= n) {
                            return Ok(true);
                        }
                        let due = match checkpoint_every {
                            CheckpointEvery::Rows(n) => since_checkpoint >= n,
                            CheckpointEvery::Interval(d) => last_checkpoint_at.elapsed() >= d,
                        };
                        if due && (position.cursor != checkpointed_cursor || held_open) {
                            // The writes queued so far end first: an error of one is a write's.
                            let draining = Instant::now();
                            *step = Step::Write(position.cursor);
                            coordinator.written().await?;
                            summary.stage_times.write += draining.elapsed();
                            let checkpointing = Instant::now();
                            bad_file.sync(&mut position).await?;
                            *step = Step::Checkpoint;
                            // The previous checkpoint was committed behind the writes since.
                            settle_commit(
                                &mut coordinator,
                                &mut summary,
                                observer,
                                committing.as_ref(),
                            )
                            .await?;
                            start_compaction(&coordinator);
                            let report = coordinator.checkpoint_then_commit(&position).await?;
                            *step = Step::Prepare;
                            committing = Some(position.clone());
                            summary.checkpoints += 1;
                            summary.records_total = position.records;
                            summary.last_checkpoint = report.checkpoint_id;
                            summary.stage_times.checkpoint += checkpointing.elapsed();
                            since_checkpoint = 0;
                            last_checkpoint_at = Instant::now();
                            checkpointed_cursor = position.cursor;
                            held_open = holds_open(&coordinator);
                        }
                    }
                    Some(Msg::End(cursor, read, bytes_read)) => {
                        if rereads_stream
                            && !files_grew
                            && position.records == records_before
                            && position.bad_records == bad_before
                        {
                            // The stream was the one the job read, and brought nothing more.
                            nothing_new = true;
                            return Ok(false);
                        }
                        position.cursor = cursor;
                        position.read = read;
                        summary.input_bytes = bytes_read;
                        let draining = Instant::now();
                        *step = Step::Write(position.cursor);
                        coordinator.written().await?;
                        summary.stage_times.write += draining.elapsed();
                        let checkpointing = Instant::now();
                        bad_file.sync(&mut position).await?;
                        *step = Step::LastCheckpoint;
                        settle_commit(
                            &mut coordinator,
                            &mut summary,
                            observer,
                            committing.as_ref(),
                        )
                        .await?;
                        let report = coordinator.finish(&position).await?;
                        start_compaction(&coordinator);
                        *step = Step::Prepare;
                        summary.files += report.committed_files;
                        summary.bytes += report.committed_bytes;
                        summary.checkpoints += 1;
                        summary.records_total = position.records;
                        summary.last_checkpoint = report.checkpoint_id;
                        summary.stage_times.checkpoint += checkpointing.elapsed();
                        observer.finished();
                        return Ok(false);
                    }
                    // No checkpoint: what was written since the last one stays hidden, and the
                    // next run's restore removes it.
                    Some(Msg::Failed(e)) => {
                        *step = Step::Read;
                        return Err(e);
                    }
                    None => {
                        *step = Step::Read;
                        return Err(Error::io(
                            "read",
                            "the inputs",
                            std::io::Error::other("the input reader stopped unexpectedly"),
                        ));
                    }
                }
            }
        }
        .await;
        // A checkpoint's commit may still run in the background: the complete checkpoints
        // become visible before the run returns, whatever its outcome.
        let stopped = match outcome {
            Ok(stopped) => stopped,
            Err(e) => {
                coordinator.stop_writes().await;
                let _ = coordinator.committed().await;
                if let Some(c) = compacting {
                    c.abort();
                }
                return Err(coordinator.failed(e).await);
            }
        };
        if stopped {
            // As a crash would: no checkpoint for what was written since the last one; the
            // next run's restore removes it.
            drop(decoded);
            coordinator.stop_writes().await;
            settle_commit(&mut coordinator, &mut summary, observer, None).await?;
            drop(coordinator);
            if let Some(c) = compacting {
                c.abort();
            }
            crate::storage::ownership::settle_releases().await;
            observer.stopped();
            summary.status = IngestStatus::Stopped;
            return Ok(summary);
        }
        // Gives the job up now, and lets a log checkpoint of a table still being written end.
        coordinator.close().await?;
        if nothing_new {
            summary.status = IngestStatus::AlreadyFinished;
            summary.input_bytes = 0;
        }
        // The last round compacts what the last checkpoints added; a finished job whose
        // stream brought nothing new runs it too, as a finished job's rerun does (it finishes
        // a round its last run died in).
        if let Some(c) = compacting {
            summary.compaction = Some(c.finish(true).await);
        }
        // The reader and decoding threads have sent their last messages and are ending.
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        Ok(summary)
    }
}

/// Takes in the commit that ran behind the writes since the last checkpoint, if any: its files
/// count in the summary, and the observer hears of it with the position it was taken at.
async fn settle_commit(
    coordinator: &mut Coordinator,
    summary: &mut IngestSummary,
    observer: &mut dyn Observer,
    at: Option<&SourcePosition>,
) -> Result<()> {
    if let Some(report) = coordinator.committed().await? {
        summary.files += report.committed_files;
        summary.bytes += report.committed_bytes;
        if let Some(at) = at {
            observer.checkpointed(&report, at);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn input(path: &str) -> Input {
        Input {
            display: path.to_string(),
            path: Some(path.into()),
            canonical: path.to_string(),
            size_bytes: Some(0),
            file_id: None,
            compression: None,
            stream: None,
            object: None,
        }
    }

    #[test]
    fn default_job_is_stem_and_hash_of_the_inputs() {
        let a = default_job_name(&[input("/data/my-events.2026.jsonl")]).unwrap();
        assert!(a.starts_with("my_events_2026_"), "{a}");
        assert_eq!(a.len(), "my_events_2026_".len() + 8);
        assert!(manifest::validate_job_name(&a).is_ok());
        let b = default_job_name(&[input("/other/my-events.2026.jsonl")]).unwrap();
        assert_ne!(a, b);
        let long = default_job_name(&[input(&format!("/d/{}.csv", "x".repeat(100)))]).unwrap();
        assert!(manifest::validate_job_name(&long).is_ok(), "{long}");
        assert_eq!(default_job_name(&[Input::stdin()]), None);
        assert_eq!(
            default_job_name(&[Input::reader("r", std::io::empty())]),
            None
        );
    }

    fn records(from: u64, to: u64) -> Vec<u8> {
        (from..to)
            .map(|i| format!("{{\"id\":{i},\"day\":\"d{}\"}}\n", i % 2))
            .collect::<String>()
            .into_bytes()
    }

    fn reader_ingest(lake: &Path, bytes: Vec<u8>) -> Ingest {
        Ingest::new([Input::reader("events", std::io::Cursor::new(bytes))])
            .to_local(lake)
            .format(FileFormat::json_lines())
            .partition_by(["day"])
            .checkpoint_every(CheckpointEvery::Rows(10))
            .job("from_reader")
    }

    #[tokio::test]
    async fn a_reader_resumes_after_what_the_job_read_of_it_and_refuses_other_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().join("lake");
        let first = reader_ingest(&lake, records(0, 100))
            .stop_after_records(35)
            .run()
            .await
            .unwrap();
        assert_eq!(first.status, IngestStatus::Stopped);
        assert_eq!(first.records_total, 30);
        // The same stream again: its first 30 records are skipped and checked, the rest
        // written.
        let second = reader_ingest(&lake, records(0, 100)).run().await.unwrap();
        assert_eq!(second.status, IngestStatus::Finished);
        assert!(second.resumed);
        assert_eq!((second.records, second.records_total), (70, 100));
        // Every record exactly once in the lake's visible files.
        let mut ids = Vec::new();
        for day in ["d0", "d1"] {
            for f in std::fs::read_dir(lake.join(format!("day={day}"))).unwrap() {
                let path = f.unwrap().path();
                if path.file_name().unwrap().to_str().unwrap().starts_with('.') {
                    continue; // hidden: not committed
                }
                let text = std::fs::read_to_string(path).unwrap();
                for line in text.lines() {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    ids.push(v["id"].as_i64().unwrap());
                }
            }
        }
        ids.sort();
        assert_eq!(ids, (0..100).collect::<Vec<i64>>());

        // Another stream under a job's name is refused once it differs from what was read.
        let other = dir.path().join("other");
        let stopped = reader_ingest(&other, records(0, 100))
            .stop_after_records(15)
            .run()
            .await
            .unwrap();
        assert_eq!(stopped.records_total, 10);
        let e = reader_ingest(&other, records(5, 105))
            .run()
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InputChanged(_)), "{e}");
        assert!(e.to_string().contains("input `events`"), "{e}");
    }
}

/// A pipeline is `Send`: a caller can `tokio::spawn` it (compile-time check).
/// How many times the smallest chunk the next chunks of a file may be: enough for about
/// [`CHUNK_ROWS_PER_FILE`] rows per file the writers hold open, from 1 to `scale_max`.
///
/// A chunk brings each open file its share of the rows, and every share costs the same
/// whatever its size (a slice per file, an append per column, the writer's bookkeeping): at
/// 1,000 partitions a chunk of 8,192 records gave each file 8 rows, and four times larger
/// chunks made the ingest 30% faster (three times: about as fast, with 10 MB less in flight
/// at the peak). With few files the chunks stay small, which keeps what
/// is in flight (and the peak memory) small.
///
/// The writers report their open files after each write they take from their queues, which
/// may lag the chunks handed over; the buckets of the chunk just handed over (`buckets`) will
/// each have a file open, whatever the writers have reported yet.
fn chunk_scale(coordinator: &Coordinator, buckets: usize, scale_max: u64) -> usize {
    let open = coordinator.open_files().max(buckets);
    (open * CHUNK_ROWS_PER_FILE)
        .div_ceil(CHUNK_RECORDS_MAX)
        .clamp(1, scale_max as usize)
}

#[cfg(test)]
mod send_check {
    fn assert_send<T: Send>(_: &T) {}

    #[allow(dead_code)]
    fn the_pipeline_can_be_spawned(
        ingest: super::Ingest,
        observer: &mut (dyn super::Observer + Send),
    ) {
        let fut = ingest.run_with(observer);
        assert_send(&fut);
    }
}
