//! `filesink abort`: cleans up after crashed or abandoned runs.
//!
//! First it commits the pending files that each job's latest manifest names (a complete
//! checkpoint's files are never deleted), then it removes the hidden leftovers that no job's
//! latest manifest references. It touches nothing else: only names of the exact shape filesink
//! writes, by writers of this sink's jobs, are its own ([`filesink::job::OwnNames`]);
//! other names are reported as foreign and left alone, and
//! [`filesink::storage::Storage::remove_leftover`] refuses any name that is not a part name.
//! It refuses to run on a location that is not a filesink output. The rule of what may be
//! removed is the library's ([`filesink::lake`], [`filesink::lake::may_remove`]).
//!
//! What it reads: the lake's listings (visible files, hidden leftovers) once, and each job's
//! latest manifest once, after the job is held. A file the latest manifest names whose final
//! name is listed with the committable's size and whose pending file is no longer listed is
//! taken as committed without reading it (as `ls` does), so a lake of many committed files
//! costs no read of them; the others are probed (size and CRC-32C locally, the ETag on S3).
//! So a committed file replaced later by other content of the same size is not reported:
//! abort cleans up, it does not verify committed data.
//!
//! It takes each job's ownership, as a running `ingest` holds it
//! ([`filesink::storage::ownership`]), before it reads the job's manifests: a job owned by a
//! live run is left alone (its manifests and its leftovers), and no run of another job can
//! start while abort cleans up after it. So abort tells a dead job from a live one for
//! certain, and needs no guess from the age of files. (A deployment that runs its jobs with
//! `Ownership::External` holds no lease: it must not run abort while such a job runs.)
//!
//! On local disk it also removes the temporary files of metadata writes that died before their
//! rename (`.<name>.tmp.<UUIDv7>` in `_filesink/` and `_delta_log/`): in a held job's
//! checkpoint directory at once, elsewhere only an hour after their last change
//! ([`filesink::lake::may_remove_temp`]).
//!
//! On S3 the leftovers are incomplete multipart uploads under the prefix (listed as
//! `<final path>#<upload id>`; their age is the upload's initiation time): removing one aborts
//! the upload. Uploads under a sibling prefix (`…/out2` next to `…/out`) are never touched.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use filesink::lake::{may_remove, may_remove_temp, MetadataTemp};
use filesink::storage::Leftover;
use filesink::Committable;
use serde_json::json;

use super::commit::{commit_manifest, failure, FileOutcome};
use super::exit::{CliError, CliResult};
use super::lake::{references, Lake};
use super::util::{human_age, human_bytes, now_ms, parse_duration};
use filesink::storage::Location;

/// Arguments of `filesink abort`.
#[derive(Debug, clap::Args)]
pub struct AbortArgs {
    /// The sink: a directory (`./lake`, `/abs/lake`, `file:///abs/lake`) or
    /// `s3://bucket/prefix`.
    #[arg(value_name = "URL")]
    pub url: String,

    /// Only remove leftovers last modified longer ago than this (`10m`, `2h`, `1d`); on S3,
    /// uploads started longer ago than this.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub older_than: Option<Duration>,

