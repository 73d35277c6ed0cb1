//! The ingest pipeline decodes chunks on several threads ([`Ingest::parallelism`]) and takes
//! them back in input order: every file holds its records in input order, bad records are set
//! aside in input order, a malformed record stops the run at its own line whatever chunks are
//! being decoded after it, and a run stopped with several chunks in flight resumes exactly
//! once. Each both ways the inputs are read: by the reader thread, and in ranges on the
//! decoding threads (plain files of JSON lines on a time schedule).

mod common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::*;
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input, Observer, SourcePosition};
use filesink::FileFormat;

/// `n` JSON lines with ids `from..from + n`; every `bad_every`-th line (if any) is malformed.
fn jsonl(from: i64, n: i64, bad_every: Option<i64>) -> String {
    let mut out = String::new();
    for i in from..from + n {
        if bad_every.is_some_and(|k| i % k == k - 1) {
            out.push_str(&format!("{{\"id\":{i},\"day\":\n"));
        } else {
            out.push_str(&format!(
                "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"v\":\"{}\"}}\n",
                1 + i % 24,
                "x".repeat((i % 13) as usize)
            ));
        }
    }
    out
}

fn gzip(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

/// How a run reads its inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reading {
    /// A reader thread frames them (a schedule by record counts; one input is compressed).
    ReaderThread,
    /// Each decoding thread reads its own ranges (plain files on a time schedule).
    Ranges,
}

impl Reading {
    const BOTH: [Reading; 2] = [Reading::ReaderThread, Reading::Ranges];

    fn inputs(self) -> [&'static str; 3] {
        match self {
            Reading::ReaderThread => ["a.jsonl", "b.jsonl.gz", "c.jsonl"],
            Reading::Ranges => ["a.jsonl", "b.jsonl", "c.jsonl"],
        }
    }

    fn every(self) -> CheckpointEvery {
        match self {
            Reading::ReaderThread => CheckpointEvery::Rows(700),
            Reading::Ranges => CheckpointEvery::Interval(Duration::from_millis(5)),
        }
    }
}

/// Writes three inputs with 30,000 records, ids 0..30,000 in input order; the second also
/// gzip-compressed (`b.jsonl.gz`).
fn write_inputs(dir: &Path, bad_every: Option<i64>) {
    std::fs::write(dir.join("a.jsonl"), jsonl(0, 12_000, bad_every)).unwrap();
    let b = jsonl(12_000, 10_000, bad_every);
    std::fs::write(dir.join("b.jsonl.gz"), gzip(&b)).unwrap();
    std::fs::write(dir.join("b.jsonl"), b).unwrap();
    std::fs::write(dir.join("c.jsonl"), jsonl(22_000, 8_000, bad_every)).unwrap();
}

fn inputs(dir: &Path, names: &[&str]) -> Vec<Input> {
    names
        .iter()
        .map(|f| Input::file(dir.join(f)).unwrap())
        .collect()
}

fn ingest(inputs: Vec<Input>, lake: &Path, reading: Reading) -> Ingest {
    Ingest::new(inputs)
        .to_local(lake)
        .format(FileFormat::parquet())
        .partition_by(["day"])
        .checkpoint_every(reading.every())
        .parallelism(4)
        .job("events")
}

/// Each visible file's ids, in the order the file holds them, are ascending: a partition's
/// file receives its records in input order only if the decoded chunks come back in order.
fn assert_files_in_input_order(lake: &Path) {
    let files = visible_files(lake);
    assert!(!files.is_empty());
    for f in files {
        let ids = read_ids(&f, &FileFormat::parquet());
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{} holds its records out of input order: {:?}",
            f.display(),
            &ids[..ids.len().min(20)]
        );
    }
}

