//! `filesink ls`: what a sink holds: committed files per partition, pending files, hidden
//! leftovers, and each job's manifests. On S3 also the orphan multipart uploads (incomplete
//! uploads no manifest needs), and a warning when the bucket has no lifecycle rule that
//! aborts incomplete uploads.

use std::collections::HashSet;
use std::io::Write;

use filesink::ingest::SourcePosition;
use filesink::maintain::compaction_round;
use filesink::storage::Leftover;
use serde_json::json;

use super::exit::{CliError, CliResult};
use super::lake::{committed, own_names, own_visible, references, FileState, Lake};
use super::util::{human_age, human_bytes, human_time, now_ms};
use filesink::storage::Location;

/// Arguments of `filesink ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// The sink: a directory (`./lake`, `/abs/lake`, `file:///abs/lake`) or
    /// `s3://bucket/prefix`.
    #[arg(value_name = "URL")]
    pub url: String,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How many of the visible files that are not the sink's own the text output names.
const OTHER_FILES_SHOWN: usize = 20;

/// Runs `filesink ls`.
pub async fn run(args: LsArgs, out: &mut dyn Write) -> CliResult {
    let lake = Lake::open_for_listing(Location::parse(&args.url)?).await?;
    let now = now_ms();
    let visible = lake.visible().await?;
    let jobs = lake.jobs().await?;
    // Files that are not the sink's own parts are not its output: listed apart, never
    // counted as committed.
    let (own, others) = own_visible(visible, &own_names(&jobs));
    let committed = committed(&own);
    let visible: HashSet<&str> = own.iter().map(|f| f.path.as_str()).collect();
    let other_paths: HashSet<&str> = others.iter().map(|f| f.path.as_str()).collect();
    // A Delta table at the base: its latest version, and how far each job's checkpoints are
    // in its log.
    let table = match lake.sink() {
        Ok(sink) => filesink::table::delta::table_info(sink.storage().as_ref())
            .await
            .map_err(|e| {
                CliError::context(format!("cannot read the Delta log of `{}`", lake.base()), e)
            })?,
        Err(_) => None,
    };
    let app_prefix = lake
        .identity()
        .map(|i| format!("filesink-{}-", i.sink_id))
        .unwrap_or_default();
    let in_log = |job: &str| -> Option<i64> {
        table
            .as_ref()
            .and_then(|t| t.txns.get(&format!("{app_prefix}{job}")).copied())
    };
    // Who runs each job right now (never takes the job, so `ls` cannot get in a run's way).
    let names: Vec<String> = jobs.iter().map(|j| j.job.clone()).collect();
    let holders = lake.holders(&names).await?;
    let (leftovers, foreign) = lake.leftovers(&jobs).await?;
    let temps = lake.metadata_temps(&jobs).await?;
    let latest: Vec<_> = jobs
        .iter()
        .filter_map(|j| j.latest.as_ref().ok().and_then(|m| m.as_ref()))
        .collect();
    let refs = references(latest.iter().copied());

    // Pending: committables of latest manifests whose final file is not visible yet.
    let mut pending = Vec::new();
    for m in &latest {
        let all: Vec<_> = m.committables.iter().collect();
        for (c, state) in all.iter().zip(lake.file_states(&all, &visible).await?) {
            if state != FileState::Visible {
                pending.push((m.job.clone(), m.checkpoint_id, *c, state));
            }
        }
    }
    // A job whose latest manifest cannot be read may need any hidden file: none of them is a
    // leftover then, their state is unknown (and `abort` refuses to touch them).
    let unreadable: Vec<&str> = jobs
        .iter()
        .filter(|j| j.latest.is_err())
        .map(|j| j.job.as_str())
        .collect();
    let (unknown, unreferenced): (Vec<_>, Vec<_>) = leftovers
        .iter()
        .filter(|l| !refs.contains_key(&l.path))
        .partition(|_| !unreadable.is_empty());
    // Incomplete multipart uploads (S3) are shown apart from hidden files.
    let (uploads, hidden): (Vec<&Leftover>, Vec<&Leftover>) = unreferenced
        .iter()
        .copied()
        .partition(|l| lake.upload_id(l).is_some());
    let warnings = warnings(&lake).await;
    for w in &warnings {
        let _ = writeln!(std::io::stderr(), "warning: {w}");
    }
    let referenced: Vec<_> = leftovers
        .iter()
        .filter_map(|l| refs.get(&l.path).map(|r| (l, r)))
        .collect();
    let first_error = jobs
        .iter()
        .find_map(|j| j.latest.as_ref().err().map(|e| (j.job.clone(), e)));

    if args.json {
        let v = json!({
            "location": lake.location.to_string(),
            "base": lake.base(),
            "sink": lake.identity().map(|i| json!({
                "sink_id": i.sink_id,
                "created_at_ms": i.created_at_ms,
                "version": i.version,
            })),
            "committed": {
                "files": committed.values().map(|p| p.files).sum::<u64>(),
                "bytes": committed.values().map(|p| p.bytes).sum::<u64>(),
                "partitions": committed.iter().map(|(k, p)| json!({
                    "partition": k, "files": p.files, "bytes": p.bytes,
                })).collect::<Vec<_>>(),
            },
            "other_files": {
                "files": others.len(),
                "bytes": others.iter().map(|f| f.size_bytes).sum::<u64>(),
                "paths": others.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            },
            "jobs": jobs.iter().zip(&holders).map(|(j, holder)| {
                let latest = j.latest.as_ref().ok().and_then(|m| m.as_ref());
                json!({
                    "job": j.job,
                    "live": holder.is_some(),
                    "holder": holder,
                    "checkpoints": j.checkpoints.iter().map(|(id, ms)| json!({
                        "id": id, "modified_ms": ms, "age_ms": now - ms,
                    })).collect::<Vec<_>>(),
                    "latest": latest.map(|m| m.checkpoint_id),
                    "in_table_log": in_log(&j.job),
                    "finished": latest.map(|m| m.finished),
                    "records": latest.and_then(records_of),
                    "compaction_round": latest.and_then(compaction_round),
                    "error": j.latest.as_ref().err().map(|e| error_chain(e)),
                })
            }).collect::<Vec<_>>(),
            "pending": pending.iter().map(|(job, id, c, state)| json!({
                "job": job, "checkpoint_id": id, "final_path": c.final_path,
                "size_bytes": c.size_bytes, "record_count": c.record_count,
                "state": state.name(),
            })).collect::<Vec<_>>(),
            "referenced": referenced.iter().map(|(l, r)| json!({
                "path": l.path, "final_path": l.final_path, "size_bytes": l.size_bytes,
                "age_ms": now - l.modified_ms, "job": r.job, "checkpoint_id": r.checkpoint_id,
                "kind": r.kind.name(), "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "unknown": unknown.iter().map(|l| json!({
                "path": l.path, "final_path": l.final_path, "size_bytes": l.size_bytes,
                "age_ms": now - l.modified_ms, "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "metadata_temps": temps.iter().map(|t| json!({
                "path": t.path, "job": t.job, "age_ms": now - t.modified_ms,
            })).collect::<Vec<_>>(),
            "leftovers": unreferenced.iter().map(|l| json!({
                "path": l.path, "final_path": l.final_path, "size_bytes": l.size_bytes,
                "age_ms": now - l.modified_ms, "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "foreign": foreign.iter().map(|l| json!({
                "path": l.path, "size_bytes": l.size_bytes, "age_ms": now - l.modified_ms,
                "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "orphan_uploads": uploads.iter().map(|l| json!({
                "path": l.path, "final_path": l.final_path, "upload_id": lake.upload_id(l),
                "initiated_ms": l.modified_ms, "age_ms": now - l.modified_ms,
            })).collect::<Vec<_>>(),
            "warnings": warnings,
            "table": table,
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        outln!(out, "location: {}", lake.base());
        match lake.identity() {
            Some(i) => outln!(
                out,
                "sink: {} (created {}, {} ago)",
                i.sink_id,
                human_time(i.created_at_ms),
                human_age(now - i.created_at_ms)
            ),
            None => outln!(
                out,
                "sink: none (not a filesink output: no _filesink/sink.json)"
            ),
        }
        let files: u64 = committed.values().map(|p| p.files).sum();
        let bytes: u64 = committed.values().map(|p| p.bytes).sum();
        outln!(out, "committed: {files} file(s), {}", human_bytes(bytes));
        for (k, p) in &committed {
            let name = if k.is_empty() { "." } else { k };
            outln!(
                out,
                "  {name}  {} file(s)  {}",
                p.files,
                human_bytes(p.bytes)
            );
        }
        if !others.is_empty() {
            outln!(
                out,
                "other files (visible, not parts of this sink's jobs; not counted as \
                 committed): {} file(s), {}",
                others.len(),
                human_bytes(others.iter().map(|f| f.size_bytes).sum())
            );
            for f in others.iter().take(OTHER_FILES_SHOWN) {
                outln!(out, "  {}  {}", f.path, human_bytes(f.size_bytes));
            }
            if others.len() > OTHER_FILES_SHOWN {
                outln!(
                    out,
                    "  ... and {} more (`--json` lists them all)",
                    others.len() - OTHER_FILES_SHOWN
                );
            }
        }
        if let Some(t) = &table {
            outln!(
                out,
                "delta table: version {}, {} live file(s), {}, {} removed file(s) in the log \
                 ({} still on disk for time travel, the rest deleted by vacuum); protocol \
                 {}/{}; partitioned by {:?}",
                t.version,
                t.live_files,
                human_bytes(u64::try_from(t.live_bytes).unwrap_or(0)),
                t.tombstones,
                t.tombstone_paths
                    .iter()
                    .filter(|p| visible.contains(p.as_str()) || other_paths.contains(p.as_str()))
                    .count(),
                t.protocol.0,
                t.protocol.1,
                t.partition_columns
            );
        }
        outln!(out, "jobs: {}", jobs.len());
        for (j, holder) in jobs.iter().zip(&holders) {
            let ids: Vec<String> = j
                .checkpoints
                .iter()
                .map(|(id, ms)| format!("{id} ({} ago)", human_age(now - ms)))
                .collect();
            let status = match &j.latest {
                // A compaction job never finishes: each round is a whole checkpoint.
                Ok(Some(m)) => match compaction_round(m) {
                    Some(round) if m.source_position.get("abandoned").is_some() => {
                        format!("compaction, round {round} abandoned")
                    }
                    Some(round) => format!("compaction, last round {round}"),
                    None => {
                        let records =
                            records_of(m).map_or(String::new(), |r| format!(", {r} records"));
                        if m.finished {
                            format!("finished{records}")
                        } else {
                            format!("unfinished{records}")
                        }
                    }
                },
                Ok(None) => "no checkpoint yet".to_string(),
                Err(e) => format!("latest manifest unreadable: {}", error_chain(e)),
            };
            let status = match holder {
                Some(h) => format!("running ({h}), {status}"),
                None => status,
            };
            let status = match in_log(&j.job) {
                Some(v) => format!("{status}, in the table's log up to checkpoint {v}"),
                None if table.is_some() => format!("{status}, not in the table's log"),
                None => status,
            };
            match ids.is_empty() {
                true => outln!(out, "  {}  {status}", j.job),
                false => outln!(
                    out,
                    "  {}  {status}  checkpoints: {}",
                    j.job,
                    ids.join(", ")
                ),
            }
        }
        outln!(
            out,
            "pending (named by a latest manifest, not yet visible): {}",
            pending.len()
        );
        for (job, id, c, state) in &pending {
            outln!(
                out,
                "  {}  {}  {} records  job {job} checkpoint {id}{}",
                c.final_path,
                human_bytes(c.size_bytes),
                c.record_count,
                match state {
                    FileState::Missing => "  MISSING",
                    FileState::Conflict => "  CONFLICT (another file holds the name)",
                    _ => "",
                }
            );
        }
        if !referenced.is_empty() {
            outln!(
                out,
                "hidden files a latest manifest needs: {}",
                referenced.len()
            );
            for (l, r) in &referenced {
                let size = match lake.upload_id(l) {
                    Some(_) => "multipart upload".to_string(),
                    None => human_bytes(l.size_bytes),
                };
                outln!(
                    out,
                    "  {}  {size}  {}  job {} checkpoint {}",
                    l.path,
                    r.kind.name(),
                    r.job,
                    r.checkpoint_id
                );
            }
        }
        if !unknown.is_empty() {
            outln!(
                out,
                "hidden files of unknown state (the latest manifest of job `{}` cannot be read, \
                 so whether they are needed is unknown; do not remove them): {}",
                unreadable.join("`, `"),
                unknown.len()
            );
            for l in &unknown {
                outln!(
                    out,
                    "  {}  {}  modified {} ago",
                    l.path,
                    human_bytes(l.size_bytes),
                    human_age(now - l.modified_ms)
                );
            }
        }
        outln!(
            out,
            "leftovers (hidden, in progress, needed by no manifest): {}",
            hidden.len()
        );
        for l in &hidden {
            outln!(
                out,
                "  {}  {}  modified {} ago",
                l.path,
                human_bytes(l.size_bytes),
                human_age(now - l.modified_ms)
            );
        }
        if !temps.is_empty() {
            outln!(
                out,
                "temporary files of unfinished metadata writes (abort removes them): {}",
                temps.len()
            );
            for t in &temps {
                outln!(
                    out,
                    "  {}  modified {} ago",
                    t.path,
                    human_age(now - t.modified_ms)
                );
            }
        }
        if !foreign.is_empty() {
            outln!(
                out,
                "foreign (look like part files or uploads, not this sink's; never removed): {}",
                foreign.len()
            );
            for l in &foreign {
                outln!(out, "  {}", l.path);
            }
        }
        if lake.is_s3() {
            outln!(
                out,
                "orphan multipart uploads (incomplete, needed by no manifest): {}",
                uploads.len()
            );
            for l in &uploads {
                outln!(
                    out,
                    "  {}  upload {}  started {} ago",
                    l.final_path,
                    lake.upload_id(l).unwrap_or_default(),
                    human_age(now - l.modified_ms)
                );
            }
        }
    }
    if let Some((job, _)) = first_error {
        let e = jobs
            .into_iter()
            .find(|j| j.job == job)
            .and_then(|j| j.latest.err())
            .expect("found above");
        return Err(CliError::context(
            format!(
                "cannot read the latest manifest of job `{job}` in `{}`",
                lake.location
            ),
            e,
        ));
    }
    Ok(())
}

/// What the user should know about the location: on S3, a bucket without a lifecycle rule
/// that aborts incomplete multipart uploads. Probing is best effort: a store that will not
/// say gets no warning.
async fn warnings(lake: &Lake) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s3) = &lake.s3 {
        if let Ok(Some(false)) = s3.aborts_incomplete_uploads().await {
            out.push(NO_LIFECYCLE_RULE.to_string());
        }
    }
    out
}

