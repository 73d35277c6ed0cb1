//! Compaction of a Delta table (`filesink compact`, design section 9): the small files of each
//! partition rewritten into files of a target size, and swapped in by one log entry that
//! removes the inputs and adds the output (`dataChange: false`), so a table reader sees the
//! old files or the new ones, never both, never neither.
//!
//! # A round is a checkpoint of the compaction job
//!
//! The compactor is a [`Coordinator`] job of its own (default name `compact`, one writer
//! `compact_0`): it inherits the job lease (one compactor per job name), manifests, restore
//! and `abort`'s ownership rules. One round:
//!
//! 1. **Plan** on the latest snapshot L: per partition, the live `add`s with a relative path
//!    smaller than half the target, oldest first, packed greedily into bins of at most the
//!    target size; a bin needs at least `min_files` files; a round stops adding bins at
//!    `max_bytes` of input.
//! 2. **Rewrite**: each bin's files are read whole ([`Storage::read_data_file`](crate::storage::Listing::read_data_file)), checked to
//!    have one Arrow schema, and written through the job's writer into the bin's partition
//!    directory. Their record count is checked against the `numRecords` of their `add`s.
//! 3. **Vote and manifest N**: the manifest records the plan (`read_version = L`, the inputs
//!    as `removes`): the completion point, as for every job.
//! 4. **Commit**: the output files are committed, then one entry removes the inputs and adds
//!    the outputs, with the job's `txn`. If another writer removed an input meanwhile (another
//!    compactor, another engine's DELETE), the round is **abandoned**: no entry. The job's next
//!    checkpoint, taken at once and committing nothing, records the decision (its manifest
//!    lists the round's output under `table.abandoned`), and then the output is deleted: from
//!    then on no restore decides again, so a round stays abandoned even if another engine
//!    makes its inputs live again (a RESTORE TABLE).
//!
//! # Crash points
//!
//! | the crash comes | the next run of the compaction job (its restore) |
//! |---|---|
//! | while reading inputs or writing outputs (before manifest N) | restores from N−1: the hidden outputs are leftovers of `compact_0`, removed; the log is untouched |
//! | after manifest N, before or during the file commit | `txn < N`: inputs still live → commits the files (idempotently), writes the entry; an input removed → abandons |
//! | after the file commit, before the entry | as above: the entry is written, or the round abandoned and its committed files deleted |
//! | after the abandonment, before the checkpoint that records it | from N: decided again (the inputs are still removed, unless restored meanwhile: then the round is committed, correctly, since its output is still there) |
//! | after the recording checkpoint N+1 | from N+1: its `abandoned` files are deleted (again); round N is never looked at |
//! | entry written, answer lost | `txn ≥ N`: nothing to do |
//!
//! `tests/delta_compact.rs` walks every fault point of a round
//! (`crash_during_compaction_at_every_point_…`) and of the run that abandons one, records it
//! and deletes its output (`crash_while_abandoning_a_round_at_every_point_…`), on local disk
//! and in memory.
//!
//! Appends never conflict with a round: they only add files, and a round only removes files
//! that were live at L and are still live when it commits.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::{Deserialize, Serialize};

use crate::bucket::BucketAssigner;
use crate::format::FileFormat;
use crate::job::{manifest, Coordinator, Manifest};
use crate::protocol::BucketId;
use crate::sink::{RollingPolicy, Sink};
use crate::storage::Storage;
use crate::table::delta::stats::{bucket_of, decode_path, FilePath};
use crate::table::delta::{DeltaOptions, DeltaTable, TableOutcome, TableRemove};
use crate::{Error, Result};

/// What a compaction run does; [`compact`] runs one round.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    target_size_bytes: u64,
    min_files: usize,
    max_bytes: u64,
    partitions: Vec<String>,
    job: Option<String>,
    single_writer: bool,
    location: Option<String>,
    dry_run: bool,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            target_size_bytes: Self::DEFAULT_TARGET_SIZE_BYTES,
            min_files: 2,
            max_bytes: 4 * 1024 * 1024 * 1024,
            partitions: Vec::new(),
            job: None,
            single_writer: false,
            location: None,
            dry_run: false,
        }
    }
}

impl CompactOptions {
    /// Default target size of an output file: 128 MiB.
    pub const DEFAULT_TARGET_SIZE_BYTES: u64 = 128 * 1024 * 1024;

    /// Options with the defaults: 128 MiB files, at least 2 files a bin, at most 4 GiB of
    /// input a round, every partition, job `compact`.
    pub fn new() -> Self {
        CompactOptions::default()
    }

