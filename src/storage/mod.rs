//! Backends: where part files live and how they are committed.
//!
//! The protocol in [`crate::sink`] is written once against the [`Storage`] trait; a backend only
//! supplies the primitives below, with the guarantees stated on each method. The backends are
//! [`LocalStorage`] (POSIX file systems: fsync and `renameat2(RENAME_NOREPLACE)`) and
//! [`ObjectStorage`] (object stores; S3 multipart uploads with the `s3` feature). A
//! [`Location`] names either.

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;

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
pub mod segments;
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
/// this sink is decided by writer id ([`crate::job::OwnNames`]). The others are
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

/// How many [`Parts::create`] calls the default [`Parts::create_all`] runs at a time.
pub const CREATE_AT_ONCE_MAX: usize = 32;

/// A storage backend for part files.
///
/// A backend implements one trait per role its callers use: [`Parts`] (the two phases' part
/// files), [`MetadataStore`] (manifests, the ledger, a Delta log), [`Leases`] (one live run
/// per job) and [`Listing`] (what cleanup, compaction and vacuum see); `Storage` is all four
/// with the backend's name. Code that needs one role takes that trait (`job::manifest` takes
/// `&dyn MetadataStore`), and a `&dyn Storage` is one of each.
///
/// # Contract
///
/// A backend must guarantee, for the protocol's proof to hold:
///
/// 1. **Invisible until commit.** Bytes written through a [`PartWriter`] are never visible under
///    a name that readers list (no leading `.` or `_`) before [`Parts::commit`] of its handle.
/// 2. **Durable before the handle leaves.** When [`Parts::seal`] or [`Parts::persist`]
///    returns, every byte written so far, and the name it is reachable by, survive a crash of
///    the process and of the machine. If that cannot be ensured (a failed fsync) the call fails
///    and the checkpoint fails with it.
/// 3. **Atomic, non-replacing commit.** [`Parts::commit`] makes each file visible atomically
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
pub trait Storage:
    Parts + MetadataStore + Leases + Listing + Send + Sync + Debug + 'static
{
    /// A short name for messages (`local`, `s3`).
    fn name(&self) -> &'static str;

    /// Where the sink is, for messages: the base directory, the `s3://` URL. Defaults to
    /// [`Storage::name`].
    fn place(&self) -> String {
        self.name().to_owned()
    }
}

/// The part files of the two phases: created and written, made durable at the vote, committed,
/// probed ([`Storage`], contract points 1 to 4).
#[async_trait]
pub trait Parts: Send + Sync + Debug {
    /// Whether [`Parts::persist`] and [`Parts::resume`] work, so row files can stay open
    /// across checkpoints. Where they do not, the writer rolls every file at every checkpoint.
    fn can_resume(&self) -> bool;

    /// The longest path, in bytes, this store takes for a file relative to the sink's base,
    /// if it has a limit: on local disk `PATH_MAX` less the base directory, on S3 the 1,024
    /// bytes of a key less the prefix. A partition path that would make a part file's path
    /// longer is refused before anything is written (see
    /// [`Sink::partition_path_bytes_max`](crate::Sink::partition_path_bytes_max)).
    fn path_bytes_max(&self) -> Option<usize> {
        None
    }

    /// The most an open part file holds in memory before it can hand any of it on
    /// ([`PartWriter::memory_bytes`]): on S3 a whole part, whose upload waits until the part
    /// is full. The sink keeps at most its budget over twice this many files open
    /// ([`crate::SinkBuilder::open_files_max`]), so that open files cannot fill the budget
    /// with bytes nothing can free but rolling them small. Default: 0 (local files write
    /// their small buffers whenever asked).
    fn open_file_held_bytes_max(&self) -> u64 {
        0
    }

    /// Starts a new, empty in-progress part file at `location`. Fails with
    /// [`crate::Error::Conflict`] if the in-progress name exists already.
    async fn create(&self, location: &PartLocation) -> Result<Box<dyn PartWriter>>;

