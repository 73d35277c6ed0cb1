//! `filesink inspect`: one manifest, in human form or as JSON.

use std::io::Write;
use std::path::Path;

use filesink::ingest::SourcePosition;
use filesink::job::manifest::{manifest_path, Manifest};
use serde_json::json;

use super::exit::{CliError, CliResult};
use super::lake::{require_checkpoint, FileState, Lake};
use super::util::{human_age, human_bytes, human_time, now_ms, parse_job};
use filesink::storage::Location;

/// Arguments of `filesink inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// A local manifest file (`<lake>/_filesink/jobs/<job>/checkpoints/<id>.json`), or a
    /// sink: a directory (`./lake`, `file:///abs/lake`) or `s3://bucket/prefix`.
    #[arg(value_name = "MANIFEST-FILE|URL")]
    pub target: String,

    /// The job (for a sink with more than one).
    #[arg(long, value_parser = parse_job, value_name = "NAME")]
    pub job: Option<String>,

    /// The checkpoint id (default: the job's latest).
    #[arg(long, value_name = "ID")]
    pub checkpoint: Option<u64>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `filesink inspect`.
pub async fn run(args: InspectArgs, out: &mut dyn Write) -> CliResult {
    let location = Location::parse(&args.target)?;
    let manifest_file = location
        .local_path()
        .filter(|p| p.is_file())
        .map(Path::to_path_buf);
    let (file, manifest, lake) = if let Some(path) = manifest_file {
        if args.job.is_some() || args.checkpoint.is_some() {
            return Err(CliError::usage(
                "--job and --checkpoint choose a manifest in a sink, not in a file",
            ));
        }
        let (m, base) = read_manifest_file(&path)?;
        let lake = match base {
            Some(base) => Lake::open(Location::Local(base)).await.ok(),
            None => None,
        };
        (path.display().to_string(), m, lake)
    } else {
        let lake = Lake::open_sink(location).await?;
        let jobs = lake.jobs().await?;
        let job = match &args.job {
            Some(j) => {
                if !jobs.iter().any(|i| &i.job == j) {
                    return Err(CliError::msg(format!(
                        "job `{j}` has no manifests in `{}`",
                        lake.location
                    )));
                }
                j.clone()
            }
            None if jobs.len() == 1 => jobs[0].job.clone(),
            None if jobs.is_empty() => {
                return Err(CliError::msg(format!(
                    "`{}` has no manifests",
                    lake.location
                )))
            }
            None => {
                let names: Vec<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
                return Err(CliError::usage(format!(
                    "`{}` has {} jobs ({}): pick one with --job",
                    lake.location,
                    jobs.len(),
                    names.join(", ")
                )));
            }
        };
        let info = jobs
            .into_iter()
            .find(|j| j.job == job)
            .expect("checked above");
        let id = match args.checkpoint {
            Some(id) => {
                require_checkpoint(&info, id)?;
                id
            }
            None => match info.checkpoints.last() {
                Some((id, _)) => *id,
                None => return Err(CliError::msg(format!("job `{job}` has no manifests"))),
            },
        };
        let m = lake.manifest(&job, id).await?;
        let file = lake.describe(&manifest_path(&job, id));
        (file, m, Some(lake))
    };
    // Where each committable's file is, if the manifest is inside a sink.
    let mut states = Vec::with_capacity(manifest.committables.len());
    for c in &manifest.committables {
        states.push(match &lake {
            Some(l) => Some(
                l.file_state(c)
                    .await
                    .map_err(|e| super::ls::error_chain(&e)),
            ),
            None => None,
        });
    }
    print_manifest(out, &file, &manifest, &states, args.json)
}

/// Reads and checks a manifest file. A manifest is checked against where it lives
/// (`_filesink/jobs/<job>/checkpoints/<id>.json`); a copy elsewhere is checked against that
/// place instead. Returns the sink's base directory when the file is inside one.
fn read_manifest_file(path: &Path) -> CliResult<(Manifest, Option<std::path::PathBuf>)> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::context(format!("cannot read `{}`", path.display()), e))?;
    let shown = path.display().to_string();
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let abs_str = abs.display().to_string();
    // Where the manifest says it belongs, if the file is readable enough to say.
    let claimed = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| {
            let body = v.get("body")?;
            Some(manifest_path(
                body.get("job")?.as_str()?,
                body.get("checkpoint_id")?.as_u64()?,
            ))
        });
    match claimed {
        Some(rel) if !abs_str.ends_with(&rel) => {
            // A copy outside its lake: check everything but the location.
            let m = Manifest::decode(&rel, &bytes, None)
                .map_err(|e| CliError::context(format!("cannot read manifest `{shown}`"), e))?;
            Ok((m, None))
        }
        Some(rel) => {
            let m = Manifest::decode(&shown_or_abs(&shown, &abs_str, &rel), &bytes, None)?;
            let base = abs_str[..abs_str.len() - rel.len()]
                .trim_end_matches('/')
                .to_string();
            Ok((m, Some(base.into())))
        }
        None => Err(Manifest::decode(&shown, &bytes, None)
            .err()
            .map(CliError::from)
            .unwrap_or_else(|| CliError::msg(format!("`{shown}` is not a manifest")))),
    }
}

