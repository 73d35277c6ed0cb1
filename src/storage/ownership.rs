//! Job ownership: one live run per job.
//!
//! Two runs of one job at once (a cron job that overlaps itself, an operator who restarts a run
//! that is not dead) would both restore from the same manifest, and each one's restore removes
//! the hidden files the other is writing and is about to promise in its next manifest. So a
//! [`crate::Coordinator`] owns its job for as long as it runs: [`crate::storage::Leases::acquire_job`]
//! before it touches anything, [`JobLease::check`] before every manifest write, release when
//! it stops. A second run is refused at once with [`Error::JobBusy`], before it changes
//! anything. `filesink abort` and `filesink commit` take the same ownership before they act on
//! a job, so they never clean up under a live run.
//!
//! # What each store guarantees
//!
//! | store | ownership | a second run | a run that lost ownership (paused, partitioned) |
//! |---|---|---|---|
//! | local disk | an open-file-description lock on `_filesink/jobs/<job>/owner.lock`, released by the kernel when the process dies | refused at once | cannot happen: the lock lives as long as the process |
//! | object store with conditional puts (AWS S3, Ceph, in-memory) | claims (below) | refused at once | its next manifest write fails: the manifest is put-if-absent |
//! | object store without conditional puts (Garage) | claims (below) | refused at once | its next check fails; a run paused for longer than half the lease between its check and its manifest write can still write one manifest |
//!
//! After a crash the kernel lock is free at once; a claim blocks the job until it expires (the
//! lease's time to live, [`LeaseOptions::ttl`]), unless its process is provably gone: a claim
//! records the identity of its process (boot id, PID namespace, pid, start time), and a run on
//! the same machine, under the same boot and in the same PID namespace, that finds that pid
//! free or taken by a process started at another time takes the claim over at once. Anything
//! it cannot see (another machine, a container's own PID namespace) waits for the expiry; the
//! refusal then says whose claim it is and when it expires.
//!
//! # Claims on object stores
//!
//! A run claims a job by writing its own object `_filesink/jobs/<job>/owners/<run>.<ttl ms>`
//! and then listing the claims. A claim is live if its last modification plus its time to live
//! (plus one second for the stores' timestamp resolution) is not before the modification of
//! the claim just written: both times come from the store's clock, never from a client's.
//!
//! - **Acquire**: write the claim, list. Another live claim → delete ours, refuse. Of two runs
//!   that claim at the same moment at most one sees no other: if A's listing missed B's claim,
//!   that listing came before B's write, so B's listing (after its write) sees A's. Both may
//!   see each other; then both are refused and nothing changed. No timing is involved, only a
//!   store that lists every write completed before the listing started (AWS S3, Ceph and
//!   Garage do).
//! - **Renew**: the owner rewrites its claim every third of the time to live. While its last
//!   renewal was sent less than half the time to live ago, no other run can have seen its
//!   claim expired, so nobody else can own the job: the owner's check needs no listing.
//! - **Check** (before a manifest write): a fresh lease passes; an older one (the process was
//!   paused, the store unreachable) claims again like a newcomer, and if another live claim
//!   exists the job is lost: [`Error::JobBusy`], and the run stops without writing.
//! - **Release**: delete the claim. A process that dies without releasing leaves its claim,
//!   which expires after its time to live; the next run then takes the job over and removes
//!   the expired claim.
//!
//! The only timing assumption is that the owner's clock and the store's run at the same
//! rate; it matters only for a run paused between a passed check and its manifest write for
//! longer than half the time to live. Where the store honours conditional puts even that run
//! cannot complete a checkpoint (its manifest exists already); where it does not (Garage), it
//! is the deployment's duty not to pause a run that long (or to give it a longer lease).

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::protocol::owners_dir;
use crate::{Error, Result};

/// How a run holds its job on a store where ownership expires (object stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseOptions {
    /// How long a claim stays live without renewal: how long a crashed run blocks its job on
    /// an object store. Local disk ignores it (the kernel releases the lock at once).
    pub ttl: Duration,
}

