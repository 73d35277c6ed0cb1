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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use filesink::job::Manifest;
use filesink::lake::{may_remove, may_remove_temp, MetadataTemp, Reference};
use filesink::storage::Leftover;
use filesink::Committable;
use serde_json::json;

use super::commit::{commit_manifest, failure, FileOutcome};
use super::exit::{CliError, CliResult};
use super::lake::{references, HeldJobs, JobInfo, Lake};
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
    let survey = Survey::read(&lake, &names, &mut held).await?;
    let min_age_ms = args.older_than.map_or(0, |d| d.as_millis() as i64);
    let plan = Plan::new(&survey, &held, now, min_age_ms);
    let done = act(&lake, &survey, &plan, &held, args.dry_run).await?;
    let report = Report {
        lake: &lake,
        now,
        dry_run: args.dry_run,
        survey: &survey,
        held: &held,
        plan: &plan,
        done: &done,
    };
    if args.json {
        let v = report.json();
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        report.text(out)?;
    }
    // The outcome is taken before the jobs are given back; a failed release is still the
    // error reported.
    let result = done.into_result();
    held.release().await?;
    result
}

/// What abort reads once the jobs are held: the hidden files and the latest manifests.
struct Survey {
    /// This sink's hidden files.
    leftovers: Vec<Leftover>,
    /// Hidden files that are not this sink's: reported and left alone.
    foreign: Vec<Leftover>,
    /// The temporary files of metadata writes.
    temps: Vec<MetadataTemp>,
    /// The latest manifest of every job that has one.
    latest: Vec<Manifest>,
    /// The hidden files the latest manifests need, and why.
    refs: BTreeMap<String, Reference>,
}

impl Survey {
    /// Reads the jobs' latest manifests and the hidden files; a job that is not among `names`
    /// (the jobs `held` was taken for) is added to `held.live`.
    async fn read(lake: &Lake, names: &[String], held: &mut HeldJobs) -> CliResult<Survey> {
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
        let latest = latest_manifests(lake, jobs)?;
        let refs = references(&latest);
        Ok(Survey {
            leftovers,
            foreign,
            temps,
            latest,
            refs,
        })
    }
}

/// The latest manifest of each of `jobs` that has one; an error if one cannot be read.
fn latest_manifests(lake: &Lake, jobs: Vec<JobInfo>) -> CliResult<Vec<Manifest>> {
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
    Ok(latest)
}

/// What abort removes and what it keeps, decided from the survey alone.
struct Plan<'a> {
    /// The leftovers it removes ([`may_remove`]).
    candidates: Vec<&'a Leftover>,
    /// The temporary metadata files it removes ([`may_remove_temp`]).
    temp_candidates: Vec<&'a MetadataTemp>,
    /// The leftovers of jobs owned by a live run, with the job: kept.
    kept_live: Vec<(&'a Leftover, &'a str)>,
    /// The leftovers no manifest needs, of no live run, younger than `--older-than`: kept.
    kept: Vec<&'a Leftover>,
}

impl<'a> Plan<'a> {
    /// Decides, at time `now`, for leftovers at least `min_age_ms` old.
    fn new(survey: &'a Survey, held: &'a HeldJobs, now: i64, min_age_ms: i64) -> Plan<'a> {
        let (leftovers, refs) = (&survey.leftovers, &survey.refs);
        let candidates: Vec<&Leftover> = leftovers
            .iter()
            .filter(|l| may_remove(l, refs, held, now, min_age_ms))
            .collect();
        // Temporary files of metadata writes that died before their rename (local disk).
        let temp_candidates: Vec<&MetadataTemp> = survey
            .temps
            .iter()
            .filter(|t| may_remove_temp(t, held, now, min_age_ms))
            .collect();
        let kept_live: Vec<(&Leftover, &str)> = leftovers
            .iter()
            .filter_map(|l| held.live_job_of(l).map(|job| (l, job)))
            .collect();
        // Each kept leftover is listed once, for its first reason: a live run's comes first.
        let kept: Vec<&Leftover> = leftovers
            .iter()
            .filter(|l| {
                !refs.contains_key(&l.path)
                    && age(now, l) < min_age_ms
                    && held.live_job_of(l).is_none()
            })
            .collect();
        Plan {
            candidates,
            temp_candidates,
            kept_live,
            kept,
        }
    }
}

