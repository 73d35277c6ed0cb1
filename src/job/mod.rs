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

mod checkpoint;
pub mod manifest;
mod own_names;
mod queues;
mod restore;
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
