//! `filesink ingest`: JSON lines or CSV files into a lake, exactly once.
//!
//! The engine is the library's [`filesink::ingest::Ingest`]; this module builds an `Ingest`
//! from the arguments, shows its progress on standard error and renders its summary. The
//! engine checks its options itself, before anything is created; this module checks only
//! what the flags alone can say (a flag that applies only beside another) and names the
//! engine's refusals by their flags ([`filesink::Setting`]).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::FixedOffset;
use filesink::bucket::parse_time_zone;
use filesink::ingest::{
    CheckpointEvery, Cursor, Ingest, IngestStatus, IngestSummary, Input, InputFormat, Observer,
    SourcePosition, Stage, StageTimes, Step, StopHandle,
};
use filesink::maintain::CompactOptions;
use filesink::storage::LeaseOptions;
use filesink::table::delta::DeltaOptions;
use filesink::{CheckpointReport, FileFormat, MergePolicy, Setting};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::exit::{CliError, CliResult, INPUTS_REFUSED, INPUT_CHANGED, REFUSED};
use super::lake::open_storage;
use super::util::{
    compression_name, human_bytes, parse_checkpoint_every, parse_compression, parse_job,
    parse_rows, parse_size,
};
use filesink::storage::Location;

/// Least time between two plain progress lines when standard error is not a terminal.
const PLAIN_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// The format of the output files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Apache Parquet (Snappy unless --compression says otherwise); a file per bucket and
    /// checkpoint.
    Parquet,
    /// Newline-delimited JSON.
    Jsonl,
    /// CSV with a header line.
    Csv,
}

/// The table format a lake's checkpoints are committed into (`--table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableArg {
    /// A Delta Lake table: each checkpoint appends one version to `_delta_log/`.
    Delta,
}

/// How a table job may change the table's schema (`--schema-evolution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaEvolutionArg {
    /// Add the job's columns the table lacks, nullable.
    AddColumns,
}

/// Which statistics Parquet files carry (`--statistics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatisticsArg {
    /// None.
    None,
    /// Per column chunk (min, max, null count of each column in each row group).
    Chunk,
    /// Per column chunk and per page (the column index).
    Page,
}

impl From<StatisticsArg> for EnabledStatistics {
    fn from(s: StatisticsArg) -> EnabledStatistics {
        match s {
            StatisticsArg::None => EnabledStatistics::None,
            StatisticsArg::Chunk => EnabledStatistics::Chunk,
            StatisticsArg::Page => EnabledStatistics::Page,
        }
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// The format of the input files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormatArg {
    /// Newline-delimited JSON: one object per line (`.jsonl`, `.json`, `.ndjson`).
    Jsonl,
    /// Comma-separated values with a header line (`.csv`).
    Csv,
}

impl From<InputFormatArg> for InputFormat {
    fn from(f: InputFormatArg) -> InputFormat {
        match f {
            InputFormatArg::Jsonl => InputFormat::Jsonl,
            InputFormatArg::Csv => InputFormat::Csv,
        }
    }
}

/// When a run of a source that does not end stops (`--until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UntilArg {
    /// Once every partition is read to its end.
    End,
}

/// Where a Kafka partition is read on from when the broker no longer keeps the offset the lake
/// recorded (`--kafka-offset-reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OffsetResetArg {
    /// From its first offset kept; the offsets passed over are reported as possible loss.
    Earliest,
}

/// What to do with a Kafka partition whose topic was deleted and created again since the lake
/// read it (`--kafka-topic-recreated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TopicRecreatedArg {
    /// Read the new topic from its start into the lake, beside the old topic's records.
    Restart,
}

