//! The pre-commit merge of small Parquet files (`docs/design/delta.md` section 11): carried
//! files stay hidden until a merged file that supersedes them is committed; every crash point
//! of the protocol page (`filesink::sink`, "Pre-commit merge: carried files") keeps every
//! record exactly once; operators' cleanup leaves carried files alone; the CLI flags.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::cli::{json_of, run_expect, run_ok, s, stderr};
use common::{assert_exactly_once, batch, hidden_files, read_ids, visible_files};
use filesink::bucket::HivePartitioner;
use filesink::{Coordinator, Error, FileFormat, MergePolicy, PendingHandle, Sink, WriterState};

/// Buckets of `common::batch`: `day=2026-11-25` to `day=2026-11-29`.
const DAYS: usize = 5;
/// Records per batch: 5 per bucket.
const BATCH: i64 = 25;

fn sink(dir: &Path, policy: MergePolicy) -> Sink {
    Sink::local(dir)
        .unwrap()
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

fn parquet_ids(dir: &Path) -> Vec<i64> {
    let mut ids: Vec<i64> = visible_files(dir)
        .iter()
        .flat_map(|f| read_ids(f, &FileFormat::parquet()))
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn carried_files_are_invisible_until_merged() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), carry_all());
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
        assert!(visible_files(dir.path()).is_empty(), "checkpoint {n}");
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
    assert_eq!(visible_files(dir.path()).len(), DAYS);
    assert_eq!(parquet_ids(dir.path()), (0..5 * BATCH).collect::<Vec<_>>());
    assert!(
        hidden_files(dir.path()).is_empty(),
        "superseded carried files are removed after the commit: {:?}",
        hidden_files(dir.path())
    );
}

#[tokio::test]
async fn the_target_size_triggers_the_merge() {
    // The size of one bucket's file of 5 records, measured in a scratch lake.
    let scratch = tempfile::tempdir().unwrap();
    let mut w = sink(scratch.path(), carry_all()).create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let one = w.prepare_commit(1).await.unwrap().state.carried;
    let size = one.iter().map(|c| c.size_bytes).max().unwrap();

    // Three files of a bucket reach the target, two do not.
    let dir = tempfile::tempdir().unwrap();
    let policy = MergePolicy::new(1024 * 1024)
        .with_target_bytes(size * 5 / 2)
        .with_max_visibility_delay(Duration::from_secs(3600));
    let sink = sink(dir.path(), policy);
    let mut w = sink.create_writer();
    for n in 1..=3u64 {
        w.write(&batch((n as i64 - 1) * BATCH, BATCH))
            .await
            .unwrap();
        let p = w.prepare_commit(n).await.unwrap();
        sink.committer().commit_all(&p.committables).await.unwrap();
        if n < 3 {
            assert!(p.committables.is_empty(), "checkpoint {n}");
            assert!(visible_files(dir.path()).is_empty());
        } else {
            assert_eq!(p.committables.len(), DAYS, "one merged file per bucket");
            assert!(p.state.carried.is_empty());
        }
    }
    assert_eq!(parquet_ids(dir.path()), (0..3 * BATCH).collect::<Vec<_>>());
    assert!(hidden_files(dir.path()).is_empty());
}

#[tokio::test]
async fn visibility_delay_bounds_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let delay = Duration::from_millis(300);
    let sink = sink(dir.path(), carry_all().with_max_visibility_delay(delay));
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
    assert_eq!(parquet_ids(dir.path()), (0..2 * BATCH).collect::<Vec<_>>());

    // A lone due file is committed as it is, under its own name, without a rewrite.
    w.write(&batch(2 * BATCH, BATCH)).await.unwrap();
    let carried = w.prepare_commit(4).await.unwrap().state.carried;
    tokio::time::sleep(delay + Duration::from_millis(50)).await;
    let p = w.prepare_commit(5).await.unwrap();
    assert_eq!(p.committables.len(), DAYS);
    for c in &p.committables {
        let lone = carried.iter().find(|f| f.bucket == c.bucket).unwrap();
        assert_eq!(c.final_path, lone.final_path);
        assert_eq!(
            c.pending,
            PendingHandle::LocalFile {
                in_progress_path: lone.in_progress_path.clone()
            }
        );
        assert!(c.supersedes.is_empty());
    }
    sink.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(parquet_ids(dir.path()), (0..3 * BATCH).collect::<Vec<_>>());
    assert!(hidden_files(dir.path()).is_empty());
}

/// Crash point 1: before the manifest of n. Restore from n−1 keeps n−1's carried files and
/// removes n's (unreferenced); the replay carries n's records again, once.
#[tokio::test]
async fn crash_before_the_manifest_keeps_the_previous_carried_files() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), carry_all());
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
        assert!(dir.path().join(&c.in_progress_path).exists());
    }
    // Replay from n−1 and end.
    let mut w = r.writer;
    w.write(&batch(BATCH, BATCH)).await.unwrap();
    w.end_of_input().await.unwrap();
    let p = w.prepare_commit(2).await.unwrap();
    sink.committer().commit_all(&p.committables).await.unwrap();
    assert_eq!(parquet_ids(dir.path()), (0..2 * BATCH).collect::<Vec<_>>());
    assert!(hidden_files(dir.path()).is_empty());
}

