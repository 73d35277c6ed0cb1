//! `filesink ingest kafka://…` through the real binary and the real broker of the tests
//! (tansu, which `./scripts/test` starts): every record of a topic visible exactly once, read
//! to its end, after SIGKILLs at random moments, and with one job per partition of a lake.
//!
//! The kill moments come from a seeded generator; the seed is printed at the start. Rerun a
//! failure with `FILESINK_SEED=<seed> cargo test --test kafka_ingest`.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Field, Schema};
use common::backend::{s3_or_explain, Backend};
use common::cli::{assert_exactly_once, json_of, run_expect, s, stderr};
use common::delta_py::{reader_or_explain, table_location};
use common::job::Rng;
use common::kafka::{broker_or_explain, create_topic, delete_topic, produce, producer, OwnBroker};
use common::visible_parquet_ids;

const PARTITIONS: i32 = 4;

/// The schema file of records `{"id": …}`.
fn schema_file(dir: &Path) -> String {
    let path = dir.join("schema.json");
    let schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
    std::fs::write(&path, serde_json::to_vec(&schema).unwrap()).unwrap();
    s(&path).to_owned()
}

fn url(broker: &str, topic: &str, query: &str) -> String {
    format!("kafka://{broker}/{topic}{query}")
}

/// Starts `filesink args`, its standard output and error in `log` (read with [`log_of`]).
fn spawn(args: &[&str], log: &Path) -> Child {
    let file = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap()
}

fn log_of(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// The offsets consumer group `group` committed for the partitions of `topic`.
fn group_offsets(broker: &str, group: &str, topic: &str) -> Vec<i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut asked = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        asked.add_partition(topic, p);
    }
    let got = c.committed_offsets(asked, common::kafka::WAIT).unwrap();
    (0..PARTITIONS)
        .map(|p| {
            let offset = got.find_partition(topic, p).unwrap().offset();
            offset.to_raw().unwrap_or(-1)
        })
        .collect()
}

