//! Writing one checkpoint into the log: the commit loop and its conflict rules (design
//! section 6).
//!
//! ```text
//! loop {
//!     refresh the snapshot                     new entries only; each is checked (below)
//!     txn(appId) ≥ N            → AlreadyCommitted
//!     adds = committables with checkpoint_id > txn(appId)      (the log prefix, D3)
//!     put-if-absent _delta_log/<last read + 1>.json
//!         Ok                    → Committed(v)
//!         Conflict              → another writer took v: loop
//!         retryable error       → the put may have landed: loop (the refresh tells)
//!     after COMMIT_ATTEMPTS_MAX attempts → Deferred (the next checkpoint's entry carries them)
//! }
//! ```
//!
//! **One entry per checkpoint** (invariant 4): an entry is put at (last version read) + 1 and
//! only after every version up to it was read without finding `txn(appId) ≥ N`. If two entries
//! carried `(appId, N)` at versions w1 < w2, the writer of w2 read w1 before its put and
//! stopped. This needs a put that refuses to replace ([`Storage::refuses_replace`](crate::storage::MetadataStore::refuses_replace)); where the
//! store cannot refuse, [`DeltaTable::open`] refuses a writer unless the user says it is the
//! table's only one.
//!
//! **Conflicts.** filesink's entries are blind appends: they never read data to decide what to
//! write, so another writer's `add`s, `remove`s of other files and `txn`s of other appIds never
//! conflict. A new `protocol` is checked again (a feature we do not implement stops the commit
//! before the entry), and so is a new `metaData` (an incompatible schema is
//! [`Error::Conflict`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::actions::{Add, CommitInfo, Entry, FilesinkInfo, Metadata, Remove, Txn};
use super::checkpoint::{self, CheckpointContent, LastCheckpoint};
use super::features::{self, Accepted};
use super::log::{entry_path, Snapshot, LAST_CHECKPOINT, LOG_DIR};
use super::schema::{self, StructType, TableSchema};
use super::stats;
use super::DeltaOptions;
use crate::protocol::{Committable, FileStats};
use crate::storage::Storage;
use crate::{Error, Result};

/// Attempts of the commit loop (lost races for a version) before a checkpoint's log entry
/// is deferred to the next checkpoint.
pub const COMMIT_ATTEMPTS_MAX: usize = 100;

/// Puts that failed with a retryable error (the store, not another writer) that the loop
/// retries before it returns the error (the coordinator then defers the entry).
const PUT_RETRIES_MAX: usize = 3;

/// What the log step of a checkpoint did ([`crate::job::CheckpointReport::table_outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableOutcome {
    /// The checkpoint's entry was written at this version.
    Committed(i64),
    /// The log already holds the checkpoint (an earlier attempt, or a run before a crash).
    AlreadyCommitted,
    /// The checkpoint had no file the log does not hold: no entry.
    NothingToCommit,
    /// A compaction round whose inputs another writer removed meanwhile: its entry must not
    /// be written (the round is abandoned and its output deleted).
    Abandoned,
    /// Lost the race for a version [`COMMIT_ATTEMPTS_MAX`] times in a row: the next checkpoint's entry
    /// carries this one's files.
    Deferred,
}

/// A job's handle on its table: the snapshot it keeps current and what it checks.
#[derive(Debug)]
pub(crate) struct DeltaTable {
    storage: Arc<dyn Storage>,
    location: String,
    app_id: String,
    job: String,
    ours: TableSchema,
    snapshot: Snapshot,
    accepted: Option<Accepted>,
    /// The table's schema, parsed from the snapshot's `metaData` (ours until the table exists).
    table_schema: StructType,
    /// Leaf columns whose statistics go into `add`s.
    indexed: Vec<Vec<String>>,
    /// Whether this writer writes log checkpoints (design section 8).
    log_checkpoints: bool,
    /// The log checkpoint being written in the background, if any.
    checkpointing: Option<tokio::task::JoinHandle<()>>,
    /// The single-writer claim, on a store that cannot refuse to replace a log entry.
    claim: Option<Arc<SharedClaim>>,
    /// Schema evolution allowed ([`DeltaOptions::add_columns`]).
    add_columns: bool,
    /// The table's schema with the job's new columns, for the `metaData` of the next entry
    /// (schema evolution); recomputed against every snapshot the job checks.
    evolved: Option<StructType>,
}

/// The single-writer claim of a table, shared by the writers of one process (an ingest and
/// the compaction it runs in the background): the claim keeps other processes out, and
/// `turn` lets one writer of this process at a time read the log and put its entry, so that
/// they cannot replace each other's entries on a store without conditional puts either.
#[derive(Debug)]
struct SharedClaim {
    lease: Box<dyn crate::storage::JobLease>,
    turn: tokio::sync::Mutex<()>,
}

/// The single-writer claims this process holds, by sink id (a table is one sink's): a second
/// writer of the same table in this process shares the first one's claim.
static CLAIMS: std::sync::LazyLock<
    tokio::sync::Mutex<std::collections::HashMap<String, std::sync::Weak<SharedClaim>>>,