    /// Starts new, empty in-progress part files at `locations` ([`Parts::create`] for each),
    /// returned in order; the first failure is returned, and files created before it are
    /// ordinary in-progress leftovers (a restore or `abort` removes them).
    ///
    /// The first batch after a checkpoint opens a file in every bucket it touches. The default
    /// runs [`CREATE_AT_ONCE_MAX`] calls at a time, for stores where each is a round trip
    /// (CreateMultipartUpload); local disk overrides it with one thread that creates them one
    /// after another, because creations in one parent directory serialise on its lock in the
    /// kernel, and threads contending for it made each take ten times longer.
    async fn create_all(&self, locations: Vec<PartLocation>) -> Result<Vec<Box<dyn PartWriter>>> {
        bounded::try_map(locations, CREATE_AT_ONCE_MAX, |location| async move {
            self.create(&location).await
        })
        .await
    }

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

    /// Seals `parts` as [`Parts::seal`] does, as files a pre-commit merge *carries*: sealed
    /// (durable, hidden) under their in-progress names so that [`Listing::read_hidden`] can
    /// read them back (`docs/design/delta.md` section 11). Only parts whose
    /// [`PartWriter::can_carry`] is true. Local disk: [`Parts::seal`] (the default). Object
    /// stores: the whole file as one hidden object written by a plain PUT under its
    /// in-progress name, a [`PendingHandle::Staged`] handle, and the part's multipart upload
    /// (S3) aborted: an upload in progress cannot be read.
    async fn seal_carried(&self, parts: Vec<Box<dyn PartWriter>>) -> Result<Vec<PendingHandle>> {
        self.seal(parts).await
    }

    /// Whether a carried file (sealed by [`Parts::seal_carried`]) can be committed as it
    /// is, under its own final name, without a rewrite: local disk (a rename). The default is
    /// `false`, the answer of object stores, where a hidden object cannot become a final one
    /// without a copy (S3 cannot commit a staged object at all): there a lone carried file due
    /// for commit is rewritten as a merge of one file.
    fn commits_carried_in_place(&self) -> bool {
        false
    }

    /// Makes everything written to `parts` so far durable (contract 2) while they stay open.
    /// Backends that cannot resume a part answer [`crate::Error::NotSupported`].
    async fn persist(&self, parts: &mut [&mut Box<dyn PartWriter>]) -> Result<()>;

    /// Commits each committable (contracts 3 and 4); one result per committable, in order. A
    /// failure of one does not stop the others.
    async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>>;

    /// Where `committable` stands, without changing anything: the dry run of
    /// [`Parts::commit`], with the same proof for "already committed".
    async fn probe(&self, committable: &Committable) -> Result<CommitState>;
}

/// Metadata objects under `_filesink/` and `_delta_log/`: written once without replacing,
/// read, listed, deleted (the manifests, the ledger, a Delta log).
#[async_trait]
pub trait MetadataStore: Send + Sync + Debug {
    /// Writes a small metadata object (a checkpoint manifest, a Delta log entry) at `path`:
    /// atomically (a reader sees all of it or nothing), durably (when this returns it survives
    /// a crash), and without replacing: an existing object is [`crate::Error::Conflict`].
    /// Whether a put by another writer *at the same moment* is refused too is
    /// [`MetadataStore::refuses_replace`].
    ///
    /// Metadata paths: every metadata method takes paths relative to the base inside the
    /// metadata namespace, `_filesink/` (the protocol's) and `_delta_log/` (a Delta table's
    /// log, `docs/design/delta.md` section 2), and refuses any other path
    /// ([`crate::protocol::validate_metadata_path`]: no `..`, `.` or empty component, nothing
    /// absolute, no NUL or backslash) with [`crate::Error::InvalidInput`], before any I/O. So
    /// no metadata call can write, replace, read or delete a data file or a part file.
    async fn put_metadata(&self, path: &str, bytes: &[u8]) -> Result<()>;

    /// Whether [`MetadataStore::put_metadata`] refuses to replace an object that another writer put
    /// at the same moment, so that of two writers racing for one name exactly one succeeds
    /// and the other gets [`crate::Error::Conflict`]. `true` on local disk
    /// (`renameat2(RENAME_NOREPLACE)`, or `link` + `unlink`) and on object stores whose
    /// capability probe found conditional puts honoured (`If-None-Match: *`, object_store's
    /// `PutMode::Create`); `false` where the store ignores them (Garage): there a put is a
    /// check before and a read-back after, which narrows a race but cannot decide it, and a
    /// log shared by several writers needs another guard (`docs/design/delta.md` section 6).
    /// A backend that cannot tell answers `false`. Asked once per table writer: the probe
    /// behind it runs once per storage object.
    async fn refuses_replace(&self) -> Result<bool>;

