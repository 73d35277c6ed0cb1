//! Retired jobs: finished jobs whose directories are gone, remembered in a few bytes each so
//! that the state of finished jobs does not grow with every run.
//!
//! A cron ingest over a growing directory is a new job whenever it finds new files, and each
//! job leaves a directory of manifests behind. Once such a job has finished and handed every
//! input it read back to the lake's ledger, nothing reads its manifests any more, but its
//! name still matters: a later run under the same name must number its checkpoints after the
//! job's last one (a Delta table's `txn` for the job says which checkpoints are in the log,
//! and a checkpoint numbered again would be taken as already written), and the job's files
//! are still the sink's own for `filesink vacuum` and `filesink ls`. A *retired* job keeps
//! exactly that: the digest of its name, its last checkpoint and whether it wrote into a
//! Delta table.
//!
//! # Layout
//!
//! ```text
//! _filesink/retired/<records, 12 digits>-<uuid>.bin   one segment, written once
//! ```
//!
//! Segments of 21-byte records ([`crate::storage::segments`]): the job name's 96-bit digest
//! (CRC-32C and FNV-1a, big-endian), its last checkpoint (8 bytes, big-endian), its flags
//! (bit 0: a Delta table job).
//!
//! # Retiring a job ([`retire`]), under the job's lease
//!
//! 1. The caller has decided that the job holds nothing: finished, its last checkpoint
//!    committed, every input it read given back (the ledger decides that, see
//!    `ingest::ledger::retire`), and it holds the job's lease, so no run of it is live.
//! 2. Write the record (a segment of every job retired together).
//! 3. Delete the job's manifests, oldest first, then its claims (`owner.lock`, `owners/`),
//!    then its empty directories.
//!
//! # Where a crash lands
//!
//! | the crash comes                            | then                                                             |
//! |--------------------------------------------|------------------------------------------------------------------|
//! | before the record                          | nothing changed                                                  |
//! | after the record, before the latest manifest goes | the job opens from its latest manifest, as before (a record never numbers below it) |
//! | after the latest manifest, before the claims | the job opens as a new job numbered after the record; the next retirement deletes the rest |
//!
//! Manifests go oldest first so that a job either has its latest manifest or none: a run
//! never restores an older checkpoint than the job's last.
//!
//! # Opening a retired job
//!
//! [`Coordinator`](super::Coordinator) opens a job with no manifest as a new job whose first
//! checkpoint follows the record's, and refuses to open a retired table job as a plain one or
//! the other way round, as it refuses a job whose latest manifest says otherwise.

use super::manifest::checkpoint_of;
use crate::protocol::paths::{checkpoints_dir, job_dir, owners_dir, OWNER_LOCK_FILE};
use crate::storage::segments::{self, Kind};
use crate::storage::MetadataStore;
use crate::Result;

/// The directory of the record of retired jobs.
pub const RETIRED_DIR: &str = "_filesink/retired";

const KIND: Kind = Kind {
    dir: RETIRED_DIR,
    magic: b"filesink retired jobs 1\n",
    width: 21,
};

/// Flag bit of a job that wrote into a Delta table.
const TABLE: u8 = 1;

/// What a retired job left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetiredJob {
    /// Its last checkpoint: a run of the job numbers its checkpoints after it.
    pub checkpoint: u64,
    /// Whether it wrote into a Delta table.
    pub table: bool,
}

/// The record of retired jobs, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retired {
    /// By digest, sorted; of a job retired more than once, the latest checkpoint.
    jobs: Vec<(u128, RetiredJob)>,
}

/// The digest of a job's name.
pub fn digest(job: &str) -> u128 {
    segments::digest96(job.as_bytes())
}

impl Retired {
    /// Reads the record (one listing, one read per segment).
    pub async fn load(storage: &dyn MetadataStore) -> Result<Retired> {
        let mut jobs: Vec<(u128, RetiredJob)> = Vec::new();
        for r in KIND.load(storage).await? {
            let mut d = [0u8; 16];
            d[4..].copy_from_slice(&r[..12]);
            let job = RetiredJob {
                checkpoint: u64::from_be_bytes(r[12..20].try_into().expect("8 bytes")),
                table: r[20] & TABLE != 0,
            };
            let digest = u128::from_be_bytes(d);
            // Sorted by digest, then checkpoint: the last of a digest is its latest.
            match jobs.last_mut() {
                Some((last, j)) if *last == digest => *j = job,
                _ => jobs.push((digest, job)),
            }
        }
        Ok(Retired { jobs })
    }

