//! Object stores through `object_store`: S3-compatible stores by multipart upload, any other
//! backend by a hidden staging object.
//!
//! # S3: one multipart upload per part file
//!
//! Rename does not exist on S3 (a copy is O(size) and capped at 5 GiB), so the commit
//! primitive changes while the protocol stays:
//!
//! | protocol step | S3 call |
//! |---|---|
//! | create an in-progress file | CreateMultipartUpload to the **final key** (invisible until completed) |
//! | write | buffered; every `part_size_bytes` an UploadPart, a bounded number in flight |
//! | seal (the vote) | the rest as the last part; wait for every part; the handle records the upload id and every part's ETag. Up to 32 files at once |
//! | commit | CompleteMultipartUpload: zero copy |
//! | cleanup | AbortMultipartUpload of uploads under the prefix no checkpoint references |
//!
//! **Already committed, proven.** A repeated CompleteMultipartUpload is not reliable across S3
//! clones (Garage answers `404 NoSuchUpload`, Ceph `200` again as if it had just completed). So
//! the committer HEADs the key before completing, and again on any ambiguous answer: size equal
//! and ETag equal to the multipart ETag computed from the recorded part ETags
//! (`md5(concat(md5(part)))-N`) means already committed; a missing object means data lost;
//! another object means a conflict. Never success without that proof. (Buckets with
//! SSE-KMS have ETags that are not MD5s: there the proof fails, loudly.)
//!
//! **No conditional writes assumed.** Garage ignores `If-None-Match: *`, so uniqueness comes
//! from names: every final key carries the writer incarnation's UUID. Where a probe shows the
//! store honours conditional puts (AWS), manifests are written with them
//! ([`ObjectStorage::capabilities`]). Elsewhere a manifest is checked for before and read back
//! after its put, which narrows a race between two coordinators but cannot decide it (each
//! can read back its own bytes before the other's put lands): there the job's claim
//! ([`super::ownership`]) is what keeps a second run out.
//!
//! **Row files do not stay open** across checkpoints on S3 ([`Storage::can_resume`](crate::storage::Parts::can_resume) is false):
//! every part file rolls at every checkpoint.
//!
//! # Other stores: staging object + copy-if-not-exists
//!
//! The whole part file is buffered and PUT as a hidden staging object
//! `.<final>.inprogress.<id>` at the vote; commit is `copy_if_not_exists` to the final key and
//! a delete of the staging object. A store that cannot copy without replacing answers
//! [`Error::NotSupported`]; there is no weaker fallback. Already committed is proven by
//! reading the final object back (size and CRC-32C). What it does not give: the file is held in
//! memory until the vote, and a commit costs a copy.
//!
//! # Where each part is
//!
//! - `s3.rs`: opening an S3-compatible store (`s3` feature);
//! - `multipart.rs`: the multipart commit and its ETag proof;
//! - `staged.rs`: the staged commit of other stores;
//! - `part.rs`: the in-progress part file (multipart parts or one staging object);
//! - `probe.rs`: the capability probe;
//! - `listing.rs`: leftovers, visible files, metadata, other sinks' bases.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tokio::task::JoinSet;

#[cfg(feature = "s3")]
use super::sigv4::BucketClient;
use super::{
    validate_hidden_part_path, validate_list_start, validate_replaceable_path, CommitState, Leases,
    Leftover, Listing, MetadataEntry, MetadataStore, OtherSinks, PartLocation, PartWriter, Parts,
    Storage, VisibleFile,
};
use crate::protocol::{
    parse_hidden_name, split_rel, validate_final_part_path, validate_metadata_dir,
    validate_metadata_path, validate_rel_path, validate_visible_path, CommitOutcome, Committable,
    PendingHandle,
};
use crate::{Error, Result};
#[cfg(not(feature = "s3"))]
use no_s3::BucketClient;
use part::ObjectPart;

mod listing;
mod multipart;
mod part;
mod probe;
#[cfg(feature = "s3")]
mod s3;
mod staged;

/// Files sealed at once by [`ObjectStorage`]'s `seal` (each with up to
/// [`ObjectStorage::DEFAULT_UPLOADS_IN_FLIGHT_MAX`] part uploads of its own).
const SEAL_IN_FLIGHT_MAX: usize = 32;

/// What a probe found out about the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S3Capabilities {
    /// Whether a PUT with `If-None-Match: *` refuses to replace an existing object.
    pub conditional_put: bool,
    /// Whether the bucket has a lifecycle rule that aborts incomplete multipart uploads;
    /// `None` if the store would not say.
    pub aborts_incomplete_uploads: Option<bool>,
}