impl LeaseOptions {
    /// Default [`LeaseOptions::ttl`].
    pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
    /// The shortest [`LeaseOptions::ttl`] accepted.
    pub const MIN_TTL: Duration = Duration::from_secs(1);
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            ttl: Self::DEFAULT_TTL,
        }
    }
}

/// A job held by this run ([`crate::storage::Leases::acquire_job`]). Dropping it releases
/// the job (on object stores in the background; [`JobLease::release`] waits for it).
#[async_trait]
pub trait JobLease: Send + Sync + Debug {
    /// Whether this run still owns the job; [`Error::JobBusy`] if it lost it. Called before
    /// every manifest write.
    async fn check(&self) -> Result<()>;

    /// Gives the job up and waits until another run can take it.
    async fn release(self: Box<Self>) -> Result<()>;
}

/// A lease that holds nothing: the caller guarantees one live run per job by other means
/// (a scheduler, a leader election).
#[derive(Debug)]
pub(crate) struct External;

#[async_trait]
impl JobLease for External {
    async fn check(&self) -> Result<()> {
        Ok(())
    }

    async fn release(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// What a run writes about itself where it holds a job: for the message of a refused run.
pub(crate) fn describe_self() -> String {
    format!(
        "{}, since {}",
        self_prefix(),
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC")
    )
}

/// `pid <pid> on `<host>``: the part of [`describe_self`] that names this process.
fn self_prefix() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!(
        "pid {} on `{}`",
        std::process::id(),
        if host.is_empty() { "?" } else { &host }
    )
}

/// What tells one process apart from every other on one machine: the kernel's boot, the PID
/// namespace, the pid, and the process's start time (in clock ticks since boot, so a pid used
/// again by a later process has another). Written on a second line of a claim's body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct ProcessIdentity {
    boot_id: String,
    pid_ns: String,
    pid: u32,
    start_ticks: u64,
}

impl ProcessIdentity {
    /// This process's, where `/proc` tells it (Linux).
    fn of_self() -> Option<ProcessIdentity> {
        let pid = std::process::id();
        Some(ProcessIdentity {
            boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()?
                .trim()
                .to_owned(),
            pid_ns: std::fs::read_link("/proc/self/ns/pid")
                .ok()?
                .to_string_lossy()
                .into_owned(),
            pid,
            start_ticks: start_ticks(pid)?,
        })
    }

    /// Whether the process is certainly gone: it ran under this kernel's boot and in this PID
    /// namespace (so its pid means here what it meant there), and that pid is free now or
    /// names a process started at another time. Anything this process cannot see (another
    /// machine, another boot, a container's own PID namespace) is not proof.
    fn is_gone(&self) -> bool {
        let Some(me) = ProcessIdentity::of_self() else {
            return false;
        };
        if self.boot_id.is_empty() || self.boot_id != me.boot_id || self.pid_ns != me.pid_ns {
            return false;
        }
        if self.pid == me.pid {
            return self.start_ticks != me.start_ticks;
        }
        start_ticks(self.pid) != Some(self.start_ticks)
    }
}

/// The start time of process `pid` in clock ticks since boot (field 22 of its `stat`); `None`
/// if there is no such process.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The body of this process's claim: [`describe_self`], and on a second line its
/// [`ProcessIdentity`] as JSON, for runs on this machine to tell whether it is gone.
fn claim_body() -> String {
    match ProcessIdentity::of_self() {
        Some(id) => format!(
            "{}\n{}",
            describe_self(),
            serde_json::to_string(&id).expect("encodes")
        ),
        None => describe_self(),
    }
}

/// A claim's body, split into its description and the identity of its process, if it has one.
fn parse_body(body: &str) -> (&str, Option<ProcessIdentity>) {
    match body.split_once('\n') {
        Some((text, id)) => (text, serde_json::from_str(id).ok()),
        None => (body, None),
    }
}

