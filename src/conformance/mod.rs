//! The conformance suite: the checks every [`Storage`] backend passes, for filesink's own
//! backends and for third-party ones (feature `test-util`).
//!
//! The checks are plain async functions that take a [`Location`] — a fresh, empty sink
//! location on the backend under test — as object_store's `integration` module does. Each
//! one runs a small job through the real [`Sink`] and [`Coordinator`], crashes it where its
//! name says, restarts, and asserts that every record is visible exactly once, that nothing
//! committed was overwritten and that no leftovers remain. They panic on failure, so a test
//! is one line:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use filesink::conformance::{self, Capabilities, Location};
//! # struct MyLocation;
//! # #[async_trait::async_trait]
//! # impl Location for MyLocation {
//! #     fn name(&self) -> &str { "mine" }
//! #     fn storage(&self) -> Arc<dyn filesink::storage::Storage> { unimplemented!() }
//! #     fn reopen(&self) -> Arc<dyn filesink::storage::Storage> { unimplemented!() }
//! #     fn sibling(&self) -> Arc<dyn filesink::storage::Storage> { unimplemented!() }
//! #     async fn visible(&self) -> Vec<(String, Vec<u8>)> { unimplemented!() }
//! #     fn capabilities(&self) -> Capabilities { Capabilities::default() }
//! # }
//! # async fn demo() {
//! conformance::crash_between_precommit_and_commit(&MyLocation, true).await;
//! # }
//! ```
//!
//! [`all`] runs every check, each on a fresh location.

use std::sync::Arc;

use async_trait::async_trait;

use crate::bucket::HivePartitioner;
use crate::format::FileFormat;
use crate::job::{Coordinator, Ownership};
use crate::protocol::{CommitOutcome, Committable, PendingHandle};
use crate::sink::{RollingPolicy, Sink};
use crate::storage::Storage;
use crate::Error;

pub mod harness;
mod table_storage;

pub use table_storage::{
    committed_part_files_are_read_and_removed_by_their_final_names,
    hostile_paths_are_refused_by_every_storage_call,
    list_metadata_from_lists_the_names_after_one_in_order,
    pending_part_files_are_read_back_under_their_hidden_names,
    refuses_replace_is_the_stores_answer_and_decides_races,
    replace_metadata_swaps_the_whole_object,
};

use harness::{assert_exactly_once, batch, run_two_writers, schema, Job};

/// A sink location on the backend under test.
#[async_trait]
pub trait Location: Send + Sync {
    /// The backend's name, for messages.
    fn name(&self) -> &str;

    /// The storage under test, at this location. Every call returns the same backend.
    fn storage(&self) -> Arc<dyn Storage>;

    /// The same location through a new storage object, as a fresh process would open it.
    fn reopen(&self) -> Arc<dyn Storage>;

    /// A sibling location whose name extends this one's (`…/out` → `…/out2`).
    fn sibling(&self) -> Arc<dyn Storage>;

    /// Every visible data file under the location: its path relative to the location and its
    /// bytes, read directly from the store (not through [`Storage`]).
    async fn visible(&self) -> Vec<(String, Vec<u8>)>;

    /// What the backend does, for the checks whose expectations differ by backend.
    fn capabilities(&self) -> Capabilities;
}

/// What a backend does, where the checks expect different things of different backends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The commit primitive is a multipart upload (S3): files go out in parts of the storage's
    /// part size (the suite expects 5 MiB parts).
    pub multipart: bool,
    /// Part files are held whole in memory and staged at the vote (a store without multipart
    /// uploads): open files are not listed as leftovers.
    pub staged: bool,
    /// Local disk: part files hold nothing in memory, and job ownership is a kernel lock with
    /// exactly one winner.
    pub local_disk: bool,
    /// The store refuses to replace on a conditional put (`If-None-Match: *`), so two
    /// coordinators racing for one manifest are told apart.
    pub conditional_put: bool,
}

impl Capabilities {
    /// Local disk.
    pub fn local_disk() -> Self {
        Capabilities {
            local_disk: true,
            conditional_put: true,
            ..Self::default()
        }
    }

