//! The read model of a lake for operators: its identity, its jobs and their latest manifests,
//! its committed files, its hidden leftovers, which of them a manifest still needs, and which
//! jobs a live run owns. Listing, committing and cleaning up (`filesink ls`, `commit`,
//! `abort`) are built on it; nothing here changes anything except [`Lake::hold_jobs`], which
//! takes jobs' ownership for as long as the caller acts on them.
//!
//! # What may be removed
//!
//! A hidden leftover may be removed ([`may_remove`]) only if all of these hold:
//!
//! 1. it is the sink's own ([`Lake::leftovers`], by [`OwnNames`]): a part name of the exact
//!    shape filesink writes, by a writer of one of the sink's jobs; anything else is foreign,
//!    reported and never removed;
//! 2. no job's latest manifest references it ([`references`]): not a pending file (commit it
//!    instead), not a resumable row file, not an original a resumed file supersedes, not a
//!    small file a pre-commit merge carries;
//! 3. its job is not owned by a live run ([`Lake::hold_jobs`]): a live run's hidden files are
//!    its work in progress;
//! 4. it is at least as old as the caller asks.
//!
//! A writer's own restore ([`crate::Coordinator`]) removes only its writer id's names, by the
//! same name grammar.
//!
//! A temporary file of a metadata write that its process did not finish (local disk only:
//! `.<name>.tmp.<UUIDv7>`, [`crate::protocol::metadata_temp_name`]) holds nothing anyone
//! reads: the write's object exists under its own name or not at all. One may be removed
//! ([`may_remove_temp`]) if its name is exactly of that shape and, in a job's checkpoint
//! directory, the job is held by the caller (no live run can be writing it) and it is as old
//! as the caller asks; anywhere else (`_delta_log/`, the sink's identity), where any run may
//! be writing, it must also be at least [`METADATA_TEMP_AGE_MS_MIN`] old. A job's own run
//! removes those of its checkpoint directory when it starts
//! ([`crate::job::manifest::remove_temps`]).
//!
//! Everything goes through the [`Storage`] trait, so the same code serves every backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::Instrument;

use crate::error::{Error, Result};
use crate::job::manifest::{self, Manifest, SinkIdentity};
use crate::job::retired::Retired;
use crate::job::OwnNames;
use crate::protocol::Committable;
use crate::sink::Sink;
use crate::storage::bounded::try_map;
use crate::storage::{CommitState, JobLease, LeaseOptions, Leftover, Storage, VisibleFile};

/// How many jobs [`Lake::jobs`] and [`Lake::holders`] read at a time: a lake of a thousand
/// jobs on an object store is a few thousand small requests, which one at a time cost a
/// round trip each.
pub const JOB_READS: usize = 16;

/// How old a temporary metadata file outside a job's own directory must be before cleanup
/// removes it (an hour): a metadata write takes milliseconds, so a temporary file this old is
/// no live write's, whichever run made it.
pub const METADATA_TEMP_AGE_MS_MIN: i64 = 60 * 60 * 1000;

/// A temporary file of an unfinished metadata write ([`Lake::metadata_temps`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTemp {
    /// Its path, relative to the base (in `_filesink/` or `_delta_log/`).
    pub path: String,
    /// The job whose checkpoint directory holds it; `None` elsewhere.
    pub job: Option<String>,
    /// Last modification, in ms since the epoch.
    pub modified_ms: i64,
}

/// The rule of the [module doc](self) for a temporary metadata file: whether `temp` may be
/// removed, given the jobs `held` by the caller, at `now_ms`, with the least age `age_ms_min`.
pub fn may_remove_temp(temp: &MetadataTemp, held: &HeldJobs, now_ms: i64, age_ms_min: i64) -> bool {
    let age = now_ms - temp.modified_ms;
    let name = temp.path.rsplit('/').next().unwrap_or_default();
    crate::protocol::is_metadata_temp_name(name)
        && age >= age_ms_min
        && match &temp.job {
            Some(job) => held.holds(job),
            None => age >= METADATA_TEMP_AGE_MS_MIN,
        }
}

