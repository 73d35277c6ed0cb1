//! Backends: where part files live and how they are committed.
//!
//! The protocol in [`crate::sink`] is written once against the [`Storage`] trait; a backend only
//! supplies the primitives below, with the guarantees stated on each method. The backends are
//! [`LocalStorage`] (POSIX file systems: fsync and `renameat2(RENAME_NOREPLACE)`) and
//! [`ObjectStorage`] (object stores; S3 multipart uploads with the `s3` feature). A
//! [`Location`] names either.

use std::fmt::Debug;

use async_trait::async_trait;

use crate::protocol::{CommitOutcome, Committable, PartName, PendingHandle};
use crate::Result;

pub(crate) mod bounded;
#[cfg(feature = "test-util")]
pub mod fault;
pub mod local;
mod location;
mod object;
pub mod ownership;
#[cfg(feature = "test-util")]
pub mod power_loss;
#[cfg(feature = "s3")]
mod sigv4;

pub use local::LocalStorage;
pub use location::{Location, LocationError};
pub use object::{ObjectStorage, S3Capabilities};
pub use ownership::{JobLease, LeaseOptions};

/// Opens the storage of a sink location: a local path, `file:///path`, or
/// `s3://bucket/prefix` (configured from the `AWS_*` environment variables). The location is
/// parsed by [`Location::parse`], the one parser of locations.
pub fn open_url(url: &str) -> Result<std::sync::Arc<dyn Storage>> {
    Location::parse(url)?.open()
}

/// Where a new part file goes: its hidden in-progress path and its final path, both relative to
/// the base location and in the same directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartLocation {
    /// The hidden name the bytes are written under.
    pub in_progress_path: String,
    /// The name the file gets at commit.
    pub final_path: String,
}

/// A hidden part file found under the base location (in progress, or pending and uncommitted),
/// or a name there that only looks like one.
///
/// Only a leftover whose [`Leftover::name`] parses is filesink's; which of those belong to
/// this sink is decided by writer id ([`crate::checkpoint::OwnNames`]). The others are
/// foreign: listed so they can be reported, never removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Its name parsed by the one grammar of part names ([`PartName`]); `None` for a name that
    /// only looks like one of filesink's (another tool's file or upload): foreign.
    pub name: Option<PartName>,
    /// What identifies it: the hidden path relative to the base location, or
    /// `<final path>#<upload id>` for a multipart upload
    /// ([`crate::PendingHandle::leftover_id`]).
    pub path: String,
    /// The final name it would be committed under.
    pub final_path: String,
    /// Its current size.
    pub size_bytes: u64,
    /// Its last modification, in milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