/// The age of a leftover at time `now`: since the last modification of a hidden file, the
/// initiation of a multipart upload.
fn age(now: i64, l: &Leftover) -> i64 {
    now - l.modified_ms
}

/// A file a latest manifest names: its job, the manifest's checkpoint id, and what became of
/// it.
type CommittedFile = (String, u64, (Committable, FileOutcome));

/// What abort did (in a dry run: would do).
struct Done<'a> {
    /// The pending files of the latest manifests.
    committed: Vec<CommittedFile>,
    /// The first error committing them.
    first_error: Option<filesink::Error>,
    /// The leftovers removed, each with why it could not be if it could not.
    removed: Vec<(&'a Leftover, Option<String>)>,
    /// The temporary metadata files removed, the same way.
    temps_removed: Vec<(&'a MetadataTemp, Option<String>)>,
    /// The first error removing a leftover or a temporary file.
    remove_error: Option<filesink::Error>,
}

impl Done<'_> {
    /// How many files could not be committed.
    fn commit_failed(&self) -> usize {
        self.committed
            .iter()
            .filter(|(_, _, (_, o))| matches!(o, FileOutcome::Failed(..)))
            .count()
    }

    /// How many files were committed.
    fn n_committed(&self) -> usize {
        self.committed.len() - self.commit_failed()
    }

    /// How many leftovers and temporary files were removed.
    fn n_removed(&self) -> usize {
        self.removed.iter().filter(|(_, e)| e.is_none()).count()
            + self
                .temps_removed
                .iter()
                .filter(|(_, e)| e.is_none())
                .count()
    }

    /// The command's result: an error if a file could not be committed or a leftover
    /// removed.
    fn into_result(self) -> CliResult {
        let commit_failed = self.commit_failed();
        if commit_failed > 0 {
            return Err(failure(
                commit_failed,
                self.first_error,
                self.committed.iter().map(|(_, _, f)| f),
            ));
        }
        if let Some(e) = self.remove_error {
            return Err(CliError::context("some leftovers could not be removed", e));
        }
        Ok(())
    }
}

/// Commits what the latest manifests name, then removes what the plan removes.
async fn act<'a>(
    lake: &Lake,
    survey: &Survey,
    plan: &Plan<'a>,
    held: &HeldJobs,
    dry_run: bool,
) -> CliResult<Done<'a>> {
    // 1. Commit what complete checkpoints name: never delete it. A committable whose final
    // name is listed with its size and whose pending file is gone was committed: it is not
    // probed (which reads the whole file locally, one request on S3), so a lake of many
    // committed files costs two listings, not a read of every file. The others are probed.
    let (committed, first_error) = commit_latest(lake, survey, held, dry_run).await?;
    // 2. Remove the leftovers nothing needs.
    let (removed, leftover_error) = remove_leftovers(lake, &plan.candidates, dry_run).await;
    // 3. Remove the temporary files of metadata writes that died before their rename.
    let (temps_removed, temp_error) = remove_temps(lake, &plan.temp_candidates, dry_run).await;
    Ok(Done {
        committed,
        first_error,
        removed,
        temps_removed,
        remove_error: leftover_error.or(temp_error),
    })
}