    /// An object store without multipart uploads, by staging object.
    pub fn staged(conditional_put: bool) -> Self {
        Capabilities {
            staged: true,
            conditional_put,
            ..Self::default()
        }
    }

    /// An S3-compatible store.
    pub fn multipart(conditional_put: bool) -> Self {
        Capabilities {
            multipart: true,
            conditional_put,
            ..Self::default()
        }
    }
}

/// Runs every check, each on a fresh location from `fresh`.
pub async fn all<L: Location>(fresh: impl Fn() -> L) {
    crash_before_precommit(&fresh()).await;
    crash_between_precommit_and_commit(&fresh(), true).await;
    crash_between_precommit_and_commit(&fresh(), false).await;
    crash_after_commit(&fresh()).await;
    commit_twice_and_from_a_fresh_process(&fresh()).await;
    crash_between_two_commits_of_one_call(&fresh()).await;
    abort_after_a_crash_leaves_nothing_behind(&fresh()).await;
    cleanup_stays_inside_the_exact_prefix(&fresh()).await;
    a_file_of_many_parts(&fresh()).await;
    small_files_commit_whole(&fresh()).await;
    two_coordinators_on_one_job_one_wins(&fresh(), true).await;
    two_coordinators_on_one_job_one_wins(&fresh(), false).await;
    a_second_run_of_a_live_job_is_refused_and_changes_nothing(&fresh()).await;
    runs_starting_at_the_same_moment_never_both_own_a_job(&fresh()).await;
    a_zombie_writer_with_the_same_identity_cannot_overwrite_or_complete(&fresh()).await;
    two_jobs_on_one_prefix_never_touch_each_other(&fresh()).await;
    memory_stays_within_the_budget(&fresh()).await;
    hostile_paths_are_refused_by_every_storage_call(&fresh()).await;
    refuses_replace_is_the_stores_answer_and_decides_races(&fresh()).await;
    replace_metadata_swaps_the_whole_object(&fresh()).await;
    list_metadata_from_lists_the_names_after_one_in_order(&fresh()).await;
    committed_part_files_are_read_and_removed_by_their_final_names(&fresh()).await;
    pending_part_files_are_read_back_under_their_hidden_names(&fresh()).await;
}

const BATCHES: usize = 10;
const BATCH_LEN: i64 = 40;
const N: i64 = BATCHES as i64 * BATCH_LEN;

fn sink(b: &dyn Location, format: FileFormat) -> Sink {
    Sink::builder_shared(b.storage())
        .format(format)
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::default())
        .build()
        .unwrap()
}

async fn started(b: &dyn Location, format: FileFormat) -> Job {
    let mut job = Job::new(sink(b, format), BATCHES, BATCH_LEN);
    job.writer = Some(job.start().await.writer);
    job.write(2).await;
    job.checkpoint(true, true).await;
    job
}

async fn finish(job: &mut Job) {
    job.writer = Some(job.start().await.writer);
    while job.position < job.total_batches {
        job.write(3).await;
        job.checkpoint(true, true).await;
    }
    job.finish().await;
}

async fn assert_no_leftovers(b: &dyn Location) {
    let left = b.storage().list_leftovers().await.unwrap();
    assert!(
        left.is_empty(),
        "[{}] leftovers after the final commit: {left:?}",
        b.name()
    );
}

/// A crash after writing, before the vote: the restart from the checkpoint before removes
/// what the crashed run left, and every record lands once.
pub async fn crash_before_precommit(b: &dyn Location) {
    let format = FileFormat::parquet();
    let mut job = started(b, format.clone()).await;
    job.write(3).await;
    job.crash();
    finish(&mut job).await;
    assert_exactly_once(b, &format, N).await;
    assert_no_leftovers(b).await;
}

