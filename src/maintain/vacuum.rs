//! Vacuum: deleting the data files that no version of a Delta table within the retention
//! needs, then the log entries that no reader needs (`docs/design/delta.md` section 10, and
//! the "Metadata cleanup" paragraph of section 8).
//!
//! # Which data files are deleted
//!
//! At the latest version L, a file is deleted only if all of these hold (`verdict`):
//!
//! 1. it is a visible file under the table root ([`Storage::list_visible`](crate::storage::Listing::list_visible)) whose name is one
//!    of the sink's own final part names: the [`OwnNames`] rule of `filesink abort`, applied to
//!    final names (a part name of the exact shape filesink writes, by a writer `<job>_<i>` of
//!    one of the sink's jobs, with a prefix and suffix of the sink's). Anything else is
//!    foreign: reported, never deleted;
//! 2. that job writes into the table: its latest manifest has a table section. The files of a
//!    plain job (one without `--table`) that shares the directory are in no log entry by
//!    design, so "not in the table" says nothing about them: kept, whatever their age, and
//!    reported (`kept_plain_jobs`). So are the files of a job with no manifest at all;
//! 3. no live `add` at L references it (paths compared percent-decoded; an absolute `add`
//!    path that ends with the file's path protects it too);
//! 4. no job's latest manifest lists it (a file committed whose log entry is not written yet,
//!    section 4 of the design), unless the log at L holds that manifest's checkpoint (the
//!    job's `txn` version is at least its id): then its files are in the log, and rules 3 and 5
//!    decide (a finished job's last files, compacted away, go once their tombstones expire; the
//!    job's restore does not commit the files of a checkpoint the log holds);
//! 5. either it has a tombstone at L with `deletionTimestamp < now − retain`, or it has no
//!    tombstone (or one without a timestamp) and its modification time is older than
//!    `now − retain` (a file with an unknown modification time is kept).
//!
//! **The order of the reads** is what makes the rule safe while jobs append: (a) list the
//! visible files, (b) read every job's latest manifest, (c) bring the snapshot to the latest
//! version. A file listed at (a) was committed before (a), after its manifest; at (b) its job's
//! latest manifest is that one or a later one, which no longer lists the file only once the
//! file's entry is in the log, and then (c) sees the entry. So no file is ever "in no manifest
//! and not yet in the log" for vacuum.
//!
//! **Guards.** The table's protocol is checked as for a writer first
//! (`features::check_table`, §VACUUM Protocol Check); a location without a table is refused;
//! a retention below the table's `delta.deletedFileRetentionDuration` (default one week) is
//! refused unless [`VacuumOptions::allow_short_retention`]. Deleting is idempotent
//! ([`Storage::remove_data_file`](crate::storage::Listing::remove_data_file) succeeds on a missing file), so a vacuum that crashed half
//! way is finished by running it again. Vacuum writes no log entry.
//!
//! # Which log files are deleted (`expired_log_files`)
//!
//! Unless the table sets `delta.enableExpiredLogCleanup = false`, following §Metadata Cleanup
//! with a cutoff of `now − delta.logRetentionDuration` (default 30 days), conservatively:
//!
//! - the *cutoff commit* is the newest version V such that every entry from the oldest listed
//!   one up to V is listed, without a gap, with a known modification time, and neither it nor
//!   any entry before it was modified after the cutoff (times are made monotonic, as Delta
//!   does, so one late entry stops the cutoff there);
//! - the *cutoff checkpoint* is the newest complete checkpoint (all parts listed) at a version
//!   ≤ the cutoff commit and ≤ the version `_last_checkpoint` names (when it names one);
//! - the JSON entries and classic checkpoint files of versions *below* the cutoff checkpoint
//!   are deleted, oldest version first (a version's checkpoint before its entry). Never the cutoff checkpoint itself or anything after it (so
//!   never the newest checkpoint, nor the one `_last_checkpoint` names), never
//!   `_last_checkpoint`, and nothing but entries and classic checkpoints (checksum files, log
//!   compaction files, UUID-named checkpoints and unknown names are left alone).
//!
//! A `delta.logRetentionDuration` that does not parse skips the cleanup (reported), rather
//! than guessing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::job::retired::Retired;
use crate::job::{manifest, OwnNames};
use crate::protocol::{split_rel, validate_final_part_path, PartName};
use crate::storage::{Leftover, MetadataEntry, Storage, VisibleFile};
use crate::table::delta::checkpoint::{parse_log_file_name, LastCheckpoint, LogFile};
use crate::table::delta::commit::parse_interval_ms;
use crate::table::delta::features;
use crate::table::delta::log::{Snapshot, LAST_CHECKPOINT, LOG_DIR};
use crate::table::delta::schema::StructType;
use crate::table::delta::stats::{decode_path, FilePath};
use crate::{Error, Result};

