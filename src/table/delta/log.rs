//! Reading a Delta log: the [`Snapshot`] a writer needs, and keeping it current (design
//! section 5).
//!
//! A snapshot is what a writer must know of a table, nothing more: `protocol` and `metaData`
//! (every check of section 12 and the schema), the `txn` of every application (exactly once),
//! the live `add`s and the tombstones (compaction, vacuum, log checkpoints), and the
//! `domainMetadata` (carried into our checkpoints).
//!
//! **Finding the latest version without reading the whole log** (§Last Checkpoint File):
//!
//! 1. `_delta_log/_last_checkpoint` names the newest checkpoint `c`. Missing or unreadable
//!    (or naming a checkpoint that is not there): one listing of `_delta_log/`, the only full
//!    listing, finds the newest complete checkpoint and the versions after it.
//! 2. The checkpoint at `c` (one file, or every part of a multi-part checkpoint).
//! 3. The tail: `c+1.json`, `c+2.json`, … one GET each until one is absent. After
//!    [`TAIL_GETS_MAX`] GETs in a row the pointer is stale (a writer that does not checkpoint),
//!    and the rest is listed from there instead.
//!
//! A refresh ([`Snapshot::refresh`]) repeats step 3 from the snapshot's version: all a commit
//! reads. Log compaction files and `.crc` files are optional for readers and ignored;
//! temporary files (names starting with `.`) are never listed.

use std::collections::HashMap;
use std::sync::Arc;

use super::actions::{Add, DomainMetadata, Entry, Metadata, Protocol, Remove, Txn};
use super::checkpoint::{self, LastCheckpoint, LogFile};
use crate::storage::Storage;
use crate::{Error, Result};

/// The log directory of a table, relative to the table root (the sink base).
pub(crate) const LOG_DIR: &str = "_delta_log";

/// The pointer to the newest checkpoint (§Last Checkpoint File).
pub(crate) const LAST_CHECKPOINT: &str = "_delta_log/_last_checkpoint";

/// GETs of consecutive versions after which the rest of the tail is listed instead.
pub(crate) const TAIL_GETS_MAX: usize = 64;

/// The path of the log entry of `version`.
pub(crate) fn entry_path(version: i64) -> String {
    format!("{LOG_DIR}/{}", checkpoint::commit_file_name(version))
}

/// The state of a table at one version, as a writer needs it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// The version read last; `None` while the table has no entry at all.
    pub(crate) version: Option<i64>,
    /// The table's `protocol`.
    pub(crate) protocol: Option<Protocol>,
    /// The table's `metaData`.
    pub(crate) metadata: Option<Metadata>,
    /// `txn` by appId.
    pub(crate) txns: HashMap<String, Txn>,
    /// Live files by `path` as written in the log. Shared, so that the copy a log checkpoint
    /// takes at its version costs nothing on the commit path: the map is copied only if an
    /// entry is applied while a checkpoint still holds it.
    pub(crate) adds: Arc<HashMap<String, Add>>,
    /// Tombstones by `path` (shared likewise).
    pub(crate) removes: Arc<HashMap<String, Remove>>,
    /// Domain metadata by domain (removed domains are dropped).
    pub(crate) domain_metadata: HashMap<String, DomainMetadata>,
    /// `commitInfo.inCommitTimestamp` of the latest version, when it has one.
    pub(crate) in_commit_timestamp: Option<i64>,
    /// GET/list calls the last load or refresh made (tests check that restore stays cheap).
    pub(crate) reads: usize,
    /// Whether a `protocol` or `metaData` was applied that the writer has not checked yet
    /// (set by [`Snapshot::apply`], cleared by the writer after its check succeeds): a refresh
    /// that fails halfway, or a check that refuses, must not let a later commit skip it.
    pub(crate) unchecked: bool,
}