    /// Writes the metadata object at `path`, replacing the one there if any: atomically (a
    /// reader sees the old bytes or the new ones, never a mix, never nothing once one exists)
    /// and durably (when this returns the new bytes survive a crash). For objects that are
    /// pointers, not records: a Delta table's `_delta_log/_last_checkpoint`, the only caller
    /// (`docs/design/delta.md` section 8). Local disk: temporary file, fsync, `rename` over
    /// the old name, directory fsync; object stores: a plain PUT. Refuses paths under
    /// `_filesink/` ([`crate::Error::InvalidInput`]): the protocol's own metadata is written
    /// once and never replaced.
    async fn replace_metadata(&self, path: &str, bytes: &[u8]) -> Result<()>;

    /// Reads a metadata object; `None` if it does not exist. What it returns is durable: a
    /// process that died after writing an object but before making it durable may leave it
    /// readable, and a restarted process acts on what it reads, so a backend with a cache that
    /// a crash can lose flushes the object's name before returning it.
    async fn get_metadata(&self, path: &str) -> Result<Option<Vec<u8>>>;

    /// Lists the metadata objects directly in the directory `dir` (names only, any order);
    /// empty if the directory does not exist.
    async fn list_metadata(&self, dir: &str) -> Result<Vec<MetadataEntry>>;

    /// Lists the metadata objects (not directories) directly in the directory `dir` whose
    /// names sort after `after`, in ascending byte order of their names: the tail of a Delta
    /// log past a known version without listing the versions before it
    /// (`docs/design/delta.md` section 5). `after` is a file name (no `/`); empty lists the
    /// whole directory. Names starting with `.` (temporary files of unfinished writes) are
    /// left out. Empty if the directory does not exist. Object stores list from `after` on
    /// (S3's `start-after`), so the cost is in the names after it; local disk reads the
    /// directory and filters. Names only: a caller that acts on an object reads it with
    /// [`MetadataStore::get_metadata`], which makes it durable.
    async fn list_metadata_from(&self, dir: &str, after: &str) -> Result<Vec<MetadataEntry>>;

    /// Deletes a metadata object; deleting one that is gone succeeds.
    async fn delete_metadata(&self, path: &str) -> Result<()>;

    /// Removes metadata directory `dir` if it is empty; one that is gone, or holds anything,
    /// stays as it is. Object stores have no directories: nothing to do.
    async fn remove_empty_metadata_dir(&self, dir: &str) -> Result<()> {
        let _ = dir;
        Ok(())
    }

    /// Whether a metadata write can leave a temporary file behind when its process dies
    /// ([`crate::protocol::metadata_temp_name`]): on local disk a write fills a temporary file
    /// and renames it; an object store's PUT leaves nothing. Cleanup lists the metadata
    /// directories for such files only where this is `true` ([`crate::lake::Lake::metadata_temps`]).
    fn leaves_metadata_temps(&self) -> bool {
        false
    }
}

/// Who runs a job: one live run per job (a kernel lock on local disk, a renewed claim on object
/// stores), and the Delta single-writer claim.
#[async_trait]
pub trait Leases: Send + Sync + Debug {
    /// Takes the ownership of `job` for this run ([`ownership`]), without waiting: if another
    /// live run holds it, [`crate::Error::JobBusy`] naming that run, and nothing changed.
    async fn acquire_job(&self, job: &str, options: &LeaseOptions) -> Result<Box<dyn JobLease>>;

    /// Who holds `job` right now, without taking it (for listings); `None` if no live run
    /// does.
    async fn job_holder(&self, job: &str) -> Result<Option<String>>;

