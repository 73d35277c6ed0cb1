//! Checkpoint manifests: one durable object per complete checkpoint.
//!
//! Layout under the sink's base:
//!
//! ```text
//! _filesink/sink.json                                  the sink's identity (written once)
//! _filesink/jobs/<job>/checkpoints/<id, 20 digits>.json   one manifest per complete checkpoint
//! ```
//!
//! A manifest is an envelope `{"crc32c": …, "body": {…}}` whose checksum covers the body's
//! exact bytes, so a truncated, half-written or edited manifest is detected even on a store
//! without atomic writes; the body carries a format version and the sink id, so a manifest of
//! an unknown version or copied from another sink is refused. It is written through
//! [`crate::storage::MetadataStore::put_metadata`]: atomic, durable, never replacing.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub use crate::protocol::paths::{checkpoints_dir, manifest_path, validate_job_name, METADATA_DIR};
use crate::protocol::paths::{JOBS_DIR, SINK_FILE};
use crate::protocol::{
    decode_versioned, Committable, WriterState, FORMAT_VERSION, FORMAT_VERSION_STATS,
};
use crate::storage::{MetadataEntry, MetadataStore, Storage};
use crate::table::delta::TableRemove;
use crate::{Error, Result};

/// The identity of a sink directory, written once at its first checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkIdentity {
    /// Format version.
    pub version: u32,
    /// A UUID drawn when the sink was first used.
    pub sink_id: String,
    /// When, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// What the sink holds, fixed when it is created: plain part files, or a Delta table's.
    /// `None` in a sink created by a build that did not record it (its jobs tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SinkKind>,
}

/// What a sink holds ([`SinkIdentity::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// Plain part files in directories.
    Plain,
    /// A Delta table's files, listed by its log.
    Delta,
}

/// One complete checkpoint of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version: [`Manifest::format_version`] when written by this build.
    pub version: u32,
    /// The sink this manifest belongs to ([`SinkIdentity::sink_id`]).
    pub sink_id: String,
    /// The job.
    pub job: String,
    /// The checkpoint id; manifests of a job are ordered by it.
    pub checkpoint_id: u64,
    /// When the checkpoint completed, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// Whether the job's input was fully consumed at this checkpoint.
    pub finished: bool,
    /// The user's source position (opaque JSON): where a restarted job resumes its input.
    pub source_position: serde_json::Value,
    /// The state of every writer of the job.
    pub writers: Vec<WriterState>,
    /// Every committable not yet known to be committed: this checkpoint's, and earlier ones
    /// whose commit failed (for a table job: whose log entry is not written yet).
    pub committables: Vec<Committable>,
    /// For a job that writes into a table's log: which table, and as which application.
    /// Present only in format version 2 and later, so a build that does not know tables
    /// refuses the manifest instead of committing files the log never learns about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<ManifestTable>,
}

/// The table section of a [`Manifest`] (`docs/design/delta.md` section 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestTable {
    /// The table format: `delta`.
    pub format: String,
    /// The application id of the job's `txn` actions: `filesink-<sink id>-<job>`.
    pub app_id: String,
    /// For a compaction round: the table version its plan was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_version: Option<i64>,
    /// For a compaction round: the files its output replaces, removed by the same log entry
    /// that adds the output (`docs/design/delta.md` section 9).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removes: Vec<TableRemove>,
    /// Committed output files of an abandoned compaction round (final paths): this manifest
    /// records the decision, so no restore decides again whether that round may enter the
    /// log, and the files are deleted after it (again by a restore from it: idempotent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub abandoned: Vec<String>,
}

#[derive(Deserialize)]
struct EnvelopeIn<'a> {
    crc32c: u32,
    #[serde(borrow)]
    body: &'a RawValue,
}

impl Manifest {
    /// The lowest format version that holds the manifest: the newest of its writer states and
    /// committables, at least [`FORMAT_VERSION`]. A lake whose committables carry no
    /// statistics keeps writing version-1 manifests, which older builds read.
    pub fn format_version(&self) -> u32 {
        self.writers
            .iter()
            .map(|w| w.version)
            .chain(self.committables.iter().map(|c| c.version))
            .chain(self.table.as_ref().map(|_| FORMAT_VERSION_STATS))
            .fold(FORMAT_VERSION, u32::max)
    }

    /// Every final path the manifest names: its committables', and those the writers' open
    /// and carried files will have.
    pub fn final_paths(&self) -> impl Iterator<Item = &str> {
        let writers = self.writers.iter();
        self.committables
            .iter()
            .map(|c| c.final_path.as_str())
            .chain(
                writers
                    .clone()
                    .flat_map(|w| w.in_progress.iter().map(|f| f.final_path.as_str())),
            )
            .chain(writers.flat_map(|w| w.carried.iter().map(|f| f.final_path.as_str())))
    }

