//! `filesink commit`: makes the pending files of complete checkpoints visible. Idempotent:
//! a file already committed is checked (size and CRC-32C locally, the multipart ETag on S3)
//! and reported as such.

use std::io::Write;

use filesink::job::Manifest;
use filesink::table::delta::TableOutcome;
use filesink::{CommitOutcome, Committable};
use serde_json::json;

use super::exit::{code_of, CliError, CliResult, CONFLICT, DATA_LOST, ERROR};
use super::lake::{require_checkpoint, FileState, HeldJobs, Lake};
use super::util::{human_bytes, parse_job};
use filesink::storage::Location;

/// Which checkpoint of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointSel {
    /// The job's latest manifest.
    Latest,
    /// The manifest with this id.
    Id(u64),
}

/// Parses `latest` or a checkpoint id.
pub fn parse_checkpoint(s: &str) -> Result<CheckpointSel, String> {
    if s == "latest" {
        return Ok(CheckpointSel::Latest);
    }
    s.parse()
        .map(CheckpointSel::Id)
        .map_err(|_| format!("`{s}` is not a checkpoint id or `latest`"))
}

/// Arguments of `filesink commit`.
#[derive(Debug, clap::Args)]
pub struct CommitArgs {
    /// The sink: a directory (`./lake`, `/abs/lake`, `file:///abs/lake`) or
    /// `s3://bucket/prefix`.
    #[arg(value_name = "URL")]
    pub url: String,

    /// Only this job (default: every job).
    #[arg(long, value_parser = parse_job, value_name = "NAME")]
    pub job: Option<String>,

    /// The checkpoint whose files to commit: an id, or `latest` (default).
    #[arg(long, value_parser = parse_checkpoint, value_name = "ID|latest", default_value = "latest")]
    pub checkpoint: CheckpointSel,

    /// Say what would be committed; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// For a Delta table on a store that ignores conditional writes (Garage): this is the
    /// table's only writer (as `ingest --single-writer`).
    #[arg(long)]
    pub single_writer: bool,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What happened (or would happen) to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// Made visible now.
    Committed,
    /// Was visible already, with the right content.
    AlreadyCommitted,
    /// Dry run: would be made visible.
    WouldCommit,
    /// Failed (or, in a dry run, would fail), with the exit code it implies and why.
    Failed(u8, String),
}

impl FileOutcome {
    /// A short name for output.
    pub fn name(&self) -> &'static str {
        match self {
            FileOutcome::Committed => "committed",
            FileOutcome::AlreadyCommitted => "already committed",
            FileOutcome::WouldCommit => "would commit",
            FileOutcome::Failed(..) => "failed",
        }
    }
}

/// Commits (or, with `dry_run`, checks) the committables of `m`. Returns one outcome per
/// committable and the first error.
pub async fn commit_manifest(
    lake: &Lake,
    m: &Manifest,
    only_unseen: bool,
    dry_run: bool,
) -> CliResult<(Vec<(Committable, FileOutcome)>, Option<filesink::Error>)> {
    // A dry run, and `only_unseen`, need to know where each file stands: one probe each.
    let mut todo = Vec::with_capacity(m.committables.len());
    for c in &m.committables {
        let state = if only_unseen || dry_run {
            Some(lake.file_state(c).await)
        } else {
            None
        };
        // A file whose state cannot be told is committed (or predicted) anyway: the commit
        // says what is wrong.
        if only_unseen && matches!(state, Some(Ok(FileState::Visible))) {
            continue;
        }
        todo.push((c.clone(), state));
    }
    let mut out = Vec::with_capacity(todo.len());
    let mut first_error = None;
    if dry_run {
        for (c, state) in todo {
            let outcome = predict(&c, state.expect("probed for a dry run"));
            out.push((c, outcome));
        }
        return Ok((out, None));
    }
    let todo: Vec<Committable> = todo.into_iter().map(|(c, _)| c).collect();
    let results = lake.sink()?.committer().commit(&todo).await;
    for (c, r) in todo.into_iter().zip(results) {
        let outcome = match r {
            Ok(CommitOutcome::Committed) => FileOutcome::Committed,
            Ok(CommitOutcome::AlreadyCommitted) => FileOutcome::AlreadyCommitted,
            Err(e) => {
                let outcome = FileOutcome::Failed(code_of(&e), super::ls::error_chain(&e));
                first_error.get_or_insert(e);
                outcome
            }
        };
        out.push((c, outcome));
    }
    Ok((out, first_error))
}