> = std::sync::LazyLock::new(Default::default);

impl SharedClaim {
    /// The claim of `sink_id`'s table: this process's, or a new one taken from `storage`.
    async fn of(
        storage: &dyn Storage,
        sink_id: &str,
        lease: &crate::storage::LeaseOptions,
        job: &str,
        location: &str,
    ) -> Result<Arc<SharedClaim>> {
        let mut claims = CLAIMS.lock().await;
        claims.retain(|_, c| c.strong_count() > 0);
        if let Some(claim) = claims.get(sink_id).and_then(std::sync::Weak::upgrade) {
            return Ok(claim);
        }
        let lease = storage
            .acquire_table_writer(lease)
            .await
            .map_err(|e| match e {
                Error::JobBusy { reason, .. } => Error::job_busy(
                    job,
                    format!(
                        "`{location}` takes a single writer at a time (--single-writer), and another \
                     run is that writer: {reason}"
                    ),
                ),
                other => other,
            })?;
        let claim = Arc::new(SharedClaim {
            lease,
            turn: tokio::sync::Mutex::new(()),
        });
        claims.insert(sink_id.to_owned(), Arc::downgrade(&claim));
        Ok(claim)
    }
}

impl Drop for DeltaTable {
    fn drop(&mut self) {
        if let Some(task) = self.checkpointing.take() {
            task.abort();
        }
    }
}

/// How messages name the table: [`DeltaOptions::location`], else where the storage is.
fn location_of(storage: &dyn Storage, options: &DeltaOptions) -> String {
    options.location.clone().unwrap_or_else(|| storage.place())
}

impl DeltaTable {
    /// Opens the table of job `job` of sink `sink_id` for writing: refuses a store that
    /// cannot keep concurrent writers apart (unless `options` say this is the only writer),
    /// loads the latest snapshot and checks the table's protocol, features and schema
    /// against the job's. Refusals write nothing.
    pub(crate) async fn open(
        storage: Arc<dyn Storage>,
        options: &DeltaOptions,
        sink_id: &str,
        job: &str,
    ) -> Result<DeltaTable> {
        let location = location_of(storage.as_ref(), options);
        let refuses_replace = storage.refuses_replace().await?;
        Self::open_checked(storage, options, sink_id, job, location, refuses_replace).await
    }

    /// The table as [`DeltaTable::open`] reads and checks it, for a caller that only looks
    /// (a dry run): no claim, no probe of the store, nothing written. Committing through it is
    /// refused by the store's own guard only.
    pub(crate) async fn open_to_read(
        storage: Arc<dyn Storage>,
        options: &DeltaOptions,
        sink_id: &str,
        job: &str,
    ) -> Result<DeltaTable> {
        let location = location_of(storage.as_ref(), options);
        let mut options = options.clone();
        options.single_writer = true;
        Self::open_checked(storage, &options, sink_id, job, location, true).await
    }

    async fn open_checked(
        storage: Arc<dyn Storage>,
        options: &DeltaOptions,
        sink_id: &str,
        job: &str,
        location: String,
        refuses_replace: bool,
    ) -> Result<DeltaTable> {
        if !options.single_writer && !refuses_replace {
            return Err(Error::NotSupported(format!(
                "`{location}` ignores conditional writes (If-None-Match: *), so two writers of \
                 a Delta table could overwrite each other's log entries; pass --single-writer \
                 (DeltaOptions::single_writer) if this is the table's only writer"
            )));
        }
        // Alone by the user's word: a second filesink writer is kept out by a claim (shared
        // with the writers of the same table in this process).
        let claim = if refuses_replace {
            None
        } else {
            Some(SharedClaim::of(storage.as_ref(), sink_id, &options.lease, job, &location).await?)
        };
        let snapshot = Snapshot::load(storage.as_ref()).await?;
        let ours = match (&options.schema, &snapshot.metadata) {
            // A job that has seen no record has no column types yet: it writes nothing, and
            // takes the table as it is (or leaves it uncreated) until it does.
            (Some(job_schema), m) if schema::is_undecided(job_schema) => match m {
                Some(m) => TableSchema {
                    schema: StructType::parse(
                        &m.schema_string,
                        &format!("metaData.schemaString of table `{location}`"),
                    )?,
                    partition_columns: m.partition_columns.clone(),
                    needs_timestamp_ntz: false,
                },
                None => TableSchema {
                    schema: StructType::default(),
                    partition_columns: Vec::new(),
                    needs_timestamp_ntz: false,
                },
            },
            (Some(job_schema), _) => {
                schema::from_arrow(job_schema, &options.partition_by, &options.time_directories)?
            }
            // A job that rearranges what the table holds (compaction) takes its schema.
            (None, Some(m)) if options.table_schema => TableSchema {
                schema: StructType::parse(
                    &m.schema_string,
                    &format!("metaData.schemaString of table `{location}`"),
                )?,
                partition_columns: m.partition_columns.clone(),
                needs_timestamp_ntz: false,
            },
            (None, None) if options.table_schema => {
                return Err(Error::Config(format!(
                    "`{location}` is not a Delta table (no `_delta_log/` entry)"
                )))
            }
            (None, _) => {
                return Err(Error::Config(
                    "a Delta table job needs its record schema (DeltaOptions::schema)".into(),
                ))
            }
        };
        let mut table = DeltaTable {
            storage,
            location,
            app_id: app_id(sink_id, job),
            job: job.to_owned(),
            table_schema: ours.schema.clone(),
            ours,
            snapshot,
            accepted: None,
            indexed: Vec::new(),
            log_checkpoints: options.log_checkpoints,
            checkpointing: None,
            claim,
            add_columns: options.add_columns,
            evolved: None,
        };
        table.check()?;
        Ok(table)
    }

