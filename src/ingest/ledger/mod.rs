//! The lake's ledger of inputs: which job holds each file or object this lake has taken, and
//! from where that job reads it. Exactly once holds per lake, not per job: an input that any
//! job of the lake took is read on from where the lake stopped, by whichever job names it
//! next, whatever the rest of its input list is (a cron job over a glob that grows is a new
//! job every time its list changes).
//!
//! # Layout
//!
//! ```text
//! _filesink/inputs/<key>/<seq, 20 digits>.json   one entry per hand-over, written once
//! _filesink/finished/<count>-<uuid>.bin          the index of files read to their end
//! ```
//!
//! `vacuum` deletes the entries below each head, and retires the finished jobs no head names
//! as a holder (`retire.rs`, [`crate::job::retired`]).
//!
//! `<key>` is a 96-bit hash of the input's identity ([`identity`]: the device and inode of a
//! local file, `inode:<dev>:<ino>`, so that every name of one file is one input; the URL of
//! an object; the name of a part of a source); each entry repeats the identity, and an entry
//! of another identity under the key is refused as corrupt rather than read as this input's.
//! A file's entries also name it as the holder's checkpoints do (`path`, its canonical path
//! when the holder took it) and its birth time. A lake written by an older filesink knows a
//! file by its canonical path: while the file's identity has no entry, the entries under its
//! path stand for it, and its first entry under the identity follows them. The entry
//! with the highest sequence number is the *head*: its `job` is the input's holder, its
//! `read` what the lake had taken of the input when that job took it over (the *base*). What
//! the holder has read since is in its own checkpoints: the input's prefix in the holder's
//! latest manifest, if it is at least the base (one written before the hand-over is older,
//! and shorter). So the ledger is written once per hand-over, never per checkpoint, and a job
//! looks up only its own inputs: one listing and one read each, whatever else the lake took.
//! Standard input and readers are streams of one job: they are not in the ledger.
//!
//! # Taking an input ([`take`]), run by a job that holds its own job
//!
//! 1. No entry: write entry 1 naming this job, base nothing read. Entries are written without
//!    replacing ([`Storage::put_metadata`](crate::storage::MetadataStore::put_metadata)): of two jobs that race for a new input one writes
//!    entry 1 and the other reads it and starts again.
//! 2. The head names this job: the base is where it starts (or its own checkpoint, if later).
//! 3. The head names another job `J`: take `J` as its own run would
//!    ([`Storage::acquire_job`](crate::storage::Leases::acquire_job); a live run of `J` refuses this run with [`Error::JobBusy`]
//!    before anything is read), read the head again (another job may have taken the input
//!    meanwhile: start again), *settle* `J`, and write the next entry naming this job, with
//!    base `J`'s prefix of the input. `J` is released once every input is taken.
//!
//! 4. The head is a *release* of job `J` (`released`: `J`'s run gave the part up, [`release`],
//!    after a checkpoint that recorded `read` was committed; or it finished, [`release_inputs`]):
//!    write the next entry naming this job with base `read`, without taking `J` (its run may be
//!    live, reading other parts).
//!
//! In 3 and 4 a file is first checked against the base ([`verify`]): one that begins with it
//! is read on after it; one that does not is either another file that reuses the identity of
//! a deleted one (born after the entry was written, or of another birth time; without birth
//! times, under another name), read from its start, or the same file changed within what the
//! lake took, refused ([`Error::InputChanged`]) before anything is written.
//!
//! # Giving inputs up, and passing over what did not change
//!
//! A run that read every input to its end gives each up once its last checkpoint is committed
//! ([`release_inputs`]): a release entry at what it read, with the file's size and time of
//! last change when the run found them unchanged since it listed the file. Before a job named
//! after its inputs is chosen, [`survey`] looks up each input, read-only: one released at its
//! end with that size and time (or, failing that, whose bytes still begin with what was read
//! and hold no more) holds nothing new and is left out of the job (the index of files read to
//! their end, [`finished`], finds most of those without a lookup); one changed within what was
//! read is refused and left out, named in the run's summary; the job is named after the rest.
//! So a cron run over a glob whose files were all taken opens no job and writes nothing, one
//! that finds a new file writes entries for that file only, and one changed file does not stop
//! the others. What the survey found is checked again as the inputs are taken (above).
//!
//! A consumer group moves parts between live runs: [`take_waiting`] waits for a live holder
//! to release a part its group revoked from it, and [`release`] writes the release once the
//! holder's checkpoint is committed (see `source/kafka/mod.rs` and `docs/design/kafka.md`).
//!
//! Settling `J` makes every record before its latest checkpoint's position visible: `J` is
//! restored as its own next run would restore it, under the lease this run holds for it (that
//! checkpoint's files committed, idempotently, with the same proof; for a Delta table job its
//! log entry written, the table created if that entry is its first); a checkpoint that keeps
//! records in files still open (row files kept open with `--max-visibility-delay`, small files
//! a pre-commit merge carries) is then finished at the same position, so that they commit too.
//! A log entry that cannot be written now (other writers took every version tried) fails the
//! run, nothing changed, as it fails the holder's own restore: nothing is handed on that
//! readers cannot see.
//!
//! A lake whose jobs ran before it had a ledger is imported once, before its first entry: each
//! input a job took records of gets entry 1 naming the job that read furthest in it
//! ([`IMPORTED_FILE`] marks the lake).
//!
//! # Where a crash lands
//!
//! | the crash comes                                  | then                                                      |
//! |--------------------------------------------------|-----------------------------------------------------------|
//! | before an entry is written                       | nothing changed: the holder is still the old one          |
//! | after entry n+1, before the job's next checkpoint | the new holder has no prefix past the base: the base is its start, for whichever job takes the input next |
//! | after the job's checkpoints                      | the holder's latest manifest says how far it read         |
//! | after a checkpoint, before its release entry      | the head names the holder: a taker settles it once its run is gone, or its restart releases it |
//! | after the last checkpoint's commit, before or among the release entries of the inputs | an input not released yet is held by the finished job: the next job to name it takes it over, settling that job (nothing to commit) |
//!
//! # Invariants
//!
//! - An input has one holder at a time (the head), and only a run that holds the holder's job
//!   (its own run, or a run taking the input over) writes the next entry: no two runs read one
//!   input at once, whatever their input lists.
//! - A base is a prefix whose records are visible: the old holder is settled before its
//!   prefix becomes the new holder's base.
//! - A holder's prefix only grows; so the later of base and own prefix is where it stands.
//! - The base is checked like any prefix before anything is read: an input replaced under
//!   the lake is refused ([`Error::InputChanged`]), whichever job took it.
//!
//! On an object store that ignores conditional puts (Garage), two jobs racing for the first
//! entry of one new input are told apart by a read-back only, which narrows the race but
//! cannot decide it (as for a Delta log shared by writers): run one ingest at a time there.