/// Arguments of `filesink ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Input files: JSON lines (`.jsonl`, `.json`, `.ndjson`) or CSV with a header (`.csv`),
    /// plain or compressed with gzip or zstd (`events.jsonl.gz`, `x.csv.zst`; without such an
    /// extension, told by the first bytes); `-` reads standard input (needs --job);
    /// `s3://bucket/key` reads an object, `s3://bucket/prefix/*.jsonl` every object the glob
    /// matches, in key order (`*`, `?`, `[..]` within a path component, `**` across them).
    /// `kafka://HOST:PORT/TOPIC[,TOPIC…][?partitions=0-3|?group=G]` reads Kafka topics
    /// (alone; needs --schema): each record's value is one record, read committed, from the
    /// offsets the lake recorded; with `group=G`, the partitions consumer group G assigns
    /// (start the same command N times to share them; each process takes a job of its own,
    /// the first free of `<job>_1`, `<job>_2`, … unless --job names one).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<String>,

    /// With a `kafka://` input, `end`: stop once every partition is read to its end (a
    /// backfill). Without it the run reads on until it is stopped.
    #[arg(long, value_enum, value_name = "WHEN")]
    pub until: Option<UntilArg>,

    /// With a `kafka://` input of JSON lines: each record's metadata added to it as columns
    /// `kafka_<COLUMN>`, which --schema names: key, topic, partition, offset, timestamp
    /// (milliseconds since the Unix epoch).
    #[arg(long, value_delimiter = ',', value_name = "COLUMN")]
    pub kafka_columns: Vec<String>,

    /// With a `kafka://` input: a librdkafka setting of the consumer, `KEY=VALUE` (repeat
    /// for more): `security.protocol=SASL_SSL`, `session.timeout.ms=10000`. Those
    /// exactly-once rests on (`isolation.level`, `enable.auto.commit`, `auto.offset.reset`…)
    /// are refused.
    #[arg(long, value_name = "KEY=VALUE")]
    pub kafka_config: Vec<String>,

    /// With a `kafka://` input, `earliest`: a partition whose recorded offset retention
    /// deleted is read on from its first offset kept, and the offsets passed over are reported
    /// as possible loss (`possible_loss` in the summary). Without it such a partition is
    /// refused (exit 7) and nothing is written.
    #[arg(long, value_enum, value_name = "WHERE")]
    pub kafka_offset_reset: Option<OffsetResetArg>,

    /// With a `kafka://` input, `restart`: a partition whose topic was deleted and created
    /// again since the lake read it is read from the new topic's start, its records added
    /// beside the old topic's. Without it such a partition is refused (exit 7) and nothing
    /// is written.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub kafka_topic_recreated: Option<TopicRecreatedArg>,

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
    pub input_format: Option<InputFormatArg>,

    /// The line-end rule: a record is taken with its line end. A file's last line without
    /// one may still be being written: it is taken once the file has been unchanged this
    /// long, and until then left for a later run, which reads it whole. `0s`: the files are
    /// complete, take it at once. Standard input at its end, objects and compressed files are
    /// complete.
    #[arg(long, value_parser = super::util::parse_duration, value_name = "DURATION", default_value = "1h")]
    pub settle: std::time::Duration,

    /// Partition the output Hive-style by these columns (`day=2026-11-30/`), outermost first;
    /// the columns move from the data into the directory names.
    #[arg(long, value_delimiter = ',', value_name = "COL,...")]
    pub partition_by: Vec<String>,

    /// Time directories from a time column, after the --partition-by ones: `COL=PATTERN`,
    /// PATTERN being `/`-separated `name=strftime` components, one directory each
    /// (`ts=dt=%Y-%m-%d/hour=%H` gives `dt=2026-11-30/hour=13`). COL is a timestamp, a date,
    /// or strings holding RFC 3339 timestamps with an offset (`2026-11-30T13:05:00Z`), and
    /// stays in the data; a value that is not a time is a bad record, a null goes to
    /// `name=__HIVE_DEFAULT_PARTITION__`. The directories are in --time-zone (UTC by default).
    #[arg(long, value_name = "COL=PATTERN")]
    pub partition_by_time: Option<String>,

    /// Time zone of the --partition-by-time directories: `UTC` (the default) or a fixed
    /// offset `+HH:MM` / `-HH:MM`, whatever offset the values carry.
    #[arg(long, value_parser = parse_time_zone_arg, value_name = "UTC|+HH:MM|-HH:MM", allow_hyphen_values = true)]
    pub time_zone: Option<FixedOffset>,

    /// How often to checkpoint (make the output visible and remember the input position):
    /// a row count like `100000rows` or a duration like `200ms` or `10s`. With a duration,
    /// records become visible within about one interval plus the commit, however slowly they
    /// arrive.
    #[arg(long, default_value = "100000rows", value_parser = parse_checkpoint_every, value_name = "ROWS|DURATION")]
    pub checkpoint_every: CheckpointEvery,

    /// Roll a part file once it reaches this size (`64MiB`, `1GB`); default 128 MiB.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub max_part_size: Option<u64>,

    /// Parquet codec: `snappy` (the default), `zstd[=LEVEL]` (1 to 22, default 3),
    /// `gzip[=LEVEL]` (0 to 9, default 6), `lz4` (Parquet's LZ4_RAW) or `none`. Parquet
    /// output only.
    #[arg(long, value_parser = parse_compression, value_name = "CODEC")]
    pub compression: Option<Compression>,

    /// Most rows in a Parquet row group (default 1048576); a file ends at every checkpoint,
    /// so its row groups hold at most a checkpoint's rows too. Parquet output only.
    #[arg(long, value_parser = parse_rows, value_name = "ROWS")]
    pub row_group_size: Option<usize>,

    /// Statistics in Parquet files: `none`, `chunk` (per column chunk) or `page` (also per
    /// page; the default). Parquet output only.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub statistics: Option<StatisticsArg>,

    /// Dictionary encoding of Parquet columns: `on` (the default: where values repeat; a
    /// column whose first values in a file are mostly distinct is written plain) or `off`.
    /// Parquet output only.
    #[arg(long, value_enum, value_name = "on|off")]
    pub dictionary: Option<Switch>,

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
    /// "input":…,"job":…,"sink_id":…,"seq":…}` (`input`: the file's canonical path; `seq`: the
    /// job's n-th bad record), and go on; by default
    /// the first malformed record stops the run. Several jobs may share the file; nothing in
    /// it is ever removed. It may not be inside the lake.
    #[arg(long, value_name = "FILE")]
    pub bad_records: Option<PathBuf>,

    /// On an object store, how long a killed run keeps its job from a rerun: its claim
    /// expires this long after its last renewal (`30s` by default; at least `1s`). A live
    /// run renews it every third of this. On local disk the job is free the moment the run
    /// dies.
    #[arg(long, value_parser = super::util::parse_duration, value_name = "DURATION")]
    pub lease_ttl: Option<std::time::Duration>,

    /// Writers that encode at the same time (default: the cores available for a new job; a
    /// resumed job keeps the number it started with). Each partition goes to one writer.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), value_name = "N")]
    pub parallelism: Option<u16>,

    /// What the writers may hold in memory together: encoder and upload buffers (default
    /// 512MiB). Files roll early rather than exceed it.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub memory: Option<u64>,

    /// Commit every checkpoint into a table at --to as well: `delta` appends one version to
    /// the Delta log (`_delta_log/`) per checkpoint, whose `txn` names the job and the
    /// checkpoint, so table readers (Spark, delta-rs, DuckDB, Trino) see each checkpoint
    /// once, atomically. Parquet only.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub table: Option<TableArg>,

    /// Plain directories, Parquet: hold back part files smaller than SIZE
    /// (`16MiB`) instead of committing them, hidden, and merge a partition's held files into
    /// one part file once they reach --merge-target, once the oldest has waited
    /// --max-visibility-delay, or at the end of the input. Readers of the directory never see
    /// small files; records become visible up to that delay later, and held bytes are written
    /// twice. On s3:// a file is held only while it is below the multipart part size (8 MiB),
    /// as one hidden object. Not with --table delta (`filesink compact` merges a table's
    /// files).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub merge_small_files: Option<u64>,

    /// With --merge-small-files: the size at which a partition's held files are merged
    /// (default 8 times --merge-small-files).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub merge_target: Option<u64>,

    /// With --merge-small-files: the longest a held file waits before it is committed, merged
    /// with the others of its partition (default 60s); a record is visible at most this long
    /// plus one checkpoint interval after the checkpoint that held it. With --format jsonl or
    /// csv: the longest a part file stays open across checkpoints (by default every part file
    /// rolls at every checkpoint, so a record is visible once the checkpoint after it commits).
    #[arg(long, value_parser = super::util::parse_duration, value_name = "DURATION")]
    pub max_visibility_delay: Option<std::time::Duration>,

    /// With --table delta: compact the table while the run appends to it, and once more at
    /// its end: a round every --compact-every rewrites each partition's files smaller than
    /// half of --compact-target-size into files of that size, swapped in by one table version
    /// (readers never see a row twice). The rounds are the job `<job>_compact`; one that fails
    /// is reported and finished by the next, the run goes on.
    #[arg(long)]
    pub compact: bool,

    /// With --compact: the size compacted files aim at (default 128MiB).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub compact_target_size: Option<u64>,

    /// With --compact: the time between rounds (default 60s).
    #[arg(long, value_parser = super::util::parse_duration, value_name = "DURATION")]
    pub compact_every: Option<std::time::Duration>,

    /// With --table, on a store that ignores conditional writes (Garage): this run is the
    /// table's only writer. Without it such a store is refused, because two writers could
    /// overwrite each other's log entries.
    #[arg(long)]
    pub single_writer: bool,

    /// With --table delta: `add-columns` lets a job whose records have top-level columns the
    /// table lacks add them, nullable, in the log entry of its first files (rows written
    /// before read them as null). Without it such a job is refused, nothing written.
    #[arg(long, value_enum, value_name = "MODE")]
    pub schema_evolution: Option<SchemaEvolutionArg>,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_time_zone_arg(s: &str) -> Result<FixedOffset, String> {
    parse_time_zone(s).map_err(|e| match e {
        filesink::Error::Config(m) => m,
        e => e.to_string(),
    })
}