impl Snapshot {
    /// Loads the latest snapshot of the table whose log is under `storage`'s base: an empty
    /// snapshot (`version` `None`) when the table has no log entry yet.
    ///
    /// Errors: [`Error::Corrupt`] naming the file for an entry or checkpoint that does not
    /// parse, a log with a gap between versions, or a log whose first entry after the newest
    /// checkpoint is missing (versions expired without a checkpoint to start from); storage
    /// errors as they come.
    pub(crate) async fn load(storage: &dyn Storage) -> Result<Snapshot> {
        let mut snapshot = Snapshot::default();
        let pointer = match storage.get_metadata(LAST_CHECKPOINT).await? {
            // An unreadable pointer only costs a listing (§Last Checkpoint File).
            Some(bytes) => LastCheckpoint::parse(&bytes, LAST_CHECKPOINT).ok(),
            None => None,
        };
        snapshot.reads += 1;
        if let Some(pointer) = pointer {
            if snapshot
                .read_checkpoint(storage, pointer.version, pointer.parts)
                .await?
            {
                let tail = snapshot.read_tail(storage).await?;
                // The tail ends at the first absent version. A stale pointer whose next entry
                // expired (log cleanup by another engine) would end it early, below newer
                // checkpoints and entries: one listing tells, and then the listing decides.
                let at = snapshot.version.unwrap_or(0);
                snapshot.reads += 1;
                let newer = storage
                    .list_metadata_from(LOG_DIR, &checkpoint::commit_file_name(at))
                    .await?
                    .iter()
                    .any(|e| match checkpoint::parse_log_file_name(&e.name) {
                        Some(LogFile::Commit(v)) => v > at,
                        Some(LogFile::Checkpoint { version, .. }) => version > at,
                        _ => false,
                    });
                if !newer {
                    if tail.is_empty() {
                        snapshot.read_commit_timestamp(storage, at).await?;
                    }
                    return Ok(snapshot);
                }
            }
            snapshot = Snapshot {
                reads: snapshot.reads,
                ..Snapshot::default()
            };
        }
        snapshot.load_by_listing(storage).await?;
        Ok(snapshot)
    }

    /// Reads the checkpoint `pointer` names into this (empty) snapshot. `Ok(false)` when a
    /// file of it is missing: the caller falls back to a listing.
    async fn read_checkpoint(
        &mut self,
        storage: &dyn Storage,
        version: i64,
        parts: Option<i64>,
    ) -> Result<bool> {
        let names: Vec<String> = match parts.and_then(|n| i32::try_from(n).ok()) {
            Some(n) if n >= 1 => (1..=n)
                .map(|i| checkpoint::checkpoint_part_file_name(version, i, n))
                .collect(),
            _ => vec![checkpoint::checkpoint_file_name(version)],
        };
        let mut parts = Vec::with_capacity(names.len());
        for name in &names {
            let path = format!("{LOG_DIR}/{name}");
            self.reads += 1;
            match storage.get_metadata(&path).await? {
                Some(bytes) => parts.push(bytes::Bytes::from(bytes)),
                None => return Ok(false),
            }
        }
        let what = format!("{LOG_DIR}/{}", names[0]);
        let entry = checkpoint::read_checkpoint(&parts, &what)?;
        self.apply(version, entry, &what)?;
        Ok(true)
    }

    /// Finds the newest complete checkpoint and the entries after it by listing `_delta_log/`
    /// once, and reads them.
    async fn load_by_listing(&mut self, storage: &dyn Storage) -> Result<()> {
        self.reads += 1;
        let listing = storage.list_metadata_from(LOG_DIR, "").await?;
        let mut commits = Vec::new();
        // version → (parts declared, part numbers seen) of each checkpoint
        let mut checkpoints: HashMap<i64, (Option<i32>, Vec<i32>)> = HashMap::new();
        for entry in listing.iter().filter(|e| !e.is_dir) {
            match checkpoint::parse_log_file_name(&entry.name) {
                Some(LogFile::Commit(v)) => commits.push(v),
                Some(LogFile::Checkpoint { version, part }) => {
                    let c = checkpoints.entry(version).or_default();
                    match part {
                        None => c.0 = None,
                        Some((i, n)) => {
                            c.0 = Some(n);
                            c.1.push(i);
                        }
                    }
                }
                _ => {}
            }
        }
        commits.sort_unstable();
        let mut complete: Vec<(i64, Option<i32>)> = checkpoints
            .into_iter()
            .filter(|(_, (parts, seen))| match parts {
                None => true,
                Some(n) => (1..=*n).all(|i| seen.contains(&i)),
            })
            .map(|(v, (parts, _))| (v, parts))
            .collect();
        complete.sort_unstable();
        let mut start = 0;
        while let Some((version, parts)) = complete.pop() {
            if self
                .read_checkpoint(storage, version, parts.map(i64::from))
                .await?
            {
                start = version + 1;
                break;
            }
        }
        let tail: Vec<i64> = commits.into_iter().filter(|v| *v >= start).collect();
        if self.version.is_none() && tail.first().is_some_and(|v| *v != 0) {
            return Err(Error::corrupt(
                format!("{LOG_DIR}/"),
                format!(
                    "the log starts at version {} and has no checkpoint to start from",
                    tail[0]
                ),
            ));
        }
        self.read_versions(storage, &tail).await.map(drop)
    }

    /// Reads the listed versions `versions` (ascending) that follow the snapshot's version,
    /// which must follow it without a gap; returns them in order.
    async fn read_versions(
        &mut self,
        storage: &dyn Storage,
        versions: &[i64],
    ) -> Result<Vec<(i64, Entry)>> {
        let mut read = Vec::new();
        for &v in versions {
            let expected = self.version.map_or(0, |c| c + 1);
            if v < expected {
                continue;
            }
            if v > expected {
                return Err(Error::corrupt(
                    format!("{LOG_DIR}/"),
                    format!("version {expected} is missing before version {v}"),
                ));
            }
            let entry = self
                .read_version(storage, v)
                .await?
                .ok_or_else(|| Error::corrupt(entry_path(v), "it was listed but cannot be read"))?;
            read.push((v, entry));
        }
        Ok(read)
    }

