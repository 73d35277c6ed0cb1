//! The pre-commit merge of small Parquet files (`docs/design/delta.md` section 11): carried
//! files stay hidden until a merged file that supersedes them is committed; every crash point
//! of the protocol page (`filesink::sink`, "Pre-commit merge: carried files") keeps every
//! record exactly once; operators' cleanup leaves carried files alone; the CLI flags.
//!
//! The cases run on local disk, on the in-memory object store (staged objects), on Garage and
//! on Ceph's radosgw (S3: carried files are hidden objects written by PUT, their multipart
//! uploads aborted); the S3 cases say loudly when no server is configured
//! (`./scripts/garage start DIR; . DIR/env`, `./scripts/ceph start DIR; . DIR/env`).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use common::backend::{Backend, Kind};
use common::cli::{json_of, run_expect, run_expect_in, run_ok, s, stderr};
use common::{batch, hidden_files, ids_in_bytes, visible_files};
use filesink::bucket::HivePartitioner;
use filesink::storage::ObjectStorage;
use filesink::{Coordinator, Error, FileFormat, MergePolicy, PendingHandle, Sink, WriterState};
use object_store::{ObjectStoreExt, PutPayload};

/// Buckets of `common::batch`: `day=2026-11-25` to `day=2026-11-29`.
const DAYS: usize = 5;
/// Records per batch: 5 per bucket.
const BATCH: i64 = 25;

fn sink(b: &Backend, policy: MergePolicy) -> Sink {
    b.sink()
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .merge_small_files(policy)
        .build()
        .unwrap()
}

/// Carries everything, merges only at the end of the input.
fn carry_all() -> MergePolicy {
    MergePolicy::new(1024 * 1024)
        .with_target_bytes(u64::MAX)
        .with_max_visibility_delay(Duration::from_secs(3600))
}

/// Every visible id, read with the Parquet reader, sorted.
async fn parquet_ids(b: &Backend) -> Vec<i64> {
    let mut ids: Vec<i64> = b
        .visible()
        .await
        .into_iter()
        .flat_map(|(_, bytes)| ids_in_bytes(bytes, &FileFormat::parquet()))
        .collect();
    ids.sort_unstable();
    ids
}

/// Visible data files.
async fn visible(b: &Backend) -> usize {
    b.visible().await.len()
}

/// Every leftover the backend lists: hidden part files and objects, and on S3 incomplete
/// multipart uploads too, sorted.
async fn hidden(b: &Backend) -> Vec<String> {
    let mut paths: Vec<String> = b
        .storage
        .list_leftovers()
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.path)
        .collect();
    paths.sort();
    paths
}

/// Whether the hidden part file `rel` exists.
async fn hidden_exists(b: &Backend, rel: &str) -> bool {
    match b.storage.read_hidden(rel).await {
        Ok(_) => true,
        Err(Error::DataLost { .. }) => false,
        Err(e) => panic!("reading `{rel}`: {e}"),
    }
}

/// Writes `bytes` under `rel` behind the sink's back (a damaged or restored file).
async fn put_raw(b: &Backend, rel: &str, bytes: Vec<u8>) {
    match &b.kind {
        Kind::Local(dir) => std::fs::write(dir.path().join(rel), bytes).unwrap(),
        Kind::Memory(mem) => {
            let key = object_store::path::Path::from(format!("lake/out/{rel}"));
            mem.put(&key, PutPayload::from(bytes)).await.unwrap();
        }
        Kind::S3 { store, prefix, .. } => {
            let key = object_store::path::Path::from(format!("{prefix}/{rel}"));
            store.put(&key, PutPayload::from(bytes)).await.unwrap();
        }
    }
}

/// Runs each case on local disk, on the in-memory object store, on Garage and on Ceph's
/// radosgw (the servers if configured).
macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        mod local {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::Backend::local()).await;
            })*
        }
        mod memory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::Backend::memory()).await;
            })*
        }
        mod s3 {
            $(#[tokio::test]
            async fn $case() {
                if let Some(b) = super::common::backend::s3_or_explain() {
                    super::$case(b).await;
                }
            })*
        }
        mod ceph {
            $(#[tokio::test]
            async fn $case() {
                if let Some(b) = super::common::backend::ceph_or_explain() {
                    super::$case(b).await;
                }
            })*
        }
    };
}