/// Runs `filesink ingest`.
pub async fn run(args: IngestArgs, out: &mut dyn Write) -> CliResult {
    let started = Instant::now();
    // Every argument is checked before anything is created (the options by the library's plan
    // of the run, what only the flags can say by `Run::resolve`): an invalid one exits 2 and
    // leaves no lake, no `sink.json`, no job behind.
    let stop = stop_on_signals();
    let (mut run, summary) = run_in_a_slot(&args, &stop).await?;
    let Some(summary) = summary else {
        return nothing_matched(out, args.json, &run.unmatched);
    };
    if !summary.job.is_empty() {
        // Named after the inputs it read (`ledger::survey`), fewer than were given.
        run.job = summary.job.clone();
    }
    match summary.status {
        // No job opened: every input was read before, unchanged, or refused.
        IngestStatus::AlreadyFinished
            if summary.unchanged + summary.refused.len() == run.inputs =>
        {
            nothing_new(out, args.json, &summary)?
        }
        IngestStatus::AlreadyFinished => already_finished(out, args.json, &summary.job, &summary)?,
        _ => {
            let rates = Rates::of(&summary, started);
            if args.json {
                let v = finished_json(&run, &summary, &rates);
                outln!(out, "{v}");
            } else {
                finished_text(out, &run, &summary, &rates)?;
            }
        }
    }
    match summary.refused.len() {
        0 => Ok(()),
        n if summary.status == IngestStatus::AlreadyFinished => Err(CliError::new(
            INPUT_CHANGED,
            format!(
                "{n} input(s) refused: each changed within what the lake took of it (above); \
                 nothing was written"
            ),
        )),
        n => Err(CliError::new(
            INPUTS_REFUSED,
            format!(
                "{n} input(s) refused: each changed within what the lake took of it (above); \
                 the other inputs were taken"
            ),
        )),
    }
}

/// The summary of a run whose inputs were all read to their end before (or refused).
fn nothing_new(out: &mut dyn Write, json: bool, summary: &IngestSummary) -> CliResult {
    let unchanged = summary.unchanged;
    if json {
        // The status a rerun of a finished job has always had: nothing to do.
        let v = serde_json::json!({
            "status": "already_finished",
            "job": null,
            "unchanged": unchanged,
            "records": 0,
            "refused": summary.refused,
        });
        outln!(out, "{v}");
    } else {
        if unchanged > 0 {
            outln!(
                out,
                "already finished: the {unchanged} input(s) were read to their end before and \
                 did not change; nothing to do"
            );
        } else {
            outln!(out, "nothing to do: every input was refused");
        }
        refused_text(out, &summary.refused)?;
    }
    Ok(())
}

/// The inputs refused, a line each.
fn refused_text(out: &mut dyn Write, refused: &[String]) -> CliResult {
    for r in refused {
        outln!(out, "  refused: {r}");
    }
    Ok(())
}

/// A stop handle that SIGTERM and SIGINT pull: the first stops the run at a checkpoint (its
/// records visible, exit 0); a second ends the process at once, without one (the next run
/// reads on from the last checkpoint), with the exit code a shell gives a killed command.
fn stop_on_signals() -> StopHandle {
    let stop = StopHandle::new();
    let handle = stop.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        for seen in 0.. {
            let code = tokio::select! {
                _ = term.recv() => 128 + libc::SIGTERM,
                _ = int.recv() => 128 + libc::SIGINT,
            };
            if seen > 0 {
                eprintln!("filesink: stopped without a checkpoint");
                std::process::exit(code);
            }
            eprintln!(
                "filesink: stopping at a checkpoint (a second signal stops at once, without one)"
            );
            handle.stop();
        }
    });
    stop
}