/// The default retention of [`VacuumOptions::retain`]: one week, Delta's default
/// `delta.deletedFileRetentionDuration`.
pub const RETAIN_DEFAULT: Duration = Duration::from_secs(7 * 24 * 3600);

/// `delta.deletedFileRetentionDuration` when the table does not set it: one week.
const FILE_RETENTION_DEFAULT_MS: i64 = 7 * 24 * 3600 * 1000;

/// `delta.logRetentionDuration` when the table does not set it: 30 days.
const LOG_RETENTION_DEFAULT_MS: i64 = 30 * 24 * 3600 * 1000;

/// How [`vacuum`] runs.
#[derive(Debug, Clone)]
pub struct VacuumOptions {
    retain: Duration,
    dry_run: bool,
    allow_short_retention: bool,
    location: Option<String>,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        VacuumOptions::new()
    }
}

impl VacuumOptions {
    /// Retain one week ([`RETAIN_DEFAULT`]), delete for real, refuse a retention shorter than
    /// the table's.
    pub fn new() -> Self {
        VacuumOptions {
            retain: RETAIN_DEFAULT,
            dry_run: false,
            allow_short_retention: false,
            location: None,
        }
    }

    /// How long a file stays after it left the table (its tombstone's `deletionTimestamp`,
    /// or its modification time when the log has no tombstone for it): readers of versions
    /// within this time still find their files. Default one week.
    pub fn retain(mut self, retain: Duration) -> Self {
        self.retain = retain;
        self
    }

    /// Only report what would be deleted; change nothing. Default off.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Accept a [`VacuumOptions::retain`] below the table's
    /// `delta.deletedFileRetentionDuration` (default one week). Readers of older versions,
    /// and a concurrent writer whose snapshot is older than the retention, may then find
    /// files gone. Default off (refused).
    pub fn allow_short_retention(mut self, allow: bool) -> Self {
        self.allow_short_retention = allow;
        self
    }

    /// How messages name the table (`s3://bucket/events`, `./lake`); default the storage's
    /// name.
    pub fn location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
}

/// What [`vacuum`] did, or in a dry run would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// Whether this was a dry run: then nothing was deleted, and [`VacuumReport::deleted`] and
    /// [`VacuumReport::log_files_deleted`] are what would be.
    pub dry_run: bool,
    /// The table version the rule was applied at (the latest, read after the listing and the
    /// manifests).
    pub table_version: i64,
    /// The cutoff, in milliseconds since the Unix epoch: now − retain.
    pub cutoff_ms: i64,
    /// The data files deleted (or that would be): path relative to the table root, and size
    /// in bytes, sorted by path.
    pub deleted: Vec<(String, u64)>,
    /// The sink's own files that are no longer (or never were) in the table, kept because
    /// they left it, or were written, after the cutoff; sorted.
    pub kept_for_retention: Vec<String>,
    /// The sink's own files in no live `add` that a job's latest manifest lists (the files of
    /// a job's latest checkpoint, whose log entry may not be written yet): kept whatever
    /// their age; sorted.
    pub kept_for_manifests: Vec<String>,
    /// Visible files that are not the sink's own part names: reported, never deleted; sorted.
    pub foreign: Vec<String>,
    /// The sink's own part files written by jobs that do not write into the table (plain
    /// jobs sharing its directory, whose files no log entry ever lists): never deleted;
    /// sorted.
    pub kept_plain_jobs: Vec<String>,
    /// How many JSON log entries the metadata cleanup deleted (or would).
    pub log_entries_deleted: usize,
    /// Every log file the metadata cleanup deleted (or would), entries and checkpoints, as
    /// paths relative to the table root, oldest version first.
    pub log_files_deleted: Vec<String>,
    /// Why the metadata cleanup did not run, when it did not.
    pub log_cleanup_skipped: Option<String>,
}

impl VacuumReport {
    /// The bytes of [`VacuumReport::deleted`].
    pub fn deleted_bytes(&self) -> u64 {
        self.deleted.iter().map(|(_, b)| b).sum()
    }
}