on_every_backend!(
    carried_files_are_invisible_until_merged,
    the_target_size_triggers_the_merge,
    visibility_delay_bounds_the_wait,
    crash_before_the_manifest_keeps_the_previous_carried_files,
    crash_after_the_manifest_commits_the_merged_file_then_removes_the_carried_ones,
    crash_between_the_merged_commit_and_the_removal_removes_them_at_restore,
    a_damaged_carried_file_fails_the_vote_loudly,
    a_restored_sink_without_the_merge_hands_carried_files_out,
);

/// The object-store cases: the in-memory store, Garage and Ceph's radosgw.
macro_rules! on_object_stores {
    ($($case:ident),* $(,)?) => {
        mod memory_only {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::Backend::memory()).await;
            })*
        }
        mod s3_only {
            $(#[tokio::test]
            async fn $case() {
                if let Some(b) = super::common::backend::s3_or_explain() {
                    super::$case(b).await;
                }
            })*
        }
        mod ceph_only {
            $(#[tokio::test]
            async fn $case() {
                if let Some(b) = super::common::backend::ceph_or_explain() {
                    super::$case(b).await;
                }
            })*
        }
    };
}

on_object_stores!(object_stores_carry_hidden_objects_below_the_part_size);

async fn carried_files_are_invisible_until_merged(b: Backend) {
    let sink = sink(&b, carry_all());
    let mut w = sink.create_writer();
    for n in 1..=4u64 {
        w.write(&batch((n as i64 - 1) * BATCH, BATCH))
            .await
            .unwrap();
        let p = w.prepare_commit(n).await.unwrap();
        assert!(
            p.committables.is_empty(),
            "checkpoint {n}: nothing to commit"
        );
        assert_eq!(p.state.carried.len(), DAYS * n as usize);
        assert_eq!(p.state.version, 3, "carried files need format version 3");
        assert!(p.state.carried.iter().all(|c| c.record_count == 5));
        // The state round-trips through its JSON.
        assert_eq!(WriterState::from_json(&p.state.to_json()).unwrap(), p.state);
        sink.committer().commit_all(&p.committables).await.unwrap();
        assert_eq!(visible(&b).await, 0, "checkpoint {n}");
        // Every carried file is a hidden file (object) of its own, and nothing else is left.
        let carried: Vec<String> = {
            let mut c: Vec<String> = p
                .state
                .carried
                .iter()
                .map(|c| c.in_progress_path.clone())
                .collect();
            c.sort();
            c
        };
        assert_eq!(hidden(&b).await, carried, "checkpoint {n}");
    }
    w.write(&batch(4 * BATCH, BATCH)).await.unwrap();
    w.end_of_input().await.unwrap();
    let p = w.prepare_commit(5).await.unwrap();
    assert!(p.state.carried.is_empty());
    assert_eq!(p.state.version, 1, "no carried files: version 1 again");
    assert_eq!(p.committables.len(), DAYS, "one merged file per bucket");
    for c in &p.committables {
        assert_eq!(c.record_count, 25);
        assert_eq!(c.supersedes.len(), 5, "4 carried files and this vote's");
        assert!(c.final_path.contains(w.incarnation()));
    }
    sink.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(visible(&b).await, DAYS);
    assert_eq!(parquet_ids(&b).await, (0..5 * BATCH).collect::<Vec<_>>());
    let left = hidden(&b).await;
    assert!(
        left.is_empty(),
        "superseded carried files are removed after the commit: {left:?}"
    );
}

