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
use common::kafka::{
    assert_no_duplicate, broker_or_explain, create_topic, delete_topic, log_of, produce, producer,
    schema_file, sigterm, spawn, url, Case, OwnBroker, PARTITIONS,
};
use common::visible_parquet_ids;

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
    let c = Case::new(&broker, "to-its-end");
    let (lake, topic) = (&c.lake, &c.topic);
    let p = producer(&broker, &[]);
    produce(&p, topic, PARTITIONS, 0..20_000);
    let args = c.args(&["--until", "end", "--checkpoint-every", "3000rows", "--json"]);
    let first = json_of(&run_expect(&args, 0));
    assert_eq!(first["records"], 20_000, "{first}");
    assert_exactly_once(&visible_parquet_ids(lake), 0..20_000);
    // The group named after the job holds the offsets the lake stands at, for monitoring.
    let job = first["job"].as_str().unwrap();
    assert_eq!(group_offsets(&broker, job, topic), [5_000; 4]);

    produce(&p, topic, PARTITIONS, 20_000..25_000);
    let second = json_of(&run_expect(&args, 0));
    assert_eq!(second["records_this_run"], 5_000, "{second}");
    assert_eq!(second["job"], first["job"]);
    assert_exactly_once(&visible_parquet_ids(lake), 0..25_000);
    assert_eq!(group_offsets(&broker, job, topic), [6_250; 4]);

    let third = run_expect(&args, 0);
    assert_exactly_once(&visible_parquet_ids(lake), 0..25_000);
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
    let c = Case::new(&broker, "sigkill");
    produce(&producer(&broker, &[]), &c.topic, PARTITIONS, 0..RECORDS);
    let args = c.args(&["--until", "end", "--checkpoint-every", "40000rows"]);
    let mut killed = 0;
    while killed < KILLS {
        let mut child = spawn(&args, &c.log("run.log"));
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
        let when = format!("after kill {killed}");
        assert_no_duplicate(&visible_parquet_ids(&c.lake), &when);
    }
    eprintln!("{killed} kills");
    run_expect(&args, 0);
    assert_exactly_once(&visible_parquet_ids(&c.lake), 0..RECORDS);
}

/// One job of a lake reads a partition at a time: a second job naming a partition a live run
/// reads is refused (exit 5) and writes nothing; once that run is gone, the second job takes
/// the partition over where it stopped, and the first takes it back the same way.
#[test]
fn a_partition_a_live_job_reads_is_refused_to_another_job_and_handed_on_once_it_is_gone() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let c = Case::new(&broker, "claims");
    let (lake, topic) = (&c.lake, &c.topic);
    let p = producer(&broker, &[]);
    produce(&p, topic, PARTITIONS, 0..8_000);
    let every = ["--checkpoint-every", "500rows"];
    let all = c.args(&every);
    // Partition 3 alone, another job: the same arguments, another source.
    let three_url = url(&broker, topic, "?partitions=3");
    let three = |extra: &[&'static str]| {
        let mut args = c.args(&every);
        args[1] = &three_url;
        args.extend_from_slice(extra);
        args
    };
    // The first job reads every partition, and goes on waiting for more.
    let log = c.log("first.log");
    let mut first = spawn(&all, &log);
    wait_for_visible(lake, 8_000, &mut first);
    assert!(
        first.try_wait().unwrap().is_none(),
        "the unbounded run ended: {}",
        log_of(&log)
    );

    let refused = run_expect(&three(&["--until", "end"]), 5);
    let err = stderr(&refused);
    assert!(err.contains("/3") && err.contains("live run"), "{err}");
    assert_exactly_once(&visible_parquet_ids(lake), 0..8_000);

    // The first run dies; records produced since go to the job that takes partition 3 over.
    first.kill().unwrap();
    first.wait().unwrap();
    produce(&p, topic, PARTITIONS, 8_000..12_000);
    let second = run_expect(&three(&["--until", "end", "--json"]), 0);
    assert_eq!(
        json_of(&second)["records_this_run"],
        1_000,
        "{}",
        stderr(&second)
    );
    // The first job takes partition 3 back from where the second stopped, and reads the
    // other three on from its own checkpoint.
    produce(&p, topic, PARTITIONS, 12_000..14_000);
    run_expect(&c.args(&["--until", "end"]), 0);
    assert_exactly_once(&visible_parquet_ids(lake), 0..14_000);
}

