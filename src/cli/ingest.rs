//! `filesink ingest`: JSON lines or CSV files into a lake, exactly once.
//!
//! A reader thread ([`Source`]) decodes the input in chunks of whole records, each tagged with
//! the position after it; this task writes the chunks through the sink's writer and, on the
//! checkpoint schedule, has the [`Coordinator`] checkpoint with that position. A run that is
//! killed at any moment and started again with the same arguments restores from the last
//! complete checkpoint (the coordinator removes what came after it) and reads on from its
//! position, so every record is written once.
//!
//! With a time interval, a checkpoint is due once the interval has passed with records not
//! yet checkpointed, whether or not the next chunk has come: a timer wakes the loop, so
//! records that trickle in become visible within about one interval plus the commit.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, IsTerminal, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use filesink::bucket::{BucketAssigner, HivePartitioner};
use filesink::storage::LeaseOptions;
use filesink::{Coordinator, FileFormat, Ownership, RollingPolicy, Sink};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::exit::{CliError, CliResult};
use super::json_types::check_schema;
use super::lake::open_storage;
use super::source::{
    check_read, infer_schema, read_schema_file, schema_ref, BadRecord, Chunk, Cursor, Input,
    InputFormat, Prefix, RowCheck, Source, SourcePosition, StdinRecords,
};
use super::url::Location;
use super::util::{human_bytes, parse_checkpoint_every, parse_job, parse_size, CheckpointEvery};

/// Most records decoded and written as one batch.
pub const CHUNK_RECORDS_MAX: usize = 8192;
/// Chunks decoded ahead of the writer.
const CHUNKS_AHEAD: usize = 4;
/// Least time between two plain progress lines when standard error is not a terminal.
const PLAIN_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// Longest a chunk of standard input waits for more records after its first (shorter with a
/// shorter checkpoint interval).
const STDIN_LINGER_MAX: Duration = Duration::from_millis(100);

/// The format of the output files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Apache Parquet (Snappy); a file per bucket and checkpoint.
    Parquet,
    /// Newline-delimited JSON.
    Jsonl,
    /// CSV with a header line.
    Csv,
}

/// Arguments of `filesink ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Input files: JSON lines (`.jsonl`, `.json`, `.ndjson`) or CSV with a header (`.csv`);
    /// `-` reads standard input (needs --job).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<String>,

    /// Where to write: a local directory (`./lake`, `/abs/lake`, `file:///abs/lake`), created
    /// if missing, or `s3://bucket/prefix` (configured from the `AWS_*` environment
    /// variables; row formats roll a file at every checkpoint there).
    #[arg(long, value_name = "URL")]
    pub to: String,

    /// Format of the output files.
    #[arg(long, value_enum, default_value_t = OutputFormat::Parquet)]
    pub format: OutputFormat,

    /// Format of the inputs; by default it follows the file extension (standard input:
    /// jsonl).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,

    /// Partition the output Hive-style by these columns (`day=2026-11-30/`), outermost first;
    /// the columns move from the data into the directory names.
    #[arg(long, value_delimiter = ',', value_name = "COL,...")]
    pub partition_by: Vec<String>,

    /// How often to checkpoint (make the output visible and remember the input position):
    /// a row count like `100000rows` or a duration like `200ms` or `10s`. With a duration,
    /// records become visible within about one interval plus the commit, however slowly they
    /// arrive.
    #[arg(long, default_value = "100000rows", value_parser = parse_checkpoint_every, value_name = "ROWS|DURATION")]
    pub checkpoint_every: CheckpointEvery,

    /// Roll a part file once it reaches this size (`64MiB`, `1GB`); default 128 MiB.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub max_part_size: Option<u64>,

    /// Arrow schema of the input as JSON (the serde form of `arrow::datatypes::Schema`);
    /// by default it is inferred from the first 1000 records of the first input (standard
    /// input with a duration for --checkpoint-every: the records that came within the first
    /// interval).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,

    /// Job name: 1 to 48 ASCII letters, digits or `_`. By default derived from the inputs
    /// (`<stem of the first>_<hash of all paths>`), so rerunning the same command resumes
    /// the same job.
    #[arg(long, value_parser = parse_job, value_name = "NAME")]
    pub job: Option<String>,

    /// Append malformed records here, as JSON lines `{"source":"file:line","line":…,"error":…,
    /// "job":…,"sink_id":…,"seq":…}` (`seq`: the job's n-th bad record), and go on; by default
    /// the first malformed record stops the run. Several jobs may share the file; nothing in
    /// it is ever removed. It may not be inside the lake.
    #[arg(long, value_name = "FILE")]
    pub bad_records: Option<PathBuf>,

    /// On an object store, how long a killed run keeps its job from a rerun: its claim
    /// expires this long after its last renewal (`30s` by default; at least `1s`). A live
    /// run renews it every third of this. On local disk the job is free the moment the run
    /// dies.
    #[arg(long, value_parser = parse_lease_ttl, value_name = "DURATION")]
    pub lease_ttl: Option<std::time::Duration>,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_lease_ttl(s: &str) -> Result<std::time::Duration, String> {
    let d = super::util::parse_duration(s)?;
    if d < LeaseOptions::MIN_TTL {
        return Err(format!(
            "a lease must live at least {} s",
            LeaseOptions::MIN_TTL.as_secs()
        ));
    }
    Ok(d)
}

