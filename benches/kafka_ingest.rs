//! A Kafka topic into a partitioned Parquet lake, next to a bare consumer that only drains the
//! topic (same client, same broker, same run), and produce-to-visible latency at 1 s
//! checkpoints.
//!
//! Needs a broker: `FILESINK_KAFKA` and `FILESINK_TANSU_BIN` (`scripts/tansu start DIR && .
//! DIR/env`); without them the bench prints why and measures nothing.
//!
//! Group `kafka_ingest` (throughput in records), one topic of 4 partitions holding 400,000
//! records `{"id": …, "day": …, "amount": …}` (8 days), produced once before the timing:
//!
//! - `bare_consumer`: librdkafka's consumer (`read_committed`, the source's settings), every
//!   partition assigned from its start, polled until each reports its end, every value touched.
//!   The floor: what reading the topic costs without decoding or writing anything.
//! - `ingest`: `Ingest::from_source(Kafka … until_end)` into a new local lake partitioned by
//!   `day`, a checkpoint every 100,000 records, read back by nothing.
//!
//! Then `kafka_visible_latency` (printed, not a criterion measurement): an unbounded ingest
//! with 1 s checkpoints while a producer sends a record every 2 ms for 20 s (4 s in test
//! mode); a watcher lists the lake every 10 ms and reads each new file, and a record's
//! latency is the time from its send to the listing that first shows it. p50 and p99 over
//! every record.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::array::{Array, Int64Array};
use arrow::datatypes::{DataType, Field, Schema};
use common::test_mode;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use filesink::ingest::{CheckpointEvery, Ingest, Kafka, StopHandle};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 4;

fn broker() -> Option<(String, String)> {
    match (
        std::env::var("FILESINK_KAFKA"),
        std::env::var("FILESINK_TANSU_BIN"),
    ) {
        (Ok(b), Ok(t)) => Some((b, t)),
        _ => {
            eprintln!(
                "kafka_ingest: no broker (FILESINK_KAFKA, FILESINK_TANSU_BIN; `scripts/tansu \
                 start DIR && . DIR/env`): nothing measured"
            );
            None
        }
    }
}

fn create_topic(broker: &str, tansu: &str, what: &str) -> String {
    let name = format!("bench-{what}-{}", uuid::Uuid::now_v7().simple());
    let out = Command::new(tansu)
        .args(["topic", "create", "--broker", &format!("tcp://{broker}")])
        .args(["--partitions", &PARTITIONS.to_string(), &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}

fn producer(broker: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

fn send(p: &BaseProducer, topic: &str, id: i64, value: &str) {
    let key = id.to_string();
    let mut record = BaseRecord::to(topic)
        .key(&key)
        .payload(value)
        .partition(i32::try_from(id % i64::from(PARTITIONS)).unwrap());
    loop {
        match p.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                p.poll(Duration::from_millis(10));
            }
            Err((e, _)) => panic!("send: {e}"),
        }
    }
}

fn record(id: i64, sent_ns: i64) -> String {
    format!(
        "{{\"id\":{id},\"day\":\"2026-12-{:02}\",\"amount\":{}.25,\"sent_ns\":{sent_ns}}}",
        1 + id % 8,
        id % 1000
    )
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
        Field::new("sent_ns", DataType::Int64, false),
    ])
}

fn now_ns() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap()
}

/// Drains every partition of `topic` from its start to its end; returns the records read.
fn drain(broker: &str, topic: &str) -> u64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("group.id", "bench")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&assignment).unwrap();
    let (mut records, mut bytes, mut ended) = (0u64, 0u64, BTreeSet::new());
    while ended.len() < PARTITIONS as usize {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                records += 1;
                bytes += m.payload().map_or(0, |v| v.len() as u64);
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                ended.insert(p);
            }
            Some(Err(e)) => panic!("poll: {e}"),
            None => {}
        }
    }
    std::hint::black_box(bytes);
    records
}

