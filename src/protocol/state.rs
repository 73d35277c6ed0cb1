//! What goes into a checkpoint: [`Committable`]s (handles to pending files) and the
//! [`WriterState`] (files still open and resumable), and what committing one did
//! ([`CommitOutcome`]).
//!
//! Both are serde types with an explicit `version`. [`Committable::from_json`] and
//! [`WriterState::from_json`] refuse versions newer than [`FORMAT_VERSION_MAX`]
//! ([`decode_versioned`]) and validate every path
//! ([`super::names`]), so state that is corrupt or foreign is reported, never acted on. A
//! committable is written with version 1 ([`FORMAT_VERSION`]) unless it carries
//! [`Committable::stats`] (version 2, [`Committable::format_version`]); a writer state with
//! version 1 unless it carries files of a pre-commit merge ([`WriterState::carried`], version
//! 3, [`WriterState::format_version`]). Golden files under `fixtures/state/v1/`,
//! `fixtures/state/v2/` and `fixtures/state/v3/` pin the encodings: every later build must keep
//! reading them.

use serde::{Deserialize, Serialize};

use super::names::{
    validate_final_path, validate_hidden_path, validate_in_progress_path, validate_writer_id,
};
use super::version::{
    check_version, decode_versioned, FORMAT_VERSION, FORMAT_VERSION_CARRIED, FORMAT_VERSION_STATS,
};
#[cfg(doc)]
use super::FORMAT_VERSION_MAX;
use super::{BucketId, FileStats};
use crate::{Error, Result};

/// A handle to one pending part file: durable, invisible, and committable by any process.
///
/// Produced by [`crate::SinkWriter::prepare_commit`]; consumed by [`crate::Committer::commit`].
/// Store it in the checkpoint; replaying it after a crash is always safe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committable {
    /// Serialization format version: [`Committable::format_version`] when written by this
    /// build.
    pub version: u32,
    /// The identity of the writer that produced the file.
    pub writer_id: String,
    /// The checkpoint at which the file became pending.
    pub checkpoint_id: u64,
    /// The bucket (partition directory) of the file.
    pub bucket: BucketId,
    /// Where the file becomes visible, relative to the base location.
    pub final_path: String,
    /// The file's exact size.
    pub size_bytes: u64,
    /// CRC-32C of the file's content, checked before reporting "already committed".
    pub crc32c: u32,
    /// Records in the file.
    pub record_count: u64,
    /// Where the pending bytes are, per backend.
    pub pending: PendingHandle,
    /// Hidden files made obsolete by this one (the originals of resumed row files); removed
    /// after this committable is committed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    /// The file's statistics, computed from its Parquet footer at the vote by a sink built
    /// with [`crate::SinkBuilder::file_stats`] (a table's log needs them); `None` otherwise.
    /// Present only in version 2 and later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<FileStats>,
}

/// Where a pending file's bytes wait for commit. One variant per commit primitive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PendingHandle {
    /// A closed, fsynced hidden file beside its final name, committed by rename without replace.
    LocalFile {
        /// The hidden in-progress path, relative to the base location.
        in_progress_path: String,
    },
    /// An S3 multipart upload to the final key with every part uploaded, committed by
    /// CompleteMultipartUpload.
    Multipart {
        /// The upload id S3 gave at CreateMultipartUpload.
        upload_id: String,
        /// Every uploaded part, in order.
        parts: Vec<UploadedPart>,
    },
    /// A hidden staging object beside the final key on a store without multipart uploads,
    /// committed by copy-if-not-exists.
    Staged {
        /// The hidden staging object, relative to the base location.
        staging_path: String,
    },
}

/// One uploaded part of a multipart upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadedPart {
    /// The part number, from 1.
    pub number: u32,
    /// The ETag S3 returned for the part.
    pub etag: String,
}

impl PendingHandle {
    /// The identifier under which a backend lists this pending file as a leftover
    /// ([`crate::storage::Leftover::path`]): the hidden path, or `<final path>#<upload id>`.
    pub fn leftover_id(&self, final_path: &str) -> String {
        match self {
            PendingHandle::LocalFile { in_progress_path } => in_progress_path.clone(),
            PendingHandle::Multipart { upload_id, .. } => upload_leftover_id(final_path, upload_id),
            PendingHandle::Staged { staging_path } => staging_path.clone(),
        }
    }
}