/// The warning for a bucket without an `AbortIncompleteMultipartUpload` lifecycle rule.
pub const NO_LIFECYCLE_RULE: &str = "bucket has no lifecycle rule that aborts incomplete \
     multipart uploads; see README \"Lifecycle rule\"";

/// Records written by an `ingest` job up to manifest `m`, if it is one.
pub fn records_of(m: &filesink::job::Manifest) -> Option<u64> {
    SourcePosition::from_json(&m.job, &m.source_position)
        .ok()
        .map(|p| p.records)
}

/// An error and its causes on one line.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(position: serde_json::Value) -> filesink::job::Manifest {
        serde_json::from_value(serde_json::json!({
            "version": 2, "sink_id": "s", "job": "j_compact", "checkpoint_id": 3,
            "created_at_ms": 0, "finished": false, "source_position": position,
            "writers": [], "committables": [],
        }))
        .unwrap()
    }

    #[test]
    fn a_compaction_jobs_round_is_read_from_its_position_and_no_other_jobs() {
        use serde_json::json;
        assert_eq!(compaction_round(&manifest(json!({ "round": 3 }))), Some(3));
        let abandoned = json!({ "round": 3, "abandoned": 2 });
        assert_eq!(compaction_round(&manifest(abandoned)), Some(2));
        for other in [
            json!({ "round": 3, "cursor": 1 }),
            json!({ "round": "3" }),
            json!({ "records": 5 }),
            json!(null),
            json!(7),
        ] {
            assert_eq!(compaction_round(&manifest(other.clone())), None, "{other}");
        }
    }
}
