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
//! **Row files do not stay open** across checkpoints on S3 ([`Storage::can_resume`] is false):
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

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tokio::task::JoinSet;

use super::sigv4::{hex, BucketClient};
use super::{
    CommitState, Leftover, MetadataEntry, OtherSinks, PartLocation, PartWriter, Storage,
    VisibleFile,
};
use crate::sink::state::{
    looks_in_progress, parse_hidden_name, split_rel, upload_leftover_id, validate_rel_path,
    Committable, PartName, PendingHandle, UploadedPart,
};
use crate::{CommitOutcome, Error, Result};

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

    /// `s3://bucket/prefix` on an S3-compatible store, configured from the usual `AWS_*`
    /// environment variables (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`,
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`).
    pub fn s3(url: &str) -> Result<Self> {
        Self::s3_from(url, AmazonS3Builder::from_env())
    }

    /// `s3://bucket/prefix` on an S3-compatible store configured by `options` alone, not by
    /// the environment: e.g. [`AmazonS3ConfigKey::Endpoint`], [`AmazonS3ConfigKey::Region`],
    /// [`AmazonS3ConfigKey::AccessKeyId`], [`AmazonS3ConfigKey::SecretAccessKey`] and, for an
    /// `http://` endpoint, `AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp)` set to
    /// `"true"`. For two stores in one process, or a store the environment does not describe.
    pub fn s3_with_options(
        url: &str,
        options: impl IntoIterator<Item = (AmazonS3ConfigKey, impl Into<String>)>,
    ) -> Result<Self> {
        let builder = options
            .into_iter()
            .fold(AmazonS3Builder::new(), |b, (k, v)| b.with_config(k, v));
        Self::s3_from(url, builder)
    }

    fn s3_from(url: &str, builder: AmazonS3Builder) -> Result<Self> {
        let parsed = url::Url::parse(url)
            .map_err(|e| Error::Config(format!("`{url}` is not a URL: {e}")))?;
        if parsed.scheme() != "s3" && parsed.scheme() != "s3a" {
            return Err(Error::Config(format!("`{url}` is not an s3:// URL")));
        }
        let bucket = parsed
            .host_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| Error::Config(format!("`{url}` names no bucket")))?
            .to_string();
        let prefix = parsed.path().trim_matches('/').to_string();
        if !prefix.is_empty() {
            validate_rel_path(&prefix).map_err(|e| Error::Config(format!("`{url}`: {e}")))?;
        }
        let builder = builder.with_bucket_name(&bucket);
        let cfg = |k: AmazonS3ConfigKey| builder.get_config_value(&k);
        let region = cfg(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let virtual_hosted =
            cfg(AmazonS3ConfigKey::VirtualHostedStyleRequest).is_some_and(|v| v == "true");
        let endpoint = cfg(AmazonS3ConfigKey::Endpoint)
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let endpoint = url::Url::parse(&endpoint)
            .map_err(|e| Error::Config(format!("AWS_ENDPOINT `{endpoint}`: {e}")))?;
        let (access_key, secret_key) = match (
            cfg(AmazonS3ConfigKey::AccessKeyId),
            cfg(AmazonS3ConfigKey::SecretAccessKey),
        ) {
            (Some(a), Some(s)) => (a, s),
            _ => {
                return Err(Error::Config(
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set for s3:// URLs".into(),
                ))
            }
        };
        let bucket_client = BucketClient::new(
            endpoint.clone(),
            bucket.clone(),
            region,
            access_key,
            secret_key,
            cfg(AmazonS3ConfigKey::Token),
            virtual_hosted,
        )?;
        let s3 = Arc::new(
            builder
                .build()
                .map_err(|e| Error::Config(format!("`{url}`: {e}")))?,
        );
        Ok(ObjectStorage {
            inner: Arc::new(Inner {
                url: url.trim_end_matches('/').to_string(),
                store: s3.clone(),
                multipart: Some(s3),
                bucket: Some(bucket_client),
                prefix,
                part_size_bytes: Self::DEFAULT_PART_SIZE_BYTES,
                uploads_in_flight_max: Self::DEFAULT_UPLOADS_IN_FLIGHT_MAX,
                conditional_put: tokio::sync::OnceCell::new(),
            }),
        })
    }

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

    /// Probes the store: conditional puts (by trying to create one probe object twice) and
    /// the bucket's lifecycle rule for incomplete uploads.
    pub async fn capabilities(&self) -> Result<S3Capabilities> {
        let conditional_put = self.inner.conditional_put().await?;
        let aborts_incomplete_uploads = match &self.inner.bucket {
            Some(b) => b.aborts_incomplete_uploads().await.unwrap_or(None),
            None => None,
        };
        Ok(S3Capabilities {
            conditional_put,
            aborts_incomplete_uploads,
        })
    }

    /// Whether the bucket has a lifecycle rule that aborts incomplete multipart uploads;
    /// `None` when the store would not say or is not S3. Reads only.
    pub async fn aborts_incomplete_uploads(&self) -> Result<Option<bool>> {
        match &self.inner.bucket {
            Some(b) => b.aborts_incomplete_uploads().await,
            None => Ok(None),
        }
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
        Error::io(op, self.where_(rel), std::io::Error::other(e.to_string()))
    }

    async fn conditional_put(&self) -> Result<bool> {
        self.conditional_put
            .get_or_try_init(|| async {
                let probe = format!(
                    "{}/probe/{}",
                    crate::checkpoint::METADATA_DIR,
                    uuid::Uuid::now_v7().simple()
                );
                let key = self.key(&probe)?;
                let opts = || PutOptions::from(PutMode::Create);
                self.store
                    .put_opts(&key, PutPayload::from_static(b"1"), opts())
                    .await
                    .map_err(|e| self.store_error("probe", &probe, e))?;
                let second = self
                    .store
                    .put_opts(&key, PutPayload::from_static(b"2"), opts())
                    .await;
                let _ = self.store.delete(&key).await;
                Ok(matches!(
                    second,
                    Err(object_store::Error::AlreadyExists { .. })
                ))
            })
            .await
            .copied()
    }

    /// Every object under the prefix.
    async fn list_all(&self) -> Result<Vec<object_store::ObjectMeta>> {
        use futures_util::TryStreamExt;
        self.store
            .list(Some(&self.key("")?))
            .try_collect()
            .await
            .map_err(|e| self.store_error("list", "", e))
    }

    /// The multipart ETag S3 gives an object completed from `parts`.
    fn multipart_etag(parts: &[UploadedPart]) -> Option<String> {
        use md5::{Digest, Md5};
        let mut concat = Vec::with_capacity(parts.len() * 16);
        for p in parts {
            let h = p.etag.trim_matches('"');
            if h.len() != 32 {
                return None;
            }
            for i in 0..16 {
                concat.push(u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok()?);
            }
        }
        Some(format!("{}-{}", hex(&Md5::digest(&concat)), parts.len()))
    }

    async fn commit_multipart(
        &self,
        c: &Committable,
        upload_id: &str,
        parts: &[UploadedPart],
    ) -> Result<CommitOutcome> {
        let multipart = self.multipart.as_ref().ok_or_else(|| {
            Error::NotSupported(format!("`{}` cannot complete multipart uploads", self.url))
        })?;
        let key = self.key(&c.final_path)?;
        let expected = Self::multipart_etag(parts);
        // The object first: a repeated CompleteMultipartUpload answers 200 on some stores (Ceph),
        // which cannot tell a commit from a repeat; the final key is this writer incarnation's
        // own, so an object there is the earlier commit or a conflict.
        match self.store.head(&key).await {
            Ok(meta) => return self.committed_before(c, &meta, expected, "it exists already"),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.store_error("check", &c.final_path, e)),
        }
        let ids = parts
            .iter()
            .map(|p| PartId {
                content_id: p.etag.clone(),
            })
            .collect();
        let id = upload_id.to_string();
        let completed = multipart.complete_multipart(&key, &id, ids).await;
        let first_error = match completed {
            Ok(_) => return Ok(CommitOutcome::Committed),
            Err(e) => e,
        };
        // Ambiguous: the upload may have completed before (NoSuchUpload), or the answer was
        // lost. Only the object itself can prove which.
        match self.store.head(&key).await {
            Ok(meta) => self.committed_before(
                c,
                &meta,
                expected,
                &format!("completing the upload failed ({first_error})"),
            ),
            Err(object_store::Error::NotFound { .. }) => {
                if first_error.to_string().contains("NoSuchUpload")
                    || matches!(first_error, object_store::Error::NotFound { .. })
                {
                    Err(Error::data_lost(
                        self.where_(&c.final_path),
                        format!("the multipart upload {upload_id} is gone and the object does not exist"),
                    ))
                } else {
                    Err(self.store_error("complete the upload of", &c.final_path, first_error))
                }
            }
            Err(e) => Err(self.store_error("check", &c.final_path, e)),
        }
    }

    /// The proof that `meta`, the object at `c`'s final key, is `c` committed before: size equal
    /// and ETag equal to the multipart ETag `expected` of its parts. Anything else is a conflict.
    fn committed_before(
        &self,
        c: &Committable,
        meta: &object_store::ObjectMeta,
        expected: Option<String>,
        context: &str,
    ) -> Result<CommitOutcome> {
        let etag = meta
            .e_tag
            .as_deref()
            .map(|e| e.trim_matches('"').to_string());
        if meta.size == c.size_bytes && expected.is_some() && etag == expected {
            Ok(CommitOutcome::AlreadyCommitted)
        } else {
            Err(Error::conflict(
                self.where_(&c.final_path),
                format!(
                    "{context} and the object there has size {} and ETag {:?}, not {} and {:?}: it was overwritten or is someone else's",
                    meta.size, etag, c.size_bytes, expected
                ),
            ))
        }
    }

    async fn commit_staged(&self, c: &Committable, staging: &str) -> Result<CommitOutcome> {
        let from = self.key(staging)?;
        let to = self.key(&c.final_path)?;
        let copied = self.store.copy_if_not_exists(&from, &to).await;
        match copied {
            Ok(()) => {
                let _ = self.store.delete(&from).await;
                Ok(CommitOutcome::Committed)
            }
            Err(object_store::Error::NotSupported { source }) => Err(Error::NotSupported(format!(
                "`{}` cannot copy without replacing ({source}); filesink will not fall back to a replacing copy",
                self.url
            ))),
            Err(object_store::Error::AlreadyExists { .. }) | Err(object_store::Error::NotFound { .. }) => {
                match self.store.get(&to).await {
                    Ok(got) => {
                        let bytes = got.bytes().await.map_err(|e| self.store_error("read", &c.final_path, e))?;
                        if bytes.len() as u64 == c.size_bytes && crc32c::crc32c(&bytes) == c.crc32c {
                            let _ = self.store.delete(&from).await;
                            Ok(CommitOutcome::AlreadyCommitted)
                        } else {
                            Err(Error::conflict(
                                self.where_(&c.final_path),
                                "an object with other content holds the name; nothing was overwritten",
                            ))
                        }
                    }
                    Err(object_store::Error::NotFound { .. }) => Err(Error::data_lost(
                        self.where_(&c.final_path),
                        format!("neither the staging object `{staging}` nor the final object exists"),
                    )),
                    Err(e) => Err(self.store_error("read", &c.final_path, e)),
                }
            }
            Err(e) => Err(self.store_error("copy", staging, e)),
        }
    }
}

