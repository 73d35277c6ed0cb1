//! Reading what is in a sink directory: its identity, its jobs and their manifests, its
//! committed files, and its hidden leftovers. Shared by `ls`, `commit`, `abort` and `inspect`;
//! nothing here changes anything.

use std::collections::BTreeMap;
use std::path::Path;

use filesink::checkpoint::manifest::{self, Manifest, SinkIdentity};
use filesink::storage::{Leftover, LocalStorage, Storage};
use filesink::{Committable, PendingHandle, Sink};

use super::exit::{CliError, CliResult};
use super::url::Location;

/// An existing sink directory (or one that is not a sink yet).
#[derive(Debug)]
pub struct Lake {
    /// Where it is.
    pub location: Location,
    /// Its storage.
    pub storage: LocalStorage,
    /// Its identity; `None` if it is not a filesink output.
    pub identity: Option<SinkIdentity>,
}

/// One job of a lake.
#[derive(Debug)]
pub struct JobInfo {
    /// The job name.
    pub job: String,
    /// Its manifests: (checkpoint id, modification time in ms since the epoch), ascending.
    pub checkpoints: Vec<(u64, i64)>,
    /// Its latest manifest, or why it cannot be read.
    pub latest: Result<Option<Manifest>, filesink::Error>,
}

impl JobInfo {
    /// Checks that the job has a manifest for checkpoint `id`.
    pub fn require_checkpoint(&self, id: u64) -> CliResult {
        if self.checkpoints.iter().any(|(c, _)| *c == id) {
            return Ok(());
        }
        let ids: Vec<String> = self
            .checkpoints
            .iter()
            .map(|(c, _)| c.to_string())
            .collect();
        Err(CliError::msg(format!(
            "job `{}` has no manifest for checkpoint {id} (it keeps: {})",
            self.job,
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        )))
    }
}

/// Why a hidden file is still needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// A committable's pending file: committed by `commit` or the job's next run.
    Pending,
    /// A row-format file kept open across the checkpoint; the job's next run resumes it.
    Resumable,
    /// An original that a resumed file supersedes; removed once that one is committed.
    Superseded,
}

impl RefKind {
    /// `pending`, `resumable` or `superseded`.
    pub fn name(self) -> &'static str {
        match self {
            RefKind::Pending => "pending",
            RefKind::Resumable => "resumable",
            RefKind::Superseded => "superseded",
        }
    }
}

/// A hidden file that a job's latest manifest references.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The job.
    pub job: String,
    /// The manifest's checkpoint id.
    pub checkpoint_id: u64,
    /// Why it is referenced.
    pub kind: RefKind,
}

/// Committed (visible) files of one partition directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Where a committable's file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// The final file exists: committed.
    Visible,
    /// Only the pending hidden file exists: waiting for commit.
    Pending,
    /// Neither exists.
    Missing,
}

impl FileState {
    /// `visible`, `pending` or `missing`.
    pub fn name(self) -> &'static str {
        match self {
            FileState::Visible => "visible",
            FileState::Pending => "pending",
            FileState::Missing => "missing",
        }
    }
}

impl Lake {
    /// Opens an existing directory; never creates one.
    pub async fn open(location: Location) -> CliResult<Lake> {
        let path = location.local_path();
        if !path.is_dir() {
            return Err(CliError::msg(format!(
                "`{location}` does not exist or is not a directory"
            )));
        }
        let storage = LocalStorage::new(path)?;
        let identity = manifest::sink_identity(&storage, false)
            .await
            .map_err(|e| {
                CliError::context(format!("cannot read the identity of `{location}`"), e)
            })?;
        Ok(Lake {
            location,
            storage,
            identity,
        })
    }

    /// Opens a directory that must be a filesink output; refuses (exit code 5) otherwise.
    pub async fn open_sink(location: Location) -> CliResult<Lake> {
        if !location.local_path().is_dir() {
            return Err(CliError::refused(format!(
                "`{location}` is not a filesink output: it does not exist or is not a directory"
            )));
        }
        let lake = Lake::open(location).await?;
        lake.sink_id()?;
        Ok(lake)
    }

    /// The sink id; refuses (exit code 5) if this is not a filesink output.
    pub fn sink_id(&self) -> CliResult<&str> {
        match &self.identity {
            Some(id) => Ok(&id.sink_id),
            None => Err(CliError::refused(format!(
                "`{}` is not a filesink output: it has no `{}/sink.json`",
                self.location,
                manifest::METADATA_DIR
            ))),
        }
    }

    /// The base directory.
    pub fn base(&self) -> &Path {
        self.storage.base()
    }

    /// A sink on this lake's storage, for its committer.
    pub fn sink(&self) -> CliResult<Sink> {
        Ok(Sink::builder(self.storage.clone()).build()?)
    }