/// What a run's messages say of its arguments.
struct Run {
    /// Where to write (`--to`).
    location: Location,
    /// The output format's codec as `--compression` spells it.
    codec: String,
    /// How many inputs the arguments resolved to.
    inputs: usize,
    /// The globs that matched no input.
    unmatched: Vec<String>,
    /// The job name, given or derived from the inputs.
    job: String,
    /// The input is a Kafka consumer group's (`kafka://…?group=G`).
    in_group: bool,
}

impl Run {
    /// The engine the arguments ask for, and what messages say of them. Creates nothing:
    /// the output is created only once the job is known to start. Checks here only what the
    /// flags alone can say (a flag that needs another); the engine checks the options
    /// themselves, before anything is created, and [`ingest_error`] names their flags.
    async fn resolve(args: &IngestArgs) -> CliResult<(Run, Ingest)> {
        let location = Location::parse(&args.to)?;
        let (format, codec) = output_format(args)?;
        let (inputs, unmatched, ingest) = match kafka_source(args).await? {
            Some(ingest) => (0, Vec::new(), ingest),
            None => {
                if args.until.is_some()
                    || !args.kafka_columns.is_empty()
                    || !args.kafka_config.is_empty()
                    || args.kafka_offset_reset.is_some()
                    || args.kafka_topic_recreated.is_some()
                {
                    return Err(CliError::usage(
                        "--until and the --kafka-… options apply to a kafka:// input",
                    ));
                }
                let (inputs, unmatched) = resolve_inputs(&args.inputs).await?;
                (inputs.len(), unmatched, Ingest::new(inputs))
            }
        };
        let mut ingest = ingest
            .format(format)
            .partition_by(args.partition_by.clone())
            .checkpoint_every(args.checkpoint_every)
            .lease_ttl(args.lease_ttl.unwrap_or(LeaseOptions::DEFAULT_TTL));
        if let Some(f) = args.input_format {
            ingest = ingest.input_format(f.into());
        }
        if let Some(job) = &args.job {
            ingest = ingest.job(job.clone());
        }
        ingest = ingest.settle(args.settle);
        ingest = match &location {
            // Created only once the job is known to start.
            Location::Local(path) => ingest.to_local(path),
            Location::S3 { .. } => {
                let (storage, _) = open_storage(&location).map_err(|e| {
                    CliError::context(format!("cannot use `{location}` as output"), e)
                })?;
                ingest.to_storage(storage)
            }
        };
        if let Some(spec) = &args.partition_by_time {
            let Some((column, pattern)) = spec.split_once('=') else {
                return Err(CliError::usage(format!(
                    "invalid --partition-by-time: {spec:?} is not COL=PATTERN, e.g. \
                     `ts=dt=%Y-%m-%d/hour=%H`"
                )));
            };
            ingest = ingest.partition_by_time(column, pattern);
        }
        if let Some(zone) = args.time_zone {
            ingest = ingest.time_zone(zone);
        }
        if let Some(path) = args.schema.as_deref() {
            ingest = ingest.schema(read_schema_file(path)?);
        }
        if let Some(n) = args.parallelism {
            ingest = ingest.parallelism(n.into());
        }
        ingest = table(ingest, args, &location)?;
        if let Some((options, every)) = compaction(args)? {
            ingest = ingest.compact_in_background(options, every);
        }
        if let Some(policy) = merge_policy(args)? {
            ingest = ingest.merge_small_files(policy);
        } else if let Some(delay) = args.max_visibility_delay {
            ingest = ingest.max_visibility_delay(delay);
        }
        if let Some(bytes) = args.memory {
            ingest = ingest.memory_bytes_max(bytes);
        }
        if let Some(bytes) = args.max_part_size {
            ingest = ingest.part_size_bytes_max(bytes);
        }
        if let Some(path) = &args.bad_records {
            ingest = ingest.bad_records(path.clone());
        }
        let run = Run {
            location,
            codec,
            inputs,
            unmatched,
            job: ingest.job_name().unwrap_or_default(),
            in_group: args
                .inputs
                .first()
                .is_some_and(|i| i.starts_with("kafka://") && kafka_group(i)),
        };
        Ok((run, ingest))
    }
}

/// Whether `url`, a `kafka://` input, joins a consumer group (`group=` in its query).
fn kafka_group(url: &str) -> bool {
    url.split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|p| p.starts_with("group=")))
}

/// The ingest of a `kafka://` input, connected to its cluster, with the job named after it
/// unless `--job` names it; `None` for other inputs.
async fn kafka_source(args: &IngestArgs) -> CliResult<Option<Ingest>> {
    if !args.inputs.iter().any(|i| i.starts_with("kafka://")) {
        return Ok(None);
    }
    if args.inputs.len() > 1 {
        return Err(CliError::usage(
            "a kafka:// input is read alone, not beside other inputs",
        ));
    }
    connect_kafka(args).await.map(Some)
}