/// SIGTERM stops a run that reads on forever at a checkpoint: everything it wrote visible,
/// exit 0, status `interrupted`; the next run reads on from there.
#[test]
fn sigterm_takes_a_last_checkpoint_and_exits_0() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let c = Case::new(&broker, "sigterm");
    let lake = &c.lake;
    let p = producer(&broker, &[]);
    produce(&p, &c.topic, PARTITIONS, 0..10_000);
    let args = c.args(&["--checkpoint-every", "4000rows", "--json"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two checkpoints of records are visible; the rest waits for the next one.
    wait_for_visible(lake, 8_000, &mut child);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the unbounded run ended"
    );
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = json_of(&out);
    assert_eq!(summary["status"], "interrupted", "{summary}");
    // A run ended by a signal is not told how many bytes it read: no rate of input, no ratio,
    // rather than zeros.
    for unknown in ["input_bytes", "input_mb_per_s", "compression_ratio"] {
        assert!(summary[unknown].is_null(), "{unknown}: {summary}");
    }
    // The initial checkpoint, two of 4,000 records, and the last one the signal took.
    assert!(summary["checkpoints"].as_u64().unwrap() >= 4, "{summary}");
    let visible = visible_parquet_ids(lake);
    let total = summary["records"].as_u64().unwrap();
    assert_eq!(visible.len() as u64, total, "{summary}");
    assert_no_duplicate(&visible, "after SIGTERM");

    produce(&p, &c.topic, PARTITIONS, 10_000..11_000);
    run_expect(&c.args(&["--until", "end"]), 0);
    assert_exactly_once(&visible_parquet_ids(lake), 0..11_000);
}

/// The broker killed and started again while a run reads: the run waits, goes on, and stops
/// at a checkpoint on SIGTERM; with a last run to the end, every record is visible once.
#[test]
fn a_broker_restarted_mid_run_loses_and_repeats_no_record() {
    if broker_or_explain().is_none() {
        return;
    }
    let own = tempfile::tempdir().unwrap();
    let mut broker = OwnBroker::start(own.path());
    let address = broker.address();
    let c = Case::new(&address, "restart");
    let (lake, topic) = (&c.lake, &c.topic);
    produce(&producer(&address, &[]), topic, PARTITIONS, 0..100_000);
    let args = c.args(&["--checkpoint-every", "10000rows"]);
    let log = c.log("run.log");
    let mut run = spawn(&args, &log);
    wait_for_visible(lake, 20_000, &mut run);
    broker.kill();
    std::thread::sleep(Duration::from_secs(1));
    broker.restart();
    produce(
        &producer(&address, &[]),
        topic,
        PARTITIONS,
        100_000..150_000,
    );
    wait_for_visible(lake, 140_000, &mut run);
    assert!(
        run.try_wait().unwrap().is_none(),
        "the run ended while the broker was down: {}",
        log_of(&log)
    );
    sigterm(&run);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", log_of(&log));

    run_expect(&c.args(&["--until", "end"]), 0);
    assert_exactly_once(&visible_parquet_ids(lake), 0..150_000);
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

/// Runs `args` to its end, its output in `log`: its exit code and output. A run that has not
/// ended after `WAIT` is killed and fails the test (a hang, not a slow run).
fn run_to_exit(args: &[&str], log: &Path) -> (Option<i32>, String) {
    let mut child = spawn(args, log);
    let deadline = Instant::now() + common::kafka::WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "filesink {args:?} still running after {:?}: {}",
                common::kafka::WAIT,
                log_of(log)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.code(), log_of(log))
}