/// Commits the files the latest manifests of the jobs no live run owns name, less those
/// already committed; returns them with the first error.
async fn commit_latest(
    lake: &Lake,
    survey: &Survey,
    held: &HeldJobs,
    dry_run: bool,
) -> CliResult<(Vec<CommittedFile>, Option<filesink::Error>)> {
    let visible: HashMap<String, u64> = lake
        .visible()
        .await?
        .into_iter()
        .map(|f| (f.path, f.size_bytes))
        .collect();
    let hidden: HashSet<&str> = survey
        .leftovers
        .iter()
        .chain(&survey.foreign)
        .map(|l| l.path.as_str())
        .collect();
    let settled = |c: &Committable| {
        visible.get(&c.final_path) == Some(&c.size_bytes)
            && !hidden.contains(c.pending.leftover_id(&c.final_path).as_str())
    };
    let mut committed = Vec::new();
    let mut first_error = None;
    for m in survey.latest.iter().filter(|m| !held.is_live(&m.job)) {
        let unsettled;
        let m = if m.committables.iter().any(settled) {
            let mut rest = m.clone();
            rest.committables.retain(|c| !settled(c));
            unsettled = rest;
            &unsettled
        } else {
            m
        };
        let (files, err) = commit_manifest(lake, m, true, dry_run).await?;
        if let Some(e) = err {
            first_error.get_or_insert(e);
        }
        for f in files {
            committed.push((m.job.clone(), m.checkpoint_id, f));
        }
    }
    Ok((committed, first_error))
}