/// A sink's files on an object store: S3-compatible (multipart commit) or any other
/// `object_store` backend (staged commit). See the module documentation for what each
/// guarantees.
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    inner: Arc<Inner>,
}

/// The longest key S3 takes, in bytes of UTF-8.
const S3_KEY_BYTES_MAX: usize = 1024;

struct Inner {
    url: String,
    store: Arc<dyn ObjectStore>,
    multipart: Option<Arc<dyn MultipartStore>>,
    bucket: Option<BucketClient>,
    prefix: String,
    part_size_bytes: usize,
    uploads_in_flight_max: usize,
    conditional_put: tokio::sync::OnceCell<bool>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("url", &self.url)
            .field("multipart", &self.multipart.is_some())
            .field("part_size_bytes", &self.part_size_bytes)
            .finish()
    }
}

impl ObjectStorage {
    /// Default size of every multipart part but the last: 8 MiB.
    pub const DEFAULT_PART_SIZE_BYTES: usize = 8 * 1024 * 1024;
    /// S3's smallest part (all but the last).
    pub const MIN_PART_SIZE_BYTES: usize = 5 * 1024 * 1024;
    /// Default number of part uploads in flight per file.
    pub const DEFAULT_UPLOADS_IN_FLIGHT_MAX: usize = 4;

    /// Any `object_store` backend (in-memory, GCS, Azure, HTTP...), by staging object and
    /// copy-if-not-exists, under `prefix`. `name` is used in messages.
    pub fn generic(store: Arc<dyn ObjectStore>, prefix: &str, name: &str) -> Result<Self> {
        let prefix = prefix.trim_matches('/').to_string();
        if !prefix.is_empty() {
            validate_rel_path(&prefix).map_err(Error::Config)?;
        }
        Ok(ObjectStorage {
            inner: Arc::new(Inner {
                url: name.to_string(),
                store,
                multipart: None,
                bucket: None,
                prefix,
                part_size_bytes: Self::DEFAULT_PART_SIZE_BYTES,
                uploads_in_flight_max: 1,
                conditional_put: tokio::sync::OnceCell::new(),
            }),
        })
    }

    /// Sets the size of every multipart part but the last (at least 5 MiB, S3's minimum).
    pub fn with_part_size_bytes(self, bytes: usize) -> Result<Self> {
        if bytes < Self::MIN_PART_SIZE_BYTES {
            return Err(Error::Config(format!(
                "part size {bytes} is below S3's minimum of {} bytes",
                Self::MIN_PART_SIZE_BYTES
            )));
        }
        let mut inner =
            Arc::try_unwrap(self.inner).unwrap_or_else(|arc| arc.as_ref().clone_config());
        inner.part_size_bytes = bytes;
        Ok(ObjectStorage {
            inner: Arc::new(inner),
        })
    }
    /// The URL this storage was opened with.
    pub fn url(&self) -> &str {
        &self.inner.url
    }
}

impl Inner {
    fn clone_config(&self) -> Inner {
        Inner {
            url: self.url.clone(),
            store: self.store.clone(),
            multipart: self.multipart.clone(),
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
            part_size_bytes: self.part_size_bytes,
            uploads_in_flight_max: self.uploads_in_flight_max,
            conditional_put: tokio::sync::OnceCell::new(),
        }
    }

    fn key(&self, rel: &str) -> Result<Path> {
        let full = if self.prefix.is_empty() {
            rel.to_string()
        } else if rel.is_empty() {
            self.prefix.clone()
        } else {
            format!("{}/{rel}", self.prefix)
        };
        Path::parse(&full)
            .map_err(|e| Error::InvalidInput(format!("`{full}` is not a valid key: {e}")))
    }

