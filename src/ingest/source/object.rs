//! Inputs on object stores: objects read as a source like files, named by URL
//! (`s3://raw/2026-11-30/events.jsonl`) or by a glob over an object listing
//! (`s3://raw/2026-11-30/*.jsonl`).
//!
//! An object is read sequentially from a byte offset with ranged GETs, each pinned to the ETag
//! the object had when the run listed it (`If-Match`): an object replaced while a run reads it
//! fails the read instead of mixing two versions. Its identity across runs is the same as a
//! file's: the [`super::Prefix`] of what the job read (bytes and CRC-32C). An object cannot be
//! seeked into without trusting that it is the same, so a resumed run reads the prefix again
//! (one GET of those bytes), checks it, and reads on; an object that was replaced by a longer
//! one with the same beginning counts as grown, like an appended file.
//!
//! Globs: `*` and `?` match within one `/`-separated component, `**` matches any number of
//! components. The listing starts at the longest prefix without a wildcard; matches are read in
//! key order. Hidden components (starting with `.` or `_`) are skipped unless the pattern names
//! them.

use std::io::{self, Read};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt};

use super::compression::InputCompression;
use super::glob::{glob_matches, is_glob};
use super::input::{Input, OffsetRead};
use crate::error::{Error, Result};

/// An object of an object store, as an input.
#[derive(Clone)]
pub(crate) struct ObjectInput {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    /// The ETag when the run listed it; every read is pinned to it.
    etag: Option<String>,
    /// The runtime the blocking reader runs its requests on.
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for ObjectInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectInput")
            .field("key", &self.key.as_ref())
            .field("etag", &self.etag)
            .finish()
    }
}

impl OffsetRead for ObjectInput {
    /// The first `n` bytes (fewer if it is shorter), in one ranged request pinned to the ETag.
    fn first_bytes(&self, n: u64) -> io::Result<Vec<u8>> {
        let options = GetOptions {
            if_match: self.etag.clone(),
            range: Some(GetRange::Bounded(0..n)),
            ..GetOptions::default()
        };
        let (store, key) = (self.store.clone(), self.key.clone());
        self.runtime
            .block_on(async move { store.get_opts(&key, options).await?.bytes().await })
            .map(|b| b.to_vec())
            .map_err(io_error)
    }

    /// A blocking reader of the object from byte `from` on, each request pinned to the ETag.
    fn open(&self, from: u64) -> io::Result<Box<dyn Read + Send>> {
        let options = GetOptions {
            if_match: self.etag.clone(),
            range: (from > 0).then_some(GetRange::Offset(from)),
            ..GetOptions::default()
        };
        let (store, key) = (self.store.clone(), self.key.clone());
        let stream = match self.runtime.block_on(async move {
            match store.get_opts(&key, options).await {
                Ok(r) => Ok(r.into_stream()),
                // An offset at the end of the object: nothing more to read.
                Err(object_store::Error::NotModified { .. }) => {
                    Ok(futures_util::stream::empty().boxed())
                }
                Err(e) => Err(e),
            }
        }) {
            Ok(s) => s,
            // A range that starts at the end of the object is refused by S3 (416).
            Err(e) if from > 0 && is_range_not_satisfiable(&e) => {
                futures_util::stream::empty().boxed()
            }
            Err(e) => return Err(io_error(e)),
        };
        Ok(Box::new(ObjectReader {
            stream,
            chunk: Bytes::new(),
            runtime: self.runtime.clone(),
        }))
    }
}

fn is_range_not_satisfiable(e: &object_store::Error) -> bool {
    let text = e.to_string();
    text.contains("416") || text.contains("InvalidRange") || text.contains("Range Not Satisfiable")
}

fn io_error(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::Precondition { .. } => {
            io::Error::other("the object was replaced while the job read it (its ETag changed)")
        }
        object_store::Error::NotFound { .. } => {
            io::Error::new(io::ErrorKind::NotFound, "the object is gone")
        }
        e => io::Error::other(e),
    }
}

/// A ranged GET's body, read as a blocking [`Read`].
struct ObjectReader {
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
    runtime: tokio::runtime::Handle,
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.runtime.block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Ok(b)) => self.chunk = b,
                Some(Err(e)) => return Err(io_error(e)),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        let _ = self.chunk.split_to(n);
        Ok(n)
    }
}

impl Input {
    /// The object `key` of `store`, named `url` in messages and checkpoints (e.g.
    /// `s3://raw/events.jsonl`). Call it inside a Tokio runtime: its reads run on it.
    pub async fn object(store: Arc<dyn ObjectStore>, url: &str, key: &str) -> Result<Input> {
        let path = ObjectPath::parse(key)
            .map_err(|e| Error::InvalidInput(format!("input `{url}`: {e}")))?;
        let meta = store
            .head(&path)
            .await
            .map_err(|e| Error::io("open input", url, io_error(e)))?;
        Input::of_meta(store, url, meta).await
    }

