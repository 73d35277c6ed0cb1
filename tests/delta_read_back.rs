//! Delta tables read back by delta-rs (the `deltalake` Python package), the independent
//! reader: one table version per checkpoint, time travel to each checkpoint's rows, the `txn`
//! of each job, partition values that need escaping, and the statistics of each file. Also
//! the refusals at open: a store that cannot keep writers apart, and a job whose manifests
//! and log disagree.

mod common;

use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use common::backend::{ceph_or_explain, s3_or_explain, Backend};
use common::delta::{assert_table_exactly_once, read_log};
use common::delta_py::{reader_or_explain, table_location};
use filesink::job::manifest::sink_identity;
use filesink::storage::Storage;
use filesink::table::delta::{DeltaOptions, TableOutcome};
use filesink::{Coordinator, Error, FileFormat};

const PER_CHECKPOINT: i64 = 100;

async fn open(b: &Backend, job: &str) -> filesink::Result<Coordinator> {
    let sink = b
        .sink()
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()?;
    Coordinator::builder(&sink, job)
        .delta_table(
            DeltaOptions::new()
                .schema(common::schema())
                .partition_by(["day"])
                .single_writer(!b.conditional_put),
        )
        .open()
        .await
}

async fn app_id(storage: &dyn Storage, job: &str) -> String {
    let sink = sink_identity(storage, false).await.unwrap().unwrap();
    format!("filesink-{}-{job}", sink.sink_id)
}

/// A job of `checkpoints` checkpoints of [`PER_CHECKPOINT`] ids each, starting at `first`.
async fn write_checkpoints(b: &Backend, job: &str, first: i64, checkpoints: i64) {
    let mut c = open(b, job).await.unwrap();
    for k in 0..checkpoints {
        let start = first + k * PER_CHECKPOINT;
        c.write(&common::batch(start, PER_CHECKPOINT))
            .await
            .unwrap();
        let report = c.checkpoint(&(start + PER_CHECKPOINT)).await.unwrap();
        assert!(
            matches!(report.table_outcome, Some(TableOutcome::Committed(_))),
            "{report:?}"
        );
    }
    c.close().await.unwrap();
}

async fn one_version_per_checkpoint_and_time_travel(b: Backend) {
    let Some(reader) = reader_or_explain() else {
        return;
    };
    let checkpoints = 5;
    write_checkpoints(&b, "orders", 0, checkpoints).await;
    let location = table_location(&b);
    let app = app_id(b.storage.as_ref(), "orders").await;

    let history = reader.history(&location);
    assert_eq!(
        history.len() as i64,
        checkpoints,
        "[{}] {history:?}",
        b.name
    );
    for v in 0..checkpoints {
        // Version v is checkpoint v + 1, by delta-rs alone.
        assert_eq!(
            reader.txn(&location, &app, Some(v)),
            Some(v + 1),
            "[{}]",
            b.name
        );
        let expected: Vec<i64> = (0..(v + 1) * PER_CHECKPOINT).collect();
        assert_eq!(
            reader.ids(&location, Some(v)),
            expected,
            "[{}] version {v}",
            b.name
        );
    }
    let entry = &history[0];
    assert_eq!(entry["operation"], "STREAMING UPDATE");
    assert_eq!(entry["filesink"]["checkpoint"], checkpoints);
    let protocol = reader.run(&location, &["protocol"]);
    assert_eq!(protocol["protocol"]["min_reader_version"], 1);
    assert_eq!(protocol["protocol"]["min_writer_version"], 2);
    assert_eq!(protocol["partition_columns"], serde_json::json!(["day"]));

    // The statistics delta-rs sees are the files': records, and bounds that hold.
    let files = reader.files(&location);
    let records: i64 = files
        .iter()
        .map(|f| f["num_records"].as_i64().unwrap())
        .sum();
    assert_eq!(records, checkpoints * PER_CHECKPOINT);
    for f in &files {
        let (min, max) = (f["min.id"].as_i64().unwrap(), f["max.id"].as_i64().unwrap());
        assert!(min <= max, "{f}");
        assert_eq!(f["null_count.id"], 0, "{f}");
        assert!(
            f["partition.day"].as_str().unwrap().starts_with("2026-11-"),
            "{f}"
        );
    }
    assert_table_exactly_once(b.storage.as_ref(), checkpoints * PER_CHECKPOINT, b.name).await;
}

