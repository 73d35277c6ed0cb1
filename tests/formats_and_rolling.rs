//! Formats, rolling policies, the memory bound and serde input, read back with real readers.

mod common;

use std::fs::File;
use std::time::Duration;

use common::backend::Backend;
use common::*;
use filesink::bucket::DateTimeBucketAssigner;
use filesink::{Error, FileFormat, RollingPolicy, Sink};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{FileReader, SerializedFileReader};

#[tokio::test]
async fn parquet_writer_properties_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap()))
        .set_max_row_group_row_count(Some(100))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .build();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::parquet_with(props))
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 1000)).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    assert_eq!(committables.len(), 1);
    assert_eq!(committables[0].record_count, 1000);
    sink.committer().commit_all(&committables).await.unwrap();

    let file = &visible_files(dir.path())[0];
    let reader = SerializedFileReader::new(File::open(file).unwrap()).unwrap();
    let meta = reader.metadata();
    // Assert in pairs: rows written == rows in the footer.
    assert_eq!(meta.file_metadata().num_rows(), 1000);
    assert_eq!(meta.num_row_groups(), 10);
    let column = meta.row_group(0).column(0);
    assert!(
        matches!(column.compression(), Compression::ZSTD(_)),
        "{:?}",
        column.compression()
    );
    assert!(column.statistics().is_some());
    assert_eq!(
        std::fs::metadata(file).unwrap().len(),
        committables[0].size_bytes
    );
}

#[tokio::test]
async fn parquet_rolls_at_every_checkpoint_even_when_the_policy_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path())
        .unwrap()
        .rolling_policy(RollingPolicy::default().with_roll_on_checkpoint(false))
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    for cp in 1..=3 {
        writer.write(&batch((cp - 1) * 10, 10)).await.unwrap();
        let committables = writer.prepare_commit(cp as u64).await.unwrap().committables;
        assert_eq!(committables.len(), 1);
        assert!(writer.snapshot_state().in_progress.is_empty());
        sink.committer().commit_all(&committables).await.unwrap();
    }
    assert_eq!(visible_files(dir.path()).len(), 3);
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 30);
}

#[tokio::test]
async fn files_roll_at_the_size_limit() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Sink::local(dir.path())
            .unwrap()
            .format(format.clone())
            .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(4 * 1024))
            .buffer_bytes_max(1024)
            .build()
            .unwrap();
        let mut writer = sink.create_writer();
        for i in 0..20 {
            writer.write(&batch(i * 100, 100)).await.unwrap();
        }
        assert!(
            writer.pending_files() > 1,
            "{format:?} did not roll by size"
        );
        let committables = writer.prepare_commit(1).await.unwrap().committables;
        assert!(committables.len() > 2);
        let records: u64 = committables.iter().map(|c| c.record_count).sum();
        let open: u64 = writer
            .snapshot_state()
            .in_progress
            .iter()
            .map(|f| f.record_count)
            .sum();
        assert_eq!(records + open, 2000);
        sink.committer().commit_all(&committables).await.unwrap();
        // Finish the open file, if any, and read everything back.
        let rolling = Sink::local(dir.path())
            .unwrap()
            .format(format.clone())
            .rolling_policy(RollingPolicy::on_checkpoint())
            .build()
            .unwrap();
        let state = writer.snapshot_state();
        drop(writer);
        let mut writer = rolling
            .restore_writer(Some(&state), &[])
            .await
            .unwrap()
            .writer;
        let rest = writer.prepare_commit(2).await.unwrap().committables;
        rolling.committer().commit_all(&rest).await.unwrap();
        assert_exactly_once(dir.path(), &format, 2000);
    }
}

