//! The plan of a run: an [`Ingest`]'s options checked once, in one place, and everything
//! derived from them that does not need the lake (the job's name, the input format, the time
//! partitioning and the partitioner, the memory split, the rolling policy). Nothing here
//! reads an input or touches the lake, so a refused run has written nothing.

use std::path::PathBuf;
use std::time::Duration;

use arrow::datatypes::Schema;

use super::json_types::{self, check_schema};
use super::rules::{
    check_bad_records_path, check_distinct, check_inputs_outside_lake, default_job_name,
};
use super::schedule::Schedule;
use super::source::{self, check_csv_schema, Input, InputFormat, TimePartitionBy};
use super::{compaction, CustomSource, Ingest, Output, CHUNK_SCALE_MAX};
use crate::bucket::{time_zone_name, HivePartitioner, TimePartitioning};
use crate::error::{Error, Result, Setting};
use crate::format::FileFormat;
use crate::job::manifest;
use crate::maintain::CompactOptions;
use crate::sink::{MergePolicy, RollingPolicy};
use crate::storage::LeaseOptions;
use crate::table::delta::DeltaOptions;

/// An [`Ingest`] whose options hold together.
#[derive(Debug)]
pub(super) struct IngestPlan {
    pub(super) inputs: Vec<Input>,
    pub(super) input_format: InputFormat,
    pub(super) output: Output,
    pub(super) format: FileFormat,
    pub(super) partition_by: Vec<String>,
    /// The time directories, parsed once: the partitioner, the position and the table take
    /// them from here.
    pub(super) time: Option<TimePartitioning>,
    /// The same, as the position records it.
    pub(super) time_by: Option<TimePartitionBy>,
    pub(super) partitioner: Option<HivePartitioner>,
    /// The schema given, with seconds written as milliseconds.
    pub(super) explicit: Option<Schema>,
    pub(super) schedule: Schedule,
    /// Whether a bad record fails the run (no bad-records file).
    pub(super) strict: bool,
    pub(super) bad_records_path: Option<PathBuf>,
    pub(super) job: String,
    /// The job was named ([`super::Ingest::job`]), not derived from the inputs.
    pub(super) job_given: bool,
    /// Inputs the lake refused before the run chose its job ([`super::ledger::survey`]).
    pub(super) refused: Vec<String>,
    /// Inputs the survey passed over, read to their end before and unchanged.
    pub(super) unchanged: usize,
    pub(super) lease: LeaseOptions,
    pub(super) stop_after_records: Option<u64>,
    /// Stops the run at a checkpoint (`Ingest::stop_handle`).
    pub(super) stop: Option<super::StopHandle>,
    /// The writers asked for; `None`: a new job takes [`IngestPlan::writers`], a resumed one
    /// keeps its own.
    pub(super) parallelism: Option<usize>,
    /// Writers (and decoding threads) of this run.
    pub(super) writers: usize,
    /// What the pipeline may hold in memory (`--memory`).
    pub(super) memory_bytes_max: u64,
    /// How many times the smallest chunk a chunk may grow to ([`super::chunk_scale`]).
    pub(super) scale_max: u64,
    /// The encoders' memory budget per writer.
    pub(super) writer_bytes_max: u64,
    /// The part files each writer keeps open at most.
    pub(super) writer_files_max: usize,
    pub(super) rolling: RollingPolicy,
    pub(super) table: Option<DeltaOptions>,
    pub(super) merge: Option<MergePolicy>,
    /// Background compaction: its options (named after the job) and interval.
    pub(super) compact: Option<(CompactOptions, Duration)>,
    /// Row files may stay open across checkpoints up to this long.
    pub(super) row_visibility_delay: Option<Duration>,
    /// The line-end rule's settle time ([`super::Ingest::settle`]).
    pub(super) settle: Duration,
    /// A source written outside this crate, read instead of inputs; taken by the run.
    pub(super) custom: Option<CustomSource>,
    /// Its name, kept after the run took it.
    pub(super) custom_name: Option<String>,
    /// Every part the custom source may be handed while it runs, if its parts are assigned
    /// to it ([`Source::assigns_parts`](super::Source::assigns_parts)) rather than taken at
    /// start: the run releases those its job's last run still held.
    pub(super) assigned_parts: Option<Vec<String>>,
}