    /// The relative path of a key under the prefix, if it is under it (`lake/out` never
    /// matches `lake/out2/...`).
    fn rel<'a>(&self, key: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            return Some(key);
        }
        key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
    }

    /// `s3://bucket` (or the store's URL without the prefix).
    fn url_root(&self) -> String {
        let url = self.url.trim_end_matches('/');
        if self.prefix.is_empty() {
            return url.to_string();
        }
        url.strip_suffix(self.prefix.as_str())
            .map_or(url, |u| u.trim_end_matches('/'))
            .to_string()
    }

    fn where_(&self, rel: &str) -> String {
        format!("{}/{rel}", self.url)
    }

    fn store_error(&self, op: &'static str, rel: &str, e: object_store::Error) -> Error {
        Error::object_store(op, self.where_(rel), e)
    }

    /// Deletes the hidden object `path` (a staged or carried part file), if it is an
    /// in-progress part name of the shape filesink writes; one that is gone counts as deleted.
    async fn remove_hidden(&self, path: &str) -> Result<()> {
        validate_rel_path(path).map_err(Error::InvalidInput)?;
        if parse_hidden_name(split_rel(path).1).is_none() {
            return Err(Error::InvalidInput(format!(
                "`{path}` is not an in-progress part name of the shape filesink writes; filesink \
                 only removes its own hidden objects"
            )));
        }
        match self.store.delete(&self.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                tracing::debug!(file = %path, "hidden object removed");
                Ok(())
            }
            Err(e) => Err(self.store_error("delete", path, e)),
        }
    }

    /// A whole object read under `rel`; one that does not exist is [`Error::DataLost`] (`what`
    /// names it in the message).
    async fn read_whole(&self, rel: &str, what: &str) -> Result<Bytes> {
        let got = match self.store.get(&self.key(rel)?).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(Error::data_lost(
                    self.where_(rel),
                    format!("the {what} does not exist"),
                ))
            }
            Err(e) => return Err(self.store_error("read", rel, e)),
        };
        got.bytes()
            .await
            .map_err(|e| self.store_error("read", rel, e))
    }
}

#[async_trait]
#[async_trait]
impl Storage for ObjectStorage {
    fn name(&self) -> &'static str {
        if self.inner.multipart.is_some() {
            "s3"
        } else {
            "object-store"
        }
    }

    fn place(&self) -> String {
        self.inner.url.clone()
    }
}

#[async_trait]
impl Parts for ObjectStorage {
    fn can_resume(&self) -> bool {
        false
    }

    fn open_file_held_bytes_max(&self) -> u64 {
        // A part fills before its upload starts (a staged object holds its whole file, which
        // rolls at the part size's order under a budget anyway).
        self.inner.part_size_bytes as u64
    }

    fn path_bytes_max(&self) -> Option<usize> {
        // S3 (and the stores that speak it) take keys of at most 1,024 bytes; the generic
        // stores' own limits are not known here.
        self.inner.multipart.as_ref()?;
        let prefix = match self.inner.prefix.len() {
            0 => 0,
            n => n + 1,
        };
        Some(S3_KEY_BYTES_MAX.saturating_sub(prefix))
    }

    async fn create(&self, location: &PartLocation) -> Result<Box<dyn PartWriter>> {
        let inner = self.inner.clone();
        let upload = match &inner.multipart {
            Some(m) => {
                let key = inner.key(&location.final_path)?;
                let started = std::time::Instant::now();
                let id = m.create_multipart(&key).await.map_err(|e| {
                    inner.store_error("start an upload of", &location.final_path, e)
                })?;
                tracing::debug!(
                    file = %location.final_path,
                    upload_id = %id,
                    duration_ms = started.elapsed().as_millis() as u64,
                    "multipart upload created"
                );
                Some(id)
            }
            None => None,
        };
        Ok(Box::new(ObjectPart {
            inner,
            location: location.clone(),
            upload_id: upload,
            buffer: Vec::new(),
            len: 0,
            next_part: 0,
            in_flight: JoinSet::new(),
            done: Vec::new(),
            staged_len: None,
        }))
    }

    async fn resume(
        &self,
        _from: &str,
        _len: u64,
        _crc: u32,
        _location: &PartLocation,
    ) -> Result<Box<dyn PartWriter>> {
        Err(Error::NotSupported(format!(
            "`{}` cannot resume a part file; row files roll at every checkpoint there",
            self.inner.url
        )))
    }

    async fn seal(&self, parts: Vec<Box<dyn PartWriter>>) -> Result<Vec<PendingHandle>> {
        // Files are independent: their last parts (or staged objects) upload together, a
        // bounded number of files at a time, instead of one round trip after another. Every
        // started file is waited for before the call returns; the first error fails it, and no
        // further file is started after one.
        super::bounded::try_map(parts, SEAL_IN_FLIGHT_MAX, |mut part| async move {
            part.sync().await?;
            part.close().await
        })
        .await
    }

    async fn seal_carried(&self, parts: Vec<Box<dyn PartWriter>>) -> Result<Vec<PendingHandle>> {
        // As `seal`: independent files, a bounded number at a time.
        super::bounded::try_map(parts, SEAL_IN_FLIGHT_MAX, |part| part.seal_carried()).await
    }

