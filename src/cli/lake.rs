//! Reading what is in a sink (a local directory or an S3 prefix): its identity, its jobs and
//! their manifests, its committed files, and its hidden leftovers. Shared by `ls`, `commit`,
//! `abort` and `inspect`; nothing here changes anything. Everything goes through the
//! [`Storage`] trait, so the same code serves every backend.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use filesink::checkpoint::manifest::{self, Manifest, SinkIdentity};
use filesink::checkpoint::OwnNames;
use filesink::sink::state::{split_rel, PartName};
use filesink::storage::{
    CommitState, JobLease, LeaseOptions, Leftover, LocalStorage, ObjectStorage, Storage,
};
use filesink::{Committable, FileFormat, Sink};

use super::exit::{CliError, CliResult};
use super::url::Location;

/// The storage of `location`: a [`LocalStorage`] (which creates the directory if it is
/// missing) or an S3 [`ObjectStorage`], which is also returned as such for what only S3 has
/// ([`ObjectStorage::aborts_incomplete_uploads`]).
pub fn open_storage(
    location: &Location,
) -> filesink::Result<(Arc<dyn Storage>, Option<ObjectStorage>)> {
    match location {
        Location::Local(path) => Ok((Arc::new(LocalStorage::new(path)?), None)),
        Location::S3 { url } => {
            let s3 = ObjectStorage::s3(url)?;
            Ok((Arc::new(s3.clone()), Some(s3)))
        }
    }
}

/// An existing sink (or a location that is not a sink yet).
#[derive(Debug)]
pub struct Lake {
    /// Where it is.
    pub location: Location,
    /// Its storage.
    pub storage: Arc<dyn Storage>,
    /// The same storage as an S3 backend, for S3 locations.
    pub s3: Option<ObjectStorage>,
    /// Its identity; `None` if it is not a filesink output.
    pub identity: Option<SinkIdentity>,
    /// The local base directory (canonical), or the URL.
    base: String,
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

/// The jobs a command may act on ([`Lake::hold_jobs`]).
#[derive(Debug, Default)]
pub struct HeldJobs {
    /// Leases this command holds while it acts (dropping them gives the jobs back).
    pub leases: Vec<Box<dyn JobLease>>,
    /// Jobs owned by a live run, with who holds them: a command leaves them alone.
    pub live: Vec<(String, String)>,
}

impl HeldJobs {
    /// Whether `job` is owned by a live run.
    pub fn is_live(&self, job: &str) -> bool {
        self.live.iter().any(|(j, _)| j == job)
    }

    /// Gives every held job back and waits until another run can take it.
    pub async fn release(self) -> CliResult {
        for lease in self.leases {
            lease.release().await?;
        }
        Ok(())
    }
}

/// Whether the part file `final_path` was written by a writer of `job` (writer ids are
/// `<job>_<i>`, and part names `<prefix>-<writer id>-…`).
pub fn written_by_job(final_path: &str, job: &str) -> bool {
    let name = final_path.rsplit('/').next().unwrap_or(final_path);
    let needle = format!("-{job}_");
    name.match_indices(&needle).any(|(i, _)| {
        let rest = &name[i + needle.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with('-')
    })
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
    /// Only the pending file (a hidden file, or an incomplete multipart upload) exists:
    /// waiting for commit.
    Pending,
    /// Another file holds the final name: committing it is a conflict.
    Conflict,
    /// Neither exists.
    Missing,
}

impl FileState {
    /// `visible`, `pending`, `conflict` or `missing`.
    pub fn name(self) -> &'static str {
        match self {
            FileState::Visible => "visible",
            FileState::Pending => "pending",
            FileState::Conflict => "conflict",
            FileState::Missing => "missing",
        }
    }
}

impl From<CommitState> for FileState {
    fn from(s: CommitState) -> FileState {
        match s {
            CommitState::Committed => FileState::Visible,
            CommitState::Pending => FileState::Pending,
            CommitState::Conflict => FileState::Conflict,
            CommitState::Missing => FileState::Missing,
        }
    }
}

impl Lake {
    /// Opens an existing sink location; never creates anything. A local directory must
    /// exist; an S3 prefix with nothing under it is simply not a filesink output.
    pub async fn open(location: Location) -> CliResult<Lake> {
        if let Some(path) = location.local_path() {
            if !path.is_dir() {
                return Err(CliError::msg(format!(
                    "`{location}` does not exist or is not a directory"
                )));
            }
        }
        let (storage, s3) = open_storage(&location)
            .map_err(|e| CliError::context(format!("cannot open `{location}`"), e))?;
        let base = match (&location, &s3) {
            (_, Some(s3)) => s3.url().to_string(),
            (Location::Local(path), None) => std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string(),
            (other, None) => other.to_string(),
        };
        let identity = manifest::sink_identity(storage.as_ref(), false)
            .await
            .map_err(|e| {
                CliError::context(format!("cannot read the identity of `{location}`"), e)
            })?;
        Ok(Lake {
            location,
            storage,
            s3,
            identity,
            base,
        })
    }