/// A topic produced with each compression codec Kafka has is read to its end, each record
/// once: a codec the client could not read would stop the run with an error, never wait
/// forever. Snappy is left out: tansu 0.6 cannot serve a snappy batch (its fetch fails with
/// `UnexpectedType("Snappy")` and drops the connection), so a consumer of one waits for a
/// broker that keeps hanging up; librdkafka reads snappy with its own code, built in.
#[test]
fn a_topic_produced_with_each_compression_codec_is_read_to_its_end_exactly_once() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    for codec in ["none", "gzip", "lz4", "zstd"] {
        let c = Case::new(&broker, &format!("codec-{codec}"));
        let p = producer(&broker, &[("compression.type", codec)]);
        produce(&p, &c.topic, PARTITIONS, 0..4_000);
        let args = c.args(&["--until", "end", "--checkpoint-every", "1500rows", "--json"]);
        let (code, log) = run_to_exit(&args, &c.log("run.log"));
        assert_eq!(code, Some(0), "[{codec}] {log}");
        assert_exactly_once(&visible_parquet_ids(&c.lake), 0..4_000);
    }
}

/// A lake that read a topic which was deleted and created again since, and the reruns of the
/// same command. On a broker of its own: tansu 0.6 deleting a topic while other clients use
/// it can fail the deletion ("This server does not host this topic-partition") or panic its
/// SQLite storage, which would fail the other tests using the broker then.
struct Recreated {
    c: Case,
    broker: OwnBroker,
    _dir: tempfile::TempDir,
}

impl Recreated {
    /// A topic whose first 1,000 records (250 per partition) the lake read to its end; then
    /// deleted and created again, and `new` produced into it.
    fn new(what: &str, new: std::ops::Range<i64>) -> Recreated {
        let dir = tempfile::tempdir().unwrap();
        let own = OwnBroker::start(dir.path());
        let broker = &own.address();
        let c = Case::new(broker, what);
        produce(&producer(broker, &[]), &c.topic, PARTITIONS, 0..1_000);
        run_expect(&c.args(&["--until", "end"]), 0);
        assert_exactly_once(&visible_parquet_ids(&c.lake), 0..1_000);
        delete_topic(broker, &c.topic);
        assert_eq!(create_topic(broker, what, PARTITIONS), c.topic);
        produce(&producer(broker, &[]), &c.topic, PARTITIONS, new);
        Recreated {
            c,
            broker: own,
            _dir: dir,
        }
    }

    fn rerun(&self, extra: &[&str], log: &str) -> (Option<i32>, String) {
        let mut args = vec!["--until", "end", "--json"];
        args.extend_from_slice(extra);
        run_to_exit(&self.c.args(&args), &self.c.log(log))
    }

    /// The rerun is refused as a changed input, says what to do, and writes nothing.
    fn assert_refused(&self) {
        let (code, log) = self.rerun(&[], "refused.log");
        assert_eq!(code, Some(7), "{log}");
        assert!(
            log.contains("created again") && log.contains("--kafka-topic-recreated restart"),
            "{log}"
        );
        assert_exactly_once(&visible_parquet_ids(&self.c.lake), 0..1_000);
    }
}

/// A topic created again that already holds more records per partition than the lake read
/// of the old one: refused (exit 7), nothing written, not read on from the old offsets.
#[test]
fn a_recreated_topic_longer_than_what_the_lake_read_is_refused() {
    if broker_or_explain().is_none() {
        return;
    }
    Recreated::new("recreated-longer", 10_000..13_000).assert_refused();
}

/// A topic created again that holds fewer records than the lake read of the old one: refused
/// (exit 7), nothing written.
#[test]
fn a_recreated_topic_shorter_than_what_the_lake_read_is_refused() {
    if broker_or_explain().is_none() {
        return;
    }
    Recreated::new("recreated-shorter", 10_000..10_040).assert_refused();
}