/// A crash after the vote, before the commit: with the checkpoint `completed`, the restart
/// commits its files; without, it restores the checkpoint before, whose files report already
/// committed. Every record lands once.
pub async fn crash_between_precommit_and_commit(b: &dyn Location, completed: bool) {
    let format = FileFormat::json_lines();
    let mut job = started(b, format.clone()).await;
    job.write(3).await;
    let cp = job.checkpoint(completed, false).await;
    job.crash();
    let restored = job.start().await;
    if completed {
        assert_eq!(restored.commit_outcomes.len(), cp.committables.len());
        assert!(restored
            .commit_outcomes
            .iter()
            .all(|o| *o == CommitOutcome::Committed));
    } else {
        // Restored from the checkpoint before: its files were committed already.
        assert!(restored
            .commit_outcomes
            .iter()
            .all(|o| *o == CommitOutcome::AlreadyCommitted));
    }
    job.writer = Some(restored.writer);
    while job.position < job.total_batches {
        job.write(3).await;
        job.checkpoint(true, true).await;
    }
    job.finish().await;
    assert_exactly_once(b, &format, N).await;
    assert_no_leftovers(b).await;
}

/// A crash after the commit: the restart commits the same files again, each reports already
/// committed, and every record lands once.
pub async fn crash_after_commit(b: &dyn Location) {
    let format = FileFormat::csv();
    let mut job = started(b, format.clone()).await;
    job.write(3).await;
    let cp = job.checkpoint(true, true).await;
    job.crash();
    let restored = job.start().await;
    assert!(restored
        .commit_outcomes
        .iter()
        .all(|o| *o == CommitOutcome::AlreadyCommitted));
    assert_eq!(restored.commit_outcomes.len(), cp.committables.len());
    drop(restored);
    finish(&mut job).await;
    assert_exactly_once(b, &format, N).await;
}

/// A commit repeated, and repeated again from a fresh view of the store with committables
/// read back from JSON: already committed each time, the output unchanged.
pub async fn commit_twice_and_from_a_fresh_process(b: &dyn Location) {
    let format = FileFormat::parquet();
    let s = sink(b, format.clone());
    let mut w = s.create_writer();
    w.write(&batch(0, 200)).await.unwrap();
    let cs = w.prepare_commit(1).await.unwrap().committables;
    assert_eq!(
        s.committer().commit_all(&cs).await.unwrap().committed,
        cs.len()
    );
    let before = b.visible().await;
    assert_eq!(
        s.committer()
            .commit_all(&cs)
            .await
            .unwrap()
            .already_committed,
        cs.len()
    );
    let fresh = Sink::builder_shared(b.reopen()).build().unwrap();
    let reloaded: Vec<_> = cs
        .iter()
        .map(|c| Committable::from_json(&c.to_json()).unwrap())
        .collect();
    assert_eq!(
        fresh
            .committer()
            .commit_all(&reloaded)
            .await
            .unwrap()
            .already_committed,
        cs.len()
    );
    assert_eq!(
        b.visible().await,
        before,
        "[{}] a repeated commit changed the output",
        b.name()
    );
    assert_exactly_once(b, &format, 200).await;
}

/// A commit call cut short after two of five files: the next call with the same handles
/// reports those two already committed and commits the rest.
pub async fn crash_between_two_commits_of_one_call(b: &dyn Location) {
    let format = FileFormat::json_lines();
    let s = Sink::builder_shared(b.storage())
        .format(format.clone())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::on_checkpoint())
        .build()
        .unwrap();
    let mut w = s.create_writer();
    w.write(&batch(0, 100)).await.unwrap();
    let cs = w.prepare_commit(1).await.unwrap().committables;
    assert_eq!(cs.len(), 5);
    s.committer().commit_all(&cs[..2]).await.unwrap();
    let outcomes: Vec<_> = s
        .committer()
        .commit(&cs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(&outcomes[..2], &[CommitOutcome::AlreadyCommitted; 2]);
    assert_eq!(&outcomes[2..], &[CommitOutcome::Committed; 3]);
    assert_exactly_once(b, &format, 100).await;
}

/// A restore without a checkpoint removes the pending and in-progress files a crashed writer
/// left, and nothing becomes visible.
pub async fn abort_after_a_crash_leaves_nothing_behind(b: &dyn Location) {
    let s = sink(b, FileFormat::parquet());
    let mut w = s.create_writer();
    w.write(&batch(0, 100)).await.unwrap();
    let _pending = w.prepare_commit(1).await.unwrap(); // never completed
    w.write(&batch(100, 100)).await.unwrap(); // in progress
    drop(w);
    assert!(!b.storage().list_leftovers().await.unwrap().is_empty());
    let restored = s.restore_writer(None, &[]).await.unwrap();
    assert!(!restored.removed_leftovers.is_empty());
    assert_no_leftovers(b).await;
    assert!(b.visible().await.is_empty());
}

