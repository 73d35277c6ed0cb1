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
//!  next_raw         ─▶  Decoder::decode ─┐ in    Coordinator::     ─▶ queue ─▶ encode, roll
//!  frame records,   ─▶  decode, check,  ─┼─────▶  write_queued       ─▶ queue ─▶ (by bucket)
//!  position, CRC    ─▶  split by bucket ─┘ order checkpoint when due
//! ```
//!
//! The reader thread ([`InputSource`]) frames the inputs into chunks of whole records, each tagged
//! with the position after it; it hands them round-robin to `N` decoding threads
//! ([`Decoder`], `N` = [`Ingest::parallelism`]), and the writing loop takes the decoded chunks
//! back in the same round, so in input order whatever order the decoders finish in. Plain
//! files of JSON lines on a time schedule have no reader thread: each decoding thread reads
//! its own byte ranges of them, in the same round ([`Ranges`]), and hands the position on
//! from range to range, so that every chunk carries the same exact position a reader thread
//! would have given it (a schedule by record counts cuts chunks at record numbers, which a
//! range cannot know). With
//! partition columns the decoding threads also split each chunk by bucket, with the sink's own
//! assigner ([`InputSource::with_assigner`]), so that the one writing loop only hands the buckets
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
mod job_run;
pub mod json_types;
pub mod ledger;
mod pipeline;
mod plan;
mod rules;
mod run;
mod schedule;
pub mod source;
mod stop;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::Schema;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::format::FileFormat;
use crate::job::{CheckpointReport, Coordinator};
use crate::storage::{LeaseOptions, Storage};
use crate::table::delta::DeltaOptions;
pub use compaction::CompactionSummary;
use job_run::{JobRun, Opened};
pub use json_types::{check_schema, StrictJson};
use plan::IngestPlan;
use rules::partition_check;
pub use rules::{check_bad_records_path, check_distinct, default_job_name, describe_schema};
pub use source::{
    check_csv_schema, check_read, infer_schema, BadRecord, Chunk, CommitHook, Cursor, Decoder,
    Input, InputCompression, InputFormat, InputSource, Lane, LaneNext, Next, PartOffsets, Prefix,
    Ranges, RawChunk, RowCheck, Skipped, Source, SourcePosition, StdinRecords, TimePartitionBy,
};
#[cfg(feature = "kafka")]
pub use source::{Kafka, KafkaColumn, KafkaSource};
pub use stop::StopHandle;

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
    /// The job had finished before and no input grew since: nothing was done. Also a job
    /// named after its inputs all of which the lake's jobs read to their end before, unchanged
    /// since ([`IngestSummary::unchanged`]): no job was opened, nothing was written.
    AlreadyFinished,
    /// The run stopped at [`Ingest::stop_after_records`], as a crash would: what it wrote
    /// after its last checkpoint stays hidden, and the next run resumes from that checkpoint.
    Stopped,
    /// The run was asked to stop ([`Ingest::stop_handle`]): it took a checkpoint of every
    /// record it wrote, committed it and gave the job up; the next run reads on from there.
    Interrupted,
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
    /// Records the source passed over because it could no longer give them, as it was told
    /// to ([`Next::Skipped`]): possible loss, for the operator to look at.
    pub skipped: Vec<Skipped>,
    /// Files whose last line has no line end yet: the line-end rule left it for a later run
    /// ([`Ingest::settle`]).
    pub waiting: Vec<String>,
    /// Inputs passed over because the lake's jobs read them to their end before and they did
    /// not change since (a job named after its inputs reads the others).
    pub unchanged: usize,
    /// Inputs refused because they changed within what the lake took of them, each with why;
    /// the run took the others. Only a job named after its inputs passes over a refused input:
    /// a job named with [`Ingest::job`] is refused whole ([`Error::InputChanged`]).
    pub refused: Vec<String>,
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
    time_zone: Option<chrono::FixedOffset>,
    schema: Option<Schema>,
    checkpoint_every: CheckpointEvery,
    part_size_bytes_max: Option<u64>,
    bad_records: Option<PathBuf>,
    job: Option<String>,
    lease_ttl: Duration,
    stop_after_records: Option<u64>,
    stop: Option<StopHandle>,
    parallelism: Option<usize>,
    memory_bytes_max: u64,
    table: Option<DeltaOptions>,
    merge: Option<crate::sink::MergePolicy>,
    compact: Option<(crate::maintain::CompactOptions, Duration)>,
    row_visibility_delay: Option<Duration>,
    settle: Duration,
    /// A source written outside this crate ([`Ingest::from_source`]), read instead of inputs.
    custom: Option<CustomSource>,
}