/// An existing location, read through its storage: a sink, or a location that is not one
/// (yet).
#[derive(Debug)]
pub struct Lake {
    storage: Arc<dyn Storage>,
    identity: Option<SinkIdentity>,
}

/// One job of a lake.
#[derive(Debug)]
pub struct JobInfo {
    /// The job name.
    pub job: String,
    /// Its manifests: (checkpoint id, modification time in ms since the epoch), ascending.
    pub checkpoints: Vec<(u64, i64)>,
    /// Its latest manifest, or why it cannot be read.
    pub latest: Result<Option<Manifest>>,
}

/// The jobs a caller may act on ([`Lake::hold_jobs`]).
#[derive(Debug, Default)]
pub struct HeldJobs {
    /// Leases the caller holds while it acts (dropping them gives the jobs back).
    pub leases: Vec<Box<dyn JobLease>>,
    /// The jobs the caller holds, those of `leases`; after a dry run, the jobs no live run
    /// holds (which a real run would take).
    pub held: Vec<String>,
    /// Jobs owned by a live run, with who holds them: the caller leaves them alone.
    pub live: Vec<(String, String)>,
}

impl HeldJobs {
    /// Whether `job` is owned by a live run.
    pub fn is_live(&self, job: &str) -> bool {
        self.live.iter().any(|(j, _)| j == job)
    }

    /// Whether the caller holds `job`: it took the job's lease, so no run of it is live.
    pub fn holds(&self, job: &str) -> bool {
        self.held.iter().any(|j| j == job)
    }

    /// The live job whose writers wrote `leftover`, if any.
    pub fn live_job_of(&self, leftover: &Leftover) -> Option<&str> {
        self.live
            .iter()
            .find(|(job, _)| written_by_job(&leftover.final_path, job))
            .map(|(job, _)| job.as_str())
    }

    /// Gives every held job back and waits until another run can take it.
    pub async fn release(self) -> Result<()> {
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

/// The rule of the [module doc](self): whether the sink's own `leftover` may be removed, given
/// the hidden files the latest manifests reference (`refs`), the jobs `held` (with the live
/// ones), and the least age in milliseconds (`age_ms_min`) at `now_ms`.
pub fn may_remove(
    leftover: &Leftover,
    refs: &BTreeMap<String, Reference>,
    held: &HeldJobs,
    now_ms: i64,
    age_ms_min: i64,
) -> bool {
    !refs.contains_key(&leftover.path)
        && now_ms - leftover.modified_ms >= age_ms_min
        && held.live_job_of(leftover).is_none()
}

/// Why a hidden file is still needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// A committable's pending file: committed by a commit or the job's next run.
    Pending,
    /// A row-format file kept open across the checkpoint; the job's next run resumes it.
    Resumable,
    /// An original that a resumed file supersedes; removed once that one is committed.
    Superseded,
    /// A small file a pre-commit merge carries (`WriterState::carried`): its records are in
    /// no committed file yet; the job's next run merges or commits it.
    Carried,
}

impl RefKind {
    /// `pending`, `resumable`, `superseded` or `carried`.
    pub fn name(self) -> &'static str {
        match self {
            RefKind::Pending => "pending",
            RefKind::Resumable => "resumable",
            RefKind::Superseded => "superseded",
            RefKind::Carried => "carried",
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
    /// Reads the location behind `storage`; never creates anything.
    pub async fn open(storage: Arc<dyn Storage>) -> Result<Lake> {
        let identity = manifest::sink_identity(storage.as_ref(), false).await?;
        Ok(Lake { storage, identity })
    }

    /// Its storage.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Its identity; `None` if it is not a filesink output.
    pub fn identity(&self) -> Option<&SinkIdentity> {
        self.identity.as_ref()
    }

    fn sink_id(&self) -> Option<&str> {
        self.identity.as_ref().map(|i| i.sink_id.as_str())
    }

    /// A sink on this lake's storage, for its committer.
    pub fn sink(&self) -> Result<Sink> {
        Sink::builder_shared(self.storage.clone()).build()
    }

    /// The jobs retired from the lake ([`crate::job::retired`]): finished, their directories
    /// gone, their files still the sink's own.
    pub async fn retired(&self) -> Result<Retired> {
        Retired::load(self.storage.as_ref()).await
    }

    /// The names of the jobs that have manifests, sorted; reads no manifest.
    pub async fn job_names(&self) -> Result<Vec<String>> {
        manifest::list_jobs(self.storage.as_ref()).await
    }

    /// Every job with its manifests and latest manifest: one listing of its checkpoints and
    /// one read of its latest manifest per job (never the older ones), [`JOB_READS`] jobs at a
    /// time.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>> {
        let names = self.job_names().await?;
        try_map(names, JOB_READS, |job| async move {
            let checkpoints = manifest::list_checkpoints(self.storage.as_ref(), &job).await?;
            let latest = match checkpoints.last() {
                None => Ok(None),
                Some((id, _)) => {
                    manifest::read_manifest(self.storage.as_ref(), &job, *id, self.sink_id())
                        .await
                        .map(Some)
                }
            };
            Ok(JobInfo {
                job,
                checkpoints,
                latest,
            })
        })
        .await
    }

