//! Fault injection: a [`Storage`] wrapper that makes the process "die" at a named point.
//!
//! [`FaultyStorage`] passes every call through to the storage it wraps, counting the calls at
//! each [`FaultPoint`]. When the planned occurrence of the planned point comes, it fails that
//! call and every later one, as if the process had been killed right there: a test then drops
//! the writer and the coordinator and restarts on the unwrapped storage. With
//! [`FaultMode::AfterApplied`] the call is carried out first and only its answer is lost
//! ("the store applied the operation but the response was lost", the S3A committers' fault).
//!
//! Every call that changes the store is a fault point; calls that only read
//! ([`Storage::get_metadata`](crate::storage::MetadataStore::get_metadata), [`Storage::list_metadata_from`](crate::storage::MetadataStore::list_metadata_from), [`Storage::read_data_file`](crate::storage::Listing::read_data_file),
//! [`Storage::read_hidden`](crate::storage::Listing::read_hidden), [`Storage::refuses_replace`](crate::storage::MetadataStore::refuses_replace), …) pass through while the process is
//! alive and fail once it is dead: a crash at a read leaves the store as a crash before the
//! next change does, so it needs no point of its own.
//!
//! Nothing here is on the hot path of a sink that does not use it.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{
    CommitState, Leases, Leftover, Listing, MetadataEntry, MetadataStore, PartLocation, PartWriter,
    Parts, Storage, VisibleFile,
};
use crate::protocol::{CommitOutcome, Committable, PendingHandle};
use crate::{Error, Result};

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FaultPoint {
    /// Creating an in-progress file (local) or multipart upload (S3).
    Create,
    /// Appending bytes to a part.
    Write,
    /// Making a part's bytes durable (file fsync; last part upload).
    SyncFile,
    /// Sealing parts at the vote, after the files are synced (directory fsyncs).
    Seal,
    /// Persisting open row files at the vote.
    Persist,
    /// Resuming a row file at restore.
    Resume,
    /// A commit call, before anything is committed.
    Commit,
    /// A commit call after the first half of its committables (a crash between two renames
    /// or two completes).
    CommitHalfway,
    /// Writing a manifest (the completion point), or another metadata object under
    /// `_filesink/`.
    PutManifest,
    /// Writing a Delta log entry (`_delta_log/<version>.json`), after the checkpoint's files
    /// are committed.
    PutLogEntry,
    /// Listing leftovers at restore.
    ListLeftovers,
    /// Removing a leftover at restore or abort.
    RemoveLeftover,
    /// Replacing a metadata object ([`Storage::replace_metadata`](crate::storage::MetadataStore::replace_metadata)): a Delta table's
    /// `_delta_log/_last_checkpoint`, the only object ever replaced.
    ReplaceLastCheckpoint,
    /// Removing a committed data file ([`Storage::remove_data_file`](crate::storage::Listing::remove_data_file)): an abandoned
    /// compaction round's output, or a file vacuum expires.
    RemoveDataFile,
    /// Reading a hidden part file back ([`Storage::read_hidden`](crate::storage::Listing::read_hidden)): a carried file of a
    /// pre-commit merge, at the vote that merges it.
    ReadHidden,
}

impl FaultPoint {
    /// Every fault point.
    pub const ALL: &'static [FaultPoint] = &[
        FaultPoint::Create,
        FaultPoint::Write,
        FaultPoint::SyncFile,
        FaultPoint::Seal,
        FaultPoint::Persist,
        FaultPoint::Resume,
        FaultPoint::Commit,
        FaultPoint::CommitHalfway,
        FaultPoint::PutManifest,
        FaultPoint::PutLogEntry,
        FaultPoint::ListLeftovers,
        FaultPoint::RemoveLeftover,
        FaultPoint::ReplaceLastCheckpoint,
        FaultPoint::RemoveDataFile,
        FaultPoint::ReadHidden,
    ];
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Whether the faulty call is carried out before the "crash".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// The process dies before the call reaches the store.
    Before,
    /// The store applies the call; the process dies before it hears the answer.
    AfterApplied,
    /// Not a crash: the call fails with a retryable error at `times` visits in a row, from
    /// the planned occurrence on (applied by the store first if `applied`: the answer was
    /// lost), and the process lives on; later visits pass. For the paths that retry or defer.
    Transient {
        /// How many visits in a row fail.
        times: usize,
        /// Whether the store applied each failing call.
        applied: bool,
    },
}

/// Which occurrence of which point fails, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// The point.
    pub point: FaultPoint,
    /// The occurrence, from 1.
    pub occurrence: usize,
    /// Before or after the call is applied.
    pub mode: FaultMode,
}