#[tokio::test]
async fn idle_files_roll_on_the_inactivity_interval() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::json_lines())
        .rolling_policy(
            RollingPolicy::default().with_inactivity_interval(Duration::from_millis(20)),
        )
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 10)).await.unwrap();
    writer.flush_idle().await.unwrap();
    assert_eq!(writer.pending_files(), 0, "not idle yet");
    tokio::time::sleep(Duration::from_millis(40)).await;
    writer.flush_idle().await.unwrap();
    assert_eq!(writer.pending_files(), 1);
    assert_eq!(writer.open_files(), 0);
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    assert_eq!(committables.len(), 1);
}

/// Writes 50,000 records over 5 partitions under a 64 KiB budget, checking the budget after
/// every write; commits; checks every record is visible once; returns the number of files.
async fn files_under_a_small_budget(backend: &Backend) -> usize {
    let budget = 64 * 1024;
    let sink = backend
        .sink()
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .buffer_bytes_max(budget)
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    for i in 0..50 {
        writer.write(&batch(i * 1000, 1000)).await.unwrap();
        assert!(
            writer.buffered_bytes() <= budget,
            "{} > {budget}",
            writer.buffered_bytes()
        );
    }
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    backend
        .assert_exactly_once(&FileFormat::parquet(), 50_000)
        .await;
    committables.len()
}

#[tokio::test]
async fn encoder_memory_stays_within_the_configured_budget() {
    // On local disk a flushed row group reaches the file: one file per partition.
    assert_eq!(files_under_a_small_budget(&Backend::local()).await, 5);
}

/// On an object store a part keeps its bytes in memory until they make a part of the minimum
/// upload size: a flushed row group frees the encoder but not the part's buffer, so under a
/// small budget files roll (each an ordinary pending file of the checkpoint).
#[tokio::test]
async fn object_store_parts_roll_when_the_budget_cannot_hold_their_buffers() {
    let files = files_under_a_small_budget(&Backend::memory()).await;
    assert!(files > 5, "files rolled: {files} files for 5 partitions");
}

#[derive(serde::Serialize)]
struct Row {
    id: i64,
    day: String,
    payload: String,
}

#[tokio::test]
async fn serde_values_are_written_as_records() {
    for format in formats() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Sink::local(dir.path())
            .unwrap()
            .format(format.clone())
            .rolling_policy(RollingPolicy::on_checkpoint())
            .build()
            .unwrap();
        let mut writer = sink.create_writer();
        let rows: Vec<Row> = (0..25)
            .map(|id| Row {
                id,
                day: "2026-11-30".into(),
                payload: format!("p{id}"),
            })
            .collect();
        writer.write_rows(&schema(), &rows).await.unwrap();
        // A value that does not fit the schema changes nothing.
        #[derive(serde::Serialize)]
        struct Bad {
            id: &'static str,
        }
        let err = writer
            .write_rows(&schema(), &[Bad { id: "x" }])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        let committables = writer.prepare_commit(1).await.unwrap().committables;
        sink.committer().commit_all(&committables).await.unwrap();
        assert_exactly_once(dir.path(), &format, 25);
    }
}

#[tokio::test]
async fn a_schema_change_mid_file_is_rejected_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path()).unwrap().build().unwrap();
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 10)).await.unwrap();
    let other = arrow::record_batch::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Utf8, false),
        ])),
        vec![std::sync::Arc::new(arrow::array::StringArray::from(vec![
            "a",
        ]))],
    )
    .unwrap();
    let err = writer.write(&other).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    writer.write(&batch(10, 10)).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 20);
}

#[tokio::test]
async fn processing_time_buckets_name_the_directory_by_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::json_lines())
        .rolling_policy(RollingPolicy::on_checkpoint())
        .bucket_assigner(
            DateTimeBucketAssigner::processing_time()
                .with_format("%Y/%m/%d")
                .unwrap(),
        )
        .build()
        .unwrap();
    let before = chrono::Utc::now().format("%Y/%m/%d").to_string();
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 10)).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    let after = chrono::Utc::now().format("%Y/%m/%d").to_string();
    let file = &visible_files(dir.path())[0];
    let rel = file
        .strip_prefix(dir.path())
        .unwrap()
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(rel == before || rel == after, "{rel}");
}