/// A [`Source`] in an [`Ingest`], with its name. A source need not be `Sync`: the mutex
/// makes the ingest's future `Send` while only one thread at a time uses the source.
pub(crate) struct CustomSource {
    pub(crate) name: String,
    source: std::sync::Mutex<Box<dyn Source>>,
}

impl CustomSource {
    pub(crate) fn new(source: Box<dyn Source>) -> CustomSource {
        CustomSource {
            name: source.name(),
            source: std::sync::Mutex::new(source),
        }
    }

    pub(crate) fn into_inner(self) -> Box<dyn Source> {
        self.source.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for CustomSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CustomSource").field(&self.name).finish()
    }
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
            time_zone: None,
            schema: None,
            checkpoint_every: CheckpointEvery::default(),
            part_size_bytes_max: None,
            bad_records: None,
            job: None,
            lease_ttl: LeaseOptions::DEFAULT_TTL,
            stop_after_records: None,
            stop: None,
            parallelism: None,
            memory_bytes_max: crate::sink::SinkBuilder::DEFAULT_BUFFER_BYTES_MAX,
            table: None,
            merge: None,
            compact: None,
            row_visibility_delay: None,
            settle: source::SETTLE_DEFAULT,
            custom: None,
        }
    }

    /// An ingestion of a [`Source`] written outside this crate, exactly once: every checkpoint
    /// records the position the source gave with its last records before it, and a restarted
    /// job seeks the source there (see [`Source`]). The job needs a name ([`Ingest::job`]) and
    /// a schema ([`Ingest::schema`]): records are not read ahead to infer one. A finished job
    /// run again seeks the source to where it finished and takes what it brings now.
    ///
    /// `examples/custom_source.rs` ingests one across a simulated crash.
    pub fn from_source(source: impl Source) -> Ingest {
        let mut ingest = Ingest::new([]);
        ingest.custom = Some(CustomSource::new(Box::new(source)));
        ingest
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
    /// [`TimePartitioning`](crate::bucket::TimePartitioning)). A job keeps its time partitioning.
    pub fn partition_by_time(
        mut self,
        column: impl Into<String>,
        pattern: impl Into<String>,
    ) -> Ingest {
        self.partition_by_time = Some((column.into(), pattern.into()));
        self
    }

    /// The time zone of the time directories ([`Ingest::partition_by_time`]): a fixed offset
    /// from UTC ([`crate::bucket::parse_time_zone`]), UTC by default. A run without time
    /// directories refuses it ([`crate::Setting::TimeZone`]).
    pub fn time_zone(mut self, offset: chrono::FixedOffset) -> Ingest {
        self.time_zone = Some(offset);
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

    /// Rolls a part file once it reaches this size (default: [`RollingPolicy::default`](crate::sink::RollingPolicy::default)).
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

    /// The line-end rule: a record is taken with its line end, so that nothing is committed
    /// shorter than its writer makes it. A plain file's last record without one may still be
    /// being written: it is taken once the file has been unchanged for `settle`
    /// ([`SETTLE_DEFAULT`](source::SETTLE_DEFAULT), one hour, by default), and until then left
    /// for a later run, which reads it whole. `Duration::ZERO` takes it at once: the files
    /// are known to be complete. Standard input at its end, objects and compressed files are
    /// complete.
    pub fn settle(mut self, settle: Duration) -> Ingest {
        self.settle = settle;
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

    /// Lets `handle` stop the run at a checkpoint ([`StopHandle`]): how a run of a source
    /// that does not end (a Kafka topic, a stream) ends with everything it wrote visible.
    pub fn stop_handle(mut self, handle: StopHandle) -> Ingest {
        self.stop = Some(handle);
        self
    }

    /// The job's name: the one given ([`Ingest::job`]), else the one derived from the inputs
    /// ([`default_job_name`]); `None` for a job that reads a stream and has no name given,
    /// which a run refuses.
    pub fn job_name(&self) -> Option<String> {
        self.job.clone().or_else(|| default_job_name(&self.inputs))
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

    /// The run as its stages: the plan of the options, the job opened, the writing.
    async fn run_inner(
        self,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<IngestSummary> {
        let plan = IngestPlan::new(self)?;
        match JobRun::open(plan, observer, step).await? {
            Opened::Finished(summary) => Ok(*summary),
            Opened::Ready(job) => job.run(observer, step).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::job::manifest;
    use std::path::Path;

    use super::*;

    fn input(path: &str) -> Input {
        Input {
            display: path.to_string(),
            path: Some(path.into()),
            canonical: path.to_string(),
            size_bytes: Some(0),
            file_id: None,
            born_ns: None,
            modified_ns: None,
            version: None,
            compression: None,
            compression_pending: false,
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