/// A [`Storage`] that fails at a planned point and is dead from then on.
#[derive(Debug, Clone)]
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    state: Arc<FaultState>,
}

#[derive(Debug)]
struct FaultState {
    plan: Option<FaultPlan>,
    counts: Mutex<std::collections::BTreeMap<FaultPoint, usize>>,
    dead: AtomicBool,
    fired: AtomicUsize,
    /// How long each `create` takes at least (a store's round trip).
    create_latency: Mutex<Option<std::time::Duration>>,
    creates_in_flight: AtomicUsize,
    creates_in_flight_max: AtomicUsize,
}

impl FaultyStorage {
    /// Wraps `inner`; with `plan` `None` it only counts.
    pub fn new(inner: Arc<dyn Storage>, plan: Option<FaultPlan>) -> Self {
        FaultyStorage {
            inner,
            state: Arc::new(FaultState {
                plan,
                counts: Mutex::new(Default::default()),
                dead: AtomicBool::new(false),
                fired: AtomicUsize::new(0),
                create_latency: Mutex::new(None),
                creates_in_flight: AtomicUsize::new(0),
                creates_in_flight_max: AtomicUsize::new(0),
            }),
        }
    }

    /// How often each point was reached.
    pub fn counts(&self) -> std::collections::BTreeMap<FaultPoint, usize> {
        self.state.counts.lock().unwrap().clone()
    }

    /// Makes every `create` take at least `latency`, as a store's round trip does, so that a
    /// test can see how many the caller runs at once ([`FaultyStorage::creates_in_flight_max`]).
    pub fn with_create_latency(self, latency: std::time::Duration) -> Self {
        *self.state.create_latency.lock().unwrap() = Some(latency);
        self
    }

    /// The most `create` calls that were under way at the same time.
    pub fn creates_in_flight_max(&self) -> usize {
        self.state.creates_in_flight_max.load(Ordering::SeqCst)
    }

    /// Whether the planned fault fired.
    pub fn fired(&self) -> bool {
        self.state.fired.load(Ordering::SeqCst) > 0
    }
}

impl FaultState {
    /// Counts a visit to `point`. `Err` if the process is dead already; `Ok(true)` if the
    /// planned fault fires at this visit (the process is dead from now on).
    fn visit(&self, point: FaultPoint) -> Result<bool> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(crashed(point));
        }
        let n = {
            let mut counts = self.counts.lock().unwrap();
            let n = counts.entry(point).or_insert(0);
            *n += 1;
            *n
        };
        let fires = self.plan.is_some_and(|plan| {
            plan.point == point
                && match plan.mode {
                    FaultMode::Transient { times, .. } => {
                        (plan.occurrence..plan.occurrence + times).contains(&n)
                    }
                    _ => plan.occurrence == n,
                }
        });
        if fires {
            if !self.transient() {
                self.dead.store(true, Ordering::SeqCst);
            }
            self.fired.fetch_add(1, Ordering::SeqCst);
        }
        Ok(fires)
    }

    fn transient(&self) -> bool {
        self.plan
            .is_some_and(|p| matches!(p.mode, FaultMode::Transient { .. }))
    }

    fn applies_before_dying(&self) -> bool {
        self.plan.is_some_and(|p| match p.mode {
            FaultMode::Before => false,
            FaultMode::AfterApplied => true,
            FaultMode::Transient { applied, .. } => applied,
        })
    }

    /// The error of a fault that fired at `point`.
    fn fault(&self, point: FaultPoint) -> Error {
        if self.transient() {
            return Error::io(
                "reach the store (injected transient failure)",
                format!("fault point {point}"),
                std::io::Error::other("the store did not answer"),
            );
        }
        crashed(point)
    }

    fn check_alive(&self, point: FaultPoint) -> Result<()> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(crashed(point));
        }
        Ok(())
    }
}

fn crashed(point: FaultPoint) -> Error {
    Error::io(
        "reach the store (injected crash)",
        format!("fault point {point}"),
        std::io::Error::other("the process is dead"),
    )
}

/// Runs `call` under the fault at `point`: not at all if the fault fires before it, or with
/// its answer replaced by the crash if it fires after.
macro_rules! guarded {
    ($state:expr, $point:expr, $call:expr) => {{
        if $state.visit($point)? {
            if $state.applies_before_dying() {
                let _ = $call;
            }
            Err($state.fault($point))
        } else {
            $call
        }
    }};
}

#[async_trait]
impl Storage for FaultyStorage {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn place(&self) -> String {
        self.inner.place()
    }
}

#[async_trait]
impl Parts for FaultyStorage {
    fn can_resume(&self) -> bool {
        self.inner.can_resume()
    }

    fn path_bytes_max(&self) -> Option<usize> {
        self.inner.path_bytes_max()
    }