/// What committing `c` would do, from where its file stands ([`Lake::file_state`]).
fn predict(c: &Committable, state: filesink::Result<FileState>) -> FileOutcome {
    match state {
        Ok(FileState::Pending) => FileOutcome::WouldCommit,
        Ok(FileState::Visible) => FileOutcome::AlreadyCommitted,
        Ok(FileState::Missing) => FileOutcome::Failed(
            DATA_LOST,
            format!(
                "data lost: neither the pending file nor `{}` exists",
                c.final_path
            ),
        ),
        Ok(FileState::Conflict) => FileOutcome::Failed(
            CONFLICT,
            format!("conflict: `{}` exists with other content", c.final_path),
        ),
        Err(e) => FileOutcome::Failed(
            code_of(&e),
            format!(
                "cannot check `{}`: {}",
                c.final_path,
                super::ls::error_chain(&e)
            ),
        ),
    }
}

/// How the text and JSON outputs name what the log step did.
fn table_outcome_name(o: &TableOutcome) -> String {
    match o {
        TableOutcome::Committed(v) => format!("committed at table version {v}"),
        TableOutcome::AlreadyCommitted => "already in the log".into(),
        TableOutcome::NothingToCommit => "nothing to add".into(),
        TableOutcome::Deferred => "deferred (lost the race for a version too often)".into(),
        TableOutcome::Abandoned => "abandoned".into(),
        _ => format!("{o:?}"),
    }
}

/// Runs `filesink commit`.
pub async fn run(args: CommitArgs, out: &mut dyn Write) -> CliResult {
    let lake = Lake::open_sink(Location::parse(&args.url)?).await?;
    let names = job_names(&lake, &args).await?;
    // A live run commits its own checkpoints: leave its job alone, and hold the others while
    // committing so that no run starts under us.
    let held = lake.hold_jobs(&names, args.dry_run).await?;
    if let (Some(job), Some((_, holder))) = (&args.job, held.live.first()) {
        return Err(CliError::refused(format!(
            "job `{job}` in `{}` is owned by a live run ({holder}); it commits its own \
             checkpoints, nothing was changed",
            lake.location
        )));
    }
    let manifests = manifests(&lake, &args, &names, &held).await?;
    let commits = Commits::commit(&lake, &manifests, &args).await?;
    if args.json {
        let v = commits.json(args.dry_run, &held);
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        commits.text(out, &lake, &held, args.dry_run)?;
    }
    held.release().await?;
    commits.into_result()
}

/// The jobs to commit: `--job`, or every job with manifests.
async fn job_names(lake: &Lake, args: &CommitArgs) -> CliResult<Vec<String>> {
    // Only the names: the manifests are read below, after the jobs are held (as `abort`
    // does). Read before, a run's newer checkpoint, written between the read and the hold
    // by a run that then died, would be missed: its files left pending, and the command
    // saying all was committed.
    let mut names: Vec<String> = lake.job_names().await?;
    if let Some(job) = &args.job {
        names.retain(|n| n == job);
        if names.is_empty() {
            return Err(CliError::msg(format!(
                "job `{job}` has no manifests in `{}`",
                lake.location
            )));
        }
    } else if matches!(args.checkpoint, CheckpointSel::Id(_)) && names.len() > 1 {
        return Err(CliError::usage(format!(
            "--checkpoint with an id needs --job: `{}` has {} jobs",
            lake.location,
            names.len()
        )));
    }
    Ok(names)
}