/// What a run did, for the summary.
#[derive(Debug, Default)]
struct Stats {
    records: u64,
    bad_records: u64,
    files: usize,
    bytes: u64,
    checkpoints: u64,
    input_bytes: u64,
}

/// A message from the reader thread.
enum Msg {
    /// Decoded records.
    Chunk(Chunk),
    /// Every input is read: the final position, what is read of each input, and the bytes
    /// read.
    End(Cursor, Vec<Prefix>, u64),
    /// Reading failed; nothing after the last chunk may be checkpointed.
    Failed(CliError),
}

/// Runs `filesink ingest`.
pub async fn run(args: IngestArgs, out: &mut dyn Write) -> CliResult {
    let started = Instant::now();
    // Every argument is checked before anything is created: an invalid one exits 2 and
    // leaves no lake, no `sink.json`, no job behind.
    let location = Location::parse(&args.to)?;
    let partitioner = match args.partition_by.as_slice() {
        [] => None,
        cols => Some(
            HivePartitioner::new(cols.to_vec())
                .map_err(|e| CliError::usage(format!("invalid --partition-by: {e}")))?,
        ),
    };
    let explicit = match args.schema.as_deref() {
        Some(path) => {
            let schema = read_schema_file(path)?;
            Some(schema)
        }
        None => None,
    };
    let inputs = resolve_inputs(&args.inputs)?;
    let input_format = resolve_input_format(&inputs, args.input_format)?;
    let job = match &args.job {
        Some(j) => j.clone(),
        None => default_job(&inputs)?,
    };
    let strict = args.bad_records.is_none();
    let bad_records_path = match &args.bad_records {
        Some(p) => Some(check_bad_records_path(p, &location, &inputs)?),
        None => None,
    };
    if let (Some(schema), InputFormat::Jsonl) = (&explicit, input_format) {
        check_schema(schema).map_err(|e| {
            CliError::usage(format!(
                "--schema `{}`: {e}",
                args.schema.as_ref().expect("set").display()
            ))
        })?;
    }
    // A run that overlaps a live run of its job is refused at once, before inference reads any
    // input (standard input may never end); opening the job below decides for certain.
    if location.local_path().is_none_or(|p| p.exists()) {
        let (storage, _) = open_storage(&location)
            .map_err(|e| CliError::context(format!("cannot use `{location}` as output"), e))?;
        if let Some(holder) = storage.job_holder(&job).await? {
            return Err(CliError::refused(format!(
                "job `{job}` is owned by another run: a live run holds it ({holder}); nothing \
                 was changed"
            )));
        }
    }
    // Standard input takes what arrived by the first checkpoint's deadline for inference.
    let inference_deadline = match args.checkpoint_every {
        CheckpointEvery::Interval(d) => Some(Instant::now() + d),
        CheckpointEvery::Rows(_) => None,
    };
    // The schema a new job would take: --schema, else inferred from the inputs (the first
    // with records). A job that is resumed keeps its own; an inference error counts only for
    // a new job.
    let (fresh_schema, stdin_prefix) = match explicit.clone() {
        Some(s) => (Ok(s), None),
        None => match infer_from_inputs(&inputs, input_format, strict, inference_deadline) {
            Ok((s, prefix)) => (Ok(s), prefix),
            Err(e) => (Err(e), None),
        },
    };
    match &fresh_schema {
        // A schema without columns comes from inputs without records: nothing to partition.
        Ok(schema) if explicit.is_some() || !schema.fields().is_empty() => {
            check_partition_columns(&args.partition_by, schema)?;
        }
        Ok(_) | Err(_) => {}
    }
    if location.local_path().is_some_and(|p| !p.exists()) {
        // No lake, so no job to resume: the job is new, and an inference error stops it now,
        // before anything is created.
        if let Err(e) = fresh_schema {
            return Err(e);
        }
    }

    let (storage, _) = open_storage(&location)
        .map_err(|e| CliError::context(format!("cannot use `{location}` as output"), e))?;
    let mut builder = Sink::builder_shared(storage).format(match args.format {
        OutputFormat::Parquet => FileFormat::parquet(),
        OutputFormat::Jsonl => FileFormat::json_lines(),
        OutputFormat::Csv => FileFormat::csv(),
    });
    if let Some(p) = &partitioner {
        builder = builder.bucket_assigner(p.clone());
    }
    if let Some(bytes) = args.max_part_size {
        builder = builder.rolling_policy(RollingPolicy::default().with_part_size_bytes_max(bytes));
    }
    let sink = builder.build()?;
    let lease = LeaseOptions {
        ttl: args.lease_ttl.unwrap_or(LeaseOptions::DEFAULT_TTL),
    };
    let mut coordinator = Coordinator::builder(&sink, &job)
        .ownership(Ownership::Lease(lease))
        .open()
        .await
        .map_err(|e| CliError::context(format!("cannot open job `{job}` in `{location}`"), e))?;

    let canonical: Vec<String> = inputs.iter().map(|i| i.canonical.clone()).collect();
    let mut restored = coordinator
        .source_position()
        .map(|v| SourcePosition::from_json(&job, v))
        .transpose()?;
    // A finished job is read again only for its files that grew; standard input never.
    let finished_before = coordinator.is_finished();
    if let Some(p) = &mut restored {
        check_same_job(&job, p, &canonical, input_format, &args.partition_by)?;
        if !p.read.is_empty() {
            let grew = check_read(&job, &inputs, &p.read)?;
            if finished_before && grew.iter().any(|g| *g) {
                let names: Vec<&str> = inputs
                    .iter()
                    .zip(&grew)
                    .filter(|(_, g)| **g)
                    .map(|(i, _)| i.display.as_str())
                    .collect();
                note(&format!(
                    "job `{job}` finished at checkpoint {}, and since then `{}` grew: \
                     ingesting what was added",
                    coordinator.last_checkpoint(),
                    names.join("`, `")
                ));
                coordinator.reopen();
            }
        } else if !finished_before {
            p.read = legacy_read(&job, p, &inputs)?;
        }
    }
    if coordinator.is_finished() {
        let records = restored.as_ref().map_or(0, |p| p.records);
        if args.json {
            let v = serde_json::json!({
                "job": job,
                "status": "already_finished",
                "checkpoint": coordinator.last_checkpoint(),
                "records": records,
            });
            outln!(out, "{v}");
        } else {
            outln!(
                out,
                "job `{job}` already finished at checkpoint {} ({records} records); nothing to do",
                coordinator.last_checkpoint()
            );
        }
        return Ok(());
    }
    let restored_commits = coordinator.restored_outcomes().len();
    if let Some(p) = &restored {
        let at = p
            .inputs
            .get(p.cursor.input)
            .and_then(|c| inputs.iter().find(|i| &i.canonical == c))
            .map_or("the end of the input".to_string(), |i| {
                format!("{}:{}", i.display, p.cursor.line)
            });
        note(&format!(
            "resuming job `{job}` from checkpoint {} at {at} ({} records written)",
            coordinator.last_checkpoint(),
            p.records
        ));
    }
    if restored_commits > 0 {
        note(&format!(
            "committed {restored_commits} pending file(s) of checkpoint {}",
            coordinator.last_checkpoint()
        ));
    }

    // The schema: the job's own when resuming, else --schema, else inferred.
    let schema = match (&restored, explicit) {
        (Some(p), Some(s)) if s.fields() != p.schema.fields() => {
            return Err(CliError::msg(format!(
                "job `{job}` was started with another schema ({}); use another --job for this one",
                describe_schema(&p.schema)
            )));
        }
        (Some(p), _) => p.schema.clone(),
        (None, _) => fresh_schema?,
    };

    let sink_id = filesink::checkpoint::manifest::sink_identity(sink.storage().as_ref(), false)
        .await?
        .map(|s| s.sink_id)
        .unwrap_or_default();
    let mut bad_tags = BadRecordTags {
        job: job.clone(),
        sink_id,
        written: HashSet::new(),
    };
    let mut bad_file = match &bad_records_path {
        Some(p) => Some(open_bad_records(p, restored.as_ref(), &mut bad_tags)?),
        None => None,
    };

    let mut position = restored.clone().unwrap_or_else(|| SourcePosition {
        version: SourcePosition::VERSION,
        inputs: canonical.clone(),
        input_format,
        partition_by: args.partition_by.clone(),
        cursor: Cursor::START,
        read: vec![Prefix::START; inputs.len()],
        records: 0,
        bad_records: 0,
        bad_records_len: None,
        bad_records_file: None,
        schema: schema.clone(),
    });
    position.bad_records_len = None;
    position.bad_records_file = None;
    let mut stats = Stats::default();
    if restored.is_none() {
        // Checkpoint 1 of a new job holds no records, only the start: the schema just inferred
        // (standard input cannot be read twice) and the length of the --bad-records file, so
        // that a run killed before its first real checkpoint resumes with both.
        sync_bad_records(&mut bad_file, bad_records_path.as_deref(), &mut position)?;
        coordinator
            .checkpoint(position.to_json())
            .await
            .map_err(|e| CliError::context(format!("first checkpoint of job `{job}` failed"), e))?;
        stats.checkpoints += 1;
    }

    // The reader thread.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Msg>(CHUNKS_AHEAD);
    let rows_every = match args.checkpoint_every {
        CheckpointEvery::Rows(n) => Some(n),
        CheckpointEvery::Interval(_) => None,
    };
    let linger = match args.checkpoint_every {
        CheckpointEvery::Interval(d) => (d / 4).min(STDIN_LINGER_MAX),
        CheckpointEvery::Rows(_) => STDIN_LINGER_MAX,
    };
    let mut source = Source::new(
        inputs.clone(),
        input_format,
        schema_ref(&schema),
        strict,
        position.read.clone(),
        stdin_prefix,
        finished_before,
        linger,
    );
    if let Some(p) = &partitioner {
        source = source.with_row_check(partition_check(p.clone()));
    }
    let reader = std::thread::Builder::new()
        .name("filesink-source".into())
        .spawn(move || {
            let mut produced: u64 = 0;
            loop {
                let max = match rows_every {
                    Some(n) => (n - produced % n).min(CHUNK_RECORDS_MAX as u64) as usize,
                    None => CHUNK_RECORDS_MAX,
                };
                let msg = match source.next_chunk(max) {
                    Ok(Some(chunk)) => {
                        produced += chunk.batch.as_ref().map_or(0, |b| b.num_rows() as u64);
                        Msg::Chunk(chunk)
                    }
                    Ok(None) => {
                        Msg::End(source.cursor(), source.read().to_vec(), source.bytes_read())
                    }
                    Err(e) => Msg::Failed(e),
                };
                let last = !matches!(msg, Msg::Chunk(_));
                if tx.blocking_send(msg).is_err() || last {
                    return;
                }
            }
        })
        .map_err(|e| CliError::context("cannot start the input reader", e))?;

    let mut progress = Progress::new(&inputs, position.cursor);
    let mut since_checkpoint: u64 = 0;
    let mut last_checkpoint_at = Instant::now();
    let mut checkpointed_cursor = position.cursor;

    loop {
        // With a time interval and records not checkpointed yet, the checkpoint is due when
        // the interval is up, whether or not another chunk has come by then: the timer hands
        // the loop an empty chunk at the current position.
        let wake = match args.checkpoint_every {
            CheckpointEvery::Interval(d) if position.cursor != checkpointed_cursor => {
                Some(last_checkpoint_at + d)
            }
            _ => None,
        };
        let msg = match wake {
            Some(at) => tokio::select! {
                m = rx.recv() => m,
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                    Some(Msg::Chunk(Chunk {
                        batch: None,
                        bad: Vec::new(),
                        cursor: position.cursor,
                        read: Vec::new(),
                    }))
                }
            },
            None => rx.recv().await,
        };
        match msg {
            Some(Msg::Chunk(chunk)) => {
                if !chunk.bad.is_empty() {
                    let f = bad_file
                        .as_mut()
                        .expect("bad records only come with --bad-records");
                    write_bad_records(
                        f,
                        bad_records_path.as_deref().expect("set"),
                        &chunk.bad,
                        position.bad_records + 1,
                        &bad_tags,
                    )?;
                    stats.bad_records += chunk.bad.len() as u64;
                    position.bad_records += chunk.bad.len() as u64;
                }
                if let Some(batch) = &chunk.batch {
                    coordinator.writer().write(batch).await.map_err(|e| {
                        CliError::context(
                            format!(
                                "cannot write the records before {}",
                                progress.at(chunk.cursor)
                            ),
                            e,
                        )
                    })?;
                    let n = batch.num_rows() as u64;
                    stats.records += n;
                    position.records += n;
                    since_checkpoint += n;
                }
                position.cursor = chunk.cursor;
                for (i, p) in chunk.read {
                    position.read[i] = p;
                }
                progress.advance(chunk.cursor, position.records);
                let due = match args.checkpoint_every {
                    CheckpointEvery::Rows(n) => since_checkpoint >= n,
                    CheckpointEvery::Interval(d) => last_checkpoint_at.elapsed() >= d,
                };
                if due && position.cursor != checkpointed_cursor {
                    sync_bad_records(&mut bad_file, bad_records_path.as_deref(), &mut position)?;
                    let report = coordinator
                        .checkpoint(position.to_json())
                        .await
                        .map_err(|e| {
                            CliError::context(format!("checkpoint of job `{job}` failed"), e)
                        })?;
                    stats.files += report.committed_files;
                    stats.bytes += report.committed_bytes;
                    stats.checkpoints += 1;
                    progress.checkpoint(
                        report.checkpoint_id,
                        position.cursor,
                        position.records,
                        report.committed_files,
                    );
                    since_checkpoint = 0;
                    last_checkpoint_at = Instant::now();
                    checkpointed_cursor = position.cursor;
                }
            }
            Some(Msg::End(cursor, read, bytes_read)) => {
                position.cursor = cursor;
                position.read = read;
                stats.input_bytes = bytes_read;
                sync_bad_records(&mut bad_file, bad_records_path.as_deref(), &mut position)?;
                let report = coordinator.finish(position.to_json()).await.map_err(|e| {
                    CliError::context(format!("last checkpoint of job `{job}` failed"), e)
                })?;
                stats.files += report.committed_files;
                stats.bytes += report.committed_bytes;
                stats.checkpoints += 1;
                progress.finish();
                break;
            }
            Some(Msg::Failed(e)) => {
                progress.abandon();
                // No checkpoint: what was written since the last one stays hidden, and the
                // next run's restore removes it.
                return Err(e);
            }
            None => {
                progress.abandon();
                return Err(CliError::msg("the input reader stopped unexpectedly"));
            }
        }
    }
    let _ = reader.join();

    let elapsed = started.elapsed().as_secs_f64().max(1e-6);
    let records_per_s = stats.records as f64 / elapsed;
    let mb_per_s = stats.input_bytes as f64 / 1e6 / elapsed;
    if args.json {
        let v = serde_json::json!({
            "job": job,
            "status": "finished",
            "location": location.to_string(),
            "records": position.records,
            "records_this_run": stats.records,
            "bad_records": stats.bad_records,
            "files": stats.files,
            "bytes": stats.bytes,
            "checkpoints": stats.checkpoints,
            "last_checkpoint": coordinator.last_checkpoint(),
            "elapsed_s": elapsed,
            "records_per_s": records_per_s,
            "input_mb_per_s": mb_per_s,
        });
        outln!(out, "{v}");
    } else {
        let resumed = if restored.is_some() {
            format!(" (resumed; {} records in total)", position.records)
        } else {
            String::new()
        };
        outln!(
            out,
            "job `{job}` finished: {} records, {} bad, from {} input(s) into `{location}`{resumed}",
            stats.records,
            stats.bad_records,
            inputs.len()
        );
        outln!(
            out,
            "  committed {} file(s), {} in {} checkpoint(s)",
            stats.files,
            human_bytes(stats.bytes),
            stats.checkpoints
        );
        outln!(
            out,
            "  {elapsed:.2} s: {records_per_s:.0} records/s, {mb_per_s:.2} MB/s of input"
        );
    }
    Ok(())
}

