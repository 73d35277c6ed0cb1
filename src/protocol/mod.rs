//! The protocol's data: what a checkpoint holds, how files and metadata are named, and which
//! format versions this build reads.
//!
//! This module is the leaf of the crate: it uses nothing of it but [`crate::Error`]. Backends
//! ([`crate::storage`]), the sink ([`crate::sink`]) and the coordinator ([`crate::job`])
//! all speak in its types, so none of them needs to import another to agree on a committable, a
//! name or a path. The layering, and how to check it, is in `docs/ARCHITECTURE.md`.
//!
//! - [`state`]: [`Committable`], [`PendingHandle`], [`WriterState`], [`ResumableFile`],
//!   [`CommitOutcome`];
//! - [`names`]: the part-name grammar ([`PartName`]) and the checks of relative paths;
//! - [`paths`]: the metadata layout under a sink's base ([`METADATA_DIR`], manifests, ownership
//!   records) and the job-name rule;
//! - [`stats`]: [`FileStats`], the per-file statistics a committable carries for a table;
//! - [`version`]: [`FORMAT_VERSION`] (and when a record is written with a newer one) and the
//!   one versioned decoder, [`decode_versioned`];
//! - [`metric`]: the names of the metrics filesink emits (a table);
//! - [`BucketId`]: the validated directory of a part file.

pub(crate) mod bucket_id;
pub mod metric;
pub mod names;
pub mod paths;
pub mod state;
pub mod stats;
pub mod version;

pub use bucket_id::{BucketId, MAX_COMPONENT_BYTES};
pub use names::{
    is_metadata_temp_name, looks_in_progress, metadata_temp_name, parse_hidden_name, split_rel,
    validate_final_part_path, validate_hidden_path, validate_metadata_dir, validate_metadata_path,
    validate_rel_path, validate_visible_path, PartName,
};
pub use paths::{
    checkpoints_dir, job_dir, manifest_path, owners_dir, validate_job_name, DELTA_LOG_DIR,
    FINISHED_DIR, INPUTS_DIR, JOBS_DIR, JOB_NAME_MAX_BYTES, METADATA_DIR, METADATA_NAMESPACES,
    OWNER_LOCK_FILE, SINK_FILE,
};
pub use state::{
    upload_leftover_id, CarriedFile, CommitOutcome, Committable, PendingHandle, PreparedCheckpoint,
    ResumableFile, UploadedPart, WriterState,
};
pub use stats::{ColumnPath, FileStats};
pub use version::{
    check_version, decode_versioned, FORMAT_VERSION, FORMAT_VERSION_CARRIED, FORMAT_VERSION_MAX,
    FORMAT_VERSION_STATS,
};
