//! Listing an object store: leftovers (hidden staging objects, incomplete multipart uploads),
//! visible files, metadata directories, and the bases of other sinks, which a listing never
//! enters.

use object_store::ObjectStoreExt;

use super::Inner;
use crate::protocol::{
    looks_in_progress, split_rel, upload_leftover_id, validate_rel_path, PartName, SINK_FILE,
};
use crate::storage::{Leftover, MetadataEntry, OtherSinks, VisibleFile};
use crate::{Error, Result};

impl Inner {
    /// Every object under the prefix.
    pub(super) async fn list_all(&self) -> Result<Vec<object_store::ObjectMeta>> {
        use futures_util::TryStreamExt;
        self.store
            .list(Some(&self.key("")?))
            .try_collect()
            .await
            .map_err(|e| self.store_error("list", "", e))
    }

    /// The leftovers under the prefix: on S3 the incomplete multipart uploads, and with
    /// `hidden_objects` the hidden objects too (the carried files of a pre-commit merge, the
    /// only hidden objects a sink writes there), which costs a listing of every object; on
    /// other stores the hidden (staged) objects, always.
    pub(super) async fn list_leftovers(&self, hidden_objects: bool) -> Result<Vec<Leftover>> {
        let inner = self;
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
            if hidden_objects {
                out.extend(inner.list_hidden_objects().await?);
            }
        } else {
            out.extend(inner.list_hidden_objects().await?);
        }
        Ok(out)
    }

    /// The hidden objects under the prefix that are, or look like, part files in progress.
    async fn list_hidden_objects(&self) -> Result<Vec<Leftover>> {
        let inner = self;
        let mut out = Vec::new();
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
        Ok(out)
    }

    pub(super) async fn list_metadata(&self, dir: &str) -> Result<Vec<MetadataEntry>> {
        let inner = self;
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

    /// The objects directly in `dir` whose names sort after `after` (all if it is empty), in
    /// ascending byte order, without names starting with `.`. The store lists from `after` on
    /// (S3's `start-after`); the listing is recursive, so objects in directories below `dir`
    /// are listed and dropped.
    pub(super) async fn list_metadata_from(
        &self,
        dir: &str,
        after: &str,
    ) -> Result<Vec<MetadataEntry>> {
        use futures_util::TryStreamExt;
        let prefix = self.key(dir)?;
        let listed: Vec<object_store::ObjectMeta> = if after.is_empty() {
            self.store.list(Some(&prefix)).try_collect().await
        } else {
            let offset = self.key(&format!("{dir}/{after}"))?;
            self.store
                .list_with_offset(Some(&prefix), &offset)
                .try_collect()
                .await
        }
        .map_err(|e| self.store_error("list", dir, e))?;
        let mut out: Vec<MetadataEntry> = listed
            .into_iter()
            .filter_map(|m| {
                let name = m
                    .location
                    .as_ref()
                    .strip_prefix(prefix.as_ref())?
                    .strip_prefix('/')?;
                (!name.contains('/') && !name.starts_with('.') && name > after).then(|| {
                    MetadataEntry {
                        name: name.to_string(),
                        is_dir: false,
                        modified_ms: m.last_modified.timestamp_millis(),
                    }
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    pub(super) async fn other_sinks(&self) -> Result<OtherSinks> {
        let inner = self;
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
                SINK_FILE.to_string()
            } else {
                format!("{dir}/{SINK_FILE}")
            };
            let key = object_store::path::Path::parse(&marker)
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

    pub(super) async fn list_visible(&self) -> Result<Vec<VisibleFile>> {
        let inner = self;
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
                        modified_ms: m.last_modified.timestamp_millis(),
                    })
            })
            .collect())
    }
}

/// The bases of other sinks below this one in a listing: every `<dir>/_filesink/sink.json`
/// with `dir` not empty. Nothing under them is this sink's.
fn nested_bases(inner: &Inner, all: &[object_store::ObjectMeta]) -> Vec<String> {
    all.iter()
        .filter_map(|m| {
            let rel = inner
                .rel(m.location.as_ref())
                .or_else(|| inner.prefix.is_empty().then_some(m.location.as_ref()))?;
            let dir = rel.strip_suffix(SINK_FILE)?.strip_suffix('/')?;
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
                    let marker = format!("{dir}/{SINK_FILE}");
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