/// Infers the schema from the first input that has records (an input without records says
/// nothing about the columns); a schema without columns if none has any.
fn infer_from_inputs(
    inputs: &[Input],
    format: InputFormat,
    strict: bool,
    stdin_deadline: Option<Instant>,
) -> CliResult<(Schema, Option<StdinRecords>)> {
    let mut first = None;
    for input in inputs {
        let (schema, prefix) = infer_schema(input, format, strict, stdin_deadline)?;
        // Standard input cannot be read twice: what it gave is what there is.
        if !schema.fields().is_empty() || input.is_stdin() {
            return Ok((schema, prefix));
        }
        first.get_or_insert((schema, prefix));
    }
    Ok(first.expect("at least one input"))
}

/// Each partition column must be a column of the schema: an argument error otherwise.
fn check_partition_columns(partition_by: &[String], schema: &Schema) -> CliResult {
    for col in partition_by {
        if schema.field_with_name(col).is_err() {
            return Err(CliError::usage(format!(
                "partition column `{col}` is not in the input (columns: {})",
                describe_schema(schema)
            )));
        }
    }
    Ok(())
}

/// The writer's partition check, made per record before the records reach it: a record whose
/// partition value cannot name a directory (longer than 255 bytes once escaped) is a bad
/// record of its own line, not an error of its whole chunk.
fn partition_check(partitioner: HivePartitioner) -> RowCheck {
    let partitioner = partitioner.keep_partition_columns(true);
    Box::new(move |batch: &RecordBatch| {
        let schema = batch.schema();
        let Ok(cols) = partitioner
            .columns()
            .iter()
            .map(|c| schema.index_of(c))
            .collect::<Result<Vec<_>, _>>()
        else {
            return Vec::new(); // the writer reports a missing column
        };
        let Ok(part) = batch.project(&cols) else {
            return Vec::new();
        };
        if names_are_short(&part) {
            return Vec::new();
        }
        let now = chrono::Utc::now();
        if partitioner.assign(&part, now).is_ok() {
            return Vec::new();
        }
        (0..part.num_rows())
            .filter_map(|row| {
                let e = partitioner.assign(&part.slice(row, 1), now).err()?;
                let msg = match e {
                    filesink::Error::InvalidInput(m) => m,
                    other => other.to_string(),
                };
                Some((
                    row,
                    msg.replacen("the value in row 0 of", "the value of", 1),
                ))
            })
            .collect()
    })
}

