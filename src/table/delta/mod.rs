//! Delta Lake tables (`_delta_log/` beside `_filesink/`), written by filesink's own minimal log
//! writer against the Delta protocol (`PROTOCOL.md` of delta-io/delta).
//!
//! A job writing into a table ([`crate::job::CoordinatorBuilder::delta_table`]) commits
//! each checkpoint as before (manifest, then files) and then appends one log entry: `add`s for
//! the checkpoint's files and a `txn` with appId `filesink-<sink id>-<job>` and the checkpoint
//! id as version. The manifest stays the completion point; the entry is a redo step of the
//! commit, idempotent through the `txn` (design section 3 and 4: `docs/design/delta.md`).
//!
//! - `schema`: Arrow schema → Delta `schemaString`, and the compatibility check of a job's
//!   schema against a table's (design section 7);
//! - `features`: which protocol versions, table features and table properties of an existing
//!   table filesink accepts, and the protocol it writes for a new one (design section 12);
//! - `actions`: the log actions (`commitInfo`, `protocol`, `metaData`, `txn`, `add`, `remove`,
//!   `domainMetadata`), tolerant reading of other engines' entries and rendering of ours;
//! - `stats`: the `stats` string of an `add`, its `partitionValues` and its URI-encoded `path`;
//! - `checkpoint`: classic Parquet log checkpoints read (any engine's, multi-part too) and
//!   written (design section 8), `_last_checkpoint`, and the names of the log's files;
//! - `log`: the `Snapshot` a writer needs, loaded without reading the whole log
//!   (design section 5);
//! - `commit`: `DeltaTable`, the commit loop (design section 6) and log checkpoints.

pub(crate) mod actions;
pub(crate) mod checkpoint;
pub(crate) mod commit;
pub(crate) mod features;
pub(crate) mod log;
pub(crate) mod schema;
pub(crate) mod stats;

use arrow::datatypes::SchemaRef;

pub(crate) use commit::DeltaTable;
pub use commit::{TableOutcome, TableRemove, COMMIT_ATTEMPTS_MAX};
pub(crate) use log::LOG_DIR;
pub(crate) use schema::is_undecided;

/// [`DeltaTable::fill_null_columns`].
pub(crate) async fn fill_null_columns(
    storage: &dyn crate::storage::Storage,
    schema: arrow::datatypes::Schema,
) -> crate::Result<arrow::datatypes::Schema> {
    DeltaTable::fill_null_columns(storage, schema).await
}

impl Default for DeltaOptions {
    fn default() -> Self {
        DeltaOptions::new()
    }
}

/// How a job writes into a Delta table
/// ([`crate::job::CoordinatorBuilder::delta_table`], [`crate::ingest::Ingest::delta_table`]).
///
/// The table's schema is the job's record schema ([`DeltaOptions::schema`], partition columns
/// included as the records carry them); the partition columns move to the end of the table
/// schema, where Delta keeps them, and the time directories of
/// [`crate::bucket::TimePartitioning`] become `string` partition columns after them. An
/// [`crate::ingest::Ingest`] fills in the schema and the partitioning itself.
#[derive(Debug, Clone)]
pub struct DeltaOptions {
    pub(crate) schema: Option<SchemaRef>,
    pub(crate) partition_by: Vec<String>,
    pub(crate) time_directories: Vec<String>,
    pub(crate) single_writer: bool,
    pub(crate) location: Option<String>,
    pub(crate) log_checkpoints: bool,
    /// Take the schema of the existing table instead of a job schema (compaction).
    pub(crate) table_schema: bool,
    /// How long the single writer's claim outlives a run that died
    /// ([`DeltaOptions::single_writer_lease`]).
    pub(crate) lease: crate::storage::LeaseOptions,
    /// Schema evolution: the job may add nullable columns to the table
    /// ([`DeltaOptions::add_columns`]).
    pub(crate) add_columns: bool,
}

impl DeltaOptions {
    /// Options for a table that is not partitioned, concurrent writers allowed; the schema
    /// still has to be given.
    pub fn new() -> Self {
        DeltaOptions {
            schema: None,
            partition_by: Vec::new(),
            time_directories: Vec::new(),
            single_writer: false,
            location: None,
            log_checkpoints: true,
            table_schema: false,
            lease: crate::storage::LeaseOptions::default(),
            add_columns: false,
        }
    }

