use super::*;

fn offsets(v: &serde_json::Value) -> BTreeMap<String, u64> {
    PartOffsets::from_json(v).unwrap_or_default().parts
}

#[test]
fn a_url_names_brokers_topics_and_partitions() {
    let k: Kafka = "kafka://127.0.0.1:9092,h2:9093/orders,refunds?partitions=0-3,7"
        .parse()
        .unwrap();
    assert_eq!(k.brokers, "127.0.0.1:9092,h2:9093");
    assert_eq!(k.topics, ["orders", "refunds"]);
    assert_eq!(
        k.partitions.unwrap().into_iter().collect::<Vec<_>>(),
        [0, 1, 2, 3, 7]
    );
    let all: Kafka = "kafka://h:1/t".parse().unwrap();
    assert_eq!(all.partitions, None);
    assert!(!all.until_end);
}

#[test]
fn a_url_that_is_not_a_kafka_source_is_refused_with_the_reason() {
    for (url, why) in [
        ("http://h:1/t", "does not begin"),
        ("kafka://h:1", "names no topic"),
        ("kafka://h/t", "HOST:PORT"),
        ("kafka://h:1/../x", "not a topic name"),
        ("kafka://h:1/a b", "not a topic name"),
        ("kafka://h:1/", "not a topic name"),
        ("kafka://h:1/t?partitions=3-1", "empty range"),
        ("kafka://h:1/t?partitions=-1", "not a partition number"),
        ("kafka://h:1/t?partitions=x", "not a partition number"),
        ("kafka://h:1/t?grup=g", "not a known option"),
        ("kafka://h:1/t?group=", "consumer group's name is empty"),
        (
            "kafka://h:1/t?partitions=0&group=g",
            "partitions or a group",
        ),
    ] {
        let e = url.parse::<Kafka>().unwrap_err().to_string();
        assert!(e.contains(why), "{url}: {e}");
    }
}

#[test]
fn partitions_read_back_as_the_ranges_they_were_given_in() {
    for list in ["0-3,7", "0", "2,4,6", "0-9"] {
        assert_eq!(ranges(&parse_ranges(list).unwrap()), list);
    }
}

#[test]
fn the_settings_exactly_once_rests_on_cannot_be_changed() {
    let k = Kafka::new("h:1", ["t".to_owned()]);
    assert!(k
        .clone()
        .config("isolation.level", "read_uncommitted")
        .is_err());
    assert!(k.clone().config("enable.auto.commit", "true").is_err());
    assert!(k.clone().config("fetch.max.bytes", "1000000").is_ok());
    // What the client does not know or take is refused as a setting, naming it.
    for (key, value) in [("no.such.setting", "1"), ("fetch.max.bytes", "lots")] {
        let e = k.clone().config(key, value).unwrap_err();
        assert!(
            matches!(&e, Error::Config(m) if m.contains(key)),
            "{key}: {e}"
        );
    }
}

#[test]
fn a_client_error_a_retry_cannot_mend_stops_the_run() {
    use RDKafkaErrorCode as C;
    for permanent in [
        C::NotImplemented,
        C::BadCompression,
        C::UnsupportedCompressionType,
        C::UnsupportedFeature,
        C::UnsupportedVersion,
        C::Authentication,
        C::SaslAuthenticationFailed,
        C::TopicAuthorizationFailed,
        C::GroupAuthorizationFailed,
        C::UnknownTopicOrPartition,
        C::Fatal,
    ] {
        assert!(!retry_can_succeed(permanent), "{permanent:?}");
    }
    for passing in [
        C::AllBrokersDown,
        C::BrokerTransportFailure,
        C::Resolve,
        C::LeaderNotAvailable,
        C::NotLeaderForPartition,
        C::RequestTimedOut,
        C::NetworkException,
        C::OperationTimedOut,
        C::CoordinatorLoadInProgress,
    ] {
        assert!(retry_can_succeed(passing), "{passing:?}");
    }
    // Through a poll: a codec the client lacks ends the run, naming it; a broker that is
    // down is retried.
    let mut source = unconnected(&[0]);
    let e = source
        .poll_error(KafkaError::MessageConsumption(C::NotImplemented))
        .unwrap_err();
    assert!(!e.is_retryable(), "{e}");
    assert!(e.to_string().contains("codec"), "{e}");
    assert!(source
        .poll_error(KafkaError::MessageConsumption(C::AllBrokersDown))
        .is_ok());
}

fn record(offset: u64, crc32c: u32) -> RecordId {
    RecordId {
        offset,
        timestamp_ms: Some(1_700_000_000_000),
        crc32c,
    }
}

