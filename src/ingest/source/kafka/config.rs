//! The source's URL and consumer settings: what is fixed for exactly once, what is tuned,
//! and how a `kafka://` URL names brokers, topics, partitions and a group.

use super::*;

/// The consumer settings exactly-once rests on.
pub(super) const FIXED: &[(&str, &str)] = &[
    // Records of aborted transactions are never handed out.
    ("isolation.level", "read_committed"),
    // The position lives in the lake; the group's offsets are never the position.
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    // An offset the broker no longer has is an error, never a jump to another offset.
    ("auto.offset.reset", "error"),
    // The end of a partition is reported (`Kafka::until_end`).
    ("enable.partition.eof", "true"),
];

/// Settings that may be overridden. A fetch that finds no new record waits at most 100 ms for
/// one (librdkafka's default is 500 ms): a broker that holds a fetch for all of that wait
/// even when records arrive (tansu does) would otherwise add up to half a second to when a
/// record becomes visible.
pub(super) const TUNED: &[(&str, &str)] =
    &[("client.id", "filesink"), ("fetch.wait.max.ms", "100")];

/// The configuration of a consumer of `brokers` in `group`, with the settings given.
pub(super) fn consumer_config(
    brokers: &str,
    group: &str,
    given: &[(String, String)],
) -> ClientConfig {
    let mut config = ClientConfig::new();
    // Every level reaches the context's log (`Rebalances`), which the ingest's filter sorts;
    // librdkafka writes debug lines only for the contexts `debug` names.
    config.set_log_level(RDKafkaLogLevel::Debug);
    config.set("bootstrap.servers", brokers);
    config.set("group.id", group);
    for (k, v) in FIXED.iter().chain(TUNED) {
        config.set(*k, *v);
    }
    for (k, v) in given {
        config.set(k, v);
    }
    config
}

/// `kafka://HOST:PORT[,HOST:PORT…]/TOPIC[,TOPIC…][?partitions=0-3,7][&group=G]`.
impl std::str::FromStr for Kafka {
    type Err = Error;

    fn from_str(url: &str) -> Result<Kafka> {
        let bad = |why: &str| {
            Error::Config(format!(
                "`{url}` is not a Kafka source: {why} (kafka://HOST:PORT/TOPIC[,TOPIC…]\
                 [?partitions=0-3][&group=G])"
            ))
        };
        let rest = url
            .strip_prefix("kafka://")
            .ok_or_else(|| bad("it does not begin with kafka://"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (brokers, topics) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no topic"))?;
        if brokers.is_empty() || brokers.split(',').any(|b| !b.contains(':')) {
            return Err(bad("each broker is HOST:PORT"));
        }
        let topics: Vec<String> = topics.split(',').map(str::to_owned).collect();
        if let Some(t) = topics.iter().find(|t| !valid_topic(t)) {
            return Err(bad(&format!(
                "`{t}` is not a topic name (1 to 249 of a-z A-Z 0-9 . _ -)"
            )));
        }
        let mut kafka = Kafka::new(brokers, topics);
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("partitions", list)) => {
                    kafka = kafka.partitions(parse_ranges(list).map_err(|e| bad(&e))?);
                }
                Some(("group", "")) => {
                    return Err(bad("the consumer group's name is empty (`group=`)"))
                }
                Some(("group", group)) => kafka = kafka.group(group),
                _ => return Err(bad(&format!("`{pair}` is not a known option"))),
            }
        }
        if kafka.partitions.is_some() && kafka.group.is_some() {
            return Err(bad(
                "a consumer group reads the partitions it assigns: give partitions or a group",
            ));
        }
        Ok(kafka)
    }
}

pub(super) fn valid_topic(t: &str) -> bool {
    (1..=249).contains(&t.len())
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// `0-3,7` as partition numbers.
pub(super) fn parse_ranges(list: &str) -> std::result::Result<BTreeSet<i32>, String> {
    let mut out = BTreeSet::new();
    for item in list.split(',') {
        let number = |s: &str| {
            s.parse::<i32>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("`{s}` is not a partition number"))
        };
        match item.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (number(lo)?, number(hi)?);
                if lo > hi {
                    return Err(format!("`{item}` is an empty range"));
                }
                out.extend(lo..=hi);
            }
            None => {
                out.insert(number(item)?);
            }
        }
    }
    Ok(out)
}

/// Partition numbers as ranges: `0-3,7`.
pub(super) fn ranges(set: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut it = set.iter().copied().peekable();
    while let Some(lo) = it.next() {
        let mut hi = lo;
        while it.peek() == Some(&(hi + 1)) {
            hi = it.next().expect("peeked");
        }
        out.push(match lo == hi {
            true => lo.to_string(),
            false => format!("{lo}-{hi}"),
        });
    }
    out.join(",")
}
