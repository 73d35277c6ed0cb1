//! The capability probe: what the store honours (conditional puts) and how the bucket is set
//! up (a lifecycle rule for incomplete uploads), found out by trying, not assumed.

use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::{Inner, ObjectStorage, S3Capabilities};
use crate::Result;

impl ObjectStorage {
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
}

impl Inner {
    /// Whether a put with `If-None-Match: *` refuses to replace an object, found out once by
    /// trying it on a probe object under `_filesink/probe/`.
    pub(super) async fn conditional_put(&self) -> Result<bool> {
        self.conditional_put
            .get_or_try_init(|| async {
                let probe = format!(
                    "{}/probe/{}",
                    crate::protocol::METADATA_DIR,
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
}