    /// Takes the single-writer claim of the Delta table at the base, for a writer that runs
    /// alone on a store whose metadata puts cannot refuse to replace
    /// ([`MetadataStore::refuses_replace`] is `false`): a second such writer is refused with
    /// [`crate::Error::JobBusy`] while the claim lives (`docs/design/delta.md` section 6).
    /// Stores that refuse to replace need no claim: the default holds nothing.
    async fn acquire_table_writer(&self, options: &LeaseOptions) -> Result<Box<dyn JobLease>> {
        let _ = options;
        Ok(Box::new(ownership::External))
    }
}

/// What the base holds besides metadata: hidden leftovers and visible files, read and removed
/// by cleanup, compaction and vacuum (contract point 5).
#[async_trait]
pub trait Listing: Send + Sync + Debug {
    /// Lists the hidden part files under the base location, and the names that only look like
    /// one ([`Leftover::name`] `None`), in any order; nothing inside another sink's base
    /// (contract 5).
    async fn list_leftovers(&self) -> Result<Vec<Leftover>>;

    /// The leftovers a writer that carries no files can leave: [`Listing::list_leftovers`],
    /// except that a backend may leave out the hidden objects that only a pre-commit merge
    /// writes ([`Parts::seal_carried`]) where finding them costs a listing of every object
    /// under the base: on S3, whose part files are multipart uploads, this lists the uploads
    /// only. A writer restore uses it when its sink has no merge policy and its state carries
    /// no files. The default lists everything.
    async fn list_leftovers_uncarried(&self) -> Result<Vec<Leftover>> {
        self.list_leftovers().await
    }

    /// Removes one hidden part file. Refuses any path that is not a part name of the exact
    /// shape filesink writes ([`PartName`]). Removing a file that is already gone succeeds.
    async fn remove_leftover(&self, path: &str) -> Result<()>;

    /// Reads a committed data file whole, under its final name `path` (relative to the base):
    /// a compaction round's input (`docs/design/delta.md` section 9). Any visible file may be
    /// read, another writer's too (a Delta table's files need not be filesink's), but only a
    /// visible one: a path with a component starting with `.` or `_` (metadata, hidden part
    /// files) is [`crate::Error::InvalidInput`] ([`crate::protocol::validate_visible_path`]).
    /// A file that does not exist is [`crate::Error::DataLost`]: the caller read its name from
    /// somewhere that promised it (a live `add` of the log).
    async fn read_data_file(&self, path: &str) -> Result<Bytes>;

    /// Removes a committed part file of the exact shape filesink writes, under its final name
    /// `path`, durably (when this returns the name stays gone after a crash): the outputs of
    /// an abandoned compaction round and the files vacuum expires (`docs/design/delta.md`
    /// sections 9 and 10). Refuses, with [`crate::Error::InvalidInput`] and before any I/O,
    /// every path whose file name is not a final [`PartName`] or that has a component starting
    /// with `.` or `_` (never a hidden part file, never anything in `_filesink/` or
    /// `_delta_log/`; [`crate::protocol::validate_final_part_path`]). Which part names are
    /// this sink's own (its jobs, prefixes and suffixes) is the caller's rule
    /// (`job::OwnNames`), as for [`Listing::remove_leftover`]. Removing a file that is
    /// already gone succeeds.
    async fn remove_data_file(&self, path: &str) -> Result<()>;

    /// Reads a hidden part file whole, under its in-progress name `path`: a pending file that
    /// is not committed yet, such as the carried files of a pre-commit merge
    /// (`docs/design/delta.md` section 11). Refuses every path whose file name is not an
    /// in-progress name of the exact shape filesink writes
    /// ([`crate::protocol::validate_hidden_path`]), or that is in a hidden directory, with
    /// [`crate::Error::InvalidInput`]. A file
    /// that does not exist is [`crate::Error::DataLost`]. On S3 only carried objects
    /// ([`Parts::seal_carried`]) have such a name: a multipart upload in progress cannot be
    /// read back.
    async fn read_hidden(&self, path: &str) -> Result<Bytes>;

    /// Lists the visible data files under the base (every name readers see: no component
    /// starting with `.` or `_`), in any order; nothing inside another sink's base.
    async fn list_visible(&self) -> Result<Vec<VisibleFile>>;