    fn open_file_held_bytes_max(&self) -> u64 {
        self.inner.open_file_held_bytes_max()
    }

    async fn create(&self, location: &PartLocation) -> Result<Box<dyn PartWriter>> {
        let s = &self.state;
        let now = s.creates_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        s.creates_in_flight_max.fetch_max(now, Ordering::SeqCst);
        let latency = *s.create_latency.lock().unwrap();
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        let part = guarded!(
            self.state,
            FaultPoint::Create,
            self.inner.create(location).await
        );
        s.creates_in_flight.fetch_sub(1, Ordering::SeqCst);
        let part = part?;
        Ok(Box::new(FaultyPart {
            inner: part,
            state: self.state.clone(),
            synced: false,
        }))
    }

    async fn resume(
        &self,
        from: &str,
        len: u64,
        crc: u32,
        location: &PartLocation,
    ) -> Result<Box<dyn PartWriter>> {
        let part = guarded!(
            self.state,
            FaultPoint::Resume,
            self.inner.resume(from, len, crc, location).await
        )?;
        Ok(Box::new(FaultyPart {
            inner: part,
            state: self.state.clone(),
            synced: false,
        }))
    }

    // The backend takes the wrapped parts as its own: each hands on what the backend asks of
    // it (its `sync`, `close`, `seal_carried`, local file) to the part inside.
    async fn seal(&self, mut parts: Vec<Box<dyn PartWriter>>) -> Result<Vec<PendingHandle>> {
        for part in &mut parts {
            // The file fsyncs of the vote, one visit per file (`FaultyPart::sync`).
            part.sync().await?;
        }
        guarded!(self.state, FaultPoint::Seal, self.inner.seal(parts).await)
    }

    async fn seal_carried(&self, parts: Vec<Box<dyn PartWriter>>) -> Result<Vec<PendingHandle>> {
        for _ in &parts {
            // One visit per file, as at `seal`; the durable write itself is the backend's
            // (a synced S3 part would be an uploaded part, which cannot be carried).
            guarded!(self.state, FaultPoint::SyncFile, Ok::<(), Error>(()))?;
        }
        guarded!(
            self.state,
            FaultPoint::Seal,
            self.inner.seal_carried(parts).await
        )
    }

    fn commits_carried_in_place(&self) -> bool {
        self.inner.commits_carried_in_place()
    }

    async fn persist(&self, parts: &mut [&mut Box<dyn PartWriter>]) -> Result<()> {
        guarded!(
            self.state,
            FaultPoint::Persist,
            self.inner.persist(parts).await
        )
    }

    async fn commit(&self, committables: &[Committable]) -> Vec<Result<CommitOutcome>> {
        let dead = |n: usize| {
            (0..n)
                .map(|_| Err(self.state.fault(FaultPoint::Commit)))
                .collect()
        };
        match self.state.visit(FaultPoint::Commit) {
            Err(_) => return dead(committables.len()),
            Ok(true) => {
                if self.state.applies_before_dying() {
                    let _ = self.inner.commit(committables).await;
                }
                return dead(committables.len());
            }
            Ok(false) => {}
        }
        if committables.len() >= 2 {
            match self.state.visit(FaultPoint::CommitHalfway) {
                Err(_) => return dead(committables.len()),
                Ok(true) => {
                    let _ = self
                        .inner
                        .commit(&committables[..committables.len() / 2])
                        .await;
                    return dead(committables.len());
                }
                Ok(false) => {}
            }
        }
        self.inner.commit(committables).await
    }

    async fn probe(&self, committable: &Committable) -> Result<CommitState> {
        self.state.check_alive(FaultPoint::Commit)?;
        self.inner.probe(committable).await
    }
}

#[async_trait]
impl MetadataStore for FaultyStorage {
    fn leaves_metadata_temps(&self) -> bool {
        self.inner.leaves_metadata_temps()
    }

    async fn put_metadata(&self, path: &str, bytes: &[u8]) -> Result<()> {
        let point = if path.starts_with("_delta_log/") {
            FaultPoint::PutLogEntry
        } else {
            FaultPoint::PutManifest
        };
        guarded!(
            self.state,
            point,
            self.inner.put_metadata(path, bytes).await
        )
    }

    async fn refuses_replace(&self) -> Result<bool> {
        self.state.check_alive(FaultPoint::PutManifest)?;
        self.inner.refuses_replace().await
    }

    async fn replace_metadata(&self, path: &str, bytes: &[u8]) -> Result<()> {
        guarded!(
            self.state,
            FaultPoint::ReplaceLastCheckpoint,
            self.inner.replace_metadata(path, bytes).await
        )
    }