/// A storage backend for part files.
///
/// # Contract
///
/// A backend must guarantee, for the protocol's proof to hold:
///
/// 1. **Invisible until commit.** Bytes written through a [`PartWriter`] are never visible under
///    a name that readers list (no leading `.` or `_`) before [`Storage::commit`] of its handle.
/// 2. **Durable before the handle leaves.** When [`Storage::seal`] or [`Storage::persist`]
///    returns, every byte written so far, and the name it is reachable by, survive a crash of
///    the process and of the machine. If that cannot be ensured (a failed fsync) the call fails
///    and the checkpoint fails with it.
/// 3. **Atomic, non-replacing commit.** [`Storage::commit`] makes each file visible atomically
///    under its final name and never replaces an existing final file. When it returns `Ok` the
///    commit is durable.
/// 4. **Idempotent commit with proof.** Committing a handle whose file is already visible
///    reports [`CommitOutcome::AlreadyCommitted`] only after checking that the visible file is
///    the one the handle describes (size and CRC-32C). A visible file with other content is
///    [`crate::Error::Conflict`]; neither pending nor final present is
///    [`crate::Error::DataLost`]. A backend that cannot tell answers with an error, never with
///    success.
/// 5. **Cleanup touches only the sink's own part names** under the base: names of the exact
///    shape filesink writes ([`PartName`]), never a name that only looks like one, and never
///    anything inside another sink's base below this one (a directory holding `_filesink/`, a
///    prefix holding `_filesink/sink.json`): a listing stops there.
#[async_trait]
pub trait Storage: Send + Sync + Debug + 'static {
    /// A short name for messages (`local`, `s3`).
    fn name(&self) -> &'static str;

    /// Whether [`Storage::persist`] and [`Storage::resume`] work, so row files can stay open
    /// across checkpoints. Where they do not, the writer rolls every file at every checkpoint.
    fn can_resume(&self) -> bool;

    /// Starts a new, empty in-progress part file at `location`. Fails with
    /// [`crate::Error::Conflict`] if the in-progress name exists already.
    async fn create(&self, location: &PartLocation) -> Result<Box<dyn PartWriter>>;

    /// Starts a new in-progress part at `location` whose first bytes are the first
    /// `durable_len_bytes` of the existing in-progress file `from`, checked against `crc32c`.
    /// `from` itself is left untouched, so a writer incarnation that still writes to it (a
    /// zombie) cannot corrupt the new file. A `from` shorter than `durable_len_bytes` is
    /// [`crate::Error::DataLost`]; other content is [`crate::Error::Corrupt`].
    async fn resume(
        &self,
        from: &str,
        durable_len_bytes: u64,
        crc32c: u32,
        location: &PartLocation,
    ) -> Result<Box<dyn PartWriter>>;

    /// Closes `parts` for commit and makes them durable (contract 2), as one group: on local
    /// disk, one fsync per file and one per directory. Returns one handle per part, in order.
    async fn seal(&self, parts: Vec<Box<dyn PartWriter>>) -> Result<Vec<PendingHandle>>;

    /// Makes everything written to `parts` so far durable (contract 2) while they stay open.
    /// Backends that cannot resume a part answer [`crate::Error::NotSupported`].
    async fn persist(&self, parts: &mut [&mut Box<dyn PartWriter>]) -> Result<()>;

    /// Commits each committable (contracts 3 and 4); one result per committable, in order. A
    /// failure of one does not stop the others.
    async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>>;

    /// Lists the hidden part files under the base location, and the names that only look like
    /// one ([`Leftover::name`] `None`), in any order; nothing inside another sink's base
    /// (contract 5).
    async fn list_leftovers(&self) -> Result<Vec<Leftover>>;

    /// Removes one hidden part file. Refuses any path that is not a part name of the exact
    /// shape filesink writes ([`PartName`]). Removing a file that is already gone succeeds.
    async fn remove_leftover(&self, path: &str) -> Result<()>;

    /// Writes a small metadata object (a checkpoint manifest) at `path` under the base:
    /// atomically (a reader sees all of it or nothing), durably (when this returns it survives
    /// a crash), and without replacing: an existing object is [`crate::Error::Conflict`].
    async fn put_metadata(&self, path: &str, bytes: &[u8]) -> Result<()>;

    /// Reads a metadata object; `None` if it does not exist. What it returns is durable: a
    /// process that died after writing an object but before making it durable may leave it
    /// readable, and a restarted process acts on what it reads, so a backend with a cache that
    /// a crash can lose flushes the object's name before returning it.
    async fn get_metadata(&self, path: &str) -> Result<Option<Vec<u8>>>;

    /// Lists the metadata objects directly in the directory `dir` (names only, any order);
    /// empty if the directory does not exist.
    async fn list_metadata(&self, dir: &str) -> Result<Vec<MetadataEntry>>;

    /// Deletes a metadata object; deleting one that is gone succeeds.
    async fn delete_metadata(&self, path: &str) -> Result<()>;

    /// Lists the visible data files under the base (every name readers see: no component
    /// starting with `.` or `_`), in any order; nothing inside another sink's base.
    async fn list_visible(&self) -> Result<Vec<VisibleFile>>;

    /// Where `committable` stands, without changing anything: the dry run of
    /// [`Storage::commit`], with the same proof for "already committed".
    async fn probe(&self, committable: &Committable) -> Result<CommitState>;

    /// Takes the ownership of `job` for this run ([`ownership`]), without waiting: if another
    /// live run holds it, [`crate::Error::JobBusy`] naming that run, and nothing changed.
    async fn acquire_job(&self, job: &str, options: &LeaseOptions) -> Result<Box<dyn JobLease>>;

    /// Who holds `job` right now, without taking it (for listings); `None` if no live run
    /// does.
    async fn job_holder(&self, job: &str) -> Result<Option<String>>;

    /// The bases of other sinks that this base is inside of (a directory above holding
    /// `_filesink/`, a prefix above holding `_filesink/sink.json`) or that are inside it. A
    /// sink is not created where there is one ([`crate::checkpoint::manifest::sink_identity`]):
    /// each sink owns its whole tree. The default finds none (a backend that cannot look
    /// above its base).
    async fn other_sinks(&self) -> Result<OtherSinks> {
        Ok(OtherSinks::default())
    }
}

