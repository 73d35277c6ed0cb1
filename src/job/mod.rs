//! The job coordinator: a job's checkpoints, for jobs without a stream engine.
//!
//! It plays the role Flink's checkpoint coordinator plays for `FileSink`: it drives the vote
//! ([`crate::SinkWriter::prepare_commit`]) on every writer of a job, makes the checkpoint
//! complete by writing its [`Manifest`], and only then commits. The manifest holds the writer
//! states, every committable not yet known to be committed, and the job's own source position,
//! so a restarted job resumes its input exactly where the checkpoint cut it.
//!
//! # Where a crash lands
//!
//! | the crash comes                      | on restart ([`Coordinator::open`])                                 |
//! |--------------------------------------|--------------------------------------------------------------------|
//! | before the manifest of N is written  | restores from N−1; N's pending and in-progress files are removed   |
//! | after the manifest, before commit    | restores from N; N's committables are committed                    |
//! | in the middle of the commit          | restores from N; commits the rest, the rest report already committed |
//! | after the commit                     | restores from N; every committable reports already committed       |
//!
//! Writing the manifest is the completion point, so it is atomic, durable and never replaces
//! ([`crate::storage::MetadataStore::put_metadata`]).
//!
//! # Committing in the background
//!
//! [`Coordinator::checkpoint`] returns once checkpoint N is complete *and* committed.
//! [`Coordinator::checkpoint_then_commit`] returns once N is complete (its manifest written)
//! and commits it on a task of its own, so the renames and directory fsyncs (on S3 the
//! multipart completions) of N overlap with the writes of the records after it; the writers
//! meanwhile fill new in-progress files, never the files being committed. The commit of N is
//! settled ([`Coordinator::committed`]) before anything depends on it: before the manifest of
//! N+1 (which must carry N's committables whose commit was deferred), before [`Coordinator::finish`]
//! returns, before [`Coordinator::close`]. Nothing in the table above changes: once N's
//! manifest is written, a crash before, during or after the background commit lands in its
//! second, third or fourth row. A coordinator dropped with a commit running stops it (a crash
//! would); the next run's restore commits the rest, idempotently.
//!
//! # Queued writes
//!
//! [`Coordinator::write`] waits for every writer it gave a share. The ingest instead hands
//! its shares over without waiting (`Coordinator::write_queued`): each writer then runs on a
//! task of its own and takes its shares, in the order they came, from a bounded queue, so a
//! writer busy encoding holds back only its own queue while the caller decodes the next
//! records. Nothing of the protocol changes: a queued write is a write not yet covered by any
//! checkpoint, and every checkpoint first waits until the queues are empty and the writers
//! are back (`Coordinator::written`), so the files a vote makes pending hold every record
//! handed over before it and none after it. A queued write that fails is reported by a later
//! call that hands the same writer a share, or by the wait before the next checkpoint (the
//! error of the writer that failed first); the writers stay out from then on (the caller
//! cannot tell which of its queued records were written), and every later write or
//! checkpoint is refused until the job is reopened and restored. `Coordinator::stop_writes`
//! (a run that stops, or fails elsewhere) lets each writer end the share it is writing, takes
//! no other, and waits, so that no write of this run reaches the store afterwards; a crash or
//! a dropped coordinator ends them where they are (at their next await: a file operation
//! already started ends first). Either way, like any writes after the
//! last checkpoint, the next restore removes what they wrote.
//!
//! # One live run per job
//!
//! A coordinator owns its job from [`Coordinator::open`] until it is closed or dropped
//! ([`crate::storage::ownership`]): a second coordinator of the job is refused with
//! [`Error::JobBusy`] before it restores or changes anything, and a coordinator checks that it
//! still owns the job before every manifest write. Where a deployment guarantees one run per
//! job by other means (a stream engine, a leader election), [`Ownership::External`] skips the
//! lease; then two coordinators racing for one checkpoint are told apart only by the manifest
//! write, which refuses to replace where the store can refuse (local disk, stores with
//! conditional puts: the second gets [`Error::Conflict`]). A latest manifest that cannot be read stops [`Coordinator::open`]
//! with an error naming the file; it is never skipped in favour of an older one, which could
//! replay records whose files are already visible.

use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde::Serialize;
use tracing::Instrument;

use crate::protocol::{BucketId, PreparedCheckpoint};
use crate::protocol::{CommitOutcome, Committable, WriterState};
use crate::sink::writer::Reservation;
use crate::sink::{Sink, SinkWriter};
use crate::storage::{JobLease, LeaseOptions, Storage};
use crate::table::delta::{DeltaOptions, DeltaTable, TableOutcome, TableRemove};
use crate::{Error, Result};

pub mod manifest;
mod own_names;
mod queues;
pub mod retired;
mod table_entry;

pub use crate::protocol::paths::validate_job_name;
pub use manifest::{Manifest, ManifestTable, SinkIdentity, METADATA_DIR};
pub use own_names::{job_of_writer, OwnNames};
pub(crate) use queues::SHARES_QUEUED;
use queues::{AbortOnDrop, Queues};
pub use table_entry::commit_table_entry;
use table_entry::{abandon_round, check_one_kind, check_table_job};

/// What one [`Coordinator::checkpoint`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The checkpoint id.
    pub checkpoint_id: u64,
    /// Files made visible.
    pub committed_files: usize,
    /// Files that were already visible.
    pub already_committed_files: usize,
    /// Bytes in the files made visible.
    pub committed_bytes: u64,
    /// Records in the files made visible.
    pub committed_records: u64,
    /// Committables whose commit failed with a retryable error; they stay in the next manifest.
    pub deferred: usize,
    /// For a job writing into a Delta table ([`CoordinatorBuilder::delta_table`]): what the
    /// log step did with this checkpoint; `None` for a plain directory, or while the commit
    /// runs in the background.
    pub table_outcome: Option<TableOutcome>,
}

/// How a [`Coordinator`] makes sure it is the only live run of its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ownership {
    /// Hold the job through the store ([`crate::storage::ownership`]): a kernel lock on local
    /// disk, an expiring claim on object stores. The default.
    Lease(LeaseOptions),
    /// The caller guarantees one live coordinator per job (a stream engine, a leader
    /// election). Two coordinators of one job are then told apart only by the manifest write:
    /// on a store without conditional puts both can complete the same checkpoint.
    External,
}

impl Default for Ownership {
    fn default() -> Self {
        Ownership::Lease(LeaseOptions::default())
    }
}