    /// Who holds each of `jobs` now (`None`: no live run), in order, [`JOB_READS`] jobs at a
    /// time; never takes a job.
    pub async fn holders(&self, jobs: &[String]) -> Result<Vec<Option<String>>> {
        try_map(jobs.iter().collect(), JOB_READS, |job| {
            self.storage.job_holder(job)
        })
        .await
    }

    /// Takes the ownership of each of `jobs` for as long as the caller acts on them, the same
    /// ownership a running [`crate::Coordinator`] holds: a job owned by a live run is listed as
    /// live and must be left alone. A dry run only asks who holds each job.
    pub async fn hold_jobs(&self, jobs: &[String], dry_run: bool) -> Result<HeldJobs> {
        let mut held = HeldJobs::default();
        if dry_run {
            for (job, holder) in jobs.iter().zip(self.holders(jobs).await?) {
                match holder {
                    Some(holder) => held.live.push((job.clone(), holder)),
                    None => held.held.push(job.clone()),
                }
            }
            return Ok(held);
        }
        for job in jobs {
            match self
                .storage
                .acquire_job(job, &LeaseOptions::default())
                .await
            {
                Ok(lease) => {
                    held.leases.push(lease);
                    held.held.push(job.clone());
                }
                Err(Error::JobBusy { reason, .. }) => held.live.push((job.clone(), reason)),
                Err(e) => return Err(e),
            }
        }
        Ok(held)
    }

    /// Reads manifest `id` of `job` (checked against this sink's id).
    pub async fn manifest(&self, job: &str, id: u64) -> Result<Manifest> {
        manifest::read_manifest(self.storage.as_ref(), job, id, self.sink_id()).await
    }

    /// The hidden part files under the base, sorted by path, split into this sink's own and
    /// foreign ones ([`OwnNames`]), which are reported and never removed. Its own are of
    /// writers of `jobs`, with the default prefix and a default suffix, or a prefix and suffix
    /// that a latest manifest of `jobs` shows.
    pub async fn leftovers(&self, jobs: &[JobInfo]) -> Result<(Vec<Leftover>, Vec<Leftover>)> {
        let mut l = self.storage.list_leftovers().await?;
        l.sort_by(|a, b| a.path.cmp(&b.path));
        let own = own_names(jobs);
        Ok(l.into_iter().partition(|l| own.owns(l)))
    }

    /// Removes a leftover that [`may_remove`] allows (the caller holds its job, see
    /// [`Lake::hold_jobs`]): a hidden file, or on S3 an incomplete multipart upload. Counted in
    /// [`crate::protocol::metric::LEFTOVERS_REMOVED`]; the backend refuses any name that is
    /// not one of filesink's hidden names.
    pub async fn remove_leftover(&self, leftover: &Leftover) -> Result<()> {
        self.storage
            .remove_leftover(&leftover.path)
            .instrument(tracing::debug_span!(
                "cleanup",
                file = %leftover.path,
                bytes = leftover.size_bytes,
            ))
            .await?;
        tracing::info!(file = %leftover.path, bytes = leftover.size_bytes, "leftover removed");
        metrics::counter!(crate::protocol::metric::LEFTOVERS_REMOVED).increment(1);
        Ok(())
    }