pub mod finished;
mod retire;
mod vacuum;

pub use retire::JobsRetired;
pub use vacuum::{vacuum, LedgerVacuum};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::source::{Input, Prefix, SourcePosition};
use crate::bucket::TimePartitioning;
use crate::format::FileFormat;
use crate::job::manifest::{self, Manifest};
use crate::job::{Coordinator, Ownership};
pub use crate::protocol::INPUTS_DIR;
use crate::sink::Sink;
use crate::storage::segments::hash96;
use crate::storage::{JobLease, LeaseOptions, Storage};
use crate::table::delta::DeltaOptions;
use crate::{Error, Result};

/// Layout version of an entry.
const ENTRY_VERSION: u32 = 1;

/// One hand-over of one input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Layout version.
    pub version: u32,
    /// The input's identity.
    pub input: String,
    /// This entry's sequence number (1 for the first).
    pub seq: u64,
    /// The job that holds the input from this entry on.
    pub job: String,
    /// The job it took the input from; `None` for the first entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// What the lake had taken of the input when `job` took it: where `job` starts. In a
    /// release entry: where `job` stopped.
    pub read: Prefix,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// A release: `job` gave the part up at `read`, every record before it visible, and the
    /// next job takes it without taking `job` over ([`release`], [`release_inputs`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
    /// A file's name in `job`'s checkpoints (its canonical path), where the identity is not
    /// the path: what `job`'s position records its prefix under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// When the file was created (nanoseconds since the Unix epoch), where its file system
    /// keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub born_ns: Option<i64>,
    /// In a release of a file read to its end: its size and time of last change as the run
    /// found them unchanged once it had read them. A file of that size and time is not read
    /// again to tell that it holds nothing new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// See `size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ns: Option<i64>,
    /// In a release: `job` took no record at all (what it read held blank lines at most, or
    /// a CSV header), so it is bound by nothing it read: an input that holds other bytes now
    /// is read from its start, not refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub took_none: bool,
}

impl Entry {
    /// Entry `seq` of `claim`, naming `job` from `read` on.
    fn next(claim: &Claim, seq: u64, job: &str, from: Option<String>, read: Prefix) -> Entry {
        Entry {
            version: ENTRY_VERSION,
            input: claim.identity.clone(),
            seq,
            job: job.to_owned(),
            from,
            read,
            at_ms: manifest::now_ms(),
            released: false,
            path: claim.path.clone(),
            born_ns: claim.input.as_ref().and_then(|i| i.born_ns),
            size: None,
            modified_ns: None,
            took_none: false,
        }
    }

    /// The name `job`'s checkpoints know the input by.
    fn name_in_job(&self) -> &str {
        self.path.as_deref().unwrap_or(&self.input)
    }
}

/// What a job was handed of one of its inputs by [`take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// Where the job starts reading the input: what the lake had already taken of it.
    pub read: Prefix,
    /// The job that took those bytes (the last holder); `None` if it was this job.
    pub from: Option<String>,
}

/// Whether an input is in the ledger: files and objects are, streams are not.
pub fn is_ledgered(input: &Input) -> bool {
    !input.is_stdin() && input.stream.is_none()
}

/// What a job takes from the ledger: a ledgered input, or a part of a source
/// ([`Source::parts`](super::Source::parts)), whose entries' `read.offset` is the part's next
/// offset (and `read.crc32c` `None`).
#[derive(Debug, Clone)]
pub struct Claim {
    /// The identity its entries are kept under ([`identity`]).
    pub identity: String,
    /// How messages name it (``input `x.jsonl` ``, ``part `kafka://…/3` ``).
    pub display: String,
    /// A file's name in this job's checkpoints (its canonical path), where the identity is not
    /// the path.
    pub path: Option<String>,
    /// The identity a lake written by an older filesink knows a file by: its canonical path.
    /// Looked up only while the identity has no entry.
    pub legacy: Option<String>,
    /// The input, checked against what the lake took of it when another job hands it on.
    pub input: Option<Input>,
}

