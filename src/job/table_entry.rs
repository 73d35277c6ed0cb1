//! The Delta table side of a job: a manifest's log entry written by a restore or by
//! `filesink commit` ([`commit_table_entry`]), abandoned compaction rounds, and the rule that
//! one location holds a plain directory or a table, never both.

use std::sync::Arc;

use super::manifest::{self, Manifest};
use super::retired::{Retired, RetiredJob};
use crate::protocol::Committable;
use crate::storage::Storage;
use crate::table::delta::{DeltaOptions, DeltaTable, TableOutcome};
use crate::{Error, Result};

/// A source position as the JSON value a manifest records.
/// Writes the Delta log entry of manifest `m` of a table job, whose files are committed: the
/// step a restore of the job takes (`filesink commit` uses it, holding the job). The table
/// must exist (a job's first entry creates it, with the job's schema, which only the job
/// knows: run the job then). A compaction round's manifest is refused: whether its output may
/// enter the log is decided before its files are committed, by the compaction job's restore.
///
/// Errors: [`Error::Config`] for a manifest without a table section, a compaction round, or
/// no table; the refusals of a table writer ([`DeltaOptions::single_writer`] on stores without
/// conditional puts).
pub async fn commit_table_entry(
    storage: Arc<dyn Storage>,
    location: &str,
    m: &Manifest,
    single_writer: bool,
) -> Result<TableOutcome> {
    let Some(section) = &m.table else {
        return Err(Error::Config(format!(
            "checkpoint {} of job `{}` is not a table job's",
            m.checkpoint_id, m.job
        )));
    };
    if !section.removes.is_empty() {
        return Err(Error::Config(format!(
            "checkpoint {} of job `{}` is a compaction round: run `filesink compact --job {}` \
             to finish it",
            m.checkpoint_id, m.job, m.job
        )));
    }
    let mut options = DeltaOptions::new()
        .single_writer(single_writer)
        .location(location);
    options.table_schema = true;
    let mut table = DeltaTable::open(storage, &options, &m.sink_id, &m.job).await?;
    table
        .commit(m.checkpoint_id, m.created_at_ms, &m.committables, &[])
        .await
}

/// Abandons compaction round `id` of `job`: its output files, committed or not, must never
/// enter the log. Returns the final paths of the output, which the job's next manifest
/// records before they are deleted (pending ones are left to the writer's restore, which
/// removes what no manifest references; deleting a final path that was never committed is a
/// no-op).
pub(super) fn abandon_round(job: &str, id: u64, outputs: &[Committable]) -> Vec<String> {
    tracing::warn!(
        job = %job,
        checkpoint = id,
        files = outputs.len(),
        "compaction round abandoned: another writer removed one of its inputs"
    );
    outputs.iter().map(|c| c.final_path.clone()).collect()
}