    /// The size output files aim at; files of at least half of it are left alone.
    pub fn target_size_bytes(mut self, bytes: u64) -> Self {
        self.target_size_bytes = bytes;
        self
    }

    /// The size output files aim at.
    pub(crate) fn target_size(&self) -> u64 {
        self.target_size_bytes
    }

    /// The fewest files worth merging into one (default 2).
    pub fn min_files(mut self, files: usize) -> Self {
        self.min_files = files;
        self
    }

    /// Input bytes after which a round plans no further bins (default 4 GiB).
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Only these partitions (their directories, `country=DE/dt=2026-11-30`); default all.
    pub fn partitions<I: IntoIterator<Item = S>, S: Into<String>>(mut self, dirs: I) -> Self {
        self.partitions = dirs.into_iter().map(Into::into).collect();
        self
    }

    /// The compaction job's name (default `compact`; `<job>_compact` for the compaction an
    /// [`Ingest`](crate::ingest::Ingest) runs in the background): one live compactor per
    /// name.
    pub fn job(mut self, job: impl Into<String>) -> Self {
        self.job = Some(job.into());
        self
    }

    /// The job name, if one was set.
    pub(crate) fn job_name(&self) -> Option<&str> {
        self.job.as_deref()
    }

    /// As [`DeltaOptions::single_writer`].
    pub fn single_writer(mut self, alone: bool) -> Self {
        self.single_writer = alone;
        self
    }

    /// How messages name the table.
    pub fn location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }

    /// Plan only: report the bins, write nothing.
    pub fn dry_run(mut self, dry: bool) -> Self {
        self.dry_run = dry;
        self
    }
}

/// One bin of a round: files of one partition merged into one output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin {
    /// The partition directory.
    pub partition: String,
    /// The input files (paths as the log has them).
    pub inputs: Vec<String>,
    /// Their bytes.
    pub input_bytes: u64,
}

/// What [`compact`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactReport {
    /// The table version the plan was made on.
    pub read_version: Option<i64>,
    /// The bins planned (and, unless a dry run, rewritten).
    pub bins: Vec<Bin>,
    /// Output files committed.
    pub output_files: usize,
    /// Their bytes.
    pub output_bytes: u64,
    /// Records rewritten.
    pub records: u64,
    /// The version the round's entry was written at; `None` when nothing was written.
    pub version: Option<i64>,
    /// Whether the round was abandoned because another writer removed one of its inputs.
    pub abandoned: bool,
    /// Whether a round of an earlier run was finished (or abandoned) first, at restore.
    pub restored: bool,
    /// Partitions with small files left as they are: their path is too long for the store to
    /// take a new file's name under it ([`crate::Sink::partition_path_bytes_max`]; another
    /// writer's shorter names fit).
    pub too_long: Vec<String>,
}

/// The bucket of the bin being written: the compactor sets it before each bin.
#[derive(Debug, Clone)]
struct BinBucket(Arc<Mutex<BucketId>>);

impl Default for BinBucket {
    fn default() -> Self {
        BinBucket(Arc::new(Mutex::new(BucketId::root())))
    }
}

impl BucketAssigner for BinBucket {
    fn assign(
        &self,
        batch: &RecordBatch,
        _now: DateTime<Utc>,
    ) -> Result<Vec<(BucketId, RecordBatch)>> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let bucket = self.0.lock().expect("not poisoned").clone();
        Ok(vec![(bucket, batch.clone())])
    }
}

