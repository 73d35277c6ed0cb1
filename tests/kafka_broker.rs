//! What the Kafka-protocol broker of the tests does (tansu under `./scripts/test`), checked
//! with the client the Kafka source will use: what the source may count on, and the gaps it
//! must work around, each asserted as it is today so that the day the broker changes, this
//! file says so (as the suite does for Garage's conditional puts). See
//! `docs/design/kafka.md`, section 2.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::kafka::{broker_or_explain, create_topic, produce, producer, WAIT};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 4;

/// A new topic of `PARTITIONS` partitions, named after `what` and the process.
fn topic(broker: &str, what: &str) -> String {
    create_topic(broker, what, PARTITIONS)
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
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 0..2000);
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
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 2000..2100);
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
    produce(&p, &topic, PARTITIONS, 0..10);
    let err = p.commit_transaction(WAIT).unwrap_err();
    assert!(
        err.to_string().contains("EndTxnRequest") && err.to_string().contains("not supported"),
        "{err}"
    );
}

/// The listed end of each partition is the offset after its last record (tansu's `memory://`
/// storage lists the base offset of the last batch there instead; the SQLite storage the
/// tests use lists it right). The source does not rest on it: `--until end` ends a partition
/// at the end-of-partition a fetch reports.
#[test]
fn listed_end_offsets_are_the_ends_of_the_partitions() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let topic = topic(&broker, "listed-ends");
    let p = producer(&broker, &[]);
    for batch in 0..3 {
        produce(&p, &topic, PARTITIONS, batch * 100..(batch + 1) * 100);
    }
    let c = consumer(&broker, &format!("{topic}-g"));
    let (ids, ends) = drain(&c, &topic, &BTreeMap::new());
    assert_eq!(ids.len(), 300);
    for (partition, end) in ends {
        let (low, listed) = c.fetch_watermarks(&topic, partition, WAIT).unwrap();
        assert_eq!((low, listed), (0, end), "partition {partition}");
    }
}

/// A fetch from an offset inside a batch hands out the records from that offset on: what a
/// resumed source asks for is every record after its recorded offset, whatever the batches.
/// (tansu's `memory://` storage answers such a fetch with nothing, or with the next batch:
/// the tests do not use it.)
#[test]
fn a_fetch_from_inside_a_batch_starts_at_its_offset() {
    let Some(broker) = broker_or_explain() else {
        return;
    };
    let topic = topic(&broker, "inside-a-batch");
    // One flush: each partition's 250 records in few batches.
    produce(&producer(&broker, &[]), &topic, PARTITIONS, 0..1000);
    let c = consumer(&broker, &format!("{topic}-g"));
    let from: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 17 + i64::from(p))).collect();
    let (mut ids, ends) = drain(&c, &topic, &from);
    ids.sort_unstable();
    // Partition p holds ids p, p+4, …: from offset 17+p on, the ids from 4*(17+p)+p on.
    let expected: Vec<i64> = {
        let mut e: Vec<i64> = (0..1000).filter(|id| id / 4 >= 17 + id % 4).collect();
        e.sort_unstable();
        e
    };
    assert_eq!(ids, expected);
    assert_eq!(ends.values().sum::<i64>(), 1000, "{ends:?}");
}
