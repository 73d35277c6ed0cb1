//! Retiring finished ingest jobs: what keeps a cron ingest's finished jobs from piling up.
//!
//! Every cron run that finds new files is a job of its own, named after them, and leaves a
//! directory of manifests. Once the job has finished and given every input back to the ledger
//! (each head of its inputs is a release, or names a later job), the ledger alone says where
//! the lake stands in those inputs; the job's manifests are read by nothing but a run of the
//! same job, which the ledger would hand the inputs to all the same. So [`retire_jobs`]
//! retires it ([`crate::job::retired`]): the job's name, last checkpoint and kind are
//! recorded in a few bytes, its directory deleted.
//!
//! A job is retired when all of this holds:
//!
//! - its latest manifest is an ingest's and says it *finished* (every input read to its end,
//!   the last checkpoint written with the run's end), and was written before the cutoff (the
//!   retention of `filesink vacuum`);
//! - every input is a file or an object, with what the job read of it in its position: a job
//!   of standard input or of a source (a Kafka topic) keeps where it stands in its own
//!   manifests, and is never retired; nor is any job of a lake whose ledger has not imported
//!   what its jobs took before it had one;
//! - no ledger head names it as the holder of an input (a head names a job from when the job
//!   takes the input until its release, written once its last checkpoint is committed: a
//!   job that crashed before that holds its inputs, and is settled by whichever run takes
//!   them next);
//! - no run of it is live: its lease is taken for the retirement, and its latest manifest
//!   read again under it.

use std::collections::HashSet;

use super::super::source::SourcePosition;
use crate::job::manifest;
use crate::job::retired::{self, RetiredJob};
use crate::storage::{LeaseOptions, Storage};
use crate::{Error, Result};

/// Jobs retired at a time: each holds its lease until the batch's record is written.
const BATCH: usize = 256;

/// What retiring finished jobs did (or, on a dry run, would do), as [`super::vacuum`] reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobsRetired {
    /// Finished jobs retired (their directories deleted).
    pub retired: usize,
    /// Finished jobs whose last checkpoint is newer than the cutoff: kept.
    pub kept_for_retention: usize,
}

/// Retires (or, with `dry_run`, counts) every finished ingest job that holds no input
/// (`holders`: the jobs ledger heads name as holders) and whose last checkpoint was written
/// before `cutoff_ms`. A job with a live run is passed over.
pub async fn retire_jobs(
    storage: &dyn Storage,
    holders: &HashSet<String>,
    cutoff_ms: i64,
    dry_run: bool,
) -> Result<JobsRetired> {
    let mut report = JobsRetired::default();
    // A lake whose jobs ran before it had a ledger keeps where they stand in their manifests
    // until the ledger imports it (`import_once`, before its first entry).
    if storage.get_metadata(super::IMPORTED_FILE).await?.is_none() {
        return Ok(report);
    }
    let mut batch = Vec::new();
    for job in manifest::list_jobs(storage).await? {
        if holders.contains(&job) {
            continue;
        }
        let Some(last) = finished_checkpoint(storage, &job).await? else {
            continue;
        };
        if last.1 >= cutoff_ms {
            report.kept_for_retention += 1;
            continue;
        }
        if dry_run {
            report.retired += 1;
            continue;
        }
        let lease = match storage.acquire_job(&job, &LeaseOptions::default()).await {
            Ok(lease) => lease,
            Err(Error::JobBusy { .. }) => continue,
            Err(e) => return Err(e),
        };
        // Under the lease: no run of the job wrote a checkpoint since it was read.
        if finished_checkpoint(storage, &job).await? != Some(last) {
            continue;
        }
        batch.push((job, last.0, lease));
        if batch.len() == BATCH {
            report.retired += retire_batch(storage, std::mem::take(&mut batch)).await?;
        }
    }
    report.retired += retire_batch(storage, batch).await?;
    Ok(report)
}

/// The last checkpoint of `job` (what it left, when it was written) if the job is a finished
/// ingest of files and objects.
async fn finished_checkpoint(
    storage: &dyn Storage,
    job: &str,
) -> Result<Option<(RetiredJob, i64)>> {
    let Some(m) = manifest::latest_manifest(storage, job, None).await? else {
        return Ok(None);
    };
    if !m.finished || crate::maintain::compaction_round(&m).is_some() {
        return Ok(None);
    }
    let Ok(position) = SourcePosition::from_json(job, &m.source_position) else {
        return Ok(None);
    };
    let in_ledger = position.source.is_none()
        && position.read.len() == position.inputs.len()
        && !position.inputs.iter().any(|i| i == "-");
    if !in_ledger {
        return Ok(None);
    }
    let left = RetiredJob {
        checkpoint: m.checkpoint_id,
        table: m.table.is_some(),
    };
    Ok(Some((left, m.created_at_ms)))
}

async fn retire_batch(
    storage: &dyn Storage,
    batch: Vec<(String, RetiredJob, Box<dyn crate::storage::JobLease>)>,
) -> Result<usize> {
    let jobs: Vec<(String, RetiredJob)> = batch.iter().map(|(j, r, _)| (j.clone(), *r)).collect();
    retired::retire(storage, &jobs).await?;
    // The leases go last: the directories are gone, and a run that takes one of these jobs
    // from now on finds it retired.
    drop(batch);
    Ok(jobs.len())
}