#[cfg(feature = "kafka")]
async fn connect_kafka(args: &IngestArgs) -> CliResult<Ingest> {
    let url = args.inputs[0].as_str();
    let mut kafka: filesink::ingest::Kafka = url.parse().map_err(ingest_error)?;
    if args.until == Some(UntilArg::End) {
        kafka = kafka.until_end();
    }
    if args.kafka_offset_reset == Some(OffsetResetArg::Earliest) {
        kafka = kafka.offset_reset_earliest();
    }
    if args.kafka_topic_recreated == Some(TopicRecreatedArg::Restart) {
        kafka = kafka.restart_recreated_topics();
    }
    if !args.kafka_columns.is_empty() {
        if args.input_format == Some(InputFormatArg::Csv) {
            return Err(CliError::usage(
                "--kafka-columns adds fields to JSON records; it does not apply to \
                 --input-format csv",
            ));
        }
        let columns = args
            .kafka_columns
            .iter()
            .map(|c| c.parse::<filesink::ingest::KafkaColumn>())
            .collect::<filesink::Result<Vec<_>>>()
            .map_err(ingest_error)?;
        kafka = kafka.columns(columns);
    }
    for setting in &args.kafka_config {
        let Some((key, value)) = setting.split_once('=') else {
            return Err(CliError::usage(format!(
                "invalid --kafka-config: {setting:?} is not KEY=VALUE"
            )));
        };
        kafka = kafka.config(key, value).map_err(ingest_error)?;
    }
    let source = tokio::task::spawn_blocking(move || kafka.connect())
        .await
        .map_err(|e| CliError::msg(format!("connecting to Kafka failed: {e}")))?
        .map_err(|e| CliError::context(format!("cannot read `{url}`"), e))?;
    let job = source.default_job_name();
    Ok(Ingest::from_source(source).job(job))
}

#[cfg(not(feature = "kafka"))]
async fn connect_kafka(_args: &IngestArgs) -> CliResult<Ingest> {
    Err(CliError::usage(
        "this filesink was built without Kafka (the `kafka` feature)",
    ))
}

/// `ingest` committing into the table at `location` the arguments ask for (`--table`,
/// `--single-writer`, `--schema-evolution`), if any.
fn table(ingest: Ingest, args: &IngestArgs, location: &Location) -> CliResult<Ingest> {
    match args.table {
        Some(TableArg::Delta) => Ok(ingest.delta_table(
            DeltaOptions::new()
                .single_writer(args.single_writer)
                .add_columns(args.schema_evolution == Some(SchemaEvolutionArg::AddColumns))
                .location(location.to_string()),
        )),
        None if args.schema_evolution.is_some() => Err(CliError::usage(
            "--schema-evolution changes a table's schema; it needs --table delta",
        )),
        None if args.single_writer => Err(CliError::usage(
            "--single-writer is about a table's writers; it needs --table delta",
        )),
        None => Ok(ingest),
    }
}

/// Runs the engine with its progress on standard error; an error says where the run failed.
/// The most jobs a consumer group's processes take without `--job` (`<job>_1` to
/// `<job>_64`).
const SLOTS_MAX: usize = 64;

/// Runs the ingest the arguments ask for. A process of a Kafka consumer group without
/// `--job` takes the first *slot* no live run holds: job `<job>_1`, `<job>_2`, … So a
/// restarted process takes its job back once its last run is gone, and the lake keeps as many
/// jobs as processes ran at once. A slot a live run holds (found as the job opens, so two
/// processes starting at once do not both take one) is passed over; the source connects
/// again for the next.
/// `None` for a run whose globs matched no input: nothing is done.
async fn run_in_a_slot(
    args: &IngestArgs,
    stop: &StopHandle,
) -> CliResult<(Run, Option<IngestSummary>)> {
    for slot in 1..=SLOTS_MAX {
        let (mut run, mut ingest) = Run::resolve(args).await?;
        if run.inputs == 0 && !run.unmatched.is_empty() {
            // Nothing to read: no lake is created, no job opened.
            return Ok((run, None));
        }
        let slotted = run.in_group && args.job.is_none();
        if slotted {
            run.job = format!("{}_{slot}", run.job);
            ingest = ingest.job(run.job.clone());
        }
        let ingest = ingest.stop_handle(stop.clone());
        match run_engine(ingest, &run, slotted).await? {
            Some(summary) => return Ok((run, Some(summary))),
            None => continue,
        }
    }
    Err(CliError::new(
        REFUSED,
        format!("every job slot of this consumer group (1 to {SLOTS_MAX}) is held by a live run"),
    ))
}

/// Runs `ingest`. `None`: `slotted`, and its job is held by a live run, found as it opened
/// (nothing was read or changed).
async fn run_engine(ingest: Ingest, run: &Run, slotted: bool) -> CliResult<Option<IngestSummary>> {
    let (job, location) = (&run.job, &run.location);
    let mut progress = Progress::default();
    match ingest.run_with(&mut progress).await {
        Ok(summary) => Ok(Some(summary)),
        Err(filesink::Error::JobBusy { job: busy, .. })
            if slotted
                && &busy == job
                && matches!(progress.failed_at, None | Some(Step::Open | Step::Prepare)) =>
        {
            Ok(None)
        }
        Err(e) => {
            let context = match progress.failed_at {
                Some(Step::Open) => format!("cannot open job `{job}` in `{location}`"),
                Some(Step::FirstCheckpoint) => format!("first checkpoint of job `{job}` failed"),
                Some(Step::Write(cursor)) => {
                    format!("cannot write the records before {}", progress.at(cursor))
                }
                Some(Step::Checkpoint) => format!("checkpoint of job `{job}` failed"),
                Some(Step::LastCheckpoint) => format!("last checkpoint of job `{job}` failed"),
                _ => return Err(ingest_error(e)),
            };
            Err(CliError::context(context, e))
        }
    }
}

/// The summary of a run whose globs (`unmatched`) matched no input: nothing to do, exit 0.
fn nothing_matched(out: &mut dyn Write, json: bool, unmatched: &[String]) -> CliResult {
    if json {
        let v = serde_json::json!({
            "status": "no_input",
            "unmatched": unmatched,
            "records": 0,
        });
        outln!(out, "{v}");
    } else {
        outln!(
            out,
            "no input matches `{}`; nothing to do",
            unmatched.join("`, `")
        );
    }
    Ok(())
}

