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
//! stopped. This needs a put that refuses to replace ([`Storage::refuses_replace`]); where the
//! store cannot refuse, [`DeltaTable::open`] refuses a writer unless the user says it is the
//! table's only one.
//!
//! **Conflicts.** filesink's entries are blind appends: they never read data to decide what to
//! write, so another writer's `add`s, `remove`s of other files and `txn`s of other appIds never
//! conflict. A new `protocol` is checked again (a feature we do not implement stops the commit
//! before the entry), and so is a new `metaData` (an incompatible schema is
//! [`Error::Conflict`]).

use std::sync::Arc;
use std::time::Duration;

use super::actions::{Add, CommitInfo, Entry, FilesinkInfo, Metadata, Txn};
use super::features::{self, Accepted};
use super::log::{entry_path, Snapshot};
use super::schema::{self, StructType, TableSchema};
use super::stats;
use super::DeltaOptions;
use crate::protocol::{Committable, FileStats};
use crate::storage::Storage;
use crate::{Error, Result};

/// Attempts of the commit loop before the entry is deferred to the next checkpoint.
pub(crate) const COMMIT_ATTEMPTS_MAX: usize = 100;

/// What [`DeltaTable::commit`] did with a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableOutcome {
    /// The checkpoint's entry was written at this version.
    Committed(i64),
    /// The log already holds the checkpoint (an earlier attempt, or a run before a crash).
    AlreadyCommitted,
    /// The checkpoint had no file the log does not hold: no entry.
    NothingToCommit,
    /// Lost the race for a version [`COMMIT_ATTEMPTS_MAX`] times: the next checkpoint's entry
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
        let location = options
            .location
            .clone()
            .unwrap_or_else(|| format!("the {} table", storage.name()));
        let job_schema = options.schema.as_ref().ok_or_else(|| {
            Error::Config("a Delta table job needs its record schema (DeltaOptions::schema)".into())
        })?;
        let ours =
            schema::from_arrow(job_schema, &options.partition_by, &options.time_directories)?;
        if !options.single_writer && !storage.refuses_replace().await? {
            return Err(Error::NotSupported(format!(
                "`{location}` ignores conditional writes (If-None-Match: *), so two writers of \
                 a Delta table could overwrite each other's log entries; pass --single-writer \
                 (DeltaOptions::single_writer) if this is the table's only writer"
            )));
        }
        let snapshot = Snapshot::load(storage.as_ref()).await?;
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
        };
        table.check()?;
        Ok(table)
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
        let new = self.snapshot.refresh(self.storage.as_ref()).await?;
        if new
            .iter()
            .any(|(_, e)| e.protocol.is_some() || e.metadata.is_some())
        {
            self.check()?;
        }
        Ok(())
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
        let table_schema = StructType::parse(&metadata.schema_string, &what)?;
        let accepted = features::check_table(&self.location, protocol, metadata, &table_schema)?;
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
    ) -> Result<TableOutcome> {
        let n = i64::try_from(checkpoint_id)
            .map_err(|_| Error::InvalidInput(format!("checkpoint id {checkpoint_id} too large")))?;
        let mut lost_races = 0u32;
        for _ in 0..COMMIT_ATTEMPTS_MAX {
            self.refresh().await?;
            let done = self.snapshot.txn_version(&self.app_id);
            if done.is_some_and(|v| v >= n) {
                return Ok(TableOutcome::AlreadyCommitted);
            }
            let adds = self.adds(committables, done.unwrap_or(0), created_at_ms)?;
            if adds.is_empty() {
                return Ok(TableOutcome::NothingToCommit);
            }
            let (v, entry) = self.entry(n, adds)?;
            let bytes = entry.render()?;
            let path = entry_path(v);
            match self.storage.put_metadata(&path, &bytes).await {
                Ok(()) => {
                    self.snapshot.apply(v, entry, &path)?;
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
                Err(e) if e.is_retryable() => {
                    // The put may have landed: the next refresh tells.
                    tracing::warn!(error = %e, version = v, "log entry put failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(TableOutcome::Deferred)
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

    /// The entry of checkpoint `n` with `adds`, and the version it goes to.
    fn entry(&self, n: i64, adds: Vec<Add>) -> Result<(i64, Entry)> {
        let now = chrono::Utc::now().timestamp_millis();
        let v = self.snapshot.version.map_or(0, |c| c + 1);
        let in_commit_timestamp = self
            .accepted
            .is_some_and(|a| a.in_commit_timestamps)
            .then(|| now.max(self.snapshot.in_commit_timestamp.unwrap_or(0) + 1));
        let mut operation_parameters = serde_json::Map::new();
        operation_parameters.insert("outputMode".into(), "Append".into());
        operation_parameters.insert("queryId".into(), self.app_id.clone().into());
        operation_parameters.insert("epochId".into(), n.to_string().into());
        let commit_info = CommitInfo {
            timestamp: Some(now),
            in_commit_timestamp,
            operation: Some("STREAMING UPDATE".into()),
            operation_parameters: Some(operation_parameters),
            read_version: self.snapshot.version,
            isolation_level: Some("Serializable".into()),
            is_blind_append: Some(true),
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
            adds,
            ..Entry::default()
        };
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