/// Waits until `lake` shows at least `n` visible records, or `child` exits.
fn wait_for_visible(lake: &Path, n: usize, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while visible_parquet_ids(lake).len() < n {
        assert!(Instant::now() < deadline, "{n} records not visible in time");
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A topic read to its end holds each record once in the lake; the same command run again
/// takes only what was produced since, and once more finds nothing new.
#[test]
fn a_topic_read_to_its_end_is_visible_once_and_a_rerun_takes_only_what_came_since() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
    let topic = create_topic(&broker, "to-its-end", PARTITIONS);
    let p = producer(&broker, &[]);
    produce(&p, &topic, PARTITIONS, 0..20_000);
    let source = url(&broker, &topic, "");
    let args = [
        "ingest",
        &source,
        "--to",
        s(&lake),
        "--schema",
        &schema,
        "--until",
        "end",
        "--checkpoint-every",
        "3000rows",
        "--json",
    ];
    let first = json_of(&run_expect(&args, 0));
    assert_eq!(first["records"], 20_000, "{first}");
    assert_exactly_once(&visible_parquet_ids(&lake), 0..20_000);
    // The group named after the job holds the offsets the lake stands at, for monitoring.
    let job = first["job"].as_str().unwrap();
    assert_eq!(group_offsets(&broker, job, &topic), [5_000; 4]);

    produce(&p, &topic, PARTITIONS, 20_000..25_000);
    let second = json_of(&run_expect(&args, 0));
    assert_eq!(second["records_this_run"], 5_000, "{second}");
    assert_eq!(second["job"], first["job"]);
    assert_exactly_once(&visible_parquet_ids(&lake), 0..25_000);
    assert_eq!(group_offsets(&broker, job, &topic), [6_250; 4]);

    let third = run_expect(&args, 0);
    assert_exactly_once(&visible_parquet_ids(&lake), 0..25_000);
    let third = json_of(&third);
    assert_eq!(
        third["records_this_run"].as_u64().unwrap_or(0),
        0,
        "{third}"
    );
}

/// SIGKILL at random moments over a million records in four partitions, each run started
/// again: every record visible exactly once at the end.
#[test]
fn sigkill_at_random_moments_loses_and_repeats_no_record() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    const RECORDS: i64 = 1_000_000;
    const KILLS: usize = 8;
    let seed = std::env::var("FILESINK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6B61_666B_6121);
    eprintln!("FILESINK_SEED={seed}");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
    let topic = create_topic(&broker, "sigkill", PARTITIONS);
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 0..RECORDS);
    let source = url(&broker, &topic, "");
    let args = [
        "ingest",
        &source,
        "--to",
        s(&lake),
        "--schema",
        &schema,
        "--until",
        "end",
        "--checkpoint-every",
        "40000rows",
        "--json",
    ];
    let mut killed = 0;
    while killed < KILLS {
        let mut child = spawn(&args, &dir.path().join("run.log"));
        // Kill at a random moment: some before the first records are visible, most after.
        let at = Duration::from_millis(150 + rng.next() % 2_500);
        let deadline = Instant::now() + at;
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        if child.try_wait().unwrap().is_some() {
            // It finished before the kill: the rest of the topic was read.
            break;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        killed += 1;
        let ids = visible_parquet_ids(&lake);
        let mut dedup = ids.clone();
        dedup.dedup();
        assert_eq!(
            dedup.len(),
            ids.len(),
            "a record visible twice after kill {killed}"
        );
    }
    eprintln!("{killed} kills");
    run_expect(&args, 0);
    assert_exactly_once(&visible_parquet_ids(&lake), 0..RECORDS);
}

/// One job of a lake reads a partition at a time: a second job naming a partition a live run
/// reads is refused (exit 5) and writes nothing; once that run is gone, the second job takes
/// the partition over where it stopped, and the first takes it back the same way.
#[test]
fn a_partition_a_live_job_reads_is_refused_to_another_job_and_handed_on_once_it_is_gone() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
    let topic = create_topic(&broker, "claims", PARTITIONS);
    let p = producer(&broker, &[]);
    produce(&p, &topic, PARTITIONS, 0..8_000);
    let all = url(&broker, &topic, "");
    let three = url(&broker, &topic, "?partitions=3");
    let common = [
        "--to",
        s(&lake),
        "--schema",
        &schema,
        "--checkpoint-every",
        "500rows",
    ];
    // The first job reads every partition, and goes on waiting for more.
    let log = dir.path().join("first.log");
    let mut first = spawn(&[&["ingest", all.as_str()][..], &common].concat(), &log);
    wait_for_visible(&lake, 8_000, &mut first);
    assert!(
        first.try_wait().unwrap().is_none(),
        "the unbounded run ended: {}",
        log_of(&log)
    );

    let refused = run_expect(
        &[&["ingest", three.as_str(), "--until", "end"][..], &common].concat(),
        5,
    );
    let err = stderr(&refused);
    assert!(err.contains("/3") && err.contains("live run"), "{err}");
    assert_exactly_once(&visible_parquet_ids(&lake), 0..8_000);

    // The first run dies; records produced since go to the job that takes partition 3 over.
    first.kill().unwrap();
    first.wait().unwrap();
    produce(&p, &topic, PARTITIONS, 8_000..12_000);
    let second = run_expect(
        &[
            &["ingest", three.as_str(), "--until", "end", "--json"][..],
            &common,
        ]
        .concat(),
        0,
    );
    assert_eq!(
        json_of(&second)["records_this_run"],
        1_000,
        "{}",
        stderr(&second)
    );
    // The first job takes partition 3 back from where the second stopped, and reads the
    // other three on from its own checkpoint.
    produce(&p, &topic, PARTITIONS, 12_000..14_000);
    run_expect(
        &[&["ingest", all.as_str(), "--until", "end"][..], &common].concat(),
        0,
    );
    assert_exactly_once(&visible_parquet_ids(&lake), 0..14_000);
}