/// Runs one compaction round on the Delta table at `storage`'s base (see the module doc).
///
/// Errors: [`Error::Config`] if there is no table; the refusals of a table writer (features,
/// a store without conditional puts unless single-writer); [`Error::JobBusy`] if another
/// compactor of the same job name runs; [`Error::Corrupt`] if an input holds another number
/// of records than its `add` says, or [`Error::DataLost`] if it is missing (nothing is written
/// then).
pub async fn compact(storage: Arc<dyn Storage>, options: &CompactOptions) -> Result<CompactReport> {
    if options.target_size_bytes == 0 || options.min_files < 2 {
        return Err(Error::Config(
            "compaction needs a target size above 0 and at least 2 files a bin".into(),
        ));
    }
    let assigner = BinBucket::default();
    let sink = Sink::builder_shared(storage.clone())
        .format(FileFormat::parquet())
        .bucket_assigner(assigner.clone())
        .rolling_policy(
            RollingPolicy::default().with_part_size_bytes_max(options.target_size_bytes),
        )
        .build()?;
    let mut table_options = DeltaOptions::new().single_writer(options.single_writer);
    table_options.table_schema = true;
    if let Some(l) = &options.location {
        table_options = table_options.location(l.clone());
    }
    let job_name = options.job.as_deref().unwrap_or("compact");
    check_compaction_job(storage.as_ref(), job_name).await?;
    if options.dry_run {
        // A dry run only looks: it neither takes the job nor finishes an earlier round.
        let sink_id = crate::job::manifest::sink_identity(storage.as_ref(), false)
            .await?
            .map(|s| s.sink_id)
            .unwrap_or_default();
        let table =
            DeltaTable::open_to_read(storage.clone(), &table_options, &sink_id, job_name).await?;
        let (bins, too_long) = plan(&table, options, sink.partition_path_bytes_max())?;
        return Ok(CompactReport {
            read_version: table.version(),
            bins: bins.iter().map(|b| b.bin.clone()).collect(),
            too_long,
            ..CompactReport::default()
        });
    }
    let mut job = Coordinator::builder(&sink, job_name)
        .delta_table(table_options)
        .open()
        .await?;
    let mut report = CompactReport {
        restored: job.last_checkpoint() > 0
            && (!job.restored_outcomes().is_empty() || job.has_abandoned()),
        ..CompactReport::default()
    };
    // A round of an earlier run that its restore abandoned: recorded by a checkpoint of its
    // own (which deletes its output) before anything else, so it is never decided again.
    if job.has_abandoned() && !options.dry_run {
        record_abandoned(&mut job).await?;
    }
    let table = job.table().expect("opened with a table");
    let read_version = table.version();
    report.read_version = read_version;
    let (bins, too_long) = plan(table, options, sink.partition_path_bytes_max())?;
    let columns = table.data_columns();
    report.too_long = too_long;
    report.bins = bins.iter().map(|b| b.bin.clone()).collect();
    if options.dry_run || bins.is_empty() {
        job.close().await?;
        return Ok(report);
    }
    let mut removes = Vec::new();
    for bin in &bins {
        let inputs = read_bin(storage.as_ref(), bin, &columns).await?;
        *assigner.0.lock().expect("not poisoned") = bin.bucket.clone();
        for (_, batches) in &inputs {
            for batch in batches {
                job.write(batch).await?;
                report.records += batch.num_rows() as u64;
            }
        }
        removes.extend(bin.removes.iter().cloned());
    }
    job.rearrange(read_version.unwrap_or(0), removes);
    let round = job.last_checkpoint() + 1;
    let outcome = job
        .checkpoint(&serde_json::json!({ "round": round }))
        .await?;
    report.output_files = outcome.committed_files;
    report.output_bytes = outcome.committed_bytes;
    match outcome.table_outcome {
        Some(TableOutcome::Committed(v)) => report.version = Some(v),
        Some(TableOutcome::Abandoned) => {
            report.abandoned = true;
            report.output_files = 0;
            report.output_bytes = 0;
            record_abandoned(&mut job).await?;
        }
        _ => {}
    }
    job.close().await?;
    Ok(report)
}

/// The last round of a compaction job (`filesink compact`, an ingest's `<job>_compact`) as its
/// latest manifest has it, or `None` for any other job. A round's position is `{"round": N}`;
/// the checkpoint that records abandoned round N is `{"round": N + 1, "abandoned": N}`.
pub fn compaction_round(m: &Manifest) -> Option<u64> {
    let position = m.source_position.as_object()?;
    let round = position.get("round")?.as_u64()?;
    if !position.keys().all(|k| k == "round" || k == "abandoned") {
        return None;
    }
    match position.get("abandoned") {
        Some(a) => a.as_u64(),
        None => Some(round),
    }
}

/// Refuses to run rounds as job `job` unless it is new or a compaction job
/// ([`compaction_round`]). Another job's checkpoints (an ingest's) are not rounds: opened as
/// this job, its writers would be restored with the compactor's settings and a round written
/// into its manifests, which its own runs then refuse.
async fn check_compaction_job(storage: &dyn Storage, job: &str) -> Result<()> {
    let sink_id = manifest::sink_identity(storage, false)
        .await?
        .map(|i| i.sink_id);
    if let Some(m) = manifest::latest_manifest(storage, job, sink_id.as_deref()).await? {
        if compaction_round(&m).is_none() {
            return Err(Error::conflict(
                crate::protocol::job_dir(job),
                format!(
                    "job `{job}` is not a compaction job (checkpoint {} is another writer's, \
                     an ingest's): compact with another job name (`--job`; the default is \
                     `compact`)",
                    m.checkpoint_id
                ),
            ));
        }
    }
    Ok(())
}