/// Other sinks around or inside a base ([`Storage::other_sinks`]), as paths or URLs for
/// messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtherSinks {
    /// Bases above this one: it is inside their trees.
    pub around: Vec<String>,
    /// Bases below this one: they are inside its tree.
    pub inside: Vec<String>,
}

impl OtherSinks {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.around.is_empty() && self.inside.is_empty()
    }
}

/// A visible data file found by [`Storage::list_visible`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisibleFile {
    /// Its path relative to the base.
    pub path: String,
    /// Its size.
    pub size_bytes: u64,
}

/// Where a committable stands ([`Storage::probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitState {
    /// Visible under its final name with the recorded content: committing reports
    /// [`CommitOutcome::AlreadyCommitted`].
    Committed,
    /// Pending: committing makes it visible.
    Pending,
    /// Something else holds the final name: committing is [`crate::Error::Conflict`].
    Conflict,
    /// Neither pending nor visible: committing is [`crate::Error::DataLost`].
    Missing,
}

/// A metadata object found by [`Storage::list_metadata`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataEntry {
    /// Its name inside the listed directory.
    pub name: String,
    /// Whether it is a directory (local disk) or a common prefix (object stores).
    pub is_dir: bool,
    /// Its last modification, in milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

/// An open in-progress part file.
#[async_trait]
pub trait PartWriter: Send + Debug {
    /// Where the part is.
    fn location(&self) -> &PartLocation;

    /// Bytes written so far.
    fn len_bytes(&self) -> u64;

    /// Bytes of this part the backend holds in memory, not yet handed to the store or the
    /// operating system (S3: the part being filled and the parts in flight; a staged object:
    /// the whole file). The writer's memory budget counts them beside its encoders. Local
    /// files: appended bytes not written yet.
    fn memory_bytes(&self) -> u64 {
        0
    }

    /// Hands what [`PartWriter::memory_bytes`] counts to the operating system or the store,
    /// where the backend can without ending the part or making anything durable (local files:
    /// writes the buffer, no fsync). The writer calls it under memory pressure. Default:
    /// nothing (an S3 part below the minimum part size has nowhere to go).
    async fn release_memory(&mut self) -> Result<()> {
        Ok(())
    }

    /// Appends `data`.
    async fn write(&mut self, data: &[u8]) -> Result<()>;

    /// Makes the bytes written so far durable (not the file's name: that is the backend's
    /// [`Storage::seal`] or [`Storage::persist`], the only callers of this method).
    /// Idempotent: a second call without writes in between changes nothing.
    async fn sync(&mut self) -> Result<()>;

    /// Closes the part and returns its handle. Only [`Storage::seal`] calls it, after `sync`.
    async fn close(self: Box<Self>) -> Result<PendingHandle>;

    /// For wrappers (fault injection) that hand their backend's parts on.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;

    /// For wrappers (fault injection) that hand their backend's parts on.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}