    /// List what would be committed and removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Has no effect, kept for scripts: abort knows which jobs a live run owns and leaves
    /// them alone whatever the flags, and needs no leave to clean up after dead ones.
    #[arg(long, hide = true)]
    pub force: bool,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `filesink abort`.
pub async fn run(args: AbortArgs, out: &mut dyn Write) -> CliResult {
    let lake = Lake::open_sink(Location::parse(&args.url)?).await?;
    let now = now_ms();
    // Only the names: the manifests are read once, below, after the jobs are held.
    let names: Vec<String> = lake.job_names().await?;
    // Jobs owned by a live run are left alone: their owner commits and cleans up. The others
    // are held while we act, so that no run of them starts under us, and only then are their
    // manifests read (a run that ended a moment ago may have written a newer one).
    let mut held = lake.hold_jobs(&names, args.dry_run).await?;
    let jobs = lake.jobs().await?;
    for j in &jobs {
        if !names.contains(&j.job) {
            // Started after we listed the jobs: not held by us, so its run may be live.
            held.live
                .push((j.job.clone(), "a run that started while abort ran".into()));
        }
    }
    // Only names of the shape filesink writes, of writers of this sink's jobs, are ours;
    // foreign ones are reported and left alone.
    let (leftovers, foreign) = lake.leftovers(&jobs).await?;
    let temps = lake.metadata_temps(&jobs).await?;
    let mut latest = Vec::new();
    for j in jobs {
        match j.latest {
            Ok(Some(m)) => latest.push(m),
            Ok(None) => {}
            Err(e) => {
                return Err(CliError::context(
                    format!(
                        "cannot read the latest manifest of job `{}` in `{}`, so cannot tell which \
                         hidden files it needs; nothing was changed",
                        j.job,
                        lake.location
                    ),
                    e,
                ))
            }
        }
    }
    let refs = references(&latest);
    // Last modification of a hidden file, initiation of a multipart upload.
    let age = |l: &Leftover| now - l.modified_ms;
    let min_age_ms = args.older_than.map_or(0, |d| d.as_millis() as i64);
    let candidates: Vec<&Leftover> = leftovers
        .iter()
        .filter(|l| may_remove(l, &refs, &held, now, min_age_ms))
        .collect();
    // Temporary files of metadata writes that died before their rename (local disk).
    let temp_candidates: Vec<&MetadataTemp> = temps
        .iter()
        .filter(|t| may_remove_temp(t, &held, now, min_age_ms))
        .collect();
    let kept_live: Vec<(&Leftover, &str)> = leftovers
        .iter()
        .filter_map(|l| held.live_job_of(l).map(|job| (l, job)))
        .collect();

    // 1. Commit what complete checkpoints name: never delete it. A committable whose final
    // name is listed with its size and whose pending file is gone was committed: it is not
    // probed (which reads the whole file locally, one request on S3), so a lake of many
    // committed files costs two listings, not a read of every file. The others are probed.
    let visible: HashMap<String, u64> = lake
        .visible()
        .await?
        .into_iter()
        .map(|f| (f.path, f.size_bytes))
        .collect();
    let hidden: HashSet<&str> = leftovers
        .iter()
        .chain(&foreign)
        .map(|l| l.path.as_str())
        .collect();
    let settled = |c: &Committable| {
        visible.get(&c.final_path) == Some(&c.size_bytes)
            && !hidden.contains(c.pending.leftover_id(&c.final_path).as_str())
    };
    let mut committed = Vec::new();
    let mut first_error = None;
    for m in latest.iter().filter(|m| !held.is_live(&m.job)) {
        let unsettled;
        let m = if m.committables.iter().any(settled) {
            let mut rest = m.clone();
            rest.committables.retain(|c| !settled(c));
            unsettled = rest;
            &unsettled
        } else {
            m
        };
        let (files, err) = commit_manifest(&lake, m, true, args.dry_run).await?;
        if let Some(e) = err {
            first_error.get_or_insert(e);
        }
        for f in files {
            committed.push((m.job.clone(), m.checkpoint_id, f));
        }
    }
    // 2. Remove the leftovers nothing needs.
    let mut removed: Vec<(&Leftover, Option<String>)> = Vec::with_capacity(candidates.len());
    let mut remove_error = None;
    for l in &candidates {
        if args.dry_run {
            removed.push((l, None));
            continue;
        }
        match lake.remove_leftover(l).await {
            Ok(()) => removed.push((l, None)),
            Err(e) => {
                removed.push((l, Some(super::ls::error_chain(&e))));
                remove_error.get_or_insert(e);
            }
        }
    }
    // 3. Remove the temporary files of metadata writes that died before their rename.
    let mut temps_removed: Vec<(&MetadataTemp, Option<String>)> = Vec::new();
    for t in &temp_candidates {
        if args.dry_run {
            temps_removed.push((t, None));
            continue;
        }
        match lake.remove_metadata_temp(t).await {
            Ok(()) => temps_removed.push((t, None)),
            Err(e) => {
                temps_removed.push((t, Some(super::ls::error_chain(&e))));
                remove_error.get_or_insert(e);
            }
        }
    }
    let commit_failed = committed
        .iter()
        .filter(|(_, _, (_, o))| matches!(o, FileOutcome::Failed(..)))
        .count();
    let n_committed = committed.len() - commit_failed;
    let n_removed = removed.iter().filter(|(_, e)| e.is_none()).count()
        + temps_removed.iter().filter(|(_, e)| e.is_none()).count();
    let kept: Vec<&Leftover> = leftovers
        .iter()
        .filter(|l| !refs.contains_key(&l.path) && age(l) < min_age_ms)
        .collect();

    if args.json {
        let v = json!({
            "dry_run": args.dry_run,
            "commit": committed.iter().map(|(job, id, (c, o))| json!({
                "job": job,
                "checkpoint_id": id,
                "final_path": c.final_path,
                "size_bytes": c.size_bytes,
                "outcome": o.name(),
                "error": match o { FileOutcome::Failed(_, e) => Some(e), _ => None },
            })).collect::<Vec<_>>(),
            "remove": removed.iter().map(|(l, e)| json!({
                "path": l.path,
                "final_path": l.final_path,
                "upload_id": lake.upload_id(l),
                "size_bytes": l.size_bytes,
                "age_ms": age(l),
                "error": e,
            })).collect::<Vec<_>>(),
            "remove_metadata_temps": temps_removed.iter().map(|(t, e)| json!({
                "path": t.path,
                "job": t.job,
                "age_ms": now - t.modified_ms,
                "error": e,
            })).collect::<Vec<_>>(),
            "kept_metadata_temps": temps.len() - temp_candidates.len(),
            "kept_younger": kept.iter().map(|l| &l.path).collect::<Vec<_>>(),
            "kept_live": kept_live.iter().map(|(l, job)| json!({
                "path": l.path,
                "job": job,
            })).collect::<Vec<_>>(),
            "live_jobs": held.live.iter().map(|(job, holder)| json!({
                "job": job,
                "holder": holder,
            })).collect::<Vec<_>>(),
            "foreign": foreign.iter().map(|l| &l.path).collect::<Vec<_>>(),
            "committed": n_committed,
            "removed": n_removed,
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        let (c_verb, r_verb) = if args.dry_run {
            ("would commit", "would remove")
        } else {
            ("committed", "removed")
        };
        outln!(
            out,
            "pending files named by latest manifests: {}",
            committed.len()
        );
        for (job, id, (c, o)) in &committed {
            let why = match o {
                FileOutcome::Failed(_, e) => format!(": {e}"),
                _ => String::new(),
            };
            outln!(
                out,
                "  {:<18} {}  ({}, job {job} checkpoint {id}){why}",
                o.name(),
                c.final_path,
                human_bytes(c.size_bytes)
            );
        }
        outln!(out, "leftovers needed by no manifest: {}", removed.len());
        for (l, e) in &removed {
            let (verb, why) = match e {
                Some(e) => ("failed", format!(": {e}")),
                None => (r_verb, String::new()),
            };
            match lake.upload_id(l) {
                Some(id) => outln!(
                    out,
                    "  {:<18} {}  (multipart upload {id}, started {} ago){why}",
                    match (e, args.dry_run) {
                        (Some(_), _) => "failed",
                        (None, true) => "would abort",
                        (None, false) => "aborted",
                    },
                    l.final_path,
                    human_age(age(l))
                ),
                None => outln!(
                    out,
                    "  {verb:<18} {}  ({}, modified {} ago){why}",
                    l.path,
                    human_bytes(l.size_bytes),
                    human_age(age(l))
                ),
            }
        }
        if !temps.is_empty() {
            outln!(
                out,
                "temporary files of unfinished metadata writes: {}",
                temps.len()
            );
        }
        for (t, e) in &temps_removed {
            let (verb, why) = match e {
                Some(e) => ("failed", format!(": {e}")),
                None => (r_verb, String::new()),
            };
            outln!(
                out,
                "  {verb:<18} {}  (modified {} ago){why}",
                t.path,
                human_age(now - t.modified_ms)
            );
        }
        let temps_kept = temps.len() - temp_candidates.len();
        if temps_kept > 0 {
            outln!(
                out,
                "kept {temps_kept} of them: younger than --older-than, of a live job, or outside \
                 a job's directory and younger than an hour"
            );
        }
        if !kept.is_empty() {
            outln!(
                out,
                "kept {} leftover(s) younger than --older-than",
                kept.len()
            );
        }
        for (job, holder) in &held.live {
            let n = kept_live.iter().filter(|(_, j)| j == job).count();
            outln!(
                out,
                "job `{job}` is owned by a live run ({holder}): left alone, {n} leftover(s) kept"
            );
        }
        if !foreign.is_empty() {
            outln!(
                out,
                "left alone, not this sink's (foreign names or uploads): {}",
                foreign.len()
            );
            for l in &foreign {
                outln!(out, "  {}", l.path);
            }
        }
        outln!(out, "total: {c_verb} {n_committed}, {r_verb} {n_removed}");
    }
    held.release().await?;
    if commit_failed > 0 {
        return Err(failure(
            commit_failed,
            first_error,
            committed.iter().map(|(_, _, f)| f),
        ));
    }
    if let Some(e) = remove_error {
        return Err(CliError::context("some leftovers could not be removed", e));
    }
    Ok(())
}
