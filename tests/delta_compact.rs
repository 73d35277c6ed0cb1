//! Compaction of a Delta table (`filesink::maintain::compact`, `filesink compact`): small
//! files rewritten into files of the target size and swapped in by one log entry; readers of
//! every version see each row once; a crash at any step of a round leaves the table correct
//! and the next run finishes or abandons the round; a round whose input another writer
//! removed is abandoned and its output deleted.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::backend::{ceph_or_explain, Backend};
use common::delta::{assert_table_exactly_once, decode, read_log, table_id_counts};
use common::delta_py::{reader_or_explain, table_location};
use filesink::maintain::{compact, CompactOptions};
use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
use filesink::storage::Storage;
use filesink::table::delta::DeltaOptions;
use filesink::{Coordinator, FileFormat};

const PER_CHECKPOINT: i64 = 100;

/// `checkpoints` checkpoints of job `orders` into a table partitioned by `day` (5 values):
/// five small files per checkpoint.
async fn appends(storage: Arc<dyn Storage>, single_writer: bool, first: i64, checkpoints: i64) {
    let mut c = orders(storage, single_writer).await;
    for k in 0..checkpoints {
        let start = first + k * PER_CHECKPOINT;
        c.write(&common::batch(start, PER_CHECKPOINT))
            .await
            .unwrap();
        c.checkpoint(&(start + PER_CHECKPOINT)).await.unwrap();
    }
    c.close().await.unwrap();
}

/// Job `orders` of a table partitioned by `day`.
async fn orders(storage: Arc<dyn Storage>, single_writer: bool) -> Coordinator {
    let sink = filesink::Sink::builder_shared(storage)
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    Coordinator::builder(&sink, "orders")
        .delta_table(
            DeltaOptions::new()
                .schema(common::schema())
                .partition_by(["day"])
                .single_writer(single_writer),
        )
        .open()
        .await
        .unwrap()
}

fn options(b: &Backend) -> CompactOptions {
    CompactOptions::new()
        .target_size_bytes(1024 * 1024)
        .single_writer(!b.conditional_put)
}

/// Live files per partition directory.
async fn files_per_partition(storage: &dyn Storage) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for path in read_log(storage).await.live.keys() {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        *out.entry(dir).or_insert(0) += 1;
    }
    out
}