/// Options of [`Coordinator::builder`]; [`CoordinatorBuilder::open`] opens the job.
#[derive(Debug, Clone)]
pub struct CoordinatorBuilder {
    sink: Sink,
    job: String,
    parallelism: usize,
    /// Whether a job that exists keeps its own parallelism ([`CoordinatorBuilder::parallelism_of_new_job`]).
    adopt_parallelism: bool,
    ownership: Ownership,
    retention: usize,
    table: Option<DeltaOptions>,
}

impl CoordinatorBuilder {
    /// Commits every checkpoint into the Delta table at the sink's base as well: after its
    /// files are committed, each checkpoint appends one log entry (`_delta_log/<v>.json`) with
    /// an `add` per file and a `txn` naming the job and the checkpoint, so table readers see
    /// each checkpoint as one table version, exactly once (`docs/design/delta.md`). The sink
    /// must write Parquet; the coordinator computes each file's statistics for the log.
    pub fn delta_table(mut self, options: DeltaOptions) -> Self {
        self.table = Some(options);
        self
    }

    /// Number of writers for a job that has no checkpoint yet; a job that has one keeps the
    /// parallelism it was checkpointed with (so a job started on a machine with more cores
    /// resumes anywhere). Replaces [`CoordinatorBuilder::parallelism`].
    pub fn parallelism_of_new_job(mut self, writers: usize) -> Self {
        self.parallelism = writers;
        self.adopt_parallelism = true;
        self
    }

    /// Number of writers (default 1); writer `i` gets the id `<job>_<i>`. A job keeps the
    /// parallelism it was first checkpointed with.
    pub fn parallelism(mut self, writers: usize) -> Self {
        self.parallelism = writers;
        self.adopt_parallelism = false;
        self
    }

    /// How the coordinator owns its job (default: [`Ownership::Lease`] with
    /// [`LeaseOptions::default`]).
    pub fn ownership(mut self, ownership: Ownership) -> Self {
        self.ownership = ownership;
        self
    }

    /// Keeps the latest `manifests` manifests of the job (at least 1: [`CoordinatorBuilder::open`]
    /// refuses 0). Default [`Coordinator::DEFAULT_RETENTION`].
    pub fn retention(mut self, manifests: usize) -> Self {
        self.retention = manifests;
        self
    }

    /// Takes the job (refused with [`Error::JobBusy`] if another live run holds it), then
    /// restores from its latest manifest (committing its committables, removing leftovers of
    /// its writers, resuming row files), or starts fresh.
    #[tracing::instrument(
        name = "open",
        skip_all,
        fields(job = %self.job, writers = self.parallelism, checkpoint = tracing::field::Empty)
    )]
    pub async fn open(self) -> Result<Coordinator> {
        let started = Instant::now();
        validate_job_name(&self.job)?;
        if self.parallelism == 0 || self.parallelism > 1024 {
            return Err(Error::Config(format!(
                "parallelism {} must be between 1 and 1024",
                self.parallelism
            )));
        }
        if self.retention == 0 {
            return Err(Error::Config(
                "a job keeps at least its latest manifest: retention must be at least 1".into(),
            ));
        }
        // A table the job cannot write into is refused before anything is created.
        if let Some(options) = &self.table {
            DeltaTable::check_before_writing(self.sink.storage().as_ref(), options).await?;
        }
        // The sink's identity first: where a sink may not be created (inside another's tree,
        // or around one) nothing of the job may be written either.
        let kind = match &self.table {
            None => manifest::SinkKind::Plain,
            Some(_) => manifest::SinkKind::Delta,
        };
        let identity = manifest::sink_identity_of(self.sink.storage().as_ref(), Some(Some(kind)))
            .await?
            .expect("created");
        // So is a job that would mix plain files and a table's in one directory.
        check_one_kind(
            self.sink.storage().as_ref(),
            &identity,
            &self.job,
            self.table.as_ref(),
        )
        .await?;
        let lease: Box<dyn JobLease> = match self.ownership {
            Ownership::Lease(options) => self
                .sink
                .storage()
                .acquire_job(&self.job, &options)
                .instrument(tracing::debug_span!("acquire", job = %self.job))
                .await
                .inspect_err(|e| tracing::info!(error = %e, "job not acquired"))?,
            Ownership::External => Box::new(crate::storage::ownership::External),
        };
        let sink = match &self.table {
            Some(_) => self.sink.for_table()?,
            None => self.sink.clone(),
        };
        let mut c = Coordinator::restore(
            &sink,
            &self.job,
            self.parallelism,
            self.adopt_parallelism,
            lease,
            self.table.as_ref(),
        )
        .await?;
        c.retention = self.retention;
        tracing::Span::current().record("checkpoint", c.last_checkpoint);
        tracing::info!(
            restored_files = c.restored_outcomes.len(),
            duration_ms = started.elapsed().as_millis() as u64,
            "job opened"
        );
        Ok(c)
    }
}

/// Drives checkpoints for the writers of one job and keeps their manifests.
#[derive(Debug)]
pub struct Coordinator {
    lease: Option<Box<dyn JobLease>>,
    storage: Arc<dyn Storage>,
    sink_id: String,
    job: String,
    sink: Sink,
    writers: Vec<JobWriter>,
    last_checkpoint: u64,
    uncommitted: Vec<Committable>,
    source_position: Option<serde_json::Value>,
    finished: bool,
    retention: usize,
    restored_outcomes: Vec<CommitOutcome>,
    /// The writer the next unpartitioned batch goes to ([`Coordinator::write`]).
    rotation: usize,
    /// The writers, while they write from queues ([`Coordinator::write_queued`]); `writers`
    /// is empty meanwhile.
    queues: Option<Queues>,
    /// The commit of the last complete checkpoint, running on a task of its own
    /// ([`Coordinator::checkpoint_then_commit`]).
    committing: Option<tokio::task::JoinHandle<CommitRun>>,
    /// The job's table, if it writes into one; lent to a background commit while it runs.
    table: Option<DeltaTable>,
    /// Whether the job writes into a table (so a missing `table` is a commit task that died).
    writes_table: bool,
    /// What the next checkpoint removes from the table, and the version that was planned on
    /// ([`Coordinator::rearrange`]).
    rearranging: Option<(i64, Vec<TableRemove>)>,
    /// Committed output files of an abandoned compaction round, to be recorded by the next
    /// manifest (`ManifestTable::abandoned`) and deleted after it.
    abandoned: Vec<String>,
    /// The incarnations of this run's writers: every part file and upload it opens is named
    /// by one ([`Coordinator::failed`]).
    incarnations: Vec<String>,
}