/// The summary of a run that found job `job` finished already.
fn already_finished(
    out: &mut dyn Write,
    json: bool,
    job: &str,
    summary: &IngestSummary,
) -> CliResult {
    let records = summary.records_total;
    if json {
        let v = serde_json::json!({
            "job": job,
            "status": "already_finished",
            "checkpoint": summary.last_checkpoint,
            "records": records,
            "waiting": summary.waiting,
            "refused": summary.refused,
            "compaction": summary.compaction.as_ref().map(compaction_json),
        });
        outln!(out, "{v}");
    } else {
        outln!(
            out,
            "job `{job}` already finished at checkpoint {} ({records} records); nothing to do",
            summary.last_checkpoint
        );
        if let Some(c) = &summary.compaction {
            compaction_text(c, out)?;
        }
        waiting_text(out, &summary.waiting)?;
        refused_text(out, &summary.refused)?;
    }
    Ok(())
}

/// How fast a run went.
struct Rates {
    /// Seconds since the command started.
    elapsed: f64,
    /// Records written per second.
    records_per_s: f64,
    /// Megabytes of input read per second.
    mb_per_s: Option<f64>,
    /// Uncompressed input bytes read per byte committed.
    ratio: Option<f64>,
}

impl Rates {
    /// The rates of the run `summary` tells of, for a command started at `started`.
    fn of(summary: &IngestSummary, started: Instant) -> Rates {
        let elapsed = started.elapsed().as_secs_f64().max(1e-6);
        let records_per_s = summary.records as f64 / elapsed;
        // A run that ends on a signal is not told what its source read: no figure beats a
        // wrong one.
        let known = summary.input_bytes > 0 || summary.records == 0;
        let mb_per_s = known.then(|| summary.input_bytes as f64 / 1e6 / elapsed);
        // Uncompressed input bytes read per byte committed (headers and blank lines count; a
        // resumed run counts what it read and committed itself).
        let ratio =
            (known && summary.bytes > 0).then(|| summary.input_bytes as f64 / summary.bytes as f64);
        Rates {
            elapsed,
            records_per_s,
            mb_per_s,
            ratio,
        }
    }
}

/// How a summary names the way a run ended.
fn status_word(status: IngestStatus) -> &'static str {
    match status {
        IngestStatus::Interrupted => "interrupted",
        IngestStatus::Stopped => "stopped",
        _ => "finished",
    }
}

/// The summary of a finished run, as JSON.
fn finished_json(run: &Run, summary: &IngestSummary, rates: &Rates) -> serde_json::Value {
    serde_json::json!({
        "job": run.job,
        "status": status_word(summary.status),
        "location": run.location.to_string(),
        "records": summary.records_total,
        "records_this_run": summary.records,
        "bad_records": summary.bad_records,
        "files": summary.files,
        "bytes": summary.bytes,
        "checkpoints": summary.checkpoints,
        "last_checkpoint": summary.last_checkpoint,
        "elapsed_s": rates.elapsed,
        "records_per_s": rates.records_per_s,
        "input_mb_per_s": rates.mb_per_s,
        "input_bytes": rates.mb_per_s.map(|_| summary.input_bytes),
        "compression": run.codec,
        "compression_ratio": rates.ratio,
        "stage_seconds": {
            "input": summary.stage_times.input.as_secs_f64(),
            "write": summary.stage_times.write.as_secs_f64(),
            "checkpoint": summary.stage_times.checkpoint.as_secs_f64(),
        },
        "limited_by": summary.stage_times.limiting().map(|s| match s {
            Stage::Input => "input",
            Stage::Write => "write",
            Stage::Checkpoint => "checkpoint",
        }),
        "compaction": summary.compaction.as_ref().map(compaction_json),
        "waiting": summary.waiting,
        "unchanged": summary.unchanged,
        "refused": summary.refused,
        "possible_loss": summary.skipped.iter().map(|s| serde_json::json!({
            "part": s.part,
            "from": s.from,
            "to": s.to,
            "reason": s.reason,
        })).collect::<Vec<_>>(),
    })
}

/// The summary of a finished run, as text.
fn finished_text(
    out: &mut dyn Write,
    run: &Run,
    summary: &IngestSummary,
    rates: &Rates,
) -> CliResult {
    let (job, location, codec) = (&run.job, &run.location, &run.codec);
    let Rates {
        elapsed,
        records_per_s,
        mb_per_s,
        ratio,
    } = rates;
    let resumed = if summary.resumed {
        format!(" (resumed; {} records in total)", summary.records_total)
    } else {
        String::new()
    };
    outln!(
        out,
        "job `{job}` {}: {} records, {} bad, from {} input(s) into `{location}`{resumed}",
        status_word(summary.status),
        summary.records,
        summary.bad_records,
        run.inputs
    );
    outln!(
        out,
        "  committed {} file(s), {} in {} checkpoint(s)",
        summary.files,
        human_bytes(summary.bytes),
        summary.checkpoints
    );
    match mb_per_s {
        Some(mb_per_s) => outln!(
            out,
            "  {elapsed:.2} s: {records_per_s:.0} records/s, {mb_per_s:.2} MB/s of input"
        ),
        None => outln!(out, "  {elapsed:.2} s: {records_per_s:.0} records/s"),
    }
    let ratio = ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
    outln!(
        out,
        "  compression {codec}: ratio {ratio} (uncompressed input bytes read / bytes committed)"
    );
    if summary.stage_times.limiting().is_some() {
        outln!(out, "  {}", summary.stage_times.describe());
    }
    if let Some(c) = &summary.compaction {
        compaction_text(c, out)?;
    }
    if summary.unchanged > 0 {
        outln!(
            out,
            "  {} other input(s) were read to their end before and did not change: passed over",
            summary.unchanged
        );
    }
    waiting_text(out, &summary.waiting)?;
    refused_text(out, &summary.refused)?;
    for s in &summary.skipped {
        outln!(
            out,
            "  possible loss: `{}` offsets {}..{} were passed over ({})",
            s.part,
            s.from,
            s.to,
            s.reason
        );
    }
    Ok(())
}