/// The cleanup of a restore never touches a sibling location whose name extends this one
/// (`out` and `out2`): the neighbour's pending file still commits.
pub async fn cleanup_stays_inside_the_exact_prefix(b: &dyn Location) {
    let neighbour = Sink::builder_shared(b.sibling())
        .format(FileFormat::parquet())
        .build()
        .unwrap();
    let mut w = neighbour.create_writer();
    w.write(&batch(0, 50)).await.unwrap();
    let neighbours_pending = w.prepare_commit(1).await.unwrap().committables;
    let s = sink(b, FileFormat::parquet());
    let restored = s.restore_writer(None, &[]).await.unwrap();
    assert!(
        restored.removed_leftovers.is_empty(),
        "[{}] touched the neighbour: {:?}",
        b.name(),
        restored.removed_leftovers
    );
    // The neighbour's pending file still commits.
    assert_eq!(
        neighbour
            .committer()
            .commit_all(&neighbours_pending)
            .await
            .unwrap()
            .committed,
        1
    );
}

/// A file of about 60 MiB: on multipart stores it goes out in parts of the part size, and it
/// commits once and reports already committed after.
pub async fn a_file_of_many_parts(b: &dyn Location) {
    let format = FileFormat::json_lines();
    let s = Sink::builder_shared(b.storage())
        .format(format.clone())
        .rolling_policy(RollingPolicy::on_checkpoint().with_part_size_bytes_max(1 << 30))
        .build()
        .unwrap();
    let mut w = s.create_writer();
    // About 60 MiB of JSON lines.
    let big = "y".repeat(6000);
    let schema = schema();
    let mut id = 0i64;
    while w.open_files() == 0 || id < 10_000 {
        let ids: Vec<i64> = (id..id + 500).collect();
        let b2 = arrow::record_batch::RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow::array::Int64Array::from(ids.clone())),
                Arc::new(arrow::array::StringArray::from(vec!["2026-11-30"; 500])),
                Arc::new(arrow::array::StringArray::from(vec![big.as_str(); 500])),
            ],
        )
        .unwrap();
        w.write(&b2).await.unwrap();
        id += 500;
    }
    let cs = w.prepare_commit(1).await.unwrap().committables;
    assert_eq!(cs.len(), 1);
    assert!(cs[0].size_bytes > 55 * 1024 * 1024, "{}", cs[0].size_bytes);
    if b.capabilities().multipart {
        let PendingHandle::Multipart { parts, .. } = &cs[0].pending else {
            panic!("{:?}", cs[0].pending)
        };
        assert_eq!(
            parts.len() as u64,
            cs[0].size_bytes.div_ceil(5 * 1024 * 1024)
        );
    }
    s.committer().commit_all(&cs).await.unwrap();
    assert_eq!(
        s.committer()
            .commit_all(&cs)
            .await
            .unwrap()
            .already_committed,
        1
    );
    assert_exactly_once(b, &format, id).await;
}

/// A file smaller than one part commits whole.
pub async fn small_files_commit_whole(b: &dyn Location) {
    let format = FileFormat::parquet();
    let s = sink(b, format.clone());
    let mut w = s.create_writer();
    w.write(&batch(0, 10)).await.unwrap();
    let cs = w.prepare_commit(1).await.unwrap().committables;
    assert!(cs.iter().all(|c| c.size_bytes < 5 * 1024 * 1024));
    s.committer().commit_all(&cs).await.unwrap();
    assert_exactly_once(b, &format, 10).await;
}

/// Every object visible in `before` is still visible with the same bytes.
async fn assert_nothing_overwritten(b: &dyn Location, before: &[(String, Vec<u8>)], ctx: &str) {
    let after = b.visible().await;
    for (path, bytes) in before {
        let now = after.iter().find(|(p, _)| p == path);
        assert!(
            now.is_some_and(|(_, b)| b == bytes),
            "[{}] {ctx}: committed `{path}` was overwritten or removed",
            b.name()
        );
    }
}