/// What committing one complete checkpoint did.
#[derive(Debug)]
struct CommitRun {
    report: CheckpointReport,
    /// Committables whose commit failed with a retryable error.
    deferred: Vec<Committable>,
    /// The first error that cannot be retried.
    fatal: Option<Error>,
    started: Instant,
    /// The job's table, lent to the commit.
    table: Option<DeltaTable>,
    /// Why the log entry was deferred, if it was for an error.
    table_error: Option<Error>,
    /// Output files of an abandoned round still to be recorded by a manifest and deleted.
    abandoned: Vec<String>,
}

impl Drop for Coordinator {
    /// A commit still running stops, as it would in a crash: the next run's restore commits
    /// the rest.
    fn drop(&mut self) {
        if let Some(task) = self.committing.take() {
            task.abort();
        }
        if let Some(queues) = self.queues.take() {
            for task in queues.tasks.into_iter().flatten() {
                task.abort();
            }
        }
    }
}

/// Which files a checkpoint closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Those the rolling policy says (every Parquet file).
    Due,
    /// Every open file; the job goes on.
    All,
    /// Every open file, and the job is finished.
    Finished,
}

/// What [`Coordinator::fan_out`] asks of one writer.
enum Op {
    Write(Vec<(BucketId, RecordBatch)>),
    Prepare {
        checkpoint_id: u64,
        end_of_input: bool,
    },
}

/// What a writer answered to an [`Op`].
enum Done {
    Written,
    /// A vote, with what its committables keep reserved of the writer's budget until their
    /// commit settles.
    Prepared(PreparedCheckpoint, Reservation),
}

/// Runs `op` on `writer` and hands the writer back with the outcome.
async fn run_op(mut writer: JobWriter, op: Op) -> (JobWriter, Result<Done>) {
    let result = match op {
        Op::Write(buckets) => writer
            .inner
            .write_assigned(buckets)
            .await
            .map(|()| Done::Written),
        Op::Prepare {
            checkpoint_id,
            end_of_input,
        } => {
            async {
                if end_of_input {
                    writer.inner.end_of_input().await?;
                }
                let prepared = writer.inner.prepare_commit(checkpoint_id).await?;
                Ok(Done::Prepared(prepared, writer.inner.take_reservation()))
            }
            .await
        }
    };
    (writer, result)
}

/// The writer of a job with `writers` writers that takes `bucket` for the whole job: a hash
/// of the bucket's path that does not change between runs or builds (CRC-32C).
fn writer_of(bucket: &BucketId, writers: usize) -> usize {
    crc32c::crc32c(bucket.as_str().as_bytes()) as usize % writers
}

impl Coordinator {
    /// Default number of manifests kept per job.
    pub const DEFAULT_RETENTION: usize = 3;

    /// Opens `job` on `sink` with `parallelism` writers and the default [`Ownership`]: takes
    /// the job ([`Error::JobBusy`] if another live run holds it), then restores from the
    /// job's latest manifest (committing its committables, removing leftovers of its writers,
    /// resuming row files), or starts fresh. Writer `i` gets the writer id `<job>_<i>`; `job`
    /// is 1 to 48 ASCII letters, digits or `_`. [`Coordinator::builder`] has the other options.
    pub async fn open(sink: &Sink, job: &str, parallelism: usize) -> Result<Coordinator> {
        Coordinator::builder(sink, job)
            .parallelism(parallelism)
            .open()
            .await
    }

    /// A builder for a coordinator of `job` on `sink`.
    pub fn builder(sink: &Sink, job: &str) -> CoordinatorBuilder {
        CoordinatorBuilder {
            sink: sink.clone(),
            job: job.to_string(),
            parallelism: 1,
            adopt_parallelism: false,
            ownership: Ownership::default(),
            retention: Self::DEFAULT_RETENTION,
            table: None,
        }
    }

