//! `filesink vacuum`: deletes the data files of a Delta table that no version within the
//! retention needs, then the log entries no reader needs any more.
//!
//! The rule is the library's ([`filesink::maintain::vacuum`]): only the sink's own final part
//! names are ever deleted, and only when no live `add` references them, no job's latest
//! manifest lists them, and they left the table (or, never logged, were written) longer ago
//! than `--retain`. Other files are reported as foreign and left alone. A retention shorter
//! than the table's `delta.deletedFileRetentionDuration` (default 168h) is refused without
//! `--allow-short-retention`. `--dry-run` lists the same files and deletes nothing. Deleting
//! is idempotent: rerun a vacuum that was interrupted. A location filesink did not write (no
//! sink identity) is refused, exit code 5, as by `commit` and `abort`.
//!
//! In every lake, a table or not, it then deletes the ledger entries that no run reads any
//! more ([`filesink::ingest::ledger::vacuum`]): those below an input's head written before
//! the same cutoff, and retires the finished jobs that hold no input any more
//! ([`filesink::job::retired`]): their directories go, their names and last checkpoints stay.

use std::io::Write;
use std::time::Duration;

use filesink::ingest::ledger::{self, LedgerVacuum};
use filesink::maintain::{vacuum, VacuumOptions, VacuumReport};
use filesink::protocol::DELTA_LOG_DIR;
use filesink::storage::Location;
use serde_json::json;

use super::exit::{CliError, CliResult};
use super::lake::{open_storage, Lake};
use super::util::{human_bytes, human_time, now_ms, parse_duration};

/// Arguments of `filesink vacuum`.
#[derive(Debug, clap::Args)]
pub struct VacuumArgs {
    /// The lake or Delta table: a directory (`./lake`, `/abs/lake`, `file:///abs/lake`) or
    /// `s3://bucket/prefix`.
    #[arg(value_name = "URL")]
    pub url: String,

    /// Keep the files that left the table (or, never in the log, were written) less than this
    /// long ago (`168h`, `30d`): readers of versions within it still find their files.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", default_value = "168h")]
    pub retain: Duration,