/// Two coordinators of one job whose deployment vouches for one live run
/// ([`Ownership::External`]: a failover whose old leader still runs): both restore the same
/// manifest, write the same records and checkpoint, at the same moment (`race`) or the
/// first-opened first. Where the store refuses to replace a manifest, exactly one completes
/// the checkpoint; the other gets a conflict; nothing committed is touched; a restart resumes
/// from the winner's manifest, and every record is visible once. (On local disk the second
/// restore removes the file the first resumed, so the first must not be the one to complete.)
/// On a store that ignores conditional writes nothing can tell the two apart: there the
/// default ownership ([`Ownership::Lease`]) is what keeps a second run out (the `ownership`
/// tests), and this check only confirms that the store is such a store.
pub async fn two_coordinators_on_one_job_one_wins(b: &dyn Location, race: bool) {
    let format = FileFormat::json_lines();
    let s = sink(b, format.clone());
    if !b.capabilities().conditional_put {
        // Nothing can tell the two apart on such a store: the lease keeps a second run out.
        return;
    }
    let external = |s: &Sink| {
        Coordinator::builder(s, "race")
            .ownership(Ownership::External)
            .open()
    };
    let mut first = external(&s).await.unwrap();
    first.writer().write(&batch(0, 40)).await.unwrap();
    first.checkpoint(&40).await.unwrap();
    drop(first);
    let mut one = external(&s).await.unwrap();
    let mut two = external(&s).await.unwrap();
    one.writer().write(&batch(40, 40)).await.unwrap();
    two.writer().write(&batch(40, 40)).await.unwrap();
    let before = b.visible().await;
    let (r1, r2) = if race {
        tokio::join!(one.checkpoint(&80), two.checkpoint(&80))
    } else {
        (one.checkpoint(&80).await, two.checkpoint(&80).await)
    };
    let (won, lost) = match (r1, r2) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        (r1, r2) => panic!(
            "[{}] exactly one coordinator must win: {r1:?} / {r2:?}",
            b.name()
        ),
    };
    assert_eq!(won.checkpoint_id, 2);
    assert!(
        matches!(lost, Error::Conflict { .. }),
        "[{}] the loser's error: {lost:?}",
        b.name()
    );
    // The loser finds the manifest taken or, on local disk, that the other's restore removed
    // the file it resumed (it must not promise a file that is gone).
    assert_nothing_overwritten(b, &before, "after the race").await;
    drop((one, two));
    let mut again = external(&s).await.unwrap();
    assert_eq!(again.source_position::<i64>().unwrap(), Some(80));
    again.finish(&80).await.unwrap();
    assert_exactly_once(b, &format, 80).await;
    assert_no_leftovers(b).await;
}

/// A writer's successor restores its identity while the old process still runs (a zombie
/// after a failover that a stream engine decided: [`Ownership::External`]). The successor
/// checkpoints first; the zombie, with the same writer id and the same records, then tries
/// to: it gets an error, nothing committed is touched, and the output stays exactly once.
pub async fn a_zombie_writer_with_the_same_identity_cannot_overwrite_or_complete(b: &dyn Location) {
    let format = FileFormat::parquet();
    let s = sink(b, format.clone());
    let external = |s: &Sink| {
        Coordinator::builder(s, "failover")
            .ownership(Ownership::External)
            .open()
    };
    let mut zombie = external(&s).await.unwrap();
    zombie.writer().write(&batch(0, 40)).await.unwrap();
    zombie.checkpoint(&40).await.unwrap();
    zombie.writer().write(&batch(40, 40)).await.unwrap();
    // Failover: the successor restores from checkpoint 1 and removes the zombie's open file.
    let mut successor = external(&s).await.unwrap();
    assert_eq!(successor.source_position::<i64>().unwrap(), Some(40));
    successor.writer().write(&batch(40, 40)).await.unwrap();
    successor.checkpoint(&80).await.unwrap();
    let before = b.visible().await;
    zombie
        .writer()
        .write(&batch(80, 40))
        .await
        .unwrap_or_else(|e| {
            // Where the successor's cleanup already broke the zombie's file, the error shows here.
            eprintln!("[{}] the zombie's write failed: {e}", b.name());
        });
    let err = zombie
        .checkpoint(&80)
        .await
        .expect_err("a zombie must not complete a checkpoint");
    eprintln!("[{}] the zombie's checkpoint failed: {err}", b.name());
    // Local disk and the staged store refuse its manifest; on S3 the successor's cleanup
    // aborted its upload, so the zombie learns that its file is gone.
    assert!(
        matches!(err, Error::Conflict { .. } | Error::DataLost { .. }),
        "[{}] the zombie's error: {err:?}",
        b.name()
    );
    assert_nothing_overwritten(b, &before, "after the zombie's checkpoint").await;
    drop(zombie);
    assert_exactly_once(b, &format, 80).await;
    successor.writer().write(&batch(80, 40)).await.unwrap();
    successor.finish(&120).await.unwrap();
    drop(successor);
    // A restart cleans up whatever the zombie left.
    let s = Sink::builder_shared(b.reopen())
        .format(format.clone())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let c = Coordinator::open(&s, "failover", 1).await.unwrap();
    assert!(c.is_finished());
    assert_exactly_once(b, &format, 120).await;
    assert_no_leftovers(b).await;
}

