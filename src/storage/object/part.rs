//! The in-progress part file on an object store: a buffer that goes out as multipart parts
//! (a bounded number in flight) or, on a store without multipart uploads, as one staging
//! object at the vote.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};
use tokio::task::JoinSet;

use super::Inner;
use crate::protocol::{PendingHandle, UploadedPart};
use crate::storage::{PartLocation, PartWriter};
use crate::{Error, Result};

/// An in-progress part on an object store.
pub(super) struct ObjectPart {
    pub(super) inner: Arc<Inner>,
    pub(super) location: PartLocation,
    /// The multipart upload (S3), or `None` for a staged object.
    pub(super) upload_id: Option<String>,
    pub(super) buffer: Vec<u8>,
    pub(super) len: u64,
    pub(super) next_part: usize,
    pub(super) in_flight: JoinSet<Result<(usize, String)>>,
    pub(super) done: Vec<(usize, String)>,
    /// Staged objects: the length last PUT, so a repeated sync does not PUT again.
    pub(super) staged_len: Option<u64>,
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
        let bytes_len = bytes.len();
        self.in_flight.spawn(async move {
            let multipart = inner.multipart.as_ref().expect("multipart store");
            let key = inner.key(&final_path)?;
            let started = std::time::Instant::now();
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
            tracing::trace!(
                file = %final_path,
                part = idx,
                bytes = bytes_len,
                duration_ms = started.elapsed().as_millis() as u64,
                "part uploaded"
            );
            Ok((idx, part.content_id))
        });
        Ok(())
    }

    /// Seals this part as a carried file ([`crate::storage::Parts::seal_carried`]): its
    /// whole content, still in the buffer, as one hidden object written by a plain PUT under
    /// its in-progress name (a staged object's own write), then its multipart upload aborted,
    /// if it has one. The PUT first: a crash between the two leaves an upload and an object,
    /// both unreferenced until the vote returns, which a restore removes.
    pub(super) async fn seal_carried(mut self) -> Result<PendingHandle> {
        if self.next_part > 0 {
            return Err(Error::InvalidInput(format!(
                "`{}` has uploaded parts: it cannot be carried (a multipart upload in progress \
                 cannot be read back)",
                self.location.final_path
            )));
        }
        let upload_id = self.upload_id.take();
        // Without an upload, `sync` is the staged object's PUT of the whole buffer.
        self.sync().await?;
        if let Some(id) = upload_id {
            self.inner
                .abort_upload(&self.location.final_path, &id)
                .await?;
        }
        Ok(PendingHandle::Staged {
            staging_path: self.location.in_progress_path.clone(),
        })
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

    fn can_carry(&self) -> bool {
        // The whole file is still in the buffer: no part of it went out.
        self.next_part == 0
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

    async fn seal_carried(self: Box<Self>) -> Result<PendingHandle> {
        ObjectPart::seal_carried(*self).await
    }
}