    /// List what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Accept a --retain below the table's delta.deletedFileRetentionDuration (default
    /// 168h): readers of older versions, and writers with an older snapshot, may find files
    /// gone.
    #[arg(long)]
    pub allow_short_retention: bool,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `filesink vacuum`.
pub async fn run(args: VacuumArgs, out: &mut dyn Write) -> CliResult {
    let location = Location::parse(&args.url)?;
    // Refused (exit code 5) unless filesink wrote here, as `commit` and `abort` are.
    Lake::open_sink(location.clone()).await?;
    let (storage, _) = open_storage(&location)
        .map_err(|e| CliError::context(format!("cannot open `{location}`"), e))?;
    let options = VacuumOptions::new()
        .retain(args.retain)
        .dry_run(args.dry_run)
        .allow_short_retention(args.allow_short_retention)
        .location(location.to_string());
    let cannot = |e| CliError::context(format!("cannot vacuum `{location}`"), e);
    let is_table = !storage
        .list_metadata(DELTA_LOG_DIR)
        .await
        .map_err(cannot)?
        .is_empty();
    let (report, cutoff_ms) = if is_table {
        let report = vacuum(storage.clone(), &options).await.map_err(cannot)?;
        let cutoff_ms = report.cutoff_ms;
        (Some(report), cutoff_ms)
    } else {
        let retain_ms = i64::try_from(args.retain.as_millis()).unwrap_or(i64::MAX);
        (None, now_ms().saturating_sub(retain_ms))
    };
    let ledger = ledger::vacuum(storage.as_ref(), cutoff_ms, args.dry_run)
        .await
        .map_err(cannot)?;
    if args.json {
        let mut doc = match &report {
            Some(r) => to_json(r, args.retain),
            None => json!({
                "dry_run": args.dry_run,
                "table_version": null,
                "retain_ms": u64::try_from(args.retain.as_millis()).unwrap_or(u64::MAX),
                "cutoff_ms": cutoff_ms,
            }),
        };
        doc["ledger"] = json!({
            "inputs": ledger.inputs,
            "entries_deleted": ledger.deleted,
            "kept_for_retention": ledger.kept_for_retention,
            "jobs_retired": ledger.jobs.retired,
            "finished_jobs_kept_for_retention": ledger.jobs.kept_for_retention,
        });
        outln!(out, "{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        match &report {
            Some(r) => print_text(out, r, &location, args.retain)?,
            None => outln!(
                out,
                "lake `{location}` has no Delta table: no data file is vacuumed (--retain {})",
                humantime(args.retain)
            ),
        }
        print_ledger(out, &ledger, args.dry_run, cutoff_ms)?;
    }
    Ok(())
}

fn print_ledger(out: &mut dyn Write, l: &LedgerVacuum, dry_run: bool, cutoff_ms: i64) -> CliResult {
    let verb = if dry_run { "would delete" } else { "deleted" };
    outln!(
        out,
        "ledger of inputs: {} input(s); {verb} {} superseded entr{} written before {}; kept {} \
         within the retention",
        l.inputs,
        l.deleted,
        if l.deleted == 1 { "y" } else { "ies" },
        human_time(cutoff_ms),
        l.kept_for_retention
    );
    let verb = if dry_run { "would retire" } else { "retired" };
    outln!(
        out,
        "finished jobs: {verb} {} (their manifests deleted, their names and last checkpoints \
         kept in `_filesink/retired/`); kept {} that finished within the retention",
        l.jobs.retired,
        l.jobs.kept_for_retention
    );
    Ok(())
}

/// The `--json` document.
fn to_json(r: &VacuumReport, retain: Duration) -> serde_json::Value {
    json!({
        "dry_run": r.dry_run,
        "table_version": r.table_version,
        "retain_ms": u64::try_from(retain.as_millis()).unwrap_or(u64::MAX),
        "cutoff_ms": r.cutoff_ms,
        "delete": r.deleted.iter().map(|(path, bytes)| json!({
            "path": path,
            "size_bytes": bytes,
        })).collect::<Vec<_>>(),
        "kept_for_retention": r.kept_for_retention,
        "kept_for_manifests": r.kept_for_manifests,
        "foreign": r.foreign,
        "kept_plain_jobs": r.kept_plain_jobs,
        "log_delete": r.log_files_deleted,
        "log_cleanup_skipped": r.log_cleanup_skipped,
        "deleted": r.deleted.len(),
        "deleted_bytes": r.deleted_bytes(),
        "log_entries_deleted": r.log_entries_deleted,
    })
}

fn print_text(
    out: &mut dyn Write,
    r: &VacuumReport,
    location: &Location,
    retain: Duration,
) -> CliResult {
    let verb = if r.dry_run { "would delete" } else { "deleted" };
    outln!(
        out,
        "table `{location}` at version {}: files that left it before {} (--retain {})",
        r.table_version,
        human_time(r.cutoff_ms),
        humantime(retain)
    );
    outln!(
        out,
        "data files no version within the retention needs: {}",
        r.deleted.len()
    );
    for (path, bytes) in &r.deleted {
        outln!(out, "  {verb:<14} {path}  ({})", human_bytes(*bytes));
    }
    if !r.kept_for_retention.is_empty() {
        outln!(
            out,
            "kept {} file(s) that left the table within the retention",
            r.kept_for_retention.len()
        );
    }
    if !r.kept_for_manifests.is_empty() {
        outln!(
            out,
            "kept {} file(s) out of the table that a job's latest manifest lists (the log \
             entry of its checkpoint may not be written yet):",
            r.kept_for_manifests.len()
        );
        for path in &r.kept_for_manifests {
            outln!(out, "  {path}");
        }
    }
    if !r.kept_plain_jobs.is_empty() {
        outln!(
            out,
            "left alone, files of jobs that do not write into the table (plain jobs sharing \
             its directory; no log entry ever lists them): {}",
            r.kept_plain_jobs.len()
        );
        for path in &r.kept_plain_jobs {
            outln!(out, "  {path}");
        }
    }
    if !r.foreign.is_empty() {
        outln!(
            out,
            "left alone, not this sink's part files (foreign): {}",
            r.foreign.len()
        );
        for path in &r.foreign {
            outln!(out, "  {path}");
        }
    }
    match &r.log_cleanup_skipped {
        Some(why) => outln!(out, "log cleanup skipped: {why}"),
        None => {
            outln!(
                out,
                "expired log files (entries and checkpoints): {}",
                r.log_files_deleted.len()
            );
            for path in &r.log_files_deleted {
                outln!(out, "  {verb:<14} {path}");
            }
        }
    }
    outln!(
        out,
        "total: {verb} {} file(s), {}, and {} log file(s)",
        r.deleted.len(),
        human_bytes(r.deleted_bytes()),
        r.log_files_deleted.len()
    );
    Ok(())
}

/// A retention as given on the command line: `168h`, `30m`, `0s`.
fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_millis() != 0 {
        format!("{}ms", d.as_millis())
    } else if s != 0 && s % 3600 == 0 {
        format!("{}h", s / 3600)
    } else if s != 0 && s % 60 == 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retentions_print_as_given() {
        assert_eq!(humantime(Duration::from_secs(168 * 3600)), "168h");
        assert_eq!(humantime(Duration::from_secs(0)), "0s");
        assert_eq!(humantime(Duration::from_secs(90)), "90s");
        assert_eq!(humantime(Duration::from_millis(1500)), "1500ms");
    }
}