#[async_trait]
impl Storage for ObjectStorage {
    fn name(&self) -> &'static str {
        if self.inner.multipart.is_some() {
            "s3"
        } else {
            "object-store"
        }
    }

    fn can_resume(&self) -> bool {
        false
    }

    async fn create(&self, location: &PartLocation) -> Result<Box<dyn PartWriter>> {
        let inner = self.inner.clone();
        let upload = match &inner.multipart {
            Some(m) => {
                let key = inner.key(&location.final_path)?;
                let id = m.create_multipart(&key).await.map_err(|e| {
                    inner.store_error("start an upload of", &location.final_path, e)
                })?;
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
        let mut handles: Vec<Option<PendingHandle>> = (0..parts.len()).map(|_| None).collect();
        let mut first_error = None;
        let mut queue = parts.into_iter().enumerate();
        let mut set = JoinSet::new();
        loop {
            while first_error.is_none() && set.len() < SEAL_IN_FLIGHT_MAX {
                let Some((i, mut part)) = queue.next() else {
                    break;
                };
                set.spawn(async move {
                    let sealed = match part.sync().await {
                        Ok(()) => part.close().await,
                        Err(e) => Err(e),
                    };
                    (i, sealed)
                });
            }
            match set.join_next().await {
                None => break,
                Some(Ok((i, Ok(handle)))) => handles[i] = Some(handle),
                Some(Ok((_, Err(e)))) => {
                    first_error.get_or_insert(e);
                }
                Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(handles
            .into_iter()
            .map(|h| h.expect("every part was sealed"))
            .collect())
    }

    async fn persist(&self, _parts: &mut [&mut Box<dyn PartWriter>]) -> Result<()> {
        Err(Error::NotSupported(format!(
            "`{}` cannot keep part files open across checkpoints",
            self.inner.url
        )))
    }

    async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>> {
        // CompleteMultipartUpload calls are independent: run them together, bounded.
        let mut results: Vec<Option<Result<CommitOutcome>>> =
            (0..committables.len()).map(|_| None).collect();
        let mut set = JoinSet::new();
        let mut next = 0;
        const IN_FLIGHT_MAX: usize = 32;
        while next < committables.len() || !set.is_empty() {
            while next < committables.len() && set.len() < IN_FLIGHT_MAX {
                let (i, c, inner) = (next, committables[next].clone(), self.inner.clone());
                set.spawn(async move {
                    let r = match c.validate() {
                        Err(e) => Err(e),
                        Ok(()) => match &c.pending {
                            PendingHandle::Multipart { upload_id, parts } => {
                                inner.commit_multipart(&c, upload_id, parts).await
                            }
                            PendingHandle::Staged { staging_path } => {
                                inner.commit_staged(&c, staging_path).await
                            }
                            other => Err(Error::NotSupported(format!(
                                "an object store cannot commit a {other:?} handle"
                            ))),
                        },
                    };
                    (i, r)
                });
                next += 1;
            }
            if let Some(joined) = set.join_next().await {
                match joined {
                    Ok((i, r)) => results[i] = Some(r),
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every commit ran"))
            .collect()
    }

    async fn list_leftovers(&self) -> Result<Vec<Leftover>> {
        let inner = &self.inner;
        let mut out = Vec::new();
        if let Some(bucket) = &inner.bucket {
            let prefix = if inner.prefix.is_empty() {
                String::new()
            } else {
                format!("{}/", inner.prefix)
            };
            // Every incomplete upload under the prefix is listed; only a key of the exact
            // shape filesink writes parses, the rest (other tools' uploads) are foreign.
            let mut nested = NestedSinks::default();
            for u in bucket.list_uploads(&prefix).await? {
                let Some(rel) = inner.rel(&u.key) else {
                    continue;
                };
                if nested.holds(inner, rel).await? {
                    continue;
                }
                let name = validate_rel_path(rel)
                    .ok()
                    .and_then(|()| PartName::parse_final(split_rel(rel).1));
                out.push(Leftover {
                    name,
                    path: upload_leftover_id(rel, &u.upload_id),
                    final_path: rel.to_string(),
                    size_bytes: 0,
                    modified_ms: u.initiated_ms,
                });
            }
        } else {
            let all = inner.list_all().await?;
            let nested = nested_bases(inner, &all);
            for meta in &all {
                let Some(rel) = inner
                    .rel(meta.location.as_ref())
                    .or_else(|| inner.prefix.is_empty().then_some(meta.location.as_ref()))
                else {
                    continue;
                };
                if inside_any(rel, &nested) {
                    continue;
                }
                let (dir, name) = split_rel(rel);
                let parsed = PartName::parse_in_progress(name);
                if parsed.is_none() && !looks_in_progress(name) {
                    continue;
                }
                let final_name = parsed.as_ref().map_or(name, |p| p.final_name.as_str());
                out.push(Leftover {
                    final_path: if dir.is_empty() {
                        final_name.to_string()
                    } else {
                        format!("{dir}/{final_name}")
                    },
                    name: parsed,
                    path: rel.to_string(),
                    size_bytes: meta.size,
                    modified_ms: meta.last_modified.timestamp_millis(),
                });
            }
        }
        Ok(out)
    }

    async fn remove_leftover(&self, path: &str) -> Result<()> {
        let inner = &self.inner;
        if let Some((final_path, upload_id)) = path.rsplit_once('#') {
            let multipart = inner
                .multipart
                .as_ref()
                .ok_or_else(|| Error::NotSupported("no multipart uploads here".into()))?;
            validate_rel_path(final_path).map_err(Error::InvalidInput)?;
            if PartName::parse_final(split_rel(final_path).1).is_none() {
                return Err(Error::InvalidInput(format!(
                    "`{final_path}` is not a part name of the shape filesink writes; filesink \
                     only aborts its own uploads"
                )));
            }
            let key = inner.key(final_path)?;
            return match multipart
                .abort_multipart(&key, &upload_id.to_string())
                .await
            {
                Ok(()) => Ok(()),
                Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) if e.to_string().contains("NoSuchUpload") => Ok(()),
                Err(e) => Err(inner.store_error("abort the upload of", final_path, e)),
            };
        }
        validate_rel_path(path).map_err(Error::InvalidInput)?;
        if parse_hidden_name(split_rel(path).1).is_none() {
            return Err(Error::InvalidInput(format!(
                "`{path}` is not an in-progress part name of the shape filesink writes; filesink \
                 only removes its own hidden objects"
            )));
        }
        match inner.store.delete(&inner.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(inner.store_error("delete", path, e)),
        }
    }

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

    async fn job_holder(&self, job: &str) -> Result<Option<String>> {
        super::ownership::Claim::holder(self.inner.store.as_ref(), &self.inner.prefix, job).await
    }

    async fn put_metadata(&self, path: &str, bytes: &[u8]) -> Result<()> {
        validate_rel_path(path).map_err(Error::InvalidInput)?;
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

    async fn get_metadata(&self, path: &str) -> Result<Option<Vec<u8>>> {
        validate_rel_path(path).map_err(Error::InvalidInput)?;
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
        let inner = &self.inner;
        let key = inner.key(dir)?;
        let listed = inner
            .store
            .list_with_delimiter(Some(&key))
            .await
            .map_err(|e| inner.store_error("list", dir, e))?;
        let mut out = Vec::new();
        for p in listed.common_prefixes {
            if let Some(name) = p.filename() {
                out.push(MetadataEntry {
                    name: name.to_string(),
                    is_dir: true,
                    modified_ms: 0,
                });
            }
        }
        for o in listed.objects {
            if let Some(name) = o.location.filename() {
                out.push(MetadataEntry {
                    name: name.to_string(),
                    is_dir: false,
                    modified_ms: o.last_modified.timestamp_millis(),
                });
            }
        }
        Ok(out)
    }

    async fn other_sinks(&self) -> Result<OtherSinks> {
        let inner = &self.inner;
        let mut out = OtherSinks::default();
        // Above: every shorter prefix, the bucket's root included.
        let mut above: Vec<&str> = inner
            .prefix
            .match_indices('/')
            .map(|(i, _)| &inner.prefix[..i])
            .collect();
        if !inner.prefix.is_empty() {
            above.insert(0, "");
        }
        for dir in above {
            let marker = if dir.is_empty() {
                SINK_MARKER.to_string()
            } else {
                format!("{dir}/{SINK_MARKER}")
            };
            let key = Path::parse(&marker)
                .map_err(|e| Error::InvalidInput(format!("`{marker}` is not a valid key: {e}")))?;
            match inner.store.head(&key).await {
                Ok(_) if dir.is_empty() => out.around.push(inner.url_root()),
                Ok(_) => out.around.push(format!("{}/{dir}", inner.url_root())),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(inner.store_error("check", &marker, e)),
            }
        }
        let all = inner.list_all().await?;
        out.inside
            .extend(nested_bases(inner, &all).iter().map(|d| inner.where_(d)));
        Ok(out)
    }

    async fn list_visible(&self) -> Result<Vec<VisibleFile>> {
        let inner = &self.inner;
        let all = inner.list_all().await?;
        let nested = nested_bases(inner, &all);
        Ok(all
            .into_iter()
            .filter_map(|m| {
                let rel = inner.rel(m.location.as_ref())?.to_string();
                (!rel.split('/').any(|c| c.starts_with(['.', '_'])) && !inside_any(&rel, &nested))
                    .then_some(VisibleFile {
                        path: rel,
                        size_bytes: m.size,
                    })
            })
            .collect())
    }

    async fn probe(&self, c: &Committable) -> Result<CommitState> {
        c.validate()?;
        let inner = &self.inner;
        let key = inner.key(&c.final_path)?;
        match &c.pending {
            PendingHandle::Multipart { upload_id, parts } => match inner.store.head(&key).await {
                Ok(meta) => {
                    let etag = meta
                        .e_tag
                        .as_deref()
                        .map(|e| e.trim_matches('"').to_string());
                    let expected = Inner::multipart_etag(parts);
                    Ok(
                        if meta.size == c.size_bytes && expected.is_some() && etag == expected {
                            CommitState::Committed
                        } else {
                            CommitState::Conflict
                        },
                    )
                }
                Err(object_store::Error::NotFound { .. }) => {
                    // Only the uploads of this key: one short listing per probe, not every
                    // upload under the prefix.
                    let pending = match &inner.bucket {
                        Some(bucket) => bucket
                            .list_uploads(key.as_ref())
                            .await?
                            .iter()
                            .any(|u| u.key == key.as_ref() && &u.upload_id == upload_id),
                        None => {
                            let id = upload_leftover_id(&c.final_path, upload_id);
                            self.list_leftovers().await?.iter().any(|l| l.path == id)
                        }
                    };
                    Ok(if pending {
                        CommitState::Pending
                    } else {
                        CommitState::Missing
                    })
                }
                Err(e) => Err(inner.store_error("check", &c.final_path, e)),
            },
            PendingHandle::Staged { staging_path } => match inner.store.get(&key).await {
                Ok(got) => {
                    let bytes = got
                        .bytes()
                        .await
                        .map_err(|e| inner.store_error("read", &c.final_path, e))?;
                    Ok(
                        if bytes.len() as u64 == c.size_bytes && crc32c::crc32c(&bytes) == c.crc32c
                        {
                            CommitState::Committed
                        } else {
                            CommitState::Conflict
                        },
                    )
                }
                Err(object_store::Error::NotFound { .. }) => {
                    match inner.store.head(&inner.key(staging_path)?).await {
                        Ok(_) => Ok(CommitState::Pending),
                        Err(object_store::Error::NotFound { .. }) => Ok(CommitState::Missing),
                        Err(e) => Err(inner.store_error("check", staging_path, e)),
                    }
                }
                Err(e) => Err(inner.store_error("read", &c.final_path, e)),
            },
            other => Err(Error::NotSupported(format!(
                "an object store cannot hold a {other:?} handle"
            ))),
        }
    }

    async fn delete_metadata(&self, path: &str) -> Result<()> {
        validate_rel_path(path).map_err(Error::InvalidInput)?;
        let inner = &self.inner;
        match inner.store.delete(&inner.key(path)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(inner.store_error("delete", path, e)),
        }
    }
}

/// An in-progress part on an object store.
struct ObjectPart {
    inner: Arc<Inner>,
    location: PartLocation,
    /// The multipart upload (S3), or `None` for a staged object.
    upload_id: Option<String>,
    buffer: Vec<u8>,
    len: u64,
    next_part: usize,
    in_flight: JoinSet<Result<(usize, String)>>,
    done: Vec<(usize, String)>,
    /// Staged objects: the length last PUT, so a repeated sync does not PUT again.
    staged_len: Option<u64>,
}

impl std::fmt::Debug for ObjectPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectPart")
            .field("location", &self.location)
            .field("upload_id", &self.upload_id)
            .field("len", &self.len)
            .finish()
    }
}

impl ObjectPart {
    /// Starts uploading `bytes` as the next part, waiting first if too many are in flight.
    async fn upload_part(&mut self, bytes: Vec<u8>) -> Result<()> {
        while self.in_flight.len() >= self.inner.uploads_in_flight_max {
            self.join_one().await?;
        }
        let (inner, idx) = (self.inner.clone(), self.next_part);
        let id = self
            .upload_id
            .clone()
            .expect("multipart parts have an upload");
        let final_path = self.location.final_path.clone();
        self.next_part += 1;
        self.in_flight.spawn(async move {
            let multipart = inner.multipart.as_ref().expect("multipart store");
            let key = inner.key(&final_path)?;
            let part = multipart
                .put_part(&key, &id, idx, PutPayload::from(Bytes::from(bytes)))
                .await
                .map_err(|e| match e {
                    object_store::Error::NotFound { .. } => Error::data_lost(
                        inner.where_(&final_path),
                        format!(
                            "its multipart upload `{id}` is gone: aborted by the cleanup of a \
                             restarted writer (so this one is a zombie) or by the bucket's \
                             lifecycle rule; restart from the last checkpoint"
                        ),
                    ),
                    e => inner.store_error("upload a part of", &final_path, e),
                })?;
            Ok((idx, part.content_id))
        });
        Ok(())
    }

    async fn join_one(&mut self) -> Result<()> {
        if let Some(joined) = self.in_flight.join_next().await {
            match joined {
                Ok(r) => self.done.push(r?),
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        Ok(())
    }
}

#[async_trait]
impl PartWriter for ObjectPart {
    fn location(&self) -> &PartLocation {
        &self.location
    }

    fn len_bytes(&self) -> u64 {
        self.len
    }

    fn memory_bytes(&self) -> u64 {
        (self.buffer.len() + self.in_flight.len() * self.inner.part_size_bytes) as u64
    }

    async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        if self.upload_id.is_none() {
            self.buffer.extend_from_slice(data);
            self.len += data.len() as u64;
            return Ok(());
        }
        // Fill a buffer of exactly one part, hand it to the upload, start the next. Once a file
        // has shown it is large (a part went out), each buffer is allocated at full size, so
        // its bytes are copied once, with no reallocation and no split; small files do not
        // reserve a whole part.
        let size = self.inner.part_size_bytes;
        while !data.is_empty() {
            if self.next_part > 0 && self.buffer.capacity() < size {
                self.buffer.reserve_exact(size - self.buffer.len());
            }
            let n = (size - self.buffer.len()).min(data.len());
            self.buffer.extend_from_slice(&data[..n]);
            self.len += n as u64;
            data = &data[n..];
            if self.buffer.len() == size {
                if self.next_part + 1 >= 10_000 {
                    return Err(Error::InvalidInput(format!(
                        "`{}` would need more than 10,000 parts of {size} bytes; raise the part size or lower the rolling size",
                        self.location.final_path
                    )));
                }
                let part = std::mem::take(&mut self.buffer);
                self.upload_part(part).await?;
            }
        }
        Ok(())
    }

    async fn sync(&mut self) -> Result<()> {
        match &self.upload_id {
            Some(_) => {
                // The last part may be of any size (S3 needs at least one part).
                if !self.buffer.is_empty() || self.next_part == 0 {
                    let last = std::mem::take(&mut self.buffer);
                    self.upload_part(last).await?;
                }
                while !self.in_flight.is_empty() {
                    self.join_one().await?;
                }
                Ok(())
            }
            None => {
                if self.staged_len == Some(self.len) {
                    return Ok(());
                }
                let inner = &self.inner;
                let rel = &self.location.in_progress_path;
                let bytes = Bytes::copy_from_slice(&self.buffer);
                inner
                    .store
                    .put(&inner.key(rel)?, PutPayload::from(bytes))
                    .await
                    .map_err(|e| inner.store_error("write", rel, e))?;
                self.staged_len = Some(self.len);
                Ok(())
            }
        }
    }

    async fn close(self: Box<Self>) -> Result<PendingHandle> {
        let mut this = *self;
        while !this.in_flight.is_empty() {
            this.join_one().await?;
        }
        match this.upload_id.take() {
            Some(upload_id) => {
                let mut done = std::mem::take(&mut this.done);
                done.sort_by_key(|(i, _)| *i);
                let parts = done
                    .into_iter()
                    .map(|(i, etag)| UploadedPart {
                        number: i as u32 + 1,
                        etag,
                    })
                    .collect();
                Ok(PendingHandle::Multipart { upload_id, parts })
            }
            None => Ok(PendingHandle::Staged {
                staging_path: this.location.in_progress_path.clone(),
            }),
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The file that marks a prefix as a sink's base.
const SINK_MARKER: &str = "_filesink/sink.json";

/// The bases of other sinks below this one in a listing: every `<dir>/_filesink/sink.json`
/// with `dir` not empty. Nothing under them is this sink's.
fn nested_bases(inner: &Inner, all: &[object_store::ObjectMeta]) -> Vec<String> {
    all.iter()
        .filter_map(|m| {
            let rel = inner
                .rel(m.location.as_ref())
                .or_else(|| inner.prefix.is_empty().then_some(m.location.as_ref()))?;
            let dir = rel.strip_suffix(SINK_MARKER)?.strip_suffix('/')?;
            (!dir.is_empty()).then(|| dir.to_string())
        })
        .collect()
}

/// Whether `rel` is inside one of `bases`.
fn inside_any(rel: &str, bases: &[String]) -> bool {
    bases.iter().any(|b| {
        rel.strip_prefix(b.as_str())
            .is_some_and(|r| r.starts_with('/'))
    })
}

/// Which directories under the prefix are other sinks' bases, found by HEAD of their
/// `_filesink/sink.json` and remembered: for the few directories that hold uploads, without
/// listing every object.
#[derive(Default)]
struct NestedSinks {
    known: std::collections::HashMap<String, bool>,
}

impl NestedSinks {
    /// Whether the key `rel` is inside another sink's base below this one.
    async fn holds(&mut self, inner: &Inner, rel: &str) -> Result<bool> {
        let dirs: Vec<&str> = rel
            .match_indices('/')
            .map(|(i, _)| &rel[..i])
            .filter(|d| !d.is_empty())
            .collect();
        for dir in dirs {
            let is_base = match self.known.get(dir) {
                Some(&known) => known,
                None => {
                    let marker = format!("{dir}/{SINK_MARKER}");
                    let found = match inner.key(&marker) {
                        Ok(key) => match inner.store.head(&key).await {
                            Ok(_) => true,
                            Err(object_store::Error::NotFound { .. }) => false,
                            Err(e) => return Err(inner.store_error("check", &marker, e)),
                        },
                        // A directory name that makes no valid key holds no sink.
                        Err(_) => false,
                    };
                    self.known.insert(dir.to_string(), found);
                    found
                }
            };
            if is_base {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