    async fn restore(
        sink: &Sink,
        job: &str,
        parallelism: usize,
        adopt_parallelism: bool,
        lease: Box<dyn JobLease>,
        table_options: Option<&DeltaOptions>,
    ) -> Result<Coordinator> {
        let storage = sink.storage().clone();
        let identity = manifest::sink_identity(storage.as_ref(), true)
            .await?
            .expect("created");
        let latest =
            manifest::latest_manifest(storage.as_ref(), job, Some(&identity.sink_id)).await?;
        let mut table = match table_options {
            Some(options) => {
                Some(DeltaTable::open(storage.clone(), options, &identity.sink_id, job).await?)
            }
            None => None,
        };
        // A job without manifests may be a retired one: it goes on after its last checkpoint.
        let retired = match &latest {
            Some(_) => None,
            None => retired::Retired::load(storage.as_ref()).await?.get(job),
        };
        check_table_job(job, latest.as_ref(), retired, table.as_ref())?;
        // A manifest write of an earlier run that died before its rename left its temporary
        // file; this run owns the job and has written nothing yet.
        manifest::remove_temps(storage.as_ref(), job).await?;
        // A compaction round whose entry is not in the log, and one of whose inputs another
        // writer removed meanwhile, is abandoned: its output must never become visible to the
        // table, so its files are not committed (and removed if they already were).
        // The decision is recorded by the job's next manifest, before the output is deleted
        // (`abandoned`): once recorded it is never taken again, even if another engine makes
        // the inputs live again (a RESTORE), and a manifest that records one has its files
        // deleted again here.
        let mut abandoned = false;
        let mut abandoned_outputs = Vec::new();
        if let (Some(t), Some(m)) = (table.as_mut(), &latest) {
            let section = m.table.as_ref();
            for path in section.map_or(&[][..], |s| &s.abandoned[..]) {
                storage.remove_data_file(path).await?;
            }
            let removes = section.map_or(&[][..], |s| &s.removes[..]);
            if !removes.is_empty() {
                let (in_log, inputs_live) = t.round_state(m.checkpoint_id, removes).await?;
                if !in_log && !inputs_live {
                    abandoned_outputs = abandon_round(job, m.checkpoint_id, &m.committables);
                    abandoned = true;
                }
            }
        }
        let parallelism = match &latest {
            Some(m) if adopt_parallelism && !m.writers.is_empty() => m.writers.len(),
            _ => parallelism,
        };
        if let Some(m) = &latest {
            if m.writers.len() != parallelism {
                return Err(Error::Config(format!(
                    "job `{job}` was checkpointed with {} writers, not {parallelism}; rescaling is not supported",
                    m.writers.len()
                )));
            }
        }
        // A table job's checkpoint that the log holds already had every file committed before
        // its entry was written (invariant 3): its files are not committed again (nor proved:
        // compaction may have removed them from the table since, and vacuum deleted them).
        let in_log = match (&table, &latest) {
            (Some(t), Some(m)) => t.txn_version().is_some_and(|v| v >= m.checkpoint_id),
            _ => false,
        };
        let mut writers = Vec::with_capacity(parallelism);
        let mut restored_outcomes = Vec::new();
        let shared = sink.sharing_open_files(parallelism);
        for i in 0..parallelism {
            let writer_sink = shared.with_writer_id(format!("{job}_{i}"))?;
            let writer_id = writer_sink.writer_id().to_string();
            let (state, committables): (Option<&WriterState>, Vec<Committable>) = match &latest {
                Some(m) => (
                    m.writers.iter().find(|w| w.writer_id == writer_id),
                    m.committables
                        .iter()
                        .filter(|c| c.writer_id == writer_id && !in_log)
                        .cloned()
                        .collect(),
                ),
                None => (None, Vec::new()),
            };
            if latest.is_some() && state.is_none() {
                return Err(Error::corrupt(
                    format!("latest manifest of job `{job}`"),
                    format!("it has no state for writer `{writer_id}`"),
                ));
            }
            // An abandoned round's files are committed too: they stay, outside the log, until
            // the manifest that records the abandonment (so that, until then, a round whose
            // inputs came back can still be committed whole).
            let restored = writer_sink.restore_writer(state, &committables).await?;
            restored_outcomes.extend(restored.commit_outcomes);
            writers.push(JobWriter {
                inner: restored.writer,
            });
        }
        // The latest checkpoint's files are committed; its log entry may not be written yet.
        if let (Some(t), Some(m), false) = (table.as_mut(), &latest, abandoned) {
            let removes = m.table.as_ref().map_or(&[][..], |s| &s.removes[..]);
            let outcome = t
                .commit(m.checkpoint_id, m.created_at_ms, &m.committables, removes)
                .await;
            // After `open` the latest checkpoint is in the log, as its files are visible: a log
            // step that cannot be done now fails the open (nothing is lost; a rerun redoes it).
            let outcome = outcome?;
            if outcome == TableOutcome::Abandoned {
                abandoned_outputs = abandon_round(job, m.checkpoint_id, &m.committables);
            }
            if outcome == TableOutcome::Deferred {
                return Err(Error::InvalidInput(format!(
                    "the Delta log entry of checkpoint {} of job `{job}` lost the race for a \
                     table version {} times; run the job again",
                    m.checkpoint_id,
                    crate::table::delta::COMMIT_ATTEMPTS_MAX
                )));
            }
        }
        let incarnations = writers.iter().map(|w| w.incarnation().to_owned()).collect();
        Ok(Coordinator {
            lease: Some(lease),
            storage,
            sink_id: identity.sink_id,
            job: job.to_string(),
            sink: sink.clone(),
            writers,
            incarnations,
            last_checkpoint: latest
                .as_ref()
                .map(|m| m.checkpoint_id)
                .or(retired.map(|r| r.checkpoint))
                .unwrap_or(0),
            uncommitted: Vec::new(),
            source_position: latest.as_ref().map(|m| m.source_position.clone()),
            finished: latest.as_ref().is_some_and(|m| m.finished),
            retention: Self::DEFAULT_RETENTION,
            restored_outcomes,
            rotation: 0,
            queues: None,
            committing: None,
            writes_table: table.is_some(),
            table,
            rearranging: None,
            abandoned: abandoned_outputs,
        })
    }

    /// Keeps the latest `manifests` manifests of the job (at least 1). Default 3.
    pub fn with_retention(mut self, manifests: usize) -> Self {
        self.retention = manifests.max(1);
        self
    }

    /// The job's table, if it writes into one (and no commit runs in the background).
    pub(crate) fn table(&self) -> Option<&DeltaTable> {
        self.table.as_ref()
    }

    /// The version of the job's Delta table as the job last saw it: `None` if the job writes
    /// no table, or the table has no version yet (its first entry is the job's first
    /// checkpoint with files), or a commit runs in the background.
    pub fn table_version(&self) -> Option<i64> {
        self.table.as_ref().and_then(|t| t.version())
    }

    /// Whether an abandoned compaction round waits for the next checkpoint to record it (and
    /// delete its output).
    pub(crate) fn has_abandoned(&self) -> bool {
        !self.abandoned.is_empty()
    }

    /// Makes the next checkpoint a rearrangement of the table (a compaction round): its log
    /// entry also removes `removes` (with `dataChange: false`, as its adds), planned on table
    /// version `read_version`, and is not written if another writer removed one of them first
    /// ([`TableOutcome::Abandoned`]: the checkpoint's files are then deleted instead).
    pub(crate) fn rearrange(&mut self, read_version: i64, removes: Vec<TableRemove>) {
        self.rearranging = Some((read_version, removes));
    }

    /// Gives the job up, so that another run can take it at once. Dropping the coordinator
    /// does the same (on object stores in the background); a crashed process gives it up when
    /// the kernel closes its lock (local disk) or when its claim expires (object stores).
    pub async fn close(mut self) -> Result<()> {
        // Writes still queued are not checkpointed: stopped before the job is given up, so
        // that none reaches the store once another run may hold the job.
        self.stop_writes().await;
        self.committed().await?;
        if let Some(table) = self.table.as_mut() {
            // A log checkpoint still being written: optional, but a run that ends leaves it
            // whole rather than half.
            table.settle().await;
        }
        match self.lease.take() {
            Some(lease) => lease.release().await,
            None => Ok(()),
        }
    }

    /// The source position of the restored checkpoint, as the type it was checkpointed with
    /// ([`Coordinator::checkpoint`]); `None` for a fresh job. A position that does not decode
    /// as `P` is [`Error::Corrupt`]: the job was written by another program, or by another
    /// version of this one with another position type.
    ///
    /// ```
    /// # async fn f(job: &filesink::job::Coordinator) -> filesink::Result<()> {
    /// let next_line: u64 = job.source_position()?.unwrap_or(0);
    /// # Ok(()) }
    /// ```
    pub fn source_position<P: serde::de::DeserializeOwned>(&self) -> Result<Option<P>> {
        self.source_position
            .as_ref()
            .map(|v| {
                P::deserialize(v).map_err(|e| {
                    Error::corrupt(
                        format!("source position of job `{}`", self.job),
                        format!("it is not a `{}` ({e})", std::any::type_name::<P>()),
                    )
                })
            })
            .transpose()
    }

