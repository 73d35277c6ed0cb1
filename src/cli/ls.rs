//! `filesink ls`: what a sink holds: committed files per partition, pending files, hidden
//! leftovers, and each job's manifests. On S3 also the orphan multipart uploads (incomplete
//! uploads no manifest needs), and a warning when the bucket has no lifecycle rule that
//! aborts incomplete uploads.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;

use filesink::ingest::SourcePosition;
use filesink::job::Manifest;
use filesink::lake::{MetadataTemp, Partition, Reference};
use filesink::maintain::compaction_round;
use filesink::storage::{Leftover, VisibleFile};
use filesink::table::delta::TableInfo;
use filesink::Committable;
use serde_json::json;

use super::exit::{CliError, CliResult};
use super::lake::{committed, own_names, own_visible, references, FileState, JobInfo, Lake};
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
    let listing = Listing::gather(lake).await?;
    for w in &listing.warnings {
        let _ = writeln!(std::io::stderr(), "warning: {w}");
    }
    if args.json {
        let v = listing.json();
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        listing.text(out)?;
    }
    listing.unreadable_error()
}

/// What `ls` shows of a lake, read once: the text and JSON outputs are made from it.
struct Listing {
    /// The lake listed.
    lake: Lake,
    /// When it was listed, in ms since the epoch: ages count from it.
    now: i64,
    /// Every job with its manifests and latest manifest.
    jobs: Vec<JobInfo>,
    /// Who runs each of `jobs` right now, in the same order.
    holders: Vec<Option<String>>,
    /// The visible files that are the sink's own parts.
    own: Vec<VisibleFile>,
    /// The visible files that are not.
    others: Vec<VisibleFile>,
    /// The sink's own visible files per partition.
    committed: BTreeMap<String, Partition>,
    /// A Delta table at the base.
    table: Option<TableInfo>,
    /// How the table's log names this sink's jobs: `filesink-<sink id>-<job>`, less the job.
    app_prefix: String,
    /// This sink's hidden files.
    leftovers: Vec<Leftover>,
    /// Hidden files that look like part files or uploads, not this sink's.
    foreign: Vec<Leftover>,
    /// Temporary files of unfinished metadata writes.
    temps: Vec<MetadataTemp>,
    /// The hidden files the latest manifests need, and why.
    refs: BTreeMap<String, Reference>,
    /// Committables of latest manifests whose final file is not visible yet.
    pending: Vec<Pending>,
    /// What the user should know about the location ([`warnings`]).
    warnings: Vec<String>,
}

/// A committable of a latest manifest whose final file is not visible yet.
struct Pending {
    /// The manifest's job.
    job: String,
    /// The manifest's checkpoint id.
    checkpoint_id: u64,
    /// The committable.
    committable: Committable,
    /// Where its file is.
    state: FileState,
}

impl Listing {
    /// Reads what `ls` shows of `lake`.
    async fn gather(lake: Lake) -> CliResult<Listing> {
        let now = now_ms();
        let visible = lake.visible().await?;
        let jobs = lake.jobs().await?;
        // Files that are not the sink's own parts are not its output: listed apart, never
        // counted as committed.
        let own_names = own_names(&jobs).with_retired(lake.retired().await?);
        let (own, others) = own_visible(visible, &own_names);
        let committed = committed(&own);
        let table = table_info(&lake).await?;
        let app_prefix = lake
            .identity()
            .map(|i| format!("filesink-{}-", i.sink_id))
            .unwrap_or_default();
        // Who runs each job right now (never takes the job, so `ls` cannot get in a run's way).
        let names: Vec<String> = jobs.iter().map(|j| j.job.clone()).collect();
        let holders = lake.holders(&names).await?;
        let (leftovers, foreign) = lake.leftovers(&jobs).await?;
        let temps = lake.metadata_temps(&jobs).await?;
        let refs = references(latest(&jobs));
        let pending = pending(&lake, &jobs, &own).await?;
        let warnings = warnings(&lake).await;
        Ok(Listing {
            lake,
            now,
            jobs,
            holders,
            own,
            others,
            committed,
            table,
            app_prefix,
            leftovers,
            foreign,
            temps,
            refs,
            pending,
            warnings,
        })
    }

    /// The checkpoint of `job` the table's log has got to, if it has any.
    fn in_log(&self, job: &str) -> Option<i64> {
        let app_prefix = &self.app_prefix;
        self.table
            .as_ref()
            .and_then(|t| t.txns.get(&format!("{app_prefix}{job}")).copied())
    }