/// The leftover id of the multipart upload `upload_id` to `final_path`.
pub fn upload_leftover_id(final_path: &str, upload_id: &str) -> String {
    format!("{final_path}#{upload_id}")
}

/// The part of a writer that must survive a restart: row-format files kept open across the
/// checkpoint, each with the length that is durable, and the small Parquet files a pre-commit
/// merge carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterState {
    /// Serialization format version ([`FORMAT_VERSION`] when written by this build).
    pub version: u32,
    /// The identity of the writer the state belongs to.
    pub writer_id: String,
    /// The format the files are written in (`parquet`, `jsonl`, `csv`); a state is only
    /// restored into a sink of the same format.
    pub format: String,
    /// The checkpoint this state was taken at.
    pub checkpoint_id: u64,
    /// Files still in progress that a restored writer continues.
    pub in_progress: Vec<ResumableFile>,
    /// Small Parquet files a pre-commit merge carries: sealed (durable, hidden), never
    /// committed themselves, merged into a later file that supersedes them
    /// ([`crate::SinkBuilder::merge_small_files`]). Present only in format version 3 and
    /// later ([`FORMAT_VERSION_CARRIED`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<CarriedFile>,
}

/// One sealed small Parquet file that a pre-commit merge carries across checkpoints: its
/// records are before the checkpoint's source position, so the file must outlive every restore
/// until a committed merged file supersedes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedFile {
    /// The bucket of the file.
    pub bucket: BucketId,
    /// The hidden in-progress path of the sealed file, relative to the base location.
    pub in_progress_path: String,
    /// The final path the file would have had (and has, when it is committed alone).
    pub final_path: String,
    /// The file's exact size.
    pub size_bytes: u64,
    /// CRC-32C of the file's content, checked when it is read back for the merge.
    pub crc32c: u32,
    /// Records in the file.
    pub record_count: u64,
    /// The checkpoint whose vote carried it.
    pub checkpoint_id: u64,
    /// When it was carried, in milliseconds since the Unix epoch (for the visibility delay).
    pub carried_at_ms: i64,
}

/// One in-progress row-format file as of a checkpoint (Flink's `ResumeRecoverable`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumableFile {
    /// The bucket of the file.
    pub bucket: BucketId,
    /// The hidden in-progress path, relative to the base location.
    pub in_progress_path: String,
    /// The final path the file would have had.
    pub final_path: String,
    /// Bytes that were durable at the checkpoint. Bytes after them are discarded on restore.
    pub durable_len_bytes: u64,
    /// CRC-32C of the durable bytes, checked when they are restored.
    pub crc32c: u32,
    /// Records in the durable bytes.
    pub record_count: u64,
    /// When the file was created, in milliseconds since the Unix epoch (for the rollover
    /// interval).
    pub created_at_ms: i64,
    /// Hidden files this one already supersedes (see [`Committable::supersedes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
}

/// What one writer's vote hands out for one checkpoint
/// ([`crate::SinkWriter::prepare_commit`]): store all of it in the checkpoint, and commit the
/// committables once the checkpoint is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a checkpoint must store both the committables and the state"]
pub struct PreparedCheckpoint {
    /// The checkpoint voted on.
    pub checkpoint_id: u64,
    /// The files that became pending since the last checkpoint.
    pub committables: Vec<Committable>,
    /// The writer's state at this checkpoint: the row files it keeps open.
    pub state: WriterState,
}

/// What committing one committable did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitOutcome {
    /// The file became visible now.
    Committed,
    /// The file was already visible with the committable's exact content (Flink's
    /// `signalAlreadyCommitted()`); nothing changed.
    AlreadyCommitted,
}

impl Committable {
    /// The lowest format version that holds this committable: [`FORMAT_VERSION_STATS`] with
    /// [`Committable::stats`], [`FORMAT_VERSION`] without.
    pub fn format_version(&self) -> u32 {
        if self.stats.is_some() {
            FORMAT_VERSION_STATS
        } else {
            FORMAT_VERSION
        }
    }