    /// The checks of [`DeltaTable::open`] that need only the log, run before a job creates
    /// anything: a table whose protocol, features or schema the job cannot write into (another
    /// engine's, say) is refused with nothing written, not even the sink's identity. A
    /// directory without a log, and a job that takes the table's schema (compaction), pass.
    pub(crate) async fn check_before_writing(
        storage: &dyn Storage,
        options: &DeltaOptions,
    ) -> Result<()> {
        let Some(job_schema) = &options.schema else {
            return Ok(());
        };
        if schema::is_undecided(job_schema) {
            return Ok(());
        }
        let snapshot = Snapshot::load(storage).await?;
        let (Some(protocol), Some(metadata)) = (&snapshot.protocol, &snapshot.metadata) else {
            return Ok(());
        };
        let location = location_of(storage, options);
        let ours =
            schema::from_arrow(job_schema, &options.partition_by, &options.time_directories)?;
        let what = format!("metaData.schemaString of table `{location}`");
        let mut table_schema = StructType::parse(&metadata.schema_string, &what)?;
        features::check_table(&location, protocol, metadata, &table_schema)?;
        if options.add_columns {
            if let Some(evolved) =
                schema::with_added_columns(&table_schema, &metadata.partition_columns, &ours)
            {
                table_schema = evolved;
            }
        }
        schema::check_compatible(&location, &table_schema, &metadata.partition_columns, &ours)
    }

    /// `schema` (a job's, about to open the table) with each nullable column that was null in
    /// every record typed as the table's nullable column of that name
    /// ([`schema::fill_null_columns`]); as it is where there is no table.
    pub(crate) async fn fill_null_columns(
        storage: &dyn Storage,
        schema: arrow::datatypes::Schema,
    ) -> Result<arrow::datatypes::Schema> {
        if !schema
            .fields()
            .iter()
            .any(|f| f.data_type() == &arrow::datatypes::DataType::Null)
        {
            return Ok(schema);
        }
        let snapshot = Snapshot::load(storage).await?;
        let Some(m) = &snapshot.metadata else {
            return Ok(schema);
        };
        let table = StructType::parse(&m.schema_string, "metaData.schemaString of the table")?;
        Ok(schema::fill_null_columns(schema, &table))
    }

    /// The appId of the job's `txn`s.
    pub(crate) fn app_id(&self) -> &str {
        &self.app_id
    }

    /// The latest checkpoint of the job that the log holds, per the snapshot.
    pub(crate) fn txn_version(&self) -> Option<u64> {
        self.snapshot
            .txn_version(&self.app_id)
            .map(|v| u64::try_from(v).unwrap_or(0))
    }

    /// Re-reads the log from the snapshot's version on.
    pub(crate) async fn refresh(&mut self) -> Result<()> {
        // What a refresh applied is checked even if it failed halfway, and a refused check
        // stays refused: the flag is cleared only by a check that passes.
        let refreshed = self.snapshot.refresh(self.storage.as_ref()).await;
        if self.snapshot.unchecked {
            self.check()?;
        }
        refreshed.map(drop)
    }

    /// Checks the snapshot's protocol and schema (design section 12 and 7).
    fn check(&mut self) -> Result<()> {
        let (Some(protocol), Some(metadata)) = (&self.snapshot.protocol, &self.snapshot.metadata)
        else {
            self.indexed = stats::indexed_columns(
                &self.ours.schema,
                &self.ours.partition_columns,
                &Default::default(),
            )?;
            return Ok(());
        };
        let what = format!("metaData.schemaString of table `{}`", self.location);
        let mut table_schema = StructType::parse(&metadata.schema_string, &what)?;
        let accepted = features::check_table(&self.location, protocol, metadata, &table_schema)?;
        self.evolved = None;
        if self.add_columns {
            if let Some(evolved) =
                schema::with_added_columns(&table_schema, &metadata.partition_columns, &self.ours)
            {
                self.evolved = Some(evolved.clone());
                table_schema = evolved;
            }
        }
        schema::check_compatible(
            &self.location,
            &table_schema,
            &metadata.partition_columns,
            &self.ours,
        )?;
        self.indexed = stats::indexed_columns(
            &table_schema,
            &metadata.partition_columns,
            &metadata.configuration,
        )?;
        self.table_schema = table_schema;
        self.accepted = Some(accepted);
        self.snapshot.unchecked = false;
        Ok(())
    }

