//! The exactly-once protocol: writer → pending → commit.
//!
//! This page is the whole argument. The rest of the crate implements it: [`SinkWriter`] the
//! first phase, [`Committer`] the second, [`crate::storage`] the primitives each phase needs.
//!
//! # Lifecycle of a part file
//!
//! ```text
//!   write()                       prepare_commit(n)                   commit(), once checkpoint n
//!                                 = the vote                          is complete
//!  ─────────▶ IN-PROGRESS ─────────────────────────────▶ PENDING ─────────────────────────────▶ COMMITTED
//!             .part-0-<inc>-7.parquet.inprogress.<id>     same hidden name,                   part-0-<inc>-7.parquet
//!             hidden, beside its final name,              encoder finished, file fsynced,     rename without replace,
//!             may hold a partial tail                     directory fsynced; its Committable  then directory fsync
//!                   │                                     goes into checkpoint n
//!                   │ row formats that do not roll:
//!                   └─ persisted at prepare_commit(n): fsynced; (path, length, CRC) go into the
//!                      WriterState of checkpoint n and are resumed from there
//! ```
//!
//! A checkpoint is *complete* when the caller has durably stored both the committables and the
//! writer state of every writer (Flink's checkpoint; `filesink`'s own coordinator writes a
//! manifest). Only then may [`Committer::commit`] run.
//!
//! # Where a crash lands
//!
//! 1. **Before `prepare_commit(n)` returns** (or before checkpoint n is stored): checkpoint n
//!    does not exist. The job restores from n−1 with [`Sink::restore_writer`], which removes
//!    every hidden file of this writer that n−1 does not reference and resumes each row file
//!    from its durable prefix. The source replays from n−1's position: each record is written
//!    again, once. Nothing was visible.
//! 2. **Between `prepare_commit(n)` and commit.** If checkpoint n was *not* completed, the job
//!    restores from n−1 as in case 1: n's pending files are unreferenced and removed. If it
//!    *was* completed, restore from n hands its committables to [`Sink::restore_writer`],
//!    which commits them before anything else; commit is idempotent, so it does not matter
//!    whether the crash came before, during or after the first commit.
//! 3. **After commit.** Restoring from n commits n's committables again: each reports
//!    [`CommitOutcome::AlreadyCommitted`] after the backend proves the visible file is the
//!    committed one. The source resumes after n; nothing is written twice.
//!
//! # Pre-commit merge: carried files
//!
//! With [`SinkBuilder::merge_small_files`], a Parquet file that is small at the vote of
//! checkpoint n is sealed as usual (durable, hidden) but *carried*: listed in the
//! [`WriterState::carried`] of n instead of handed out as a committable. A later vote (the
//! bucket's carried bytes reach the target, its oldest carried file waited the visibility
//! delay, or the input ended) writes their records into one new file of its incarnation
//! whose committable *supersedes* them (a lone due file is handed out as it is on local
//! disk, and rewritten the same way on an object store). A carried
//! file is never written to again and is only removed as superseded, after the merged file is
//! committed. Its records are before n's source position, so every checkpoint from n on must
//! reference it, through the state or through a committable's `supersedes`, until then:
//!
//! 1. **Crash before the manifest of n** (n's vote carried or merged files): n does not
//!    exist. Restore from n−1 keeps the files n−1 carries (rule 7: referenced by the
//!    state) and removes n's newly carried files and n's merged file (unreferenced). The
//!    source replays from n−1: n's records are written again, once, and the next vote
//!    carries or merges again.
//! 2. **After the manifest of n, before the merged file is committed**: restore from n
//!    commits it (n's committables), then the committer removes the carried files it
//!    supersedes; n's own carried files are in n's state and are carried on.
//! 3. **Between that commit and the removal of the superseded files**: restore from n
//!    commits again (already committed) and removes them then; restore from a later
//!    checkpoint, which no longer references them, removes them as leftovers. Either way
//!    their records are visible exactly once, in the merged file.
//!
//! Operators' cleanup (`filesink abort`, `filesink ls`) sees carried files through
//! `lake::references` (kind `carried`) and never removes them.
//!
//! **On an object store** a multipart upload in progress cannot be read back, so a carried
//! file is a hidden object of its own, with the lifecycle:
//!
//! ```text
//!  rolled, small,              seal_carried (vote)                 merged file committed
//!  no part uploaded ──────────────────────────────────▶ CARRIED ──────────────────────▶ deleted
//!  (all in the buffer)         PUT .<final>.inprogress.<id>        by the commit of the
//!                              (the staging name), then the        file that supersedes it
//!                              part's multipart upload aborted
//! ```
//!
//! A file that already uploaded a part (it reached the storage's part size) is committed as
//! usual: on S3 the effective threshold is the smaller of `small_bytes_max` and the part
//! size. A lone due carried file is rewritten as a merge of one file (a hidden object cannot
//! be renamed; a copy costs as much). The merged file is an ordinary multipart upload, and
//! its commit deletes the objects it supersedes once the upload is completed. The crash
//! points above hold as they are, plus one: a crash between the PUT of a carried object and
//! the abort of its upload is a crash before the manifest (case 1): both are unreferenced
//! and removed at restore. Restore finds carried objects by listing every object under the
//! base, which S3 needs only for a writer that may have carried files (its sink merges, or
//! its state carries); `filesink abort` always lists them.
//!
//! # Invariants
//!
//! 1. **Nothing is visible before its checkpoint completes.** Final names are created only by
//!    [`crate::storage::Parts::commit`]; until then bytes live under hidden names
//!    (`.…​.inprogress.<id>`) that Hive, Spark, pyarrow and DuckDB skip.
//! 2. **Durable before the vote.** A [`Committable`] exists only after its file, and the
//!    directory entries that reach it, are fsynced ([`crate::storage::Parts::seal`]). A
//!    failed fsync fails `prepare_commit`, and with it the checkpoint.
//! 3. **Commit never replaces and never guesses.** It renames without replacing
//!    (`RENAME_NOREPLACE`), fsyncs each directory once per call, and says "already committed"
//!    only when the visible file has the committable's size and CRC-32C. Anything else is
//!    [`crate::Error::Conflict`] or [`crate::Error::DataLost`].
//! 4. **Commit resumes, it does not stop halfway.** One failing committable does not stop the
//!    others; a call cut short by a crash is finished by the next call with the same handles.
//! 5. **Names never collide.** A final name carries the writer id and a UUIDv7 drawn per writer
//!    incarnation, so two incarnations (a restarted writer and a zombie) never aim at the same
//!    name, and no counter has to be recovered.
//! 6. **A restored writer never writes into an older incarnation's file.** It copies the
//!    durable prefix of a resumable file into a new file of its own; the old file is removed
//!    only after the new one is committed. A zombie still appending to the old file cannot
//!    corrupt it.
//! 7. **Cleanup removes only what no checkpoint needs**: hidden part names of this writer's id
//!    that neither the restored state nor the restored committables reference. A name is a
//!    part name only if it parses by the one grammar of
//!    [`PartName`](crate::sink::state::PartName); and no listing enters another sink's base
//!    below this one (a directory holding `_filesink/`).
//! 8. **A failed write poisons the writer.** After an error while its files were being changed,
//!    every further call fails; the only way on is to restore from the last complete
//!    checkpoint, which discards whatever partial bytes the failure left.
//! 9. **State is validated before it is acted on.** Committables and writer states carry a
//!    format version and only relative, normal paths (`crate::sink::state`); hostile state
//!    cannot name a file outside the base or a file that is not the sink's own.