/// The files whose last line waits for its line end (the line-end rule), a line each.
fn waiting_text(out: &mut dyn Write, waiting: &[String]) -> CliResult {
    for w in waiting {
        outln!(
            out,
            "  waiting: the last line of `{w}` has no line end yet; a later run takes it once it \
             ends, or once the file is unchanged for --settle"
        );
    }
    Ok(())
}

/// The summary line of background compaction, as JSON.
fn compaction_json(c: &filesink::ingest::CompactionSummary) -> serde_json::Value {
    serde_json::json!({
        "job": c.job,
        "rounds": c.rounds,
        "abandoned": c.abandoned,
        "busy": c.busy,
        "failed": c.failed,
        "files_removed": c.files_removed,
        "files_added": c.files_added,
        "bytes_added": c.bytes_added,
        "last_error": c.last_error,
    })
}

/// The summary lines of background compaction, as text.
fn compaction_text(c: &filesink::ingest::CompactionSummary, out: &mut dyn Write) -> CliResult {
    outln!(
        out,
        "  compaction (job `{}`): {} round(s) merged {} file(s) into {}, {}; \
         {} abandoned, {} skipped (another compactor ran), {} failed",
        c.job,
        c.rounds,
        c.files_removed,
        c.files_added,
        human_bytes(c.bytes_added),
        c.abandoned,
        c.busy,
        c.failed
    );
    if let Some(e) = &c.last_error {
        outln!(
            out,
            "  last compaction error: {e} (the next `--compact` run or `filesink compact \
             --job {}` finishes that round)",
            c.job
        );
    }
    Ok(())
}

/// The output format the arguments ask for, and its codec as `--compression` spells it
/// (`none` for JSON lines and CSV). The Parquet options with another format are a usage
/// error.
fn output_format(args: &IngestArgs) -> CliResult<(FileFormat, String)> {
    let parquet_only = [
        ("--compression", args.compression.is_some()),
        ("--row-group-size", args.row_group_size.is_some()),
        ("--statistics", args.statistics.is_some()),
        ("--dictionary", args.dictionary.is_some()),
    ];
    let other = match args.format {
        OutputFormat::Parquet => {
            let codec = args.compression.unwrap_or(Compression::SNAPPY);
            let mut props = WriterProperties::builder().set_compression(codec);
            if let Some(rows) = args.row_group_size {
                props = props.set_max_row_group_row_count(Some(rows));
            }
            if let Some(s) = args.statistics {
                props = props.set_statistics_enabled(s.into());
            }
            if let Some(d) = args.dictionary {
                props = props.set_dictionary_enabled(d == Switch::On);
            }
            let format = FileFormat::parquet_with(props.build());
            return Ok((format, compression_name(codec)));
        }
        OutputFormat::Jsonl => (FileFormat::json_lines(), "jsonl"),
        OutputFormat::Csv => (FileFormat::csv(), "csv"),
    };
    if let Some((flag, _)) = parquet_only.iter().find(|(_, given)| *given) {
        return Err(CliError::usage(format!(
            "{flag} applies to Parquet output only, not to --format {}",
            other.1
        )));
    }
    Ok((other.0, "none".to_string()))
}

/// The background compaction the arguments ask for (`--compact`, `--compact-target-size`,
/// `--compact-every`).
fn compaction(args: &IngestArgs) -> CliResult<Option<(CompactOptions, std::time::Duration)>> {
    if !args.compact {
        for (flag, given) in [
            ("--compact-target-size", args.compact_target_size.is_some()),
            ("--compact-every", args.compact_every.is_some()),
        ] {
            if given {
                return Err(CliError::usage(format!(
                    "{flag} applies to background compaction; it needs --compact"
                )));
            }
        }
        return Ok(None);
    }
    let mut options = CompactOptions::new();
    if let Some(bytes) = args.compact_target_size {
        options = options.target_size_bytes(bytes);
    }
    let every = args
        .compact_every
        .unwrap_or(std::time::Duration::from_secs(60));
    Ok(Some((options, every)))
}

/// The pre-commit merge the arguments ask for (`--merge-small-files`, `--merge-target`,
/// `--max-visibility-delay`): plain directories of Parquet files.
fn merge_policy(args: &IngestArgs) -> CliResult<Option<MergePolicy>> {
    let Some(small) = args.merge_small_files else {
        if args.merge_target.is_some() {
            return Err(CliError::usage(
                "--merge-target applies to the pre-commit merge; it needs --merge-small-files",
            ));
        }
        // Without the merge, the delay is the row files' (`Ingest::max_visibility_delay`).
        return Ok(None);
    };
    let mut policy = MergePolicy::new(small);
    if let Some(target) = args.merge_target {
        policy = policy.with_target_bytes(target);
    }
    if let Some(delay) = args.max_visibility_delay {
        policy = policy.with_max_visibility_delay(delay);
    }
    Ok(Some(policy))
}

/// The exit code and message of an error of the ingestion engine: what the engine refuses
/// about its input is a general error (1) told in its own words, a setting it refuses is a
/// usage error (2), a changed input has its own code (7); the rest maps as every library
/// error does.
fn ingest_error(e: filesink::Error) -> CliError {
    if let Some(m) = e.setting_message(&flag) {
        return CliError::usage(m);
    }
    match e {
        filesink::Error::InvalidInput(m) => CliError::msg(m),
        filesink::Error::Config(m) => CliError::usage(m),
        filesink::Error::InputChanged(m) => CliError::new(INPUT_CHANGED, m),
        e => e.into(),
    }
}