    /// Opens a location that must be a filesink output; refuses (exit code 5) otherwise.
    pub async fn open_sink(location: Location) -> CliResult<Lake> {
        if location.local_path().is_some_and(|p| !p.is_dir()) {
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

    /// The base: the canonical local directory, or the `s3://` URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Where `rel` (a path relative to the base) is, for messages.
    pub fn describe(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base.trim_end_matches('/'))
    }

    /// Whether this is an S3 location.
    pub fn is_s3(&self) -> bool {
        self.s3.is_some()
    }

    /// The upload id of a leftover that is an incomplete multipart upload (S3 lists them as
    /// `<final path>#<upload id>`); `None` for a hidden file.
    pub fn upload_id<'a>(&self, l: &'a Leftover) -> Option<&'a str> {
        if !self.is_s3() {
            return None;
        }
        l.path.rsplit_once('#').map(|(_, id)| id)
    }

    /// A sink on this lake's storage, for its committer.
    pub fn sink(&self) -> CliResult<Sink> {
        Ok(Sink::builder_shared(self.storage.clone()).build()?)
    }

    /// Every job with its manifests and latest manifest.
    pub async fn jobs(&self) -> CliResult<Vec<JobInfo>> {
        let sink_id = self.identity.as_ref().map(|i| i.sink_id.as_str());
        let names = manifest::list_jobs(self.storage.as_ref())
            .await
            .map_err(|e| {
                CliError::context(format!("cannot list the jobs of `{}`", self.location), e)
            })?;
        let mut jobs = Vec::with_capacity(names.len());
        for job in names {
            let checkpoints = manifest::list_checkpoints(self.storage.as_ref(), &job)
                .await
                .map_err(|e| {
                    CliError::context(format!("cannot list the manifests of job `{job}`"), e)
                })?;
            let latest = match checkpoints.last() {
                None => Ok(None),
                Some((id, _)) => manifest::read_manifest(self.storage.as_ref(), &job, *id, sink_id)
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

    /// Takes the ownership of each of `jobs` for as long as the command acts on them, the same
    /// ownership a running `ingest` holds: a job owned by a live run is listed as live and
    /// must be left alone. A dry run only asks who holds each job.
    pub async fn hold_jobs(&self, jobs: &[String], dry_run: bool) -> CliResult<HeldJobs> {
        let mut held = HeldJobs::default();
        for job in jobs {
            if dry_run {
                if let Some(holder) = self.storage.job_holder(job).await? {
                    held.live.push((job.clone(), holder));
                }
                continue;
            }
            match self
                .storage
                .acquire_job(job, &LeaseOptions::default())
                .await
            {
                Ok(lease) => held.leases.push(lease),
                Err(filesink::Error::JobBusy { reason, .. }) => {
                    held.live.push((job.clone(), reason))
                }
                Err(e) => {
                    return Err(CliError::context(
                        format!("cannot take job `{job}` in `{}`", self.location),
                        e,
                    ))
                }
            }
        }
        Ok(held)
    }

    /// Reads manifest `id` of `job` (checked against this sink's id).
    pub async fn manifest(&self, job: &str, id: u64) -> CliResult<Manifest> {
        let sink_id = self.identity.as_ref().map(|i| i.sink_id.as_str());
        manifest::read_manifest(self.storage.as_ref(), job, id, sink_id)
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

    /// The hidden part files under the base, sorted by path, split into this sink's own and
    /// foreign ones ([`OwnNames`]), which are reported and never removed. Its own are of
    /// writers of `jobs`, with the prefix and a suffix `ingest` writes or ones that a latest
    /// manifest of `jobs` shows.
    pub async fn leftovers(&self, jobs: &[JobInfo]) -> CliResult<(Vec<Leftover>, Vec<Leftover>)> {
        let mut l = self.storage.list_leftovers().await.map_err(|e| {
            CliError::context(
                format!("cannot list the hidden files of `{}`", self.location),
                e,
            )
        })?;
        l.sort_by(|a, b| a.path.cmp(&b.path));
        let mut own = OwnNames {
            jobs: jobs.iter().map(|j| j.job.clone()).collect(),
            prefixes: vec![filesink::OutputFileConfig::DEFAULT_PREFIX.into()],
            suffixes: [
                FileFormat::parquet(),
                FileFormat::json_lines(),
                FileFormat::csv(),
            ]
            .iter()
            .map(|f| f.default_suffix().to_string())
            .collect(),
        };
        for m in jobs
            .iter()
            .filter_map(|j| j.latest.as_ref().ok().and_then(Option::as_ref))
        {
            let finals = m.committables.iter().map(|c| c.final_path.as_str()).chain(
                m.writers
                    .iter()
                    .flat_map(|w| w.in_progress.iter().map(|f| f.final_path.as_str())),
            );
            for f in finals {
                if let Some(n) = PartName::parse_final(split_rel(f).1) {
                    if !own.prefixes.contains(&n.prefix) {
                        own.prefixes.push(n.prefix);
                    }
                    if !own.suffixes.contains(&n.suffix) {
                        own.suffixes.push(n.suffix);
                    }
                }
            }
        }
        Ok(l.into_iter().partition(|l| own.owns(l)))
    }

    /// The visible data files (every name readers see), with their sizes.
    pub async fn visible(&self) -> CliResult<Vec<filesink::storage::VisibleFile>> {
        self.storage.list_visible().await.map_err(|e| {
            CliError::context(format!("cannot list the files of `{}`", self.location), e)
        })
    }

    /// Where `c`'s file is now, with the backend's proof for "visible" (size and CRC-32C
    /// locally, the multipart ETag on S3): the dry run of a commit.
    pub async fn file_state(&self, c: &Committable) -> filesink::Result<FileState> {
        self.storage.probe(c).await.map(FileState::from)
    }

    /// Where each of `committables` is, cheaply: a final name in `visible` (a listing of
    /// the visible files) is [`FileState::Visible`] without reading it; the others are
    /// probed.
    pub async fn file_states(
        &self,
        committables: &[&Committable],
        visible: &HashSet<&str>,
    ) -> CliResult<Vec<FileState>> {
        let mut out = Vec::with_capacity(committables.len());
        for c in committables {
            if visible.contains(c.final_path.as_str()) {
                out.push(FileState::Visible);
                continue;
            }
            let state = self.file_state(c).await.map_err(|e| {
                CliError::context(
                    format!("cannot check `{}`", self.describe(&c.final_path)),
                    e,
                )
            })?;
            out.push(state);
        }
        Ok(out)
    }
}

/// Committed files per partition directory (`""` is the base) of a listing of the visible
/// files.
pub fn committed(visible: &[filesink::storage::VisibleFile]) -> BTreeMap<String, Partition> {
    let mut out: BTreeMap<String, Partition> = BTreeMap::new();
    for f in visible {
        let dir = f.path.rsplit_once('/').map_or("", |(dir, _)| dir);
        let p = out.entry(dir.to_string()).or_default();
        p.files += 1;
        p.bytes += f.size_bytes;
    }
    out
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

#[cfg(test)]
mod tests {
    use super::written_by_job;

    #[test]
    fn a_part_name_belongs_to_the_job_whose_writer_wrote_it() {
        let name = "day=1/part-nightly_0-01a2b3c4-7.parquet";
        assert!(written_by_job(name, "nightly"));
        assert!(!written_by_job(name, "night"));
        assert!(!written_by_job(name, "nightly_0"));
        // Job names may hold `_`: the writer id ends where the digits after `<job>_` end.
        assert!(written_by_job("part-a_1_0-x-0.jsonl", "a_1"));
        assert!(!written_by_job("part-a_1_0-x-0.jsonl", "a"));
        assert!(written_by_job("part-a_1-x-0.jsonl", "a"));
        assert!(!written_by_job("part-a_-x-0.jsonl", "a"));
        assert!(!written_by_job("nightly_0-x", "nightly"));
    }
}