    async fn persist(&self, _parts: &mut [&mut Box<dyn PartWriter>]) -> Result<()> {
        Err(Error::NotSupported(format!(
            "`{}` cannot keep part files open across checkpoints",
            self.inner.url
        )))
    }

    async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>> {
        // CompleteMultipartUpload calls are independent: run them together, bounded.
        const IN_FLIGHT_MAX: usize = 32;
        super::bounded::map(
            committables.iter().collect(),
            IN_FLIGHT_MAX,
            |c| async move {
                c.validate()?;
                let outcome = match &c.pending {
                    PendingHandle::Multipart { upload_id, parts } => {
                        self.inner.commit_multipart(c, upload_id, parts).await
                    }
                    PendingHandle::Staged { staging_path } => {
                        self.inner.commit_staged(c, staging_path).await
                    }
                    other => Err(Error::NotSupported(format!(
                        "an object store cannot commit a {other:?} handle"
                    ))),
                }?;
                // Only now, with the file committed, the hidden objects it supersedes go: the
                // carried files of a pre-commit merge. As on local disk, a failed delete
                // fails nothing: the object is no longer referenced once a later checkpoint
                // is complete, and the next restore removes it as a leftover.
                for old in &c.supersedes {
                    if let Err(e) = self.inner.remove_hidden(old).await {
                        tracing::warn!(file = %old, error = %e, "superseded object not removed");
                    }
                }
                Ok(outcome)
            },
        )
        .await
    }

    async fn probe(&self, c: &Committable) -> Result<CommitState> {
        c.validate()?;
        match &c.pending {
            PendingHandle::Multipart { upload_id, parts } => {
                self.inner.probe_multipart(c, upload_id, parts).await
            }
            PendingHandle::Staged { staging_path } => {
                self.inner.probe_staged(c, staging_path).await
            }
            other => Err(Error::NotSupported(format!(
                "an object store cannot hold a {other:?} handle"
            ))),
        }
    }
}