async fn the_target_size_triggers_the_merge(b: Backend) {
    // The size of one bucket's file of 5 records, measured in a scratch lake (the bytes are
    // the same on every backend).
    let scratch = Backend::local();
    let mut w = sink(&scratch, carry_all()).create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let one = w.prepare_commit(1).await.unwrap().state.carried;
    let size = one.iter().map(|c| c.size_bytes).max().unwrap();

    // Three files of a bucket reach the target, two do not.
    let policy = MergePolicy::new(1024 * 1024)
        .with_target_bytes(size * 5 / 2)
        .with_max_visibility_delay(Duration::from_secs(3600));
    let sink = sink(&b, policy);
    let mut w = sink.create_writer();
    for n in 1..=3u64 {
        w.write(&batch((n as i64 - 1) * BATCH, BATCH))
            .await
            .unwrap();
        let p = w.prepare_commit(n).await.unwrap();
        sink.committer().commit_all(&p.committables).await.unwrap();
        if n < 3 {
            assert!(p.committables.is_empty(), "checkpoint {n}");
            assert_eq!(visible(&b).await, 0);
        } else {
            assert_eq!(p.committables.len(), DAYS, "one merged file per bucket");
            assert!(p.state.carried.is_empty());
        }
    }
    assert_eq!(parquet_ids(&b).await, (0..3 * BATCH).collect::<Vec<_>>());
    assert!(hidden(&b).await.is_empty());
}

async fn visibility_delay_bounds_the_wait(b: Backend) {
    let delay = Duration::from_millis(300);
    let sink = sink(&b, carry_all().with_max_visibility_delay(delay));
    let mut w = sink.create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let p = w.prepare_commit(1).await.unwrap();
    assert!(p.committables.is_empty());
    // A vote before the delay has passed keeps carrying.
    w.write(&batch(BATCH, BATCH)).await.unwrap();
    let p = w.prepare_commit(2).await.unwrap();
    assert!(p.committables.is_empty());
    assert_eq!(p.state.carried.len(), 2 * DAYS);
    tokio::time::sleep(delay + Duration::from_millis(50)).await;
    // The first vote after it hands out every bucket's files, merged.
    let p = w.prepare_commit(3).await.unwrap();
    assert_eq!(p.committables.len(), DAYS);
    assert!(p.state.carried.is_empty());
    sink.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(parquet_ids(&b).await, (0..2 * BATCH).collect::<Vec<_>>());

    // A lone due file: on local disk committed as it is, under its own name, without a
    // rewrite; on an object store rewritten into a new file (a hidden object cannot be
    // renamed), which supersedes it.
    w.write(&batch(2 * BATCH, BATCH)).await.unwrap();
    let carried = w.prepare_commit(4).await.unwrap().state.carried;
    tokio::time::sleep(delay + Duration::from_millis(50)).await;
    let p = w.prepare_commit(5).await.unwrap();
    assert_eq!(p.committables.len(), DAYS);
    let in_place = b.storage.commits_carried_in_place();
    assert_eq!(in_place, b.name == "local");
    for c in &p.committables {
        let lone = carried.iter().find(|f| f.bucket == c.bucket).unwrap();
        if in_place {
            assert_eq!(c.final_path, lone.final_path);
            assert_eq!(
                c.pending,
                PendingHandle::LocalFile {
                    in_progress_path: lone.in_progress_path.clone()
                }
            );
            assert!(c.supersedes.is_empty());
        } else {
            assert_ne!(c.final_path, lone.final_path);
            assert!(c.final_path.contains(w.incarnation()));
            assert_eq!(c.supersedes, vec![lone.in_progress_path.clone()]);
            assert_eq!(c.record_count, lone.record_count);
            match &c.pending {
                PendingHandle::Multipart { .. } => assert!(b.multipart),
                PendingHandle::Staged { staging_path } => {
                    assert!(!b.multipart);
                    assert_ne!(staging_path, &lone.in_progress_path);
                }
                other => panic!("{other:?}"),
            }
        }
    }
    sink.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(parquet_ids(&b).await, (0..3 * BATCH).collect::<Vec<_>>());
    assert!(hidden(&b).await.is_empty());
}