/// The path to name in messages: as given if it ends with the manifest's place, else absolute.
fn shown_or_abs(shown: &str, abs: &str, rel: &str) -> String {
    if shown.ends_with(rel) {
        shown.to_string()
    } else {
        abs.to_string()
    }
}

/// Where a committable's file is: `None` outside a sink, else its state or why it cannot be
/// told.
type State = Option<Result<FileState, String>>;

fn state_name(s: &State) -> Option<&'static str> {
    s.as_ref()
        .map(|s| s.as_ref().map_or("unknown", |s| s.name()))
}

fn print_manifest(
    out: &mut dyn Write,
    file: &str,
    m: &Manifest,
    states: &[State],
    json_out: bool,
) -> CliResult {
    let now = now_ms();
    let position = SourcePosition::from_json(&m.job, &m.source_position).ok();
    if json_out {
        let states: Vec<Option<&str>> = states.iter().map(state_name).collect();
        let v = json!({
            "file": file,
            "age_ms": now - m.created_at_ms,
            "manifest": m,
            "committable_states": states,
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(());
    }
    outln!(out, "manifest: {file}");
    outln!(out, "job: {}", m.job);
    outln!(
        out,
        "checkpoint: {} (completed {}, {} ago)",
        m.checkpoint_id,
        human_time(m.created_at_ms),
        human_age(now - m.created_at_ms)
    );
    outln!(out, "finished: {}", if m.finished { "yes" } else { "no" });
    outln!(out, "sink: {}", m.sink_id);
    match &position {
        Some(p) => {
            let at = match p.inputs.get(p.cursor.input) {
                Some(input) => format!(
                    "input {} of {} `{input}`, byte {}, line {}",
                    p.cursor.input + 1,
                    p.inputs.len(),
                    p.cursor.offset,
                    p.cursor.line
                ),
                None => format!("end of all {} input(s)", p.inputs.len()),
            };
            outln!(out, "source position: {at}");
            outln!(
                out,
                "  {} records written, {} bad, input format {}",
                p.records,
                p.bad_records,
                p.input_format.name()
            );
            if !p.partition_by.is_empty() {
                outln!(out, "  partitioned by: {}", p.partition_by.join(", "));
            }
            let cols: Vec<String> = p
                .schema
                .fields()
                .iter()
                .map(|f| format!("{} {}", f.name(), f.data_type()))
                .collect();
            outln!(out, "  schema: {}", cols.join(", "));
        }
        None => outln!(out, "source position: {}", m.source_position),
    }
    outln!(out, "writers: {}", m.writers.len());
    for w in &m.writers {
        outln!(
            out,
            "  {}  format {}, checkpoint {}, {} in-progress file(s)",
            w.writer_id,
            w.format,
            w.checkpoint_id,
            w.in_progress.len()
        );
        for f in &w.in_progress {
            outln!(
                out,
                "    {} -> {}  {} durable, {} records",
                f.in_progress_path,
                f.final_path,
                human_bytes(f.durable_len_bytes),
                f.record_count
            );
        }
        for f in &w.carried {
            outln!(
                out,
                "    {} -> {}  {} carried since checkpoint {}, {} records",
                f.in_progress_path,
                f.final_path,
                human_bytes(f.size_bytes),
                f.checkpoint_id,
                f.record_count
            );
        }
    }
    let bytes: u64 = m.committables.iter().map(|c| c.size_bytes).sum();
    let records: u64 = m.committables.iter().map(|c| c.record_count).sum();
    outln!(
        out,
        "committables: {} ({}, {records} records)",
        m.committables.len(),
        human_bytes(bytes)
    );
    for (c, state) in m.committables.iter().zip(states) {
        let shown = match state {
            None => String::new(),
            Some(Ok(s)) => format!("  [{}]", s.name()),
            Some(Err(e)) => format!("  [unknown: {e}]"),
        };
        outln!(
            out,
            "  {}  {}  {} records  checkpoint {}{shown}",
            c.final_path,
            human_bytes(c.size_bytes),
            c.record_count,
            c.checkpoint_id
        );
        if !matches!(state, Some(Ok(FileState::Visible))) {
            outln!(out, "    pending: {}", c.pending.leftover_id(&c.final_path));
        }
    }
    Ok(())
}