    /// Reads version `v` and applies it; `None` if it does not exist.
    async fn read_version(&mut self, storage: &dyn Storage, v: i64) -> Result<Option<Entry>> {
        let path = entry_path(v);
        self.reads += 1;
        let Some(bytes) = storage.get_metadata(&path).await? else {
            return Ok(None);
        };
        let entry = Entry::parse(&bytes, &path)?;
        self.apply(v, entry.clone(), &path)?;
        Ok(Some(entry))
    }

    /// Reads the entries after the snapshot's version: one GET each until one is absent, and
    /// after [`TAIL_GETS_MAX`] in a row a listing of the rest. Returns the entries read, in
    /// order, so the commit loop can check each for conflicts.
    async fn read_tail(&mut self, storage: &dyn Storage) -> Result<Vec<(i64, Entry)>> {
        let mut read = Vec::new();
        for _ in 0..TAIL_GETS_MAX {
            let v = self.version.map_or(0, |c| c + 1);
            match self.read_version(storage, v).await? {
                Some(entry) => read.push((v, entry)),
                None => return Ok(read),
            }
        }
        // A long tail: list the rest from here instead of one GET per version.
        let after = self
            .version
            .map_or_else(String::new, |v| format!("{v:020}.json"));
        self.reads += 1;
        let listing = storage.list_metadata_from(LOG_DIR, &after).await?;
        let mut versions: Vec<i64> = listing
            .iter()
            .filter_map(|e| match checkpoint::parse_log_file_name(&e.name) {
                Some(LogFile::Commit(v)) if !e.is_dir => Some(v),
                _ => None,
            })
            .collect();
        versions.sort_unstable();
        read.extend(self.read_versions(storage, &versions).await?);
        Ok(read)
    }

    /// After a load from checkpoint `c` with no entry after it: the In-Commit Timestamp of
    /// version `c` (checkpoints carry no `commitInfo`), when the table uses them, so the next
    /// entry's timestamp stays after it.
    async fn read_commit_timestamp(&mut self, storage: &dyn Storage, c: i64) -> Result<()> {
        let enabled = self.metadata.as_ref().is_some_and(|m| {
            m.configuration
                .get("delta.enableInCommitTimestamps")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        });
        if !enabled {
            return Ok(());
        }
        let path = entry_path(c);
        self.reads += 1;
        if let Some(bytes) = storage.get_metadata(&path).await? {
            let entry = Entry::parse(&bytes, &path)?;
            self.in_commit_timestamp = entry.commit_info.and_then(|c| c.in_commit_timestamp);
        }
        Ok(())
    }

    /// Brings the snapshot to the latest version; returns the entries that were new, in
    /// version order.
    pub(crate) async fn refresh(&mut self, storage: &dyn Storage) -> Result<Vec<(i64, Entry)>> {
        self.reads = 0;
        self.read_tail(storage).await
    }

    /// Applies `entry` as version `v` (an entry read from the log, a checkpoint, or our own
    /// entry after its put succeeded). `what` names it in errors.
    pub(crate) fn apply(&mut self, v: i64, entry: Entry, what: &str) -> Result<()> {
        let Entry {
            commit_info,
            protocol,
            metadata,
            txns,
            domain_metadata,
            removes,
            adds,
            other: _,
        } = entry;
        if self.version.is_none() && v == 0 && (protocol.is_none() || metadata.is_none()) {
            return Err(Error::corrupt(
                what,
                "version 0 of a table must hold its `protocol` and `metaData`",
            ));
        }
        if let Some(p) = protocol {
            self.protocol = Some(p);
            self.unchecked = true;
        }
        if let Some(m) = metadata {
            self.metadata = Some(m);
            self.unchecked = true;
        }
        for t in txns {
            self.txns.insert(t.app_id.clone(), t);
        }
        for d in domain_metadata {
            if d.removed {
                self.domain_metadata.remove(&d.domain);
            } else {
                self.domain_metadata.insert(d.domain.clone(), d);
            }
        }
        if !removes.is_empty() || !adds.is_empty() {
            let (live, tombstones) = (
                Arc::make_mut(&mut self.adds),
                Arc::make_mut(&mut self.removes),
            );
            for r in removes {
                live.remove(&r.path);
                tombstones.insert(r.path.clone(), r);
            }
            for a in adds {
                tombstones.remove(&a.path);
                live.insert(a.path.clone(), a);
            }
        }
        self.in_commit_timestamp = commit_info.and_then(|c| c.in_commit_timestamp);
        self.version = Some(v);
        Ok(())
    }