/// Records an abandoned round with a checkpoint of the job that commits nothing: its manifest
/// lists the round's output, which is deleted after it.
async fn record_abandoned(job: &mut Coordinator) -> Result<()> {
    let round = job.last_checkpoint();
    job.checkpoint(&serde_json::json!({ "round": round + 1, "abandoned": round }))
        .await?;
    Ok(())
}

/// A bin with what the round needs to write it.
struct PlannedBin {
    bin: Bin,
    bucket: BucketId,
    /// Decoded relative paths of the inputs, in order.
    paths: Vec<String>,
    removes: Vec<TableRemove>,
}

/// Step 1 of a round: the bins, partition by partition (in directory order), and the
/// partitions passed over because their path is longer than `path_max` (a bin's output could
/// not be named there; every round would fail on it, and on the partitions after it).
fn plan(
    table: &DeltaTable,
    options: &CompactOptions,
    path_max: Option<usize>,
) -> Result<(Vec<PlannedBin>, Vec<String>)> {
    let partition_columns = table.partition_columns().to_vec();
    let small = options.target_size_bytes / 2;
    let mut by_partition: BTreeMap<String, (BucketId, Vec<_>)> = BTreeMap::new();
    // Every partition with a live file, so that a partition asked for that has none is an
    // error rather than "nothing to compact".
    let mut seen = std::collections::BTreeSet::new();
    for add in table.live_files() {
        let Ok(bucket) = bucket_of(&add.partition_values, &partition_columns) else {
            continue;
        };
        seen.insert(bucket.as_str().to_owned());
        let Ok(FilePath::Relative(path)) = decode_path(&add.path) else {
            continue;
        };
        let size = u64::try_from(add.size).unwrap_or(u64::MAX);
        let hidden = path
            .split('/')
            .any(|c| c.starts_with('.') || c.starts_with('_'));
        if add.deletion_vector.is_some() || hidden || size >= small {
            continue;
        }
        if !options.partitions.is_empty()
            && !options.partitions.iter().any(|p| p == bucket.as_str())
        {
            continue;
        }
        by_partition
            .entry(bucket.as_str().to_owned())
            .or_insert_with(|| (bucket.clone(), Vec::new()))
            .1
            .push((add, path, size));
    }
    if let Some(missing) = options
        .partitions
        .iter()
        .find(|p| !seen.contains(p.as_str()))
    {
        let known: Vec<&str> = seen.iter().take(5).map(String::as_str).collect();
        return Err(Error::Config(format!(
            "partition `{missing}` has no live file in the table (partitions: {}{}); name a \
             partition by its directory, `column=value/...`",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            },
            if seen.len() > known.len() {
                ", ..."
            } else {
                ""
            }
        )));
    }
    let mut bins = Vec::new();
    let mut too_long = Vec::new();
    let mut planned_bytes = 0u64;
    'partitions: for (partition, (bucket, mut files)) in by_partition {
        if path_max.is_some_and(|max| bucket.as_str().len() > max) {
            if files.len() >= options.min_files {
                too_long.push(partition);
            }
            continue;
        }
        files.sort_by(|a, b| {
            (a.0.modification_time, &a.0.path).cmp(&(b.0.modification_time, &b.0.path))
        });
        let mut current: Vec<(&crate::table::delta::actions::Add, String, u64)> = Vec::new();
        let mut current_bytes = 0u64;
        let flush = |current: &mut Vec<(&crate::table::delta::actions::Add, String, u64)>,
                     bytes: &mut u64,
                     bins: &mut Vec<PlannedBin>| {
            if current.len() >= options.min_files {
                bins.push(PlannedBin {
                    bin: Bin {
                        partition: partition.clone(),
                        inputs: current.iter().map(|(a, _, _)| a.path.clone()).collect(),
                        input_bytes: *bytes,
                    },
                    bucket: bucket.clone(),
                    paths: current.iter().map(|(_, p, _)| p.clone()).collect(),
                    removes: current
                        .iter()
                        .map(|(a, _, _)| TableRemove {
                            path: a.path.clone(),
                            partition_values: a.partition_values.clone(),
                            size: a.size,
                            stats: a.stats.clone(),
                            num_records: num_records(a.stats.as_deref()),
                        })
                        .collect(),
                });
            }
            current.clear();
            *bytes = 0;
        };
        for file in files {
            if current_bytes + file.2 > options.target_size_bytes && !current.is_empty() {
                flush(&mut current, &mut current_bytes, &mut bins);
            }
            if planned_bytes >= options.max_bytes {
                break 'partitions;
            }
            planned_bytes += file.2;
            current_bytes += file.2;
            current.push(file);
        }
        flush(&mut current, &mut current_bytes, &mut bins);
    }
    Ok((bins, too_long))
}