/// The visible ids are `0..n`, each once (a prefix of the input); returns `n`.
fn assert_first_records_once(lake: &Path, when: &str) -> i64 {
    let visible = visible_parquet_ids(lake);
    let n = visible.len() as i64;
    if let Some(i) = (0..n).find(|&i| visible[i as usize] != i) {
        panic!(
            "{when}: {n} records visible, not ids 0..{n}: at index {i} comes id {}",
            visible[i as usize]
        );
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_decoded_in_parallel_come_back_in_input_order() {
    for reading in Reading::BOTH {
        chunks_come_back_in_input_order(reading).await;
    }
}

async fn chunks_come_back_in_input_order(reading: Reading) {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let bad = dir.path().join("bad.jsonl");
    write_inputs(dir.path(), Some(97));
    let s = ingest(inputs(dir.path(), &reading.inputs()), &lake, reading)
        .bad_records(&bad)
        .run()
        .await
        .unwrap();
    assert_eq!(s.status, IngestStatus::Finished);
    let expected: Vec<i64> = (0..30_000).filter(|i| i % 97 != 96).collect();
    assert_eq!(visible_parquet_ids(&lake), expected);
    assert_eq!(s.bad_records, 30_000 / 97);
    assert!(s.stage_times.limiting().is_some(), "{:?}", s.stage_times);
    assert_files_in_input_order(&lake);

    // The bad records, in input order: their ids ascend and their numbers count up by one.
    let text = std::fs::read_to_string(&bad).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, s.bad_records);
    let ids: Vec<i64> = lines
        .iter()
        .map(|l| {
            let record = l["line"].as_str().unwrap();
            let digits: String = record[6..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().unwrap()
        })
        .collect();
    let expected_bad: Vec<i64> = (0..30_000).filter(|i| i % 97 == 96).collect();
    assert_eq!(ids, expected_bad);
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=s.bad_records).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_record_stops_the_run_at_its_line_with_later_chunks_in_flight() {
    for reading in Reading::BOTH {
        a_malformed_record_stops_the_run_at_its_line(reading).await;
    }
}

async fn a_malformed_record_stops_the_run_at_its_line(reading: Reading) {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    // One malformed record, at line 5,001 of the second input (id 17,000): chunks after it
    // are framed and decoding on other threads when its chunk fails.
    std::fs::write(dir.path().join("a.jsonl"), jsonl(0, 12_000, None)).unwrap();
    let mut b = jsonl(12_000, 5_000, None);
    b.push_str("{\"id\":17000,\"day\":\n");
    b.push_str(&jsonl(17_001, 12_999, None));
    std::fs::write(dir.path().join("b.jsonl"), b).unwrap();
    let e = ingest(inputs(dir.path(), &["a.jsonl", "b.jsonl"]), &lake, reading)
        .run()
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("b.jsonl:5001"), "{msg}");
    // Visible: exactly the records of the checkpoints before the bad one (by record counts
    // each 700 records of an input, the last one of an input shorter), nothing of what came
    // after.
    let n = assert_first_records_once(&lake, "after the malformed record");
    assert!(n < 17_000, "{n} records visible");
    if reading == Reading::ReaderThread {
        assert!(n >= 12_000, "the first input is committed ({n} visible)");
    }
    assert_files_in_input_order(&lake);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_with_chunks_in_flight_resumes_exactly_once() {
    for reading in Reading::BOTH {
        a_stopped_run_resumes_exactly_once(reading).await;
    }
}

async fn a_stopped_run_resumes_exactly_once(reading: Reading) {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    // Stops land inside checkpoints and inside each input, with 4 decoders busy: what was
    // decoded (and written) after the last checkpoint is read again by the next run. (Each
    // run stops after writing that many records of its own: near 1,000, 6,100, 13,300 and
    // 22,000 in all.)
    write_inputs(dir.path(), None);
    for stop in [1_000, 5_100, 7_233, 8_666] {
        let s = ingest(inputs(dir.path(), &reading.inputs()), &lake, reading)
            .stop_after_records(stop)
            .run()
            .await
            .unwrap();
        assert_eq!(s.status, IngestStatus::Stopped);
        let visible = visible_parquet_ids(&lake);
        let n = visible.len() as i64;
        assert_eq!(
            visible,
            (0..n).collect::<Vec<_>>(),
            "after a stop at {stop}"
        );
    }
    let s = ingest(inputs(dir.path(), &reading.inputs()), &lake, reading)
        .run()
        .await
        .unwrap();
    assert_eq!(s.status, IngestStatus::Finished);
    assert!(s.resumed);
    assert_eq!(visible_parquet_ids(&lake), (0..30_000).collect::<Vec<_>>());
    assert_eq!(hidden_files(&lake), Vec::<std::path::PathBuf>::new());
}

/// Counts the chunks a run writes.
#[derive(Default)]
struct Chunks(usize);

impl Observer for Chunks {
    fn advanced(&mut self, _: &SourcePosition) {
        self.0 += 1;
    }
}

/// With 800 partitions open, the reader's chunks grow to three times the smallest (a file
/// gets its rows in fewer, larger pieces): a run writes fewer chunks than 8,192-record
/// chunks would make, whatever the reader had read ahead before the writers had files
/// open; and a run stopped in the middle of it resumes exactly once, the resumed run
/// starting small again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_grow_with_many_open_files_and_a_stopped_run_resumes_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let n: i64 = 250_000;
    let text: String = (0..n)
        .map(|i| format!("{{\"id\":{i},\"p\":\"p{:03}\"}}\n", i % 800))
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), text).unwrap();
    let run = || {
        Ingest::new([Input::file(dir.path().join("in.jsonl")).unwrap()])
            .to_local(&lake)
            .format(FileFormat::parquet())
            .partition_by(["p"])
            .checkpoint_every(CheckpointEvery::Rows(100_000))
            .parallelism(2)
            .job("wide")
    };
    let stopped = run().stop_after_records(120_000).run().await.unwrap();
    assert_eq!(stopped.status, IngestStatus::Stopped);
    assert_eq!(visible_parquet_ids(&lake), (0..100_000).collect::<Vec<_>>());

    let mut chunks = Chunks::default();
    let done = run().run_with(&mut chunks).await.unwrap();
    assert_eq!(done.status, IngestStatus::Finished);
    assert_eq!(visible_parquet_ids(&lake), (0..n).collect::<Vec<_>>());
    assert_eq!(hidden_files(&lake), Vec::<std::path::PathBuf>::new());
    // 150,000 records: 19 chunks of 8,192 at least. Grown: at most 8 small ones read before
    // the first write, the rest in chunks of 24,576 or cut at the checkpoint at 200,000.
    assert!(chunks.0 <= 14, "{} chunks", chunks.0);
}