#[async_trait]
impl MetadataStore for ObjectStorage {
    async fn put_metadata(&self, path: &str, bytes: &[u8]) -> Result<()> {
        validate_metadata_path(path).map_err(Error::InvalidInput)?;
        let inner = &self.inner;
        let key = inner.key(path)?;
        let payload = PutPayload::from(Bytes::copy_from_slice(bytes));
        if inner.conditional_put().await? {
            return match inner
                .store
                .put_opts(&key, payload, PutOptions::from(PutMode::Create))
                .await
            {
                Ok(_) => Ok(()),
                Err(object_store::Error::AlreadyExists { .. }) => Err(Error::conflict(
                    inner.where_(path),
                    "it exists already; another writer got there first",
                )),
                Err(e) => Err(inner.store_error("write", path, e)),
            };
        }
        // No conditional puts: check before, and read back after. This narrows a race but
        // cannot decide it: two writers can each read back their own bytes before the other's
        // put lands. Job ownership (`super::ownership`) keeps a second coordinator out; data
        // files are never overwritten either way (their names carry the incarnation).
        match inner.store.head(&key).await {
            Ok(_) => {
                return Err(Error::conflict(
                    inner.where_(path),
                    "it exists already; another writer got there first",
                ))
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(inner.store_error("check", path, e)),
        }
        inner
            .store
            .put(&key, payload)
            .await
            .map_err(|e| inner.store_error("write", path, e))?;
        match self.get_metadata(path).await? {
            Some(read) if read == bytes => Ok(()),
            _ => Err(Error::conflict(
                inner.where_(path),
                "another writer wrote it at the same moment, and its copy is the one stored",
            )),
        }
    }

    async fn refuses_replace(&self) -> Result<bool> {
        // The probe `put_metadata` chooses its primitive by: one answer for both.
        self.inner.conditional_put().await
    }

    async fn replace_metadata(&self, path: &str, bytes: &[u8]) -> Result<()> {
        validate_replaceable_path(path)?;
        let inner = &self.inner;
        // A PUT replaces atomically on every store: readers see the old object or the new.
        inner
            .store
            .put(
                &inner.key(path)?,
                PutPayload::from(Bytes::copy_from_slice(bytes)),
            )
            .await
            .map_err(|e| inner.store_error("write", path, e))?;
        Ok(())
    }

    async fn get_metadata(&self, path: &str) -> Result<Option<Vec<u8>>> {
        validate_metadata_path(path).map_err(Error::InvalidInput)?;
        let inner = &self.inner;
        match inner.store.get(&inner.key(path)?).await {
            Ok(got) => Ok(Some(
                got.bytes()
                    .await
                    .map_err(|e| inner.store_error("read", path, e))?
                    .to_vec(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(inner.store_error("read", path, e)),
        }
    }

    async fn list_metadata(&self, dir: &str) -> Result<Vec<MetadataEntry>> {
        validate_metadata_dir(dir).map_err(Error::InvalidInput)?;
        self.inner.list_metadata(dir).await
    }

    async fn list_metadata_from(&self, dir: &str, after: &str) -> Result<Vec<MetadataEntry>> {
        validate_metadata_dir(dir).map_err(Error::InvalidInput)?;
        validate_list_start(after)?;
        self.inner.list_metadata_from(dir, after).await
    }

    async fn delete_metadata(&self, path: &str) -> Result<()> {
        validate_metadata_path(path).map_err(Error::InvalidInput)?;
        let inner = &self.inner;
        match inner.store.delete(&inner.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(inner.store_error("delete", path, e)),
        }
    }
}

#[async_trait]
impl Leases for ObjectStorage {
    async fn acquire_job(
        &self,
        job: &str,
        options: &super::LeaseOptions,
    ) -> Result<Box<dyn super::JobLease>> {
        let inner = &self.inner;
        let claim = super::ownership::Claim::acquire(
            inner.store.clone(),
            &inner.prefix,
            &inner.url,
            job,
            options,
        )
        .await?;
        Ok(Box::new(claim))
    }

    async fn acquire_table_writer(
        &self,
        options: &super::LeaseOptions,
    ) -> Result<Box<dyn super::JobLease>> {
        let inner = &self.inner;
        let claim = super::ownership::Claim::acquire_in(
            inner.store.clone(),
            &inner.prefix,
            &inner.url,
            crate::protocol::paths::TABLE_OWNERS_DIR.to_owned(),
            crate::protocol::paths::TABLE_CLAIM_NAME,
            options,
        )
        .await?;
        Ok(Box::new(claim))
    }

    async fn job_holder(&self, job: &str) -> Result<Option<String>> {
        let inner = &self.inner;
        super::ownership::Claim::holder(inner.store.as_ref(), &inner.prefix, &inner.url, job).await
    }
}

#[async_trait]
impl Listing for ObjectStorage {
    async fn list_leftovers(&self) -> Result<Vec<Leftover>> {
        self.inner.list_leftovers(true).await
    }

    async fn list_leftovers_uncarried(&self) -> Result<Vec<Leftover>> {
        self.inner.list_leftovers(false).await
    }

    async fn remove_leftover(&self, path: &str) -> Result<()> {
        let inner = &self.inner;
        if let Some((final_path, upload_id)) = path.rsplit_once('#') {
            return inner.abort_upload(final_path, upload_id).await;
        }
        inner.remove_hidden(path).await
    }

    async fn read_data_file(&self, path: &str) -> Result<Bytes> {
        validate_visible_path(path).map_err(Error::InvalidInput)?;
        self.inner.read_whole(path, "data file").await
    }

    async fn remove_data_file(&self, path: &str) -> Result<()> {
        validate_final_part_path(path).map_err(Error::InvalidInput)?;
        let inner = &self.inner;
        match inner.store.delete(&inner.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                tracing::debug!(file = %path, "data file removed");
                Ok(())
            }
            Err(e) => Err(inner.store_error("delete", path, e)),
        }
    }

    async fn read_hidden(&self, path: &str) -> Result<Bytes> {
        validate_hidden_part_path(path)?;
        self.inner.read_whole(path, "hidden part object").await
    }

    async fn other_sinks(&self) -> Result<OtherSinks> {
        self.inner.other_sinks().await
    }

    async fn list_visible(&self) -> Result<Vec<VisibleFile>> {
        self.inner.list_visible().await
    }
}

#[cfg(not(feature = "s3"))]
mod no_s3 {
    //! Without the `s3` feature no [`ObjectStorage`](super::ObjectStorage) has a bucket client:
    //! this type has no values, so the code that would use one is never reached.
    #![allow(dead_code)]

    use crate::Result;

    #[derive(Debug, Clone)]
    pub(crate) enum BucketClient {}

    pub(crate) struct Upload {
        pub(crate) key: String,
        pub(crate) upload_id: String,
        pub(crate) initiated_ms: i64,
    }

    impl BucketClient {
        pub(crate) async fn list_uploads(&self, _prefix: &str) -> Result<Vec<Upload>> {
            match *self {}
        }

        pub(crate) async fn aborts_incomplete_uploads(&self) -> Result<Option<bool>> {
            match *self {}
        }
    }
}