/// Whether a holder's description ([`describe_self`]) names this process.
pub(crate) fn describes_self(holder: &str) -> bool {
    holder.starts_with(&format!("{},", self_prefix()))
}

/// Slack for the stores' timestamp resolution (S3 listings give milliseconds, some stores
/// seconds).
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// Releases started by dropped leases and not yet ended, so that a run started next in the
/// same process waits for them instead of finding the claim live (a dropped coordinator is a
/// finished run). Each waiter waits for every release started before it, whoever else waits
/// for it too: two waiters never split the releases between them.
static RELEASES: Mutex<Releases> = Mutex::new(Releases {
    next: 0,
    pending: std::collections::BTreeMap::new(),
});

/// Told when a release ends.
static RELEASED: tokio::sync::Notify = tokio::sync::Notify::const_new();

struct Releases {
    /// The number of the next release.
    next: u64,
    /// The releases not yet ended, by number: the store location of each.
    pending: std::collections::BTreeMap<u64, String>,
}

/// A release's entry in [`RELEASES`], removed when its task ends however it ends (done, or
/// dropped with its runtime).
struct Pending(u64);

impl Drop for Pending {
    fn drop(&mut self) {
        RELEASES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pending
            .remove(&self.0);
        RELEASED.notify_waiters();
    }
}

/// Runs `release` (of a claim at `where_`) on `rt` in the background, registered in
/// [`RELEASES`] until it ends.
fn start_release(
    rt: &tokio::runtime::Handle,
    where_: String,
    release: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let pending = {
        let mut r = RELEASES.lock().unwrap_or_else(|e| e.into_inner());
        let id = r.next;
        r.next += 1;
        r.pending.insert(id, where_);
        Pending(id)
    };
    rt.spawn(async move {
        let _pending = pending;
        release.await;
    });
}

/// Waits until every release started before this call whose location `matches` has ended.
async fn wait_for(matches: impl Fn(&str) -> bool) {
    let upto = RELEASES.lock().unwrap_or_else(|e| e.into_inner()).next;
    loop {
        let ended = RELEASED.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        let waiting = RELEASES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pending
            .range(..upto)
            .any(|(_, w)| matches(w));
        if !waiting {
            return;
        }
        ended.await;
    }
}

/// A claim on an object store (see the [module documentation](self)).
#[derive(Debug)]
pub(crate) struct Claim {
    shared: Arc<ClaimShared>,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct ClaimShared {
    store: Arc<dyn ObjectStore>,
    job: String,
    /// `<base>/_filesink/jobs/<job>/owners`
    dir: Path,
    key: Path,
    ttl: Duration,
    body: String,
    /// When the last successful write of the claim was sent (local monotonic clock).
    renewed: Mutex<Option<Instant>>,
    /// Set once another run took the job: every later check fails.
    lost: Mutex<Option<String>>,
    /// One renewal at a time: the renewer and a check must not claim concurrently (one's
    /// removal of the claim after losing would look like a vanished claim to the other).
    renewing: tokio::sync::Mutex<()>,
    /// The URL of the store location, for messages and the release registry.
    where_: String,
}

impl Claim {
    /// Claims `job` on `store` under `base` (the sink's prefix, empty for the root).
    #[tracing::instrument(name = "claim", skip_all, fields(job = %job, ttl_s = options.ttl.as_secs()))]
    pub(crate) async fn acquire(
        store: Arc<dyn ObjectStore>,
        base: &str,
        where_: &str,
        job: &str,
        options: &LeaseOptions,
    ) -> Result<Claim> {
        Self::acquire_in(store, base, where_, owners_dir(job), job, options).await
    }