impl IngestPlan {
    /// Checks `ingest`'s options, in the order a user meets them.
    pub(super) fn new(ingest: Ingest) -> Result<IngestPlan> {
        let Ingest {
            inputs,
            input_format,
            output,
            format,
            partition_by,
            partition_by_time,
            time_zone,
            schema,
            checkpoint_every,
            part_size_bytes_max,
            bad_records,
            job,
            lease_ttl,
            stop_after_records,
            stop,
            parallelism,
            memory_bytes_max,
            table,
            merge,
            compact,
            row_visibility_delay,
            settle,
            custom,
        } = ingest;
        let custom_name = custom.as_ref().map(|c| c.name.clone());
        let schema_given = schema.is_some();
        // Seconds are written as milliseconds: a Parquet file cannot say "seconds".
        let explicit = schema.map(json_types::exact_in_every_format);
        let output = output.ok_or_else(|| {
            Error::Config("an ingestion needs an output: `to_local` or `to_storage`".into())
        })?;
        if let Some(name) = &custom_name {
            check_custom(name, &inputs, job.as_deref(), schema_given)?;
        } else if inputs.is_empty() {
            return Err(Error::Config(
                "an ingestion needs at least one input".into(),
            ));
        }
        let input_format = match (input_format, &custom) {
            (Some(f), _) => f,
            (None, Some(_)) => InputFormat::Jsonl,
            (None, None) => InputFormat::of_inputs(&inputs)?,
        };
        check_distinct(&inputs)?;
        let job_given = job.is_some();
        let job = job_name(job, &inputs)?;
        check_output_format(
            &format,
            table.as_ref(),
            merge.as_ref(),
            row_visibility_delay,
        )?;
        let compact = compaction_options(compact, table.as_ref(), &job)?;
        let schedule = Schedule::new(checkpoint_every)?;
        if lease_ttl < LeaseOptions::MIN_TTL {
            return Err(Setting::LeaseTtl.refused(format!(
                "{{lease_ttl}}: a lease must live at least {} s",
                LeaseOptions::MIN_TTL.as_secs()
            )));
        }
        let (time, time_by, partitioner) =
            partitioning(&partition_by, partition_by_time, time_zone)?;
        let bad_records_path = match &bad_records {
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
        let checked = match (&explicit, input_format) {
            (Some(schema), InputFormat::Jsonl) => check_schema(schema),
            (Some(schema), InputFormat::Csv) => check_csv_schema(schema),
            (None, _) => Ok(()),
        };
        checked.map_err(|e| Setting::Schema.invalid(e))?;
        let writers = match parallelism {
            Some(0) => {
                return Err(Setting::Parallelism.refused("{parallelism} must be at least 1 writer"))
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let (scale_max, writer_bytes_max) = memory_split(memory_bytes_max, writers);
        let writer_files_max = open_files_split(writers);
        let rolling = rolling_policy(row_visibility_delay, part_size_bytes_max)?;
        Ok(IngestPlan {
            inputs,
            input_format,
            output,
            format,
            partition_by,
            time,
            time_by,
            partitioner,
            explicit,
            schedule,
            strict: bad_records.is_none(),
            bad_records_path,
            job,
            job_given,
            refused: Vec::new(),
            unchanged: 0,
            lease: LeaseOptions { ttl: lease_ttl },
            stop_after_records,
            stop,
            parallelism,
            writers,
            memory_bytes_max,
            scale_max,
            writer_bytes_max,
            writer_files_max,
            rolling,
            table,
            merge,
            compact,
            row_visibility_delay,
            settle,
            custom,
            custom_name,
            assigned_parts: None,
        })
    }

    /// Names the job `job` (a job named after its inputs, which now reads fewer of them:
    /// `ledger::survey`); background compaction named after the job follows it.
    pub(super) fn rename(&mut self, job: String) {
        if let Some((options, _)) = &mut self.compact {
            if options.job_name() == Some(compaction::compaction_job(&self.job).as_str()) {
                *options = options.clone().job(compaction::compaction_job(&job));
            }
        }
        self.job = job;
    }

    /// How the ledger settles a job it takes inputs or parts from: a Delta table job as
    /// `commit` would.
    pub(super) fn settle_options(&self) -> super::ledger::Settle {
        super::ledger::Settle {
            lease: self.lease,
            location: self.location(),
            single_writer: self.table.as_ref().is_some_and(|t| t.single_writer),
        }
    }

    /// What the job reads, as its checkpoints name it: the inputs' canonical names, or a
    /// custom source's name (`source:<name>`).
    pub(super) fn canonical(&self) -> Vec<String> {
        match &self.custom_name {
            Some(name) => vec![format!("source:{name}")],
            None => self.inputs.iter().map(|i| i.canonical.clone()).collect(),
        }
    }

    /// Where the lake is, for messages and for a table's log: the table's own location if
    /// given, else the output's.
    pub(super) fn location(&self) -> String {
        match (&self.table, &self.output) {
            (
                Some(DeltaOptions {
                    location: Some(l), ..
                }),
                _,
            ) => l.clone(),
            (_, Output::Local(p)) => p.display().to_string(),
            (_, Output::Storage(s)) => s.place(),
        }
    }
}

/// A custom source comes alone, with a job name and a schema: its records are not read ahead
/// to infer one, and nothing derives a name from it.
fn check_custom(name: &str, inputs: &[Input], job: Option<&str>, schema: bool) -> Result<()> {
    let name = Setting::value(name);
    if !inputs.is_empty() {
        return Err(Setting::Inputs.refused(format!(
            "source `{name}` is read instead of inputs, not beside them"
        )));
    }
    if job.is_none() {
        return Err(Setting::Job.refused(format!(
            "a job that reads source `{name}` needs a name ({{job}})"
        )));
    }
    if !schema {
        return Err(Setting::Schema.refused(format!(
            "a job that reads source `{name}` needs {{schema}}: its records are not read \
             ahead to infer one"
        )));
    }
    Ok(())
}

/// The job's name: the one given, else one derived from the inputs (none from a stream).
fn job_name(job: Option<String>, inputs: &[Input]) -> Result<String> {
    let job = match job {
        Some(j) => j,
        None => default_job_name(inputs).ok_or_else(|| {
            Setting::Job
                .refused("reading standard input needs {job}: a job name cannot be derived from it")
        })?,
    };
    manifest::validate_job_name(&job)?;
    Ok(job)
}

/// Background compaction's options: only beside a table, at an interval above zero, as a
/// job named apart from the ingest's.
fn compaction_options(
    compact: Option<(CompactOptions, Duration)>,
    table: Option<&DeltaOptions>,
    job: &str,
) -> Result<Option<(CompactOptions, Duration)>> {
    match (compact, table) {
        (None, _) => Ok(None),
        (Some(_), None) => Err(Setting::CompactInBackground.refused(
            "{compact_in_background} rewrites a Delta table's files; it needs {delta_table} (a \
             plain directory cannot swap files atomically: see {merge_small_files})",
        )),
        (Some((_, every)), Some(_)) if every.is_zero() => Err(Setting::CompactInBackground
            .refused("the interval of {compact_in_background} must be above 0")),
        (Some((options, _)), Some(_)) if options.target_size() == 0 => {
            Err(Setting::CompactInBackground
                .refused("the target size of {compact_in_background} must be above 0"))
        }
        (Some((options, every)), Some(t)) => {
            let options = match options.job_name() {
                None => options.job(compaction::compaction_job(job)),
                Some(c) if c == job => {
                    return Err(Setting::CompactInBackground.refused(format!(
                        "the compaction job of {{compact_in_background}} needs a name of its \
                         own, not the ingest's (`{}`)",
                        Setting::value(job)
                    )))
                }
                Some(_) => options,
            };
            Ok(Some((options.single_writer(t.single_writer), every)))
        }
    }
}

/// The output format against what must be Parquet: a Delta table's files and the pre-commit
/// merge; and the visibility delay of row files, which Parquet files do not take (they roll at
/// every checkpoint; their delay is the merge's).
fn check_output_format(
    format: &FileFormat,
    table: Option<&DeltaOptions>,
    merge: Option<&MergePolicy>,
    row_visibility_delay: Option<Duration>,
) -> Result<()> {
    let parquet = matches!(format, FileFormat::Parquet(_));
    if table.is_some() && !parquet {
        return Err(Setting::DeltaTable.refused(
            "{delta_table} holds Parquet files; it cannot write JSON lines or CSV ({format})",
        ));
    }
    if merge.is_some() && table.is_some() {
        return Err(Setting::MergeSmallFiles.refused(
            "{merge_small_files} is for plain directories; a Delta table ({delta_table}) \
             compacts its small files after they are visible, without delaying them",
        ));
    }
    if merge.is_some() && !parquet {
        return Err(Setting::MergeSmallFiles.refused(
            "{merge_small_files} merges Parquet files; it cannot merge JSON lines or CSV ({format})",
        ));
    }
    if row_visibility_delay.is_some() && parquet {
        return Err(Setting::MaxVisibilityDelay.refused(
            "{max_visibility_delay} keeps row files (JSON lines, CSV) open across checkpoints; \
             Parquet files roll at every checkpoint, and their delay is the pre-commit \
             merge's ({merge_small_files})",
        ));
    }
    Ok(())
}

/// The time partitioning (parsed once), its record in the position, and the partitioner of
/// columns and time directories.
#[allow(clippy::type_complexity)]
fn partitioning(
    partition_by: &[String],
    partition_by_time: Option<(String, String)>,
    time_zone: Option<chrono::FixedOffset>,
) -> Result<(
    Option<TimePartitioning>,
    Option<TimePartitionBy>,
    Option<HivePartitioner>,
)> {
    // A cause of the bucket layer is a configuration message: its text alone.
    let invalid = |setting: Setting| {
        move |e: Error| match e {
            Error::Config(m) => setting.invalid(m),
            e => setting.invalid(e),
        }
    };
    let time = match (&partition_by_time, time_zone) {
        (Some((column, pattern)), zone) => Some(
            TimePartitioning::new(column.clone(), pattern)
                .map_err(invalid(Setting::PartitionByTime))?
                .with_offset(zone.unwrap_or(chrono::FixedOffset::east_opt(0).expect("UTC"))),
        ),
        (None, Some(_)) => {
            return Err(Setting::TimeZone.refused(
                "{time_zone} applies to the time directories only; it needs \
                 {partition_by_time}",
            ))
        }
        (None, None) => None,
    };
    let time_by = time.as_ref().map(|t| TimePartitionBy {
        column: t.column().to_owned(),
        pattern: t.pattern().to_owned(),
        time_zone: time_zone_name(t.offset()),
    });
    let partitioner = match (partition_by, time.clone()) {
        ([], None) => None,
        ([], Some(t)) => Some(HivePartitioner::by_time(t)),
        (cols, t) => {
            let p = HivePartitioner::new(cols.to_vec()).map_err(invalid(Setting::PartitionBy))?;
            Some(match t {
                Some(t) => p.with_time(t).map_err(invalid(Setting::PartitionByTime))?,
                None => p,
            })
        }
    };
    Ok((time, time_by, partitioner))
}

/// Descriptors the rest of an ingest holds at once beside its writers' part files, besides
/// one per writer (its decoder's input) and one per directory flush in flight (at most
/// [`crate::storage::local::RealFs::SYNC_THREADS_MAX`] in the process): the standard
/// streams, the runtime, the job's lock and metadata, the bad-records file.
const OTHER_FILES: usize = 24;

/// Each writer's share of the process's soft limit of open files
/// ([`crate::SinkBuilder::open_files_max`]), after room for everything else the ingest holds
/// open: 256 descriptors, or half the limit if that is smaller, but never less than what it
/// may hold at once (`OTHER_FILES`, the decoders' inputs and a commit's directory flushes),
/// as far as the limit leaves each writer a file.
fn open_files_split(writers: usize) -> usize {
    let soft = crate::storage::local::open_files_soft_limit();
    let writers = writers.max(1);
    let others = OTHER_FILES + writers + crate::storage::local::RealFs::SYNC_THREADS_MAX;
    let reserve = (soft / 2)
        .min(256)
        .max(others)
        .min(soft.saturating_sub(writers));
    ((soft - reserve) / writers).max(1)
}

impl IngestPlan {
    /// Shares the memory budget and the open files among `writers` writers instead: those of
    /// a resumed job, which keeps the number it started with.
    pub(super) fn share_among(&mut self, writers: usize) {
        self.writers = writers.max(1);
        (self.scale_max, self.writer_bytes_max) = memory_split(self.memory_bytes_max, self.writers);
        self.writer_files_max = open_files_split(self.writers);
    }
}

/// How `memory_bytes_max` is shared: chunks grow with the open files only as far as half the
/// budget holds them in flight (see `CHUNKS_QUEUED`), and the writers share the rest. Returns
/// the largest chunk scale and each writer's budget.
fn memory_split(memory_bytes_max: u64, writers: usize) -> (u64, u64) {
    let decoders = writers as u64;
    let queued = match writers {
        1 => 0,
        n => n as u64 * (crate::job::SHARES_QUEUED as u64 + 1),
    };
    let per_scale = ((3 * decoders + 2) * 2 + queued) * source::CHUNK_BYTES_MAX as u64;
    let scale_max = (memory_bytes_max / 2 / per_scale).clamp(1, CHUNK_SCALE_MAX as u64);
    let in_flight = per_scale * scale_max;
    let for_writers = memory_bytes_max
        .saturating_sub(in_flight)
        .max(memory_bytes_max / 2);
    (scale_max, (for_writers / writers as u64).max(1))
}

/// One visibility rule for every format: a part file rolls at every checkpoint, unless row
/// files may stay open up to an explicit delay.
fn rolling_policy(
    row_visibility_delay: Option<Duration>,
    part_size_bytes_max: Option<u64>,
) -> Result<RollingPolicy> {
    let mut rolling = match row_visibility_delay {
        Some(d) if d.is_zero() => {
            return Err(
                Setting::MaxVisibilityDelay.refused("{max_visibility_delay} must be above 0")
            )
        }
        Some(d) => RollingPolicy::default()
            .with_rollover_interval(d)
            .with_inactivity_interval(d),
        None => RollingPolicy::on_checkpoint(),
    };
    if let Some(bytes) = part_size_bytes_max {
        rolling = rolling.with_part_size_bytes_max(bytes);
    }
    Ok(rolling)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each option refused is named in the error, as the option that is refused, before
    /// anything is read or created.
    #[test]
    fn a_refused_option_is_named_by_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.jsonl");
        std::fs::write(&input, "{\"a\":1}\n").unwrap();
        let lake = dir.path().join("lake");
        let ingest = || Ingest::new([Input::file(&input).unwrap()]).to_local(&lake);
        let parquet_table = || ingest().delta_table(DeltaOptions::new());
        let cases: Vec<(Ingest, Setting)> = vec![
            (ingest().partition_by(["_a"]), Setting::PartitionBy),
            (
                ingest().partition_by_time("a", "%Q"),
                Setting::PartitionByTime,
            ),
            (
                ingest().time_zone(chrono::FixedOffset::east_opt(3600).unwrap()),
                Setting::TimeZone,
            ),
            (
                ingest().schema(Schema::new(vec![arrow::datatypes::Field::new(
                    "a",
                    arrow::datatypes::DataType::Binary,
                    true,
                )])),
                Setting::Schema,
            ),
            (ingest().bad_records(&input), Setting::BadRecords),
            (ingest().bad_records(lake.join("bad")), Setting::BadRecords),
            (ingest().lease_ttl(Duration::ZERO), Setting::LeaseTtl),
            (ingest().parallelism(0), Setting::Parallelism),
            (
                parquet_table().format(FileFormat::csv()),
                Setting::DeltaTable,
            ),
            (
                parquet_table().merge_small_files(MergePolicy::default()),
                Setting::MergeSmallFiles,
            ),
            (
                ingest()
                    .format(FileFormat::json_lines())
                    .merge_small_files(MergePolicy::default()),
                Setting::MergeSmallFiles,
            ),
            (
                ingest().max_visibility_delay(Duration::from_secs(1)),
                Setting::MaxVisibilityDelay,
            ),
            (
                ingest()
                    .format(FileFormat::json_lines())
                    .max_visibility_delay(Duration::ZERO),
                Setting::MaxVisibilityDelay,
            ),
            (
                ingest().compact_in_background(CompactOptions::new(), Duration::from_secs(1)),
                Setting::CompactInBackground,
            ),
            (
                parquet_table().compact_in_background(CompactOptions::new(), Duration::ZERO),
                Setting::CompactInBackground,
            ),
            (
                parquet_table().compact_in_background(
                    CompactOptions::new().target_size_bytes(0),
                    Duration::from_secs(1),
                ),
                Setting::CompactInBackground,
            ),
            (Ingest::new([Input::stdin()]).to_local(&lake), Setting::Job),
        ];
        for (ingest, want) in cases {
            let shown = format!("{ingest:?}");
            match IngestPlan::new(ingest) {
                Err(e @ Error::Setting { setting, .. }) => {
                    assert_eq!(setting, want, "{shown}: {e}");
                    assert!(
                        e.to_string().contains(&format!("`{}`", want.method())),
                        "{e}"
                    );
                }
                other => panic!("{shown}: {other:?}"),
            }
            assert!(!lake.exists());
        }
    }

    /// Whatever the writers (a resumed job keeps its own count: [`IngestPlan::share_among`]),
    /// their shares together stay within the budget, and take at least half of it.
    #[test]
    fn the_memory_split_holds_the_budget_for_any_number_of_writers() {
        for budget in [64u64 << 20, 512 << 20, 4 << 30] {
            for writers in 1..=16 {
                let (scale_max, per_writer) = memory_split(budget, writers);
                assert!(scale_max >= 1);
                let for_writers = per_writer * writers as u64;
                assert!(
                    for_writers <= budget,
                    "{writers} writers of {per_writer} over a budget of {budget}"
                );
                assert!(for_writers >= budget / 2 - writers as u64);
            }
        }
    }
}