/// Whether every value of these partition columns surely makes a directory name within the
/// limit (a value escapes to at most 3 bytes per byte); `false` means "check each one".
fn names_are_short(part: &RecordBatch) -> bool {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::DataType;
    part.schema()
        .fields()
        .iter()
        .zip(part.columns())
        .all(|(f, col)| {
            let longest_value_bytes = match col.data_type() {
                DataType::Utf8 => {
                    let a = col.as_string::<i32>();
                    (0..a.len())
                        .map(|i| a.value_length(i) as usize)
                        .max()
                        .unwrap_or(0)
                }
                DataType::LargeUtf8 => {
                    let a = col.as_string::<i64>();
                    (0..a.len())
                        .map(|i| a.value_length(i) as usize)
                        .max()
                        .unwrap_or(0)
                }
                t if t.is_primitive() || *t == DataType::Boolean => 64,
                _ => return false,
            };
            3 * (f.name().len() + 1 + longest_value_bytes) <= 255
        })
}

/// Resolves the inputs; one file given twice, under any two names (`./a` and `a`, a symbolic
/// or hard link, standard input redirected from it), is refused.
fn resolve_inputs(args: &[String]) -> CliResult<Vec<Input>> {
    let inputs = args
        .iter()
        .map(|a| Input::resolve(a))
        .collect::<CliResult<Vec<_>>>()?;
    for (i, a) in inputs.iter().enumerate() {
        if inputs[..i].iter().any(|b| b.canonical == a.canonical) {
            return Err(CliError::usage(format!(
                "input `{}` is given twice; its records would be written twice",
                a.display
            )));
        }
        if let Some(b) = inputs[..i]
            .iter()
            .find(|b| b.file_id.is_some() && b.file_id == a.file_id)
        {
            return Err(CliError::usage(format!(
                "input `{}` is the same file as input `{}` (a link to it); its records would be \
                 written twice",
                a.display, b.display
            )));
        }
    }
    Ok(inputs)
}