/// Refuses to start new job `job` (one without a manifest) where it would mix a plain
/// directory's files with a Delta table's in one location: a plain job where a table exists
/// (a log entry in `_delta_log/`), and the first job of a table where plain jobs wrote.
/// Mixed, the table's vacuum and compaction would take the plain files for the table's own
/// files outside the log, and readers of the plain directory would see every file the table
/// ever removed. A job that exists goes on as it started
/// ([`check_table_job`]).
pub(super) async fn check_one_kind(
    storage: &dyn Storage,
    identity: &manifest::SinkIdentity,
    job: &str,
    table: Option<&DeltaOptions>,
) -> Result<()> {
    use crate::protocol::{job_dir, DELTA_LOG_DIR, SINK_FILE};
    let sink_id = identity.sink_id.as_str();
    if !manifest::list_checkpoints(storage, job).await?.is_empty() {
        return Ok(());
    }
    // A table with a log checkpoint names it in `_last_checkpoint` (one read); one without is
    // young, its log short to list.
    let table_exists = storage
        .get_metadata(crate::table::delta::log::LAST_CHECKPOINT)
        .await?
        .is_some()
        || storage.list_metadata(DELTA_LOG_DIR).await?.iter().any(|e| {
            !e.is_dir && crate::table::delta::checkpoint::parse_log_file_name(&e.name).is_some()
        });
    match (table, table_exists) {
        (None, true) => {
            return Err(Error::conflict(
                DELTA_LOG_DIR,
                format!(
                    "`{}` holds a Delta table; job `{job}` writes plain files, which the \
                         table's log would never list (and its vacuum would take for its own): \
                         write into the table (`--table delta`, \
                         CoordinatorBuilder::delta_table) or choose another directory",
                    storage.place()
                ),
            ));
        }
        // A job that takes the table's schema (compaction) never creates the table: opening
        // it says that there is none.
        (Some(options), false) if !options.table_schema => {
            let mut plain = Vec::new();
            for other in manifest::list_jobs(storage).await? {
                if other == job {
                    continue;
                }
                if let Some(m) = manifest::latest_manifest(storage, &other, Some(sink_id)).await? {
                    if m.table.is_none() {
                        plain.push(other);
                    }
                }
            }
            let retired_plain = Retired::load(storage).await?.plain();
            if plain.is_empty() && retired_plain > 0 {
                return Err(Error::conflict(
                    super::retired::RETIRED_DIR,
                    format!(
                        "`{}` holds the files of {retired_plain} retired plain job(s), which a \
                         Delta table there would not list; job `{job}` would create the table: \
                         choose another directory for it",
                        storage.place()
                    ),
                ));
            }
            if let Some(first) = plain.first() {
                return Err(Error::conflict(
                    job_dir(first),
                    format!(
                        "`{}` holds the files of plain jobs (`{}`), which a Delta table there \
                         would not list; job `{job}` would create the table: choose another \
                         directory for it",
                        storage.place(),
                        plain.join("`, `")
                    ),
                ));
            }
        }
        _ => {}
    }
    // The kind the sink was created with decides too, before its first job wrote anything
    // (a table job waiting for its first records has no log entry yet).
    match (identity.kind, table) {
        (Some(manifest::SinkKind::Delta), None) => Err(Error::conflict(
            SINK_FILE,
            format!(
                "`{}` holds a Delta table (the sink was created for one, its first log entry \
                 is still to come); job `{job}` writes plain files, which the table's log \
                 would never list: write into the table (`--table delta`, \
                 CoordinatorBuilder::delta_table) or choose another directory",
                storage.place()
            ),
        )),
        (Some(manifest::SinkKind::Plain), Some(options)) if !options.table_schema => {
            Err(Error::conflict(
                SINK_FILE,
                format!(
                    "`{}` holds plain files (the sink was created for them); job `{job}` would \
                     create a Delta table, whose log would not list them: choose another \
                     directory for it",
                    storage.place()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Refuses to restore a job as a table job that was not one, or the other way round, and a
/// job whose manifests do not match what the table's log says of it (the reset guard,
/// `docs/design/delta.md` section 3): either would leave files outside the log, or skip
/// checkpoints as "already committed" that the log never had.
pub(super) fn check_table_job(
    job: &str,
    latest: Option<&Manifest>,
    retired: Option<RetiredJob>,
    table: Option<&DeltaTable>,
) -> Result<()> {
    if let (None, Some(r)) = (latest, retired) {
        return match (r.table, table) {
            (true, None) => Err(Error::Config(format!(
                "job `{job}` (retired after checkpoint {}) wrote into a Delta table; open it \
                 with the table's options (`--table delta`, CoordinatorBuilder::delta_table), \
                 or choose another job name",
                r.checkpoint
            ))),
            (false, Some(_)) => Err(Error::Config(format!(
                "job `{job}` (retired after checkpoint {}) wrote plain files, without a table; \
                 it cannot continue as a table job (choose another job name)",
                r.checkpoint
            ))),
            (_, Some(t)) if t.txn_version().is_some_and(|v| v > r.checkpoint) => {
                Err(Error::corrupt(
                    format!("job `{job}`"),
                    format!(
                        "the table holds checkpoint {} of the job but the job was retired after \
                         checkpoint {}",
                        t.txn_version().unwrap_or_default(),
                        r.checkpoint
                    ),
                ))
            }
            _ => Ok(()),
        };
    }
    match (latest, table) {
        (Some(m), None) if m.table.is_some() => Err(Error::Config(format!(
            "job `{job}` writes into a Delta table; open it with the table's options \
             (`--table delta`, CoordinatorBuilder::delta_table), or its files never reach the log"
        ))),
        (Some(m), Some(_)) if m.table.is_none() => Err(Error::Config(format!(
            "job `{job}` was started as a plain directory job, without a table; its files are \
             not in the table's log, so it cannot continue as a table job (choose another job \
             name)"
        ))),
        (None, Some(t)) => match t.txn_version() {
            Some(v) => Err(Error::Conflict {
                path: crate::table::delta::LOG_DIR.into(),
                reason: format!(
                    "the table already holds checkpoint {v} of job `{job}` (appId `{}`) but the \
                     job has no manifest; a job's checkpoints must continue: restore \
                     `_filesink/jobs/{job}/` or choose another job name",
                    t.app_id()
                ),
            }),
            None => Ok(()),
        },
        (Some(m), Some(t)) => match t.txn_version() {
            Some(v) if v > m.checkpoint_id => Err(Error::corrupt(
                format!("job `{job}`"),
                format!(
                    "the table holds checkpoint {v} of the job but its latest manifest is \
                     checkpoint {} (manifests lost, or restored from an older backup)",
                    m.checkpoint_id
                ),
            )),
            _ if m.table.as_ref().is_some_and(|s| s.app_id != t.app_id()) => Err(Error::corrupt(
                format!("job `{job}`"),
                "its manifest names another table application id",
            )),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}