#[tokio::test]
async fn history_has_one_version_per_checkpoint_and_time_travel_shows_each_checkpoints_rows_local()
{
    one_version_per_checkpoint_and_time_travel(Backend::local()).await;
}

#[tokio::test]
async fn history_has_one_version_per_checkpoint_and_time_travel_shows_each_checkpoints_rows_ceph() {
    if let Some(b) = ceph_or_explain() {
        one_version_per_checkpoint_and_time_travel(b).await;
    }
}

#[tokio::test]
async fn history_has_one_version_per_checkpoint_and_time_travel_shows_each_checkpoints_rows_garage_single_writer(
) {
    if let Some(b) = s3_or_explain() {
        one_version_per_checkpoint_and_time_travel(b).await;
    }
}

#[tokio::test]
async fn txn_version_is_the_latest_checkpoint_of_each_job() {
    let Some(reader) = reader_or_explain() else {
        return;
    };
    let b = Backend::local();
    write_checkpoints(&b, "a", 0, 3).await;
    write_checkpoints(&b, "b", 10_000, 2).await;
    // Job a again: its checkpoints continue (4, 5) in the same table.
    let mut a = open(&b, "a").await.unwrap();
    for k in 0..2 {
        let start = 3 * PER_CHECKPOINT + k * PER_CHECKPOINT;
        a.write(&common::batch(start, PER_CHECKPOINT))
            .await
            .unwrap();
        a.checkpoint(&(start + PER_CHECKPOINT)).await.unwrap();
    }
    a.close().await.unwrap();

    let location = table_location(&b);
    let (app_a, app_b) = (
        app_id(b.storage.as_ref(), "a").await,
        app_id(b.storage.as_ref(), "b").await,
    );
    assert_eq!(reader.txn(&location, &app_a, None), Some(5));
    assert_eq!(reader.txn(&location, &app_b, None), Some(2));
    assert_eq!(reader.history(&location).len(), 7);
    let mut expected: Vec<i64> = (0..5 * PER_CHECKPOINT).collect();
    expected.extend(10_000..10_000 + 2 * PER_CHECKPOINT);
    assert_eq!(reader.ids(&location, None), expected);
}

#[tokio::test]
async fn partition_values_with_special_characters_read_back() {
    let Some(reader) = reader_or_explain() else {
        return;
    };
    let b = Backend::local();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Utf8, true),
    ]));
    let values: Vec<Option<&str>> = vec![
        Some("a/b"),
        Some("c:d"),
        Some("e%f"),
        Some("g h"),
        Some("ü=ß"),
        Some("../x"),
        None,
    ];
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..values.len() as i64)),
            Arc::new(StringArray::from(values.clone())),
        ],
    )
    .unwrap();
    let sink = b
        .sink()
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["p"]).unwrap())
        .build()
        .unwrap();
    let mut c = Coordinator::builder(&sink, "special")
        .delta_table(DeltaOptions::new().schema(schema).partition_by(["p"]))
        .open()
        .await
        .unwrap();
    c.write(&batch).await.unwrap();
    c.checkpoint(&1).await.unwrap();
    c.close().await.unwrap();

    let location = table_location(&b);
    let out = reader.run(&location, &["ids", "--column", "p"]);
    let mut got: Vec<Option<String>> = out["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect();
    got.sort();
    let mut expected: Vec<Option<String>> = values.iter().map(|v| v.map(str::to_owned)).collect();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(
        reader.ids(&location, None),
        (0..values.len() as i64).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn garage_refuses_a_table_writer_that_is_not_the_only_one() {
    let Some(b) = s3_or_explain() else { return };
    let sink = b.sink().format(FileFormat::parquet()).build().unwrap();
    let err = Coordinator::builder(&sink, "orders")
        .delta_table(DeltaOptions::new().schema(common::schema()))
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotSupported(m) if m.contains("ignores conditional writes") && m.contains("--single-writer")),
        "{err}"
    );
    let log = b
        .storage
        .list_metadata_from("_delta_log", "")
        .await
        .unwrap();
    assert!(log.is_empty(), "nothing may be written: {log:?}");
}