/// A topic created again that holds as many records as the lake read of the old one (its
/// ends where the old ones were), or the same records produced again: refused (exit 7).
#[test]
fn a_recreated_topic_as_long_as_what_the_lake_read_is_refused_even_with_the_same_records() {
    if broker_or_explain().is_none() {
        return;
    }
    Recreated::new("recreated-same-length", 10_000..11_000).assert_refused();
    // The same keys and values at the same offsets: the records' timestamps tell them apart.
    Recreated::new("recreated-same-records", 0..1_000).assert_refused();
}

/// With `--kafka-topic-recreated restart`, a topic created again is read from its start: its
/// records join the old topic's in the lake, each once, and the next rerun reads on from
/// where the new topic stands (it does not start over again).
#[test]
fn a_recreated_topic_is_read_from_its_start_once_when_told_to_restart() {
    if broker_or_explain().is_none() {
        return;
    }
    let r = Recreated::new("recreated-restart", 10_000..13_000);
    let restart = ["--kafka-topic-recreated", "restart"];
    let (code, log) = r.rerun(&restart, "restart.log");
    assert_eq!(code, Some(0), "{log}");
    let mut expected: Vec<i64> = (0..1_000).chain(10_000..13_000).collect();
    let mut visible = visible_parquet_ids(&r.c.lake);
    visible.sort_unstable();
    assert_eq!(visible, expected);
    // Without the flag now: the lake's position is the new topic's.
    let broker = r.broker.address();
    produce(
        &producer(&broker, &[]),
        &r.c.topic,
        PARTITIONS,
        13_000..13_400,
    );
    let (code, log) = r.rerun(&[], "after.log");
    assert_eq!(code, Some(0), "{log}");
    expected.extend(13_000..13_400);
    let mut visible = visible_parquet_ids(&r.c.lake);
    visible.sort_unstable();
    assert_eq!(visible, expected);
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
    let c = Case::new(&broker, "columns");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("kafka_key", DataType::Utf8, true),
        Field::new("kafka_topic", DataType::Utf8, false),
        Field::new("kafka_partition", DataType::Int32, false),
        Field::new("kafka_offset", DataType::Int64, false),
        Field::new("kafka_timestamp", DataType::Int64, true),
    ]);
    std::fs::write(&c.schema, serde_json::to_vec(&schema).unwrap()).unwrap();
    produce(&producer(&broker, &[]), &c.topic, PARTITIONS, 0..2_000);
    let columns = "key,topic,partition,offset,timestamp";
    run_expect(&c.args(&["--until", "end", "--kafka-columns", columns]), 0);
    let mut ids = Vec::new();
    for file in common::visible_files(&c.lake) {
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
                assert_eq!(t.value(r), c.topic);
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

/// With a time schedule, records become visible while the topic stays idle after them: the
/// checkpoint fires on time with no new record to carry it.
#[test]
fn records_become_visible_on_a_time_schedule_while_the_topic_is_idle() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let c = Case::new(&broker, "idle");
    let log = c.log("run.log");
    let mut run = spawn(&c.args(&["--checkpoint-every", "1s"]), &log);
    let p = producer(&broker, &[]);
    for round in 0..3 {
        let ids = round * 100..(round + 1) * 100;
        produce(&p, &c.topic, PARTITIONS, ids);
        // Nothing more is produced until these are visible.
        wait_for_visible(&c.lake, (round as usize + 1) * 100, &mut run);
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run ended: {}",
            log_of(&log)
        );
    }
    sigterm(&run);
    assert_eq!(run.wait().unwrap().code(), Some(0), "{}", log_of(&log));
    assert_exactly_once(&visible_parquet_ids(&c.lake), 0..300);
}

