//! Keeping the ledger small: deleting the entries no run reads any more.
//!
//! A run reads one entry of an input, its head (the highest sequence number): the entries
//! below it are the input's history, which nothing reads. [`vacuum`] deletes those that were
//! written before the cutoff (the retention of `filesink vacuum`, a week by default), so the
//! ledger holds about one entry per input the lake took, plus what changed within the
//! retention. A head is never deleted, however old. Deleting races with nothing: a run that
//! takes an input writes the entry above the head it read, and an entry below a head is
//! never a head again. An interrupted vacuum is finished by the next.
//!
//! It then retires the finished jobs that hold no input ([`super::retire`]): the heads it
//! read say which jobs still hold one.

use std::collections::{BTreeMap, HashSet};

use super::retire::{retire_jobs, JobsRetired};
use super::INPUTS_DIR;
use crate::storage::Storage;
use crate::Result;

/// What [`vacuum`] did to the ledger (or, on a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerVacuum {
    /// The inputs the ledger knows: one head each, kept.
    pub inputs: usize,
    /// The entries below a head written before the cutoff: deleted (or, on a dry run, that
    /// would be).
    pub deleted: usize,
    /// The entries below a head written after the cutoff: kept.
    pub kept_for_retention: usize,
    /// The finished jobs retired.
    pub jobs: JobsRetired,
}

/// Deletes (or, with `dry_run`, counts) every ledger entry below its input's head that was
/// written before `cutoff_ms` (milliseconds since the Unix epoch), then retires the finished
/// jobs that hold no input and finished before it. Costs one listing and one read per input
/// the lake took, and one read per job.
pub async fn vacuum(storage: &dyn Storage, cutoff_ms: i64, dry_run: bool) -> Result<LedgerVacuum> {
    let mut report = LedgerVacuum::default();
    let mut holders = HashSet::new();
    for key in storage.list_metadata(INPUTS_DIR).await? {
        if !key.is_dir {
            continue;
        }
        let dir = format!("{INPUTS_DIR}/{}", key.name);
        let mut entries = BTreeMap::new();
        for e in storage.list_metadata(&dir).await? {
            if let Some(seq) = seq_of(&e.name).filter(|_| !e.is_dir) {
                entries.insert(seq, (e.name, e.modified_ms));
            }
        }
        let Some((_, (head, _))) = entries.pop_last() else {
            continue;
        };
        report.inputs += 1;
        let path = format!("{dir}/{head}");
        if let Some(bytes) = storage.get_metadata(&path).await? {
            let entry = super::parse_entry(&path, &bytes)?;
            if !entry.released {
                holders.insert(entry.job);
            }
        }
        for (name, modified_ms) in entries.into_values() {
            if modified_ms >= cutoff_ms {
                report.kept_for_retention += 1;
                continue;
            }
            report.deleted += 1;
            if !dry_run {
                storage.delete_metadata(&format!("{dir}/{name}")).await?;
            }
        }
    }
    report.jobs = retire_jobs(storage, &holders, cutoff_ms, dry_run).await?;
    Ok(report)
}

/// The sequence number of an entry's file name.
pub(super) fn seq_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".json")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LocalStorage, MetadataStore};

    #[tokio::test]
    async fn only_entries_below_a_head_and_past_the_retention_go() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        let put = |key: &str, seq: u64| {
            let path = format!("{INPUTS_DIR}/{key}/{seq:020}.json");
            let entry = serde_json::json!({
                "version": 1, "input": key, "seq": seq, "job": "j", "at_ms": 0,
                "read": {"offset": 0, "line": 1, "crc32c": null}, "released": true,
            });
            let storage = &storage;
            async move {
                let bytes = serde_json::to_vec(&entry).unwrap();
                storage.put_metadata(&path, &bytes).await.unwrap()
            }
        };
        for seq in 1..=4 {
            put("aa", seq).await;
        }
        put("bb", 1).await;
        // A cutoff in the past keeps everything; dry runs delete nothing.
        let past = vacuum(&storage, 0, false).await.unwrap();
        assert_eq!(
            (past.inputs, past.deleted, past.kept_for_retention),
            (2, 0, 3)
        );
        let future = i64::MAX;
        let dry = vacuum(&storage, future, true).await.unwrap();
        assert_eq!((dry.inputs, dry.deleted, dry.kept_for_retention), (2, 3, 0));
        assert_eq!(
            storage
                .list_metadata(&format!("{INPUTS_DIR}/aa"))
                .await
                .unwrap()
                .len(),
            4
        );
        let done = vacuum(&storage, future, false).await.unwrap();
        assert_eq!(done, dry);
        let left: Vec<String> = storage
            .list_metadata(&format!("{INPUTS_DIR}/aa"))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(left, vec![format!("{:020}.json", 4)], "the head stays");
        let again = vacuum(&storage, future, false).await.unwrap();
        assert_eq!((again.inputs, again.deleted), (2, 0));
    }
}
