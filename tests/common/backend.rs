//! Backends for the conformance suite: local disk, the in-memory object store (generic staged
//! commit) and two real S3 servers (Garage, which ignores conditional writes, and Ceph's
//! radosgw, which honours them; `./scripts/test` starts both). Each gives a fresh sink location
//! and reads the visible output back.

use std::sync::Arc;

use filesink::storage::{LocalStorage, ObjectStorage, Storage};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::ClientConfigKey;
use object_store::{ObjectStore, ObjectStoreExt};

pub enum Kind {
    Local(tempfile::TempDir),
    Memory(Arc<object_store::memory::InMemory>),
    S3 {
        store: Arc<dyn ObjectStore>,
        bucket: String,
        prefix: String,
        /// The store's configuration, or `None` for the `AWS_*` environment (Garage).
        options: Option<Vec<(AmazonS3ConfigKey, String)>>,
    },
}

pub struct Backend {
    pub name: &'static str,
    pub kind: Kind,
    pub storage: Arc<dyn Storage>,
    /// Whether a multipart upload is the commit primitive (S3).
    pub multipart: bool,
    /// Whether the store refuses to replace an object on a put with `If-None-Match: *`
    /// (local disk, memory and Ceph do; Garage does not).
    pub conditional_put: bool,
}

impl Backend {
    pub fn local() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(LocalStorage::new(dir.path()).unwrap());
        Backend {
            name: "local",
            kind: Kind::Local(dir),
            storage,
            multipart: false,
            conditional_put: true,
        }
    }

    pub fn memory() -> Backend {
        let mem = Arc::new(object_store::memory::InMemory::new());
        let storage =
            Arc::new(ObjectStorage::generic(mem.clone(), "lake/out", "memory://lake/out").unwrap());
        Backend {
            name: "memory",
            kind: Kind::Memory(mem),
            storage,
            multipart: false,
            conditional_put: true,
        }
    }

    /// A fresh prefix in the Garage bucket of the `AWS_*` environment, or `None` if no server
    /// is set up.
    pub fn s3() -> Option<Backend> {
        let bucket = std::env::var("FILESINK_S3_BUCKET").ok()?;
        Some(Self::s3_backend("s3", bucket, None, false))
    }

    /// A fresh prefix in the Ceph radosgw bucket of the `FILESINK_CEPH_*` environment (see
    /// `scripts/ceph`), or `None` if no server is set up.
    pub fn ceph() -> Option<Backend> {
        let bucket = std::env::var("FILESINK_CEPH_BUCKET").ok()?;
        let var = |name: &str| {
            std::env::var(name)
                .unwrap_or_else(|_| panic!("FILESINK_CEPH_BUCKET is set but {name} is not"))
        };
        let options = vec![
            (AmazonS3ConfigKey::Endpoint, var("FILESINK_CEPH_ENDPOINT")),
            (AmazonS3ConfigKey::Region, var("FILESINK_CEPH_REGION")),
            (
                AmazonS3ConfigKey::AccessKeyId,
                var("FILESINK_CEPH_ACCESS_KEY_ID"),
            ),
            (
                AmazonS3ConfigKey::SecretAccessKey,
                var("FILESINK_CEPH_SECRET_ACCESS_KEY"),
            ),
            (
                AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp),
                "true".to_string(),
            ),
        ];
        Some(Self::s3_backend("ceph", bucket, Some(options), true))
    }

    fn s3_backend(
        name: &'static str,
        bucket: String,
        options: Option<Vec<(AmazonS3ConfigKey, String)>>,
        conditional_put: bool,
    ) -> Backend {
        let prefix = format!("conformance/{}", uuid::Uuid::now_v7().simple());
        let storage = Arc::new(
            s3_storage(&bucket, &prefix, &options)
                .with_part_size_bytes(ObjectStorage::MIN_PART_SIZE_BYTES)
                .unwrap(),
        );
        let builder = match &options {
            None => AmazonS3Builder::from_env(),
            Some(options) => options
                .iter()
                .fold(AmazonS3Builder::new(), |b, (k, v)| b.with_config(*k, v)),
        };
        let store: Arc<dyn ObjectStore> =
            Arc::new(builder.with_bucket_name(&bucket).build().unwrap());
        Backend {
            name,
            kind: Kind::S3 {
                store,
                bucket,
                prefix,
                options,
            },
            storage,
            multipart: true,
            conditional_put,
        }
    }

    /// The URL `filesink` is given for this backend, and the environment it needs for it:
    /// none for local disk and Garage (the `AWS_*` environment is Garage's), Ceph's own
    /// configuration as `AWS_*` for Ceph.
    pub fn cli_url(&self) -> (String, Vec<(String, String)>) {
        match &self.kind {
            Kind::Local(dir) => (dir.path().display().to_string(), Vec::new()),
            Kind::S3 {
                bucket,
                prefix,
                options,
                ..
            } => {
                let mut env: Vec<(String, String)> = Vec::new();
                for (key, value) in options.iter().flatten() {
                    let name = match key {
                        AmazonS3ConfigKey::Endpoint => "AWS_ENDPOINT",
                        AmazonS3ConfigKey::Region => "AWS_REGION",
                        AmazonS3ConfigKey::AccessKeyId => "AWS_ACCESS_KEY_ID",
                        AmazonS3ConfigKey::SecretAccessKey => "AWS_SECRET_ACCESS_KEY",
                        _ => continue,
                    };
                    env.push((name.into(), value.clone()));
                }
                if options.is_some() {
                    env.push(("AWS_ALLOW_HTTP".into(), "true".into()));
                }
                (format!("s3://{bucket}/{prefix}"), env)
            }
            Kind::Memory(_) => unreachable!("the CLI cannot write into the in-memory store"),
        }
    }

    pub fn sink(&self) -> filesink::SinkBuilder {
        filesink::Sink::builder_shared(self.storage.clone())
    }

    /// Every visible data object: (path relative to the base, bytes).
    pub async fn visible(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        match &self.kind {
            Kind::Local(dir) => {
                for p in super::visible_files(dir.path()) {
                    let rel = p
                        .strip_prefix(dir.path())
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
            Kind::Memory(mem) => out = list_store(mem.as_ref(), "lake/out").await,
            Kind::S3 { store, prefix, .. } => out = list_store(store.as_ref(), prefix).await,
        }
        out.sort();
        out
    }
}

/// `s3://bucket/prefix` configured by `options`, or by the `AWS_*` environment if `None`.
fn s3_storage(
    bucket: &str,
    prefix: &str,
    options: &Option<Vec<(AmazonS3ConfigKey, String)>>,
) -> ObjectStorage {
    let url = format!("s3://{bucket}/{prefix}");
    match options {
        None => ObjectStorage::s3(&url).unwrap(),
        Some(options) => ObjectStorage::s3_with_options(&url, options.iter().cloned()).unwrap(),
    }
}

/// Every visible object under `prefix` (no component below it starts with `.` or `_`): (path
/// relative to the prefix, bytes).
pub async fn list_store(store: &dyn ObjectStore, prefix: &str) -> Vec<(String, Vec<u8>)> {
    use futures_util::TryStreamExt;
    let listed: Vec<object_store::ObjectMeta> = store
        .list(Some(&Path::from(prefix)))
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for meta in listed {
        let rel = meta
            .location
            .as_ref()
            .strip_prefix(prefix)
            .unwrap()
            .trim_start_matches('/')
            .to_string();
        if rel
            .split('/')
            .any(|c| c.starts_with('.') || c.starts_with('_'))
        {
            continue;
        }
        let bytes = store
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        out.push((rel, bytes.to_vec()));
    }
    out
}

impl Backend {
    /// The same location through a new storage object, as a fresh process would open it.
    pub fn reopen(&self) -> Arc<dyn Storage> {
        match &self.kind {
            Kind::Local(dir) => Arc::new(LocalStorage::new(dir.path()).unwrap()),
            Kind::Memory(mem) => Arc::new(
                ObjectStorage::generic(mem.clone(), "lake/out", "memory://lake/out").unwrap(),
            ),
            Kind::S3 {
                bucket,
                prefix,
                options,
                ..
            } => Arc::new(s3_storage(bucket, prefix, options)),
        }
    }

    /// The same location as an [`ObjectStorage`], for what only it offers (its capability
    /// probe); `None` on local disk.
    pub fn object_storage(&self) -> Option<ObjectStorage> {
        match &self.kind {
            Kind::Local(_) => None,
            Kind::Memory(mem) => {
                Some(ObjectStorage::generic(mem.clone(), "lake/out", "memory://lake/out").unwrap())
            }
            Kind::S3 {
                bucket,
                prefix,
                options,
                ..
            } => Some(s3_storage(bucket, prefix, options)),
        }
    }

    /// A sibling location whose name extends this one's (`out` → `out2`).
    pub fn sibling(&self) -> Arc<dyn Storage> {
        match &self.kind {
            Kind::Local(dir) => {
                Arc::new(LocalStorage::new(dir.path().with_extension("2")).unwrap())
            }
            Kind::Memory(mem) => Arc::new(
                ObjectStorage::generic(mem.clone(), "lake/out2", "memory://lake/out2").unwrap(),
            ),
            Kind::S3 {
                bucket,
                prefix,
                options,
                ..
            } => Arc::new(s3_storage(bucket, &format!("{prefix}2"), options)),
        }
    }

    /// Counts how often each id is visible, reading every visible file with the real reader.
    pub async fn id_counts(
        &self,
        format: &filesink::FileFormat,
    ) -> std::collections::BTreeMap<i64, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for (_, bytes) in self.visible().await {
            for id in super::ids_in_bytes(bytes, format) {
                *counts.entry(id).or_insert(0) += 1;
            }
        }
        counts
    }

    pub async fn assert_exactly_once(&self, format: &filesink::FileFormat, n: i64) {
        let counts = self.id_counts(format).await;
        if let Err(wrong) = filesink::conformance::harness::exactly_once(&counts, 0..n) {
            panic!("[{}] not exactly once in {format:?}: {wrong}", self.name);
        }
    }
}