#[tokio::test]
async fn a_job_whose_manifests_are_gone_is_refused_by_the_reset_guard() {
    let b = Backend::local();
    write_checkpoints(&b, "orders", 0, 2).await;
    for (id, _) in filesink::job::manifest::list_checkpoints(b.storage.as_ref(), "orders")
        .await
        .unwrap()
    {
        let path = filesink::job::manifest::manifest_path("orders", id);
        b.storage.delete_metadata(&path).await.unwrap();
    }
    let err = open(&b, "orders").await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { reason, .. } if reason.contains("already holds checkpoint 2 of job `orders`")),
        "{err}"
    );
    let log = read_log(b.storage.as_ref()).await;
    assert_eq!(log.versions.len(), 2, "the refusal wrote nothing");
}

#[tokio::test]
async fn a_table_job_cannot_continue_as_a_plain_one_nor_the_other_way_round() {
    let b = Backend::local();
    write_checkpoints(&b, "orders", 0, 1).await;
    let sink = b.sink().format(FileFormat::parquet()).build().unwrap();
    let err = Coordinator::open(&sink, "orders", 1).await.unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("writes into a Delta table")),
        "{err}"
    );

    // A new plain job beside the table is refused too: its files would be in no log entry.
    let err = Coordinator::open(&sink, "plain", 1).await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { reason, .. } if reason.contains("holds a Delta table")),
        "{err}"
    );

    let b = Backend::local();
    let sink = b.sink().format(FileFormat::parquet()).build().unwrap();
    let mut plain = Coordinator::open(&sink, "plain", 1).await.unwrap();
    plain.write(&common::batch(0, 10)).await.unwrap();
    plain.checkpoint(&10).await.unwrap();
    plain.close().await.unwrap();
    let err = open(&b, "plain").await.unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("started as a plain directory job")),
        "{err}"
    );
}

#[tokio::test]
async fn a_table_refuses_a_row_format_and_an_incompatible_schema() {
    let b = Backend::local();
    let sink = b.sink().format(FileFormat::json_lines()).build().unwrap();
    let err = Coordinator::builder(&sink, "rows")
        .delta_table(DeltaOptions::new().schema(common::schema()))
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("Parquet")),
        "{err}"
    );

    write_checkpoints(&b, "orders", 0, 1).await;
    let other = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true)]));
    let sink = b.sink().format(FileFormat::parquet()).build().unwrap();
    let err = Coordinator::builder(&sink, "other")
        .delta_table(DeltaOptions::new().schema(other))
        .open()
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::Conflict { .. }), "{err}");
    assert_eq!(read_log(b.storage.as_ref()).await.versions.len(), 1);
}