async fn compaction_swaps_small_files_for_one_per_partition(b: Backend) {
    let checkpoints = 12;
    appends(b.storage.clone(), !b.conditional_put, 0, checkpoints).await;
    let n = checkpoints * PER_CHECKPOINT;
    assert!(files_per_partition(b.storage.as_ref())
        .await
        .values()
        .all(|f| *f == 12));

    let report = compact(b.storage.clone(), &options(&b)).await.unwrap();
    assert_eq!(report.bins.len(), 5, "{report:?}");
    assert_eq!(report.records, n as u64);
    assert_eq!(report.version, Some(checkpoints));
    assert!(!report.abandoned);
    let per = files_per_partition(b.storage.as_ref()).await;
    assert_eq!(per.len(), 5);
    assert!(per.values().all(|f| *f == 1), "{per:?}");
    assert_table_exactly_once(b.storage.as_ref(), n, b.name).await;

    // Nothing left to merge: a second round plans nothing and writes nothing.
    let again = compact(b.storage.clone(), &options(&b)).await.unwrap();
    assert!(
        again.bins.is_empty() && again.version.is_none(),
        "{again:?}"
    );
    // Appends go on after the compaction.
    appends(b.storage.clone(), !b.conditional_put, n, 2).await;
    assert_table_exactly_once(b.storage.as_ref(), n + 2 * PER_CHECKPOINT, b.name).await;

    let Some(reader) = reader_or_explain() else {
        return;
    };
    let location = table_location(&b);
    // Every version reads each of its rows once: before the compaction a prefix of
    // checkpoints, at the compaction's version all of them.
    for v in 0..=checkpoints {
        let upto = (v + 1).min(checkpoints) * PER_CHECKPOINT;
        assert_eq!(
            reader.ids(&location, Some(v)),
            (0..upto).collect::<Vec<_>>(),
            "[{}] version {v}",
            b.name
        );
    }
    let history = reader.history(&location);
    let optimize = history
        .iter()
        .find(|h| h["operation"] == "OPTIMIZE")
        .expect("an OPTIMIZE version");
    assert_eq!(optimize["isBlindAppend"], false);
    assert_eq!(
        reader.ids(&location, None),
        (0..n + 2 * PER_CHECKPOINT).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn compaction_swaps_small_files_for_one_per_partition_local() {
    compaction_swaps_small_files_for_one_per_partition(Backend::local()).await;
}

#[tokio::test]
async fn compaction_swaps_small_files_for_one_per_partition_ceph() {
    if let Some(b) = ceph_or_explain() {
        compaction_swaps_small_files_for_one_per_partition(b).await;
    }
}

/// A compaction run through a store that dies at `plan` (the process gone with it: its memory
/// dropped, its lease given up); asserts that the fault fired and the run failed.
async fn compact_crashing(b: &Backend, plan: FaultPlan, options: &CompactOptions, ctx: &str) {
    let faulty = FaultyStorage::new(b.storage.clone(), Some(plan));
    let result = compact(Arc::new(faulty.clone()), options).await;
    assert!(faulty.fired() && result.is_err(), "{ctx}: {result:?}");
    drop(faulty);
    filesink::storage::ownership::settle_releases().await;
}

/// A crash at every fault point a compaction round reaches (every occurrence, the call
/// applied or not): after the crash the table still holds every row once; the next run
/// finishes the round (or starts a new one), and the table is compacted, every row once, no
/// leftovers.
async fn crash_during_compaction(make: fn() -> Backend) {
    let checkpoints = 4;
    let n = checkpoints * PER_CHECKPOINT;
    let counting = {
        let b = make();
        appends(b.storage.clone(), false, 0, checkpoints).await;
        let counter = FaultyStorage::new(b.storage.clone(), None);
        compact(Arc::new(counter.clone()), &options(&b))
            .await
            .unwrap();
        counter.counts()
    };
    let mut cases = 0;
    for (&point, &reached) in &counting {
        for occurrence in 1..=reached {
            for mode in [FaultMode::Before, FaultMode::AfterApplied] {
                let b = make();
                appends(b.storage.clone(), false, 0, checkpoints).await;
                let ctx = format!("[{}] crash at {point:?} #{occurrence} ({mode:?})", b.name);
                let plan = FaultPlan {
                    point,
                    occurrence,
                    mode,
                };
                compact_crashing(&b, plan, &options(&b), &ctx).await;
                assert_table_exactly_once(b.storage.as_ref(), n, &ctx).await;

                compact(b.storage.clone(), &options(&b))
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: the next run failed: {e}"));
                assert_table_exactly_once(b.storage.as_ref(), n, &ctx).await;
                let per = files_per_partition(b.storage.as_ref()).await;
                assert!(
                    per.values().all(|f| *f == 1),
                    "{ctx}: not compacted: {per:?}"
                );
                let left = b.storage.list_leftovers().await.unwrap();
                assert!(left.is_empty(), "{ctx}: leftovers: {left:?}");
                cases += 1;
            }
        }
    }
    eprintln!("compaction crashes: {cases} cases");
    assert!(cases > 10);
}

#[tokio::test]
async fn crash_during_compaction_at_every_point_leaves_rows_exactly_once_local() {
    crash_during_compaction(Backend::local).await;
}

#[tokio::test]
async fn crash_during_compaction_at_every_point_leaves_rows_exactly_once_in_memory() {
    crash_during_compaction(Backend::memory).await;
}

/// A round of the `compact` job that dies after its manifest and file commit, before its log
/// entry; returns its manifest.
async fn round_crashed_before_its_entry(b: &Backend) -> filesink::job::manifest::Manifest {
    let plan = FaultPlan {
        point: FaultPoint::PutLogEntry,
        occurrence: 1,
        mode: FaultMode::Before,
    };
    compact_crashing(b, plan, &options(b), "a round dead before its entry").await;
    filesink::job::manifest::latest_manifest(b.storage.as_ref(), "compact", None)
        .await
        .unwrap()
        .expect("the round's manifest")
}

/// Another engine's entry at the table's next version (`text`: its actions, one per line).
async fn put_next_entry(storage: &dyn Storage, text: &str) {
    let next = read_log(storage).await.versions.len();
    storage
        .put_metadata(&format!("_delta_log/{next:020}.json"), text.as_bytes())
        .await
        .unwrap();
}

/// Another engine's DELETE of the file `path` (as the log has it).
fn remove_action(path: &str) -> String {
    format!(
        "{{\"remove\":{{\"path\":{},\"deletionTimestamp\":1,\"dataChange\":true}}}}\n",
        serde_json::to_string(path).unwrap()
    )
}

#[tokio::test]
async fn a_round_whose_input_was_removed_meanwhile_is_abandoned_and_its_output_deleted() {
    let b = Backend::local();
    let checkpoints = 4;
    appends(b.storage.clone(), false, 0, checkpoints).await;
    let round = round_crashed_before_its_entry(&b).await;
    let outputs: Vec<String> = round
        .committables
        .iter()
        .map(|c| c.final_path.clone())
        .collect();
    let removed = round.table.as_ref().unwrap().removes[0].clone();

    // Meanwhile another engine deletes one of the round's inputs.
    put_next_entry(b.storage.as_ref(), &remove_action(&removed.path)).await;
    let gone: Vec<i64> = common::ids_in_bytes(
        b.storage
            .read_data_file(&decode(&removed.path))
            .await
            .unwrap()
            .to_vec(),
        &FileFormat::parquet(),
    );

    // The next run abandons the round: its outputs are deleted, never in the log; then it
    // plans a new round on what is live.
    let report = compact(b.storage.clone(), &options(&b)).await.unwrap();
    assert!(
        !report.abandoned,
        "the new round is not abandoned: {report:?}"
    );
    for path in &outputs {
        let err = b.storage.read_data_file(path).await.unwrap_err();
        assert!(
            matches!(err, filesink::Error::DataLost { .. }),
            "{path}: {err}"
        );
        assert!(!read_log(b.storage.as_ref()).await.live.contains_key(path));
    }
    let counts = table_id_counts(b.storage.as_ref()).await;
    for id in 0..checkpoints * PER_CHECKPOINT {
        let expected = usize::from(!gone.contains(&id));
        assert_eq!(counts.get(&id).copied().unwrap_or(0), expected, "id {id}");
    }
}

/// A crash at every fault point of the run that abandons a round (every occurrence, the call
/// applied or not): its restore finds an input of the round removed by another engine,
/// abandons the round, records that with checkpoint N+1 and deletes the round's output.
/// Whatever step it dies at, the table holds every live row once; the next run abandons the
/// round again (from N) or deletes the recorded output again (from N+1); and the round stays
/// abandoned when another engine then restores its input.
async fn crash_while_abandoning_a_round(make: fn() -> Backend) {
    let checkpoints = 4;
    let n = checkpoints * PER_CHECKPOINT;
    let no_new_rounds = |b: &Backend| options(b).min_files(1000);
    // The table with a round dead before its entry and one of its inputs deleted since;
    // returns the round's outputs, the deleted input's ids, and the entry that restores it.
    async fn abandonable(b: &Backend, checkpoints: i64) -> (Vec<String>, Vec<i64>, String) {
        appends(b.storage.clone(), false, 0, checkpoints).await;
        let round = round_crashed_before_its_entry(b).await;
        let outputs = round
            .committables
            .iter()
            .map(|c| c.final_path.clone())
            .collect();
        let removed = round.table.as_ref().unwrap().removes[0].clone();
        let gone = common::ids_in_bytes(
            b.storage
                .read_data_file(&decode(&removed.path))
                .await
                .unwrap()
                .to_vec(),
            &FileFormat::parquet(),
        );
        put_next_entry(b.storage.as_ref(), &remove_action(&removed.path)).await;
        let restore = format!(
            "{{\"add\":{{\"path\":{},\"partitionValues\":{},\"size\":{},\"modificationTime\":1,\
             \"dataChange\":true}}}}\n",
            serde_json::to_string(&removed.path).unwrap(),
            serde_json::to_string(&removed.partition_values).unwrap(),
            removed.size
        );
        (outputs, gone, restore)
    }
    async fn assert_live_rows_once(storage: &dyn Storage, n: i64, gone: &[i64], ctx: &str) {
        let counts = table_id_counts(storage).await;
        for id in 0..n {
            let expected = usize::from(!gone.contains(&id));
            assert_eq!(
                counts.get(&id).copied().unwrap_or(0),
                expected,
                "{ctx}: id {id}"
            );
        }
    }
    let counting = {
        let b = make();
        let (outputs, _, _) = abandonable(&b, checkpoints).await;
        let counter = FaultyStorage::new(b.storage.clone(), None);
        let report = compact(Arc::new(counter.clone()), &no_new_rounds(&b))
            .await
            .unwrap();
        assert!(report.restored && report.bins.is_empty(), "{report:?}");
        // The run abandoned the round: its output is gone, and the job's latest checkpoint
        // records it.
        for path in &outputs {
            assert!(b.storage.read_data_file(path).await.is_err(), "{path}");
        }
        let recorded =
            filesink::job::manifest::latest_manifest(b.storage.as_ref(), "compact", None)
                .await
                .unwrap()
                .unwrap();
        assert_eq!(recorded.table.as_ref().unwrap().abandoned, outputs);
        counter.counts()
    };
    assert!(
        counting.contains_key(&FaultPoint::PutManifest)
            && counting.contains_key(&FaultPoint::RemoveDataFile),
        "the run records the abandonment and deletes the output: {counting:?}"
    );
    let mut cases = 0;
    for (&point, &reached) in &counting {
        for occurrence in 1..=reached {
            for mode in [FaultMode::Before, FaultMode::AfterApplied] {
                let b = make();
                let (outputs, gone, restore) = abandonable(&b, checkpoints).await;
                let ctx = format!("[{}] crash at {point:?} #{occurrence} ({mode:?})", b.name);
                let plan = FaultPlan {
                    point,
                    occurrence,
                    mode,
                };
                compact_crashing(&b, plan, &no_new_rounds(&b), &ctx).await;
                assert_live_rows_once(b.storage.as_ref(), n, &gone, &ctx).await;

                compact(b.storage.clone(), &no_new_rounds(&b))
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: the next run failed: {e}"));
                assert_live_rows_once(b.storage.as_ref(), n, &gone, &ctx).await;
                for path in &outputs {
                    let err = b.storage.read_data_file(path).await.unwrap_err();
                    assert!(
                        matches!(err, filesink::Error::DataLost { .. }),
                        "{ctx}: {path}: {err}"
                    );
                }
                let left = b.storage.list_leftovers().await.unwrap();
                assert!(left.is_empty(), "{ctx}: leftovers: {left:?}");

                // The round stays abandoned: its input live again, the job goes on with a new
                // round, every row once.
                put_next_entry(b.storage.as_ref(), &restore).await;
                assert_table_exactly_once(b.storage.as_ref(), n, &ctx).await;
                let report = compact(b.storage.clone(), &options(&b))
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: the round after failed: {e}"));
                assert!(
                    !report.abandoned && report.version.is_some() && !report.bins.is_empty(),
                    "{ctx}: {report:?}"
                );
                assert_table_exactly_once(b.storage.as_ref(), n, &ctx).await;
                let per = files_per_partition(b.storage.as_ref()).await;
                assert!(
                    per.values().all(|f| *f == 1),
                    "{ctx}: not compacted: {per:?}"
                );
                cases += 1;
            }
        }
    }
    eprintln!("crashes while abandoning: {cases} cases");
    // Each occurrence of each point the run reaches, before and after the call.
    assert_eq!(cases, 2 * counting.values().sum::<usize>());
    assert!(cases >= 10, "{counting:?}");
}

#[tokio::test]
async fn crash_while_abandoning_a_round_at_every_point_leaves_live_rows_once_local() {
    crash_while_abandoning_a_round(Backend::local).await;
}

#[tokio::test]
async fn crash_while_abandoning_a_round_at_every_point_leaves_live_rows_once_in_memory() {
    crash_while_abandoning_a_round(Backend::memory).await;
}

#[tokio::test]
async fn orphaned_compaction_output_is_a_leftover_abort_removes() {
    let b = Backend::local();
    appends(b.storage.clone(), false, 0, 4).await;
    // The round dies while it writes its output, before its manifest: the hidden output is
    // a leftover of the compaction job's writer.
    let faulty = FaultyStorage::new(
        b.storage.clone(),
        Some(FaultPlan {
            point: FaultPoint::Seal,
            occurrence: 1,
            mode: FaultMode::AfterApplied,
        }),
    );
    assert!(compact(Arc::new(faulty.clone()), &options(&b))
        .await
        .is_err());
    drop(faulty);
    filesink::storage::ownership::settle_releases().await;
    let left = b.storage.list_leftovers().await.unwrap();
    assert!(!left.is_empty(), "the crashed round left its output");
    let common::backend::Kind::Local(dir) = &b.kind else {
        unreachable!()
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(["abort", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = b.storage.list_leftovers().await.unwrap();
    assert!(left.is_empty(), "abort left: {left:?}");
    assert_table_exactly_once(b.storage.as_ref(), 4 * PER_CHECKPOINT, "after abort").await;
    assert_eq!(
        read_log(b.storage.as_ref()).await.versions.len(),
        4,
        "abort writes no entry"
    );
}

/// `Ingest::compact_in_background`: rounds run while the ingest appends (every 10 ms, so
/// several fall between its checkpoints) and once after its last checkpoint. Table versions
/// (about a dozen, appends and rounds alike) read a prefix of the input once; at the end each
/// partition holds one file.
async fn an_ingest_compacts_its_table_in_the_background(b: Backend) {
    use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let n: i64 = 6_000;
    let text: String = (0..n)
        .map(|i| format!("{{\"id\":{i},\"day\":\"2026-11-{:02}\"}}\n", 25 + i % 5))
        .collect();
    std::fs::write(&input, text).unwrap();
    let summary = Ingest::new([Input::file(&input).unwrap()])
        .to_storage(b.storage.clone())
        .format(FileFormat::parquet())
        .partition_by(["day"])
        .job("events")
        .parallelism(1)
        .checkpoint_every(CheckpointEvery::Rows(200))
        .delta_table(DeltaOptions::new().single_writer(!b.conditional_put))
        .compact_in_background(
            CompactOptions::new().target_size_bytes(1024 * 1024),
            std::time::Duration::from_millis(10),
        )
        .run()
        .await
        .unwrap();
    assert_eq!(summary.status, IngestStatus::Finished);
    let c = summary.compaction.expect("a compaction summary");
    eprintln!("[{}] {c:?}", b.name);
    assert_eq!(c.job, "events_compact");
    assert_eq!(
        (c.failed, c.abandoned, c.busy),
        (0, 0, 0),
        "[{}] {c:?}",
        b.name
    );
    assert!(c.rounds >= 1 && c.files_removed > c.files_added, "{c:?}");
    let per = files_per_partition(b.storage.as_ref()).await;
    assert_eq!(per.len(), 5);
    assert!(per.values().all(|f| *f == 1), "[{}] {per:?}", b.name);
    assert_table_exactly_once(b.storage.as_ref(), n, b.name).await;

    let Some(reader) = reader_or_explain() else {
        return;
    };
    let location = table_location(&b);
    let log = read_log(b.storage.as_ref()).await;
    let mut rows = 0;
    // About a dozen versions (one delta-rs process each), the last among them.
    let step = log.versions.len().div_ceil(12).max(1);
    let last = log.versions.last().copied();
    for v in log
        .versions
        .iter()
        .copied()
        .filter(|v| *v as usize % step == 0 || Some(*v) == last)
    {
        let ids = reader.ids(&location, Some(v));
        assert_eq!(
            ids,
            (0..ids.len() as i64).collect::<Vec<_>>(),
            "[{}] version {v} is not a prefix of the input, each id once",
            b.name
        );
        assert!(ids.len() >= rows, "[{}] version {v} lost rows", b.name);
        rows = ids.len();
    }
    assert_eq!(rows as i64, n);
    let optimize = reader
        .history(&location)
        .iter()
        .filter(|h| h["operation"] == "OPTIMIZE")
        .count();
    assert_eq!(optimize as u64, c.rounds, "[{}]", b.name);
}

#[tokio::test]
async fn an_ingest_compacts_its_table_in_the_background_local() {
    an_ingest_compacts_its_table_in_the_background(Backend::local()).await;
}

#[tokio::test]
async fn an_ingest_compacts_its_table_in_the_background_ceph() {
    if let Some(b) = ceph_or_explain() {
        an_ingest_compacts_its_table_in_the_background(b).await;
    }
}

/// On Garage, in single-writer mode, the rounds share the ingest's table claim.
#[tokio::test]
async fn an_ingest_compacts_its_table_in_the_background_garage_single_writer() {
    if let Some(b) = common::backend::s3_or_explain() {
        an_ingest_compacts_its_table_in_the_background(b).await;
    }
}

/// An abandoned round stays abandoned: the checkpoint after it records the decision, so when
/// another engine later makes the round's inputs live again (a RESTORE TABLE), the compaction
/// job's next run does not try to commit the round's deleted output (it would find it gone:
/// `DataLost`), and the table reads each row once.
#[tokio::test]
async fn an_abandoned_round_stays_abandoned_when_another_engine_restores_its_inputs() {
    let b = Backend::local();
    let checkpoints = 4;
    appends(b.storage.clone(), false, 0, checkpoints).await;
    let round = round_crashed_before_its_entry(&b).await;
    let removed = round.table.as_ref().unwrap().removes[0].clone();
    // Another engine deletes one of the round's inputs.
    put_next_entry(b.storage.as_ref(), &remove_action(&removed.path)).await;
    // The next run abandons the round and records it; it plans nothing new (min_files).
    let report = compact(b.storage.clone(), &options(&b).min_files(1000))
        .await
        .unwrap();
    assert!(report.restored && report.bins.is_empty(), "{report:?}");
    let recorded = filesink::job::manifest::latest_manifest(b.storage.as_ref(), "compact", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(recorded.checkpoint_id, round.checkpoint_id + 1);
    let section = recorded.table.as_ref().unwrap();
    assert!(section.removes.is_empty() && recorded.committables.is_empty());
    let outputs: Vec<String> = round
        .committables
        .iter()
        .map(|c| c.final_path.clone())
        .collect();
    assert_eq!(section.abandoned, outputs);
    for path in &outputs {
        assert!(
            b.storage.read_data_file(path).await.is_err(),
            "{path} deleted"
        );
    }

    // Another engine restores the table to before the delete: the input is live again, and
    // so are all of the abandoned round's inputs.
    let add = format!(
        "{{\"add\":{{\"path\":{},\"partitionValues\":{},\"size\":{},\"modificationTime\":1,\
         \"dataChange\":true}}}}\n",
        serde_json::to_string(&removed.path).unwrap(),
        serde_json::to_string(&removed.partition_values).unwrap(),
        removed.size
    );
    put_next_entry(b.storage.as_ref(), &add).await;
    let n = checkpoints * PER_CHECKPOINT;
    assert_table_exactly_once(b.storage.as_ref(), n, "after the restore").await;
    // The compaction job goes on: a new round on what is live, each row once.
    let report = compact(b.storage.clone(), &options(&b)).await.unwrap();
    assert!(!report.abandoned && report.version.is_some(), "{report:?}");
    assert_table_exactly_once(b.storage.as_ref(), n, "after the next round").await;
    let per = files_per_partition(b.storage.as_ref()).await;
    assert!(per.values().all(|f| *f == 1), "{per:?}");
}

/// A partition whose path leaves no room for a new file's name (the table was written under
/// a shorter base and moved, or by another engine with shorter names) is passed over and
/// reported; the other partitions are compacted, rather than every round failing on it.
#[tokio::test]
async fn a_partition_too_long_for_a_new_file_is_passed_over() {
    use arrow::array::StringArray;
    use filesink::storage::LocalStorage;
    let root = tempfile::tempdir().unwrap();
    let short = root.path().join("t");
    let max_of = |dir: &std::path::Path| {
        filesink::Sink::builder(LocalStorage::new(dir).unwrap())
            .format(FileFormat::parquet())
            .build()
            .unwrap()
            .partition_path_bytes_max()
            .unwrap()
    };
    // A base deep enough that a partition path of 200 bytes is too long under it.
    let mut parent = root.path().to_path_buf();
    let long = loop {
        parent.push("d".repeat(250));
        let long = parent.join("t");
        let max = max_of(&long);
        std::fs::remove_dir(&long).unwrap();
        if max < 200 {
            break long;
        }
    };
    let max_long = max_of(&long);
    std::fs::remove_dir(&long).unwrap();
    let value = "v".repeat(max_long + 10 - "day=".len());

    let mut c = orders(Arc::new(LocalStorage::new(&short).unwrap()), false).await;
    for k in 0..3i64 {
        // The harness's records, every other one in the long partition.
        let b = common::batch(k * 10, 10);
        let days: Vec<&str> = (k * 10..k * 10 + 10)
            .map(|i| if i % 2 == 0 { "a" } else { value.as_str() })
            .collect();
        let mut columns = b.columns().to_vec();
        columns[1] = Arc::new(StringArray::from(days));
        let batch = arrow::record_batch::RecordBatch::try_new(b.schema(), columns).unwrap();
        c.write(&batch).await.unwrap();
        c.checkpoint(&(k * 10 + 10)).await.unwrap();
    }
    c.close().await.unwrap();
    std::fs::rename(&short, &long).unwrap();

    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(&long).unwrap());
    let report = compact(storage.clone(), &options(&Backend::local()))
        .await
        .unwrap();
    let long_partition = format!("day={value}");
    assert_eq!(report.too_long, vec![long_partition.clone()]);
    let compacted: Vec<&str> = report.bins.iter().map(|b| b.partition.as_str()).collect();
    assert_eq!(compacted, ["day=a"]);
    let files = files_per_partition(storage.as_ref()).await;
    assert_eq!(files.get("day=a"), Some(&1), "{files:?}");
    assert_eq!(files.get(long_partition.as_str()), Some(&3), "{files:?}");
    assert_table_exactly_once(storage.as_ref(), 30, "after the round").await;
}