    /// Whether the restored checkpoint was the job's last one (see [`Coordinator::finish`]).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Lets a job restored from its finished checkpoint take more checkpoints, for a source
    /// that has more input after all (a file that grew since). The next checkpoint is
    /// [`Coordinator::last_checkpoint`]` + 1`, an ordinary one; [`Coordinator::finish`] marks
    /// the job finished again. Without it, a finished job refuses to checkpoint.
    pub fn reopen(&mut self) {
        self.finished = false;
    }

    /// The last completed checkpoint id (0 for none).
    pub fn last_checkpoint(&self) -> u64 {
        self.last_checkpoint
    }

    /// What committing the restored manifest's committables did at [`Coordinator::open`].
    pub fn restored_outcomes(&self) -> &[CommitOutcome] {
        &self.restored_outcomes
    }

    /// Writes `batch` across the job's writers, which encode at the same time, each on its own
    /// task (so a job with several writers uses several cores), and returns when all of them
    /// have written their share.
    ///
    /// The sink's bucket assigner splits the batch once; each bucket goes to one writer, the
    /// same for the whole job (a stable hash of its path), so a bucket still has one open file
    /// per checkpoint. A batch that falls into the base directory alone (an unpartitioned
    /// sink) goes to the writers in turn: one open file per writer.
    ///
    /// A batch whose values cannot be bucketed or that has a partition path longer than the
    /// store takes ([`crate::Sink::partition_path_bytes_max`]) is refused with
    /// [`Error::InvalidInput`] before any writer writes.
    ///
    /// If this call's future is dropped before it completes (a crash in a test), reopen the
    /// job: with several writers they are gone with it (their tasks stop at their next
    /// await), and with one the batch may be written in part.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.written().await?;
        let n = self.writers.len();
        if n == 0 {
            return Err(self.writers_gone());
        }
        if n == 1 {
            return self.writer().write(batch).await;
        }
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let buckets = self.sink.config.assign(batch)?;
        self.write_shares(buckets).await
    }

    /// Splits `buckets` into the writers' shares (see [`Coordinator::write`]).
    fn shares(
        &mut self,
        buckets: Vec<(BucketId, RecordBatch)>,
    ) -> Vec<Vec<(BucketId, RecordBatch)>> {
        let n = self.writer_count();
        let mut shares: Vec<Vec<(BucketId, RecordBatch)>> = (0..n).map(|_| Vec::new()).collect();
        if buckets.iter().all(|(b, _)| b.is_root()) {
            let w = self.rotation % n;
            self.rotation = self.rotation.wrapping_add(1);
            shares[w] = buckets;
        } else {
            for (bucket, b) in buckets {
                shares[writer_of(&bucket, n)].push((bucket, b));
            }
        }
        shares
    }

    /// Hands each writer its buckets (see [`Coordinator::write`]) and waits for all of them.
    async fn write_shares(&mut self, buckets: Vec<(BucketId, RecordBatch)>) -> Result<()> {
        if buckets.is_empty() {
            return Ok(());
        }
        // Refused here, before any writer takes its share: one writer's refusal after
        // another wrote would leave part of a batch reported as refused in the job.
        let max = self.sink.partition_path_bytes_max();
        for (bucket, _) in &buckets {
            crate::protocol::bucket_id::check_partition_path(bucket, max)
                .map_err(Error::InvalidInput)?;
        }
        let ops = self
            .shares(buckets)
            .into_iter()
            .map(|s| (!s.is_empty()).then_some(Op::Write(s)))
            .collect();
        self.fan_out(ops).await.map(drop)
    }

    /// Ends a run whose work failed with `e`: its writes stop, and the hidden files and
    /// multipart uploads this run opened that no manifest of the job needs are removed now
    /// (the next run's restore would remove them; a run that lost its job to another may never
    /// have one). Returns the error to report: if this run's lease says the job was lost to
    /// another run (this process was paused or cut off from the store past its lease), an
    /// [`Error::JobBusy`] that says so, whatever step then failed; else `e`.
    ///
    /// Safe whoever owns the job now: the files removed carry this run's incarnations, which
    /// no other run writes, and none that any manifest of the job (read now) references.
    pub async fn failed(&mut self, e: Error) -> Error {
        self.stop_writes().await;
        let lost = match &self.lease {
            Some(lease) => match lease.check().await {
                Err(Error::JobBusy { reason, .. }) => Some(reason),
                _ => None,
            },
            None => None,
        };
        let removed = remove_own_leftovers(
            self.storage.clone(),
            self.job.clone(),
            self.sink_id.clone(),
            self.incarnations.clone(),
        )
        .await;
        let Some(reason) = lost else {
            return e;
        };
        Error::job_busy(
            &self.job,
            format!(
                "this run lost the job to another run while it was paused or cut off from the \
                 store ({reason}); nothing it wrote after its checkpoint {} is visible, {}; \
                 the lake is as the other run leaves it",
                self.last_checkpoint,
                match removed {
                    Ok(0) => "and it had nothing open".to_owned(),
                    Ok(n) => format!("and the {n} file(s) and upload(s) it had open were removed"),
                    Err(e) => format!(
                        "and removing what it had open failed ({e}): `filesink abort` removes it"
                    ),
                }
            ),
        )
    }
}

