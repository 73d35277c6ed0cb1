//! A lake as the commands see it: a parsed [`Location`], its storage, and the library's read
//! model ([`filesink::lake`]) with the messages and exit codes of the CLI. Shared by `ls`,
//! `commit`, `abort` and `inspect`; nothing here changes anything.

use std::collections::HashSet;
use std::sync::Arc;

use filesink::job::manifest::{self, Manifest, SinkIdentity};
use filesink::lake;
use filesink::storage::{Leftover, LocalStorage, ObjectStorage, Storage};
use filesink::{Committable, Sink};

pub use filesink::lake::{
    committed, own_names, own_visible, references, FileState, HeldJobs, JobInfo,
};

use super::exit::{CliError, CliResult};
use filesink::storage::Location;

/// A lake's storage, and the same as an S3 backend for S3 locations.
type Opened = filesink::Result<(Arc<dyn Storage>, Option<ObjectStorage>)>;

/// The storage of `location`: a [`LocalStorage`] (which creates the directory if it is
/// missing) or an S3 [`ObjectStorage`], which is also returned as such for what only S3 has
/// ([`ObjectStorage::aborts_incomplete_uploads`]).
pub fn open_storage(location: &Location) -> Opened {
    match location {
        Location::Local(path) => Ok((Arc::new(LocalStorage::new(path)?), None)),
        Location::S3 { .. } => {
            let s3 = ObjectStorage::s3_at(location)?;
            Ok((Arc::new(s3.clone()), Some(s3)))
        }
    }
}

/// As [`open_storage`], for a listing: a local lake's reads are not made durable first
/// ([`LocalStorage::for_listing`]); nothing is done with what a listing reads.
fn open_storage_for_listing(location: &Location) -> Opened {
    match location {
        Location::Local(path) => Ok((Arc::new(LocalStorage::new(path)?.for_listing()), None)),
        _ => open_storage(location),
    }
}

/// An existing sink (or a location that is not a sink yet).
#[derive(Debug)]
pub struct Lake {
    /// Where it is.
    pub location: Location,
    /// The same storage as an S3 backend, for S3 locations.
    pub s3: Option<ObjectStorage>,
    /// The read model.
    model: lake::Lake,
    /// The local base directory (canonical), or the URL.
    base: String,
}

/// Checks that `job` has a manifest for checkpoint `id`.
pub fn require_checkpoint(job: &JobInfo, id: u64) -> CliResult {
    if job.checkpoints.iter().any(|(c, _)| *c == id) {
        return Ok(());
    }
    let ids: Vec<String> = job.checkpoints.iter().map(|(c, _)| c.to_string()).collect();
    Err(CliError::msg(format!(
        "job `{}` has no manifest for checkpoint {id} (it keeps: {})",
        job.job,
        if ids.is_empty() {
            "none".to_string()
        } else {
            ids.join(", ")
        }
    )))
}

impl Lake {
    /// Opens an existing sink location; never creates anything. A local directory must
    /// exist; an S3 prefix with nothing under it is simply not a filesink output.
    pub async fn open(location: Location) -> CliResult<Lake> {
        Lake::open_with(location, open_storage).await
    }

    /// [`Lake::open`] for a listing, which acts on nothing it reads: a local lake's reads are
    /// not made durable first ([`LocalStorage::for_listing`]).
    pub async fn open_for_listing(location: Location) -> CliResult<Lake> {
        Lake::open_with(location, open_storage_for_listing).await
    }

