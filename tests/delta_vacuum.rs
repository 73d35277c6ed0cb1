//! Vacuum of a Delta table (`filesink::maintain::vacuum`, `filesink vacuum`): it deletes only
//! the sink's own files that no version within the retention needs, never a file a live `add`
//! or a job's latest manifest needs, never a foreign file; a dry run deletes nothing; a short
//! retention is refused; the metadata cleanup keeps the newest old checkpoint and everything
//! after it; delta-rs still reads the latest version afterwards.
//!
//! Tombstones are made the way another engine's DELETE would: a log entry with `remove`
//! actions written by hand, with a `deletionTimestamp` chosen by the test.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::backend::{ceph_or_explain, Backend, Kind};
use common::cli::{json_of, run_expect, run_ok, s, stderr, stdout};
use common::delta::{assert_table_exactly_once, decode, read_log, table_id_counts};
use common::delta_py::{reader_or_explain, table_location};
use filesink::job::manifest;
use filesink::maintain::{vacuum, VacuumOptions, VacuumReport};
use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
use filesink::storage::Storage;
use filesink::table::delta::DeltaOptions;
use filesink::{Coordinator, Error, FileFormat};

const PER_CHECKPOINT: i64 = 100;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;
/// A well-formed incarnation of a part name.
const INC: &str = "0123456789abcdef0123456789abcdef";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn open_on(
    storage: Arc<dyn Storage>,
    job: &str,
    single_writer: bool,
) -> filesink::Result<Coordinator> {
    let sink = filesink::Sink::builder_shared(storage)
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()?;
    Coordinator::builder(&sink, job)
        .delta_table(
            DeltaOptions::new()
                .schema(common::schema())
                .partition_by(["day"])
                .single_writer(single_writer),
        )
        .open()
        .await
}

/// Job `orders` writes `checkpoints` checkpoints of [`PER_CHECKPOINT`] ids each, from `first`;
/// each checkpoint is one table version of five files (one per day).
async fn write_checkpoints(b: &Backend, first: i64, checkpoints: i64) {
    let mut c = open_on(b.storage.clone(), "orders", !b.conditional_put)
        .await
        .unwrap();
    for k in 0..checkpoints {
        let start = first + k * PER_CHECKPOINT;
        c.write(&common::batch(start, PER_CHECKPOINT))
            .await
            .unwrap();
        c.checkpoint(&(start + PER_CHECKPOINT)).await.unwrap();
    }
    c.close().await.unwrap();
}

/// The `add.path`s of the log as written (percent-encoded), in log order, of files still live.
async fn raw_live_adds(storage: &dyn Storage) -> Vec<String> {
    let mut live: Vec<String> = Vec::new();
    for v in 0.. {
        let Some(bytes) = storage
            .get_metadata(&format!("_delta_log/{v:020}.json"))
            .await
            .unwrap()
        else {
            break;
        };
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let action: serde_json::Value = serde_json::from_slice(line).unwrap();
            if let Some(p) = action["add"]["path"].as_str() {
                live.push(p.to_owned());
            }
            if let Some(p) = action["remove"]["path"].as_str() {
                live.retain(|l| l != p);
            }
        }
    }
    live
}

/// Writes version `version` as another engine's DELETE of `removes` (raw path, deletion time).
async fn put_removes(storage: &dyn Storage, version: i64, removes: &[(&str, i64)]) {
    let mut entry = format!(
        "{}\n",
        serde_json::json!({"commitInfo": {"timestamp": now_ms(), "operation": "DELETE"}})
    );
    for (path, at) in removes {
        entry.push_str(&format!(
            "{}\n",
            serde_json::json!({"remove": {"path": path, "deletionTimestamp": at, "dataChange": true}})
        ));
    }
    storage
        .put_metadata(&format!("_delta_log/{version:020}.json"), entry.as_bytes())
        .await
        .unwrap();
}

/// Writes version `version` as a change of the table property `key` to `value` (a new
/// `metaData`, the rest as in version 0).
async fn put_configuration(storage: &dyn Storage, version: i64, key: &str, value: &str) {
    let v0 = storage
        .get_metadata("_delta_log/00000000000000000000.json")
        .await
        .unwrap()
        .unwrap();
    let mut metadata = v0
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap())
        .find(|a| a.get("metaData").is_some())
        .unwrap();
    metadata["metaData"]["configuration"][key] = value.into();
    storage
        .put_metadata(
            &format!("_delta_log/{version:020}.json"),
            format!("{metadata}\n").as_bytes(),
        )
        .await
        .unwrap();
}