/// Removes the leftovers of `incarnations` (one run's writers) that no manifest of `job`
/// references ([`Coordinator::failed`]).
async fn remove_own_leftovers(
    storage: Arc<dyn Storage>,
    job: String,
    sink_id: String,
    incarnations: Vec<String>,
) -> Result<usize> {
    {
        let mut referenced = std::collections::BTreeSet::new();
        for (id, _) in manifest::list_checkpoints(storage.as_ref(), &job).await? {
            let m = manifest::read_manifest(storage.as_ref(), &job, id, Some(&sink_id)).await?;
            for w in &m.writers {
                for f in &w.in_progress {
                    referenced.insert(f.in_progress_path.clone());
                    referenced.extend(f.supersedes.iter().cloned());
                }
                for f in &w.carried {
                    referenced.insert(f.in_progress_path.clone());
                }
            }
            for c in &m.committables {
                referenced.insert(c.pending.leftover_id(&c.final_path));
                referenced.extend(c.supersedes.iter().cloned());
            }
        }
        let mut removed = 0;
        for l in storage.list_leftovers().await? {
            let ours = l
                .name
                .as_ref()
                .is_some_and(|n| incarnations.contains(&n.incarnation));
            if ours && !referenced.contains(&l.path) {
                storage.remove_leftover(&l.path).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

impl Coordinator {
    /// Runs `ops[i]` on writer `i`, every writer with work on its own task, and waits for all
    /// of them: when it returns, no writer is busy, whatever the outcome. The first error is
    /// returned (every writer is back in place).
    async fn fan_out(&mut self, ops: Vec<Option<Op>>) -> Result<Vec<Option<Done>>> {
        self.written().await?;
        // `open` refuses a job without writers: none here means they are gone.
        if self.writers.is_empty() || self.writers.len() != ops.len() {
            return Err(self.writers_gone());
        }
        let writers = std::mem::take(&mut self.writers);
        let busy = ops.iter().filter(|o| o.is_some()).count();
        let mut slots: Vec<Option<JobWriter>> = Vec::with_capacity(writers.len());
        let mut results: Vec<Option<Done>> = Vec::with_capacity(writers.len());
        let mut tasks = Vec::with_capacity(busy);
        let mut first_error = None;
        for (i, (writer, op)) in writers.into_iter().zip(ops).enumerate() {
            results.push(None);
            match op {
                None => slots.push(Some(writer)),
                // One writer with work: no task to spawn.
                Some(op) if busy == 1 => {
                    let (writer, r) = run_op(writer, op).await;
                    slots.push(Some(writer));
                    match r {
                        Ok(done) => results[i] = Some(done),
                        Err(e) => first_error = Some(e),
                    }
                }
                Some(op) => {
                    slots.push(None);
                    tasks.push((i, AbortOnDrop(tokio::spawn(run_op(writer, op)))));
                }
            }
        }
        for (i, mut task) in tasks {
            match (&mut task.0).await {
                Ok((writer, r)) => {
                    slots[i] = Some(writer);
                    match r {
                        Ok(done) => results[i] = Some(done),
                        Err(e) => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => {
                    first_error.get_or_insert(Error::InvalidInput(format!(
                        "a writer task of job `{}` was cancelled: {e}",
                        self.job
                    )));
                }
            }
        }
        if slots.iter().all(Option::is_some) {
            self.writers = slots.into_iter().flatten().collect();
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }

    /// What a write or checkpoint finds when an earlier one was interrupted (its future
    /// dropped) or stopped ([`Coordinator::stop_writes`]) and took the writers with it.
    fn writers_gone(&self) -> Error {
        Error::InvalidInput(format!(
            "a write or checkpoint of job `{}` was interrupted and took its writers with it; \
             reopen the job",
            self.job
        ))
    }

    /// The job's writers; writer `i` has id `<job>_<i>`.
    pub fn writers(&mut self) -> &mut [JobWriter] {
        &mut self.writers
    }

    /// The first writer (for jobs with one).
    pub fn writer(&mut self) -> &mut JobWriter {
        &mut self.writers[0]
    }

    /// The job name.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Takes a checkpoint: votes on every writer, writes the manifest with `source_position`
    /// (the checkpoint is complete once it is written), commits, and prunes old manifests.
    ///
    /// An error before the manifest is written fails the checkpoint: reopen the coordinator to
    /// restore from the previous one. A commit error that cannot be retried ([`Error::Conflict`],
    /// [`Error::DataLost`]) is returned after the manifest is written; retryable commit errors
    /// are deferred to the next checkpoint.
    ///
    /// `source_position` is any serde value (an offset, a struct of offsets per input); a
    /// restored coordinator gives it back through [`Coordinator::source_position`].
    pub async fn checkpoint<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::Due, false).await
    }

    /// As [`Coordinator::checkpoint`], but every open file rolls (as at the end of the input,
    /// carried files of a pre-commit merge merged), and the commit is waited for: once it
    /// returns without [`CheckpointReport::deferred`] files or a deferred log entry, every
    /// record before `source_position` is visible, and the job goes on writing. What a job
    /// hands a part of its source on at ([`crate::ingest::Source`]'s revoked parts).
    pub async fn checkpoint_rolling_all<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::All, false).await
    }

    /// As [`Coordinator::checkpoint`], but returns once the checkpoint is complete (its
    /// manifest written) and commits it on a task of its own (see "Committing in the
    /// background" above). The report says only the checkpoint id; [`Coordinator::committed`]
    /// gives the commit's report, and every later checkpoint, [`Coordinator::finish`] and
    /// [`Coordinator::close`] wait for it first. A commit error that cannot be retried is
    /// returned by whichever of them settles the commit.
    pub async fn checkpoint_then_commit<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::Due, true).await
    }

    /// Waits for the commit running in the background, if any, and returns its report
    /// ([`Coordinator::checkpoint_then_commit`]).
    pub async fn committed(&mut self) -> Result<Option<CheckpointReport>> {
        let Some(task) = self.committing.take() else {
            return Ok(None);
        };
        let run = task.await.map_err(|e| {
            Error::io(
                "commit checkpoint of",
                &self.job,
                std::io::Error::other(e.to_string()),
            )
        })?;
        self.settle(run).map(Some)
    }

    /// The job's last checkpoint: rolls every open file, checkpoints, and marks the manifest
    /// finished, so that a rerun of the job knows there is nothing left to do.
    pub async fn finish<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::Finished, false)
            .await
    }

    #[tracing::instrument(
        name = "checkpoint",
        skip_all,
        fields(
            job = %self.job,
            checkpoint = self.last_checkpoint + 1,
            finished = matches!(close, Close::Finished),
            files = tracing::field::Empty,
            bytes = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        )
    )]
    async fn checkpoint_inner(
        &mut self,
        source_position: serde_json::Value,
        close: Close,
        background: bool,
    ) -> Result<CheckpointReport> {
        let finished = matches!(close, Close::Finished);
        if self.finished {
            return Err(Error::InvalidInput(format!(
                "job `{}` is finished; start a new job to write more",
                self.job
            )));
        }
        // A run that lost its job learns it here, before its vote touches files the new owner
        // may have removed (and again before the manifest, below).
        if let Some(lease) = &self.lease {
            lease.check().await?;
        }
        let started = Instant::now();
        let id = self.last_checkpoint + 1;
        // The queued writes end first: the vote covers every record handed over.
        self.written().await?;
        // Every writer votes at the same time (its flushes and fsyncs on its own task).
        let votes = (0..self.writers.len())
            .map(|_| {
                Some(Op::Prepare {
                    checkpoint_id: id,
                    end_of_input: !matches!(close, Close::Due),
                })
            })
            .collect();
        let votes = self.fan_out(votes).await?;
        // The previous checkpoint's commit, if it runs in the background, ends before this
        // manifest: the manifest carries what it deferred.
        self.committed().await?;
        let mut committables = std::mem::take(&mut self.uncommitted);
        committables.reserve_exact(
            votes
                .iter()
                .map(|v| match v {
                    Some(Done::Prepared(p, _)) => p.committables.len(),
                    _ => 0,
                })
                .sum(),
        );
        let mut states = Vec::with_capacity(votes.len());
        let mut reservations = Vec::with_capacity(votes.len());
        for vote in votes {
            if let Some(Done::Prepared(prepared, reserved)) = vote {
                committables.extend(prepared.committables);
                states.push(prepared.state);
                reservations.push(reserved);
            }
        }
        let mut manifest = Manifest {
            version: crate::protocol::FORMAT_VERSION,
            sink_id: self.sink_id.clone(),
            job: self.job.clone(),
            checkpoint_id: id,
            created_at_ms: manifest::now_ms(),
            finished,
            source_position: source_position.clone(),
            writers: states,
            committables,
            table: None,
        };
        if self.writes_table {
            let Some(table) = &self.table else {
                return Err(Error::InvalidInput(format!(
                    "the commit of job `{}` into its table was interrupted; reopen the job",
                    self.job
                )));
            };
            let (read_version, removes) = match &self.rearranging {
                Some((v, r)) => (Some(*v), r.clone()),
                None => (None, Vec::new()),
            };
            manifest.table = Some(ManifestTable {
                format: "delta".into(),
                app_id: table.app_id().to_owned(),
                read_version,
                removes,
                abandoned: self.abandoned.clone(),
            });
        }
        manifest.version = manifest.format_version();
        // Only the job's owner may complete a checkpoint: a run that lost the job stops here,
        // before its manifest could promise files the new owner's restore removes.
        if let Some(lease) = &self.lease {
            lease.check().await?;
        }
        // The completion point.
        let manifest_path = manifest::manifest_path(&self.job, id);
        let manifest_bytes = manifest.encode();
        // The committables move on to the commit rather than being copied: at a hundred
        // thousand files a copy is tens of megabytes (as are the manifest's bytes, dropped
        // once written).
        let committables = std::mem::take(&mut manifest.committables);
        let manifest_started = Instant::now();
        self.storage
            .put_metadata(&manifest_path, &manifest_bytes)
            .instrument(tracing::debug_span!(
                "manifest_write",
                job = %self.job,
                checkpoint = id,
                file = %manifest_path,
                bytes = manifest_bytes.len(),
            ))
            .await?;
        drop(manifest_bytes);
        tracing::info!(
            file = %manifest_path,
            files = committables.len(),
            duration_ms = manifest_started.elapsed().as_millis() as u64,
            "checkpoint complete"
        );
        metrics::gauge!(crate::protocol::metric::PENDING_FILES).set(committables.len() as f64);
        self.last_checkpoint = id;
        self.source_position = Some(source_position);
        self.finished = finished;

        let run = Self::commit_checkpoint(
            self.sink.committer(),
            self.storage.clone(),
            self.job.clone(),
            self.retention,
            (id, manifest.created_at_ms),
            committables,
            started,
            self.table.take(),
            self.rearranging.take().map(|(_, r)| r).unwrap_or_default(),
            std::mem::take(&mut self.abandoned),
            reservations,
        );
        if background {
            let span = tracing::info_span!("background_commit", job = %self.job, checkpoint = id);
            self.committing = Some(tokio::spawn(run.instrument(span)));
            return Ok(CheckpointReport {
                checkpoint_id: id,
                ..CheckpointReport::default()
            });
        }
        let mut run = run.await;
        let table_error = run.table_error.take();
        let report = self.settle(run)?;
        // The last checkpoint of a job promises its records to the table's readers: a log
        // entry that had to wait fails it (the manifest holds the files; a rerun writes it).
        if finished && report.table_outcome == Some(TableOutcome::Deferred) {
            return Err(table_error.unwrap_or_else(|| {
                Error::InvalidInput(format!(
                    "the last checkpoint ({id}) of job `{}` is complete but its Delta log entry \
                     could not be written yet; run the job again to write it",
                    self.job
                ))
            }));
        }
        let span = tracing::Span::current();
        span.record("files", report.committed_files);
        span.record("bytes", report.committed_bytes);
        span.record("duration_ms", started.elapsed().as_millis() as u64);
        Ok(report)
    }

    /// Commits the committables of complete checkpoint `id` and prunes old manifests. It
    /// borrows nothing of the coordinator, so it can run on a task of its own.
    #[allow(clippy::too_many_arguments)]
    async fn commit_checkpoint(
        committer: crate::sink::Committer,
        storage: Arc<dyn Storage>,
        job: String,
        retention: usize,
        (id, created_at_ms): (u64, i64),
        committables: Vec<Committable>,
        started: Instant,
        table: Option<DeltaTable>,
        removes: Vec<TableRemove>,
        recorded_abandoned: Vec<String>,
        reservations: Vec<Reservation>,
    ) -> CommitRun {
        // What the committables keep reserved of their writers' budgets is released when the
        // commit has settled, with them.
        let _reserved = reservations;
        let mut run = CommitRun {
            report: CheckpointReport {
                checkpoint_id: id,
                ..CheckpointReport::default()
            },
            deferred: Vec::new(),
            fatal: None,
            started,
            table,
            table_error: None,
            abandoned: Vec::new(),
        };
        // An abandoned round's output, recorded by this manifest: deleted now (the files are
        // the job's, in no log version); one that cannot be is recorded again by the next.
        for path in recorded_abandoned {
            if let Err(e) = storage.remove_data_file(&path).await {
                tracing::warn!(file = %path, error = %e, "output of an abandoned round not removed yet");
                run.abandoned.push(path);
            }
        }
        let commit_started = Instant::now();
        let results = committer.commit(&committables).await;
        // The log step needs every file committed (files before entries); it keeps them all
        // until the log holds them.
        let for_table = run.table.is_some().then(|| committables.clone());
        for (c, r) in committables.into_iter().zip(results) {
            match r {
                Ok(CommitOutcome::Committed) => {
                    run.report.committed_files += 1;
                    run.report.committed_bytes += c.size_bytes;
                    run.report.committed_records += c.record_count;
                }
                Ok(CommitOutcome::AlreadyCommitted) => run.report.already_committed_files += 1,
                Err(e) if e.is_retryable() => {
                    run.report.deferred += 1;
                    run.deferred.push(c);
                }
                Err(e) => {
                    run.fatal.get_or_insert(e);
                }
            }
        }
        if let (Some(table), Some(all)) = (run.table.as_mut(), for_table) {
            if run.fatal.is_none() && run.deferred.is_empty() {
                let outcome = table
                    .commit(id, created_at_ms, &all, &removes)
                    .instrument(tracing::debug_span!("table_commit", job = %job, checkpoint = id))
                    .await;
                let rearranging = !removes.is_empty();
                match outcome {
                    // A rearrangement's output must not ride in a later entry without its
                    // removes (rows twice): its entry is written by the job's next run.
                    Ok(TableOutcome::Deferred) if rearranging => {
                        run.fatal = Some(Error::InvalidInput(format!(
                            "the log entry of compaction round {id} of job `{job}` lost the race \
                             for a table version too often; run the job again to write it"
                        )));
                    }
                    Err(e) if e.is_retryable() && rearranging => run.fatal = Some(e),
                    Ok(TableOutcome::Abandoned) => {
                        run.report.table_outcome = Some(TableOutcome::Abandoned);
                        run.abandoned.extend(abandon_round(&job, id, &all));
                    }
                    Ok(TableOutcome::Deferred) => {
                        run.report.table_outcome = Some(TableOutcome::Deferred);
                        run.deferred = all;
                    }
                    Ok(outcome) => run.report.table_outcome = Some(outcome),
                    Err(e) if e.is_retryable() => {
                        tracing::warn!(error = %e, "log entry deferred to the next checkpoint");
                        run.report.table_outcome = Some(TableOutcome::Deferred);
                        run.deferred = all;
                        run.table_error = Some(e);
                    }
                    Err(e) => run.fatal = Some(e),
                }
            } else if run.fatal.is_none() && removes.is_empty() {
                // A file is not committed yet: the entry waits for the next checkpoint, which
                // carries all of this one's files.
                run.report.table_outcome = Some(TableOutcome::Deferred);
                run.deferred = all;
            } else if run.fatal.is_none() {
                run.fatal = Some(Error::InvalidInput(format!(
                    "a file of compaction round {id} of job `{job}` could not be committed yet; \
                     run the job again to finish the round"
                )));
            }
        }
        if run.fatal.is_some() && run.table.is_some() {
            // After a failed commit the checkpoint's files may be visible without their log
            // entry, and no later manifest of this run would carry them: the job must be
            // reopened, whose restore writes the entry from the manifest.
            run.table = None;
        }
        if run.fatal.is_none() {
            // From the completion point to visible: files committed, and the log entry.
            tracing::info!(
                job = %job,
                checkpoint = id,
                files = run.report.committed_files + run.report.already_committed_files,
                table = ?run.report.table_outcome,
                duration_ms = commit_started.elapsed().as_secs_f64() * 1000.0,
                "checkpoint committed"
            );
            if let Err(e) = Self::prune(storage.as_ref(), &job, retention).await {
                run.fatal = Some(e);
            }
        }
        run
    }

    /// Takes in what a commit did: its deferred committables wait for the next checkpoint.
    fn settle(&mut self, run: CommitRun) -> Result<CheckpointReport> {
        let CommitRun {
            report,
            deferred,
            fatal,
            started,
            table,
            table_error: _,
            abandoned,
        } = run;
        if table.is_some() {
            self.table = table;
        }
        self.abandoned.extend(abandoned);
        self.uncommitted.extend(deferred);
        metrics::gauge!(crate::protocol::metric::PENDING_FILES).set(self.uncommitted.len() as f64);
        metrics::counter!(crate::protocol::metric::COMMIT_RETRIES)
            .increment(report.deferred as u64);
        if report.deferred > 0 {
            tracing::warn!(
                files = report.deferred,
                "commit deferred to the next checkpoint"
            );
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        metrics::histogram!(crate::protocol::metric::CHECKPOINT_DURATION)
            .record(started.elapsed().as_secs_f64());
        Ok(report)
    }

    /// Removes the job's manifests beyond the retention. It borrows only what it needs, not
    /// the coordinator (whose writers are not `Sync`), so that a checkpoint's future is `Send`.
    #[tracing::instrument(name = "prune", skip_all, fields(job = %job))]
    async fn prune(storage: &dyn Storage, job: &str, retention: usize) -> Result<()> {
        let ids = manifest::list_checkpoints(storage, job).await?;
        if ids.len() > retention {
            for (id, _) in &ids[..ids.len() - retention] {
                let path = manifest::manifest_path(job, *id);
                storage.delete_metadata(&path).await?;
                tracing::debug!(checkpoint = *id, file = %path, "manifest pruned");
            }
        }
        Ok(())
    }
}