    /// The temporary files of unfinished metadata writes in the sink's metadata directories
    /// (`_filesink/`, each of `jobs`' checkpoint directory, `_delta_log/`), sorted by path;
    /// none, without a listing, on a backend whose writes leave none
    /// ([`Storage::leaves_metadata_temps`](crate::storage::MetadataStore::leaves_metadata_temps)).
    pub async fn metadata_temps(&self, jobs: &[JobInfo]) -> Result<Vec<MetadataTemp>> {
        let mut dirs: Vec<(String, Option<String>)> = vec![
            (manifest::METADATA_DIR.to_string(), None),
            (crate::protocol::DELTA_LOG_DIR.to_string(), None),
        ];
        for j in jobs {
            dirs.push((manifest::checkpoints_dir(&j.job), Some(j.job.clone())));
        }
        let found = try_map(dirs, JOB_READS, |(dir, job)| async move {
            let entries = manifest::list_temps(self.storage.as_ref(), &dir).await?;
            Ok::<_, Error>(
                entries
                    .into_iter()
                    .map(|e| MetadataTemp {
                        path: format!("{dir}/{}", e.name),
                        job: job.clone(),
                        modified_ms: e.modified_ms,
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await?;
        let mut temps: Vec<MetadataTemp> = found.into_iter().flatten().collect();
        temps.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(temps)
    }

    /// Removes a temporary metadata file that [`may_remove_temp`] allows.
    pub async fn remove_metadata_temp(&self, temp: &MetadataTemp) -> Result<()> {
        let name = temp.path.rsplit('/').next().unwrap_or_default();
        if !crate::protocol::is_metadata_temp_name(name) {
            return Err(Error::InvalidInput(format!(
                "`{}` is not a temporary metadata file of the shape filesink writes",
                temp.path
            )));
        }
        self.storage.delete_metadata(&temp.path).await?;
        tracing::info!(file = %temp.path, "temporary metadata file removed");
        Ok(())
    }

    /// The visible data files (every name readers see), with their sizes.
    pub async fn visible(&self) -> Result<Vec<VisibleFile>> {
        self.storage.list_visible().await
    }

    /// Where `c`'s file is now, with the backend's proof for "visible" (size and CRC-32C
    /// locally, the multipart ETag on S3): the dry run of a commit.
    pub async fn file_state(&self, c: &Committable) -> Result<FileState> {
        self.storage.probe(c).await.map(FileState::from)
    }
}

/// The names that are the sink's own ([`OwnNames`]): of writers of `jobs`, with the default
/// prefix and a default suffix, or a prefix and suffix that a latest manifest of `jobs` shows.
pub fn own_names(jobs: &[JobInfo]) -> OwnNames {
    let mut own = OwnNames::of_jobs(jobs.iter().map(|j| j.job.clone()).collect());
    for m in jobs
        .iter()
        .filter_map(|j| j.latest.as_ref().ok().and_then(Option::as_ref))
    {
        m.final_paths().for_each(|f| own.learn(f));
    }
    own
}

/// Splits a listing of the visible files into the sink's own (part names of its jobs'
/// writers, [`OwnNames::owns_final`]) and the others: files another tool, a person or a job
/// of another sink put there, which the sink never wrote, never removes, and does not count
/// as its output.
pub fn own_visible(
    visible: Vec<VisibleFile>,
    own: &OwnNames,
) -> (Vec<VisibleFile>, Vec<VisibleFile>) {
    visible.into_iter().partition(|f| own.owns_final(&f.path))
}

/// Committed files per partition directory (`""` is the base) of a listing of the visible
/// files.
pub fn committed(visible: &[VisibleFile]) -> BTreeMap<String, Partition> {
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
            for f in &w.carried {
                refs.insert(f.in_progress_path.clone(), r(RefKind::Carried));
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
    use super::*;

    #[test]
    fn only_an_unreferenced_leftover_of_a_dead_job_old_enough_may_be_removed() {
        let leftover = |job: &str, modified_ms| Leftover {
            name: None,
            path: format!("day=1/.part-{job}_0-x-0.parquet.inprogress.y"),
            final_path: format!("day=1/part-{job}_0-x-0.parquet"),
            size_bytes: 1,
            modified_ms,
        };
        let mut refs = BTreeMap::new();
        let needed = leftover("needed", 0);
        refs.insert(
            needed.path.clone(),
            Reference {
                job: "needed".into(),
                checkpoint_id: 3,
                kind: RefKind::Pending,
            },
        );
        let held = HeldJobs {
            leases: Vec::new(),
            live: vec![("live".into(), "pid 1".into())],
            held: vec!["dead".into()],
        };
        let now = 10_000;
        assert!(may_remove(&leftover("dead", 0), &refs, &held, now, 5_000));
        assert!(!may_remove(&needed, &refs, &held, now, 0), "referenced");
        assert!(
            !may_remove(&leftover("live", 0), &refs, &held, now, 0),
            "live job"
        );
        assert!(
            !may_remove(&leftover("dead", 6_000), &refs, &held, now, 5_000),
            "too young"
        );
        assert_eq!(held.live_job_of(&leftover("live", 0)), Some("live"));
        assert_eq!(held.live_job_of(&leftover("liver", 0)), None);
    }

    /// A temporary metadata file goes only if its name is exactly of the shape filesink writes,
    /// it is as old as asked, and either its job is held or, outside a job's directory, it is
    /// an hour old; never a live job's, never another name.
    #[test]
    fn a_temporary_metadata_file_is_removed_only_by_the_rule() {
        let held = HeldJobs {
            leases: Vec::new(),
            live: vec![("live".into(), "pid 1".into())],
            held: vec!["dead".into()],
        };
        let name = crate::protocol::metadata_temp_name("00000000000000000007.json");
        let temp = |dir: &str, job: Option<&str>, modified_ms: i64| MetadataTemp {
            path: format!("{dir}/{name}"),
            job: job.map(str::to_string),
            modified_ms,
        };
        let hour = METADATA_TEMP_AGE_MS_MIN;
        let now = 10 * hour;
        let dead = temp("_filesink/jobs/dead/checkpoints", Some("dead"), now);
        assert!(
            may_remove_temp(&dead, &held, now, 0),
            "a held job's, at once"
        );
        assert!(!may_remove_temp(&dead, &held, now, 1), "younger than asked");
        let live = temp("_filesink/jobs/live/checkpoints", Some("live"), 0);
        assert!(!may_remove_temp(&live, &held, now, 0), "a live job's");
        let other = temp("_filesink/jobs/other/checkpoints", Some("other"), 0);
        assert!(!may_remove_temp(&other, &held, now, 0), "a job not held");
        let log = temp("_delta_log", None, now - hour + 1);
        assert!(
            !may_remove_temp(&log, &held, now, 0),
            "the log's, under an hour"
        );
        let log = temp("_delta_log", None, now - hour);
        assert!(
            may_remove_temp(&log, &held, now, 0),
            "the log's, an hour old"
        );
        let mut spark = log.clone();
        spark.path = "_delta_log/.00000000000000000007.json.1b9e5c2a.tmp".into();
        assert!(
            !may_remove_temp(&spark, &held, now, 0),
            "another writer's name"
        );

        assert!(crate::protocol::is_metadata_temp_name(&name));
        let id = uuid::Uuid::now_v7().simple().to_string();
        let v4 = format!("{}4{}", &id[..12], &id[13..]);
        for bad in [
            format!("x.json.tmp.{id}"),
            format!("..tmp.{id}"),
            format!(".x.json.tmp.{}", &id[..31]),
            format!(".x.json.tmp.{}", id.to_uppercase()),
            format!(".x.json.tmp.{v4}"),
            format!(".x.json.inprogress.{id}"),
            ".x.json.tmp.".to_string(),
        ] {
            assert!(!crate::protocol::is_metadata_temp_name(&bad), "{bad}");
        }
    }

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