    async fn of_meta(store: Arc<dyn ObjectStore>, url: &str, meta: ObjectMeta) -> Result<Input> {
        let compression = match InputCompression::from_path(url) {
            Some(c) => Some(c),
            None if meta.size == 0 => None,
            None => {
                let head = store
                    .get_opts(
                        &meta.location,
                        GetOptions {
                            range: Some(GetRange::Bounded(0..meta.size.min(4))),
                            ..GetOptions::default()
                        },
                    )
                    .await
                    .map_err(|e| Error::io("read input", url, io_error(e)))?
                    .bytes()
                    .await
                    .map_err(|e| Error::io("read input", url, io_error(e)))?;
                InputCompression::from_magic(&head)
            }
        };
        let mut input = Input::listed(
            store,
            url.to_owned(),
            meta,
            tokio::runtime::Handle::current(),
        );
        input.compression = compression;
        Ok(input)
    }

    /// The object `meta` lists, named `url`, its compression not found yet.
    fn listed(
        store: Arc<dyn ObjectStore>,
        url: String,
        meta: ObjectMeta,
        runtime: tokio::runtime::Handle,
    ) -> Input {
        let object = ObjectInput {
            store,
            key: meta.location,
            etag: meta.e_tag.clone(),
            runtime,
        };
        Input::from_object(url, meta.size, meta.e_tag, None, Arc::new(object))
    }

    /// Finds the compression of an object listed by a glob whose name does not give it, from
    /// its first bytes (one ranged read, pinned to the version it was listed at). Every other
    /// input has its compression already: then this does nothing.
    pub(crate) async fn find_compression(&mut self) -> Result<()> {
        let (true, Some(object)) = (self.compression_pending, self.object.clone()) else {
            return Ok(());
        };
        let head = tokio::task::spawn_blocking(move || object.first_bytes(4))
            .await
            .map_err(|e| Error::io("read input", &self.display, e.into()))?
            .map_err(|e| Error::io("read input", &self.display, e))?;
        self.compression = InputCompression::from_magic(&head);
        self.compression_pending = false;
        Ok(())
    }

    /// The objects of `store` whose keys match `pattern`, in key order: a key, or a glob (`*`,
    /// `?` and `[..]` within a `/`-separated component, `**` across components; components
    /// starting with `.` or `_` match only when the pattern names them; the rule of
    /// `glob.rs`, as for files). Each is named `<url_root>/<key>`. A glob that matches
    /// nothing is an empty list. Call it inside a Tokio runtime.
    pub async fn objects_matching(
        store: Arc<dyn ObjectStore>,
        url_root: &str,
        pattern: &str,
    ) -> Result<Vec<Input>> {
        let url_root = url_root.trim_end_matches('/');
        let pattern = pattern.trim_start_matches('/');
        if !is_glob(pattern) {
            let url = format!("{url_root}/{pattern}");
            return Ok(vec![Input::object(store, &url, pattern).await?]);
        }
        let components: Vec<&str> = pattern.split('/').collect();
        let fixed = components.iter().take_while(|c| !is_glob(c)).count();
        let prefix = components[..fixed].join("/");
        let listing = if prefix.is_empty() {
            store.list(None)
        } else {
            store.list(Some(&ObjectPath::from(prefix.as_str())))
        };
        let mut metas: Vec<ObjectMeta> = listing.try_collect().await.map_err(|e| {
            Error::io(
                "list the inputs",
                format!("{url_root}/{pattern}"),
                io_error(e),
            )
        })?;
        metas.retain(|m| glob_matches(pattern, m.location.as_ref()));
        metas.sort_by(|a, b| a.location.cmp(&b.location));
        // Each object's compression, where its name does not give it, is found from its
        // first bytes once the run knows it will read it ([`Input::find_compression`]): a run
        // over a million taken objects makes no request per object.
        let runtime = tokio::runtime::Handle::current();
        let inputs = metas
            .into_iter()
            .map(|meta| {
                let url = format!("{url_root}/{}", meta.location);
                let compression = InputCompression::from_path(&url);
                let pending = compression.is_none() && meta.size > 0;
                let mut input = Input::listed(store.clone(), url, meta, runtime.clone());
                (input.compression, input.compression_pending) = (compression, pending);
                input
            })
            .collect();
        Ok(inputs)
    }

    /// The inputs an `s3://bucket/key` URL names: one object, or every object a glob in the key
    /// matches (`s3://raw/2026-11-30/*.jsonl`). The store is configured from the `AWS_*`
    /// environment variables, as an `s3://` sink is. Call it inside a Tokio runtime.
    #[cfg(feature = "s3")]
    pub async fn s3(url: &str) -> Result<Vec<Input>> {
        let rest = crate::storage::Location::s3_rest(url)
            .ok_or_else(|| Error::Config(format!("`{url}` is not an s3:// URL")))?;
        let (bucket, key) = rest
            .split_once('/')
            .filter(|(b, k)| !b.is_empty() && !k.is_empty())
            .ok_or_else(|| {
                Error::Config(format!(
                    "`{url}` names no object; use s3://bucket/key or s3://bucket/prefix/*.jsonl"
                ))
            })?;
        let store = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| Error::Config(format!("`{url}`: {e}")))?;
        Input::objects_matching(Arc::new(store), &format!("s3://{bucket}"), key).await
    }
}