    async fn get_metadata(&self, path: &str) -> Result<Option<Vec<u8>>> {
        self.state.check_alive(FaultPoint::PutManifest)?;
        self.inner.get_metadata(path).await
    }

    async fn list_metadata_from(&self, dir: &str, after: &str) -> Result<Vec<MetadataEntry>> {
        self.state.check_alive(FaultPoint::PutManifest)?;
        self.inner.list_metadata_from(dir, after).await
    }

    async fn list_metadata(&self, dir: &str) -> Result<Vec<MetadataEntry>> {
        self.state.check_alive(FaultPoint::PutManifest)?;
        self.inner.list_metadata(dir).await
    }

    async fn delete_metadata(&self, path: &str) -> Result<()> {
        self.state.check_alive(FaultPoint::PutManifest)?;
        self.inner.delete_metadata(path).await
    }
}

#[async_trait]
impl Leases for FaultyStorage {
    async fn acquire_job(
        &self,
        job: &str,
        options: &super::LeaseOptions,
    ) -> Result<Box<dyn super::JobLease>> {
        self.inner.acquire_job(job, options).await
    }

    async fn job_holder(&self, job: &str) -> Result<Option<String>> {
        self.inner.job_holder(job).await
    }

    async fn acquire_table_writer(
        &self,
        options: &super::LeaseOptions,
    ) -> Result<Box<dyn super::JobLease>> {
        self.inner.acquire_table_writer(options).await
    }
}

#[async_trait]
impl Listing for FaultyStorage {
    async fn list_leftovers(&self) -> Result<Vec<Leftover>> {
        guarded!(
            self.state,
            FaultPoint::ListLeftovers,
            self.inner.list_leftovers().await
        )
    }

    async fn list_leftovers_uncarried(&self) -> Result<Vec<Leftover>> {
        guarded!(
            self.state,
            FaultPoint::ListLeftovers,
            self.inner.list_leftovers_uncarried().await
        )
    }

    async fn remove_leftover(&self, path: &str) -> Result<()> {
        guarded!(
            self.state,
            FaultPoint::RemoveLeftover,
            self.inner.remove_leftover(path).await
        )
    }

    async fn read_data_file(&self, path: &str) -> Result<bytes::Bytes> {
        self.state.check_alive(FaultPoint::RemoveDataFile)?;
        self.inner.read_data_file(path).await
    }

    async fn remove_data_file(&self, path: &str) -> Result<()> {
        guarded!(
            self.state,
            FaultPoint::RemoveDataFile,
            self.inner.remove_data_file(path).await
        )
    }

    async fn read_hidden(&self, path: &str) -> Result<bytes::Bytes> {
        guarded!(
            self.state,
            FaultPoint::ReadHidden,
            self.inner.read_hidden(path).await
        )
    }

    async fn list_visible(&self) -> Result<Vec<VisibleFile>> {
        self.state.check_alive(FaultPoint::ListLeftovers)?;
        self.inner.list_visible().await
    }

    async fn other_sinks(&self) -> Result<super::OtherSinks> {
        self.state.check_alive(FaultPoint::ListLeftovers)?;
        self.inner.other_sinks().await
    }
}

#[derive(Debug)]
struct FaultyPart {
    inner: Box<dyn PartWriter>,
    state: Arc<FaultState>,
    /// Synced, and nothing written since: a second `sync` (the backend's own, in a `seal`
    /// after the wrapper's) changes nothing and is not another visit.
    synced: bool,
}

#[async_trait]
impl PartWriter for FaultyPart {
    fn location(&self) -> &PartLocation {
        self.inner.location()
    }

    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }

    fn memory_bytes(&self) -> u64 {
        self.inner.memory_bytes()
    }

    async fn release_memory(&mut self) -> Result<()> {
        guarded!(
            self.state,
            FaultPoint::Write,
            self.inner.release_memory().await
        )
    }

    async fn write(&mut self, data: &[u8]) -> Result<()> {
        self.synced = false;
        guarded!(self.state, FaultPoint::Write, self.inner.write(data).await)
    }

    async fn sync(&mut self) -> Result<()> {
        if self.synced {
            return self.inner.sync().await;
        }
        guarded!(self.state, FaultPoint::SyncFile, self.inner.sync().await)?;
        self.synced = true;
        Ok(())
    }

    fn can_carry(&self) -> bool {
        self.inner.can_carry()
    }

    async fn close(self: Box<Self>) -> Result<PendingHandle> {
        self.inner.close().await
    }

    async fn seal_carried(self: Box<Self>) -> Result<PendingHandle> {
        self.inner.seal_carried().await
    }

    fn local_file(&mut self) -> Option<super::local::LocalFile> {
        self.inner.local_file()
    }
}