/// What the ledger knows an input by. The identity rule: a local file is its device and
/// inode (`inode:<dev>:<ino>`), so that every name of it is one input: a file renamed or
/// rotated (`mv app.jsonl app.jsonl.1`), reached by a hard or symbolic link, is read on from
/// where the lake stopped in it, never taken again. The identity is checked against the bytes
/// the lake took (their CRC-32C) before anything is read: a file that reuses the inode of a
/// deleted one (born after the lake took that one, or of another birth time) is a new input;
/// the same file rewritten is refused. A copy is another file: another input, taken whole
/// (taking it as the same input could drop records that only happen to be the same bytes).
/// An object is its URL (an object is replaced, not changed: a replaced one is refused by its
/// bytes). Streams are not in the ledger.
pub fn identity(input: &Input) -> Option<String> {
    if !is_ledgered(input) {
        return None;
    }
    Some(match (&input.path, input.file_id) {
        (Some(_), Some((dev, ino))) => format!("inode:{dev}:{ino}"),
        _ => input.canonical.clone(),
    })
}

impl Claim {
    /// The claim of an input, if it is ledgered.
    pub fn of_input(input: &Input) -> Option<Claim> {
        let identity = identity(input)?;
        let by_path = identity == input.canonical;
        Some(Claim {
            identity,
            display: format!("input `{}`", input.display),
            path: (!by_path).then(|| input.canonical.clone()),
            legacy: (!by_path).then(|| input.canonical.clone()),
            input: Some(input.clone()),
        })
    }

    /// The claim of a part of a source.
    pub fn of_part(part: &str) -> Claim {
        Claim {
            identity: part.to_owned(),
            display: format!("part `{part}`"),
            path: None,
            legacy: None,
            input: None,
        }
    }
}

/// The ledger key of an identity: CRC-32C and 64-bit FNV-1a of its bytes, in hex.
pub fn key(identity: &str) -> String {
    let (crc, fnv) = hash96(identity.as_bytes());
    format!("{crc:08x}{fnv:016x}")
}

fn entry_path(key: &str, seq: u64) -> String {
    format!("{INPUTS_DIR}/{key}/{seq:020}.json")
}

/// The head of `identity`'s entries, if the lake ever took it.
pub async fn head(storage: &dyn Storage, identity: &str) -> Result<Option<Entry>> {
    let key = key(identity);
    let dir = format!("{INPUTS_DIR}/{key}");
    let seq = storage
        .list_metadata(&dir)
        .await?
        .into_iter()
        .filter(|e| !e.is_dir)
        .filter_map(|e| vacuum::seq_of(&e.name))
        .max();
    let Some(seq) = seq else {
        return Ok(None);
    };
    let path = entry_path(&key, seq);
    let bytes = storage.get_metadata(&path).await?.ok_or_else(|| {
        Error::corrupt(format!("ledger entry `{path}`"), "it was listed, then gone")
    })?;
    let entry = parse_entry(&path, &bytes)?;
    if entry.input != identity || entry.seq != seq {
        return Err(Error::corrupt(
            format!("ledger entry `{path}`"),
            format!("it names input `{}`, not `{identity}`", entry.input),
        ));
    }
    Ok(Some(entry))
}

/// An entry's bytes as read from `path`: one filesink wrote, of a layout this build knows.
fn parse_entry(path: &str, bytes: &[u8]) -> Result<Entry> {
    let entry: Entry = serde_json::from_slice(bytes).map_err(|e| {
        Error::corrupt(
            format!("ledger entry `{path}`"),
            format!("it is not one filesink wrote ({e})"),
        )
    })?;
    if entry.version > ENTRY_VERSION {
        return Err(Error::corrupt(
            format!("ledger entry `{path}`"),
            format!(
                "its layout version {} is newer than this build's ({ENTRY_VERSION})",
                entry.version
            ),
        ));
    }
    Ok(entry)
}

/// Where a lake records that its ledger holds what its jobs took before it had a ledger.
pub const IMPORTED_FILE: &str = "_filesink/ledger.json";