    /// Claims the directory `rel` (under `base`) as [`Claim::acquire`] claims a job's; `name`
    /// names what is claimed in messages. The single writer of a Delta table claims
    /// [`crate::protocol::paths::TABLE_OWNERS_DIR`] this way.
    pub(crate) async fn acquire_in(
        store: Arc<dyn ObjectStore>,
        base: &str,
        where_: &str,
        rel: String,
        job: &str,
        options: &LeaseOptions,
    ) -> Result<Claim> {
        if options.ttl < LeaseOptions::MIN_TTL {
            return Err(Error::Config(format!(
                "a lease must live at least {} s",
                LeaseOptions::MIN_TTL.as_secs()
            )));
        }
        let dir = Path::from(if base.is_empty() {
            rel
        } else {
            format!("{base}/{rel}")
        });
        let run = uuid::Uuid::now_v7().simple().to_string();
        let key = dir
            .clone()
            .join(format!("{run}.{}", options.ttl.as_millis()).as_str());
        let shared = Arc::new(ClaimShared {
            store,
            job: job.to_string(),
            where_: dir_url(where_, base, &dir),
            dir,
            key,
            ttl: options.ttl,
            body: claim_body(),
            renewed: Mutex::new(None),
            lost: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
        });
        wait_for_releases(&shared.where_).await;
        if let Err(e) = shared.claim().await {
            // Whatever failed after our write, our claim must not keep the job from others.
            let _ = shared.store.delete(&shared.key).await;
            return Err(e);
        }
        tracing::debug!(file = %shared.key, "job claimed");
        let renewer = tokio::spawn(renew(Arc::downgrade(&shared)));
        Ok(Claim {
            shared,
            renewer: Some(renewer),
        })
    }

    /// Who holds `job` on `store` now, without claiming it (approximate: it compares the
    /// claims' store times with this machine's clock). `where_` is the URL of `base`, for
    /// messages.
    pub(crate) async fn holder(
        store: &dyn ObjectStore,
        base: &str,
        where_: &str,
        job: &str,
    ) -> Result<Option<String>> {
        let rel = owners_dir(job);
        let dir = Path::from(if base.is_empty() {
            rel
        } else {
            format!("{base}/{rel}")
        });
        let now = chrono::Utc::now();
        let claims = list_claims(store, &dir, &dir_url(where_, base, &dir)).await?;
        for c in claims {
            if c.expires(CLOCK_SLACK) >= now {
                let body = read_body(store, &c.key).await;
                let (text, id) = parse_body(&body);
                if id.is_some_and(|id| id.is_gone()) {
                    // Its process is gone: the next run takes the claim over at once.
                    continue;
                }
                return Ok(Some(format!(
                    "an unexpired claim of {text}: renewed {} s ago, expires in {} s unless \
                     renewed",
                    (now - c.modified).num_seconds().max(0),
                    (c.expires(Duration::ZERO) - now).num_seconds().max(0)
                )));
            }
        }
        Ok(None)
    }
}

/// The URL of `dir` (a key under `base`) for messages, `where_` being the URL of `base`: errors
/// name the store (`s3://bucket/prefix/...`), not a bare key.
fn dir_url(where_: &str, base: &str, dir: &Path) -> String {
    format!("{}/{}", where_.trim_end_matches('/'), dir_rel(base, dir))
}

fn dir_rel<'a>(base: &str, dir: &'a Path) -> &'a str {
    let s = dir.as_ref();
    s.strip_prefix(base)
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(s)
}

/// Waits for the releases that dropped leases started in the background (a process should
/// call it before it exits, or a job it dropped stays held until its claim expires).
pub async fn settle_releases() {
    wait_for(|_| true).await;
}

async fn wait_for_releases(where_: &str) {
    wait_for(|w| w == where_).await;
}

/// One claim found by a listing.
struct Listed {
    key: Path,
    modified: chrono::DateTime<chrono::Utc>,
    ttl: Duration,
}

impl Listed {
    fn expires(&self, slack: Duration) -> chrono::DateTime<chrono::Utc> {
        self.modified
            + chrono::Duration::from_std(self.ttl + slack).unwrap_or(chrono::Duration::MAX)
    }
}