    async fn open_with(
        location: Location,
        open_storage: fn(&Location) -> Opened,
    ) -> CliResult<Lake> {
        if let Some(path) = location.local_path() {
            if !path.is_dir() {
                return Err(CliError::refused(format!(
                    "`{location}` is not a filesink output: it does not exist or is not a \
                     directory"
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
        let model = lake::Lake::open(storage.clone()).await.map_err(|e| {
            CliError::context(format!("cannot read the identity of `{location}`"), e)
        })?;
        Ok(Lake {
            location,
            s3,
            model,
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

    /// Its identity; `None` if it is not a filesink output.
    pub fn identity(&self) -> Option<&SinkIdentity> {
        self.model.identity()
    }

    /// Removes a leftover ([`lake::Lake::remove_leftover`]).
    pub async fn remove_leftover(
        &self,
        leftover: &filesink::storage::Leftover,
    ) -> filesink::Result<()> {
        self.model.remove_leftover(leftover).await
    }

    /// The temporary files of unfinished metadata writes ([`lake::Lake::metadata_temps`]).
    pub async fn metadata_temps(&self, jobs: &[JobInfo]) -> CliResult<Vec<lake::MetadataTemp>> {
        self.model.metadata_temps(jobs).await.map_err(|e| {
            CliError::context(
                format!(
                    "cannot list the metadata directories of `{}`",
                    self.location
                ),
                e,
            )
        })
    }

    /// Removes a temporary metadata file ([`lake::Lake::remove_metadata_temp`]).
    pub async fn remove_metadata_temp(&self, temp: &lake::MetadataTemp) -> filesink::Result<()> {
        self.model.remove_metadata_temp(temp).await
    }

    /// The sink id; refuses (exit code 5) if this is not a filesink output.
    pub fn sink_id(&self) -> CliResult<&str> {
        match self.identity() {
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
        Ok(self.model.sink()?)
    }

    /// Every job with its manifests and latest manifest.
    pub async fn jobs(&self) -> CliResult<Vec<JobInfo>> {
        self.model.jobs().await.map_err(|e| {
            CliError::context(format!("cannot list the jobs of `{}`", self.location), e)
        })
    }

    /// The jobs retired from the lake: their files stay its own.
    pub async fn retired(&self) -> CliResult<filesink::job::retired::Retired> {
        self.model.retired().await.map_err(|e| {
            CliError::context(
                format!("cannot read the retired jobs of `{}`", self.location),
                e,
            )
        })
    }

    /// The names of the jobs that have manifests; reads no manifest.
    pub async fn job_names(&self) -> CliResult<Vec<String>> {
        self.model.job_names().await.map_err(|e| {
            CliError::context(format!("cannot list the jobs of `{}`", self.location), e)
        })
    }

    /// Who runs each of `jobs` right now ([`lake::Lake::holders`]); never takes a job.
    pub async fn holders(&self, jobs: &[String]) -> CliResult<Vec<Option<String>>> {
        self.model.holders(jobs).await.map_err(|e| {
            CliError::context(
                format!("cannot tell whether the jobs of `{}` run", self.location),
                e,
            )
        })
    }

    /// Takes the ownership of each of `jobs` for as long as the command acts on them
    /// ([`lake::Lake::hold_jobs`]).
    pub async fn hold_jobs(&self, jobs: &[String], dry_run: bool) -> CliResult<HeldJobs> {
        self.model.hold_jobs(jobs, dry_run).await.map_err(|e| {
            CliError::context(format!("cannot take the jobs of `{}`", self.location), e)
        })
    }

    /// Reads manifest `id` of `job` (checked against this sink's id).
    pub async fn manifest(&self, job: &str, id: u64) -> CliResult<Manifest> {
        self.model.manifest(job, id).await.map_err(|e| {
            CliError::context(
                format!(
                    "cannot read checkpoint {id} of job `{job}` in `{}`",
                    self.location
                ),
                e,
            )
        })
    }

    /// The hidden part files under the base, split into this sink's own and foreign ones
    /// ([`lake::Lake::leftovers`]).
    pub async fn leftovers(&self, jobs: &[JobInfo]) -> CliResult<(Vec<Leftover>, Vec<Leftover>)> {
        self.model.leftovers(jobs).await.map_err(|e| {
            CliError::context(
                format!("cannot list the hidden files of `{}`", self.location),
                e,
            )
        })
    }

    /// The visible data files (every name readers see), with their sizes.
    pub async fn visible(&self) -> CliResult<Vec<filesink::storage::VisibleFile>> {
        self.model.visible().await.map_err(|e| {
            CliError::context(format!("cannot list the files of `{}`", self.location), e)
        })
    }

    /// Where `c`'s file is now ([`lake::Lake::file_state`]).
    pub async fn file_state(&self, c: &Committable) -> filesink::Result<FileState> {
        self.model.file_state(c).await
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
