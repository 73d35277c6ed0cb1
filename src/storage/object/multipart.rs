//! S3's commit primitive: one multipart upload to the final key per part file, completed at
//! commit, and the proof of "already committed" from the multipart ETag.

use object_store::multipart::PartId;
use object_store::ObjectStoreExt;

use super::Inner;
use crate::protocol::{
    split_rel, upload_leftover_id, validate_rel_path, CommitOutcome, Committable, PartName,
    UploadedPart,
};
use crate::storage::CommitState;
use crate::{Error, Result};

/// The multipart ETag S3 gives an object completed from `parts`: `md5(concat(md5(part)))-N`.
#[cfg(feature = "s3")]
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
    Some(format!(
        "{}-{}",
        super::super::sigv4::hex(&Md5::digest(&concat)),
        parts.len()
    ))
}

/// Without the `s3` feature no store completes multipart uploads, so no ETag is expected.
#[cfg(not(feature = "s3"))]
fn multipart_etag(_parts: &[UploadedPart]) -> Option<String> {
    None
}

impl Inner {
    pub(super) async fn commit_multipart(
        &self,
        c: &Committable,
        upload_id: &str,
        parts: &[UploadedPart],
    ) -> Result<CommitOutcome> {
        let multipart = self.multipart.as_ref().ok_or_else(|| {
            Error::NotSupported(format!("`{}` cannot complete multipart uploads", self.url))
        })?;
        let key = self.key(&c.final_path)?;
        let expected = multipart_etag(parts);
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
        let started = std::time::Instant::now();
        let completed = multipart.complete_multipart(&key, &id, ids).await;
        tracing::debug!(
            file = %c.final_path,
            upload_id = %id,
            parts = parts.len(),
            bytes = c.size_bytes,
            ok = completed.is_ok(),
            duration_ms = started.elapsed().as_millis() as u64,
            "multipart upload completed"
        );
        let first_error = match completed {
            Ok(_) => return Ok(CommitOutcome::Committed),
            Err(e) => e,
        };
        // Ambiguous: the upload may have completed before (S3 answers 404 `NoSuchUpload`,
        // which object_store reports as `NotFound`), or the answer was lost. Only the object
        // itself can prove which.
        match self.store.head(&key).await {
            Ok(meta) => self.committed_before(
                c,
                &meta,
                expected,
                &format!("completing the upload failed ({first_error})"),
            ),
            Err(object_store::Error::NotFound { .. }) => {
                if matches!(first_error, object_store::Error::NotFound { .. }) {
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

    /// Where the multipart upload of `c` stands: the object proven to be `c`, another object,
    /// the upload still open, or neither.
    pub(super) async fn probe_multipart(
        &self,
        c: &Committable,
        upload_id: &str,
        parts: &[UploadedPart],
    ) -> Result<CommitState> {
        let inner = self;
        let key = inner.key(&c.final_path)?;
        match inner.store.head(&key).await {
            Ok(meta) => {
                let etag = meta
                    .e_tag
                    .as_deref()
                    .map(|e| e.trim_matches('"').to_string());
                let expected = multipart_etag(parts);
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
                        .any(|u| u.key == key.as_ref() && u.upload_id == upload_id),
                    None => {
                        let id = upload_leftover_id(&c.final_path, upload_id);
                        inner
                            .list_leftovers(false)
                            .await?
                            .iter()
                            .any(|l| l.path == id)
                    }
                };
                Ok(if pending {
                    CommitState::Pending
                } else {
                    CommitState::Missing
                })
            }
            Err(e) => Err(inner.store_error("check", &c.final_path, e)),
        }
    }

    /// Aborts the multipart upload `upload_id` to `final_path`, if it is of the shape filesink
    /// writes; an upload that is gone already counts as aborted.
    pub(super) async fn abort_upload(&self, final_path: &str, upload_id: &str) -> Result<()> {
        let inner = self;
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
        match multipart
            .abort_multipart(&key, &upload_id.to_string())
            .await
        {
            // 404 `NoSuchUpload`: aborted or completed before.
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                tracing::debug!(file = %final_path, upload_id, "multipart upload aborted");
                Ok(())
            }
            Err(e) => Err(inner.store_error("abort the upload of", final_path, e)),
        }
    }
}