fn ingest(rt: &tokio::runtime::Runtime, broker: &str, topic: &str, lake: &Path) -> u64 {
    let source = Kafka::new(broker, [topic.to_owned()])
        .until_end()
        .connect()
        .unwrap();
    let summary = rt
        .block_on(
            Ingest::from_source(source)
                .job("bench")
                .schema(schema())
                .partition_by(["day".to_owned()])
                .checkpoint_every(CheckpointEvery::Rows(100_000))
                .to_local(lake)
                .run(),
        )
        .unwrap();
    summary.records
}

fn bench(c: &mut Criterion) {
    let Some((broker, tansu)) = broker() else {
        return;
    };
    let records: i64 = if test_mode() { 20_000 } else { 400_000 };
    let topic = create_topic(&broker, &tansu, "throughput");
    let p = producer(&broker);
    for id in 0..records {
        send(&p, &topic, id, &record(id, 0));
    }
    p.flush(Duration::from_secs(60)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();

    let mut group = c.benchmark_group("kafka_ingest");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.throughput(Throughput::Elements(records as u64));
    group.bench_function("bare_consumer", |b| {
        b.iter(|| assert_eq!(drain(&broker, &topic), records as u64));
    });
    let mut run = 0;
    group.bench_function("ingest", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                run += 1;
                let lake = scratch.path().join(format!("lake-{run}"));
                let started = Instant::now();
                assert_eq!(ingest(&rt, &broker, &topic, &lake), records as u64);
                total += started.elapsed();
                std::fs::remove_dir_all(&lake).unwrap();
            }
            total
        });
    });
    group.finish();
    visible_latency(&rt, &broker, &tansu, scratch.path());
}

/// Produce-to-visible latency at 1 s checkpoints (see the module doc).
fn visible_latency(rt: &tokio::runtime::Runtime, broker: &str, tansu: &str, scratch: &Path) {
    let topic = create_topic(broker, tansu, "latency");
    let lake = scratch.join("latency-lake");
    let stop = StopHandle::new();
    let source = Kafka::new(broker, [topic.clone()]).connect().unwrap();
    let run = rt.spawn(
        Ingest::from_source(source)
            .job("latency")
            .schema(schema())
            .partition_by(["day".to_owned()])
            .checkpoint_every(CheckpointEvery::Interval(Duration::from_secs(1)))
            .stop_handle(stop.clone())
            .to_local(&lake)
            .run(),
    );
    let sending = Duration::from_secs(if test_mode() { 4 } else { 20 });
    let mut producing = Some({
        let (broker, topic) = (broker.to_owned(), topic.clone());
        std::thread::spawn(move || {
            let p = producer(&broker);
            let started = Instant::now();
            let mut id = 0;
            while started.elapsed() < sending {
                send(&p, &topic, id, &record(id, now_ns()));
                p.poll(Duration::ZERO);
                id += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            p.flush(Duration::from_secs(60)).unwrap();
            id
        })
    });
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut latencies: Vec<i64> = Vec::new();
    let mut sent = None;
    let deadline = Instant::now() + sending + Duration::from_secs(30);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        let listed_at = now_ns();
        for file in visible_files(&lake) {
            if seen.insert(file.clone()) {
                latencies.extend(sent_times(&file).into_iter().map(|s| listed_at - s));
            }
        }
        if producing.as_ref().is_some_and(|t| t.is_finished()) {
            sent = producing.take().map(|t| t.join().unwrap());
        }
        if sent.is_some_and(|n| latencies.len() as i64 >= n) {
            break;
        }
    }
    stop.stop();
    rt.block_on(run).unwrap().unwrap();
    if latencies.is_empty() {
        println!("kafka_visible_latency: no record became visible");
        return;
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize] as f64 / 1e6;
    println!(
        "kafka_visible_latency: {} of {} records visible; p50 {:.0} ms, p99 {:.0} ms, max {:.0} \
         ms at 1 s checkpoints",
        latencies.len(),
        sent.unwrap_or(0),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

fn visible_files(lake: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![lake.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name.starts_with('_') {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) if name.ends_with(".parquet") => out.push(e.path()),
                _ => {}
            }
        }
    }
    out
}

fn sent_times(file: &Path) -> Vec<i64> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let col = batch.column_by_name("sent_ns").unwrap();
        let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
        out.extend((0..col.len()).map(|i| col.value(i)));
    }
    out
}

criterion_group!(benches, bench);
criterion_main!(benches);