/// Two jobs append to one prefix: one is mid-way with files open while the other runs,
/// crashes, restarts (cleaning up its own leftovers) and finishes; then the first finishes.
/// Neither touches the other's files, and every record of both is visible once.
pub async fn two_jobs_on_one_prefix_never_touch_each_other(b: &dyn Location) {
    let format = FileFormat::json_lines();
    let s = sink(b, format.clone());
    let day1 = run_two_writers(&s, "day1", 0, 600, 2, Some(3))
        .await
        .unwrap();
    let day1_open = b.storage().list_leftovers().await.unwrap();
    // The staged backend holds open files in memory until the vote; the others show them.
    assert!(
        !day1_open.is_empty() || b.capabilities().staged,
        "[{}] day1 has nothing open",
        b.name()
    );
    drop(run_two_writers(&s, "day2", 600, 600, 2, Some(3)).await);
    assert!(run_two_writers(&s, "day2", 600, 600, 2, None)
        .await
        .is_some());
    let left = b.storage().list_leftovers().await.unwrap();
    for l in &day1_open {
        assert!(
            left.iter().any(|x| x.path == l.path),
            "[{}] job day2 removed job day1's `{}`",
            b.name(),
            l.path
        );
    }
    drop(day1);
    assert!(run_two_writers(&s, "day1", 0, 600, 2, None).await.is_some());
    assert_exactly_once(b, &format, 1200).await;
    assert_no_leftovers(b).await;
}

/// What the backend holds in memory counts against the writer's budget: S3 parts not yet
/// uploaded and staged objects (whole files) make files roll and seal early rather than grow;
/// local files hold nothing. Between calls `buffered_bytes` stays within the budget, and every
/// record lands once.
pub async fn memory_stays_within_the_budget(b: &dyn Location) {
    let format = FileFormat::json_lines();
    let budget = 4 * 1024;
    let s = Sink::builder_shared(b.storage())
        .format(format.clone())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .buffer_bytes_max(budget)
        .build()
        .unwrap();
    let mut w = s.create_writer();
    for i in 0..40 {
        w.write(&batch(i * 50, 50)).await.unwrap();
        assert!(
            w.buffered_bytes() <= budget,
            "[{}] after batch {i}: {} bytes held, budget {budget}",
            b.name(),
            w.buffered_bytes()
        );
        if i % 20 == 19 {
            if i == 39 {
                w.end_of_input().await.unwrap();
            }
            let cs = w.prepare_commit(i as u64).await.unwrap().committables;
            s.committer().commit_all(&cs).await.unwrap();
        }
    }
    assert_exactly_once(b, &format, 2000).await;
    let files = b.visible().await.len();
    assert!(
        b.capabilities().local_disk || files > 10,
        "[{}] {files} files: the backend's buffers did not make files roll early",
        b.name()
    );
    assert_no_leftovers(b).await;
}