    /// Every job with its manifests and latest manifest.
    pub async fn jobs(&self) -> CliResult<Vec<JobInfo>> {
        let sink_id = self.identity.as_ref().map(|i| i.sink_id.as_str());
        let names = manifest::list_jobs(&self.storage).await.map_err(|e| {
            CliError::context(format!("cannot list the jobs of `{}`", self.location), e)
        })?;
        let mut jobs = Vec::with_capacity(names.len());
        for job in names {
            let checkpoints = manifest::list_checkpoints(&self.storage, &job)
                .await
                .map_err(|e| {
                    CliError::context(format!("cannot list the manifests of job `{job}`"), e)
                })?;
            let latest = match checkpoints.last() {
                None => Ok(None),
                Some((id, _)) => manifest::read_manifest(&self.storage, &job, *id, sink_id)
                    .await
                    .map(Some),
            };
            jobs.push(JobInfo {
                job,
                checkpoints,
                latest,
            });
        }
        Ok(jobs)
    }

    /// Reads manifest `id` of `job` (checked against this sink's id).
    pub async fn manifest(&self, job: &str, id: u64) -> CliResult<Manifest> {
        let sink_id = self.identity.as_ref().map(|i| i.sink_id.as_str());
        manifest::read_manifest(&self.storage, job, id, sink_id)
            .await
            .map_err(|e| {
                CliError::context(
                    format!(
                        "cannot read checkpoint {id} of job `{job}` in `{}`",
                        self.location
                    ),
                    e,
                )
            })
    }

    /// The hidden part files under the base, sorted by path.
    pub async fn leftovers(&self) -> CliResult<Vec<Leftover>> {
        let mut l = self.storage.list_leftovers().await.map_err(|e| {
            CliError::context(
                format!("cannot list the hidden files of `{}`", self.location),
                e,
            )
        })?;
        l.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(l)
    }

    /// Committed files per partition directory (`""` is the base), walking every directory
    /// and skipping names that start with `.` or `_`, as readers do.
    pub fn committed(&self) -> CliResult<BTreeMap<String, Partition>> {
        let mut out: BTreeMap<String, Partition> = BTreeMap::new();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let dir = if rel.is_empty() {
                self.base().to_path_buf()
            } else {
                self.base().join(&rel)
            };
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| CliError::context(format!("cannot list `{}`", dir.display()), e))?;
            for entry in entries {
                let entry = entry.map_err(|e| {
                    CliError::context(format!("cannot list `{}`", dir.display()), e)
                })?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                if name.starts_with('.') || name.starts_with('_') {
                    continue;
                }
                let child = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                let meta = entry.metadata().map_err(|e| {
                    CliError::context(format!("cannot stat `{}`", entry.path().display()), e)
                })?;
                if meta.is_dir() {
                    stack.push(child);
                } else if meta.is_file() {
                    let p = out.entry(rel.clone()).or_default();
                    p.files += 1;
                    p.bytes += meta.len();
                }
            }
        }
        Ok(out)
    }

    /// Where `c`'s file is now.
    pub fn file_state(&self, c: &Committable) -> FileState {
        if self.base().join(&c.final_path).is_file() {
            FileState::Visible
        } else if pending_path(c).is_some_and(|p| self.base().join(p).is_file()) {
            FileState::Pending
        } else {
            FileState::Missing
        }
    }
}

/// The hidden path of a committable's pending file, for handles that are files under the
/// base (not for multipart uploads).
pub fn pending_path(c: &Committable) -> Option<&str> {
    match &c.pending {
        PendingHandle::LocalFile { in_progress_path } => Some(in_progress_path),
        PendingHandle::Staged { staging_path } => Some(staging_path),
        _ => None,
    }
}

/// Every hidden file the given (latest) manifests reference, with why.
pub fn references<'a>(
    manifests: impl IntoIterator<Item = &'a Manifest>,
) -> BTreeMap<String, Reference> {
    let mut refs = BTreeMap::new();
    for m in manifests {
        let r = |kind| Reference {
            job: m.job.clone(),
            checkpoint_id: m.checkpoint_id,
            kind,
        };
        for w in &m.writers {
            for f in &w.in_progress {
                refs.insert(f.in_progress_path.clone(), r(RefKind::Resumable));
                for s in &f.supersedes {
                    refs.entry(s.clone())
                        .or_insert_with(|| r(RefKind::Superseded));
                }
            }
        }
        for c in &m.committables {
            refs.insert(c.pending.leftover_id(&c.final_path), r(RefKind::Pending));
            for s in &c.supersedes {
                refs.entry(s.clone())
                    .or_insert_with(|| r(RefKind::Superseded));
            }
        }
    }
    refs
}