#[tokio::test]
async fn log_checkpoints_every_ten_versions_are_read_by_delta_rs_and_by_restore() {
    let b = Backend::local();
    write_checkpoints(&b, "orders", 0, 25).await;
    for v in [10, 20] {
        let path = format!("_delta_log/{v:020}.checkpoint.parquet");
        assert!(
            b.storage.get_metadata(&path).await.unwrap().is_some(),
            "{path}"
        );
    }
    // Only checkpoint 20 and the entries from 20 on are left: readers must use our checkpoint.
    for v in 0..20 {
        b.storage
            .delete_metadata(&format!("_delta_log/{v:020}.json"))
            .await
            .unwrap();
    }
    // Our own restore continues from it: checkpoint 26 is version 25.
    let mut c = open(&b, "orders").await.unwrap();
    c.write(&common::batch(25 * PER_CHECKPOINT, PER_CHECKPOINT))
        .await
        .unwrap();
    let report = c.checkpoint(&(26 * PER_CHECKPOINT)).await.unwrap();
    assert_eq!(report.table_outcome, Some(TableOutcome::Committed(25)));
    c.close().await.unwrap();

    let Some(reader) = reader_or_explain() else {
        return;
    };
    let location = table_location(&b);
    let app = app_id(b.storage.as_ref(), "orders").await;
    assert_eq!(reader.txn(&location, &app, None), Some(26));
    assert_eq!(
        reader.ids(&location, None),
        (0..26 * PER_CHECKPOINT).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_table_changed_to_a_refused_feature_mid_run_gets_no_entry_of_ours() {
    let b = Backend::local();
    let mut c = open(&b, "orders").await.unwrap();
    c.write(&common::batch(0, PER_CHECKPOINT)).await.unwrap();
    c.checkpoint(&PER_CHECKPOINT).await.unwrap();
    // Another engine sets a property filesink refuses (it would let `txn`s expire).
    let log = read_log(b.storage.as_ref()).await;
    let v0 = b
        .storage
        .get_metadata("_delta_log/00000000000000000000.json")
        .await
        .unwrap()
        .unwrap();
    let metadata = String::from_utf8(v0)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("{\"metaData\""))
        .unwrap()
        .replace(
            "\"configuration\":{}",
            "\"configuration\":{\"delta.setTransactionRetentionDuration\":\"interval 1 days\"}",
        );
    let next = log.versions.len();
    b.storage
        .put_metadata(
            &format!("_delta_log/{next:020}.json"),
            format!("{metadata}\n").as_bytes(),
        )
        .await
        .unwrap();

    c.write(&common::batch(PER_CHECKPOINT, PER_CHECKPOINT))
        .await
        .unwrap();
    let err = c.checkpoint(&(2 * PER_CHECKPOINT)).await.unwrap_err();
    assert!(
        matches!(&err, Error::NotSupported(m) if m.contains("setTransactionRetentionDuration")),
        "{err}"
    );
    // Trying again on the same coordinator does not slip past the check.
    assert!(c.checkpoint(&(2 * PER_CHECKPOINT)).await.is_err());
    drop(c);
    filesink::storage::ownership::settle_releases().await;
    assert!(
        open(&b, "orders").await.is_err(),
        "reopening is refused too"
    );
    let after = read_log(b.storage.as_ref()).await;
    assert_eq!(
        after.versions.len(),
        next + 1,
        "no entry of ours after the change"
    );
}

/// The single-writer claim on Garage: another process is refused while a writer of this one
/// holds it, and takes it once the writer is gone; a second writer of the same table in this
/// process (an ingest's background compaction, say) shares the claim and puts its entries in
/// turn, so neither replaces the other's.
#[tokio::test]
async fn garage_single_writer_keeps_other_processes_out_and_shares_the_claim_within_one() {
    let Some(b) = s3_or_explain() else { return };
    let (url, env) = b.cli_url();
    let input = tempfile::tempdir().unwrap();
    let events = input.path().join("events.jsonl");
    std::fs::write(&events, "{\"id\": 1000, \"day\": \"x\"}\n").unwrap();
    let other_process = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args([
                "ingest",
                common::cli::s(&events),
                "--to",
                &url,
                "--job",
                "other",
            ])
            .args([
                "--partition-by",
                "day",
                "--table",
                "delta",
                "--single-writer",
            ])
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let mut first = open(&b, "a").await.unwrap();
    let refused = other_process();
    assert_eq!(
        refused.status.code(),
        Some(5),
        "{}",
        common::cli::stderr(&refused)
    );
    assert!(
        common::cli::stderr(&refused).contains("single writer"),
        "{}",
        common::cli::stderr(&refused)
    );
    // Job `b` in this process shares the claim; the two interleave their checkpoints.
    let mut second = open(&b, "b").await.unwrap();
    for k in 0..3 {
        first.write(&common::batch(k * 20, 10)).await.unwrap();
        second.write(&common::batch(k * 20 + 10, 10)).await.unwrap();
        let (x, y) = tokio::join!(first.checkpoint(&k), second.checkpoint(&k));
        x.unwrap();
        y.unwrap();
    }
    first.close().await.unwrap();
    second.close().await.unwrap();
    filesink::storage::ownership::settle_releases().await;
    assert_table_exactly_once(b.storage.as_ref(), 60, b.name).await;
    let log = read_log(b.storage.as_ref()).await;
    assert_eq!(
        log.versions.len(),
        6,
        "one version per checkpoint of each job"
    );
    // Once they are gone, the claim is free: another process gets past it (its inferred
    // schema, with nullable columns, is then refused by the table's, and writes nothing).
    let admitted = other_process();
    let err = common::cli::stderr(&admitted);
    assert_ne!(admitted.status.code(), Some(5), "{err}");
    assert!(!err.contains("single writer"), "{err}");
    assert_table_exactly_once(b.storage.as_ref(), 60, b.name).await;
}

/// Runs job `orders` on `storage` from its latest checkpoint up to `total` ids, a checkpoint
/// every [`PER_CHECKPOINT`]; the first error ends it.
async fn run_to(storage: Arc<dyn Storage>, total: i64) -> filesink::Result<()> {
    let sink = filesink::Sink::builder_shared(storage)
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()?;
    let mut c = Coordinator::builder(&sink, "orders")
        .delta_table(
            DeltaOptions::new()
                .schema(common::schema())
                .partition_by(["day"]),
        )
        .open()
        .await?;
    let mut next = c.source_position::<i64>()?.unwrap_or(0);
    while next < total {
        c.write(&common::batch(next, PER_CHECKPOINT)).await?;
        next += PER_CHECKPOINT;
        c.checkpoint(&next).await?;
    }
    c.close().await
}

#[tokio::test]
async fn a_crash_while_a_log_checkpoint_is_written_leaves_the_table_whole() {
    use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
    // The 12th put under `_delta_log/` is log checkpoint 10 (after versions 0–10); then the
    // pointer `_last_checkpoint` is replaced. Dies before or after either, then a restart.
    let plans = [
        (FaultPoint::PutLogEntry, 12),
        (FaultPoint::ReplaceLastCheckpoint, 1),
    ];
    for (point, occurrence) in plans {
        for mode in [FaultMode::Before, FaultMode::AfterApplied] {
            let b = Backend::local();
            let ctx = format!("{point:?} #{occurrence} {mode:?}");
            let faulty = FaultyStorage::new(
                b.storage.clone(),
                Some(FaultPlan {
                    point,
                    occurrence,
                    mode,
                }),
            );
            let result = run_to(Arc::new(faulty.clone()), 15 * PER_CHECKPOINT).await;
            assert!(faulty.fired() && result.is_err(), "{ctx}: {result:?}");
            drop(faulty);
            filesink::storage::ownership::settle_releases().await;
            // Readers and the restart find every complete checkpoint, with or without the
            // checkpoint and its pointer.
            let log = read_log(b.storage.as_ref()).await;
            assert!(
                log.versions.len() >= 11,
                "{ctx}: {} versions",
                log.versions.len()
            );
            run_to(b.storage.clone(), 15 * PER_CHECKPOINT)
                .await
                .unwrap_or_else(|e| panic!("{ctx}: the restart failed: {e}"));
            assert_table_exactly_once(b.storage.as_ref(), 15 * PER_CHECKPOINT, &ctx).await;
            if let Some(reader) = reader_or_explain() {
                assert_eq!(
                    reader.ids(&table_location(&b), None),
                    (0..15 * PER_CHECKPOINT).collect::<Vec<_>>(),
                    "{ctx}"
                );
            }
        }
    }
}