#[test]
fn the_record_checked_is_the_last_read_or_for_an_older_position_the_one_before_its_offset() {
    let mut read = Identity {
        last: Some(record(99, 7)),
        old_topic_to: None,
    };
    assert_eq!(read.record_to_check(100, 0), Some(99));
    // Moved on by the lake's ledger: the last record this job read still tells the topic.
    assert_eq!(read.record_to_check(180, 0), Some(99));
    // Deleted by retention: nothing to check (the offset is refused as a gap first).
    assert_eq!(read.record_to_check(100, 120), None);
    let mut older = Identity::default();
    assert_eq!(older.record_to_check(100, 0), Some(99));
    assert_eq!(older.record_to_check(0, 0), None);
    // A record at or after the offset read on from tells nothing of it: dropped.
    let mut ahead = Identity {
        last: Some(record(150, 7)),
        old_topic_to: None,
    };
    assert_eq!(ahead.record_to_check(100, 0), Some(99));
    assert_eq!(ahead.last, None);
}

#[test]
fn after_a_restart_an_offset_of_the_old_topic_gives_way_to_the_jobs_own() {
    // Restarted at the old topic's offset 1000, nothing read of the new one yet.
    let mut restarted = Identity {
        last: None,
        old_topic_to: Some(1000),
    };
    assert_eq!(restarted.resume_at(Some(1000)), None, "from the start");
    assert_eq!(restarted.resume_at(None), None);
    // 300 records read of the new topic; the ledger still gives the old topic's 1000.
    restarted.last = Some(record(299, 1));
    assert_eq!(restarted.resume_at(Some(1000)), Some(300));
    assert_eq!(restarted.resume_at(Some(300)), Some(300));
    // Past the old topic's end, offsets are the new topic's.
    assert_eq!(restarted.resume_at(Some(1200)), Some(1200));
    let plain = Identity::default();
    assert_eq!(plain.resume_at(Some(1000)), Some(1000));
}

#[test]
fn identities_are_kept_with_the_offsets_and_those_of_parts_not_read_are_carried() {
    let mut source = unconnected(&[0, 1]);
    let recorded = serde_json::json!({
        "parts": {"kafka://c/t/0": 100, "kafka://c/t/3": 70},
        "identities": {
            "kafka://c/t/0": {"last": {"offset": 99, "timestamp_ms": 5, "crc32c": 9}},
            "kafka://c/t/3": {"last": {"offset": 69, "crc32c": 3}},
        },
    });
    let parts = PartOffsets::from_json(&recorded).unwrap();
    source.take_identities(&parts.identities);
    let read = RecordId {
        offset: 99,
        timestamp_ms: Some(5),
        crc32c: 9,
    };
    assert_eq!(source.identity[0].last, Some(read));
    assert_eq!(source.identity[1], Identity::default());
    source.next[0] = Some(100);
    let position = PartOffsets::from_json(&source.position()).unwrap();
    assert_eq!(position.identities, parts.identities);
    // An older position, without identities, reads as one.
    let older = PartOffsets::from_json(&serde_json::json!({"parts": {"kafka://c/t/0": 100}}));
    assert!(older.unwrap().identities.is_empty());
}

#[test]
fn an_offset_the_broker_does_not_keep_is_refused_as_a_changed_input() {
    assert!(check_kept("kafka://c/t/0", 100, 0, 100).is_ok());
    assert!(check_kept("kafka://c/t/0", 100, 100, 250).is_ok());
    let retention = check_kept("kafka://c/t/0", 100, 160, 250).unwrap_err();
    assert!(
        matches!(&retention, Error::InputChanged(m) if m.contains("100..160")),
        "{retention}"
    );
    let recreated = check_kept("kafka://c/t/0", 100, 0, 10).unwrap_err();
    assert!(
        matches!(&recreated, Error::InputChanged(m) if m.contains("created again")),
        "{recreated}"
    );
}

#[test]
fn offsets_retention_deleted_are_passed_over_on_request_and_reported() {
    let part = "kafka://c/t/0";
    assert_eq!(start_at(part, None, 40, 90, false).unwrap(), (None, None));
    assert_eq!(
        start_at(part, Some(50), 40, 90, false).unwrap(),
        (Some(50), None)
    );
    assert!(start_at(part, Some(10), 40, 90, false).is_err());
    let (next, skipped) = start_at(part, Some(10), 40, 90, true).unwrap();
    assert_eq!(next, Some(40));
    let skipped = skipped.unwrap();
    assert_eq!((skipped.from, skipped.to), (10, 40));
    // Past the end (the topic created again) is refused whatever was asked.
    assert!(start_at(part, Some(120), 40, 90, true).is_err());
}