    /// The latest `txn` version of `app_id`, if the table has one.
    pub(crate) fn txn_version(&self, app_id: &str) -> Option<i64> {
        self.txns.get(app_id).map(|t| t.version)
    }

    /// Whether the table exists (has at least version 0).
    pub(crate) fn exists(&self) -> bool {
        self.version.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LocalStorage, MetadataStore};

    fn entry(lines: &str) -> Vec<u8> {
        lines.as_bytes().to_vec()
    }

    const V0: &str = r#"{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"t","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":1}}
{"txn":{"appId":"a","version":1,"lastUpdated":1}}
{"add":{"path":"p0.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}
"#;

    fn add(v: i64, path: &str) -> String {
        format!(
            "{{\"txn\":{{\"appId\":\"a\",\"version\":{},\"lastUpdated\":1}}}}\n\
             {{\"add\":{{\"path\":\"{path}\",\"partitionValues\":{{}},\"size\":1,\"modificationTime\":1,\"dataChange\":true}}}}\n",
            v + 1
        )
    }

    async fn table(versions: i64) -> (tempfile::TempDir, LocalStorage) {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        storage
            .put_metadata(&entry_path(0), &entry(V0))
            .await
            .unwrap();
        for v in 1..versions {
            storage
                .put_metadata(&entry_path(v), add(v, &format!("p{v}.parquet")).as_bytes())
                .await
                .unwrap();
        }
        (dir, storage)
    }

    #[tokio::test]
    async fn an_empty_log_is_no_table() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        let s = Snapshot::load(&storage).await.unwrap();
        assert!(!s.exists());
        assert_eq!(s.txn_version("a"), None);
    }

    #[tokio::test]
    async fn loads_every_version_and_refreshes_the_new_ones() {
        let (_dir, storage) = table(5).await;
        let mut s = Snapshot::load(&storage).await.unwrap();
        assert_eq!(s.version, Some(4));
        assert_eq!(s.txn_version("a"), Some(5));
        assert_eq!(s.adds.len(), 5);
        assert!(s.refresh(&storage).await.unwrap().is_empty());
        storage
            .put_metadata(&entry_path(5), add(5, "p5.parquet").as_bytes())
            .await
            .unwrap();
        let new = s.refresh(&storage).await.unwrap();
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].0, 5);
        assert_eq!(s.txn_version("a"), Some(6));
        assert_eq!(
            s.reads, 2,
            "one GET for the new version, one for the absent next"
        );
    }

    #[tokio::test]
    async fn a_long_tail_is_listed_after_the_gets() {
        let n = TAIL_GETS_MAX as i64 + 30;
        let (_dir, storage) = table(n).await;
        let s = Snapshot::load(&storage).await.unwrap();
        assert_eq!(s.version, Some(n - 1));
        assert_eq!(s.adds.len() as i64, n);
        let mut s = Snapshot::default();
        s.apply(0, Entry::parse(V0.as_bytes(), "v0").unwrap(), "v0")
            .unwrap();
        let read = s.refresh(&storage).await.unwrap();
        assert_eq!(read.len() as i64, n - 1);
        assert_eq!(s.version, Some(n - 1));
    }

    #[tokio::test]
    async fn a_gap_in_the_log_is_corrupt() {
        let (_dir, storage) = table(3).await;
        storage
            .put_metadata(&entry_path(4), add(4, "p4.parquet").as_bytes())
            .await
            .unwrap();
        storage.delete_metadata(&entry_path(0)).await.unwrap();
        let err = Snapshot::load(&storage).await.unwrap_err();
        assert!(err.to_string().contains("starts at version 1"), "{err}");
    }

    #[tokio::test]
    async fn removes_take_files_out_and_remember_the_tombstone() {
        let (_dir, storage) = table(2).await;
        storage
            .put_metadata(
                &entry_path(2),
                br#"{"remove":{"path":"p0.parquet","deletionTimestamp":5,"dataChange":false}}
{"add":{"path":"big.parquet","partitionValues":{},"size":2,"modificationTime":1,"dataChange":false}}
"#,
            )
            .await
            .unwrap();
        let s = Snapshot::load(&storage).await.unwrap();
        assert!(!s.adds.contains_key("p0.parquet"));
        assert!(s.adds.contains_key("big.parquet"));
        assert!(s.removes.contains_key("p0.parquet"));
    }

    #[tokio::test]
    async fn a_version_0_without_protocol_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        storage
            .put_metadata(&entry_path(0), add(0, "x.parquet").as_bytes())
            .await
            .unwrap();
        let err = Snapshot::load(&storage).await.unwrap_err();
        assert!(err.to_string().contains("protocol"), "{err}");
    }
}