/// SIGTERM stops a run that reads on forever at a checkpoint: everything it wrote visible,
/// exit 0, status `interrupted`; the next run reads on from there.
#[test]
fn sigterm_takes_a_last_checkpoint_and_exits_0() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
    let topic = create_topic(&broker, "sigterm", PARTITIONS);
    let p = producer(&broker, &[]);
    produce(&p, &topic, PARTITIONS, 0..10_000);
    let source = url(&broker, &topic, "");
    let args = [
        "ingest",
        &source,
        "--to",
        s(&lake),
        "--schema",
        &schema,
        "--checkpoint-every",
        "4000rows",
        "--json",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two checkpoints of records are visible; the rest waits for the next one.
    wait_for_visible(&lake, 8_000, &mut child);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the unbounded run ended"
    );
    let pid = i32::try_from(child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = json_of(&out);
    assert_eq!(summary["status"], "interrupted", "{summary}");
    // The initial checkpoint, two of 4,000 records, and the last one the signal took.
    assert!(summary["checkpoints"].as_u64().unwrap() >= 4, "{summary}");
    let visible = visible_parquet_ids(&lake);
    let total = summary["records"].as_u64().unwrap();
    assert_eq!(visible.len() as u64, total, "{summary}");
    let mut distinct = visible.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), visible.len(), "a record visible twice");

    produce(&p, &topic, PARTITIONS, 10_000..11_000);
    let until_end: Vec<&str> = args.iter().copied().chain(["--until", "end"]).collect();
    run_expect(&until_end, 0);
    assert_exactly_once(&visible_parquet_ids(&lake), 0..11_000);
}

/// The broker killed and started again while a run reads: the run waits, goes on, and stops
/// at a checkpoint on SIGTERM; with a last run to the end, every record is visible once.
#[test]
fn a_broker_restarted_mid_run_loses_and_repeats_no_record() {
    if broker_or_explain().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
    let mut broker = OwnBroker::start(&dir.path().join("broker"));
    let address = broker.address();
    let topic = create_topic(&address, "restart", PARTITIONS);
    produce(&producer(&address, &[]), &topic, PARTITIONS, 0..100_000);
    let source = url(&address, &topic, "");
    let args = [
        "ingest",
        &source,
        "--to",
        s(&lake),
        "--schema",
        &schema,
        "--checkpoint-every",
        "10000rows",
        "--json",
    ];
    let log = dir.path().join("run.log");
    let mut run = spawn(&args, &log);
    wait_for_visible(&lake, 20_000, &mut run);
    broker.kill();
    std::thread::sleep(Duration::from_secs(1));
    broker.restart();
    produce(
        &producer(&address, &[]),
        &topic,
        PARTITIONS,
        100_000..150_000,
    );
    wait_for_visible(&lake, 140_000, &mut run);
    assert!(
        run.try_wait().unwrap().is_none(),
        "the run ended while the broker was down: {}",
        log_of(&log)
    );
    let pid = i32::try_from(run.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", log_of(&log));

    let until_end: Vec<&str> = args.iter().copied().chain(["--until", "end"]).collect();
    run_expect(&until_end, 0);
    assert_exactly_once(&visible_parquet_ids(&lake), 0..150_000);
}

/// A topic into a Delta table, on local disk and on S3, killed once and run to the end: each
/// record once in the table as delta-rs reads it, and the table's `txn` of the job at its
/// last checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_into_a_delta_table_on_disk_and_s3_holds_each_record_once() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let mut backends = vec![Backend::local()];
    backends.extend(s3_or_explain());
    for b in backends {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema_file(dir.path());
        let topic = create_topic(&broker, &format!("delta-{}", b.name), PARTITIONS);
        produce(&producer(&broker, &[]), &topic, PARTITIONS, 0..30_000);
        let (to, env) = b.cli_url();
        let source = url(&broker, &topic, "");
        let mut args = vec![
            "ingest",
            &source,
            "--to",
            &to,
            "--schema",
            &schema,
            "--table",
            "delta",
            "--until",
            "end",
            "--checkpoint-every",
            "4000rows",
            "--job",
            "orders",
            "--json",
        ];
        if to.starts_with("s3://") {
            // A killed run keeps its job on S3 until its claim expires: keep that short.
            // Garage ignores conditional writes: the table's only writer says so.
            args.extend(["--lease-ttl", "1s", "--single-writer"]);
        }
        // Killed once, at a moment that depends on the machine: before or after commits.
        let mut killed = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let _ = killed.kill();
        killed.wait().unwrap();
        if to.starts_with("s3://") {
            std::thread::sleep(Duration::from_millis(1100));
        }
        let out = common::cli::run_expect_in(&args, &env, 0);
        let summary = json_of(&out);

        let Some(reader) = reader_or_explain() else {
            continue;
        };
        let location = table_location(&b);
        assert_eq!(
            reader.ids(&location, None),
            (0..30_000).collect::<Vec<_>>(),
            "[{}] delta-rs",
            b.name
        );
        let sink = filesink::job::manifest::sink_identity(b.storage.as_ref(), false)
            .await
            .unwrap()
            .unwrap();
        let app = format!("filesink-{}-orders", sink.sink_id);
        assert_eq!(
            reader.txn(&location, &app, None),
            summary["last_checkpoint"].as_i64(),
            "[{}] {summary}",
            b.name
        );
    }
}