/// Deletes the data files of the Delta table under `storage`'s base that no version within
/// `options.retain` needs, then the expired log entries: the rule of the
/// [module doc](self). Returns what was deleted, kept and left alone.
///
/// Errors: [`Error::Config`] when there is no table (`_delta_log/` has no entry), when the
/// retention is shorter than the table's `delta.deletedFileRetentionDuration` without
/// [`VacuumOptions::allow_short_retention`], or when that property does not parse;
/// [`Error::NotSupported`] for a table filesink does not write (a location without a sink
/// identity, or the protocol check of design section 12); [`Error::Corrupt`] for a log or a latest manifest that cannot be read (a
/// latest manifest is never skipped: its files may be in no log entry yet); storage errors
/// as they come, after which a rerun finishes the work.
pub async fn vacuum(storage: Arc<dyn Storage>, options: &VacuumOptions) -> Result<VacuumReport> {
    let location = options.location.clone().unwrap_or_else(|| storage.place());
    let storage = storage.as_ref();
    let now = now_ms();
    let retain_ms = i64::try_from(options.retain.as_millis()).unwrap_or(i64::MAX);
    let cutoff_ms = now.saturating_sub(retain_ms);

    // The guards, on the table as it is now.
    let mut snapshot = Snapshot::load(storage).await?;
    if !snapshot.exists() {
        return Err(Error::Config(format!(
            "`{location}` has no Delta table: `{LOG_DIR}/` has no entry; vacuum works on a table \
             only, so nothing was deleted"
        )));
    }
    // Cleanup touches only what this sink wrote: a table another engine writes (no sink
    // identity beside its log) is not ours to clean, not even its log entries.
    if manifest::sink_identity(storage, false).await?.is_none() {
        return Err(Error::NotSupported(format!(
            "`{location}` is not a filesink output: it has no `{}/sink.json`; vacuum deletes \
             only from tables filesink writes, so nothing was deleted",
            manifest::METADATA_DIR
        )));
    }
    check_protocol(&location, &snapshot)?;
    check_retention(&location, &snapshot, retain_ms, options)?;

    // (a) the visible files, (b) every job's latest manifest, (c) the latest version: in this
    // order (module doc).
    let visible = storage.list_visible().await?;
    let mut manifests = read_manifests(storage).await?;
    snapshot.refresh(storage).await?;
    // A latest manifest whose checkpoint the log holds protects nothing more than the log does
    // (rule 4): its files are in the log, and live or tombstoned there.
    let sink_id = manifest::sink_identity(storage, false)
        .await?
        .map(|i| i.sink_id)
        .unwrap_or_default();
    for (job, checkpoint, paths) in std::mem::take(&mut manifests.table_checkpoints) {
        let app_id = crate::table::delta::commit::app_id(&sink_id, &job);
        let in_log = snapshot
            .txn_version(&app_id)
            .is_some_and(|v| u64::try_from(v).is_ok_and(|v| v >= checkpoint));
        if in_log {
            for p in paths {
                manifests.listed.remove(&p);
            }
        }
    }
    // A version written meanwhile may have changed the protocol or the retention.
    check_protocol(&location, &snapshot)?;
    check_retention(&location, &snapshot, retain_ms, options)?;
    let table = TableFiles::of(&snapshot)?;

    let mut report = VacuumReport {
        dry_run: options.dry_run,
        table_version: snapshot.version.unwrap_or(0),
        cutoff_ms,
        ..VacuumReport::default()
    };
    let mut visible = visible;
    visible.sort_by(|a, b| a.path.cmp(&b.path));
    for file in &visible {
        match verdict(file, &manifests, &table, cutoff_ms) {
            Verdict::Foreign => report.foreign.push(file.path.clone()),
            Verdict::PlainJob => report.kept_plain_jobs.push(file.path.clone()),
            Verdict::Live => {}
            Verdict::InManifest => report.kept_for_manifests.push(file.path.clone()),
            Verdict::Retained => report.kept_for_retention.push(file.path.clone()),
            Verdict::Expired => report.deleted.push((file.path.clone(), file.size_bytes)),
        }
    }
    if !options.dry_run {
        for (path, bytes) in &report.deleted {
            storage.remove_data_file(path).await?;
            tracing::info!(file = %path, bytes, "vacuum deleted a file");
        }
    }

    // Metadata cleanup.
    let metadata = snapshot
        .metadata
        .as_ref()
        .expect("an existing table has metaData");
    let config = &metadata.configuration;
    let cleanup_off = config
        .get("delta.enableExpiredLogCleanup")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"));
    let log_retention_ms = match config.get("delta.logRetentionDuration") {
        None => Ok(LOG_RETENTION_DEFAULT_MS),
        Some(v) => parse_interval_ms(v)
            .ok_or_else(|| format!("the table's delta.logRetentionDuration `{v}` does not parse")),
    };
    match (cleanup_off, log_retention_ms) {
        (true, _) => {
            report.log_cleanup_skipped =
                Some("the table sets delta.enableExpiredLogCleanup = false".into());
        }
        (false, Err(why)) => {
            tracing::warn!(table = %location, "log cleanup skipped: {why}");
            report.log_cleanup_skipped = Some(why);
        }
        (false, Ok(log_retention_ms)) => {
            let listing = storage.list_metadata_from(LOG_DIR, "").await?;
            let pointer = match storage.get_metadata(LAST_CHECKPOINT).await? {
                Some(bytes) => LastCheckpoint::parse(&bytes, LAST_CHECKPOINT)
                    .ok()
                    .map(|p| p.version),
                None => None,
            };
            let expired =
                expired_log_files(&listing, pointer, now.saturating_sub(log_retention_ms));
            for name in expired {
                let path = format!("{LOG_DIR}/{name}");
                if !options.dry_run {
                    storage.delete_metadata(&path).await?;
                    tracing::info!(file = %path, "vacuum deleted an expired log file");
                }
                if matches!(parse_log_file_name(&name), Some(LogFile::Commit(_))) {
                    report.log_entries_deleted += 1;
                }
                report.log_files_deleted.push(path);
            }
        }
    }
    Ok(report)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The protocol check of a writer (§VACUUM Protocol Check: vacuum must understand every
/// writer feature of the table).
fn check_protocol(location: &str, snapshot: &Snapshot) -> Result<()> {
    let (Some(protocol), Some(metadata)) = (&snapshot.protocol, &snapshot.metadata) else {
        return Err(Error::corrupt(
            format!("{LOG_DIR}/ of table `{location}`"),
            "the table has no `protocol` or no `metaData`",
        ));
    };
    let what = format!("metaData.schemaString of table `{location}`");
    let schema = StructType::parse(&metadata.schema_string, &what)?;
    features::check_table(location, protocol, metadata, &schema).map(drop)
}

/// Refuses a retention below the table's `delta.deletedFileRetentionDuration`.
fn check_retention(
    location: &str,
    snapshot: &Snapshot,
    retain_ms: i64,
    options: &VacuumOptions,
) -> Result<()> {
    if options.allow_short_retention {
        return Ok(());
    }
    let config = snapshot
        .metadata
        .as_ref()
        .map(|m| &m.configuration)
        .expect("checked by check_protocol");
    let (table_ms, said) = match config.get("delta.deletedFileRetentionDuration") {
        None => (FILE_RETENTION_DEFAULT_MS, "the default".to_owned()),
        Some(v) => match parse_interval_ms(v) {
            Some(ms) => (ms, format!("`{v}`")),
            None => {
                return Err(Error::Config(format!(
                    "table `{location}` sets delta.deletedFileRetentionDuration to `{v}`, which \
                     filesink cannot read, so it cannot tell whether the retention is long \
                     enough; nothing was deleted (pass --allow-short-retention to vacuum anyway)"
                )))
            }
        },
    };
    if retain_ms < table_ms {
        return Err(Error::Config(format!(
            "a retention of {} is shorter than the table's delta.deletedFileRetentionDuration \
             ({said}, {}): readers of older versions and writers with an older snapshot could \
             find their files gone, so nothing was deleted in `{location}` (pass \
             --allow-short-retention to vacuum anyway)",
            human_ms(retain_ms),
            human_ms(table_ms)
        )));
    }
    Ok(())
}

/// `168h`, `90m`, `0ms`: a retention in messages.
fn human_ms(ms: i64) -> String {
    if ms > 0 && ms % 3_600_000 == 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms > 0 && ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms > 0 && ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// What every job's latest manifest tells vacuum.
#[derive(Debug)]
struct Manifests {
    /// The sink's own names: by [`OwnNames`], with the default prefix and suffixes and those
    /// the manifests show, of every job.
    own: OwnNames,
    /// The same names of the jobs that write into the table (a latest manifest with a table
    /// section) only.
    own_in_table: OwnNames,
    /// The final paths the latest manifests list.
    listed: HashSet<String>,
    /// Of each table job: its name, its latest checkpoint, and the final paths that manifest
    /// lists (rule 4 lets them go once the log holds that checkpoint).
    table_checkpoints: Vec<(String, u64, Vec<String>)>,
}

/// Reads every job's latest manifest ([`Manifests`]). A latest manifest that cannot be read
/// is an error: its files may be in no entry yet.
async fn read_manifests(storage: &dyn Storage) -> Result<Manifests> {
    let sink_id = manifest::sink_identity(storage, false)
        .await?
        .map(|i| i.sink_id);
    let jobs = manifest::list_jobs(storage).await?;
    let mut table_jobs = Vec::new();
    let mut learnt = Vec::new();
    let mut listed = HashSet::new();
    let mut table_checkpoints = Vec::new();
    for job in &jobs {
        let Some(m) = manifest::latest_manifest(storage, job, sink_id.as_deref()).await? else {
            continue;
        };
        if m.table.is_some() {
            table_jobs.push(job.clone());
            table_checkpoints.push((
                job.clone(),
                m.checkpoint_id,
                m.final_paths().map(str::to_owned).collect(),
            ));
        }
        for f in m.final_paths() {
            listed.insert(f.to_owned());
            learnt.push(f.to_owned());
        }
    }
    let retired = Retired::load(storage).await?;
    let mut own_in_table = OwnNames::of_jobs(table_jobs).with_retired(retired.tables());
    let mut own = OwnNames::of_jobs(jobs).with_retired(retired);
    for f in &learnt {
        own.learn(f);
        own_in_table.learn(f);
    }
    Ok(Manifests {
        own,
        own_in_table,
        listed,
        table_checkpoints,
    })
}

/// The files of the log at one version, by decoded path.
#[derive(Debug, Default)]
struct TableFiles {
    /// Live `add`s with a relative path.
    live: HashSet<String>,
    /// Live `add`s with an absolute path (percent-decoded where they decode).
    live_absolute: Vec<String>,
    /// Tombstones with a relative path, with their `deletionTimestamp`.
    tombstones: HashMap<String, Option<i64>>,
}

impl TableFiles {
    fn of(snapshot: &Snapshot) -> Result<TableFiles> {
        let mut files = TableFiles::default();
        for path in snapshot.adds.keys() {
            match decode_path(path)? {
                FilePath::Relative(p) => {
                    files.live.insert(p);
                }
                FilePath::Absolute(p) => files.live_absolute.push(percent_decoded(&p)),
            }
        }
        for (path, remove) in snapshot.removes.iter() {
            // An absolute tombstone names a file we cannot place: no tombstone, so the file's
            // own age decides (condition 4).
            if let Ok(FilePath::Relative(p)) = decode_path(path) {
                files.tombstones.insert(p, remove.deletion_timestamp);
            }
        }
        Ok(files)
    }

    /// Whether a live `add` references the file at `path` (relative to the table root).
    fn is_live(&self, path: &str) -> bool {
        self.live.contains(path)
            || self
                .live_absolute
                .iter()
                .any(|a| a.strip_suffix(path).is_some_and(|head| head.ends_with('/')))
    }
}

/// `%XX` decoded where it decodes; the input as it is otherwise (a comparison that then fails
/// only keeps more files).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// What vacuum does with a visible file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Not one of the sink's own final part names: reported, never deleted.
    Foreign,
    /// A part file of a job that does not write into the table: kept.
    PlainJob,
    /// A live `add` references it.
    Live,
    /// A job's latest manifest lists it.
    InManifest,
    /// It left the table (or was written) after the cutoff, or its age is unknown.
    Retained,
    /// None of the above: deleted.
    Expired,
}

/// The rule of the [module doc](self) for one visible file.
fn verdict(
    file: &VisibleFile,
    manifests: &Manifests,
    table: &TableFiles,
    cutoff_ms: i64,
) -> Verdict {
    let name = PartName::parse_final(split_rel(&file.path).1);
    let as_leftover = Leftover {
        name,
        path: file.path.clone(),
        final_path: file.path.clone(),
        size_bytes: file.size_bytes,
        modified_ms: file.modified_ms,
    };
    // `remove_data_file` refuses the rest; they are not ours to delete anyway.
    if !manifests.own.owns(&as_leftover) || validate_final_part_path(&file.path).is_err() {
        return Verdict::Foreign;
    }
    if table.is_live(&file.path) {
        return Verdict::Live;
    }
    if !manifests.own_in_table.owns(&as_leftover) {
        return Verdict::PlainJob;
    }
    if manifests.listed.contains(&file.path) {
        return Verdict::InManifest;
    }
    let left_at = match table.tombstones.get(&file.path) {
        Some(Some(deleted_at)) => *deleted_at,
        // No tombstone (expired from the checkpoints, or never in the log), or one without a
        // time: the file's own age; unknown (0) keeps it.
        _ if file.modified_ms > 0 => file.modified_ms,
        _ => return Verdict::Retained,
    };
    if left_at < cutoff_ms {
        Verdict::Expired
    } else {
        Verdict::Retained
    }
}

/// The files of one version's checkpoint in a listing of `_delta_log/`.
#[derive(Debug, Default)]
struct CheckpointFiles<'a> {
    /// The parts a multi-part checkpoint declares (by its first listed part); `None` for a
    /// single file.
    parts: Option<i32>,
    /// The part numbers listed.
    seen: Vec<i32>,
    /// Every file name listed.
    names: Vec<&'a str>,
}

impl<'a> CheckpointFiles<'a> {
    fn add(&mut self, name: &'a str, part: Option<(i32, i32)>) {
        self.names.push(name);
        match part {
            None => self.parts = None,
            Some((i, n)) => {
                if self.names.len() == 1 {
                    self.parts = Some(n);
                }
                self.seen.push(i);
            }
        }
    }

    /// Whether the checkpoint is whole: one classic file, or every part of a multi-part one.
    /// A single file listed beside parts of the same version is odd, and not trusted.
    fn complete(&self) -> bool {
        match self.parts {
            None => self.names.len() == 1,
            Some(n) => (1..=n).all(|i| self.seen.contains(&i)),
        }
    }
}

/// The log files the metadata cleanup deletes, oldest version first (names in `_delta_log/`),
/// given a listing of `_delta_log/`, the version `_last_checkpoint` names, and the cutoff in
/// milliseconds since the epoch: the rule of the [module doc](self).
pub(crate) fn expired_log_files(
    listing: &[MetadataEntry],
    pointer: Option<i64>,
    cutoff_ms: i64,
) -> Vec<String> {
    let mut commits: BTreeMap<i64, (&str, i64)> = BTreeMap::new();
    let mut checkpoints: BTreeMap<i64, CheckpointFiles<'_>> = BTreeMap::new();
    for e in listing.iter().filter(|e| !e.is_dir) {
        match parse_log_file_name(&e.name) {
            Some(LogFile::Commit(v)) => {
                commits.insert(v, (e.name.as_str(), e.modified_ms));
            }
            Some(LogFile::Checkpoint { version, part }) => {
                checkpoints
                    .entry(version)
                    .or_default()
                    .add(e.name.as_str(), part);
            }
            _ => {}
        }
    }
    // The cutoff commit: the oldest listed entries, without a gap, all modified (monotonic)
    // at or before the cutoff.
    let mut cutoff_commit = None;
    let mut expected = None;
    for (&v, &(_, modified_ms)) in &commits {
        if expected.is_some_and(|e| e != v) || modified_ms <= 0 || modified_ms > cutoff_ms {
            break;
        }
        cutoff_commit = Some(v);
        expected = Some(v + 1);
    }
    let Some(cutoff_commit) = cutoff_commit else {
        return Vec::new();
    };
    let Some(cutoff_checkpoint) = checkpoints
        .iter()
        .filter(|(&v, c)| v <= cutoff_commit && pointer.is_none_or(|p| v <= p) && c.complete())
        .map(|(&v, _)| v)
        .next_back()
    else {
        return Vec::new();
    };
    let mut out: Vec<(i64, &str)> = commits
        .range(..cutoff_checkpoint)
        .map(|(&v, (name, _))| (v, *name))
        .collect();
    for (&v, c) in checkpoints.range(..cutoff_checkpoint) {
        out.extend(c.names.iter().map(|n| (v, *n)));
    }
    out.sort();
    out.into_iter().map(|(_, n)| n.to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;
    const NOW: i64 = 1_000 * DAY;

    fn entry(name: String, modified_ms: i64) -> MetadataEntry {
        MetadataEntry {
            name,
            is_dir: false,
            modified_ms,
        }
    }

    fn commit(v: i64, age_days: i64) -> MetadataEntry {
        entry(format!("{v:020}.json"), NOW - age_days * DAY)
    }

    fn checkpoint(v: i64, age_days: i64) -> MetadataEntry {
        entry(format!("{v:020}.checkpoint.parquet"), NOW - age_days * DAY)
    }

    /// Versions 0..n, the oldest `old` of them 40 days old and the rest a day old, with
    /// checkpoints at every tenth version.
    fn log(n: i64, old: i64) -> Vec<MetadataEntry> {
        let mut l = Vec::new();
        for v in 0..n {
            let age = if v < old { 40 } else { 1 };
            l.push(commit(v, age));
            if v > 0 && v % 10 == 0 {
                l.push(checkpoint(v, age));
            }
        }
        l
    }

    fn versions(names: &[String]) -> Vec<String> {
        names
            .iter()
            .map(|n| {
                let v: i64 = n[..20].parse().unwrap();
                format!("{v}{}", &n[20..])
            })
            .collect()
    }

    fn expired(listing: &[MetadataEntry], pointer: Option<i64>) -> Vec<String> {
        versions(&expired_log_files(listing, pointer, NOW - 30 * DAY))
    }

    fn below(v: i64) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..v {
            if i > 0 && i % 10 == 0 {
                out.push(format!("{i}.checkpoint.parquet"));
            }
            out.push(format!("{i}.json"));
        }
        out
    }

    #[test]
    fn entries_before_the_newest_checkpoint_older_than_the_cutoff_go() {
        // All 25 versions old: the newest checkpoint not after the cutoff commit (24) is 20.
        assert_eq!(expired(&log(25, 25), Some(20)), below(20));
        // Versions from 15 on are young: the cutoff commit is 14, its checkpoint 10.
        assert_eq!(expired(&log(25, 15), Some(20)), below(10));
    }

    #[test]
    fn nothing_goes_without_an_old_checkpoint() {
        assert!(expired(&log(25, 0), Some(20)).is_empty(), "all young");
        assert!(
            expired(&log(25, 9), Some(20)).is_empty(),
            "no old checkpoint"
        );
        assert!(expired(&log(9, 9), None).is_empty(), "no checkpoint at all");
    }

    #[test]
    fn the_newest_checkpoint_and_what_follows_always_stay() {
        let out = expired(&log(21, 21), Some(20));
        assert_eq!(out, below(20));
        assert!(!out.iter().any(|n| n.starts_with("20.")));
    }

    #[test]
    fn a_late_entry_stops_the_cutoff_there() {
        // Version 12 was modified after the cutoff: times are monotonic, so 12 and everything
        // after it count as young, and checkpoint 20 is not old.
        let mut l = log(25, 25);
        l[13] = commit(12, 1);
        assert_eq!(l[13].name, format!("{:020}.json", 12));
        assert_eq!(expired(&l, Some(20)), below(10));
        // A gap stops it too.
        let l: Vec<MetadataEntry> = log(25, 25)
            .into_iter()
            .filter(|e| e.name != format!("{:020}.json", 15))
            .collect();
        assert_eq!(expired(&l, Some(20)), below(10));
        // And an unknown modification time.
        let mut l = log(25, 25);
        l[13].modified_ms = 0;
        assert_eq!(expired(&l, Some(20)), below(10));
    }

    #[test]
    fn never_past_the_checkpoint_last_checkpoint_names() {
        assert_eq!(expired(&log(25, 25), Some(10)), below(10));
        assert!(expired(&log(25, 25), Some(5)).is_empty());
        // Without a pointer, the listing decides.
        assert_eq!(expired(&log(25, 25), None), below(20));
    }

    #[test]
    fn an_incomplete_multi_part_checkpoint_is_not_a_cutoff() {
        let mut l = log(25, 25);
        l.retain(|e| e.name != format!("{:020}.checkpoint.parquet", 20));
        l.push(entry(
            format!("{:020}.checkpoint.{:010}.{:010}.parquet", 20, 1, 2),
            NOW - 40 * DAY,
        ));
        assert_eq!(expired(&l, None), below(10));
        l.push(entry(
            format!("{:020}.checkpoint.{:010}.{:010}.parquet", 20, 2, 2),
            NOW - 40 * DAY,
        ));
        let mut want = below(20);
        want.retain(|n| n != "20.checkpoint.parquet");
        assert_eq!(expired(&l, None), want);
    }

    #[test]
    fn only_entries_and_classic_checkpoints_are_deleted() {
        let mut l = log(25, 25);
        let old = NOW - 40 * DAY;
        for name in [
            "_last_checkpoint".to_owned(),
            format!("{:020}.crc", 3),
            format!("{:020}.{:020}.compacted.json", 1, 4),
            format!(".{:020}.json.tmp", 5),
            format!(
                "{:020}.checkpoint.80b5ae4d-5ca1-4a04-9d25-3b4ab5cd6a8d.parquet",
                5
            ),
        ] {
            l.push(entry(name, old));
        }
        l.push(MetadataEntry {
            name: "_sidecars".into(),
            is_dir: true,
            modified_ms: old,
        });
        assert_eq!(expired(&l, Some(20)), below(20));
    }

    fn own() -> OwnNames {
        OwnNames {
            jobs: vec!["orders".into()],
            prefixes: vec!["part".into()],
            suffixes: vec![".parquet".into()],
            retired: Default::default(),
        }
    }

    const INC: &str = "0123456789abcdef0123456789abcdef";

    fn file(path: &str, modified_ms: i64) -> VisibleFile {
        VisibleFile {
            path: path.into(),
            size_bytes: 10,
            modified_ms,
        }
    }

    #[test]
    fn a_file_is_deleted_only_when_every_condition_holds() {
        let cutoff = NOW - 7 * DAY;
        let old = NOW - 8 * DAY;
        let young = NOW - DAY;
        let name = |dir: &str, n: u32| format!("{dir}part-orders_0-{INC}-{n}.parquet");
        let mut table = TableFiles::default();
        table.live.insert(name("day=1/", 0));
        table
            .live_absolute
            .push(format!("s3://b/t/{}", name("day=1/", 1)));
        table.tombstones.insert(name("day=1/", 2), Some(old));
        table.tombstones.insert(name("day=1/", 3), Some(young));
        table.tombstones.insert(name("day=1/", 4), None);
        let mut own_all = own();
        own_all.jobs.push("plain".into());
        let manifests = Manifests {
            own: own_all,
            own_in_table: own(),
            listed: [name("day=1/", 5)].into(),
            table_checkpoints: Vec::new(),
        };
        let v =
            |path: String, modified| verdict(&file(&path, modified), &manifests, &table, cutoff);
        assert_eq!(v(name("day=1/", 0), old), Verdict::Live);
        assert_eq!(v(name("day=1/", 1), old), Verdict::Live, "absolute add");
        assert_eq!(
            v(name("day=1/", 2), young),
            Verdict::Expired,
            "old tombstone"
        );
        assert_eq!(
            v(name("day=1/", 3), old),
            Verdict::Retained,
            "young tombstone"
        );
        assert_eq!(
            v(name("day=1/", 4), old),
            Verdict::Expired,
            "no time: file age"
        );
        assert_eq!(v(name("day=1/", 4), young), Verdict::Retained);
        assert_eq!(v(name("day=1/", 5), old), Verdict::InManifest);
        assert_eq!(v(name("day=1/", 6), old), Verdict::Expired, "never logged");
        assert_eq!(v(name("day=1/", 6), young), Verdict::Retained);
        assert_eq!(v(name("day=1/", 6), 0), Verdict::Retained, "unknown age");
        // Foreign: another job's writer, another suffix, no part name at all.
        assert_eq!(
            v(format!("part-other_0-{INC}-0.parquet"), old),
            Verdict::Foreign
        );
        assert_eq!(
            v(format!("part-orders_0-{INC}-0.parquet.bak"), old),
            Verdict::Foreign
        );
        assert_eq!(v("day=1/foo.parquet".into(), old), Verdict::Foreign);
        // A plain job's file is in no log entry by design: kept however old.
        assert_eq!(
            v(format!("day=1/part-plain_0-{INC}-0.parquet"), old),
            Verdict::PlainJob
        );
    }

    #[test]
    fn absolute_paths_are_compared_decoded_and_by_whole_components() {
        let mut table = TableFiles::default();
        table.live_absolute.push(percent_decoded(
            "file:///t/day%3D1/part-orders_0-x-0.parquet",
        ));
        assert!(table.is_live("day=1/part-orders_0-x-0.parquet"));
        assert!(!table.is_live("y=1/part-orders_0-x-0.parquet"));
        assert!(!table.is_live("1/part-orders_0-x-0.parquet"));
        assert_eq!(percent_decoded("a%2"), "a%2");
        assert_eq!(percent_decoded("a%zz%20"), "a%zz ");
    }

    #[test]
    fn retentions_in_messages() {
        assert_eq!(human_ms(168 * 3_600_000), "168h");
        assert_eq!(human_ms(0), "0ms");
        assert_eq!(human_ms(90_000), "90s");
    }
}