use std::sync::Arc;

use crate::storage::{LocalStorage, Storage};
use crate::Result;

pub(crate) mod committer;
pub(crate) mod config;
pub(crate) mod spill;
pub mod state;
pub(crate) mod writer;

pub use crate::protocol::CommitOutcome;
pub use committer::{CommitSummary, Committer};
pub use config::{MergePolicy, OutputFileConfig, RollingPolicy, SinkBuilder};
pub use state::{
    CarriedFile, Committable, PendingHandle, ResumableFile, UploadedPart, WriterState,
    FORMAT_VERSION,
};
pub use writer::{Restored, SinkWriter};

use config::SinkConfig;

/// A configured sink: the factory of writers and committers (Flink's `Sink` with
/// `SupportsCommitter`).
#[derive(Debug, Clone)]
pub struct Sink {
    pub(crate) config: Arc<SinkConfig>,
}

impl Sink {
    /// Starts configuring a sink on `storage`.
    pub fn builder(storage: impl Storage) -> SinkBuilder {
        SinkBuilder::new(Arc::new(storage))
    }

    /// Starts configuring a sink on a storage shared with other sinks (parallel writers, a CLI
    /// that picks the backend from a URL).
    pub fn builder_shared(storage: Arc<dyn Storage>) -> SinkBuilder {
        SinkBuilder::new(storage)
    }