/// What is wrong with a Kafka argument is said before anything is created: a URL that is not
/// one, flags that need a Kafka input or JSON, a Kafka input beside files (exit 2); a topic or
/// partition the cluster does not have, a broker that does not answer (exit 1).
#[test]
fn kafka_arguments_are_checked_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let schema = schema_file(dir.path());
    let input = dir.path().join("a.jsonl");
    std::fs::write(&input, "{\"id\":1}\n").unwrap();
    let to = ["--to", s(&lake), "--schema", &schema];
    let cases: &[(&[&str], &str)] = &[
        (&["kafka://host/topic"], "HOST:PORT"),
        (&["kafka://h:1/a b"], "not a topic name"),
        (&["kafka://h:1/t?partitions=3-1"], "empty range"),
        (&["kafka://h:1/t", s(&input)], "read alone"),
        (&[s(&input), "--until", "end"], "kafka:// input"),
        (&[s(&input), "--kafka-columns", "offset"], "kafka:// input"),
        (
            &[
                "kafka://h:1/t",
                "--kafka-columns",
                "offset",
                "--input-format",
                "csv",
            ],
            "JSON records",
        ),
        (
            &["kafka://h:1/t", "--kafka-columns", "headers"],
            "not a Kafka column",
        ),
        (
            &["kafka://h:1/t?partitions=0&group=g"],
            "partitions or a group",
        ),
        (&[s(&input), "--kafka-config", "a=b"], "kafka:// input"),
        (
            &[s(&input), "--kafka-offset-reset", "earliest"],
            "kafka:// input",
        ),
        (
            &[s(&input), "--kafka-topic-recreated", "restart"],
            "kafka:// input",
        ),
        (&["kafka://h:1/t", "--kafka-config", "linger"], "KEY=VALUE"),
        // A setting librdkafka does not know, or a value it does not take: said before
        // anything connects.
        (
            &["kafka://h:1/t", "--kafka-config", "no.such.setting=1"],
            "no.such.setting",
        ),
        (
            &["kafka://h:1/t", "--kafka-config", "fetch.max.bytes=lots"],
            "fetch.max.bytes",
        ),
        (&["kafka://h:1/t?group="], "consumer group's name is empty"),
        (
            &[
                "kafka://h:1/t",
                "--kafka-config",
                "isolation.level=read_uncommitted",
            ],
            "exactly-once rests on it",
        ),
    ];
    for (args, says) in cases {
        let all: Vec<&str> = ["ingest"].iter().chain(*args).chain(&to).copied().collect();
        let out = run_expect(&all, 2);
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(!lake.exists(), "{args:?} created the lake");
    }
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let topic = create_topic(&broker, "arguments", PARTITIONS);
    let missing = [
        (url(&broker, "no-such-topic", ""), "no such topic"),
        (url(&broker, &topic, "?partitions=0-5"), "not 4"),
        // Nothing listens there: the broker does not answer (after 30 s).
        ("kafka://127.0.0.1:1/t".to_owned(), "kafka://127.0.0.1:1"),
    ];
    for (source, says) in missing {
        let out = run_expect(&["ingest", &source, to[0], to[1], to[2], to[3]], 1);
        assert!(stderr(&out).contains(says), "{source}: {}", stderr(&out));
        assert!(!lake.exists(), "{source} created the lake");
    }
}

/// A second signal stops the run at once, during or after its last checkpoint (exit 143, or
/// 0 if that checkpoint was done first): the next run reads on, every record once.
#[test]
fn a_second_sigterm_stops_at_once_and_the_next_run_reads_on() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let c = Case::new(&broker, "second-signal");
    produce(&producer(&broker, &[]), &c.topic, PARTITIONS, 0..50_000);
    let log = c.log("run.log");
    let mut run = spawn(&c.args(&["--checkpoint-every", "10000rows"]), &log);
    wait_for_visible(&c.lake, 10_000, &mut run);
    sigterm(&run);
    sigterm(&run);
    let code = run.wait().unwrap().code();
    assert!(matches!(code, Some(0 | 143)), "{code:?}: {}", log_of(&log));
    assert_no_duplicate(&visible_parquet_ids(&c.lake), "after two signals");
    run_expect(&c.args(&["--until", "end"]), 0);
    assert_exactly_once(&visible_parquet_ids(&c.lake), 0..50_000);
}