    /// Serializes to JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("committables always serialize")
    }

    /// Reads JSON written by [`Committable::to_json`] of this or an older build, and checks that
    /// every path in it is safe to act on.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let c: Committable = decode_versioned("committable", bytes)?;
        c.validate()?;
        Ok(c)
    }

    /// Checks the invariants a backend relies on: relative paths inside the base, a hidden
    /// pending name in the final file's directory, a visible final name.
    pub fn validate(&self) -> Result<()> {
        let what = || format!("committable for `{}`", self.final_path);
        check_version(what, self.version)?;
        validate_writer_id(&self.writer_id).map_err(|e| Error::corrupt(what(), e))?;
        validate_final_path(&self.final_path, &self.bucket)
            .map_err(|e| Error::corrupt(what(), e))?;
        match &self.pending {
            PendingHandle::LocalFile { in_progress_path } => {
                validate_in_progress_path(in_progress_path, &self.final_path)
                    .map_err(|e| Error::corrupt(what(), e))?;
            }
            PendingHandle::Staged { staging_path } => {
                validate_in_progress_path(staging_path, &self.final_path)
                    .map_err(|e| Error::corrupt(what(), e))?;
            }
            PendingHandle::Multipart { upload_id, parts } => {
                if upload_id.is_empty() || upload_id.contains(['/', '#', '\0']) {
                    return Err(Error::corrupt(what(), "bad upload id"));
                }
                if parts.is_empty() || parts.len() > 10_000 {
                    return Err(Error::corrupt(
                        what(),
                        "a multipart upload has 1 to 10,000 parts",
                    ));
                }
                for (i, p) in parts.iter().enumerate() {
                    if p.number as usize != i + 1 || p.etag.is_empty() {
                        return Err(Error::corrupt(
                            what(),
                            "parts must be numbered 1, 2, … with ETags",
                        ));
                    }
                }
            }
        }
        for s in &self.supersedes {
            validate_hidden_path(s).map_err(|e| Error::corrupt(what(), e))?;
        }
        if let Some(stats) = &self.stats {
            if self.version < FORMAT_VERSION_STATS {
                return Err(Error::corrupt(
                    what(),
                    format!(
                        "it has statistics, which need format version {FORMAT_VERSION_STATS}, \
                         but says version {}",
                        self.version
                    ),
                ));
            }
            // Assert in pairs: the footer's count was checked against the writer's at the
            // vote; it must still agree when read back.
            if stats.num_records != self.record_count {
                return Err(Error::corrupt(
                    what(),
                    format!(
                        "its statistics count {} records, the committable {}",
                        stats.num_records, self.record_count
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl WriterState {
    /// The lowest format version that holds this state: [`FORMAT_VERSION_CARRIED`] with
    /// carried files, [`FORMAT_VERSION`] without.
    pub fn format_version(&self) -> u32 {
        if self.carried.is_empty() {
            FORMAT_VERSION
        } else {
            FORMAT_VERSION_CARRIED
        }
    }

    /// Serializes to JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("writer state always serializes")
    }

    /// Reads JSON written by [`WriterState::to_json`] of this or an older build, and checks that
    /// every path in it is safe to act on.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let s: WriterState = decode_versioned("writer state", bytes)?;
        s.validate()?;
        Ok(s)
    }

    /// Checks version, writer id and every path.
    pub fn validate(&self) -> Result<()> {
        let what = || format!("writer state of writer `{}`", self.writer_id);
        check_version(what, self.version)?;
        validate_writer_id(&self.writer_id).map_err(|e| Error::corrupt(what(), e))?;
        for f in &self.in_progress {
            validate_final_path(&f.final_path, &f.bucket).map_err(|e| Error::corrupt(what(), e))?;
            validate_in_progress_path(&f.in_progress_path, &f.final_path)
                .map_err(|e| Error::corrupt(what(), e))?;
            for s in &f.supersedes {
                validate_hidden_path(s).map_err(|e| Error::corrupt(what(), e))?;
            }
        }
        if !self.carried.is_empty() && self.version < FORMAT_VERSION_CARRIED {
            return Err(Error::corrupt(
                what(),
                format!(
                    "it carries files, which need format version {FORMAT_VERSION_CARRIED}, but \
                     says version {}",
                    self.version
                ),
            ));
        }
        for f in &self.carried {
            validate_final_path(&f.final_path, &f.bucket).map_err(|e| Error::corrupt(what(), e))?;
            validate_in_progress_path(&f.in_progress_path, &f.final_path)
                .map_err(|e| Error::corrupt(what(), e))?;
        }
        Ok(())
    }
}
