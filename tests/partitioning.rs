//! Hostile partition values stay inside the base directory, never collide, and read back.

mod common;

use std::path::Component;
use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use common::*;
use filesink::bucket::escape::unescape_path_component;
use filesink::bucket::HivePartitioner;
use filesink::{Error, FileFormat, RollingPolicy, Sink};

const HOSTILE: &[Option<&str>] = &[
    Some("../"),
    Some("../../etc/passwd"),
    Some("/"),
    Some("/abs"),
    Some("a/b"),
    Some("\0"),
    Some("nul\0byte"),
    Some("="),
    Some("k=v"),
    Some("."),
    Some(".."),
    Some(""),
    None,
    Some("__HIVE_DEFAULT_PARTITION__"),
    Some("%2F"),
    Some("%"),
    Some(".hidden"),
    Some("_underscore"),
    Some("back\\slash"),
    Some("日本語"),
    Some("line\nbreak"),
];

fn hostile_batch() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (0..HOSTILE.len() as i64).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(HOSTILE.to_vec())),
        ],
    )
    .unwrap()
}

#[tokio::test]
async fn hostile_partition_values_stay_inside_the_base_directory() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("lake");
    let sink = Sink::local(&base)
        .unwrap()
        .format(FileFormat::json_lines())
        .rolling_policy(RollingPolicy::on_checkpoint())
        .bucket_assigner(HivePartitioner::new(["p"]).unwrap())
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    writer.write(&hostile_batch()).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();

    // Nothing outside the base.
    let outside: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, vec![std::ffi::OsString::from("lake")]);

    // One distinct directory per distinct value, each one level below the base.
    let files = visible_files(&base);
    assert_eq!(files.len(), HOSTILE.len(), "values collided: {files:?}");
    let mut seen = std::collections::BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&base).unwrap();
        assert!(rel.components().all(|c| matches!(c, Component::Normal(_))));
        assert_eq!(rel.components().count(), 2, "{rel:?}");
        let dir = rel.parent().unwrap().to_str().unwrap();
        let value = dir.strip_prefix("p=").unwrap();
        let decoded = if value == "__HIVE_DEFAULT_PARTITION__" {
            None
        } else {
            Some(unescape_path_component(value).unwrap())
        };
        let ids = read_ids(file, &FileFormat::json_lines());
        assert_eq!(ids.len(), 1);
        assert_eq!(
            decoded.as_deref(),
            HOSTILE[ids[0] as usize],
            "{dir} holds id {}",
            ids[0]
        );
        assert!(seen.insert(dir.to_string(), ids[0]).is_none());
    }
}

#[tokio::test]
async fn an_overlong_partition_value_is_rejected_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(["p"]).unwrap())
        .build()
        .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Utf8, true),
    ]));
    let long = "x".repeat(10 * 1024);
    let bad = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![0, 1])),
            Arc::new(StringArray::from(vec!["ok", long.as_str()])),
        ],
    )
    .unwrap();
    let mut writer = sink.create_writer();
    let err = writer.write(&bad).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains('p'), "{err}");
    assert_eq!(
        writer.open_files(),
        0,
        "nothing of the rejected batch was written"
    );
    assert!(hidden_files(dir.path()).is_empty());

    // The writer is still usable after a rejected batch.
    let good = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![0, 1])),
            Arc::new(StringArray::from(vec!["a", "b"])),
        ],
    )
    .unwrap();
    writer.write(&good).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 2);
}

/// A partition path longer than the store takes (`PATH_MAX` less the base and a part file's
/// name, on local disk) is refused like an overlong value: before anything is written, the
/// writer usable after. One of exactly the longest length is written.
#[tokio::test]
async fn a_partition_path_longer_than_the_store_takes_is_rejected_before_anything_is_written() {
    const COLUMNS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..COLUMNS).map(|c| format!("c{c:02}")).collect();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::parquet())
        .bucket_assigner(HivePartitioner::new(names.clone()).unwrap())
        .build()
        .unwrap();
    let max = sink.partition_path_bytes_max().unwrap();
    // Values that make a path of `len` bytes: `cNN=` and runs of `x`, `/` between.
    let path_of = |len: usize| -> Vec<String> {
        let mut left = len + 1 - 5 * COLUMNS;
        (0..COLUMNS)
            .map(|_| {
                let n = left.min(251);
                left -= n;
                "x".repeat(n)
            })
            .collect()
    };
    let batch = |rows: &[(i64, Vec<String>)]| {
        let mut fields = vec![Field::new("id", DataType::Int64, false)];
        fields.extend(names.iter().map(|n| Field::new(n, DataType::Utf8, false)));
        let mut columns: Vec<arrow::array::ArrayRef> = vec![Arc::new(Int64Array::from(
            rows.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        ))];
        for c in 0..COLUMNS {
            columns.push(Arc::new(StringArray::from(
                rows.iter().map(|(_, v)| v[c].clone()).collect::<Vec<_>>(),
            )));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    };
    let mut writer = sink.create_writer();
    let err = writer
        .write(&batch(&[(0, path_of(max)), (1, path_of(max + 1))]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(
        err.to_string().contains(&format!(
            "({} bytes)` is longer than the {max} bytes",
            max + 1
        )),
        "{err}"
    );
    assert_eq!(writer.open_files(), 0, "nothing of the batch was written");
    assert!(hidden_files(dir.path()).is_empty());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "not even a directory"
    );

    writer
        .write(&batch(&[(0, path_of(max)), (1, path_of(5 * COLUMNS - 1))]))
        .await
        .unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 2);
}

#[tokio::test]
async fn partitioned_output_reads_back_with_every_row_in_its_partition() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path())
        .unwrap()
        .bucket_assigner(HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    for i in 0..10 {
        writer.write(&batch(i * 100, 100)).await.unwrap();
    }
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    assert_exactly_once(dir.path(), &FileFormat::parquet(), 1000);
    for file in visible_files(dir.path()) {
        let day = file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        for id in read_ids(&file, &FileFormat::parquet()) {
            assert_eq!(day, format!("day=2026-11-{:02}", 25 + id % 5));
        }
    }
}