    /// Writes checkpoint `checkpoint_id` of the job into the log: one entry with a `txn` of
    /// the checkpoint and an `add` for every committable the log does not hold yet
    /// (`checkpoint_id` above the job's `txn`). Call it only once every committable's file is
    /// committed durably (invariant 3). `created_at_ms` is the manifest's, the files'
    /// `modificationTime` (the same on every retry).
    pub(crate) async fn commit(
        &mut self,
        checkpoint_id: u64,
        created_at_ms: i64,
        committables: &[Committable],
        removes: &[TableRemove],
    ) -> Result<TableOutcome> {
        let n = i64::try_from(checkpoint_id)
            .map_err(|_| Error::InvalidInput(format!("checkpoint id {checkpoint_id} too large")))?;
        let mut lost_races = 0u32;
        let mut failed_puts = 0usize;
        let claim = self.claim.clone();
        for _ in 0..COMMIT_ATTEMPTS_MAX {
            // A writer sharing this process's single-writer claim reads and puts in turn.
            let _turn = match &claim {
                Some(c) => Some(c.turn.lock().await),
                None => None,
            };
            self.refresh().await?;
            let done = self.snapshot.txn_version(&self.app_id);
            if done.is_some_and(|v| v >= n) {
                return Ok(TableOutcome::AlreadyCommitted);
            }
            // A rearrangement conflicts with an entry that removed one of its inputs
            // (delta-rs's ConcurrentDeleteDelete): it must not be written.
            if !self.all_live(removes) {
                return Ok(TableOutcome::Abandoned);
            }
            let mut adds = self.adds(committables, done.unwrap_or(0), created_at_ms)?;
            // (A rearrangement whose inputs held no rows removes them without an add.)
            if adds.is_empty() && removes.is_empty() {
                return Ok(TableOutcome::NothingToCommit);
            }
            if !removes.is_empty() {
                adds.iter_mut().for_each(|a| a.data_change = false);
            }
            let (v, entry) = self.entry(n, adds, removes)?;
            let bytes = entry.render()?;
            let path = entry_path(v);
            // A single writer that lost its claim (paused past its lease) must not put.
            if let Some(claim) = &claim {
                claim.lease.check().await?;
            }
            match self.storage.put_metadata(&path, &bytes).await {
                Ok(()) => {
                    self.snapshot.apply(v, entry, &path)?;
                    self.checkpoint_log(v).await;
                    tracing::info!(
                        job = %self.job,
                        checkpoint = checkpoint_id,
                        version = v,
                        "checkpoint in the table's log"
                    );
                    return Ok(TableOutcome::Committed(v));
                }
                Err(Error::Conflict { .. }) => {
                    // Another writer took version v; the next refresh reads it.
                    lost_races += 1;
                    tracing::debug!(version = v, "lost the race for a log version");
                    if lost_races >= 3 {
                        let ms = backoff_ms(lost_races);
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                }
                Err(e) if e.is_retryable() && failed_puts < PUT_RETRIES_MAX => {
                    // The put may have landed: the next refresh tells.
                    failed_puts += 1;
                    tracing::warn!(error = %e, version = v, "log entry put failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(TableOutcome::Deferred)
    }

    /// Where rearrangement `checkpoint_id` of this job stands, after a refresh: whether the
    /// log holds it, and whether every file its `removes` name is still a live `add`. Both
    /// from one refreshed snapshot: the round's own entry removes its inputs.
    pub(crate) async fn round_state(
        &mut self,
        checkpoint_id: u64,
        removes: &[TableRemove],
    ) -> Result<(bool, bool)> {
        self.refresh().await?;
        let in_log = self.txn_version().is_some_and(|v| v >= checkpoint_id);
        Ok((in_log, self.all_live(removes)))
    }

    fn all_live(&self, removes: &[TableRemove]) -> bool {
        removes
            .iter()
            .all(|r| self.snapshot.adds.contains_key(&r.path))
    }

    /// The table's live files, as the snapshot has them (path as written in the log).
    pub(crate) fn live_files(&self) -> impl Iterator<Item = &Add> {
        self.snapshot.adds.values()
    }

    /// The table's data columns (its schema less its partition columns), in its order: name,
    /// nullability, and the Arrow type filesink writes for it where that is a primitive type.
    pub(crate) fn data_columns(&self) -> Vec<(String, bool, Option<arrow::datatypes::DataType>)> {
        let partitions = self.partition_columns();
        self.table_schema
            .fields
            .iter()
            .filter(|f| !partitions.contains(&f.name))
            .map(|f| {
                (
                    f.name.clone(),
                    f.nullable,
                    schema::arrow_type_of(&f.data_type),
                )
            })
            .collect()
    }

    /// The table's partition columns.
    pub(crate) fn partition_columns(&self) -> &[String] {
        self.snapshot
            .metadata
            .as_ref()
            .map_or(&self.ours.partition_columns, |m| &m.partition_columns)
    }

    /// The snapshot's version (`None`: no table yet).
    pub(crate) fn version(&self) -> Option<i64> {
        self.snapshot.version
    }

    /// Waits for the log checkpoint running in the background, if any (it is optional: its
    /// failure was a warning).
    pub(crate) async fn settle(&mut self) {
        if let Some(task) = self.checkpointing.take() {
            let _ = task.await;
        }
    }

    /// After writing version `v`: if `v` is a multiple of `delta.checkpointInterval` (10 by
    /// default), writes log checkpoint `v` from the snapshot on a task of its own, then points
    /// `_last_checkpoint` at it (design section 8). Off the commit path; at most one runs (the
    /// previous one is waited for first).
    async fn checkpoint_log(&mut self, v: i64) {
        let interval = self
            .snapshot
            .metadata
            .as_ref()
            .and_then(|m| m.configuration.get("delta.checkpointInterval"))
            .and_then(|i| i.trim().parse::<i64>().ok())
            .filter(|i| *i > 0)
            .unwrap_or(CHECKPOINT_INTERVAL_DEFAULT);
        let allowed = self.accepted.is_none_or(|a| a.log_checkpoints);
        if !self.log_checkpoints || !allowed || v == 0 || v % interval != 0 {
            return;
        }
        self.settle().await;
        let storage = self.storage.clone();
        let snapshot = self.snapshot.clone();
        let task = async move {
            if let Err(e) = write_log_checkpoint(storage.as_ref(), &snapshot, v).await {
                tracing::warn!(version = v, error = %e, "log checkpoint not written");
            }
        };
        self.checkpointing = Some(tokio::spawn(
            task.instrument(tracing::debug_span!("log_checkpoint", version = v)),
        ));
    }

    /// The `add`s of the committables whose checkpoint the log does not hold (`> done`).
    fn adds(&self, committables: &[Committable], done: i64, at_ms: i64) -> Result<Vec<Add>> {
        let partition_columns = self
            .snapshot
            .metadata
            .as_ref()
            .map_or(&self.ours.partition_columns, |m| &m.partition_columns);
        let mut adds = Vec::new();
        for c in committables {
            if i64::try_from(c.checkpoint_id).unwrap_or(i64::MAX) <= done {
                continue;
            }
            let partition_values = stats::partition_values(&c.bucket, partition_columns)?;
            let stats = match &c.stats {
                Some(s) => Some(stats::render(
                    &self.indexed_only(s),
                    &self.table_schema,
                    partition_columns,
                )?),
                None => None,
            };
            adds.push(Add::new(
                stats::encode_path(&c.final_path),
                partition_values,
                i64::try_from(c.size_bytes).unwrap_or(i64::MAX),
                at_ms,
                true,
                stats,
            ));
        }
        Ok(adds)
    }

    /// `stats` restricted to the table's indexed columns (a column's nested leaves, and an
    /// array or map as one leaf).
    fn indexed_only(&self, s: &FileStats) -> FileStats {
        let keep = |path: &Vec<String>| {
            self.indexed
                .iter()
                .any(|i| path.len() >= i.len() && path[..i.len()] == i[..])
        };
        FileStats {
            num_records: s.num_records,
            min_values: s
                .min_values
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            max_values: s
                .max_values
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            null_count: s
                .null_count
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }

    /// The entry of checkpoint `n` with `adds` (and, for a rearrangement, `removes`), and the
    /// version it goes to.
    fn entry(&self, n: i64, adds: Vec<Add>, removes: &[TableRemove]) -> Result<(i64, Entry)> {
        let now = chrono::Utc::now().timestamp_millis();
        let adds_none = adds.is_empty();
        let v = self.snapshot.version.map_or(0, |c| c + 1);
        let in_commit_timestamp = self
            .accepted
            .is_some_and(|a| a.in_commit_timestamps)
            .then(|| now.max(self.snapshot.in_commit_timestamp.unwrap_or(0) + 1));
        let rearranges = !removes.is_empty();
        let mut operation_parameters = serde_json::Map::new();
        if rearranges {
            let bytes: i64 = removes.iter().map(|r| r.size).sum();
            operation_parameters.insert("inputFiles".into(), removes.len().to_string().into());
            operation_parameters.insert("inputBytes".into(), bytes.to_string().into());
        } else {
            operation_parameters.insert("outputMode".into(), "Append".into());
            operation_parameters.insert("queryId".into(), self.app_id.clone().into());
            operation_parameters.insert("epochId".into(), n.to_string().into());
        }
        let (operation, isolation) = if rearranges {
            ("OPTIMIZE", "SnapshotIsolation")
        } else {
            ("STREAMING UPDATE", "Serializable")
        };
        let commit_info = CommitInfo {
            timestamp: Some(now),
            in_commit_timestamp,
            operation: Some(operation.into()),
            operation_parameters: Some(operation_parameters),
            read_version: self.snapshot.version,
            isolation_level: Some(isolation.into()),
            is_blind_append: Some(!rearranges),
            engine_info: Some(format!("filesink/{}", env!("CARGO_PKG_VERSION"))),
            txn_id: Some(uuid::Uuid::now_v7().to_string()),
            filesink: Some(FilesinkInfo {
                job: self.job.clone(),
                checkpoint: u64::try_from(n).unwrap_or(0),
            }),
            extra: Default::default(),
        };
        let mut entry = Entry {
            commit_info: Some(commit_info),
            txns: vec![Txn {
                app_id: self.app_id.clone(),
                version: n,
                last_updated: Some(now),
                extra: Default::default(),
            }],
            removes: removes
                .iter()
                .map(|r| Remove {
                    path: r.path.clone(),
                    deletion_timestamp: Some(now),
                    data_change: false,
                    extended_file_metadata: Some(true),
                    partition_values: Some(r.partition_values.clone()),
                    size: Some(r.size),
                    stats: r.stats.clone(),
                    tags: None,
                    deletion_vector: None,
                    base_row_id: None,
                    default_row_commit_version: None,
                    extra: Default::default(),
                })
                .collect(),
            adds,
            ..Entry::default()
        };
        if let (Some(evolved), Some(m), false) = (&self.evolved, &self.snapshot.metadata, adds_none)
        {
            // Schema evolution: the columns go in with the first files that hold them.
            let mut m = m.clone();
            m.schema_string = evolved.to_schema_string();
            entry.metadata = Some(m);
        }
        if !self.snapshot.exists() {
            entry.protocol = Some(features::new_table_protocol(self.ours.needs_timestamp_ntz));
            entry.metadata = Some(Metadata {
                id: uuid::Uuid::now_v7().to_string(),
                name: None,
                description: None,
                format: super::actions::Format::parquet(),
                schema_string: self.ours.schema.to_schema_string(),
                partition_columns: self.ours.partition_columns.clone(),
                configuration: Default::default(),
                created_time: Some(now),
                extra: Default::default(),
            });
        }
        Ok((v, entry))
    }
}

/// A file a compaction round removes from the table, as its manifest records it (design
/// section 9): what the `remove` action needs, taken from the live `add` the round planned on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableRemove {
    /// The `add.path`, exactly as the log has it (percent-encoded).
    pub path: String,
    /// Its partition values.
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Its size in bytes.
    pub size: i64,
    /// Its `stats` string, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    /// Its record count, for the round's check that the output holds as many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_records: Option<u64>,
}

/// `delta.checkpointInterval` when the table does not set it.
pub(crate) const CHECKPOINT_INTERVAL_DEFAULT: i64 = 10;

/// `delta.deletedFileRetentionDuration` when the table does not set it: one week.
const TOMBSTONE_RETENTION_DEFAULT_MS: i64 = 7 * 24 * 3600 * 1000;

/// Writes the classic checkpoint of `snapshot` (at version `v`), durably and without
/// replacing (another writer's checkpoint of `v` holds the same state: fine), then points
/// `_last_checkpoint` at it unless the pointer already names a newer one.
pub(crate) async fn write_log_checkpoint(
    storage: &dyn Storage,
    snapshot: &Snapshot,
    v: i64,
) -> Result<()> {
    let (Some(protocol), Some(metadata)) = (&snapshot.protocol, &snapshot.metadata) else {
        return Ok(());
    };
    let retention_ms = metadata
        .configuration
        .get("delta.deletedFileRetentionDuration")
        .and_then(|d| parse_interval_ms(d))
        .unwrap_or(TOMBSTONE_RETENTION_DEFAULT_MS);
    let cutoff = chrono::Utc::now().timestamp_millis() - retention_ms;
    let mut txns: Vec<Txn> = snapshot.txns.values().cloned().collect();
    txns.sort_by(|a, b| a.app_id.cmp(&b.app_id));
    let mut adds: Vec<Add> = snapshot.adds.values().cloned().collect();
    adds.sort_by(|a, b| a.path.cmp(&b.path));
    let mut removes: Vec<_> = snapshot
        .removes
        .values()
        .filter(|r| r.deletion_timestamp.unwrap_or(0) > cutoff)
        .cloned()
        .collect();
    removes.sort_by(|a, b| a.path.cmp(&b.path));
    let mut domains: Vec<_> = snapshot.domain_metadata.values().cloned().collect();
    domains.sort_by(|a, b| a.domain.cmp(&b.domain));
    let content = CheckpointContent {
        protocol,
        metadata,
        txns: &txns,
        adds: &adds,
        removes: &removes,
        domain_metadata: &domains,
    };
    let bytes = checkpoint::write_checkpoint(&content)?;
    let path = format!("{LOG_DIR}/{}", checkpoint::checkpoint_file_name(v));
    match storage.put_metadata(&path, &bytes).await {
        Ok(()) | Err(Error::Conflict { .. }) => {}
        Err(e) => return Err(e),
    }
    let newer = match storage.get_metadata(LAST_CHECKPOINT).await? {
        Some(b) => LastCheckpoint::parse(&b, LAST_CHECKPOINT).is_ok_and(|p| p.version >= v),
        None => false,
    };
    if !newer {
        let pointer = LastCheckpoint {
            version: v,
            size: (1 + 1 + txns.len() + adds.len() + removes.len() + domains.len()) as i64,
            parts: None,
            size_in_bytes: Some(bytes.len() as i64),
            num_of_add_files: Some(adds.len() as i64),
            extra: Default::default(),
        };
        storage
            .replace_metadata(LAST_CHECKPOINT, &pointer.render())
            .await?;
    }
    tracing::info!(version = v, files = adds.len(), "log checkpoint written");
    Ok(())
}

/// Milliseconds of a Delta interval property (`interval 7 days`, `interval 1 week`,
/// `168 hours`); `None` if it does not parse.
pub(crate) fn parse_interval_ms(s: &str) -> Option<i64> {
    let mut words = s
        .split_whitespace()
        .filter(|w| !w.eq_ignore_ascii_case("interval"));
    let n: i64 = words.next()?.parse().ok()?;
    let unit = words.next()?.to_ascii_lowercase();
    let ms = match unit.trim_end_matches('s') {
        "millisecond" => 1,
        "second" => 1000,
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        "week" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms)
}

/// The appId of job `job` of sink `sink_id`: `filesink-<sink id>-<job>` (design section 2).
pub(crate) fn app_id(sink_id: &str, job: &str) -> String {
    format!("filesink-{sink_id}-{job}")
}

/// A jittered wait after the `races`-th lost race: 1 ms doubling up to 100 ms.
fn backoff_ms(races: u32) -> u64 {
    let ceiling = 1u64 << races.saturating_sub(3).min(7);
    let ceiling = ceiling.min(100);
    1 + u64::from(uuid::Uuid::now_v7().as_u128() as u32) % ceiling
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::protocol::{BucketId, PendingHandle, FORMAT_VERSION};
    use crate::storage::LocalStorage;

    fn committable(checkpoint_id: u64) -> Committable {
        Committable {
            version: FORMAT_VERSION,
            writer_id: "j_0".into(),
            checkpoint_id,
            bucket: BucketId::root(),
            final_path: format!("part-j_0-0-{checkpoint_id}.parquet"),
            size_bytes: 100,
            crc32c: 0,
            record_count: 10,
            pending: PendingHandle::LocalFile {
                in_progress_path: format!(".part-j_0-0-{checkpoint_id}.parquet.inprogress"),
            },
            supersedes: Vec::new(),
            stats: None,
        }
    }

    async fn table(storage: Arc<dyn Storage>) -> DeltaTable {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        DeltaTable::open(storage, &DeltaOptions::new().schema(schema), "sink", "j")
            .await
            .unwrap()
    }

    /// A day of one-second checkpoints: 86,400 versions, a log checkpoint every 10 as our
    /// writer makes them. Opening the table (a restore) reads `_last_checkpoint`, one
    /// checkpoint and the few entries after it, never the log; and the next commit goes on
    /// from there. (The entries are put directly, as the commit loop renders them; the
    /// checkpoint is written from a snapshot of the versions below it.)
    #[tokio::test]
    async fn a_day_of_one_second_checkpoints_restores_from_the_last_log_checkpoint() {
        const VERSIONS: i64 = 86_400;
        const CHECKPOINTED: i64 = 86_390;
        let store = Arc::new(object_store::memory::InMemory::new());
        let storage: Arc<dyn Storage> = Arc::new(
            crate::storage::ObjectStorage::generic(store, "lake", "memory://lake").unwrap(),
        );
        let mut t = table(storage.clone()).await;
        assert_eq!(
            t.commit(1, 1, &[committable(1)], &[]).await.unwrap(),
            TableOutcome::Committed(0)
        );
        t.settle().await;
        let put = |v: i64| {
            let storage = storage.clone();
            async move {
                let n = v + 1;
                let entry = format!(
                    "{{\"txn\":{{\"appId\":\"filesink-sink-j\",\"version\":{n},\"lastUpdated\":{n}}}}}\n\
                     {{\"add\":{{\"path\":\"part-j_0-0-{n}.parquet\",\"partitionValues\":{{}},\"size\":100,\
                     \"modificationTime\":{n},\"dataChange\":true}}}}\n"
                );
                storage
                    .put_metadata(&entry_path(v), entry.as_bytes())
                    .await
                    .unwrap();
            }
        };
        for v in 1..=CHECKPOINTED {
            put(v).await;
        }
        // The checkpoint our writer would have made at this version.
        let upto = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(upto.version, Some(CHECKPOINTED));
        write_log_checkpoint(storage.as_ref(), &upto, CHECKPOINTED)
            .await
            .unwrap();
        drop(upto);
        for v in CHECKPOINTED + 1..VERSIONS {
            put(v).await;
        }

        let loaded = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(loaded.version, Some(VERSIONS - 1));
        assert_eq!(loaded.adds.len() as i64, VERSIONS);
        assert_eq!(loaded.txn_version("filesink-sink-j"), Some(VERSIONS));
        // `_last_checkpoint`, the checkpoint, the 9 entries after it, the absent next one,
        // and one listing that finds nothing newer.
        assert_eq!(loaded.reads, 13);

        // The job restored on it: its next checkpoint takes the next version.
        let mut t = table(storage.clone()).await;
        let n = VERSIONS as u64 + 1;
        assert_eq!(
            t.commit(n, 1, &[committable(n)], &[]).await.unwrap(),
            TableOutcome::Committed(VERSIONS)
        );
        t.settle().await;
    }

    #[tokio::test]
    async fn restore_reads_the_checkpoint_and_a_short_tail_not_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
        let mut t = table(storage.clone()).await;
        for n in 1..=95 {
            let outcome = t.commit(n, 1, &[committable(n)], &[]).await.unwrap();
            assert_eq!(outcome, TableOutcome::Committed(n as i64 - 1));
        }
        t.settle().await;
        for v in [10, 20, 90] {
            let path = format!("{LOG_DIR}/{}", checkpoint::checkpoint_file_name(v));
            assert!(
                storage.get_metadata(&path).await.unwrap().is_some(),
                "{path}"
            );
        }
        let loaded = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(loaded.version, Some(94));
        assert_eq!(loaded.adds.len(), 95);
        assert_eq!(loaded.txn_version("filesink-sink-j"), Some(95));
        // `_last_checkpoint`, checkpoint 90, versions 91–94, the absent 95, and one listing
        // that finds nothing newer.
        assert_eq!(loaded.reads, 8);

        // A stale pointer (a writer that stopped checkpointing) costs a longer tail, then a
        // listing: the same state.
        let stale = LastCheckpoint {
            version: 10,
            size: 1,
            parts: None,
            size_in_bytes: None,
            num_of_add_files: None,
            extra: Default::default(),
        };
        storage
            .replace_metadata(LAST_CHECKPOINT, &stale.render())
            .await
            .unwrap();
        let loaded = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(loaded.version, Some(94));
        assert_eq!(loaded.adds.len(), 95);
        assert_eq!(loaded.txn_version("filesink-sink-j"), Some(95));

        // A stale pointer whose next entry expired (another engine's log cleanup): the tail
        // would end at once, at version 10; the listing finds the newer versions.
        storage.delete_metadata(&entry_path(11)).await.unwrap();
        let loaded = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(loaded.version, Some(94));
        assert_eq!(loaded.adds.len(), 95);

        // With the pointer gone and the entries below checkpoint 90 expired, a listing finds
        // the newest checkpoint.
        storage.delete_metadata(LAST_CHECKPOINT).await.unwrap();
        for v in 0..90 {
            storage.delete_metadata(&entry_path(v)).await.unwrap();
        }
        let loaded = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(loaded.version, Some(94));
        assert_eq!(loaded.adds.len(), 95);
    }

    #[tokio::test]
    async fn a_checkpoint_already_in_the_log_is_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
        let mut t = table(storage.clone()).await;
        assert_eq!(
            t.commit(1, 1, &[committable(1)], &[]).await.unwrap(),
            TableOutcome::Committed(0)
        );
        // A second handle on the table (a restarted run) finds checkpoint 1 in the log.
        let mut again = table(storage.clone()).await;
        assert_eq!(again.txn_version(), Some(1));
        assert_eq!(
            again.commit(1, 1, &[committable(1)], &[]).await.unwrap(),
            TableOutcome::AlreadyCommitted
        );
        // A deferred checkpoint's files ride with the next one: one entry, both adds.
        assert_eq!(
            again
                .commit(3, 1, &[committable(2), committable(3)], &[])
                .await
                .unwrap(),
            TableOutcome::Committed(1)
        );
        let loaded = Snapshot::load(storage.as_ref()).await.unwrap();
        assert_eq!(loaded.adds.len(), 3);
        assert_eq!(loaded.version, Some(1));
        // Nothing new: no entry.
        assert_eq!(
            again.commit(4, 1, &[], &[]).await.unwrap(),
            TableOutcome::NothingToCommit
        );
    }

    #[test]
    fn intervals_parse_as_delta_writes_them() {
        assert_eq!(parse_interval_ms("interval 1 week"), Some(604_800_000));
        assert_eq!(parse_interval_ms("interval 7 days"), Some(604_800_000));
        assert_eq!(parse_interval_ms("168 hours"), Some(604_800_000));
        assert_eq!(parse_interval_ms("soon"), None);
    }
}