    /// Schema evolution: a job whose records have top-level columns the table lacks adds them
    /// to the table, nullable (rows written before read them as null), in the `metaData` of
    /// its next log entry, the one that adds its first files. Every other difference is still
    /// refused (another type, a column the job lacks that the table holds non-nullable,
    /// another partitioning). Default off: a job that does not fit the table is refused.
    pub fn add_columns(mut self, on: bool) -> Self {
        self.add_columns = on;
        self
    }

    /// The lease of the single writer's claim on a store without conditional writes
    /// ([`DeltaOptions::single_writer`]): how long a run that died keeps the table from the
    /// next one (unless its process is provably gone, `crate::storage::ownership`). An ingest
    /// gives its job's `--lease-ttl`. Default [`crate::storage::LeaseOptions::default`].
    pub fn single_writer_lease(mut self, lease: crate::storage::LeaseOptions) -> Self {
        self.lease = lease;
        self
    }

    /// Whether this job writes a log checkpoint every `delta.checkpointInterval` (10)
    /// versions it writes (`_delta_log/<v>.checkpoint.parquet` and `_last_checkpoint`), so
    /// readers and restarts read one checkpoint and a short tail instead of the whole log.
    /// Default on; checkpoints are optional for correctness.
    pub fn log_checkpoints(mut self, on: bool) -> Self {
        self.log_checkpoints = on;
        self
    }

    /// The schema of the job's records.
    pub fn schema(mut self, schema: SchemaRef) -> Self {
        self.schema = Some(schema);
        self
    }

    /// The Hive partition columns of the job's bucket assigner, outermost first.
    pub fn partition_by<I: IntoIterator<Item = S>, S: Into<String>>(mut self, columns: I) -> Self {
        self.partition_by = columns.into_iter().map(Into::into).collect();
        self
    }

    /// The directory names of the job's time partitioning (`dt`, `hour`), after the partition
    /// columns.
    pub fn time_directories<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        names: I,
    ) -> Self {
        self.time_directories = names.into_iter().map(Into::into).collect();
        self
    }

    /// Declares this job the table's only writer, so it may write on a store that ignores
    /// conditional writes (Garage): there two writers could overwrite each other's log
    /// entries, and a writer is refused unless it says it is alone. Default off.
    pub fn single_writer(mut self, alone: bool) -> Self {
        self.single_writer = alone;
        self
    }

    /// How messages name the table (`s3://bucket/events`, `./lake`); default the storage's
    /// name.
    pub fn location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
}

/// What a Delta table holds at its latest version, for operators (`filesink ls`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableInfo {
    /// The latest version.
    pub version: i64,
    /// Live files, and their bytes.
    pub live_files: usize,
    /// Bytes of the live files.
    pub live_bytes: i64,
    /// Removed files still remembered (until vacuum).
    pub tombstones: usize,
    /// The paths of the tombstones within the table, relative to its base and decoded (not
    /// in `ls --json`: `tombstones` counts them); whether each file is still there is for
    /// the caller to tell (vacuum deletes the files before the log forgets them).
    #[serde(skip)]
    pub tombstone_paths: Vec<String>,
    /// The protocol's reader and writer versions.
    pub protocol: (i32, i32),
    /// The partition columns.
    pub partition_columns: Vec<String>,
    /// The latest `txn` version of every application (a filesink job's is
    /// `filesink-<sink id>-<job>`, its last checkpoint in the log).
    pub txns: std::collections::BTreeMap<String, i64>,
}

/// Reads the Delta table at `storage`'s base: `None` if there is none.
///
/// Errors: [`crate::Error::Corrupt`] for a log that does not parse, and storage errors.
pub async fn table_info(storage: &dyn crate::storage::Storage) -> crate::Result<Option<TableInfo>> {
    let snapshot = log::Snapshot::load(storage).await?;
    let Some(version) = snapshot.version else {
        return Ok(None);
    };
    Ok(Some(TableInfo {
        version,
        live_files: snapshot.adds.len(),
        live_bytes: snapshot.adds.values().map(|a| a.size).sum(),
        tombstones: snapshot.removes.len(),
        tombstone_paths: snapshot
            .removes
            .keys()
            .filter_map(|p| match stats::decode_path(p) {
                Ok(stats::FilePath::Relative(r)) => Some(r),
                _ => None,
            })
            .collect(),
        protocol: snapshot
            .protocol
            .as_ref()
            .map_or((0, 0), |p| (p.min_reader_version, p.min_writer_version)),
        partition_columns: snapshot
            .metadata
            .as_ref()
            .map(|m| m.partition_columns.clone())
            .unwrap_or_default(),
        txns: snapshot
            .txns
            .values()
            .map(|t| (t.app_id.clone(), t.version))
            .collect(),
    }))
}