/// `numRecords` of a `stats` string.
fn num_records(stats: Option<&str>) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(stats?).ok()?;
    value.get("numRecords")?.as_u64()
}

/// Step 2 of a round for one bin: its inputs read and decoded, record counts checked against
/// the log, and every batch brought to one schema by the rule appends follow: columns matched
/// by name, in the table's order; a nullable column a file lacks (an append that did not
/// write it, a column added to the table later) is null; another spelling of the same type
/// (a time zone `UTC` or `+00:00`) is cast to the first file's. Files whose columns cannot be
/// brought to one schema that way are refused, as before.
async fn read_bin(
    storage: &dyn Storage,
    bin: &PlannedBin,
    columns: &[(String, bool, Option<arrow::datatypes::DataType>)],
) -> Result<Vec<(String, Vec<RecordBatch>)>> {
    let mut read = Vec::with_capacity(bin.paths.len());
    for (path, remove) in bin.paths.iter().zip(&bin.removes) {
        let bytes: Bytes = storage.read_data_file(path).await?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?
            .with_batch_size(8192)
            .build()?;
        let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        if let Some(expected) = remove.num_records {
            if rows != expected {
                return Err(Error::corrupt(
                    format!("data file `{path}`"),
                    format!("it holds {rows} records, its `add` says {expected}"),
                ));
            }
        }
        read.push((path.clone(), batches));
    }
    let Some(target) = one_schema(&read, columns) else {
        return Err(Error::NotSupported(format!(
            "the files of partition `{}` have schemas that cannot be brought to one (`{}` and \
             the others); compaction merges files of one schema only",
            bin.bin.partition, bin.paths[0]
        )));
    };
    let mut out = Vec::with_capacity(read.len());
    for (path, batches) in read {
        let conformed = batches
            .iter()
            .map(|b| conform(b, &target))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| {
                Error::NotSupported(format!(
                    "the file `{path}` of partition `{}` does not fit the schema of the others \
                     ({e}); compaction merges files of one schema only",
                    bin.bin.partition
                ))
            })?;
        out.push((path, conformed));
    }
    Ok(out)
}

/// The schema a bin's files are brought to: the table's data columns in its order, each of
/// the first file's type that has it (else the type the table names), nullable if the table
/// or any file says so; then any column of the files the table does not list, in their order.
/// `None` if a column's type cannot be told.
fn one_schema(
    read: &[(String, Vec<RecordBatch>)],
    columns: &[(String, bool, Option<arrow::datatypes::DataType>)],
) -> Option<SchemaRef> {
    use arrow::datatypes::{Field, Schema};
    let schemas: Vec<SchemaRef> = read
        .iter()
        .filter_map(|(_, b)| b.first().map(|b| b.schema()))
        .collect();
    let first = schemas.first()?;
    if schemas.iter().all(|s| s.fields() == first.fields()) {
        return Some(first.clone());
    }
    let of = |name: &str| {
        schemas
            .iter()
            .find_map(|s| s.field_with_name(name).ok().cloned())
    };
    let mut fields = Vec::new();
    for (name, nullable, table_type) in columns {
        let found = of(name);
        let data_type = match &found {
            Some(f) => f.data_type().clone(),
            None => table_type.clone()?,
        };
        let nullable = *nullable
            || schemas
                .iter()
                .any(|s| s.field_with_name(name).map_or(true, |f| f.is_nullable()));
        fields.push(Field::new(name, data_type, nullable));
    }
    for s in &schemas {
        for f in s.fields() {
            if !fields.iter().any(|t| t.name() == f.name()) {
                fields.push(f.as_ref().clone().with_nullable(true));
            }
        }
    }
    Some(Arc::new(Schema::new(fields)))
}

/// `batch` in `target`: its columns by name, cast where only the spelling of the type differs,
/// null where it has none (the column must be nullable).
fn conform(
    batch: &RecordBatch,
    target: &SchemaRef,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    if batch.schema().fields() == target.fields() {
        return Ok(batch.clone());
    }
    let columns = target
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => arrow::compute::cast(c, f.data_type()),
            None if f.is_nullable() => Ok(arrow::array::new_null_array(
                f.data_type(),
                batch.num_rows(),
            )),
            None => Err(arrow::error::ArrowError::SchemaError(format!(
                "it has no column `{}`",
                f.name()
            ))),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    RecordBatch::try_new(target.clone(), columns)
}