/// The claims in `dir`, whose URL is `dir_url` (for messages).
async fn list_claims(store: &dyn ObjectStore, dir: &Path, dir_url: &str) -> Result<Vec<Listed>> {
    let metas: Vec<object_store::ObjectMeta> = store
        .list(Some(dir))
        .try_collect()
        .await
        .map_err(|e| Error::object_store("list the claims in", dir_url, e))?;
    Ok(metas
        .into_iter()
        .filter_map(|m| {
            let name = m.location.filename()?.to_string();
            // A name we do not understand is a claim we must respect, for the longest time.
            let ttl = name
                .rsplit_once('.')
                .and_then(|(_, ms)| ms.parse::<u64>().ok())
                .map_or(Duration::from_secs(24 * 3600), Duration::from_millis);
            Some(Listed {
                key: m.location,
                modified: m.last_modified,
                ttl,
            })
        })
        .collect())
}

async fn read_body(store: &dyn ObjectStore, key: &Path) -> String {
    match store.get(key).await {
        Ok(got) => got
            .bytes()
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|_| "a run".into()),
        Err(_) => "a run".into(),
    }
}

impl ClaimShared {
    /// An error of a call on our claim, naming it by its URL.
    fn store_error(&self, op: &'static str, e: object_store::Error) -> Error {
        let name = self.key.filename().unwrap_or_default();
        Error::object_store(op, format!("{}/{name}", self.where_), e)
    }

    /// Writes the claim and lists: `Ok` if no other claim is live, else removes ours and
    /// answers [`Error::JobBusy`] naming the other.
    async fn claim(&self) -> Result<()> {
        let sent = Instant::now();
        self.put().await?;
        let claims = list_claims(self.store.as_ref(), &self.dir, &self.where_).await?;
        let Some(mine) = claims.iter().find(|c| c.key == self.key) else {
            // Only another run removes a claim, and only one it saw expired: it may own the job.
            return Err(Error::job_busy(
                &self.job,
                format!(
                    "our claim `{}` was removed right after we wrote it: another run took \
                     the job",
                    self.key
                ),
            ));
        };
        let mut rival = None;
        for other in claims.iter().filter(|c| c.key != self.key) {
            if other.expires(CLOCK_SLACK) >= mine.modified {
                let body = read_body(self.store.as_ref(), &other.key).await;
                if parse_body(&body).1.is_some_and(|id| id.is_gone()) {
                    // Unexpired, but its process is provably gone (this machine, this boot,
                    // this PID namespace, and the pid free or another process's): taken over
                    // at once, as an expired claim is.
                    tracing::info!(file = %other.key, holder = %parse_body(&body).0, "claim of a dead process taken over");
                    let _ = self.store.delete(&other.key).await;
                    continue;
                }
                rival.get_or_insert((other, body));
            } else {
                // Expired: its run is dead (or lost the job, and will find out at its check).
                let _ = self.store.delete(&other.key).await;
            }
        }
        if let Some((other, body)) = rival {
            let _ = self.store.delete(&self.key).await;
            let expires = (other.expires(Duration::ZERO) - mine.modified)
                .num_seconds()
                .max(0);
            return Err(Error::job_busy(
                &self.job,
                format!(
                    "an unexpired claim holds it ({}; its claim `{}` is renewed at least every \
                     {} s while its run lives, and expires in {expires} s unless renewed); \
                     nothing was changed",
                    parse_body(&body).0,
                    other.key,
                    (other.ttl / 3).as_secs().max(1),
                ),
            ));
        }
        *self.renewed.lock().unwrap() = Some(sent);
        Ok(())
    }

    async fn put(&self) -> Result<()> {
        self.store
            .put(&self.key, PutPayload::from(self.body.clone()))
            .await
            .map_err(|e| self.store_error("write the claim", e))?;
        Ok(())
    }

    /// Whether the last renewal was sent less than half the time to live ago.
    fn fresh(&self) -> bool {
        self.renewed
            .lock()
            .unwrap()
            .is_some_and(|t| t.elapsed() < self.ttl / 2)
    }