/// The manifest `--checkpoint` selects of each of `names` that no live run owns.
async fn manifests(
    lake: &Lake,
    args: &CommitArgs,
    names: &[String],
    held: &HeldJobs,
) -> CliResult<Vec<Manifest>> {
    let mut jobs = lake.jobs().await?;
    // A job that appeared after the listing is not held by us: its run may be live.
    jobs.retain(|j| names.contains(&j.job));
    jobs.retain(|j| !held.is_live(&j.job));
    let mut manifests = Vec::new();
    for j in jobs {
        let m = match args.checkpoint {
            CheckpointSel::Latest => match j.latest {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => {
                    return Err(CliError::context(
                        format!(
                            "cannot read the latest manifest of job `{}` in `{}`; nothing was committed",
                            j.job,
                            lake.location
                        ),
                        e,
                    ))
                }
            },
            CheckpointSel::Id(id) => {
                require_checkpoint(&j, id)?;
                lake.manifest(&j.job, id).await?
            }
        };
        manifests.push(m);
    }
    Ok(manifests)
}

/// What committing the manifests did (in a dry run: would do).
struct Commits<'a> {
    /// Each manifest, with what became of each of its files.
    results: Vec<(&'a Manifest, Vec<(Committable, FileOutcome)>)>,
    /// For each manifest, what writing its table log entry did, or why it failed; `None`
    /// where no entry was written.
    table_outcomes: Vec<Option<Result<TableOutcome, String>>>,
    /// The first error, committing a file or writing a log entry.
    first_error: Option<filesink::Error>,
}