    /// The jobs whose latest manifest cannot be read.
    fn unreadable(&self) -> Vec<&str> {
        self.jobs
            .iter()
            .filter(|j| j.latest.is_err())
            .map(|j| j.job.as_str())
            .collect()
    }

    /// The leftovers no latest manifest needs, as (of unknown state, unreferenced).
    fn unreferenced(&self) -> (Vec<&Leftover>, Vec<&Leftover>) {
        // A job whose latest manifest cannot be read may need any hidden file: none of them
        // is a leftover then, their state is unknown (and `abort` refuses to touch them).
        let unreadable = self.unreadable();
        self.leftovers
            .iter()
            .filter(|l| !self.refs.contains_key(&l.path))
            .partition(|_| !unreadable.is_empty())
    }

    /// The unreferenced leftovers, as (incomplete multipart uploads, hidden files).
    fn uploads_and_hidden(&self) -> (Vec<&Leftover>, Vec<&Leftover>) {
        // Incomplete multipart uploads (S3) are shown apart from hidden files.
        let (_, unreferenced) = self.unreferenced();
        unreferenced
            .into_iter()
            .partition(|l| self.lake.upload_id(l).is_some())
    }

    /// The leftovers a latest manifest needs, with why.
    fn referenced(&self) -> Vec<(&Leftover, &Reference)> {
        self.leftovers
            .iter()
            .filter_map(|l| self.refs.get(&l.path).map(|r| (l, r)))
            .collect()
    }

    /// The listing as JSON.
    fn json(&self) -> serde_json::Value {
        let (lake, now, committed, others) = (&self.lake, self.now, &self.committed, &self.others);
        let (unknown, unreferenced) = self.unreferenced();
        let (uploads, _) = self.uploads_and_hidden();
        json!({
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
            "jobs": self.jobs.iter().zip(&self.holders).map(|(j, holder)| {
                self.job_json(j, holder.as_deref())
            }).collect::<Vec<_>>(),
            "pending": self.pending.iter().map(|p| json!({
                "job": p.job, "checkpoint_id": p.checkpoint_id,
                "final_path": p.committable.final_path,
                "size_bytes": p.committable.size_bytes, "record_count": p.committable.record_count,
                "state": p.state.name(),
            })).collect::<Vec<_>>(),
            "referenced": self.referenced().iter().map(|(l, r)| json!({
                "path": l.path, "final_path": l.final_path, "size_bytes": l.size_bytes,
                "age_ms": now - l.modified_ms, "job": r.job, "checkpoint_id": r.checkpoint_id,
                "kind": r.kind.name(), "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "unknown": unknown.iter().map(|l| json!({
                "path": l.path, "final_path": l.final_path, "size_bytes": l.size_bytes,
                "age_ms": now - l.modified_ms, "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "metadata_temps": self.temps.iter().map(|t| json!({
                "path": t.path, "job": t.job, "age_ms": now - t.modified_ms,
            })).collect::<Vec<_>>(),
            "leftovers": unreferenced.iter().map(|l| json!({
                "path": l.path, "final_path": l.final_path, "size_bytes": l.size_bytes,
                "age_ms": now - l.modified_ms, "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "foreign": self.foreign.iter().map(|l| json!({
                "path": l.path, "size_bytes": l.size_bytes, "age_ms": now - l.modified_ms,
                "upload_id": lake.upload_id(l),
            })).collect::<Vec<_>>(),
            "orphan_uploads": uploads.iter().map(|l| json!({
                "path": l.path, "final_path": l.final_path, "upload_id": lake.upload_id(l),
                "initiated_ms": l.modified_ms, "age_ms": now - l.modified_ms,
            })).collect::<Vec<_>>(),
            "warnings": self.warnings,
            "table": self.table,
        })
    }

    /// Job `j`, run by `holder` if any, as JSON.
    fn job_json(&self, j: &JobInfo, holder: Option<&str>) -> serde_json::Value {
        let latest = j.latest.as_ref().ok().and_then(|m| m.as_ref());
        json!({
            "job": j.job,
            "live": holder.is_some(),
            "holder": holder,
            "checkpoints": j.checkpoints.iter().map(|(id, ms)| json!({
                "id": id, "modified_ms": ms, "age_ms": self.now - ms,
            })).collect::<Vec<_>>(),
            "latest": latest.map(|m| m.checkpoint_id),
            "in_table_log": self.in_log(&j.job),
            "finished": latest.map(|m| m.finished),
            "records": latest.and_then(records_of),
            "compaction_round": latest.and_then(compaction_round),
            "error": j.latest.as_ref().err().map(|e| error_chain(e)),
        })
    }