/// The same job started while its first run is live (a cron job that overlaps itself, an
/// operator who restarts a run that is not dead), from this process and from a fresh view of
/// the store: refused at once with [`Error::JobBusy`] before it changes anything; the first run
/// goes on and completes; once it is closed, the job can be taken again, exactly once.
pub async fn a_second_run_of_a_live_job_is_refused_and_changes_nothing(b: &dyn Location) {
    let format = FileFormat::json_lines();
    let s = sink(b, format.clone());
    let fresh = Sink::builder_shared(b.reopen())
        .format(format.clone())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let mut first = Coordinator::open(&s, "owned", 1).await.unwrap();
    first.writer().write(&batch(0, 40)).await.unwrap();
    first.checkpoint(&40).await.unwrap();
    first.writer().write(&batch(40, 40)).await.unwrap();
    let visible = b.visible().await;
    let mut hidden = b.storage().list_leftovers().await.unwrap();
    hidden.sort_by(|x, y| x.path.cmp(&y.path));
    if b.capabilities().local_disk {
        assert!(
            !hidden.is_empty(),
            "[{}] the first run has open files",
            b.name()
        );
    }
    for sink in [&s, &fresh, &s] {
        let err = Coordinator::open(sink, "owned", 1).await.unwrap_err();
        assert!(
            matches!(&err, Error::JobBusy { job, .. } if job == "owned"),
            "[{}] a second run must be refused: {err:?}",
            b.name()
        );
    }
    assert_eq!(
        b.visible().await,
        visible,
        "[{}] visible output changed",
        b.name()
    );
    let mut now = b.storage().list_leftovers().await.unwrap();
    now.sort_by(|x, y| x.path.cmp(&y.path));
    assert_eq!(
        now,
        hidden,
        "[{}] the refused run touched hidden files",
        b.name()
    );
    first.checkpoint(&80).await.unwrap();
    first.close().await.unwrap();
    let mut second = Coordinator::open(&fresh, "owned", 1).await.unwrap();
    assert_eq!(second.source_position::<i64>().unwrap(), Some(80));
    second.writer().write(&batch(80, 40)).await.unwrap();
    second.finish(&120).await.unwrap();
    drop(second);
    assert_exactly_once(b, &format, 120).await;
    assert_no_leftovers(b).await;
}

/// Two runs of one job started at the same moment, round after round, from two views of the
/// store: never both own the job. On local disk exactly one does (a kernel lock); on object
/// stores at most one (each may see the other's claim, and then both are refused, having
/// changed nothing), and a lone run takes the job afterwards.
pub async fn runs_starting_at_the_same_moment_never_both_own_a_job(b: &dyn Location) {
    let format = FileFormat::json_lines();
    let s = sink(b, format.clone());
    let other = Sink::builder_shared(b.reopen())
        .format(format.clone())
        .build()
        .unwrap();
    let (mut won, mut both_refused) = (0, 0);
    for round in 0..10 {
        let (r1, r2) = tokio::join!(
            Coordinator::open(&s, "twice", 1),
            Coordinator::open(&other, "twice", 1)
        );
        match (r1, r2) {
            (Ok(_), Ok(_)) => panic!("[{}] round {round}: both runs own the job", b.name()),
            (Ok(c), Err(e)) | (Err(e), Ok(c)) => {
                assert!(matches!(e, Error::JobBusy { .. }), "[{}] {e:?}", b.name());
                won += 1;
                c.close().await.unwrap();
            }
            (Err(e1), Err(e2)) => {
                assert!(
                    matches!((&e1, &e2), (Error::JobBusy { .. }, Error::JobBusy { .. })),
                    "[{}] {e1:?} / {e2:?}",
                    b.name()
                );
                both_refused += 1;
            }
        }
    }
    eprintln!(
        "[{}] 10 rounds: one run won {won}, both were refused {both_refused}",
        b.name()
    );
    if b.capabilities().local_disk {
        assert_eq!(
            won,
            10,
            "[{}] a kernel lock has exactly one winner",
            b.name()
        );
    }
    let mut lone = Coordinator::open(&s, "twice", 1).await.unwrap();
    lone.writer().write(&batch(0, 40)).await.unwrap();
    lone.finish(&40).await.unwrap();
    lone.close().await.unwrap();
    assert_exactly_once(b, &format, 40).await;
    assert_no_leftovers(b).await;
}