impl<'a> Commits<'a> {
    /// Commits the files of `manifests`, and the log entry of each table job's checkpoint.
    async fn commit(
        lake: &Lake,
        manifests: &'a [Manifest],
        args: &CommitArgs,
    ) -> CliResult<Commits<'a>> {
        let mut results = Vec::new();
        let mut first_error = None;
        let mut table_outcomes = Vec::new();
        for m in manifests {
            let (files, err) = commit_manifest(lake, m, false, args.dry_run).await?;
            // A table job's checkpoint is in the table once its log entry is: written here as
            // the job's restore would, once every file is committed.
            let outcome = match (&m.table, &err, args.dry_run) {
                (Some(_), None, false) => Some(
                    filesink::job::commit_table_entry(
                        lake.sink()?.storage().clone(),
                        &lake.location.to_string(),
                        m,
                        args.single_writer,
                    )
                    .await
                    .map_err(|e| {
                        let why = super::ls::error_chain(&e);
                        first_error.get_or_insert(e);
                        why
                    }),
                ),
                _ => None,
            };
            table_outcomes.push(outcome);
            if let Some(e) = err {
                first_error.get_or_insert(e);
            }
            results.push((m, files));
        }
        Ok(Commits {
            results,
            table_outcomes,
            first_error,
        })
    }

    /// How many files have an outcome `f` holds for.
    fn count(&self, f: fn(&FileOutcome) -> bool) -> usize {
        self.results
            .iter()
            .flat_map(|(_, files)| files.iter())
            .filter(|(_, o)| f(o))
            .count()
    }

    /// How many files were committed (in a dry run: would be).
    fn committed(&self) -> usize {
        self.count(|o| matches!(o, FileOutcome::Committed | FileOutcome::WouldCommit))
    }

    /// How many files were committed already.
    fn already(&self) -> usize {
        self.count(|o| matches!(o, FileOutcome::AlreadyCommitted))
    }

    /// How many files could not be committed.
    fn failed(&self) -> usize {
        self.count(|o| matches!(o, FileOutcome::Failed(..)))
    }

    /// What the commits did as JSON; `held` names the jobs skipped, owned by a live run.
    fn json(&self, dry_run: bool, held: &HeldJobs) -> serde_json::Value {
        let table_outcomes = &self.table_outcomes;
        json!({
            "dry_run": dry_run,
            "jobs": self.results.iter().enumerate().map(|(i, (m, files))| json!({
                "job": m.job,
                "checkpoint_id": m.checkpoint_id,
                "table": m.table.as_ref().map(|t| json!({
                    "format": t.format,
                    "log_entry": match table_outcomes.get(i).and_then(Option::as_ref) {
                        Some(Ok(o)) => json!(table_outcome_name(o)),
                        Some(Err(why)) => json!({ "error": why }),
                        None => json!(null),
                    },
                })),
                "files": files.iter().map(|(c, o)| json!({
                    "final_path": c.final_path,
                    "size_bytes": c.size_bytes,
                    "record_count": c.record_count,
                    "outcome": o.name(),
                    "error": match o { FileOutcome::Failed(_, e) => Some(e), _ => None },
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "committed": self.committed(),
            "already_committed": self.already(),
            "failed": self.failed(),
            "skipped_live_jobs": held.live.iter().map(|(job, holder)| json!({
                "job": job,
                "holder": holder,
            })).collect::<Vec<_>>(),
        })
    }

    /// What the commits did as text; `held` names the jobs skipped, owned by a live run.
    fn text(&self, out: &mut dyn Write, lake: &Lake, held: &HeldJobs, dry_run: bool) -> CliResult {
        for (job, holder) in &held.live {
            outln!(
                out,
                "job `{job}`: skipped, owned by a live run ({holder}); it commits its own checkpoints"
            );
        }
        if self.results.is_empty() {
            outln!(
                out,
                "no manifests in `{}`; nothing to commit",
                lake.location
            );
        }
        for (i, (m, files)) in self.results.iter().enumerate() {
            let table_outcome = self.table_outcomes.get(i).and_then(Option::as_ref);
            text_checkpoint(out, m, table_outcome, files)?;
        }
        let verb = if dry_run { "would commit" } else { "committed" };
        outln!(
            out,
            "total: {verb} {}, already committed {}, failed {}",
            self.committed(),
            self.already(),
            self.failed()
        );
        Ok(())
    }

    /// The command's result: an error if a file could not be committed or a log entry
    /// written.
    fn into_result(self) -> CliResult {
        let failed = self.failed();
        if failed > 0 {
            return Err(failure(
                failed,
                self.first_error,
                self.results.iter().flat_map(|(_, f)| f.iter()),
            ));
        }
        if let Some(e) = self.first_error {
            // Every file is committed, but a table's log entry was not written.
            return Err(CliError::context(
                "the files are committed, but a Delta log entry was not written (the job's next \
                 run writes it)",
                e,
            ));
        }
        Ok(())
    }
}

/// The text of manifest `m`'s commit: its table log entry (`table_outcome`), and its files.
fn text_checkpoint(
    out: &mut dyn Write,
    m: &Manifest,
    table_outcome: Option<&Result<TableOutcome, String>>,
    files: &[(Committable, FileOutcome)],
) -> CliResult {
    outln!(
        out,
        "job `{}` checkpoint {}: {} file(s)",
        m.job,
        m.checkpoint_id,
        files.len()
    );
    match table_outcome {
        Some(Ok(o)) => outln!(out, "  delta log entry: {}", table_outcome_name(o)),
        Some(Err(why)) => outln!(
            out,
            "  delta log entry: not written ({why}); the job's next run writes it"
        ),
        None if m.table.is_some() => outln!(
            out,
            "  delta log entry: not written; the job's next run writes it once every \
             file is committed"
        ),
        None => {}
    }
    for (c, o) in files {
        let why = match o {
            FileOutcome::Failed(_, e) => format!(": {e}"),
            _ => String::new(),
        };
        outln!(
            out,
            "  {:<18} {}  ({}, {} records){why}",
            o.name(),
            c.final_path,
            human_bytes(c.size_bytes),
            c.record_count
        );
    }
    Ok(())
}

/// The error for `failed` files that could not be (or would not be) committed: caused by the
/// first library error if there was one, else with the exit code of the first predicted
/// failure.
pub fn failure<'a>(
    failed: usize,
    first_error: Option<filesink::Error>,
    outcomes: impl IntoIterator<Item = &'a (Committable, FileOutcome)>,
) -> CliError {
    let msg = format!("{failed} file(s) could not be committed");
    match first_error {
        Some(e) => CliError::context(msg, e),
        None => {
            let code = outcomes
                .into_iter()
                .find_map(|(_, o)| match o {
                    FileOutcome::Failed(code, _) => Some(*code),
                    _ => None,
                })
                .unwrap_or(ERROR);
            CliError::new(code, msg)
        }
    }
}
