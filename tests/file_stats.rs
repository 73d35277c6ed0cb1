//! Per-file statistics in committables: computed only when the sink asks for them, equal to
//! what the committed file's own footer and data say, and carried by version-2 committables
//! and manifests only; without them everything stays version 1.

mod common;

use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use common::*;
use filesink::job::manifest::manifest_path;
use filesink::{Committable, Coordinator, Error, Sink};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{json, Value};

fn sink(dir: &Path, file_stats: bool) -> Sink {
    Sink::local(dir)
        .unwrap()
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .file_stats(file_stats)
        .build()
        .unwrap()
}

fn path(p: &str) -> Vec<String> {
    p.split('.').map(str::to_owned).collect()
}

#[tokio::test]
async fn a_plain_sink_votes_version_1_committables_without_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), false);
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 100)).await.unwrap();
    let prepared = writer.prepare_commit(1).await.unwrap();
    assert_eq!(prepared.committables.len(), 5);
    for c in &prepared.committables {
        assert_eq!((c.version, &c.stats), (1, &None));
        let text = String::from_utf8(c.to_json()).unwrap();
        assert!(!text.contains("stats"), "{text}");
    }
}

#[tokio::test]
async fn statistics_match_the_committed_files_footer_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), true);
    let mut writer = sink.create_writer();
    for start in (0..3000).step_by(500) {
        writer.write(&batch(start, 500)).await.unwrap();
    }
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    sink.committer().commit_all(&committables).await.unwrap();
    assert_eq!(committables.len(), 5);
    for c in &committables {
        assert_eq!(c.version, 2, "{}", c.final_path);
        let stats = c
            .stats
            .as_ref()
            .expect("a sink with file_stats gives statistics");
        assert_eq!(stats.num_records, c.record_count);
        assert_eq!(Committable::from_json(&c.to_json()).unwrap(), *c);

        let file = std::fs::File::open(dir.path().join(&c.final_path)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        assert_eq!(
            reader.metadata().file_metadata().num_rows() as u64,
            stats.num_records
        );
        let mut ids = Vec::new();
        let mut payloads = Vec::new();
        for b in reader.build().unwrap() {
            let b = b.unwrap();
            let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
            ids.extend(id.values().iter().copied());
            let p = b.column_by_name("payload").unwrap().as_string::<i32>();
            payloads.extend((0..p.len()).map(|i| p.value(i).to_owned()));
        }
        assert_eq!(ids.len() as u64, c.record_count);
        let id = path("id");
        assert_eq!(stats.min_values[&id], json!(ids.iter().min().unwrap()));
        assert_eq!(stats.max_values[&id], json!(ids.iter().max().unwrap()));
        assert_eq!(stats.null_count[&id], 0);
        let payload = path("payload");
        assert_eq!(
            stats.min_values[&payload],
            json!(payloads.iter().min().unwrap())
        );
        assert_eq!(
            stats.max_values[&payload],
            json!(payloads.iter().max().unwrap())
        );
    }
}

fn manifest_body(dir: &Path, job: &str, id: u64) -> Value {
    let bytes = std::fs::read(dir.join(manifest_path(job, id))).unwrap();
    let envelope: Value = serde_json::from_slice(&bytes).unwrap();
    envelope["body"].clone()
}

#[tokio::test]
async fn manifests_are_version_2_only_when_they_carry_statistics() {
    for file_stats in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path(), file_stats);
        let mut c = Coordinator::open(&sink, "j", 1).await.unwrap();
        c.writer().write(&batch(0, 50)).await.unwrap();
        c.checkpoint(&50).await.unwrap();
        let body = manifest_body(dir.path(), "j", 1);
        let expected = if file_stats { 2 } else { 1 };
        assert_eq!(body["version"], expected, "file_stats {file_stats}");
        for committable in body["committables"].as_array().unwrap() {
            assert_eq!(committable["version"], expected);
            assert_eq!(committable.get("stats").is_some(), file_stats);
        }
        // The writer states carry nothing new: version 1 either way.
        assert_eq!(body["writers"][0]["version"], 1);
        // And the manifest restores.
        drop(c);
        let c = Coordinator::open(&sink, "j", 1).await.unwrap();
        assert_eq!(c.last_checkpoint(), 1);
        assert_exactly_once(dir.path(), &filesink::FileFormat::parquet(), 50);
    }
}

#[tokio::test]
async fn a_manifest_that_says_an_older_version_than_its_committables_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(dir.path(), true);
    let mut c = Coordinator::open(&sink, "j", 1).await.unwrap();
    c.writer().write(&batch(0, 10)).await.unwrap();
    c.checkpoint(&10).await.unwrap();
    drop(c);
    let mut body = manifest_body(dir.path(), "j", 1);
    body["version"] = 1.into();
    let body_text = serde_json::to_string(&body).unwrap();
    let crc = crc32c::crc32c(body_text.as_bytes());
    std::fs::write(
        dir.path().join(manifest_path("j", 1)),
        format!("{{\"crc32c\":{crc},\"body\":{body_text}}}"),
    )
    .unwrap();
    let err = Coordinator::open(&sink, "j", 1).await.unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("version 2")),
        "{err:?}"
    );
}