/// The S3 backend of the environment (Garage under `./scripts/test`); in CI a missing server
/// fails the test, elsewhere it says loudly that the S3 checks did not run.
pub fn s3_or_explain() -> Option<Backend> {
    match Backend::s3() {
        Some(b) => Some(b),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI must run the S3 conformance suite: FILESINK_S3_BUCKET is not set (./scripts/test starts Garage)")
        }
        None => {
            eprintln!(
                "\n*** S3 CONFORMANCE NOT RUN: no S3 server configured. Run `./scripts/test` \
                 (starts Garage on 127.0.0.1 and exports AWS_*), or set AWS_ENDPOINT, \
                 AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and FILESINK_S3_BUCKET. ***\n"
            );
            None
        }
    }
}

/// The Ceph radosgw backend of the environment (`./scripts/test` starts one); in CI a missing
/// server fails the test, elsewhere it says loudly that the Ceph checks did not run.
pub fn ceph_or_explain() -> Option<Backend> {
    match Backend::ceph() {
        Some(b) => Some(b),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI must run the conformance suite on Ceph: FILESINK_CEPH_BUCKET is not set (./scripts/test starts Ceph's radosgw)")
        }
        None => {
            eprintln!(
                "\n*** CEPH CONFORMANCE NOT RUN: no Ceph radosgw configured. Run `./scripts/test` \
                 (starts one on 127.0.0.1), or `./scripts/ceph start DIR` and source DIR/env \
                 (FILESINK_CEPH_ENDPOINT, FILESINK_CEPH_REGION, FILESINK_CEPH_ACCESS_KEY_ID, \
                 FILESINK_CEPH_SECRET_ACCESS_KEY, FILESINK_CEPH_BUCKET). ***\n"
            );
            None
        }
    }
}

#[async_trait::async_trait]
impl filesink::conformance::Location for Backend {
    fn name(&self) -> &str {
        self.name
    }

    fn storage(&self) -> Arc<dyn Storage> {
        self.storage.clone()
    }

    fn reopen(&self) -> Arc<dyn Storage> {
        Backend::reopen(self)
    }

    fn sibling(&self) -> Arc<dyn Storage> {
        Backend::sibling(self)
    }

    async fn visible(&self) -> Vec<(String, Vec<u8>)> {
        Backend::visible(self).await
    }

    fn capabilities(&self) -> filesink::conformance::Capabilities {
        use filesink::conformance::Capabilities;
        match self.kind {
            Kind::Local(_) => Capabilities::local_disk(),
            Kind::Memory(_) => Capabilities::staged(self.conditional_put),
            Kind::S3 { .. } => Capabilities::multipart(self.conditional_put),
        }
    }
}