    /// The listing as text, a section after another.
    fn text(&self, out: &mut dyn Write) -> CliResult {
        self.text_sink(out)?;
        self.text_committed(out)?;
        self.text_other_files(out)?;
        self.text_table(out)?;
        self.text_jobs(out)?;
        self.text_pending(out)?;
        self.text_referenced(out)?;
        self.text_unknown(out)?;
        self.text_leftovers(out)?;
        self.text_temps(out)?;
        self.text_foreign(out)?;
        self.text_uploads(out)
    }

    /// Where the lake is, and its identity.
    fn text_sink(&self, out: &mut dyn Write) -> CliResult {
        outln!(out, "location: {}", self.lake.base());
        match self.lake.identity() {
            Some(i) => outln!(
                out,
                "sink: {} (created {}, {} ago)",
                i.sink_id,
                human_time(i.created_at_ms),
                human_age(self.now - i.created_at_ms)
            ),
            None => outln!(
                out,
                "sink: none (not a filesink output: no _filesink/sink.json)"
            ),
        }
        Ok(())
    }

    /// The committed files, in total and per partition.
    fn text_committed(&self, out: &mut dyn Write) -> CliResult {
        let files: u64 = self.committed.values().map(|p| p.files).sum();
        let bytes: u64 = self.committed.values().map(|p| p.bytes).sum();
        outln!(out, "committed: {files} file(s), {}", human_bytes(bytes));
        for (k, p) in &self.committed {
            let name = if k.is_empty() { "." } else { k };
            outln!(
                out,
                "  {name}  {} file(s)  {}",
                p.files,
                human_bytes(p.bytes)
            );
        }
        Ok(())
    }

    /// The visible files that are not the sink's own, the first [`OTHER_FILES_SHOWN`] named.
    fn text_other_files(&self, out: &mut dyn Write) -> CliResult {
        let others = &self.others;
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
        Ok(())
    }