    /// Starts configuring a sink under the local directory `base` (created if missing).
    pub fn local(base: impl Into<std::path::PathBuf>) -> Result<SinkBuilder> {
        Ok(Self::builder(LocalStorage::new(base)?))
    }

    /// A writer for a job that starts fresh. It does not look at leftovers: use
    /// [`Sink::restore_writer`] with no state to start fresh *and* clean up after an earlier
    /// run of the same writer id.
    pub fn create_writer(&self) -> SinkWriter {
        SinkWriter::new(self.config.clone())
    }

    /// Restores a writer from the latest complete checkpoint: commits `committables` (the
    /// checkpoint's, idempotently), removes this writer's hidden files that the checkpoint
    /// does not reference, and resumes the row files in `state`. With `state` `None` and no
    /// committables this is a fresh start that cleans up.
    ///
    /// Fails without deleting anything if a committable cannot be committed.
    pub async fn restore_writer(
        &self,
        state: Option<&WriterState>,
        committables: &[Committable],
    ) -> Result<Restored> {
        SinkWriter::restore(self.config.clone(), state, committables).await
    }

    /// A committer for this sink's storage. It holds no state: any number of them, in any
    /// process, may commit the same committables.
    pub fn committer(&self) -> Committer {
        Committer::new(self.config.storage.clone())
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.config.storage
    }

    /// This sink's writer id.
    pub fn writer_id(&self) -> &str {
        &self.config.writer_id
    }

    /// The longest partition path (a bucket's directories, `/`-separated, as
    /// [`BucketId`](crate::protocol::BucketId) spells it) this sink can write into, in bytes: the
    /// store's limit on a path ([`Storage::path_bytes_max`](crate::storage::Parts::path_bytes_max)) less a `/` and the longest name a
    /// part file of any of the sink's writers may have. `None` if the store has no limit.
    ///
    /// [`SinkWriter::write`] refuses a batch with a longer partition path before anything is
    /// written; `filesink ingest` sets such a record aside as a bad record.
    pub fn partition_path_bytes_max(&self) -> Option<usize> {
        self.config.partition_path_bytes_max()
    }

    /// The same sink as a table's: Parquet files with their statistics computed at the vote
    /// (a table's log carries them). Errors with [`crate::Error::Config`] for a row format:
    /// a Delta table holds Parquet files only.
    pub(crate) fn for_table(&self) -> Result<Sink> {
        if !matches!(self.config.format, crate::format::FileFormat::Parquet(_)) {
            return Err(crate::Error::Config(format!(
                "a Delta table holds Parquet files; this sink writes {}",
                self.config.format.name()
            )));
        }
        if self.config.merge.is_some() {
            return Err(crate::Error::Config(
                "a Delta table does not take a pre-commit merge: its small files are compacted \
                 after they are visible (`filesink compact`)"
                    .into(),
            ));
        }
        let mut config = self.config.as_ref().clone();
        config.file_stats = true;
        Ok(Sink {
            config: Arc::new(config),
        })
    }

    /// The same sink for one of the `writers` writers of a job: a default cap of open files
    /// becomes the writer's share ([`config::default_open_files_max_of`]); a cap the user set
    /// stays as it is.
    pub(crate) fn sharing_open_files(&self, writers: usize) -> Sink {
        if !self.config.open_files_default {
            return self.clone();
        }
        let mut config = self.config.as_ref().clone();
        config.open_files_max = config
            .open_files_max
            .min(config::default_open_files_max_of(writers));
        Sink {
            config: Arc::new(config),
        }
    }

    /// The same sink with another writer id (for parallel writers of one job).
    pub fn with_writer_id(&self, id: impl Into<String>) -> Result<Sink> {
        let id = id.into();
        crate::protocol::names::validate_writer_id(&id).map_err(crate::Error::Config)?;
        let mut config = self.config.as_ref().clone();
        config.writer_id = id;
        Ok(Sink {
            config: Arc::new(config),
        })
    }
}