/// Removes `candidates` (in a dry run, nothing); returns each with why it could not be
/// removed if it could not, and the first error.
async fn remove_leftovers<'a>(
    lake: &Lake,
    candidates: &[&'a Leftover],
    dry_run: bool,
) -> (Vec<(&'a Leftover, Option<String>)>, Option<filesink::Error>) {
    let mut removed: Vec<(&Leftover, Option<String>)> = Vec::with_capacity(candidates.len());
    let mut remove_error = None;
    for &l in candidates {
        if dry_run {
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
    (removed, remove_error)
}

/// Removes the temporary metadata files `candidates` as [`remove_leftovers`] removes
/// leftovers.
async fn remove_temps<'a>(
    lake: &Lake,
    candidates: &[&'a MetadataTemp],
    dry_run: bool,
) -> (
    Vec<(&'a MetadataTemp, Option<String>)>,
    Option<filesink::Error>,
) {
    let mut temps_removed: Vec<(&MetadataTemp, Option<String>)> = Vec::new();
    let mut remove_error = None;
    for &t in candidates {
        if dry_run {
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
    (temps_removed, remove_error)
}

/// What abort shows: what it found, decided and did.
struct Report<'a> {
    /// The lake.
    lake: &'a Lake,
    /// When abort started, in ms since the epoch: ages count from it.
    now: i64,
    /// Whether this is a dry run.
    dry_run: bool,
    /// What it read.
    survey: &'a Survey,
    /// The jobs it held, and those owned by a live run.
    held: &'a HeldJobs,
    /// What it decided.
    plan: &'a Plan<'a>,
    /// What it did.
    done: &'a Done<'a>,
}

impl Report<'_> {
    /// The report as JSON.
    fn json(&self) -> serde_json::Value {
        let Report {
            lake,
            now,
            survey,
            held,
            plan,
            done,
            ..
        } = self;
        json!({
            "dry_run": self.dry_run,
            "commit": done.committed.iter().map(|(job, id, (c, o))| json!({
                "job": job,
                "checkpoint_id": id,
                "final_path": c.final_path,
                "size_bytes": c.size_bytes,
                "outcome": o.name(),
                "error": match o { FileOutcome::Failed(_, e) => Some(e), _ => None },
            })).collect::<Vec<_>>(),
            "remove": done.removed.iter().map(|(l, e)| json!({
                "path": l.path,
                "final_path": l.final_path,
                "upload_id": lake.upload_id(l),
                "size_bytes": l.size_bytes,
                "age_ms": age(*now, l),
                "error": e,
            })).collect::<Vec<_>>(),
            "remove_metadata_temps": done.temps_removed.iter().map(|(t, e)| json!({
                "path": t.path,
                "job": t.job,
                "age_ms": now - t.modified_ms,
                "error": e,
            })).collect::<Vec<_>>(),
            "kept_metadata_temps": survey.temps.len() - plan.temp_candidates.len(),
            "kept_younger": plan.kept.iter().map(|l| &l.path).collect::<Vec<_>>(),
            "kept_live": plan.kept_live.iter().map(|(l, job)| json!({
                "path": l.path,
                "job": job,
            })).collect::<Vec<_>>(),
            "live_jobs": held.live.iter().map(|(job, holder)| json!({
                "job": job,
                "holder": holder,
            })).collect::<Vec<_>>(),
            "foreign": survey.foreign.iter().map(|l| &l.path).collect::<Vec<_>>(),
            "committed": done.n_committed(),
            "removed": done.n_removed(),
        })
    }

    /// The report as text.
    fn text(&self, out: &mut dyn Write) -> CliResult {
        let (c_verb, r_verb) = if self.dry_run {
            ("would commit", "would remove")
        } else {
            ("committed", "removed")
        };
        self.text_commit(out)?;
        self.text_remove(out, r_verb)?;
        self.text_temps(out, r_verb)?;
        self.text_kept(out)?;
        outln!(
            out,
            "total: {c_verb} {}, {r_verb} {}",
            self.done.n_committed(),
            self.done.n_removed()
        );
        Ok(())
    }

    /// The pending files of the latest manifests, and what became of each.
    fn text_commit(&self, out: &mut dyn Write) -> CliResult {
        let committed = &self.done.committed;
        outln!(
            out,
            "pending files named by latest manifests: {}",
            committed.len()
        );
        for (job, id, (c, o)) in committed {
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
        Ok(())
    }

    /// The leftovers no manifest needs, each `r_verb` (removed) or failed.
    fn text_remove(&self, out: &mut dyn Write, r_verb: &str) -> CliResult {
        let (lake, now, removed) = (self.lake, self.now, &self.done.removed);
        outln!(out, "leftovers needed by no manifest: {}", removed.len());
        for (l, e) in removed {
            let (verb, why) = match e {
                Some(e) => ("failed", format!(": {e}")),
                None => (r_verb, String::new()),
            };
            match lake.upload_id(l) {
                Some(id) => outln!(
                    out,
                    "  {:<18} {}  (multipart upload {id}, started {} ago){why}",
                    match (e, self.dry_run) {
                        (Some(_), _) => "failed",
                        (None, true) => "would abort",
                        (None, false) => "aborted",
                    },
                    l.final_path,
                    human_age(age(now, l))
                ),
                None => outln!(
                    out,
                    "  {verb:<18} {}  ({}, modified {} ago){why}",
                    l.path,
                    human_bytes(l.size_bytes),
                    human_age(age(now, l))
                ),
            }
        }
        Ok(())
    }

    /// The temporary files of unfinished metadata writes, each `r_verb` (removed) or failed.
    fn text_temps(&self, out: &mut dyn Write, r_verb: &str) -> CliResult {
        let temps = &self.survey.temps;
        if !temps.is_empty() {
            outln!(
                out,
                "temporary files of unfinished metadata writes: {}",
                temps.len()
            );
        }
        for (t, e) in &self.done.temps_removed {
            let (verb, why) = match e {
                Some(e) => ("failed", format!(": {e}")),
                None => (r_verb, String::new()),
            };
            outln!(
                out,
                "  {verb:<18} {}  (modified {} ago){why}",
                t.path,
                human_age(self.now - t.modified_ms)
            );
        }
        let temps_kept = temps.len() - self.plan.temp_candidates.len();
        if temps_kept > 0 {
            outln!(
                out,
                "kept {temps_kept} of them: younger than --older-than, of a live job, or outside \
                 a job's directory and younger than an hour"
            );
        }
        Ok(())
    }

    /// What abort left alone: young leftovers, the jobs of live runs, foreign files.
    fn text_kept(&self, out: &mut dyn Write) -> CliResult {
        let (plan, foreign) = (self.plan, &self.survey.foreign);
        if !plan.kept.is_empty() {
            outln!(
                out,
                "kept {} leftover(s) younger than --older-than",
                plan.kept.len()
            );
        }
        for (job, holder) in &self.held.live {
            let n = plan.kept_live.iter().filter(|(_, j)| j == job).count();
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
            for l in foreign {
                outln!(out, "  {}", l.path);
            }
        }
        Ok(())
    }
}