    /// The Delta table at the base, if there is one.
    fn text_table(&self, out: &mut dyn Write) -> CliResult {
        if let Some(t) = &self.table {
            let visible: HashSet<&str> = self.own.iter().map(|f| f.path.as_str()).collect();
            let other_paths: HashSet<&str> = self.others.iter().map(|f| f.path.as_str()).collect();
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
        Ok(())
    }

    /// The jobs, each with its status and checkpoints.
    fn text_jobs(&self, out: &mut dyn Write) -> CliResult {
        outln!(out, "jobs: {}", self.jobs.len());
        for (j, holder) in self.jobs.iter().zip(&self.holders) {
            let ids: Vec<String> = j
                .checkpoints
                .iter()
                .map(|(id, ms)| format!("{id} ({} ago)", human_age(self.now - ms)))
                .collect();
            let status = self.job_status(j, holder.as_deref());
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
        Ok(())
    }

    /// The status of job `j`, run by `holder` if any: its latest checkpoint, whether it runs,
    /// and how far the table's log has it.
    fn job_status(&self, j: &JobInfo, holder: Option<&str>) -> String {
        let status = match &j.latest {
            // A compaction job never finishes: each round is a whole checkpoint.
            Ok(Some(m)) => match compaction_round(m) {
                Some(round) if m.source_position.get("abandoned").is_some() => {
                    format!("compaction, round {round} abandoned")
                }
                Some(round) => format!("compaction, last round {round}"),
                None => {
                    let records = records_of(m).map_or(String::new(), |r| format!(", {r} records"));
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
        match self.in_log(&j.job) {
            Some(v) => format!("{status}, in the table's log up to checkpoint {v}"),
            None if self.table.is_some() => format!("{status}, not in the table's log"),
            None => status,
        }
    }

    /// The files latest manifests name that are not visible yet.
    fn text_pending(&self, out: &mut dyn Write) -> CliResult {
        outln!(
            out,
            "pending (named by a latest manifest, not yet visible): {}",
            self.pending.len()
        );
        for p in &self.pending {
            let (job, id, c) = (&p.job, p.checkpoint_id, &p.committable);
            outln!(
                out,
                "  {}  {}  {} records  job {job} checkpoint {id}{}",
                c.final_path,
                human_bytes(c.size_bytes),
                c.record_count,
                match p.state {
                    FileState::Missing => "  MISSING",
                    FileState::Conflict => "  CONFLICT (another file holds the name)",
                    _ => "",
                }
            );
        }
        Ok(())
    }

    /// The hidden files a latest manifest needs.
    fn text_referenced(&self, out: &mut dyn Write) -> CliResult {
        let referenced = self.referenced();
        if !referenced.is_empty() {
            outln!(
                out,
                "hidden files a latest manifest needs: {}",
                referenced.len()
            );
            for (l, r) in &referenced {
                let size = match self.lake.upload_id(l) {
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
        Ok(())
    }

    /// The hidden files of unknown state, while a job's latest manifest cannot be read.
    fn text_unknown(&self, out: &mut dyn Write) -> CliResult {
        let (unknown, _) = self.unreferenced();
        if !unknown.is_empty() {
            outln!(
                out,
                "hidden files of unknown state (the latest manifest of job `{}` cannot be read, \
                 so whether they are needed is unknown; do not remove them): {}",
                self.unreadable().join("`, `"),
                unknown.len()
            );
            for l in &unknown {
                outln!(
                    out,
                    "  {}  {}  modified {} ago",
                    l.path,
                    human_bytes(l.size_bytes),
                    human_age(self.now - l.modified_ms)
                );
            }
        }
        Ok(())
    }

    /// The hidden files no manifest needs (not the multipart uploads).
    fn text_leftovers(&self, out: &mut dyn Write) -> CliResult {
        let (_, hidden) = self.uploads_and_hidden();
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
                human_age(self.now - l.modified_ms)
            );
        }
        Ok(())
    }

    /// The temporary files of unfinished metadata writes.
    fn text_temps(&self, out: &mut dyn Write) -> CliResult {
        if !self.temps.is_empty() {
            outln!(
                out,
                "temporary files of unfinished metadata writes (abort removes them): {}",
                self.temps.len()
            );
            for t in &self.temps {
                outln!(
                    out,
                    "  {}  modified {} ago",
                    t.path,
                    human_age(self.now - t.modified_ms)
                );
            }
        }
        Ok(())
    }

    /// The hidden files that are not this sink's.
    fn text_foreign(&self, out: &mut dyn Write) -> CliResult {
        if !self.foreign.is_empty() {
            outln!(
                out,
                "foreign (look like part files or uploads, not this sink's; never removed): {}",
                self.foreign.len()
            );
            for l in &self.foreign {
                outln!(out, "  {}", l.path);
            }
        }
        Ok(())
    }

    /// On S3, the incomplete multipart uploads no manifest needs.
    fn text_uploads(&self, out: &mut dyn Write) -> CliResult {
        if self.lake.is_s3() {
            let (uploads, _) = self.uploads_and_hidden();
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
                    self.lake.upload_id(l).unwrap_or_default(),
                    human_age(self.now - l.modified_ms)
                );
            }
        }
        Ok(())
    }

    /// The error of the first job whose latest manifest cannot be read, if any: the listing
    /// is shown all the same, then the command fails.
    fn unreadable_error(self) -> CliResult {
        let Listing { lake, jobs, .. } = self;
        match jobs
            .into_iter()
            .find_map(|j| j.latest.err().map(|e| (j.job, e)))
        {
            Some((job, e)) => Err(CliError::context(
                format!(
                    "cannot read the latest manifest of job `{job}` in `{}`",
                    lake.location
                ),
                e,
            )),
            None => Ok(()),
        }
    }
}

/// A Delta table at the base: its latest version, and how far each job's checkpoints are in
/// its log.
async fn table_info(lake: &Lake) -> CliResult<Option<TableInfo>> {
    match lake.sink() {
        Ok(sink) => filesink::table::delta::table_info(sink.storage().as_ref())
            .await
            .map_err(|e| {
                CliError::context(format!("cannot read the Delta log of `{}`", lake.base()), e)
            }),
        Err(_) => Ok(None),
    }
}

/// The latest manifests of `jobs` that can be read.
fn latest(jobs: &[JobInfo]) -> impl Iterator<Item = &Manifest> {
    jobs.iter()
        .filter_map(|j| j.latest.as_ref().ok().and_then(|m| m.as_ref()))
}

/// Pending: committables of latest manifests whose final file is not visible (not in `own`,
/// the sink's own visible files) yet.
async fn pending(lake: &Lake, jobs: &[JobInfo], own: &[VisibleFile]) -> CliResult<Vec<Pending>> {
    let visible: HashSet<&str> = own.iter().map(|f| f.path.as_str()).collect();
    let mut pending = Vec::new();
    for m in latest(jobs) {
        let all: Vec<_> = m.committables.iter().collect();
        for (c, state) in all.iter().zip(lake.file_states(&all, &visible).await?) {
            if state != FileState::Visible {
                pending.push(Pending {
                    job: m.job.clone(),
                    checkpoint_id: m.checkpoint_id,
                    committable: (*c).clone(),
                    state,
                });
            }
        }
    }
    Ok(pending)
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