    /// Encodes the manifest in its checksummed envelope, `{"crc32c": …, "body": {…}}`.
    ///
    /// The body is serialized once, in place: a checkpoint of a hundred thousand files has a
    /// manifest of tens of megabytes, and a second copy of it was most of what its checkpoint
    /// held beyond the writers' budget. The checksum's field is reserved ahead, as ten
    /// characters padded with spaces (JSON allows whitespace before a value), and filled in
    /// once the body's bytes are known.
    pub fn encode(&self) -> Vec<u8> {
        const HEAD: &[u8] = b"{\"crc32c\":";
        const DIGITS: usize = 10; // u32::MAX has ten
        const BODY: &[u8] = b",\"body\":";
        let mut out = Vec::with_capacity(HEAD.len() + DIGITS + BODY.len() + 4096);
        out.extend_from_slice(HEAD);
        out.extend_from_slice(&[b' '; DIGITS]);
        out.extend_from_slice(BODY);
        let start = out.len();
        serde_json::to_writer(&mut out, self).expect("manifests always serialize");
        let crc = crc32c::crc32c(&out[start..]);
        let field = format!("{crc:>DIGITS$}");
        out[HEAD.len()..HEAD.len() + DIGITS].copy_from_slice(field.as_bytes());
        out.extend_from_slice(b"}\n");
        out
    }

    /// Decodes and checks a manifest read from `path`: envelope, checksum, version, sink id and
    /// every path inside it. Errors name `path`.
    pub fn decode(path: &str, bytes: &[u8], sink_id: Option<&str>) -> Result<Manifest> {
        let what = || format!("manifest `{path}`");
        let env: EnvelopeIn<'_> = serde_json::from_slice(bytes).map_err(|e| {
            Error::corrupt(
                what(),
                format!("not a complete manifest (truncated or half written?): {e}"),
            )
        })?;
        if crc32c::crc32c(env.body.get().as_bytes()) != env.crc32c {
            return Err(Error::corrupt(
                what(),
                "its checksum does not match its content",
            ));
        }
        let m: Manifest = decode_versioned(&what(), env.body.get().as_bytes())?;
        if let Some(id) = sink_id {
            if m.sink_id != id {
                return Err(Error::corrupt(
                    what(),
                    format!("it belongs to sink {}, this is sink {id}", m.sink_id),
                ));
            }
        }
        validate_job_name(&m.job).map_err(|e| Error::corrupt(what(), e.to_string()))?;
        let expected = manifest_path(&m.job, m.checkpoint_id);
        if !path.ends_with(&expected) {
            return Err(Error::corrupt(
                what(),
                format!(
                    "it says it is checkpoint {} of job `{}`, which lives at `{expected}`",
                    m.checkpoint_id, m.job
                ),
            ));
        }
        for w in &m.writers {
            w.validate()
                .map_err(|e| Error::corrupt(what(), e.to_string()))?;
        }
        for c in &m.committables {
            c.validate()
                .map_err(|e| Error::corrupt(what(), e.to_string()))?;
        }
        // An older build reads the manifest's version only: it must cover everything inside.
        if m.version < m.format_version() {
            return Err(Error::corrupt(
                what(),
                format!(
                    "it says format version {} but holds records of version {}",
                    m.version,
                    m.format_version()
                ),
            ));
        }
        Ok(m)
    }
}

/// Reads the sink's identity, creating it if `create` and it does not exist yet.
pub async fn sink_identity(storage: &dyn Storage, create: bool) -> Result<Option<SinkIdentity>> {
    sink_identity_of(storage, create.then_some(None)).await
}