async fn ids_of(storage: &dyn Storage, path: &str) -> Vec<i64> {
    let bytes = storage.read_data_file(path).await.unwrap();
    common::ids_in_bytes(bytes.to_vec(), &FileFormat::parquet())
}

async fn exists(storage: &dyn Storage, path: &str) -> bool {
    match storage.read_data_file(path).await {
        Ok(_) => true,
        Err(Error::DataLost { .. }) => false,
        Err(e) => panic!("reading `{path}`: {e}"),
    }
}

fn short(retain: Duration) -> VacuumOptions {
    VacuumOptions::new()
        .retain(retain)
        .allow_short_retention(true)
}

fn deleted_paths(r: &VacuumReport) -> Vec<String> {
    r.deleted.iter().map(|(p, _)| p.clone()).collect()
}

/// Sets the modification time of a local file `age_ms` into the past.
fn age_file(path: &Path, age_ms: i64) {
    let t = SystemTime::now() - Duration::from_millis(age_ms as u64);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

async fn keeps_files_of_versions_within_retention(b: Backend) {
    let storage = b.storage.as_ref();
    write_checkpoints(&b, 0, 3).await;
    let adds = raw_live_adds(storage).await;
    assert_eq!(adds.len(), 15, "[{}] three versions of five files", b.name);
    let (old, young) = (adds[0].clone(), adds[6].clone());
    let (old_file, young_file) = (decode(&old), decode(&young));
    let mut gone_ids = ids_of(storage, &old_file).await;
    gone_ids.extend(ids_of(storage, &young_file).await);
    // Version 3: another engine deleted one file ten days ago and one an hour ago.
    let now = now_ms();
    put_removes(storage, 3, &[(&old, now - 10 * DAY), (&young, now - HOUR)]).await;

    // The default retention (a week): the file removed ten days ago goes, the other stays.
    let report = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap();
    assert_eq!(report.table_version, 3, "[{}] {report:?}", b.name);
    assert_eq!(
        deleted_paths(&report),
        vec![old_file.clone()],
        "[{}]",
        b.name
    );
    assert!(report.deleted[0].1 > 0);
    assert_eq!(report.kept_for_retention, vec![young_file.clone()]);
    assert!(report.foreign.is_empty(), "{:?}", report.foreign);
    assert!(report.kept_for_manifests.is_empty());
    assert!(!exists(storage, &old_file).await);
    assert!(exists(storage, &young_file).await);
    // Every live file is still there: the latest version reads every row it holds.
    let expected: BTreeSet<i64> = (0..3 * PER_CHECKPOINT)
        .filter(|id| !gone_ids.contains(id))
        .collect();
    let counts = table_id_counts(storage).await;
    assert_eq!(counts.keys().copied().collect::<BTreeSet<_>>(), expected);
    assert!(counts.values().all(|c| *c == 1));

    // Again: nothing more to do (the deletion is idempotent, the report empty).
    let again = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap();
    assert!(again.deleted.is_empty(), "{again:?}");

    // A retention of 0 is below the table's: refused unless allowed, then the young goes too.
    let err = vacuum(
        b.storage.clone(),
        &VacuumOptions::new().retain(Duration::ZERO),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(exists(storage, &young_file).await);
    let report = vacuum(b.storage.clone(), &short(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(deleted_paths(&report), vec![young_file.clone()]);
    assert!(!exists(storage, &young_file).await);
    assert_eq!(read_log(storage).await.live.len(), 13);
    let counts = table_id_counts(storage).await;
    assert_eq!(counts.keys().copied().collect::<BTreeSet<_>>(), expected);

    // delta-rs reads the latest version: every row it holds, once.
    if let Some(reader) = reader_or_explain() {
        let ids = reader.ids(&table_location(&b), None);
        assert_eq!(
            ids,
            expected.iter().copied().collect::<Vec<_>>(),
            "[{}]",
            b.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_keeps_files_of_versions_within_retention() {
    keeps_files_of_versions_within_retention(Backend::local()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_keeps_files_of_versions_within_retention_ceph() {
    if let Some(b) = ceph_or_explain() {
        keeps_files_of_versions_within_retention(b).await;
    }
}

/// Own files that never reached the log (a crashed round's output, another sink's leftover of
/// this sink's jobs) go by their age.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_deletes_own_files_the_log_never_had_by_their_age() {
    let b = Backend::local();
    let Kind::Local(dir) = &b.kind else {
        unreachable!()
    };
    write_checkpoints(&b, 0, 1).await;
    let day = dir.path().join("day=2026-11-25");
    let (old, young) = (
        format!("part-orders_0-{INC}-90.parquet"),
        format!("part-orders_0-{INC}-91.parquet"),
    );
    std::fs::write(day.join(&old), b"orphan").unwrap();
    std::fs::write(day.join(&young), b"orphan").unwrap();
    age_file(&day.join(&old), 10 * DAY);
    let report = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap();
    assert_eq!(
        deleted_paths(&report),
        vec![format!("day=2026-11-25/{old}")]
    );
    assert_eq!(
        report.kept_for_retention,
        vec![format!("day=2026-11-25/{young}")]
    );
    assert!(!day.join(&old).exists());
    assert!(day.join(&young).exists());
    assert_table_exactly_once(b.storage.as_ref(), PER_CHECKPOINT, "after vacuum").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_keeps_files_a_manifest_still_needs() {
    let b = Backend::local();
    let storage = b.storage.as_ref();
    write_checkpoints(&b, 0, 1).await;
    // Checkpoint 2 dies between its file commit and its log entry.
    let faulty = FaultyStorage::new(
        b.storage.clone(),
        Some(FaultPlan {
            point: FaultPoint::PutLogEntry,
            occurrence: 1,
            mode: FaultMode::Before,
        }),
    );
    let mut c = open_on(Arc::new(faulty.clone()), "orders", false)
        .await
        .unwrap();
    c.write(&common::batch(PER_CHECKPOINT, PER_CHECKPOINT))
        .await
        .unwrap();
    let _ = c.checkpoint(&(2 * PER_CHECKPOINT)).await;
    assert!(faulty.fired(), "the log entry was never attempted");
    drop(c);
    let latest = manifest::latest_manifest(storage, "orders", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.checkpoint_id, 2);
    let mut needed: Vec<String> = latest
        .committables
        .iter()
        .map(|c| c.final_path.clone())
        .collect();
    needed.sort();
    assert!(!needed.is_empty());
    let logged = read_log(storage).await;
    assert_eq!(logged.versions, vec![0]);
    for p in &needed {
        assert!(exists(storage, p).await, "`{p}` committed");
        assert!(!logged.live.contains_key(p), "`{p}` not in the log yet");
    }

    // The most eager vacuum keeps them: no live add, no tombstone, but the manifest needs them.
    let report = vacuum(b.storage.clone(), &short(Duration::ZERO))
        .await
        .unwrap();
    assert!(report.deleted.is_empty(), "{report:?}");
    assert_eq!(report.kept_for_manifests, needed);
    for p in &needed {
        assert!(exists(storage, p).await, "`{p}` kept");
    }
    // The job's next run writes the entry: every record once.
    open_on(b.storage.clone(), "orders", false)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    assert_table_exactly_once(storage, 2 * PER_CHECKPOINT, "after the restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_never_touches_foreign_files() {
    let b = Backend::local();
    let Kind::Local(dir) = &b.kind else {
        unreachable!()
    };
    write_checkpoints(&b, 0, 2).await;
    let adds = raw_live_adds(b.storage.as_ref()).await;
    let foreign = [
        "foo.parquet".to_owned(),
        format!("part-other_0-{INC}-0.parquet"),
        format!("day=2026-11-25/part-other_0-{INC}-1.parquet"),
        format!("day=2026-11-25/part-orders_0-{INC}-2.parquet.bak"),
        format!("day=2026-11-25/mine-orders_0-{INC}-3.parquet"),
        "notes/readme.txt".to_owned(),
    ];
    for f in &foreign {
        let p = dir.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"not filesink's").unwrap();
        age_file(&p, 100 * DAY);
    }
    // Even with every file of the table tombstoned long ago and no retention at all.
    let tombstones: Vec<(&str, i64)> = adds.iter().map(|a| (a.as_str(), 1)).collect();
    put_removes(b.storage.as_ref(), 2, &tombstones).await;
    let report = vacuum(b.storage.clone(), &short(Duration::ZERO))
        .await
        .unwrap();
    let mut want = foreign.to_vec();
    want.sort();
    assert_eq!(report.foreign, want);
    // The own files go, the latest checkpoint's too: its manifest lists them, but the log
    // holds that checkpoint, so they are the log's to keep or let go.
    assert_eq!(report.deleted.len(), 10, "{report:?}");
    assert!(report.kept_for_manifests.is_empty(), "{report:?}");
    for f in &foreign {
        assert_eq!(
            std::fs::read(dir.path().join(f)).unwrap(),
            b"not filesink's",
            "`{f}`"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_dry_run_deletes_nothing() {
    let b = Backend::local();
    let storage = b.storage.as_ref();
    write_checkpoints(&b, 0, 2).await;
    let adds = raw_live_adds(storage).await;
    put_removes(storage, 2, &[(&adds[0], 1), (&adds[1], now_ms() - 1000)]).await;
    let before = b.visible().await;
    let report = vacuum(b.storage.clone(), &short(Duration::ZERO).dry_run(true))
        .await
        .unwrap();
    assert!(report.dry_run);
    let mut want = vec![decode(&adds[0]), decode(&adds[1])];
    want.sort();
    assert_eq!(deleted_paths(&report), want);
    assert_eq!(b.visible().await, before, "a dry run changed the table");
    // The same vacuum for real deletes exactly what the dry run listed.
    let real = vacuum(b.storage.clone(), &short(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(real.deleted, report.deleted);
    assert!(!real.dry_run);
    for p in &want {
        assert!(!exists(storage, p).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_refuses_short_retention() {
    let b = Backend::local();
    let storage = b.storage.as_ref();

    // No table yet: refused.
    let err = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("has no Delta table")),
        "{err}"
    );

    write_checkpoints(&b, 0, 1).await;
    let adds = raw_live_adds(storage).await;
    put_removes(storage, 1, &[(&adds[0], 1)]).await;
    let err = vacuum(
        b.storage.clone(),
        &VacuumOptions::new()
            .retain(Duration::from_secs(3600))
            .location("./lake"),
    )
    .await
    .unwrap_err();
    let Error::Config(message) = &err else {
        panic!("{err}")
    };
    assert!(
        message.contains("a retention of 1h is shorter than the table's delta.deletedFileRetentionDuration (the default, 168h)"),
        "{message}"
    );
    assert!(message.contains("`./lake`"), "{message}");
    assert!(exists(storage, &decode(&adds[0])).await, "nothing deleted");

    // A table that keeps files 30 days refuses a week too.
    put_configuration(
        storage,
        2,
        "delta.deletedFileRetentionDuration",
        "interval 30 days",
    )
    .await;
    let err = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("`interval 30 days`, 720h"),
        "{err}"
    );
    assert!(exists(storage, &decode(&adds[0])).await, "nothing deleted");
    let report = vacuum(
        b.storage.clone(),
        &VacuumOptions::new().retain(Duration::from_secs(30 * 24 * 3600)),
    )
    .await
    .unwrap();
    // Tombstoned at 1 ms since the epoch: expired under any retention, and the manifest that
    // lists it protects nothing the log holds.
    assert_eq!(report.deleted.len(), 1, "tombstoned at 1 ms: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_cleans_up_expired_log_entries_below_an_old_checkpoint() {
    let b = Backend::local();
    let Kind::Local(dir) = &b.kind else {
        unreachable!()
    };
    // Versions 0..=11, with the log checkpoint of version 10.
    write_checkpoints(&b, 0, 12).await;
    let log = dir.path().join("_delta_log");
    assert!(log.join(format!("{:020}.checkpoint.parquet", 10)).exists());
    // Everything in the log is 40 days old.
    for e in std::fs::read_dir(&log).unwrap() {
        age_file(&e.unwrap().path(), 40 * DAY);
    }
    // Version 12 turns the cleanup off: nothing goes.
    put_configuration(
        b.storage.as_ref(),
        12,
        "delta.enableExpiredLogCleanup",
        "false",
    )
    .await;
    let off = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap();
    assert!(off.log_files_deleted.is_empty(), "{off:?}");
    assert!(off.log_cleanup_skipped.is_some());
    // Version 13 turns it on again.
    put_configuration(
        b.storage.as_ref(),
        13,
        "delta.enableExpiredLogCleanup",
        "true",
    )
    .await;
    let dry = vacuum(b.storage.clone(), &VacuumOptions::new().dry_run(true))
        .await
        .unwrap();
    let want: Vec<String> = (0..10)
        .map(|v| format!("_delta_log/{v:020}.json"))
        .collect();
    assert_eq!(dry.log_files_deleted, want);
    assert_eq!(dry.log_entries_deleted, 10);
    assert!(log.join(format!("{:020}.json", 0)).exists(), "dry run");

    let report = vacuum(b.storage.clone(), &VacuumOptions::new())
        .await
        .unwrap();
    assert_eq!(report.log_files_deleted, want);
    let mut left: Vec<String> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    left.sort();
    let mut want_left: Vec<String> = (10..14).map(|v| format!("{v:020}.json")).collect();
    want_left.insert(0, format!("{:020}.checkpoint.parquet", 10));
    want_left.push("_last_checkpoint".to_owned());
    assert_eq!(left, want_left);
    // The table still reads, and the job still appends to it.
    write_checkpoints(&b, 12 * PER_CHECKPOINT, 1).await;
    // (Our test reader of the log starts at version 0, which is gone: the job's own restore,
    // which starts at the checkpoint, and delta-rs read it.)
    let v14 = std::fs::read_to_string(log.join(format!("{:020}.json", 14))).unwrap();
    assert!(
        v14.contains("\"version\":13"),
        "checkpoint 13 is version 14: {v14}"
    );
    if let Some(reader) = reader_or_explain() {
        let ids = reader.ids(&table_location(&b), None);
        assert_eq!(ids, (0..13 * PER_CHECKPOINT).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_vacuum_dry_run_json_lists_what_would_go() {
    let b = Backend::local();
    let Kind::Local(dir) = &b.kind else {
        unreachable!()
    };
    write_checkpoints(&b, 0, 2).await;
    let adds = raw_live_adds(b.storage.as_ref()).await;
    put_removes(b.storage.as_ref(), 2, &[(&adds[0], 1)]).await;
    std::fs::write(dir.path().join("foo.parquet"), b"x").unwrap();
    let lake = s(dir.path());

    let o = run_ok(&["vacuum", lake, "--dry-run", "--json"]);
    let v = json_of(&o);
    assert_eq!(v["dry_run"], true, "{v}");
    assert_eq!(v["table_version"], 2);
    assert_eq!(v["retain_ms"], 168 * HOUR);
    assert!(v["cutoff_ms"].as_i64().unwrap() < now_ms() - 167 * HOUR);
    let delete = v["delete"].as_array().unwrap();
    assert_eq!(delete.len(), 1, "{v}");
    assert_eq!(delete[0]["path"], decode(&adds[0]));
    assert!(delete[0]["size_bytes"].as_u64().unwrap() > 0);
    assert_eq!(v["deleted"], 1);
    assert_eq!(v["deleted_bytes"], delete[0]["size_bytes"]);
    assert_eq!(v["foreign"], serde_json::json!(["foo.parquet"]));
    assert_eq!(v["kept_for_retention"], serde_json::json!([]));
    assert_eq!(v["kept_for_manifests"], serde_json::json!([]));
    assert_eq!(v["log_delete"], serde_json::json!([]));
    assert_eq!(v["log_entries_deleted"], 0);
    assert!(v["log_cleanup_skipped"].is_null());
    assert!(exists(b.storage.as_ref(), &decode(&adds[0])).await);
    // `ls` tells the removed files still on disk (time travel can read them) from those
    // vacuum deleted: it called them all "kept for time travel".
    let ls = stdout(&run_ok(&["ls", lake]));
    assert!(
        ls.contains("1 removed file(s) in the log (1 still on disk"),
        "{ls}"
    );

    // Text, for real.
    let o = run_ok(&["vacuum", lake]);
    let text = stdout(&o);
    assert!(
        text.contains(&format!("deleted        {}", decode(&adds[0]))),
        "{text}"
    );
    assert!(text.contains("foreign): 1\n  foo.parquet"), "{text}");
    assert!(text.contains("total: deleted 1 file(s)"), "{text}");
    assert!(!exists(b.storage.as_ref(), &decode(&adds[0])).await);
    let ls = stdout(&run_ok(&["ls", lake]));
    assert!(
        ls.contains("1 removed file(s) in the log (0 still on disk"),
        "{ls}"
    );

    // A short retention is refused (exit 1) with the reason.
    let o = run_expect(&["vacuum", lake, "--retain", "0h"], 1);
    assert!(
        stderr(&o).contains("--allow-short-retention"),
        "{}",
        stderr(&o)
    );
    run_ok(&["vacuum", lake, "--retain", "0h", "--allow-short-retention"]);
    // Not a table (a filesink output of plain jobs): no data file is touched, only the
    // ledger is vacuumed.
    let plain = tempfile::tempdir().unwrap();
    let input = plain.path().join("in.jsonl");
    std::fs::write(&input, "{\"id\":1}\n").unwrap();
    let plain_lake = plain.path().join("lake");
    run_ok(&["ingest", s(&input), "--to", s(&plain_lake)]);
    let o = run_ok(&["vacuum", s(&plain_lake)]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("has no Delta table: no data file is vacuumed"),
        "{text}"
    );
    assert!(text.contains("ledger of inputs: 1 input(s)"), "{text}");
    // Not a filesink output at all: refused, exit 5, as `commit` and `abort` are.
    let empty = tempfile::tempdir().unwrap();
    let o = run_expect(&["vacuum", s(empty.path())], 5);
    assert!(
        stderr(&o).contains("not a filesink output"),
        "{}",
        stderr(&o)
    );
}

/// A Delta table filesink did not write (no `_filesink/sink.json` beside its log: another
/// engine's, or one an operator copied out) is not this sink's to clean: `vacuum` refuses it
/// (exit 5 from the CLI, `NotSupported` from the library) and deletes nothing, neither data
/// files nor log entries, even those past every retention.
#[tokio::test]
async fn a_table_filesink_did_not_write_is_not_vacuumed() {
    let b = Backend::local();
    let Kind::Local(dir) = &b.kind else {
        unreachable!()
    };
    write_checkpoints(&b, 0, 12).await;
    let adds = raw_live_adds(b.storage.as_ref()).await;
    put_removes(b.storage.as_ref(), 12, &[(&adds[0], 1)]).await;
    // The engine that writes it is not filesink: no sink identity, no jobs.
    std::fs::remove_dir_all(dir.path().join("_filesink")).unwrap();
    let files = |root: &Path| -> BTreeSet<String> {
        walk(root)
            .into_iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect()
    };
    let before = files(dir.path());
    for args in [
        vec!["vacuum", s(dir.path())],
        vec![
            "vacuum",
            s(dir.path()),
            "--retain",
            "0h",
            "--allow-short-retention",
        ],
        vec!["vacuum", s(dir.path()), "--dry-run", "--json"],
    ] {
        let o = run_expect(&args, 5);
        assert!(
            stderr(&o).contains("not a filesink output"),
            "{}",
            stderr(&o)
        );
    }
    let options = VacuumOptions::new()
        .retain(Duration::ZERO)
        .allow_short_retention(true);
    match vacuum(b.storage.clone(), &options).await {
        Err(Error::NotSupported(msg)) => assert!(msg.contains("sink.json"), "{msg}"),
        other => panic!("expected NotSupported, got {other:?}"),
    }
    assert_eq!(files(dir.path()), before);
}

/// Every file under `root`, recursively.
fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A plain job and a Delta table do not share a directory: a new plain job where a table
/// is, and the first job of a table where plain jobs wrote, are refused (exit 3). In a lake
/// mixed before that guard, vacuum keeps the plain job's files however old: no log entry
/// ever lists them, so "not in the table" says nothing about them.
#[test]
fn plain_jobs_and_a_table_do_not_mix_and_vacuum_never_deletes_plain_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = |name: &str, first: i64| {
        let path = dir.path().join(name);
        let text: String = (first..first + 2000)
            .map(|i| format!("{{\"id\":{i},\"day\":\"2026-11-{:02}\"}}\n", 25 + i % 2))
            .collect();
        std::fs::write(&path, text).unwrap();
        path
    };
    let (table_in, plain_in) = (input("t.jsonl", 0), input("p.jsonl", 10_000));
    let ingest = |lake: &Path, path: &Path, job: &str, table: bool, code: i32| {
        let mut args = vec!["ingest", s(path), "--to", s(lake), "--job", job];
        args.extend(["--partition-by", "day", "--checkpoint-every", "500rows"]);
        if table {
            args.extend(["--table", "delta"]);
        }
        run_expect(&args, code)
    };

    // A table, then a plain job beside it: refused, nothing of it written.
    let lake = dir.path().join("table");
    ingest(&lake, &table_in, "dj", true, 0);
    let o = ingest(&lake, &plain_in, "plain", false, 3);
    assert!(stderr(&o).contains("holds a Delta table"), "{}", stderr(&o));
    assert!(!lake.join("_filesink/jobs/plain").exists());
    // Plain jobs, then a table beside them: refused; the plain job goes on.
    let plain_lake = dir.path().join("plain");
    ingest(&plain_lake, &plain_in, "plain", false, 0);
    let o = ingest(&plain_lake, &table_in, "dj", true, 3);
    assert!(
        stderr(&o).contains("plain jobs (`plain`)"),
        "{}",
        stderr(&o)
    );
    assert!(!plain_lake.join("_delta_log").exists());
    ingest(&plain_lake, &plain_in, "plain", false, 0);

    // A lake mixed by an older build: the plain job ran while the log was out of sight (and
    // the sink's identity did not record what it holds).
    std::fs::rename(lake.join("_delta_log"), dir.path().join("log-aside")).unwrap();
    let identity = lake.join("_filesink/sink.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&identity).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("kind");
    std::fs::write(&identity, serde_json::to_vec(&v).unwrap()).unwrap();
    ingest(&lake, &plain_in, "plain", false, 0);
    std::fs::rename(dir.path().join("log-aside"), lake.join("_delta_log")).unwrap();
    let plain_files: BTreeSet<String> = common::visible_files(&lake)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("part-plain_")
        })
        .map(|p| p.strip_prefix(&lake).unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(plain_files.len(), 4 * 2, "4 checkpoints x 2 days");
    for f in &plain_files {
        age_file(&lake.join(f), 30 * DAY);
    }
    let v = json_of(&run_ok(&[
        "vacuum",
        s(&lake),
        "--retain",
        "0s",
        "--allow-short-retention",
        "--json",
    ]));
    let kept: BTreeSet<String> = v["kept_plain_jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kept, plain_files, "{v}");
    assert_eq!(v["deleted"], 0, "{v}");
    let mut ids: Vec<i64> = plain_files
        .iter()
        .flat_map(|f| common::read_ids(&lake.join(f), &FileFormat::parquet()))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (10_000..12_000).collect::<Vec<_>>());
    let text = stdout(&run_ok(&["vacuum", s(&lake), "--dry-run"]));
    assert!(
        text.contains("files of jobs that do not write into the table"),
        "{text}"
    );
}

/// A lake of daily jobs: each finished job's latest manifest names its last files. Once
/// compaction moved past them and their tombstones expired, vacuum deletes them (the log holds
/// that checkpoint, so the manifest protects nothing more), and a rerun of the finished job
/// does not miss them: its restore commits no file of a checkpoint the log holds.
#[test]
fn vacuum_reclaims_the_last_files_of_finished_jobs_once_compacted_away() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lake = d.join("table");
    let mut days = Vec::new();
    for day in 0..3i64 {
        let input = d.join(format!("day{day}.jsonl"));
        let text: String = (day * 100..day * 100 + 100)
            .map(|i| format!("{{\"id\":{i}}}\n"))
            .collect();
        std::fs::write(&input, text).unwrap();
        run_ok(&["ingest", s(&input), "--to", s(&lake), "--table", "delta"]);
        days.push(input);
    }
    let before: BTreeSet<String> = common::visible_files(&lake)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(before.len(), 3);
    run_ok(&["compact", s(&lake), "--target-size", "1MiB"]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let o = run_ok(&[
        "vacuum",
        s(&lake),
        "--retain",
        "0s",
        "--allow-short-retention",
        "--json",
    ]);
    let after: BTreeSet<String> = common::visible_files(&lake)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert!(
        after.is_disjoint(&before),
        "every compacted file is reclaimed: {after:?}\n{}",
        stdout(&o)
    );
    assert_eq!(after.len(), 1);
    // The finished jobs rerun: nothing to do, nothing missing.
    for input in &days {
        let o = run_ok(&[
            "ingest",
            s(input),
            "--to",
            s(&lake),
            "--table",
            "delta",
            "--json",
        ]);
        assert_eq!(json_of(&o)["status"], "already_finished", "{}", stdout(&o));
    }
    assert_eq!(
        common::visible_parquet_ids(&lake),
        (0..300).collect::<Vec<_>>()
    );
}