/// A topic deleted and created again under its name holds fewer records than the lake read of
/// it: the run is refused (exit 7), nothing written, rather than read on from elsewhere.
#[test]
fn a_topic_created_again_under_its_name_is_refused() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
    let topic = create_topic(&broker, "recreated", PARTITIONS);
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 0..1_000);
    let source = url(&broker, &topic, "");
    let args = [
        "ingest",
        &source,
        "--to",
        s(&lake),
        "--schema",
        &schema,
        "--until",
        "end",
    ];
    run_expect(&args, 0);
    delete_topic(&broker, &topic);
    assert_eq!(create_topic(&broker, "recreated", PARTITIONS), topic);
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 5_000..5_040);
    let log = dir.path().join("again.log");
    let mut again = spawn(&args, &log);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = again.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = again.kill();
            panic!("still running after 60 s: {}", log_of(&log));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(7), "{}", log_of(&log));
    assert_exactly_once(&visible_parquet_ids(&lake), 0..1_000);
}

/// `--kafka-columns` adds each record's key, topic, partition, offset and timestamp: read
/// back, each row's columns are those of the record it came from.
#[test]
fn kafka_columns_carry_each_records_own_metadata() {
    use arrow::array::{Array, Int32Array, Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("kafka_key", DataType::Utf8, true),
        Field::new("kafka_topic", DataType::Utf8, false),
        Field::new("kafka_partition", DataType::Int32, false),
        Field::new("kafka_offset", DataType::Int64, false),
        Field::new("kafka_timestamp", DataType::Int64, true),
    ]);
    let schema_path = dir.path().join("schema.json");
    std::fs::write(&schema_path, serde_json::to_vec(&schema).unwrap()).unwrap();
    let topic = create_topic(&broker, "columns", PARTITIONS);
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 0..2_000);
    let source = url(&broker, &topic, "");
    run_expect(
        &[
            "ingest",
            &source,
            "--to",
            s(&lake),
            "--schema",
            s(&schema_path),
            "--until",
            "end",
            "--kafka-columns",
            "key,topic,partition,offset,timestamp",
        ],
        0,
    );
    let mut ids = Vec::new();
    for file in common::visible_files(&lake) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let col = |name: &str| batch.column_by_name(name).unwrap().clone();
            let id = col("id");
            let id = id.as_any().downcast_ref::<Int64Array>().unwrap();
            let key = col("kafka_key");
            let key = key.as_any().downcast_ref::<StringArray>().unwrap();
            let t = col("kafka_topic");
            let t = t.as_any().downcast_ref::<StringArray>().unwrap();
            let partition = col("kafka_partition");
            let partition = partition.as_any().downcast_ref::<Int32Array>().unwrap();
            let offset = col("kafka_offset");
            let offset = offset.as_any().downcast_ref::<Int64Array>().unwrap();
            let ts = col("kafka_timestamp");
            let ts = ts.as_any().downcast_ref::<Int64Array>().unwrap();
            for r in 0..batch.num_rows() {
                let id = id.value(r);
                assert_eq!(key.value(r), id.to_string());
                assert_eq!(t.value(r), topic);
                assert_eq!(i64::from(partition.value(r)), id % i64::from(PARTITIONS));
                // Partition p holds p, p+4, …: id's offset is its place there.
                assert_eq!(offset.value(r), id / i64::from(PARTITIONS));
                assert!(ts.value(r) > 1_700_000_000_000, "timestamp {}", ts.value(r));
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    assert_exactly_once(&ids, 0..2_000);
}