    fn lose(&self, e: &Error) -> Error {
        let reason = match e {
            Error::JobBusy { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        *self.lost.lock().unwrap() = Some(reason.clone());
        tracing::info!(job = %self.job, file = %self.key, reason = %reason, "job ownership lost");
        Error::job_busy(
            &self.job,
            format!("this run lost it: {reason}; its next checkpoint is not written"),
        )
    }

    /// Renews (a fresh lease by a plain write, an older one by claiming again).
    async fn renew(&self) -> Result<()> {
        let _one_at_a_time = self.renewing.lock().await;
        if let Some(reason) = self.lost.lock().unwrap().clone() {
            return Err(Error::job_busy(
                &self.job,
                format!("this run lost it: {reason}"),
            ));
        }
        if self.fresh() {
            let sent = Instant::now();
            self.put().await?;
            *self.renewed.lock().unwrap() = Some(sent);
            return Ok(());
        }
        match self.claim().await {
            Ok(()) => Ok(()),
            Err(e @ Error::JobBusy { .. }) => Err(self.lose(&e)),
            Err(e) => Err(e),
        }
    }
}

async fn renew(shared: std::sync::Weak<ClaimShared>) {
    loop {
        let Some(period) = shared.upgrade().map(|s| s.ttl / 3) else {
            return;
        };
        tokio::time::sleep(period).await;
        let Some(s) = shared.upgrade() else { return };
        // A failed renewal is retried at the next period; the check before a manifest write
        // decides with a fresh claim when the lease has grown old.
        if matches!(s.renew().await, Err(Error::JobBusy { .. })) {
            return;
        }
    }
}

#[async_trait]
impl JobLease for Claim {
    async fn check(&self) -> Result<()> {
        if let Some(reason) = self.shared.lost.lock().unwrap().clone() {
            return Err(Error::job_busy(
                &self.shared.job,
                format!("this run lost it: {reason}"),
            ));
        }
        if self.shared.fresh() {
            return Ok(());
        }
        self.shared.renew().await
    }

    async fn release(mut self: Box<Self>) -> Result<()> {
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
        let lost = self.shared.lost.lock().unwrap().is_some();
        if !lost {
            self.shared
                .store
                .delete(&self.shared.key)
                .await
                .map_err(|e| self.shared.store_error("delete the claim", e))?;
        }
        tracing::debug!(job = %self.shared.job, file = %self.shared.key, lost, "job released");
        Ok(())
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let Some(renewer) = self.renewer.take() else {
            return; // released
        };
        renewer.abort();
        if self.shared.lost.lock().unwrap().is_some() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let shared = self.shared.clone();
            start_release(&rt, self.shared.where_.clone(), async move {
                let _ = shared.store.delete(&shared.key).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every waiter waits for every release started before it at its location, whoever else
    /// waits too. (Waiters used to take the releases they waited for out of the registry, so a
    /// second waiter found none and went on while the claim was still there: a job dropped by
    /// one run was found held by the next run in the same process.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiter_waits_for_every_release_started_before_it() {
        let rt = tokio::runtime::Handle::current();
        let here = format!("memory://{}", uuid::Uuid::now_v7().simple());
        let (end, ended) = tokio::sync::oneshot::channel::<()>();
        start_release(&rt, here.clone(), async move {
            let _ = ended.await;
        });
        let all = tokio::spawn(settle_releases());
        let at = here.clone();
        let mine = tokio::spawn(async move { wait_for_releases(&at).await });
        // A waiter elsewhere does not wait for it.
        tokio::time::timeout(
            Duration::from_secs(10),
            wait_for_releases("memory://elsewhere"),
        )
        .await
        .expect("nothing to wait for elsewhere");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !all.is_finished(),
            "settle_releases went on before the release ended"
        );
        assert!(
            !mine.is_finished(),
            "a second waiter went on before the release ended"
        );
        end.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), mine)
            .await
            .unwrap()
            .unwrap();
    }
}