/// What a position of version 1 (which recorded only the cursor) says was read of each
/// input: the inputs before the cursor in full as they are now, the cursor's input up to its
/// offset. Their checksums are computed as they are read again, not checked.
fn legacy_read(job: &str, p: &SourcePosition, inputs: &[Input]) -> CliResult<Vec<Prefix>> {
    let mut read = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let prefix = if i < p.cursor.input {
            let offset = input.size_bytes.unwrap_or(0);
            Prefix {
                offset,
                line: 1,
                crc32c: None,
            }
        } else if i == p.cursor.input {
            Prefix {
                offset: p.cursor.offset,
                line: p.cursor.line,
                crc32c: None,
            }
        } else {
            Prefix::START
        };
        read.push(prefix);
    }
    note(&format!(
        "job `{job}` was checkpointed by an older filesink that did not record what it read of \
         its inputs: resuming at {} without checking that they are unchanged",
        inputs
            .get(p.cursor.input)
            .map_or("the end".to_string(), |i| format!(
                "byte {} of `{}`",
                p.cursor.offset, i.display
            ))
    ));
    Ok(read)
}

/// `p` made absolute, with every part of it that exists resolved (symbolic links, `..`).
fn real_path(p: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(p)?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(mut real) = existing.canonicalize() {
            for part in rest.iter().rev() {
                real.push(part);
            }
            return Ok(real);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return Ok(abs),
        }
    }
}