    /// The bases of other sinks that this base is inside of (a directory above holding
    /// `_filesink/`, a prefix above holding `_filesink/sink.json`) or that are inside it. A
    /// sink is not created where there is one ([`crate::job::manifest::sink_identity`]):
    /// each sink owns its whole tree. The default finds none (a backend that cannot look
    /// above its base).
    async fn other_sinks(&self) -> Result<OtherSinks> {
        Ok(OtherSinks::default())
    }
}

/// Checks a path for [`MetadataStore::replace_metadata`]: a metadata path outside `_filesink/`,
/// whose objects are written once.
pub(crate) fn validate_replaceable_path(path: &str) -> Result<()> {
    crate::protocol::validate_metadata_path(path).map_err(crate::Error::InvalidInput)?;
    if path.split('/').next() == Some(crate::protocol::METADATA_DIR) {
        return Err(crate::Error::InvalidInput(format!(
            "`{path}` is filesink's own metadata, written once and never replaced"
        )));
    }
    Ok(())
}

/// Checks a path for [`Listing::read_hidden`]: an in-progress part name of the exact shape
/// filesink writes, in a visible directory (a bucket; never `_filesink/`, `_delta_log/` or a
/// hidden directory).
pub(crate) fn validate_hidden_part_path(path: &str) -> Result<()> {
    crate::protocol::validate_hidden_path(path).map_err(crate::Error::InvalidInput)?;
    let dir = crate::protocol::split_rel(path).0;
    if !dir.is_empty() {
        crate::protocol::validate_visible_path(dir).map_err(|_| {
            crate::Error::InvalidInput(format!(
                "`{path}` is in a hidden directory; part files live in visible ones"
            ))
        })?;
    }
    Ok(())
}

/// Checks the name [`MetadataStore::list_metadata_from`] lists after: empty, or one file name.
pub(crate) fn validate_list_start(after: &str) -> Result<()> {
    if after.is_empty() {
        return Ok(());
    }
    crate::protocol::validate_rel_path(after).map_err(crate::Error::InvalidInput)?;
    if after.contains('/') {
        return Err(crate::Error::InvalidInput(format!(
            "`{after}` is not a file name: a listing starts after a name in the directory"
        )));
    }
    Ok(())
}

/// Other sinks around or inside a base ([`Listing::other_sinks`]), as paths or URLs for
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

/// A visible data file found by [`Listing::list_visible`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisibleFile {
    /// Its path relative to the base.
    pub path: String,
    /// Its size.
    pub size_bytes: u64,
    /// Its last modification (local disk) or upload (object stores), in milliseconds since
    /// the Unix epoch: vacuum's age of a file the log has no tombstone for.
    pub modified_ms: i64,
}

/// Where a committable stands ([`Parts::probe`]).
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

/// A metadata object found by [`MetadataStore::list_metadata`].
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
    /// [`Parts::seal`] or [`Parts::persist`], the only callers of this method).
    /// Idempotent: a second call without writes in between changes nothing.
    async fn sync(&mut self) -> Result<()>;

    /// Whether [`Parts::seal_carried`] can seal this part as a carried file, one that can be
    /// read back: true unless bytes of it are already out where they cannot be read (an S3
    /// part uploaded: the file reached the part size). Default: true.
    fn can_carry(&self) -> bool {
        true
    }

    /// Closes the part and returns its handle. Only [`Parts::seal`] calls it, after `sync`.
    async fn close(self: Box<Self>) -> Result<PendingHandle>;

    /// Seals the part as a carried file ([`Parts::seal_carried`]) on its own. Default: as
    /// [`Parts::seal`] would, `sync` then `close` (a local file: a sealed in-progress file).
    /// An object store's part is written whole as one hidden object instead.
    async fn seal_carried(mut self: Box<Self>) -> Result<PendingHandle> {
        self.sync().await?;
        self.close().await
    }

    /// What a group flush of local files needs of this part ([`local::LocalStorage`] seals
    /// and persists its parts together: their buffers written, one flush for all): the file,
    /// and the bytes buffered but not written yet, taken. `None` for a part that is not a
    /// local file. A wrapper hands on its inner part's.
    fn local_file(&mut self) -> Option<local::LocalFile> {
        None
    }
}