/// Crash points 2 and 3: after the manifest of n that merges, before its commit, or between
/// the commit and the removal of the superseded carried files.
#[tokio::test]
async fn crash_after_the_manifest_commits_the_merged_file_then_removes_the_carried_ones() {
    for removal_lost in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path(), carry_all());
        let mut w = sink.create_writer();
        w.write(&batch(0, BATCH)).await.unwrap();
        let _ = w.prepare_commit(1).await.unwrap();
        w.write(&batch(BATCH, BATCH)).await.unwrap();
        w.end_of_input().await.unwrap();
        let p2 = w.prepare_commit(2).await.unwrap();
        drop(w);
        if removal_lost {
            // The commit ran; the crash came before the superseded files were removed.
            let saved: Vec<(String, Vec<u8>)> = p2
                .committables
                .iter()
                .flat_map(|c| c.supersedes.iter())
                .map(|p| (p.clone(), std::fs::read(dir.path().join(p)).unwrap()))
                .collect();
            sink.committer().commit_all(&p2.committables).await.unwrap();
            for (p, bytes) in saved {
                std::fs::write(dir.path().join(p), bytes).unwrap();
            }
        }
        let r = sink
            .restore_writer(Some(&p2.state), &p2.committables)
            .await
            .unwrap();
        assert_eq!(r.commit_outcomes.len(), DAYS);
        assert_eq!(
            parquet_ids(dir.path()),
            (0..2 * BATCH).collect::<Vec<_>>(),
            "removal lost: {removal_lost}"
        );
        assert!(
            hidden_files(dir.path()).is_empty(),
            "removal lost: {removal_lost}: {:?}",
            hidden_files(dir.path())
        );
    }
}

#[tokio::test]
async fn a_damaged_carried_file_fails_the_vote_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), carry_all());
    let mut w = sink.create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let p1 = w.prepare_commit(1).await.unwrap();
    let victim = dir.path().join(&p1.state.carried[0].in_progress_path);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[4] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    w.end_of_input().await.unwrap();
    let err = w.prepare_commit(2).await.unwrap_err();
    assert!(matches!(err, Error::DataLost { .. }), "{err:?}");
    assert!(visible_files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_restored_sink_without_the_merge_hands_carried_files_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = sink(dir.path(), carry_all()).create_writer();
    w.write(&batch(0, BATCH)).await.unwrap();
    let p1 = w.prepare_commit(1).await.unwrap();
    drop(w);
    let plain = Sink::local(dir.path())
        .unwrap()
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
    assert_eq!(parquet_ids(dir.path()), (0..BATCH).collect::<Vec<_>>());
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
    let storage = common::backend::Backend::memory().storage;
    let err = Sink::builder_shared(storage)
        .merge_small_files(MergePolicy::default())
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotSupported(m) if m == "pre-commit merge is not supported on object stores yet"),
        "{err:?}"
    );
    let d = MergePolicy::default();
    assert_eq!(d.small_bytes_max, 16 * 1024 * 1024);
    assert_eq!(d.target_bytes, 8 * d.small_bytes_max);
    assert_eq!(d.max_visibility_delay, Duration::from_secs(60));
}

/// A job stopped between checkpoints with carried files: `filesink ls` shows them as needed
/// (`carried`), not as leftovers; `filesink abort` leaves them; the job's next run merges them.
#[tokio::test]
async fn ls_and_abort_leave_carried_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let sink = sink(&lake, carry_all());
    {
        let mut job = Coordinator::open(&sink, "merging", 1).await.unwrap();
        job.write(&batch(0, BATCH)).await.unwrap();
        job.checkpoint(&BATCH).await.unwrap();
        job.write(&batch(BATCH, BATCH)).await.unwrap();
        job.checkpoint(&(2 * BATCH)).await.unwrap();
    }
    let carried: BTreeSet<String> = hidden_files(&lake)
        .iter()
        .map(|p| p.strip_prefix(&lake).unwrap().to_str().unwrap().to_string())
        .collect();
    assert_eq!(carried.len(), 2 * DAYS);
    assert!(visible_files(&lake).is_empty());

    let ls = json_of(&run_ok(&["ls", s(&lake), "--json"]));
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
    let text = common::cli::stdout(&run_ok(&["ls", s(&lake)]));
    assert!(text.contains("carried"), "{text}");

    let a = json_of(&run_ok(&["abort", s(&lake), "--json"]));
    assert!(a["remove"].as_array().unwrap().is_empty(), "{a}");
    for p in &carried {
        assert!(lake.join(p).exists(), "abort removed carried file {p}");
    }

    // The job's next run carries them on and merges them at the end.
    let mut job = Coordinator::open(&sink, "merging", 1).await.unwrap();
    assert_eq!(job.source_position::<i64>().unwrap(), Some(2 * BATCH));
    job.write(&batch(2 * BATCH, BATCH)).await.unwrap();
    job.finish(&(3 * BATCH)).await.unwrap();
    assert_exactly_once(&lake, &FileFormat::parquet(), 3 * BATCH);
    assert_eq!(visible_files(&lake).len(), DAYS);
    assert!(hidden_files(&lake).is_empty(), "{:?}", hidden_files(&lake));
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