fn encode_position<P: Serialize + ?Sized>(job: &str, position: &P) -> Result<serde_json::Value> {
    serde_json::to_value(position).map_err(|e| {
        Error::InvalidInput(format!(
            "the source position of job `{job}` does not serialize as JSON: {e}"
        ))
    })
}

/// A writer of a coordinated job: it writes, and only its [`Coordinator`] votes.
///
/// A vote ([`SinkWriter::prepare_commit`]) hands out committables that only the manifest
/// makes safe: the coordinator records them in the checkpoint it writes. A vote taken
/// elsewhere would produce committables no manifest records, and the job's next restore would
/// remove their files. So this handle offers everything of a [`SinkWriter`] but the vote.
#[derive(Debug)]
pub struct JobWriter {
    inner: SinkWriter,
}

impl JobWriter {
    /// Writes a batch ([`SinkWriter::write`]).
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.inner.write(batch).await
    }

    /// Writes serde values as records of `schema` ([`SinkWriter::write_rows`]).
    pub async fn write_rows<T: Serialize>(&mut self, schema: &SchemaRef, rows: &[T]) -> Result<()> {
        self.inner.write_rows(schema, rows).await
    }

    /// Rolls files due by the rolling policy's time limits ([`SinkWriter::flush_idle`]).
    pub async fn flush_idle(&mut self) -> Result<()> {
        self.inner.flush_idle().await
    }

    /// Rolls every open file: the input has ended ([`SinkWriter::end_of_input`]).
    /// [`Coordinator::finish`] does it for every writer.
    pub async fn end_of_input(&mut self) -> Result<()> {
        self.inner.end_of_input().await
    }

    /// In-progress files currently open ([`SinkWriter::open_files`]).
    pub fn open_files(&self) -> usize {
        self.inner.open_files()
    }

    /// Bytes this writer keeps in memory ([`SinkWriter::buffered_bytes`]).
    pub fn buffered_bytes(&self) -> u64 {
        self.inner.buffered_bytes()
    }

    /// Files rolled since the last checkpoint ([`SinkWriter::pending_files`]).
    pub fn pending_files(&self) -> usize {
        self.inner.pending_files()
    }

    /// The id of this writer incarnation ([`SinkWriter::incarnation`]).
    pub fn incarnation(&self) -> &str {
        self.inner.incarnation()
    }
}