/// The flag that sets an option of the engine.
fn flag(setting: Setting) -> String {
    match setting {
        Setting::Inputs => "the inputs",
        Setting::InputFormat => "--input-format",
        Setting::Format => "--format",
        Setting::PartitionBy => "--partition-by",
        Setting::PartitionByTime => "--partition-by-time",
        Setting::TimeZone => "--time-zone",
        Setting::Schema => "--schema",
        Setting::BadRecords => "--bad-records",
        Setting::Job => "--job",
        Setting::LeaseTtl => "--lease-ttl",
        Setting::Parallelism => "--parallelism",
        Setting::DeltaTable => "--table delta",
        Setting::MergeSmallFiles => "--merge-small-files",
        Setting::MaxVisibilityDelay => "--max-visibility-delay",
        Setting::CompactInBackground => "--compact",
        _ => setting.method(),
    }
    .to_string()
}

/// Resolves the inputs: `-`, files and `s3://` objects, or globs of either (each match an
/// input, in byte order of its name: `glob.rs`). Returns them, and the globs that matched
/// nothing (an empty set, not an error: a cron run may come before the first file). One file
/// given twice, under any two names, is the engine's to refuse.
async fn resolve_inputs(args: &[String]) -> CliResult<(Vec<Input>, Vec<String>)> {
    let mut inputs: Vec<Input> = Vec::with_capacity(args.len());
    let mut unmatched = Vec::new();
    // Where each file (device and inode) is in `inputs`.
    let mut files: std::collections::HashMap<(u64, u64), usize> = std::collections::HashMap::new();
    for a in args {
        let open_error = |e| match e {
            filesink::Error::Io { source, .. } => {
                CliError::context(format!("cannot open input `{a}`"), source)
            }
            e => ingest_error(e),
        };
        let matched = if Location::s3_rest(a).is_some() {
            Input::s3(a).await.map_err(open_error)?
        } else if a == "-" {
            vec![Input::stdin()]
        } else {
            Input::files_matching(a).map_err(open_error)?
        };
        if matched.is_empty() {
            note(&format!("`{a}` matches no input"));
            unmatched.push(a.clone());
        }
        for input in matched {
            // Names of one file that globs match are one input; one named twice outright is
            // the engine's to refuse.
            let seen = input
                .file_id
                .and_then(|id| files.get(&id))
                .map(|&i| &inputs[i]);
            match seen {
                Some(first) if a.contains(['*', '?', '[']) => note(&format!(
                    "`{}` is the same file as `{}`: taken once, as `{}`",
                    input.display, first.display, first.display
                )),
                _ => {
                    if let Some(id) = input.file_id {
                        files.entry(id).or_insert(inputs.len());
                    }
                    inputs.push(input);
                }
            }
        }
    }
    Ok((inputs, unmatched))
}

/// Reads a `--schema` file: the serde JSON of an arrow schema.
fn read_schema_file(path: &Path) -> CliResult<arrow::datatypes::Schema> {
    let bytes = std::fs::read(path).map_err(|e| {
        CliError::usage(format!("cannot read schema file `{}`", path.display())).caused_by(e)
    })?;
    serde_json::from_slice(&bytes)
        .map(filesink::ingest::json_types::exact_in_every_format)
        .map_err(|e| {
            CliError::usage(format!(
                "`{}` is not an arrow schema in JSON",
                path.display()
            ))
            .caused_by(e)
        })
}

/// A message on standard error (errors writing it are ignored).
fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "filesink: {msg}");
}

/// Progress on standard error: a bar on a terminal, a line per checkpoint (at most one a
/// second) otherwise; the engine's notes as `filesink: …` lines.
#[derive(Default)]
struct Progress {
    bar: Option<ProgressBar>,
    displays: Vec<String>,
    /// Bytes of the inputs before input `i`.
    before: Vec<u64>,
    total: Option<u64>,
    last_line: Option<Instant>,
    /// Where the run failed, for the error's context.
    failed_at: Option<Step>,
    /// Where the run has spent its time so far.
    stages: StageTimes,
}

impl Progress {
    fn start(&mut self, inputs: &[Input], cursor: Cursor) {
        let mut before = Vec::with_capacity(inputs.len() + 1);
        let mut sum = Some(0u64);
        for i in inputs {
            before.push(sum.unwrap_or(0));
            // Positions in a compressed input count decompressed bytes: its size says nothing.
            let size = i.size_bytes.filter(|_| i.compression.is_none());
            sum = sum.and_then(|s| size.map(|b| s + b));
        }
        before.push(sum.unwrap_or(0));
        let p = self;
        p.displays = inputs.iter().map(|i| i.display.clone()).collect();
        p.before = before;
        p.total = sum;
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
    }

    fn at(&self, cursor: Cursor) -> String {
        match self.displays.get(cursor.input) {
            Some(d) => format!("{d}:{}", cursor.line),
            None => "the end of the input".to_string(),
        }
    }

    fn bytes_done(&self, cursor: Cursor) -> u64 {
        match self.before.get(cursor.input) {
            Some(b) if cursor.input < self.displays.len() => b + cursor.offset,
            _ => *self.before.last().unwrap_or(&0),
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
            let limiting = self.stages.limiting().map_or(String::new(), |stage| {
                format!(", limited by {}", stage.describe())
            });
            bar.set_message(format!("{records} records{limiting}"));
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

impl Observer for Progress {
    fn note(&mut self, message: &str) {
        note(message);
    }

    fn started(&mut self, inputs: &[Input], position: &SourcePosition) {
        self.start(inputs, position.cursor);
    }

    fn advanced(&mut self, position: &SourcePosition) {
        self.advance(position.cursor, position.records);
    }

    fn stage_times(&mut self, times: &StageTimes) {
        self.stages = *times;
    }

    fn checkpointed(&mut self, report: &CheckpointReport, position: &SourcePosition) {
        self.checkpoint(
            report.checkpoint_id,
            position.cursor,
            position.records,
            report.committed_files,
        );
    }

    fn finished(&mut self) {
        self.finish();
    }

    fn stopped(&mut self) {
        self.abandon();
    }

    fn failed(&mut self, step: Step, _error: &filesink::Error) {
        self.failed_at = Some(step);
        self.abandon();
    }
}