/// [`sink_identity`], creating it (`create` is `Some`) with the kind given.
pub async fn sink_identity_of(
    storage: &dyn Storage,
    create: Option<Option<SinkKind>>,
) -> Result<Option<SinkIdentity>> {
    loop {
        if let Some(bytes) = storage.get_metadata(SINK_FILE).await? {
            let id: SinkIdentity =
                decode_versioned(&format!("sink identity `{SINK_FILE}`"), &bytes)?;
            return Ok(Some(id));
        }
        let Some(kind) = create else {
            return Ok(None);
        };
        refuse_lost_identity(storage).await?;
        // Each sink owns its whole tree: no sink inside another's, none around another.
        let others = storage.other_sinks().await?;
        if !others.is_empty() {
            let list = |v: &[String]| {
                v.iter()
                    .map(|o| format!("`{o}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut why = Vec::new();
            if !others.around.is_empty() {
                why.push(format!("it is inside the sink {}", list(&others.around)));
            }
            if !others.inside.is_empty() {
                why.push(format!("it holds the sink {}", list(&others.inside)));
            }
            return Err(Error::NestedSink {
                reason: format!(
                    "{}; a sink owns its whole tree, so choose a location outside every other \
                     sink",
                    why.join(" and ")
                ),
            });
        }
        let id = SinkIdentity {
            version: FORMAT_VERSION,
            sink_id: uuid::Uuid::now_v7().to_string(),
            created_at_ms: now_ms(),
            kind,
        };
        match storage
            .put_metadata(
                SINK_FILE,
                &serde_json::to_vec_pretty(&id).expect("serializes"),
            )
            .await
        {
            Ok(()) => return Ok(Some(id)),
            // Another process created it first: read theirs.
            Err(Error::Conflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Refuses to give a new identity to a sink whose identity file is gone while jobs have
/// checkpoints under it: each manifest names the sink that wrote it, and a new identity would
/// make every one of them foreign, their pending files committable by nothing. The error
/// names the identity to put back.
async fn refuse_lost_identity(storage: &dyn MetadataStore) -> Result<()> {
    let mut jobs = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for job in list_jobs(storage).await? {
        if list_checkpoints(storage, &job).await?.is_empty() {
            continue;
        }
        if let Ok(Some(m)) = latest_manifest(storage, &job, None).await {
            ids.insert(m.sink_id);
        }
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Ok(());
    }
    // Another run may have made the identity meanwhile, with its job's first checkpoint.
    if storage.get_metadata(SINK_FILE).await?.is_some() {
        return Ok(());
    }
    let named = match ids.len() {
        0 => "their manifests could not be read".to_string(),
        1 => format!(
            "they were written by sink `{}`: put `{SINK_FILE}` back, or write it as \
             {{\"version\":{FORMAT_VERSION},\"sink_id\":\"{}\",\"created_at_ms\":0}}",
            ids.first().expect("one"),
            ids.first().expect("one")
        ),
        _ => format!(
            "they name several sinks ({}): put the lake's own `{SINK_FILE}` back",
            ids.iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(Error::corrupt(
        format!("sink identity `{SINK_FILE}`"),
        format!(
            "it is missing, but job(s) `{}` have checkpoints here; a new identity would leave \
             them and their pending files to no sink, so none is made: {named}",
            jobs.join("`, `")
        ),
    ))
}

/// The jobs that have manifests under this sink.
pub async fn list_jobs(storage: &dyn MetadataStore) -> Result<Vec<String>> {
    let mut jobs: Vec<String> = storage
        .list_metadata(JOBS_DIR)
        .await?
        .into_iter()
        .filter(|e| e.is_dir && validate_job_name(&e.name).is_ok())
        .map(|e| e.name)
        .collect();
    jobs.sort();
    Ok(jobs)
}

/// The checkpoint ids that have a manifest file for `job`, ascending, with each file's
/// modification time. Files that are not manifests (temp files of a write in flight) are
/// skipped.
pub async fn list_checkpoints(storage: &dyn MetadataStore, job: &str) -> Result<Vec<(u64, i64)>> {
    let mut ids: Vec<(u64, i64)> = storage
        .list_metadata(&checkpoints_dir(job))
        .await?
        .into_iter()
        .filter(|e| !e.is_dir)
        .filter_map(|e| Some((checkpoint_of(&e.name)?, e.modified_ms)))
        .collect();
    ids.sort();
    Ok(ids)
}

/// The checkpoint id of a manifest's file name (`<id, 20 digits>.json`); `None` for any
/// other name.
pub fn checkpoint_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The temporary files of dead metadata writes directly in metadata directory `dir`
/// ([`crate::protocol::is_metadata_temp_name`]: exactly that shape, nothing else); none,
/// without a listing, on a backend whose writes leave none
/// ([`Storage::leaves_metadata_temps`](crate::storage::MetadataStore::leaves_metadata_temps)).
pub async fn list_temps(storage: &dyn MetadataStore, dir: &str) -> Result<Vec<MetadataEntry>> {
    if !storage.leaves_metadata_temps() {
        return Ok(Vec::new());
    }
    let mut entries = storage.list_metadata(dir).await?;
    entries.retain(|e| !e.is_dir && crate::protocol::is_metadata_temp_name(&e.name));
    Ok(entries)
}

/// Removes the temporary files that manifest writes of `job` left in its checkpoint directory
/// when their process died before the rename ([`list_temps`]); returns how many. Only for the
/// job's owner, before it writes a manifest: no write there is live then (a zombie's is
/// refused by its lease anyway).
pub async fn remove_temps(storage: &dyn MetadataStore, job: &str) -> Result<usize> {
    let dir = checkpoints_dir(job);
    let temps = list_temps(storage, &dir).await?;
    for e in &temps {
        let path = format!("{dir}/{}", e.name);
        storage.delete_metadata(&path).await?;
        tracing::info!(job, file = %path, "temporary file of a dead manifest write removed");
    }
    Ok(temps.len())
}

/// Reads manifest `id` of `job`.
pub async fn read_manifest(
    storage: &dyn MetadataStore,
    job: &str,
    id: u64,
    sink_id: Option<&str>,
) -> Result<Manifest> {
    let path = manifest_path(job, id);
    let bytes = storage
        .get_metadata(&path)
        .await?
        .ok_or_else(|| Error::corrupt(format!("manifest `{path}`"), "it does not exist"))?;
    Manifest::decode(&path, &bytes, sink_id)
}

/// The latest manifest of `job`, if any. A latest manifest that cannot be read is an error,
/// never skipped: it may be a complete checkpoint whose files are already visible.
pub async fn latest_manifest(
    storage: &dyn MetadataStore,
    job: &str,
    sink_id: Option<&str>,
) -> Result<Option<Manifest>> {
    match list_checkpoints(storage, job).await?.last() {
        None => Ok(None),
        Some((id, _)) => read_manifest(storage, job, *id, sink_id).await.map(Some),
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