/// A lake whose jobs ran before it had a ledger: what they took is in their checkpoints only.
/// Once per lake, before any entry is written, every job's latest position is read, and each
/// input that a job took records of gets entry 1 naming the job that read furthest in it (so
/// the first job with a new input list does not read them all again); then the lake is
/// marked ([`IMPORTED_FILE`]). A position an older layout wrote without read prefixes, and a
/// job that is not an ingest's, give nothing. Racing runs write the same entries, and an entry
/// that exists is left as it is.
async fn import_once(storage: &dyn Storage) -> Result<()> {
    if storage.get_metadata(IMPORTED_FILE).await?.is_some() {
        return Ok(());
    }
    let sink_id = manifest::sink_identity(storage, false)
        .await?
        .map(|s| s.sink_id);
    let mut furthest: BTreeMap<String, (String, Prefix)> = BTreeMap::new();
    for job in manifest::list_jobs(storage).await? {
        let Some(m) = manifest::latest_manifest(storage, &job, sink_id.as_deref()).await? else {
            continue;
        };
        let Ok(p) = SourcePosition::from_json(&job, &m.source_position) else {
            continue;
        };
        if p.records == 0 && p.bad_records == 0 {
            continue;
        }
        for (input, read) in p.inputs.iter().zip(&p.read) {
            if input == "-" || input.starts_with("reader:") || read.crc32c.is_none() {
                continue;
            }
            if read.offset == 0 {
                continue;
            }
            let further = furthest
                .get(input)
                .is_none_or(|(_, r)| r.offset < read.offset);
            if further {
                furthest.insert(input.clone(), (job.clone(), *read));
            }
        }
    }
    for (input, (job, read)) in furthest {
        // Known by path, as every entry of a lake of that age.
        let first = Entry::next(&Claim::of_part(&input), 1, &job, None, read);
        put(storage, &first).await?;
    }
    let marker =
        serde_json::json!({ "version": ENTRY_VERSION, "imported_at_ms": manifest::now_ms() });
    match storage
        .put_metadata(IMPORTED_FILE, marker.to_string().as_bytes())
        .await
    {
        Ok(()) | Err(Error::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `entry` as the next one of its input; `Ok(false)` if another run wrote that
/// sequence number first.
async fn put(storage: &dyn Storage, entry: &Entry) -> Result<bool> {
    let path = entry_path(&key(&entry.input), entry.seq);
    let bytes = serde_json::to_vec(entry).expect("an entry encodes");
    match storage.put_metadata(&path, &bytes).await {
        Ok(()) => Ok(true),
        Err(Error::Conflict { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A job taken over for its inputs: held until [`take`] returns, and settled once.
struct Held {
    lease: Box<dyn JobLease>,
    /// Its latest checkpoint's position, if that binds what it read (it took a record).
    position: Option<SourcePosition>,
}

/// How [`take`] settles a job it takes inputs from.
#[derive(Debug, Clone)]
pub struct Settle {
    /// The lease a job taken over is held with.
    pub lease: LeaseOptions,
    /// For messages: where the lake is.
    pub location: String,
    /// The Delta table's writers are known to be one (`--single-writer`).
    pub single_writer: bool,
}

/// Takes every claim of `claims` (`None`: a stream, not ledgered) for `job`, which the
/// caller holds: returns, per claim, where the lake stands in it (`None` for streams and for
/// inputs or parts new to the lake). The protocol is the module doc's. Errors:
/// [`Error::JobBusy`] when one is held by a live run of another job, or by one that cannot be
/// settled; any error of the store. Nothing of the inputs is read here.
pub async fn take(
    storage: &Arc<dyn Storage>,
    job: &str,
    claims: &[Option<Claim>],
    settle: &Settle,
) -> Result<Vec<Option<Taken>>> {
    if claims.iter().any(Option::is_some) {
        import_once(storage.as_ref()).await?;
    }
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    let result = take_held(storage, job, claims, settle, &mut held).await;
    let mut release = Ok(());
    for (_, h) in held {
        if let Err(e) = h.lease.release().await {
            release = release.and(Err(e));
        }
    }
    let taken = result?;
    release?;
    Ok(taken)
}

async fn take_held(
    storage: &Arc<dyn Storage>,
    job: &str,
    claims: &[Option<Claim>],
    settle: &Settle,
    held: &mut BTreeMap<String, Held>,
) -> Result<Vec<Option<Taken>>> {
    let mut out = Vec::with_capacity(claims.len());
    for claim in claims {
        let Some(claim) = claim else {
            out.push(None);
            continue;
        };
        let taken = loop {
            let Some((head, legacy)) = head_of(storage.as_ref(), claim).await? else {
                let first = Entry::next(claim, 1, job, None, Prefix::START);
                if put(storage.as_ref(), &first).await? {
                    break None;
                }
                continue;
            };
            // An entry under the old identity (the path) is followed by entry 1 of the new.
            let seq = if legacy { 1 } else { head.seq + 1 };
            let taken = |read: Prefix, from: Option<String>| {
                (read.offset > 0).then_some(Taken { read, from })
            };
            if head.job == job && !head.released {
                if legacy {
                    let next = Entry::next(claim, seq, job, head.from.clone(), head.read);
                    if !put(storage.as_ref(), &next).await? {
                        continue;
                    }
                }
                break taken(head.read, head.from.clone());
            }
            if head.released {
                // Given up by its holder, every record before `read` visible: taken as it is.
                let read = verified(claim, &head, head.read).await?;
                let next = Entry::next(claim, seq, job, Some(head.job.clone()), read);
                if put(storage.as_ref(), &next).await? {
                    break taken(read, Some(head.job));
                }
                continue;
            }
            let holder = head.job.clone();
            if !held.contains_key(&holder) {
                let h = hold(storage, &holder, claim, settle).await?;
                held.insert(holder.clone(), h);
                // The head may have moved while the holder was being taken.
                continue;
            }
            let h = &held[&holder];
            // A lease that expired while this run settled the holder may have let the
            // holder's own run in, reading on from where this run found it.
            h.lease.check().await?;
            let read = holder_prefix(h.position.as_ref(), head.name_in_job(), head.read);
            let read = verified(claim, &head, read).await?;
            let next = Entry::next(claim, seq, job, Some(holder.clone()), read);
            if put(storage.as_ref(), &next).await? {
                break taken(read, Some(holder));
            }
        };
        out.push(taken);
    }
    Ok(out)
}

/// The head of `claim`'s entries, and whether it is one of its old identity
/// ([`Claim::legacy`]: its identity has no entry yet).
async fn head_of(storage: &dyn Storage, claim: &Claim) -> Result<Option<(Entry, bool)>> {
    if let Some(h) = head(storage, &claim.identity).await? {
        return Ok(Some((h, false)));
    }
    match &claim.legacy {
        Some(path) => Ok(head(storage, path).await?.map(|h| (h, true))),
        None => Ok(None),
    }
}

/// How a file compares with what the lake took of it under its identity.
#[derive(Debug)]
pub enum Verdict {
    /// It begins with those bytes: read on after them.
    Same {
        /// It holds more than those bytes.
        grew: bool,
    },
    /// Another file under an identity a deleted one had (created after the lake took it, or
    /// of another birth time): a new input, read from its start.
    Other,
    /// The same file, changed within what was taken: refused.
    Changed(Error),
}

/// Compares `input` with `read`, the prefix the lake took of the file that `head` (the
/// ledger's entry for the input's identity) names. Reads the prefix; call it off the runtime.
pub fn verify(input: &Input, head: &Entry, read: Prefix) -> Result<Verdict> {
    match super::source::check_read(&head.job, std::slice::from_ref(input), &[read]) {
        Ok(grew) => Ok(Verdict::Same {
            grew: grew.first().copied().unwrap_or(false),
        }),
        Err(Error::InputChanged(why)) => {
            let born_after = input.born_ns.is_some_and(|b| b / 1_000_000 > head.at_ms);
            let other_birth = matches!(
                (head.born_ns, input.born_ns),
                (Some(a), Some(b)) if a != b
            );
            let renamed_unborn = head.born_ns.is_none()
                && input.born_ns.is_none()
                && head.name_in_job() != input.canonical;
            if born_after || other_birth || renamed_unborn || head.took_none {
                Ok(Verdict::Other)
            } else {
                Ok(Verdict::Changed(Error::InputChanged(why)))
            }
        }
        Err(e) => Err(e),
    }
}

/// Where a job taking `claim` over from `head` starts in it: `read`, if the file still begins
/// with those bytes; its start, if it is another file under the same identity. A file changed
/// within them is refused ([`Error::InputChanged`]).
async fn verified(claim: &Claim, head: &Entry, read: Prefix) -> Result<Prefix> {
    let Some(input) = claim.input.clone().filter(|_| read.offset > 0) else {
        return Ok(read);
    };
    let head = head.clone();
    let verdict = tokio::task::spawn_blocking(move || verify(&input, &head, read))
        .await
        .map_err(|e| Error::io("check", &claim.display, e.into()))??;
    match verdict {
        Verdict::Same { .. } => Ok(read),
        Verdict::Other => Ok(Prefix::START),
        Verdict::Changed(e) => Err(e),
    }
}

/// How often [`take_waiting`] reads a part's head again while a live holder keeps it.
const RELEASE_POLL: Duration = Duration::from_millis(250);

/// As [`take`], for parts a consumer group assigned to `job`: a part held by a live run of
/// another job is waited for, since its holder releases it once the group revoked it from
/// that run ([`release`]); up to `wait`, then [`Error::JobBusy`] naming the holder. Parts
/// taken before the wait stay taken: taking them again finds their head naming `job`.
pub async fn take_waiting(
    storage: &Arc<dyn Storage>,
    job: &str,
    claims: &[Option<Claim>],
    settle: &Settle,
    wait: Duration,
) -> Result<Vec<Option<Taken>>> {
    let deadline = Instant::now() + wait;
    loop {
        match take(storage, job, claims, settle).await {
            Err(Error::JobBusy { job: holder, .. })
                if holder != job && Instant::now() < deadline =>
            {
                tokio::time::sleep(RELEASE_POLL).await;
            }
            other => return other,
        }
    }
}

/// Gives up the parts of `parts` that `job` holds, each at the later of the offset given and
/// its base: the caller promises that every record before it is visible (a checkpoint that
/// recorded it is committed). The next job to take one reads on from there without taking
/// `job` over. A part whose head is not `job`'s is left as it is: another job took it over
/// (it found `job`'s run dead), or `job` released it already.
pub async fn release(storage: &dyn Storage, job: &str, parts: &[(String, u64)]) -> Result<()> {
    for (identity, offset) in parts {
        loop {
            let Some(head) = head(storage, identity).await? else {
                break;
            };
            if head.job != job || head.released {
                break;
            }
            let read = Prefix {
                offset: (*offset).max(head.read.offset),
                line: 1,
                crc32c: None,
            };
            let mut entry = Entry::next(&Claim::of_part(identity), head.seq + 1, job, None, read);
            entry.released = true;
            if put(storage, &entry).await? {
                break;
            }
        }
    }
    Ok(())
}

/// Gives up every ledgered input of `inputs` that `job` holds, each at what the job read of
/// it (`read`, one prefix per input): the caller promises that every record before it is
/// visible (the job finished, its last checkpoint committed); `took_none`: the job took no
/// record at all ([`Entry::took_none`]). The next job to name one takes
/// it there without taking `job` over, and one that finds it unchanged
/// ([`Entry::size`]) passes it over without reading it ([`survey`]).
pub async fn release_inputs(
    storage: &dyn Storage,
    job: &str,
    inputs: &[Input],
    read: &[Prefix],
    took_none: bool,
) -> Result<()> {
    let mut digests = Vec::new();
    for (input, p) in inputs.iter().zip(read) {
        let Some(claim) = Claim::of_input(input) else {
            continue;
        };
        let unchanged = input.path.as_ref().and_then(|path| {
            let meta = std::fs::metadata(path).ok()?;
            let modified = meta.modified().ok().and_then(super::source::epoch_ns);
            (Some(meta.len()) == input.size_bytes && modified == input.modified_ns)
                .then_some((meta.len(), modified))
        });
        loop {
            let Some(head) = head(storage, &claim.identity).await? else {
                break;
            };
            if head.job != job || head.released || p.offset < head.read.offset {
                break;
            }
            let mut entry = Entry::next(&claim, head.seq + 1, job, None, *p);
            (entry.released, entry.took_none) = (true, took_none);
            if let Some((size, modified)) = unchanged {
                (entry.size, entry.modified_ns) = (Some(size), modified);
            }
            if put(storage, &entry).await? {
                digests.extend(read_whole(&claim.identity, input, p, unchanged.is_some()));
                break;
            }
        }
    }
    finished::record(storage, digests).await
}

/// The digest ([`finished::digest`]) of an input a run gave up having read `read` of it: one
/// read to its end (or, compressed, to the end of its stream) that was, once read, as the run
/// listed it (`unchanged`: a file's size and time of last change; an object's reads are all
/// pinned to the version it was listed at).
fn read_whole(identity: &str, input: &Input, read: &Prefix, unchanged: bool) -> Option<u128> {
    let size = input.size_bytes?;
    let as_listed = unchanged || input.version.is_some();
    let whole = input.compression.is_some() || size == read.offset;
    (as_listed && whole)
        .then(|| digest_now(identity, input))
        .flatten()
}

/// The digest of `input` as it is now, had a run read it to its end as it is: a file by its
/// size, time of last change and birth time, an object by its size and version.
fn digest_now(identity: &str, input: &Input) -> Option<u128> {
    if input.path.is_none() && input.version.is_none() {
        return None;
    }
    Some(finished::digest(
        identity,
        input.size_bytes?,
        input.modified_ns,
        input.born_ns,
        input.version.as_deref(),
    ))
}

/// Where the lake stands in an input, as [`survey`] finds it before a job is chosen.
#[derive(Debug)]
pub enum Standing {
    /// New to the lake (or another file under an identity a deleted one had): read whole.
    New,
    /// A job holds it, or it holds more than the lake took: read on.
    Taken,
    /// Given up by the job that read it, which read all of it: nothing to read.
    NothingNew,
    /// Changed within what the lake took: refused ([`Error::InputChanged`]).
    Refused(Error),
    /// Held by a live run of another job ([`Error::JobBusy`]): the run is refused before it
    /// writes anything.
    Busy(Error),
}

/// Where the lake stands in each of `inputs` (see [`Standing`]), read-only: nothing is
/// written, no job is taken. A file given up at its end is passed over without reading it
/// when its size and time of last change are those the releasing job recorded; any other is
/// compared with what the lake took of it; one held by a live run of another job than `job`
/// is [`Standing::Busy`]. What this finds is checked again as the inputs are taken
/// ([`take`]).
pub async fn survey(storage: &dyn Storage, job: &str, inputs: &[Input]) -> Result<Vec<Standing>> {
    let index = finished::Finished::load(storage).await?;
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let Some(identity) = identity(input) else {
            out.push(Standing::Taken);
            continue;
        };
        if !index.is_empty() && digest_now(&identity, input).is_some_and(|d| index.holds(d)) {
            out.push(Standing::NothingNew);
            continue;
        }
        let Some(claim) = Claim::of_input(input) else {
            out.push(Standing::Taken);
            continue;
        };
        let Some((head, legacy)) = head_of(storage, &claim).await? else {
            out.push(Standing::New);
            continue;
        };
        if legacy || !head.released {
            let live = match head.job == job {
                true => None,
                false => storage.job_holder(&head.job).await?,
            };
            out.push(match live {
                Some(holder) => Standing::Busy(Error::job_busy(
                    &head.job,
                    format!(
                        "{} is being read by a live run of job `{}` ({holder}); nothing was \
                         changed: run again once it is done",
                        claim.display, head.job
                    ),
                )),
                None => Standing::Taken,
            });
            continue;
        }
        let unchanged = head.size.is_some()
            && head.size == input.size_bytes
            && head.modified_ns == input.modified_ns
            && head.born_ns == input.born_ns
            && (input.compression.is_some() || input.size_bytes == Some(head.read.offset));
        if unchanged {
            out.push(Standing::NothingNew);
            continue;
        }
        let read = head.read;
        let (mut input, head) = (input.clone(), head.clone());
        input.find_compression().await?;
        let verdict = tokio::task::spawn_blocking(move || verify(&input, &head, read))
            .await
            .map_err(|e| Error::io("check", &claim.display, e.into()))??;
        out.push(match verdict {
            Verdict::Same { grew: false } => Standing::NothingNew,
            Verdict::Same { grew: true } => Standing::Taken,
            Verdict::Other => Standing::New,
            Verdict::Changed(e) => Standing::Refused(e),
        });
    }
    Ok(out)
}

/// Where the holder of an input or part stands in it: the later of the base its entry gave it
/// and what its latest checkpoint records (a job that took no record is bound by nothing it
/// read, so only the base counts).
fn holder_prefix(position: Option<&SourcePosition>, identity: &str, base: Prefix) -> Prefix {
    match position.and_then(|p| p.read_of(identity)) {
        Some(own) if own.offset >= base.offset => own,
        _ => base,
    }
}

/// Takes job `holder` as its own run would, and settles its latest checkpoint.
async fn hold(
    storage: &Arc<dyn Storage>,
    holder: &str,
    claim: &Claim,
    settle: &Settle,
) -> Result<Held> {
    let lease = match storage.acquire_job(holder, &settle.lease).await {
        Ok(l) => l,
        Err(Error::JobBusy { reason, .. }) => {
            return Err(Error::job_busy(
                holder,
                format!(
                    "{} is being read by a live run of job `{holder}` ({reason}); \
                     nothing was changed: run again once it is done",
                    claim.display
                ),
            ))
        }
        Err(e) => return Err(e),
    };
    match settle_job(storage, holder, settle).await {
        Ok(position) => Ok(Held { lease, position }),
        Err(e) => {
            let _ = lease.release().await;
            Err(e)
        }
    }
}

/// Makes every record before the latest checkpoint of `job` visible, and returns that
/// checkpoint's position if it binds what the job read. The job is restored as its own next
/// run would restore it (its files committed, its Delta log entry written, its leftovers after
/// that checkpoint removed), under the lease this run holds for it; a checkpoint that keeps
/// records in files still open (row files kept open, small files a merge carries) is then
/// finished at the same position, so that they roll and commit too.
async fn settle_job(
    storage: &Arc<dyn Storage>,
    job: &str,
    settle: &Settle,
) -> Result<Option<SourcePosition>> {
    let sink_id = manifest::sink_identity(storage.as_ref(), false)
        .await?
        .map(|s| s.sink_id);
    let Some(m) = manifest::latest_manifest(storage.as_ref(), job, sink_id.as_deref()).await?
    else {
        return Ok(None);
    };
    let position = match m.source_position.is_null() {
        true => None,
        false => Some(SourcePosition::from_json(job, &m.source_position)?),
    };
    let open_files = !m.finished && keeps_open(&m);
    if m.committables.is_empty() && !open_files {
        // Nothing before its position waits to be made visible.
        return Ok(position.filter(|p| p.records > 0 || p.bad_records > 0));
    }
    let format = match m.writers.first().map(|w| w.format.as_str()) {
        Some("jsonl") => FileFormat::json_lines(),
        Some("csv") => FileFormat::csv(),
        _ => FileFormat::parquet(),
    };
    let sink = Sink::builder_shared(storage.clone())
        .format(format)
        .build()?;
    let mut builder = Coordinator::builder(&sink, job)
        .parallelism_of_new_job(m.writers.len().max(1))
        .ownership(Ownership::External);
    if let (Some(_), Some(p)) = (&m.table, &position) {
        let time = match &p.partition_by_time {
            Some(t) => Some(TimePartitioning::new(t.column.clone(), &t.pattern)?),
            None => None,
        };
        builder = builder.delta_table(
            DeltaOptions::new()
                .schema(Arc::new(p.schema.clone()))
                .partition_by(p.partition_by.clone())
                .time_directories(time.iter().flat_map(|t| t.names().map(str::to_owned)))
                .single_writer(settle.single_writer)
                .single_writer_lease(settle.lease)
                .location(settle.location.clone()),
        );
    }
    let mut holder = builder.open().await?;
    if open_files {
        holder.finish(&m.source_position).await?;
    }
    holder.close().await?;
    Ok(position.filter(|p| p.records > 0 || p.bad_records > 0))
}

/// Whether checkpoint `m` keeps records in files that are not pending: row files that stay
/// open across checkpoints, small files a pre-commit merge carries.
fn keeps_open(m: &Manifest) -> bool {
    m.writers
        .iter()
        .any(|w| !w.in_progress.is_empty() || !w.carried.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The survey trusts a digest of the index without reading the input's entries, and a
    /// file that changed since has another digest, looked up in its entries.
    #[tokio::test]
    async fn the_index_passes_a_file_over_by_its_digest_alone() {
        let dir = tempfile::tempdir().unwrap();
        let storage = crate::storage::LocalStorage::new(dir.path().join("lake")).unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        let standing = |input: Input| {
            let storage = &storage;
            async move { survey(storage, "j", &[input]).await.unwrap().remove(0) }
        };
        let input = Input::file(&path).unwrap();
        assert!(matches!(standing(input.clone()).await, Standing::New));
        let id = identity(&input).unwrap();
        finished::record(&storage, vec![digest_now(&id, &input).unwrap()])
            .await
            .unwrap();
        assert!(matches!(standing(input).await, Standing::NothingNew));
        std::fs::write(&path, "{\"a\":1}\n{\"a\":2}\n").unwrap();
        let grown = Input::file(&path).unwrap();
        assert!(matches!(standing(grown).await, Standing::New));
    }

    #[test]
    fn keys_are_stable_and_tell_identities_apart() {
        assert_eq!(key("/a/b.jsonl"), key("/a/b.jsonl"));
        assert_ne!(key("/a/b.jsonl"), key("/a/c.jsonl"));
        assert_eq!(key("").len(), 24);
        assert_eq!(key("s3://bucket/raw/x.jsonl").len(), 24);
    }

    /// A position of one record that read `read` of `inputs` and stood at `source`.
    fn position(
        inputs: &[&str],
        read: Vec<Prefix>,
        source: Option<serde_json::Value>,
    ) -> SourcePosition {
        SourcePosition {
            version: 4,
            inputs: inputs.iter().map(|i| (*i).to_owned()).collect(),
            input_format: super::super::InputFormat::Jsonl,
            partition_by: vec![],
            partition_by_time: None,
            cursor: super::super::Cursor::START,
            read,
            records: 1,
            bad_records: 0,
            bad_records_len: None,
            bad_records_file: None,
            bad_records_tail: None,
            schema: arrow::datatypes::Schema::empty(),
            source,
        }
    }

    #[test]
    fn the_later_of_base_and_own_prefix_is_where_the_holder_stands() {
        let base = Prefix {
            offset: 200,
            line: 11,
            crc32c: Some(7),
        };
        let p = |offset| {
            let read = Prefix {
                offset,
                line: 1,
                crc32c: Some(1),
            };
            position(&["/x"], vec![read], None)
        };
        assert_eq!(holder_prefix(Some(&p(100)), "/x", base), base);
        assert_eq!(holder_prefix(Some(&p(300)), "/x", base).offset, 300);
        assert_eq!(holder_prefix(Some(&p(300)), "/y", base), base);
        assert_eq!(holder_prefix(None, "/x", base), base);
    }

    #[test]
    fn a_part_of_a_source_stands_at_the_later_of_base_and_its_recorded_offset() {
        let mut offsets = super::super::PartOffsets::default();
        offsets.parts.insert("kafka://c/t/3".into(), 500);
        let p = position(&["source:kafka://c/t"], vec![], Some(offsets.to_json()));
        let base = |offset| Prefix {
            offset,
            line: 1,
            crc32c: None,
        };
        assert_eq!(
            holder_prefix(Some(&p), "kafka://c/t/3", base(100)).offset,
            500
        );
        assert_eq!(
            holder_prefix(Some(&p), "kafka://c/t/3", base(900)).offset,
            900
        );
        assert_eq!(holder_prefix(Some(&p), "kafka://c/t/2", base(7)).offset, 7);
        // A position of another form holds no part.
        let other = position(&[], vec![], Some(serde_json::json!({"cursor": 3})));
        assert_eq!(
            holder_prefix(Some(&other), "kafka://c/t/3", base(1)).offset,
            1
        );
    }

    /// A file that does not begin with what the lake took under its identity is another file
    /// where its birth says so (born after the entry, or another birth time), or, where no
    /// birth time is kept, where it has another name; else it is the same file changed.
    #[test]
    fn a_reused_identity_is_told_from_a_changed_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.jsonl");
        std::fs::write(&path, "{\"id\":1}\n{\"id\":2}\n").unwrap();
        let mut input = Input::file(&path).unwrap();
        let taken = Prefix {
            offset: 9,
            line: 2,
            crc32c: Some(crc32c::crc32c(b"{\"id\":9}\n")),
        };
        let claim = Claim::of_input(&input).unwrap();
        let mut head = Entry::next(&claim, 1, "j", None, taken);
        let verdict = |input: &Input, head: &Entry| verify(input, head, taken).unwrap();
        // Same birth, same name: changed.
        (input.born_ns, head.born_ns, head.at_ms) = (Some(5_000_000), Some(5_000_000), 10);
        assert!(matches!(verdict(&input, &head), Verdict::Changed(_)));
        // Born after the lake took the identity: another file.
        input.born_ns = Some(11_000_000);
        head.born_ns = None;
        assert!(matches!(verdict(&input, &head), Verdict::Other));
        // Another birth time: another file.
        (input.born_ns, head.born_ns) = (Some(5_000_000), Some(4_000_000));
        assert!(matches!(verdict(&input, &head), Verdict::Other));
        // No birth times: the name tells.
        (input.born_ns, head.born_ns) = (None, None);
        assert!(matches!(verdict(&input, &head), Verdict::Changed(_)));
        head.path = Some("/elsewhere/app.jsonl.1".into());
        assert!(matches!(verdict(&input, &head), Verdict::Other));
        // What it begins with decides first: the same bytes are the same input, grown.
        let same = Prefix {
            offset: 9,
            line: 2,
            crc32c: Some(crc32c::crc32c(b"{\"id\":1}\n")),
        };
        assert!(matches!(
            verify(&input, &head, same).unwrap(),
            Verdict::Same { grew: true }
        ));
    }

    #[tokio::test]
    async fn a_released_part_is_taken_where_it_was_released_while_its_holder_runs_on() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> =
            Arc::new(crate::storage::LocalStorage::new(dir.path()).unwrap());
        let settle = Settle {
            lease: LeaseOptions::default(),
            location: "lake".into(),
            single_writer: false,
        };
        let name = "kafka://c/t/0";
        let part = [Some(Claim::of_part(name))];
        // Job `a` runs (it holds its own job) and takes the part, new to the lake.
        let a = storage.acquire_job("a", &settle.lease).await.unwrap();
        assert_eq!(take(&storage, "a", &part, &settle).await.unwrap(), [None]);
        // Another job is refused while `a`'s run is live, and after a bounded wait too.
        let wait = Duration::from_millis(300);
        let busy = take_waiting(&storage, "b", &part, &settle, wait).await;
        assert!(matches!(busy, Err(Error::JobBusy { .. })), "{busy:?}");
        // `a` gives it up at 700: `b` takes it there, `a`'s run still live.
        release(storage.as_ref(), "a", &[(name.to_owned(), 700)])
            .await
            .unwrap();
        let taken = take(&storage, "b", &part, &settle).await.unwrap();
        let taken = taken[0].as_ref().unwrap();
        assert_eq!((taken.read.offset, taken.from.as_deref()), (700, Some("a")));
        // A late release of `a` changes nothing: the part is `b`'s.
        release(storage.as_ref(), "a", &[(name.to_owned(), 900)])
            .await
            .unwrap();
        let h = head(storage.as_ref(), name).await.unwrap().unwrap();
        assert_eq!(
            (h.job.as_str(), h.released, h.read.offset),
            ("b", false, 700)
        );
        // Released by `b` below its base, it is released at its base.
        release(storage.as_ref(), "b", &[(name.to_owned(), 10)])
            .await
            .unwrap();
        let h = head(storage.as_ref(), name).await.unwrap().unwrap();
        assert_eq!(
            (h.job.as_str(), h.released, h.read.offset),
            ("b", true, 700)
        );
        a.release().await.unwrap();
    }
}
