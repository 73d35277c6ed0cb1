//! What the Kafka-protocol broker of the tests does (tansu under `./scripts/test`), checked
//! with the client the Kafka source will use: what the source may count on, and the gaps it
//! must work around, each asserted as it is today so that the day the broker changes, this
//! file says so (as the suite does for Garage's conditional puts). See
//! `docs/design/kafka.md`, section 2.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 4;
const WAIT: Duration = Duration::from_secs(30);

/// The broker's address (`FILESINK_KAFKA`, which `./scripts/test` exports); in CI a missing
/// broker fails the test, elsewhere it says loudly that the Kafka checks did not run.
fn broker_or_explain() -> Option<String> {
    match std::env::var("FILESINK_KAFKA") {
        Ok(b) => Some(b),
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("CI must run the Kafka checks: FILESINK_KAFKA is not set (./scripts/test starts tansu)")
        }
        Err(_) => {
            eprintln!(
                "\n*** KAFKA CHECKS NOT RUN: no broker configured. Run `./scripts/test` (starts \
                 tansu on 127.0.0.1 and exports FILESINK_KAFKA), or set FILESINK_KAFKA and \
                 FILESINK_TANSU_BIN. ***\n"
            );
            None
        }
    }
}

/// A new topic of `PARTITIONS` partitions, named after `what` and the process.
fn topic(broker: &str, what: &str) -> String {
    let name = format!("{what}-{}", std::process::id());
    let bin = std::env::var("FILESINK_TANSU_BIN").expect("FILESINK_TANSU_BIN (scripts/tansu)");
    let out = Command::new(bin)
        .args(["topic", "create", "--broker", &format!("tcp://{broker}")])
        .args(["--partitions", &PARTITIONS.to_string(), &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "creating topic {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}

fn producer(broker: &str, extra: &[(&str, &str)]) -> BaseProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker)
        .set("enable.idempotence", "true");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create().unwrap()
}

fn consumer(broker: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("group.id", group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap()
}

/// Sends `ids` as JSON records keyed by id, and waits until the broker has them all.
fn produce(p: &BaseProducer, topic: &str, ids: std::ops::Range<i64>) {
    for id in ids {
        let (key, value) = (id.to_string(), format!("{{\"id\":{id}}}"));
        let mut record = BaseRecord::to(topic).key(&key).payload(&value);
        loop {
            match p.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    p.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
    }
    p.flush(WAIT).unwrap();
}

/// Reads every partition of `topic` from `from` (per partition) to its end: the ids read, and
/// per partition the offset at which the broker said it ended.
fn drain(
    c: &BaseConsumer,
    topic: &str,
    from: &BTreeMap<i32, i64>,
) -> (Vec<i64>, BTreeMap<i32, i64>) {
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        let offset = from
            .get(&p)
            .map_or(Offset::Beginning, |o| Offset::Offset(*o));
        assignment.add_partition_offset(topic, p, offset).unwrap();
    }
    c.assign(&assignment).unwrap();
    let (mut ids, mut ends) = (Vec::new(), BTreeMap::new());
    let deadline = Instant::now() + WAIT;
    while ends.len() < PARTITIONS as usize {
        assert!(
            Instant::now() < deadline,
            "no end of {topic} within {WAIT:?}: {ends:?}"
        );
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                let text = std::str::from_utf8(m.payload().unwrap()).unwrap();
                let v: serde_json::Value = serde_json::from_str(text).unwrap();
                ids.push(v["id"].as_i64().unwrap());
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                let position = c.position().unwrap();
                let at = position.find_partition(topic, p).unwrap().offset();
                ends.insert(p, at.to_raw().unwrap_or(0));
            }
            Some(Err(e)) => panic!("poll: {e}"),
        }
    }
    (ids, ends)
}

/// What the source counts on: every record of every partition handed once, in offset order per
/// partition, to a `read_committed` consumer; end-of-partition at the offset after the last
/// record; the group's committed offsets kept and handed back.
#[test]
fn a_read_committed_consumer_gets_every_record_once_and_the_group_keeps_its_offsets() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let topic = topic(&broker, "every-record");
    produce(&producer(&broker, &[]), &topic, 0..2000);
    let c = consumer(&broker, &format!("{topic}-g"));
    let (mut ids, ends) = drain(&c, &topic, &BTreeMap::new());
    ids.sort_unstable();
    assert_eq!(ids, (0..2000).collect::<Vec<_>>());
    assert_eq!(ends.values().sum::<i64>(), 2000, "{ends:?}");

    // The ends, committed for the group, come back to the group's next member.
    let mut committed = TopicPartitionList::new();
    for (p, o) in &ends {
        committed
            .add_partition_offset(&topic, *p, Offset::Offset(*o))
            .unwrap();
    }
    c.commit(&committed, CommitMode::Sync).unwrap();
    let next = consumer(&broker, &format!("{topic}-g"));
    let mut asked = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        asked.add_partition(&topic, p);
    }
    let back = next.committed_offsets(asked, WAIT).unwrap();
    for (p, o) in &ends {
        let got = back.find_partition(&topic, *p).unwrap().offset();
        assert_eq!(got, Offset::Offset(*o), "partition {p}");
    }

    // Records sent later are read from those offsets on, and nothing before them again.
    produce(&producer(&broker, &[]), &topic, 2000..2100);
    let (mut more, _) = drain(&next, &topic, &ends);
    more.sort_unstable();
    assert_eq!(more, (2000..2100).collect::<Vec<_>>());
}

/// tansu 0.6 leaves EndTxn (API key 26) out of its ApiVersions answer, so no transaction can be
/// committed or aborted through it: the abort-invisibility check of the Kafka source needs
/// another broker until it does. The day this fails, tansu takes transactions: write the
/// check against it.
#[test]
fn the_broker_cannot_end_a_transaction() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let topic = topic(&broker, "transactions");
    let txn_id = format!("{topic}-tx");
    let p = producer(&broker, &[("transactional.id", txn_id.as_str())]);
    p.init_transactions(WAIT).unwrap();
    p.begin_transaction().unwrap();
    produce(&p, &topic, 0..10);
    let err = p.commit_transaction(WAIT).unwrap_err();
    assert!(
        err.to_string().contains("EndTxnRequest") && err.to_string().contains("not supported"),
        "{err}"
    );
}

/// tansu 0.6 answers ListOffsets for the latest offset with the first offset of a partition's
/// last batch, not the offset after its last record; a fetch reports the end right. So
/// `--until end` ends a partition at its end-of-partition, never at the listed offset alone.
/// The day this fails, the listed offsets are right.
#[test]
fn listed_end_offsets_lag_the_end_of_a_partition() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let topic = topic(&broker, "listed-ends");
    let p = producer(&broker, &[]);
    for batch in 0..3 {
        produce(&p, &topic, batch * 100..(batch + 1) * 100);
    }
    let c = consumer(&broker, &format!("{topic}-g"));
    let (ids, ends) = drain(&c, &topic, &BTreeMap::new());
    assert_eq!(ids.len(), 300);
    for (partition, end) in ends {
        let (low, listed) = c.fetch_watermarks(&topic, partition, WAIT).unwrap();
        assert_eq!(low, 0);
        if end > 0 {
            assert!(
                listed < end,
                "partition {partition}: listed {listed}, ends at {end}: tansu lists ends right now"
            );
        }
    }
}
