//! The commit primitive of stores without multipart uploads: the whole part file as a hidden
//! staging object, committed by copy-if-not-exists to the final key.

use object_store::ObjectStoreExt;

use super::Inner;
use crate::protocol::{CommitOutcome, Committable};
use crate::storage::CommitState;
use crate::{Error, Result};

impl Inner {
    pub(super) async fn commit_staged(
        &self,
        c: &Committable,
        staging: &str,
    ) -> Result<CommitOutcome> {
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

    /// Where the staged commit of `c` stands: the object proven to be `c`, another object, the
    /// staging object still there, or neither.
    pub(super) async fn probe_staged(
        &self,
        c: &Committable,
        staging_path: &str,
    ) -> Result<CommitState> {
        let inner = self;
        let key = inner.key(&c.final_path)?;
        match inner.store.get(&key).await {
            Ok(got) => {
                let bytes = got
                    .bytes()
                    .await
                    .map_err(|e| inner.store_error("read", &c.final_path, e))?;
                Ok(
                    if bytes.len() as u64 == c.size_bytes && crc32c::crc32c(&bytes) == c.crc32c {
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
        }
    }
}