#[test]
fn metadata_fields_are_added_at_the_end_of_an_object_and_nothing_else_changes() {
    let fields = [
        ("kafka_offset", serde_json::Value::from(5)),
        ("kafka_key", serde_json::Value::from("k\"1")),
    ];
    let add = |v: &str| String::from_utf8(add_fields(v.as_bytes(), &fields)).unwrap();
    assert_eq!(
        add(r#"{"a":1}"#),
        r#"{"a":1,"kafka_offset":5,"kafka_key":"k\"1"}"#
    );
    assert_eq!(add(" { } "), r#"{ "kafka_offset":5,"kafka_key":"k\"1"}"#);
    assert_eq!(
        add(r#"{"s":"}"}"#),
        r#"{"s":"}","kafka_offset":5,"kafka_key":"k\"1"}"#
    );
    for other in ["[1]", "7", "", "{\"a\":1", "not json"] {
        assert_eq!(add(other), other);
    }
}

#[test]
fn kafka_columns_are_named_as_given() {
    for c in KafkaColumn::ALL {
        let short = c.name().strip_prefix("kafka_").unwrap();
        assert_eq!(short.parse::<KafkaColumn>().unwrap(), c);
    }
    assert!("kafka_key".parse::<KafkaColumn>().is_err());
    assert!("headers".parse::<KafkaColumn>().is_err());
}

/// A source of partitions `partitions` of topic `t`, its consumer never connected.
fn unconnected(partitions: &[i32]) -> KafkaSource {
    let parts: Vec<Part> = partitions
        .iter()
        .map(|p| Part {
            topic: "t".into(),
            partition: *p,
            name: format!("kafka://c/t/{p}"),
        })
        .collect();
    let consumer = consumer_config("127.0.0.1:1", "g", &[])
        .create_with_context(Rebalances::default())
        .unwrap();
    Kafka::new("127.0.0.1:1", ["t".to_owned()]).source(
        "kafka://c/t".into(),
        "c".into(),
        parts,
        consumer,
    )
}

#[test]
fn a_position_holds_the_parts_read_and_keeps_those_recorded_but_not_read_now() {
    let mut source = unconnected(&[0, 1]);
    source.carried.insert("kafka://c/t/3".into(), 70);
    source.next[1] = Some(12);
    let position = offsets(&source.position());
    let expected: BTreeMap<String, u64> = [
        ("kafka://c/t/1".to_owned(), 12),
        ("kafka://c/t/3".to_owned(), 70),
    ]
    .into_iter()
    .collect();
    // Part 0 has no record read and no recorded offset: it is not in the position.
    assert_eq!(position, expected);
}

#[test]
fn part_offsets_move_on_to_the_later_base() {
    let mut p = PartOffsets::default();
    p.parts.insert("kafka://c/t/0".into(), 10);
    p.parts.insert("kafka://c/t/1".into(), 50);
    let bases = [
        ("kafka://c/t/0".to_owned(), 20),
        ("kafka://c/t/1".to_owned(), 5),
    ];
    p.at_least(&bases.into_iter().collect());
    assert_eq!(offsets(&p.to_json())["kafka://c/t/0"], 20);
    assert_eq!(offsets(&p.to_json())["kafka://c/t/1"], 50);
}

#[test]
fn rebalances_are_handed_on_in_order_and_name_new_partitions_too() {
    let mut source = unconnected(&[0, 1]);
    source.group = Some("g".into());
    source.until_end = true;
    let push = |s: &KafkaSource, e: Rebalanced| {
        s.consumer.context().events.lock().unwrap().push_back(e);
    };
    // A revoke with nothing assigned gives nothing to hand on.
    push(&source, Rebalanced::Revoked);
    push(
        &source,
        Rebalanced::Assigned(vec![("t".into(), 1), ("t".into(), 5)]),
    );
    let names = vec!["kafka://c/t/1".to_owned(), "kafka://c/t/5".to_owned()];
    assert_eq!(source.rebalanced(), Some(Next::Assigned(names.clone())));
    // Partition 5 was added to the topic since the source connected: a part of its own.
    assert_eq!(source.parts.len(), 3);
    assert!(!source.ended(), "nothing resumed yet");
    source.assigned = source.assigning.take();
    source.at_end[1] = true;
    assert!(!source.ended());
    source.at_end[2] = true;
    assert!(source.ended(), "every part assigned is at its end");
    push(&source, Rebalanced::Revoked);
    assert_eq!(source.rebalanced(), Some(Next::Revoked(names)));
    assert_eq!(source.rebalanced(), None);
    assert!(
        !source.ended(),
        "nothing assigned until the next assignment"
    );
}
