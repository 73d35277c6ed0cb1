//! Where the protocol's metadata lives under a sink's base, and the job-name rule those paths
//! depend on.
//!
//! ```text
//! _filesink/                                             METADATA_DIR: marks a sink's base
//! _filesink/sink.json                                    SINK_FILE: the sink's identity
//! _filesink/jobs/<job>/                                  job_dir
//! _filesink/jobs/<job>/checkpoints/<id, 20 digits>.json  manifest_path, checkpoints_dir
//! _filesink/jobs/<job>/owner.lock                        OWNER_LOCK_FILE (local disk)
//! _filesink/jobs/<job>/owners/<run>.<ttl ms>             owners_dir (object stores)
//! _filesink/inputs/<key>/<seq, 20 digits>.json           INPUTS_DIR: the inputs' ledger
//! _filesink/finished/<count>-<uuid>.bin                  FINISHED_DIR: the ledger's index of files read to their end
//! _filesink/retired/<count>-<uuid>.bin                   the record of retired jobs (`job::retired`)
//! _delta_log/                                            DELTA_LOG_DIR: a Delta table's log
//! ```
//!
//! These two directories are the metadata namespace: the metadata methods of
//! [`crate::storage::Storage`] act on paths inside them and nowhere else
//! ([`crate::protocol::names::validate_metadata_path`]).

use crate::{Error, Result};

/// The hidden directory that holds the sink's metadata; a directory that holds it is a sink's
/// base.
pub const METADATA_DIR: &str = "_filesink";

/// The sink's identity, written once at its first checkpoint.
pub const SINK_FILE: &str = "_filesink/sink.json";

/// The log of a Delta table whose root is the sink's base (`docs/design/delta.md`, section 2).
/// Hidden, as `_filesink/` is: listings of data files skip it.
pub const DELTA_LOG_DIR: &str = "_delta_log";

/// The top-level directories of the metadata namespace.
pub const METADATA_NAMESPACES: [&str; 2] = [METADATA_DIR, DELTA_LOG_DIR];

/// The directory that holds one directory per job.
pub const JOBS_DIR: &str = "_filesink/jobs";

/// The directory of the lake's ledger of inputs: which job holds each input the lake took
/// (`filesink::ingest::ledger`).
pub const INPUTS_DIR: &str = "_filesink/inputs";

/// The directory of the ledger's index of files read to their end
/// (`filesink::ingest::ledger::finished`).
pub const FINISHED_DIR: &str = "_filesink/finished";

/// The name of the lock file in a job's directory on local disk.
pub const OWNER_LOCK_FILE: &str = "owner.lock";

/// The directory of `job`'s manifests and ownership records.
pub fn job_dir(job: &str) -> String {
    format!("{JOBS_DIR}/{job}")
}

/// The directory of `job`'s manifests.
pub fn checkpoints_dir(job: &str) -> String {
    format!("{}/checkpoints", job_dir(job))
}

/// The path of checkpoint `id` of `job`.
pub fn manifest_path(job: &str, id: u64) -> String {
    format!("{}/{id:020}.json", checkpoints_dir(job))
}

/// The directory of the claims on `job` on object stores.
pub fn owners_dir(job: &str) -> String {
    format!("{}/owners", job_dir(job))
}

/// Where the single writer of a Delta table on a store without conditional puts holds its
/// claim (`docs/design/delta.md` section 6).
pub const TABLE_OWNERS_DIR: &str = "_filesink/table/owners";

/// How ownership messages name the table claim (in place of a job name).
pub const TABLE_CLAIM_NAME: &str = "(the Delta table's single writer)";

/// The longest job name.
pub const JOB_NAME_MAX_BYTES: usize = 48;

/// Checks a job name: 1 to [`JOB_NAME_MAX_BYTES`] ASCII letters, digits or `_`. Job names
/// become part of writer ids (`<job>_<i>`), which only allow those, and of the paths above.
pub fn validate_job_name(job: &str) -> Result<()> {
    if job.is_empty()
        || job.len() > JOB_NAME_MAX_BYTES
        || !job.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(Error::Config(format!(
            "job name `{job}` must be 1 to {JOB_NAME_MAX_BYTES} ASCII letters, digits or `_`"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_a_job() {
        assert_eq!(
            manifest_path("nightly_1", 7),
            "_filesink/jobs/nightly_1/checkpoints/00000000000000000007.json"
        );
        assert_eq!(owners_dir("j"), "_filesink/jobs/j/owners");
        assert!(SINK_FILE.starts_with(METADATA_DIR) && JOBS_DIR.starts_with(METADATA_DIR));
    }

    #[test]
    fn job_names_are_writer_id_safe() {
        for ok in ["a", "nightly_2026", &"x".repeat(JOB_NAME_MAX_BYTES)] {
            assert!(validate_job_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a-b",
            "a/b",
            "..",
            "a b",
            &"x".repeat(JOB_NAME_MAX_BYTES + 1),
        ] {
            assert!(validate_job_name(bad).is_err(), "{bad}");
        }
    }
}