    /// What job `job` left, if it was retired.
    pub fn get(&self, job: &str) -> Option<RetiredJob> {
        self.get_digest(digest(job))
    }

    /// What the job of digest `d` left, if it was retired.
    pub fn get_digest(&self, d: u128) -> Option<RetiredJob> {
        self.jobs
            .binary_search_by_key(&d, |(d, _)| *d)
            .ok()
            .map(|i| self.jobs[i].1)
    }

    /// How many jobs were retired.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The retired jobs that wrote into a Delta table.
    pub fn tables(&self) -> Retired {
        Retired {
            jobs: self.jobs.iter().filter(|(_, j)| j.table).copied().collect(),
        }
    }

    /// How many of them wrote plain files (not into a Delta table).
    pub fn plain(&self) -> usize {
        self.jobs.iter().filter(|(_, j)| !j.table).count()
    }
}

/// Retires `jobs` (name, what it left), whose leases the caller holds: writes their record,
/// then deletes each job's manifests (oldest first), claims and directories.
pub async fn retire(storage: &dyn MetadataStore, jobs: &[(String, RetiredJob)]) -> Result<()> {
    let records = jobs
        .iter()
        .map(|(name, j)| {
            let mut r = digest(name).to_be_bytes()[4..].to_vec();
            r.extend_from_slice(&j.checkpoint.to_be_bytes());
            r.push(if j.table { TABLE } else { 0 });
            r
        })
        .collect();
    KIND.record(storage, records).await?;
    for (name, _) in jobs {
        remove_job_state(storage, name).await?;
    }
    Ok(())
}

/// Deletes a retired job's manifests, oldest first, then its claims, then its directories.
async fn remove_job_state(storage: &dyn MetadataStore, job: &str) -> Result<()> {
    let dir = checkpoints_dir(job);
    let mut manifests: Vec<String> = storage
        .list_metadata(&dir)
        .await?
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.name)
        .collect();
    // Zero-padded ids: byte order is checkpoint order. Anything else there goes first.
    manifests.sort_by_key(|n| (checkpoint_of(n).is_some(), n.clone()));
    for name in manifests {
        storage.delete_metadata(&format!("{dir}/{name}")).await?;
    }
    storage.remove_empty_metadata_dir(&dir).await?;
    let owners = owners_dir(job);
    for e in storage.list_metadata(&owners).await? {
        if !e.is_dir {
            storage
                .delete_metadata(&format!("{owners}/{}", e.name))
                .await?;
        }
    }
    storage.remove_empty_metadata_dir(&owners).await?;
    let dir = job_dir(job);
    storage
        .delete_metadata(&format!("{dir}/{OWNER_LOCK_FILE}"))
        .await?;
    storage.remove_empty_metadata_dir(&dir).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStorage;

    #[tokio::test]
    async fn a_retired_job_is_found_by_its_name_with_its_latest_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        assert!(Retired::load(&storage).await.unwrap().is_empty());
        let j = |checkpoint, table| RetiredJob { checkpoint, table };
        retire(
            &storage,
            &[("a".into(), j(3, false)), ("b".into(), j(7, true))],
        )
        .await
        .unwrap();
        retire(&storage, &[("a".into(), j(5, false))])
            .await
            .unwrap();
        let r = Retired::load(&storage).await.unwrap();
        assert_eq!(r.get("a"), Some(j(5, false)));
        assert_eq!(r.get("b"), Some(j(7, true)));
        assert_eq!(r.get("c"), None);
        assert_eq!((r.len(), r.plain()), (2, 1));
    }

    #[tokio::test]
    async fn retiring_removes_the_jobs_directory_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        for id in 1..=3u64 {
            storage
                .put_metadata(&crate::protocol::paths::manifest_path("a", id), b"{}")
                .await
                .unwrap();
        }
        storage
            .put_metadata(&crate::protocol::paths::manifest_path("b", 1), b"{}")
            .await
            .unwrap();
        std::fs::write(dir.path().join("_filesink/jobs/a/owner.lock"), b"").unwrap();
        let left = RetiredJob {
            checkpoint: 3,
            table: false,
        };
        retire(&storage, &[("a".into(), left)]).await.unwrap();
        assert!(!dir.path().join("_filesink/jobs/a").exists());
        assert!(dir
            .path()
            .join("_filesink/jobs/b/checkpoints/00000000000000000001.json")
            .exists());
        // Retiring again (a crashed retirement finished by the next) finds nothing to delete.
        retire(&storage, &[("a".into(), left)]).await.unwrap();
    }
}