/// Crash point 1: before the manifest of n. Restore from n−1 keeps n−1's carried files and
/// removes n's (unreferenced); the replay carries n's records again, once.
async fn crash_before_the_manifest_keeps_the_previous_carried_files(b: Backend) {
    let sink = sink(&b, carry_all());
    let mut w = sink.create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let p1 = w.prepare_commit(1).await.unwrap();
    w.write(&batch(BATCH, BATCH)).await.unwrap();
    let p2 = w.prepare_commit(2).await.unwrap(); // never stored: the crash
    drop(w);
    let r = sink.restore_writer(Some(&p1.state), &[]).await.unwrap();
    let removed: BTreeSet<String> = r.removed_leftovers.iter().cloned().collect();
    let of_2: BTreeSet<String> = p2
        .state
        .carried
        .iter()
        .filter(|c| c.checkpoint_id == 2)
        .map(|c| c.in_progress_path.clone())
        .collect();
    assert_eq!(removed, of_2, "n's carried files go, n−1's stay");
    assert_eq!(r.writer.carried_files(), p1.state.carried.as_slice());
    assert_eq!(r.writer.snapshot_state(), p1.state);
    for c in &p1.state.carried {
        assert!(hidden_exists(&b, &c.in_progress_path).await);
    }
    for c in &of_2 {
        assert!(!hidden_exists(&b, c).await);
    }
    // Replay from n−1 and end.
    let mut w = r.writer;
    w.write(&batch(BATCH, BATCH)).await.unwrap();
    w.end_of_input().await.unwrap();
    let p = w.prepare_commit(2).await.unwrap();
    sink.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(parquet_ids(&b).await, (0..2 * BATCH).collect::<Vec<_>>());
    assert!(hidden(&b).await.is_empty());
}

/// Crash point 2: after the manifest of n that merges, before its commit.
async fn crash_after_the_manifest_commits_the_merged_file_then_removes_the_carried_ones(
    b: Backend,
) {
    crash_after_the_manifest(b, false).await;
}

/// Crash point 3: between the commit of the merged file and the removal of the superseded
/// carried files.
async fn crash_between_the_merged_commit_and_the_removal_removes_them_at_restore(b: Backend) {
    crash_after_the_manifest(b, true).await;
}

async fn crash_after_the_manifest(b: Backend, removal_lost: bool) {
    {
        let sink = sink(&b, carry_all());
        let mut w = sink.create_writer();
        w.write(&batch(0, BATCH)).await.unwrap();
        let _ = w.prepare_commit(1).await.unwrap();
        w.write(&batch(BATCH, BATCH)).await.unwrap();
        w.end_of_input().await.unwrap();
        let p2 = w.prepare_commit(2).await.unwrap();
        drop(w);
        if removal_lost {
            // The commit ran; the crash came before the superseded files were removed.
            let mut saved: Vec<(String, Vec<u8>)> = Vec::new();
            for p in p2.committables.iter().flat_map(|c| c.supersedes.iter()) {
                saved.push((p.clone(), b.storage.read_hidden(p).await.unwrap().to_vec()));
            }
            sink.committer().commit_all(&p2.committables).await.unwrap();
            for (p, _) in &saved {
                assert!(!hidden_exists(&b, p).await, "removed after the commit: {p}");
            }
            for (p, bytes) in saved {
                put_raw(&b, &p, bytes).await;
            }
        }
        let r = sink
            .restore_writer(Some(&p2.state), &p2.committables)
            .await
            .unwrap();
        assert_eq!(r.commit_outcomes.len(), DAYS);
        assert_eq!(
            parquet_ids(&b).await,
            (0..2 * BATCH).collect::<Vec<_>>(),
            "removal lost: {removal_lost}"
        );
        let left = hidden(&b).await;
        assert!(left.is_empty(), "removal lost: {removal_lost}: {left:?}");
    }
}

async fn a_damaged_carried_file_fails_the_vote_loudly(b: Backend) {
    let sink = sink(&b, carry_all());
    let mut w = sink.create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let p1 = w.prepare_commit(1).await.unwrap();
    let victim = &p1.state.carried[0].in_progress_path;
    let mut bytes = b.storage.read_hidden(victim).await.unwrap().to_vec();
    bytes[4] ^= 0xff;
    put_raw(&b, victim, bytes).await;
    w.end_of_input().await.unwrap();
    let err = w.prepare_commit(2).await.unwrap_err();
    assert!(matches!(err, Error::DataLost { .. }), "{err:?}");
    assert_eq!(visible(&b).await, 0);
}