/// The absolute `--bad-records` path, refused inside a local lake (it would be listed as
/// data there) and when it is one of the inputs.
fn check_bad_records_path(path: &Path, lake: &Location, inputs: &[Input]) -> CliResult<PathBuf> {
    let resolve_err =
        |e: std::io::Error| CliError::context(format!("cannot resolve `{}`", path.display()), e);
    let absolute = std::path::absolute(path).map_err(resolve_err)?;
    if let Some(base) = lake.local_path() {
        let real = real_path(path).map_err(resolve_err)?;
        let real_base = real_path(base).map_err(resolve_err)?;
        if real.starts_with(&real_base) {
            return Err(CliError::usage(format!(
                "--bad-records `{}` is inside the lake `{lake}`, where it would be listed as \
                 data; give a path outside it",
                path.display()
            )));
        }
    }
    if let Ok(meta) = std::fs::metadata(path) {
        let id = Some((meta.dev(), meta.ino()));
        if let Some(input) = inputs.iter().find(|i| i.file_id == id) {
            return Err(CliError::usage(format!(
                "--bad-records `{}` is input `{}`",
                path.display(),
                input.display
            )));
        }
    }
    Ok(absolute)
}

fn resolve_input_format(inputs: &[Input], given: Option<InputFormat>) -> CliResult<InputFormat> {
    if let Some(f) = given {
        return Ok(f);
    }
    let mut format = None;
    for input in inputs {
        let f = if input.is_stdin() {
            InputFormat::Jsonl
        } else {
            InputFormat::from_path(&input.display).ok_or_else(|| {
                CliError::usage(format!(
                    "cannot tell the format of `{}` from its name; pass --input-format jsonl or csv",
                    input.display
                ))
            })?
        };
        match format {
            None => format = Some(f),
            Some(g) if g != f => {
                return Err(CliError::usage(
                    "the inputs mix JSON lines and CSV; ingest them as separate jobs",
                ))
            }
            Some(_) => {}
        }
    }
    Ok(format.expect("at least one input"))
}