async fn a_restored_sink_without_the_merge_hands_carried_files_out(b: Backend) {
    let mut w = sink(&b, carry_all()).create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let p1 = w.prepare_commit(1).await.unwrap();
    drop(w);
    let plain = b
        .sink()
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let mut w = plain
        .restore_writer(Some(&p1.state), &[])
        .await
        .unwrap()
        .writer;
    let p = w.prepare_commit(2).await.unwrap();
    assert_eq!(p.committables.len(), DAYS);
    assert!(p.state.carried.is_empty());
    plain.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(parquet_ids(&b).await, (0..BATCH).collect::<Vec<_>>());
    assert!(hidden(&b).await.is_empty());
}

/// `rows` records from `start` in the bucket `day=2026-12-01`, whose payloads do not
/// compress: about 70 bytes each in the Parquet file.
fn incompressible(start: i64, rows: i64) -> RecordBatch {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ start as u64;
    let mut hex = || {
        (0..4)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{x:016x}")
            })
            .collect::<String>()
    };
    let ids: Vec<i64> = (start..start + rows).collect();
    RecordBatch::try_new(
        common::schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(vec!["2026-12-01"; rows as usize])),
            Arc::new(StringArray::from(
                (0..rows).map(|_| hex()).collect::<Vec<String>>(),
            )),
        ],
    )
    .unwrap()
}

/// On an object store a carried file is one hidden object: not visible, listed as this
/// writer's own leftover, read back whole, and gone once the merged file is committed. On S3
/// a file that reached the part size (a part uploaded) is committed as usual instead, and a
/// lone due file is re-uploaded rather than renamed.
async fn object_stores_carry_hidden_objects_below_the_part_size(b: Backend) {
    // Above the part size of the test backends (S3's minimum, 5 MiB), below the threshold.
    const BIG: i64 = 200_000;
    assert!(BIG * 64 > 2 * ObjectStorage::MIN_PART_SIZE_BYTES as i64);
    let policy = MergePolicy::new(256 * 1024 * 1024)
        .with_target_bytes(u64::MAX)
        .with_max_visibility_delay(Duration::from_secs(3600));
    let sink = sink(&b, policy);
    let mut w = sink.create_writer();
    w.write(&incompressible(0, BIG)).await.unwrap();
    w.write(&batch(BIG, BATCH)).await.unwrap();
    let p1 = w.prepare_commit(1).await.unwrap();
    let big_size = if b.multipart {
        // The big file uploaded parts: it cannot be carried and is committed as usual.
        assert_eq!(p1.committables.len(), 1, "{:?}", p1.committables);
        let c = &p1.committables[0];
        assert_eq!(c.bucket.as_str(), "day=2026-12-01");
        assert!(c.size_bytes > ObjectStorage::MIN_PART_SIZE_BYTES as u64);
        assert!(c.supersedes.is_empty());
        let PendingHandle::Multipart { parts, .. } = &c.pending else {
            panic!("{:?}", c.pending)
        };
        assert!(parts.len() >= 2, "{parts:?}");
        assert_eq!(p1.state.carried.len(), DAYS);
        c.size_bytes
    } else {
        // Without multipart uploads nothing goes out before the vote: every file is small
        // enough.
        assert!(p1.committables.is_empty(), "{:?}", p1.committables);
        assert_eq!(p1.state.carried.len(), DAYS + 1);
        let big = p1
            .state
            .carried
            .iter()
            .find(|c| c.bucket.as_str() == "day=2026-12-01")
            .unwrap();
        big.size_bytes
    };
    assert!(big_size > ObjectStorage::MIN_PART_SIZE_BYTES as u64);
    sink.committer().commit_all(&p1.committables).await.unwrap();

    // Each carried file is a hidden object of the shape the writer writes, this writer's,
    // never visible, read back whole; no multipart upload is left behind.
    let leftovers = b.storage.list_leftovers().await.unwrap();
    let visible_paths: BTreeSet<String> = b
        .storage
        .list_visible()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.path)
        .collect();
    assert_eq!(leftovers.len(), p1.state.carried.len(), "{leftovers:?}");
    for c in &p1.state.carried {
        let l = leftovers
            .iter()
            .find(|l| l.path == c.in_progress_path)
            .unwrap_or_else(|| panic!("{} is not listed: {leftovers:?}", c.in_progress_path));
        assert_eq!(l.name.as_ref().unwrap().writer_id, sink.writer_id());
        assert_eq!(l.final_path, c.final_path);
        assert_eq!(l.size_bytes, c.size_bytes);
        assert!(!visible_paths.contains(&c.in_progress_path));
        assert!(!visible_paths.contains(&c.final_path));
        let bytes = b.storage.read_hidden(&c.in_progress_path).await.unwrap();
        assert_eq!(bytes.len() as u64, c.size_bytes);
        assert_eq!(crc32c::crc32c(&bytes), c.crc32c);
    }

    // The end of the input: every bucket's lone carried file is due, and re-uploaded into a
    // new file that supersedes it.
    w.end_of_input().await.unwrap();
    let p2 = w.prepare_commit(2).await.unwrap();
    assert!(p2.state.carried.is_empty());
    assert_eq!(p2.committables.len(), p1.state.carried.len());
    for c in &p2.committables {
        let lone = p1
            .state
            .carried
            .iter()
            .find(|f| f.bucket == c.bucket)
            .unwrap();
        assert_eq!(c.supersedes, vec![lone.in_progress_path.clone()]);
        assert_ne!(c.final_path, lone.final_path);
        assert_eq!(c.record_count, lone.record_count);
    }
    sink.committer().commit_all(&p2.committables).await.unwrap();
    for c in &p1.state.carried {
        assert!(
            !hidden_exists(&b, &c.in_progress_path).await,
            "{} outlived the merged commit",
            c.in_progress_path
        );
    }
    let left = hidden(&b).await;
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(visible(&b).await, DAYS + 1);
    // Every record exactly once, read back with the Parquet reader.
    b.assert_exactly_once(&FileFormat::parquet(), BIG + BATCH)
        .await;
}

#[test]
fn the_merge_is_refused_where_it_cannot_work() {
    let dir = tempfile::tempdir().unwrap();
    let err = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::json_lines())
        .merge_small_files(MergePolicy::default())
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("Parquet")),
        "{err:?}"
    );
    let err = Sink::local(dir.path())
        .unwrap()
        .merge_small_files(MergePolicy::new(0))
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
    // Object stores take it (step 15); a Delta table does not (`Sink::for_table`).
    Sink::builder_shared(Backend::memory().storage)
        .merge_small_files(MergePolicy::default())
        .build()
        .unwrap();
    let d = MergePolicy::default();
    assert_eq!(d.small_bytes_max, 16 * 1024 * 1024);
    assert_eq!(d.target_bytes, 8 * d.small_bytes_max);
    assert_eq!(d.max_visibility_delay, Duration::from_secs(60));
}

/// A job stopped between checkpoints with carried files: `filesink ls` shows them as needed
/// (`carried`), not as leftovers; `filesink abort` leaves them; the job's next run merges them.
async fn ls_and_abort_leave_carried_files_alone(b: Backend) {
    let (url, env) = b.cli_url();
    let run_ok = |args: &[&str]| run_expect_in(args, &env, 0);
    let sink = sink(&b, carry_all());
    {
        let mut job = Coordinator::open(&sink, "merging", 1).await.unwrap();
        job.write(&batch(0, BATCH)).await.unwrap();
        job.checkpoint(&BATCH).await.unwrap();
        job.write(&batch(BATCH, BATCH)).await.unwrap();
        job.checkpoint(&(2 * BATCH)).await.unwrap();
    }
    let carried: BTreeSet<String> = hidden(&b).await.into_iter().collect();
    assert_eq!(carried.len(), 2 * DAYS);
    assert_eq!(visible(&b).await, 0);

    let ls = json_of(&run_ok(&["ls", &url, "--json"]));
    assert!(ls["leftovers"].as_array().unwrap().is_empty(), "{ls}");
    let referenced: BTreeSet<String> = ls["referenced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["kind"], "carried", "{r}");
            r["path"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(referenced, carried);
    let text = common::cli::stdout(&run_ok(&["ls", &url]));
    assert!(text.contains("carried"), "{text}");

    let a = json_of(&run_ok(&["abort", &url, "--json"]));
    assert!(a["remove"].as_array().unwrap().is_empty(), "{a}");
    for p in &carried {
        assert!(hidden_exists(&b, p).await, "abort removed carried file {p}");
    }

    // The job's next run carries them on and merges them at the end.
    let mut job = Coordinator::open(&sink, "merging", 1).await.unwrap();
    assert_eq!(job.source_position::<i64>().unwrap(), Some(2 * BATCH));
    job.write(&batch(2 * BATCH, BATCH)).await.unwrap();
    job.finish(&(3 * BATCH)).await.unwrap();
    b.assert_exactly_once(&FileFormat::parquet(), 3 * BATCH)
        .await;
    assert_eq!(visible(&b).await, DAYS);
    let left = hidden(&b).await;
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn ls_and_abort_leave_carried_files_alone_on_local_disk() {
    ls_and_abort_leave_carried_files_alone(Backend::local()).await;
}

#[tokio::test]
async fn ls_and_abort_leave_carried_files_alone_on_s3() {
    if let Some(b) = common::backend::s3_or_explain() {
        ls_and_abort_leave_carried_files_alone(b).await;
    }
}

#[tokio::test]
async fn ls_and_abort_leave_carried_files_alone_on_ceph() {
    if let Some(b) = common::backend::ceph_or_explain() {
        ls_and_abort_leave_carried_files_alone(b).await;
    }
}

#[tokio::test]
async fn cli_merges_small_files_on_s3() {
    if let Some(b) = common::backend::s3_or_explain() {
        cli_merges_small_files_on_an_object_store(b).await;
    }
}

#[tokio::test]
async fn cli_merges_small_files_on_ceph() {
    if let Some(b) = common::backend::ceph_or_explain() {
        cli_merges_small_files_on_an_object_store(b).await;
    }
}

/// `filesink ingest --merge-small-files` into `s3://`: every checkpoint's files are carried
/// as hidden objects and merged into one file at the end.
async fn cli_merges_small_files_on_an_object_store(b: Backend) {
    let (url, env) = b.cli_url();
    let input = common::cli::fixture("events.jsonl");
    run_expect_in(
        &[
            "ingest",
            s(&input),
            "--to",
            &url,
            "--checkpoint-every",
            "500rows",
            "--merge-small-files",
            "1MiB",
            "--max-visibility-delay",
            "1h",
            "--parallelism",
            "1",
        ],
        &env,
        0,
    );
    let files = b.visible().await;
    assert_eq!(
        files.len(),
        1,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let rows = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(files[0].1.clone()),
    )
    .unwrap()
    .metadata()
    .file_metadata()
    .num_rows();
    assert_eq!(rows, 5000, "every record of the input, once");
    let left = hidden(&b).await;
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn cli_merges_small_files_and_refuses_the_flag_where_it_cannot_work() {
    let dir = tempfile::tempdir().unwrap();
    let input = common::cli::fixture("events.jsonl");
    let lake = dir.path().join("lake");
    // Checkpoints of 500 rows: every file is small; the end merges them into one.
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "500rows",
        "--merge-small-files",
        "1MiB",
        "--max-visibility-delay",
        "1h",
        "--parallelism",
        "1",
    ]);
    assert_eq!(visible_files(&lake).len(), 1, "{:?}", visible_files(&lake));
    let file = std::fs::File::open(&visible_files(&lake)[0]).unwrap();
    let rows = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .metadata()
        .file_metadata()
        .num_rows();
    assert_eq!(rows, 5000, "every record of the input, once");
    assert!(hidden_files(&lake).is_empty());

    let usage = |extra: &[&str], needle: &str| {
        let out = dir.path().join(format!("refused{}", extra.len()));
        let mut args = vec!["ingest", s(&input), "--to", s(&out)];
        args.extend_from_slice(extra);
        let o = run_expect(&args, 2);
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(!out.exists(), "a refused run created {}", out.display());
    };
    usage(
        &["--merge-small-files", "1MiB", "--table", "delta"],
        "--table delta",
    );
    usage(
        &["--merge-small-files", "1MiB", "--format", "jsonl"],
        "Parquet",
    );
    usage(&["--max-visibility-delay", "10s"], "--merge-small-files");
    usage(
        &["--merge-small-files", "1MiB", "--merge-target", "0"],
        "at least 1 byte",
    );
    usage(&["--merge-small-files", "lots"], "lots");
}