/// `<stem of the first input>_<8 hex digits of the CRC-32C of all canonical paths>`.
fn default_job(inputs: &[Input]) -> CliResult<String> {
    if inputs.iter().any(Input::is_stdin) {
        return Err(CliError::usage(
            "reading standard input needs --job NAME: a job name cannot be derived from it",
        ));
    }
    let stem = std::path::Path::new(&inputs[0].canonical)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    let mut stem: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(39)
        .collect();
    if stem.is_empty() {
        stem = "input".to_string();
    }
    let mut crc = 0u32;
    for input in inputs {
        crc = crc32c::crc32c_append(crc, input.canonical.as_bytes());
        crc = crc32c::crc32c_append(crc, b"\n");
    }
    Ok(format!("{stem}_{crc:08x}"))
}

fn check_same_job(
    job: &str,
    p: &SourcePosition,
    inputs: &[String],
    format: InputFormat,
    partition_by: &[String],
) -> CliResult {
    if p.inputs != inputs {
        return Err(CliError::msg(format!(
            "job `{job}` was started with other inputs ({}); give the same inputs to resume it, \
             or another --job",
            p.inputs.join(", ")
        )));
    }
    if p.input_format != format {
        return Err(CliError::msg(format!(
            "job `{job}` reads its inputs as {}, not {}",
            p.input_format.name(),
            format.name()
        )));
    }
    if p.partition_by != partition_by {
        return Err(CliError::msg(format!(
            "job `{job}` was started with --partition-by `{}`, not `{}`",
            p.partition_by.join(","),
            partition_by.join(",")
        )));
    }
    Ok(())
}

fn describe_schema(schema: &arrow::datatypes::Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Who writes to the `--bad-records` file, and which of the job's bad records are in it
/// already (written after the restored checkpoint by a run that did not get to the next).
struct BadRecordTags {
    job: String,
    sink_id: String,
    written: HashSet<u64>,
}

/// A line of the `--bad-records` file: the record, the job that set it aside, and its number
/// among the job's bad records (`seq`, from 1). The tags let a resumed run find the lines its
/// job already wrote, without cutting the file back: other jobs may have appended since.
#[derive(serde::Serialize)]
struct BadRecordLine<'a> {
    #[serde(flatten)]
    record: &'a BadRecord,
    job: &'a str,
    sink_id: &'a str,
    seq: u64,
}

/// The tags of a line of the `--bad-records` file.
#[derive(serde::Deserialize)]
struct BadRecordTag {
    job: Option<String>,
    sink_id: Option<String>,
    seq: Option<u64>,
}

/// Opens the `--bad-records` file for appending; it is never cut back. When resuming a job
/// that wrote to it, notes in `tags` the bad records after the restored checkpoint that are
/// in the file already, so that the replayed interval does not list them twice.
fn open_bad_records(
    path: &Path,
    restored: Option<&SourcePosition>,
    tags: &mut BadRecordTags,
) -> CliResult<File> {
    let err = |e| CliError::context(format!("cannot open `{}`", path.display()), e);
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    let len = file.metadata().map_err(err)?.len();
    if len > 0 {
        // A line cut short by a crash: end it, so that the next line is whole.
        let mut last = [0u8];
        file.read_exact_at(&mut last, len - 1).map_err(err)?;
        if last[0] != b'\n' {
            file.write_all(b"\n").map_err(err)?;
        }
    }
    let Some(p) = restored.filter(|p| p.bad_records_file.as_deref() == path.to_str()) else {
        return Ok(file);
    };
    let checkpointed_len = p.bad_records_len.unwrap_or(0);
    if p.read.is_empty() {
        // Version 1 positions come with untagged lines.
        if len > checkpointed_len {
            note(&format!(
                "`{}` may list bad records after byte {checkpointed_len} twice: job `{}` was \
                 checkpointed by an older filesink",
                path.display(),
                tags.job
            ));
        }
        return Ok(file);
    }
    // Lines after the checkpointed length, or all of them in a file that got shorter (then it
    // is another file by the same name).
    let from = if len >= checkpointed_len {
        checkpointed_len
    } else {
        0
    };
    let mut reader = BufReader::new(&file);
    reader.seek(SeekFrom::Start(from)).map_err(err)?;
    let job_key = format!("\"job\":{}", serde_json::Value::from(tags.job.as_str()));
    for line in reader.split(b'\n') {
        let line = line.map_err(err)?;
        if !line.windows(job_key.len()).any(|w| w == job_key.as_bytes()) {
            continue;
        }
        let Ok(tag) = serde_json::from_slice::<BadRecordTag>(&line) else {
            continue;
        };
        if tag.job.as_deref() == Some(&tags.job) && tag.sink_id.as_deref() == Some(&tags.sink_id) {
            if let Some(seq) = tag.seq.filter(|s| *s > p.bad_records) {
                tags.written.insert(seq);
            }
        }
    }
    file.seek(SeekFrom::End(0)).map_err(err)?;
    Ok(file)
}

/// Appends `bad`, the job's bad records number `first_seq` on, except those already written.
fn write_bad_records(
    file: &mut File,
    path: &Path,
    bad: &[BadRecord],
    first_seq: u64,
    tags: &BadRecordTags,
) -> CliResult {
    let mut buf = Vec::new();
    for (seq, b) in (first_seq..).zip(bad) {
        if tags.written.contains(&seq) {
            continue;
        }
        let line = BadRecordLine {
            record: b,
            job: &tags.job,
            sink_id: &tags.sink_id,
            seq,
        };
        serde_json::to_writer(&mut buf, &line).expect("bad records serialize");
        buf.push(b'\n');
    }
    file.write_all(&buf)
        .map_err(|e| CliError::context(format!("cannot write to `{}`", path.display()), e))
}

/// Makes the `--bad-records` file durable and records its length in the position.
fn sync_bad_records(
    file: &mut Option<File>,
    path: Option<&Path>,
    position: &mut SourcePosition,
) -> CliResult {
    if let (Some(f), Some(path)) = (file.as_mut(), path) {
        let err = |e| CliError::context(format!("cannot sync `{}`", path.display()), e);
        f.sync_data().map_err(err)?;
        position.bad_records_len = Some(f.metadata().map_err(err)?.len());
        position.bad_records_file = path.to_str().map(str::to_string);
    }
    Ok(())
}

/// A message on standard error (errors writing it are ignored).
fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "filesink: {msg}");
}

/// Progress on standard error: a bar on a terminal, a line per checkpoint (at most one a
/// second) otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    displays: Vec<String>,
    /// Bytes of the inputs before input `i`.
    before: Vec<u64>,
    total: Option<u64>,
    last_line: Option<Instant>,
}

impl Progress {
    fn new(inputs: &[Input], cursor: Cursor) -> Progress {
        let mut before = Vec::with_capacity(inputs.len() + 1);
        let mut sum = Some(0u64);
        for i in inputs {
            before.push(sum.unwrap_or(0));
            sum = sum.and_then(|s| i.size_bytes.map(|b| s + b));
        }
        before.push(sum.unwrap_or(0));
        let mut p = Progress {
            bar: None,
            displays: inputs.iter().map(|i| i.display.clone()).collect(),
            before,
            total: sum,
            last_line: None,
        };
        if std::io::stderr().is_terminal() {
            let (bar, template) = match p.total {
                Some(total) => (
                    ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()),
                    "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta}) {msg}",
                ),
                None => (
                    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                    "{spinner} [{elapsed_precise}] {bytes} ({bytes_per_sec}) {msg}",
                ),
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_position(p.bytes_done(cursor));
            bar.enable_steady_tick(Duration::from_millis(200));
            p.bar = Some(bar);
        }
        p
    }

    fn bytes_done(&self, cursor: Cursor) -> u64 {
        match self.before.get(cursor.input) {
            Some(b) if cursor.input < self.displays.len() => b + cursor.offset,
            _ => *self.before.last().unwrap_or(&0),
        }
    }

    fn at(&self, cursor: Cursor) -> String {
        match self.displays.get(cursor.input) {
            Some(d) => format!("{d}:{}", cursor.line),
            None => "the end of the input".to_string(),
        }
    }

    fn percent(&self, cursor: Cursor) -> String {
        match self.total {
            Some(t) if t > 0 => format!(
                ", {:.0}% of the input",
                100.0 * self.bytes_done(cursor) as f64 / t as f64
            ),
            _ => String::new(),
        }
    }

    fn advance(&self, cursor: Cursor, records: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(self.bytes_done(cursor));
            bar.set_message(format!("{records} records"));
        }
    }

    fn checkpoint(&mut self, id: u64, cursor: Cursor, records: u64, files: usize) {
        if self.bar.is_some() {
            return;
        }
        if self
            .last_line
            .is_some_and(|t| t.elapsed() < PLAIN_PROGRESS_INTERVAL)
        {
            return;
        }
        self.last_line = Some(Instant::now());
        note(&format!(
            "checkpoint {id}: {records} records, {files} file(s) committed{}",
            self.percent(cursor)
        ));
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn abandon(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(path: &str) -> Input {
        Input {
            display: path.to_string(),
            path: Some(path.into()),
            canonical: path.to_string(),
            size_bytes: Some(0),
            file_id: None,
        }
    }

    #[test]
    fn default_job_is_stem_and_hash_of_the_inputs() {
        let a = default_job(&[input("/data/my-events.2026.jsonl")]).unwrap();
        assert!(a.starts_with("my_events_2026_"), "{a}");
        assert_eq!(a.len(), "my_events_2026_".len() + 8);
        assert!(parse_job(&a).is_ok());
        let b = default_job(&[input("/other/my-events.2026.jsonl")]).unwrap();
        assert_ne!(a, b);
        let long = default_job(&[input(&format!("/d/{}.csv", "x".repeat(100)))]).unwrap();
        assert!(parse_job(&long).is_ok(), "{long}");
    }
}
