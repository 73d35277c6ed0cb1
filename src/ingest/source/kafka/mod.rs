//! Kafka topics as a source (feature `kafka`): [`Kafka`] names what to read, [`KafkaSource`]
//! reads it. It is a [`Source`] with one part per topic-partition, so everything exactly-once
//! needs is the ingest's, not the broker's.
//!
//! # Positions
//!
//! A topic-partition is the part `kafka://<cluster id>/<topic>/<partition>` (the cluster id
//! from the broker's metadata, so one lake can take one topic name from two clusters). The
//! position every checkpoint records ([`PartOffsets`]) is, per part read, the **next offset to
//! read**: the offset after the last record handed out before the cut. A part the job has not
//! read a record of yet is left out, and is read from its first offset kept. Kafka's own
//! committed group offsets are never read.
//!
//! # Lifecycle
//!
//! 1. [`Kafka::connect`]: the cluster id and the partitions of every topic, from the broker's
//!    metadata; a topic or partition that is not there is refused, nothing created.
//! 2. The ingest takes the parts from the lake's ledger (one job of a lake reads a part at a
//!    time: a live run of another job that holds one refuses this one, exit 5; a dead one is
//!    settled, its records made visible, and this job reads on from where it stopped).
//! 3. [`Source::seek`] assigns every part at its offset, with `isolation.level =
//!    read_committed`: records of aborted transactions and control records never reach a
//!    chunk, and no offset passes the last stable offset. The offsets are checked against
//!    what the broker keeps: an offset below its first kept offset (retention deleted records
//!    the lake never read) or past its end (the topic was deleted and created again) is
//!    refused ([`Error::InputChanged`], exit 7), never read on from elsewhere. Then each
//!    part's topic is checked against the one the lake read (*Topic identity*, below).
//! 4. [`Source::next`]: the records of a poll, each one record (its value; a record without
//!    a value, a tombstone, is skipped), with the offsets after them.
//! 5. With [`Kafka::until_end`], a part ends at the end-of-partition the consumer reports
//!    (not at an offset the broker lists: some brokers list the base offset of a partition's
//!    last batch there); the source ends once every part has.
//! 6. After each checkpoint's commit, the ingest hands the committed position to
//!    [`Source::commit_hook`]: its offsets are committed to the consumer group (the job's name,
//!    or [`Kafka::group`]), asynchronously, the last one of a run synchronously. For lag
//!    monitoring only.
//!
//! # Topic identity
//!
//! A topic deleted and created again under its name starts again at offset 0: offsets alone
//! cannot tell it from the old one once it is as long as what the lake read. librdkafka's
//! metadata does not give Kafka's topic ids (only its admin API does), and brokers without
//! them exist, so a part's identity is one of its records:
//!
//! - **The rule.** Every position keeps, per part, beside its next offset, the *last record
//!   read* of it ([`PartOffsets::identities`]): offset, timestamp, CRC-32C of key and value.
//!   Before a part is read on from offset `n`, the record at the recorded offset is read from
//!   the broker: the same one, the same topic; another one (or a partition that ends before
//!   `n`), another topic, refused ([`Error::InputChanged`], exit 7, nothing written), or with
//!   [`Kafka::restart_recreated_topics`] read from the new topic's start.
//! - **Retention.** The record checked is the last one read, the one retention deletes last:
//!   while it is gone, so is offset `n - 1`, and the part is refused as a retention gap
//!   before its identity matters (with [`Kafka::offset_reset_earliest`] it is read on from
//!   the first offset kept, unchecked: it is reported as possible loss either way).
//! - **Compaction, aborted transactions.** A record still inside the retained offsets but
//!   gone (compacted since) cannot be checked: a warning, the part read on, and the next
//!   record read becomes its identity.
//! - **Older positions.** A position without identities (an older layout) takes the record
//!   before its offset as the part's, recorded at the next checkpoint: a topic created again
//!   before that run is not told apart.
//! - **Restart.** A restarted part is read from the new topic's first offset; its identity
//!   notes the old topic's end (`old_topic_to`): an offset up to it that the lake's ledger
//!   gives (another job's, of the old topic) is not where the new topic stands, the job's own
//!   is. The note is dropped once a record past it is read.
//! - **Hand-over.** The identity is in the job's own position, not in the ledger: a job that
//!   takes over a part it never read has none, and records one as an older position does.
//!
//! | the process dies | then |
//! |---|---|
//! | after the check, before a checkpoint | the next run checks the same record again |
//! | after a restart, before a checkpoint | the position still holds the old topic's offset and record: the next run finds the topic changed again, restarts again, and what was read since is written once |
//! | after a restart's first checkpoint | the position holds the new topic's offset and last record: read on from there |
//!
//! Invariants: the identity and the offset of a part come from one position (one chunk's),
//! so the record checked was read before the offset read on from; a part is read only after
//! its check passed, or from its start.
//!
//! # Consumer groups ([`Kafka::group`])
//!
//! The source joins the group and reads what the broker assigns; processes started with the
//! same group share the partitions, each a job of its own. [`Source::parts`] then names every
//! partition of the topics, and the parts change as the ingest runs:
//!
//! 1. The rebalance callback (inside a poll, on the reader's thread) queues the event:
//!    - a revoke unassigns at once (eager rebalancing revokes everything);
//!    - an assignment is not assigned yet.
//! 2. [`Source::next`] hands out the records polled before the event, then
//!    [`Next::Revoked`] or [`Next::Assigned`]; nothing of a revoked part after it.
//! 3. The ingest answers a revoke with a checkpoint that rolls every file, its commit, and a
//!    release of the parts in the ledger at the offsets it recorded.
//! 4. It answers an assignment by taking the parts in the ledger (waiting for a live job that
//!    holds one to release it), then [`Source::resume_parts`] with each part's offset. Only
//!    then are they assigned, at those offsets: librdkafka heartbeats meanwhile.
//!
//! The design, and why no process waits for one that waits for it: `docs/design/kafka.md`
//! (section 7).
//!
//! # Crash points
//!
//! | the process dies | then |
//! |---|---|
//! | while reading, before a checkpoint | the next run seeks every part to the last recorded offsets: the records since are read again and written once |
//! | between a checkpoint's manifest and its commit | the next run (or the job taking a part over) commits the pending files first, idempotently |
//! | after the commit, before the group's offsets are committed | nothing is read again; only the group's lag figure is behind until the next commit |
//! | during the last checkpoint a SIGTERM asked for | as during any checkpoint: the next run resumes from the last complete one |
//! | paused past its lease while another job took a part over (a zombie) | its next checkpoint fails its ownership check and writes nothing; the other job read on from its last committed offsets |
//! | in a group, during a revoke's checkpoint, before its release | the parts' heads still name its job: the next owner settles it once its run is gone (at once on local disk) and reads on from its last checkpoint |
//! | in a group, after taking a part, before a checkpoint names it | the head names its job: a restart of the job releases it at start, or the next owner settles the dead job |
//!
//! # Invariants
//!
//! - A position only holds offsets after records that were handed out: the offsets of a
//!   chunk are those after its own records.
//! - A part is read by one job of a lake at a time (the ledger), so no two jobs write one
//!   record, whatever a consumer group assigns: a part two members are assigned at once is
//!   read by the one that holds it in the ledger, the other waits for its release.
//! - No offset is skipped silently: an offset the broker no longer has is refused, and so is
//!   an offset of a topic that was created again since the lake read it.
//! - A consumer error a retry cannot mend (a codec this build lacks, refused credentials, a
//!   topic that does not exist) stops the run; the client retries only those that can pass.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use super::custom::{CommitHook, Next, Skipped, Source};
use super::position::PartOffsets;
use crate::error::{Error, Result};

mod config;
mod errors;
mod group;
mod identity;
#[cfg(test)]
mod tests;

use config::*;
use errors::*;
use group::*;
use identity::*;

/// How long a call to the broker (metadata, offsets) may take before it is given up.
const BROKER_TIMEOUT: Duration = Duration::from_secs(30);

/// What to read from a Kafka cluster: topics, and optionally which of their partitions.
/// [`Kafka::connect`] makes the [`KafkaSource`] an [`Ingest`](crate::ingest::Ingest) reads
/// ([`Ingest::from_source`](crate::ingest::Ingest::from_source)).
///
/// ```no_run
/// # async fn run() -> filesink::Result<()> {
/// use filesink::ingest::{Ingest, Kafka};
/// # let schema = arrow::datatypes::Schema::empty();
/// let kafka: Kafka = "kafka://127.0.0.1:9092/orders?partitions=0-3".parse()?;
/// let source = kafka.until_end().connect()?;
/// let job = source.default_job_name();
/// Ingest::from_source(source)
///     .job(job)
///     .schema(schema)
///     .to_local("lake")
///     .run()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kafka {
    brokers: String,
    topics: Vec<String>,
    partitions: Option<BTreeSet<i32>>,
    until_end: bool,
    group: Option<String>,
    columns: Vec<KafkaColumn>,
    config: Vec<(String, String)>,
    reset_earliest: bool,
    restart_recreated: bool,
}

/// Metadata of a Kafka record, added to it as a column ([`Kafka::columns`]): for audit, and
/// for deduplication downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KafkaColumn {
    /// `kafka_key`: the record's key as text (bytes that are not UTF-8 replaced by U+FFFD),
    /// `null` without one.
    Key,
    /// `kafka_topic`: its topic.
    Topic,
    /// `kafka_partition`: its partition.
    Partition,
    /// `kafka_offset`: its offset.
    Offset,
    /// `kafka_timestamp`: its timestamp, in milliseconds since the Unix epoch (`null`
    /// without one).
    Timestamp,
}

impl KafkaColumn {
    /// Every column, in the order they are added.
    pub const ALL: [KafkaColumn; 5] = [
        KafkaColumn::Key,
        KafkaColumn::Topic,
        KafkaColumn::Partition,
        KafkaColumn::Offset,
        KafkaColumn::Timestamp,
    ];

    /// The column's name.
    pub fn name(self) -> &'static str {
        match self {
            KafkaColumn::Key => "kafka_key",
            KafkaColumn::Topic => "kafka_topic",
            KafkaColumn::Partition => "kafka_partition",
            KafkaColumn::Offset => "kafka_offset",
            KafkaColumn::Timestamp => "kafka_timestamp",
        }
    }
}

/// `key`, `topic`, `partition`, `offset`, `timestamp`.
impl std::str::FromStr for KafkaColumn {
    type Err = Error;

    fn from_str(s: &str) -> Result<KafkaColumn> {
        KafkaColumn::ALL
            .into_iter()
            .find(|c| c.name().strip_prefix("kafka_") == Some(s))
            .ok_or_else(|| {
                Error::Config(format!(
                    "`{s}` is not a Kafka column (key, topic, partition, offset, timestamp)"
                ))
            })
    }
}

impl Kafka {
    /// Every partition of `topics` at the cluster `brokers` (`host:port[,host:port…]`).
    pub fn new(brokers: impl Into<String>, topics: impl IntoIterator<Item = String>) -> Kafka {
        Kafka {
            brokers: brokers.into(),
            topics: topics.into_iter().collect(),
            partitions: None,
            until_end: false,
            group: None,
            columns: Vec::new(),
            config: Vec::new(),
            reset_earliest: false,
            restart_recreated: false,
        }
    }

    /// A part whose topic was deleted and created again since the lake read it (see *Topic
    /// identity* in the [module doc](self)) is read from the start of the new topic, its
    /// records added to those the lake holds of the old one. Without it such a part is
    /// refused ([`Error::InputChanged`]).
    pub fn restart_recreated_topics(mut self) -> Kafka {
        self.restart_recreated = true;
        self
    }

    /// A recorded offset below the first one a partition keeps (retention deleted records the
    /// lake never read) is not refused: the part is read on from its first offset kept, and
    /// the offsets passed over are reported as possible loss ([`Next::Skipped`], in the run's
    /// summary). Without it such a part is refused ([`Error::InputChanged`]). An offset past a
    /// partition's end (the topic was created again) is refused either way.
    pub fn offset_reset_earliest(mut self) -> Kafka {
        self.reset_earliest = true;
        self
    }

    /// Only these partitions of each topic.
    pub fn partitions(mut self, partitions: impl IntoIterator<Item = i32>) -> Kafka {
        self.partitions = Some(partitions.into_iter().collect());
        self
    }

    /// Ends once every partition is read to the end it has when it is first read to (a
    /// backfill); without it the source does not end, and the ingest runs until it is
    /// stopped.
    pub fn until_end(mut self) -> Kafka {
        self.until_end = true;
        self
    }

    /// Joins consumer group `group` and reads the partitions the broker assigns: processes
    /// started with the same group share the topics' partitions, each one a job of its own
    /// (see the [module doc](self)). Not with [`Kafka::partitions`]. The offsets are also
    /// committed to the group once their records are committed in the lake, so that the usual
    /// lag monitoring works; they are never read. Without a group the partitions are read as
    /// given, and the offsets are committed to a group named after the job.
    pub fn group(mut self, group: impl Into<String>) -> Kafka {
        self.group = Some(group.into());
        self
    }

    /// Adds each record's metadata as columns named `kafka_<column>` (their types are the
    /// schema's: it must name them). Records are JSON objects then: the fields are added at the
    /// end of each object, so they win over fields of the same name in the record; a record
    /// that is not an object is left as it is, and refused as a malformed record.
    pub fn columns(mut self, columns: impl IntoIterator<Item = KafkaColumn>) -> Kafka {
        self.columns.clear();
        for c in columns {
            if !self.columns.contains(&c) {
                self.columns.push(c);
            }
        }
        self
    }

    /// A librdkafka setting of the consumer (`security.protocol`, `fetch.max.bytes`); those
    /// exactly-once rests on (`isolation.level`, `enable.auto.commit`, `auto.offset.reset`)
    /// are refused, and so is a key librdkafka does not know or a value it does not take
    /// ([`Error::Config`], before anything connects).
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Result<Kafka> {
        let (key, value) = (key.into(), value.into());
        if FIXED.iter().any(|(k, _)| *k == key) {
            return Err(Error::Config(format!(
                "the Kafka setting `{key}` is the source's own: exactly-once rests on it"
            )));
        }
        // librdkafka checks a setting as it is set: the same check, on a configuration of
        // this setting alone.
        let mut probe = ClientConfig::new();
        probe.set(&key, &value);
        if let Err(e) = probe.create_native_config() {
            let why = match &e {
                KafkaError::ClientConfig(_, description, _, _) => description.clone(),
                other => other.to_string(),
            };
            return Err(Error::Config(format!(
                "the Kafka setting `{key}={value}` is refused by the client: {why}"
            )));
        }
        self.config.push((key, value));
        Ok(self)
    }

    /// Connects: reads the cluster id and the partitions of every topic. Blocks (up to 30
    /// seconds while the broker does not answer).
    pub fn connect(self) -> Result<KafkaSource> {
        if self.topics.is_empty() {
            return Err(Error::Config("a Kafka source needs a topic".into()));
        }
        if self.group.is_some() && self.partitions.is_some() {
            return Err(Error::Config(
                "a Kafka source in a consumer group reads the partitions the group assigns: \
                 give partitions or a group, not both"
                    .into(),
            ));
        }
        let at = format!("kafka://{}", self.brokers);
        let group = self.group.as_deref().unwrap_or("filesink");
        let consumer: BaseConsumer<Rebalances> =
            consumer_config(&self.brokers, group, &self.config)
                .create_with_context(Rebalances::default())
                .map_err(|e| broker_error("connect to", &at, &e))?;
        let metadata = consumer
            .fetch_metadata(None, BROKER_TIMEOUT)
            .map_err(|e| broker_error("read the topics of", &at, &e))?;
        let cluster = consumer
            .client()
            .fetch_cluster_id(BROKER_TIMEOUT)
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| self.brokers.clone());
        let mut parts = Vec::new();
        for topic in &self.topics {
            let found = metadata.topics().iter().find(|t| t.name() == topic);
            let Some(found) = found.filter(|t| t.error().is_none()) else {
                return Err(Error::Broker {
                    op: "read",
                    at: format!("{at}/{topic}"),
                    retryable: false,
                    message: "the cluster has no such topic".into(),
                });
            };
            let have: BTreeSet<i32> = found.partitions().iter().map(|p| p.id()).collect();
            let wanted = self.partitions.clone().unwrap_or_else(|| have.clone());
            if let Some(missing) = wanted.difference(&have).next() {
                return Err(Error::Broker {
                    op: "read",
                    at: format!("{at}/{topic}/{missing}"),
                    retryable: false,
                    message: format!("the topic has partitions {}, not {missing}", ranges(&have)),
                });
            }
            parts.extend(wanted.into_iter().map(|p| Part {
                topic: topic.clone(),
                partition: p,
                name: format!("kafka://{cluster}/{topic}/{p}"),
            }));
        }
        let mut name = format!("kafka://{cluster}/{}", self.topics.join(","));
        if let Some(p) = &self.partitions {
            name.push_str(&format!("?partitions={}", ranges(p)));
        }
        if let Some(g) = &self.group {
            name.push_str(&format!("?group={g}"));
        }
        Ok(self.source(name, cluster, parts, consumer))
    }

    /// The source named `name` of parts `parts` of cluster `cluster`, read by `consumer`.
    fn source(
        self,
        name: String,
        cluster: String,
        parts: Vec<Part>,
        consumer: BaseConsumer<Rebalances>,
    ) -> KafkaSource {
        let mut index: HashMap<String, HashMap<i32, usize>> = HashMap::new();
        for (i, p) in parts.iter().enumerate() {
            index
                .entry(p.topic.clone())
                .or_default()
                .insert(p.partition, i);
        }
        KafkaSource {
            name,
            brokers: self.brokers,
            cluster,
            topics: self.topics,
            assigned: None,
            assigning: None,
            assigned_names: Arc::default(),
            next: vec![None; parts.len()],
            carried: BTreeMap::new(),
            at_end: vec![false; parts.len()],
            listed_end: vec![0; parts.len()],
            identity: vec![Identity::default(); parts.len()],
            parts,
            index,
            columns: self.columns,
            reset_earliest: self.reset_earliest,
            restart_recreated: self.restart_recreated,
            carried_identities: BTreeMap::new(),
            skipped: VecDeque::new(),
            until_end: self.until_end,
            group: self.group,
            config: self.config,
            warned_at: None,
            consumer: Arc::new(consumer),
        }
    }
}

/// The values of `columns` for `message`.
fn column_values(
    message: &BorrowedMessage<'_>,
    columns: &[KafkaColumn],
) -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::Value;
    columns
        .iter()
        .map(|column| {
            let value = match column {
                KafkaColumn::Key => message
                    .key()
                    .map_or(Value::Null, |k| Value::from(String::from_utf8_lossy(k))),
                KafkaColumn::Topic => Value::from(message.topic()),
                KafkaColumn::Partition => Value::from(message.partition()),
                KafkaColumn::Offset => Value::from(message.offset()),
                KafkaColumn::Timestamp => message
                    .timestamp()
                    .to_millis()
                    .map_or(Value::Null, Value::from),
            };
            (column.name(), value)
        })
        .collect()
}

/// `value`, a JSON object, with `fields` added at its end; another value as it is.
fn add_fields(value: &[u8], fields: &[(&str, serde_json::Value)]) -> Vec<u8> {
    let trimmed = value.trim_ascii();
    let (Some(b'{'), Some(b'}')) = (trimmed.first(), trimmed.last()) else {
        return value.to_vec();
    };
    let body = &trimmed[..trimmed.len() - 1];
    let empty = body[1..].trim_ascii().is_empty();
    let mut out = Vec::with_capacity(value.len() + 32 * fields.len());
    out.extend_from_slice(body);
    for (i, (name, field)) in fields.iter().enumerate() {
        if i > 0 || !empty {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, name).expect("a JSON string writes");
        out.push(b':');
        serde_json::to_writer(&mut out, field).expect("a JSON value writes");
    }
    out.push(b'}');
    out
}

/// One topic-partition.
#[derive(Debug, Clone)]
struct Part {
    topic: String,
    partition: i32,
    /// Its name as a part (`kafka://<cluster>/<topic>/<partition>`).
    name: String,
}

/// Topic-partitions of a Kafka cluster, read with `read_committed` from the offsets the lake
/// recorded (see the [module doc](self)). Made by [`Kafka::connect`].
pub struct KafkaSource {
    /// `kafka://<cluster>/<topics>[?partitions=…|?group=…]`.
    name: String,
    brokers: String,
    /// The cluster id, as part names hold it.
    cluster: String,
    topics: Vec<String>,
    /// Every part the source may read: those given, or in a group every partition of the
    /// topics (and those added since).
    parts: Vec<Part>,
    /// In a group: the parts assigned and resumed; `None` before the first assignment and
    /// between a revoke and the next.
    assigned: Option<Vec<usize>>,
    /// In a group: the parts of the last `Next::Assigned`, until `resume_parts`.
    assigning: Option<Vec<usize>>,
    /// The names of the parts assigned, for the group committer.
    assigned_names: Arc<Mutex<BTreeSet<String>>>,
    /// Per topic, per partition: the part's index.
    index: HashMap<String, HashMap<i32, usize>>,
    /// The metadata columns added to each record.
    columns: Vec<KafkaColumn>,
    /// Offsets the broker no longer keeps are passed over ([`Kafka::offset_reset_earliest`]).
    reset_earliest: bool,
    /// A part of a topic created again is read from its start
    /// ([`Kafka::restart_recreated_topics`]).
    restart_recreated: bool,
    /// Per part, what tells its topic from another of the same name (recorded, or from the
    /// last record read).
    identity: Vec<Identity>,
    /// The recorded identities of parts this run does not read, kept in its positions.
    carried_identities: BTreeMap<String, serde_json::Value>,
    /// Offsets passed over, to hand on before the next records.
    skipped: VecDeque<Skipped>,
    /// Per part, the next offset to read, once known (recorded, or after a record).
    next: Vec<Option<u64>>,
    /// The recorded offsets of parts this run does not read, kept in its positions.
    carried: BTreeMap<String, u64>,
    /// Per part, whether the consumer reported its end (`until_end`).
    at_end: Vec<bool>,
    /// Per part, the end offset the broker listed as the parts were assigned.
    listed_end: Vec<i64>,
    until_end: bool,
    group: Option<String>,
    config: Vec<(String, String)>,
    /// When a retried consumer error was last logged.
    warned_at: Option<Instant>,
    consumer: Arc<BaseConsumer<Rebalances>>,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("name", &self.name)
            .field("brokers", &self.brokers)
            .finish()
    }
}

impl KafkaSource {
    /// A job name for this source: `kafka_<first topic>_<hash of the source's name>`, so that
    /// the same command resumes the same job. At most 45 characters: a process of a consumer
    /// group adds its slot (`_1` to `_64`) and stays within the 48 a job name may have.
    pub fn default_job_name(&self) -> String {
        let topic: String = self.parts[0]
            .topic
            .chars()
            .map(|c| match c.is_ascii_alphanumeric() || c == '_' {
                true => c,
                false => '_',
            })
            .take(30)
            .collect();
        format!("kafka_{topic}_{:08x}", crc32c::crc32c(self.name.as_bytes()))
    }

    /// Where the source stands: per part with a known offset, the next offset to read; per
    /// part with one, its identity.
    fn position(&self) -> serde_json::Value {
        let mut parts = self.carried.clone();
        for (part, next) in self.parts.iter().zip(&self.next) {
            if let Some(n) = next {
                parts.insert(part.name.clone(), *n);
            }
        }
        let mut identities = self.carried_identities.clone();
        for (part, identity) in self.parts.iter().zip(&self.identity) {
            if *identity != Identity::default() {
                let value = serde_json::to_value(identity).expect("an identity serializes");
                identities.insert(part.name.clone(), value);
            }
        }
        PartOffsets { parts, identities }.to_json()
    }

    /// Takes the identities a position recorded: those of this source's parts as theirs, the
    /// rest carried into its positions as they are.
    fn take_identities(&mut self, recorded: &BTreeMap<String, serde_json::Value>) {
        self.carried_identities = recorded.clone();
        for (part, identity) in self.parts.iter().zip(&mut self.identity) {
            if let Some(v) = self.carried_identities.remove(&part.name) {
                // One this build cannot read is recorded anew, as an older position's is.
                *identity = serde_json::from_value(v).unwrap_or_default();
            }
        }
    }

    /// Notes the end of partition `partition` of the topics read: a part is at its end at
    /// the end-of-partition the consumer reports. The report names the partition number
    /// only: where topics share the number, those read up to their listed end are.
    fn note_end(&mut self, partition: i32) {
        let same: Vec<usize> = (0..self.parts.len())
            .filter(|i| self.parts[*i].partition == partition)
            .collect();
        for i in &same {
            let read_to = self.next[*i].map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
            if same.len() == 1 || read_to >= self.listed_end[*i] {
                self.at_end[*i] = true;
            }
        }
    }

    /// An error of a poll: those a retry cannot mend ([`retry_can_succeed`]) end the run, an
    /// offset out of range is refused as a changed input; the rest (a broker that is down, a
    /// leader moving) the client retries.
    fn poll_error(&mut self, e: KafkaError) -> Result<()> {
        let code = match &e {
            KafkaError::MessageConsumptionFatal(_) => return Err(self.fatal(&e)),
            KafkaError::MessageConsumption(c) => *c,
            _ => return Ok(()),
        };
        match code {
            RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset => {
                Err(Error::InputChanged(format!(
                    "`{}`: an offset the lake recorded is not on the broker any more ({e}): \
                     retention deleted records before the lake took them, or the topic was \
                     created again; nothing was written past the last checkpoint (a run with \
                     --kafka-offset-reset earliest reads on past records retention deleted)",
                    self.name
                )))
            }
            c if !retry_can_succeed(c) => Err(self.fatal(&e)),
            _ => {
                // A broker that is down gives an error per fetch: told once a minute at most.
                let due = self
                    .warned_at
                    .is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
                if due {
                    tracing::warn!(source = %self.name, error = %e, "Kafka consumer error; the client retries");
                    self.warned_at = Some(Instant::now());
                }
                Ok(())
            }
        }
    }

    fn fatal(&self, e: &KafkaError) -> Error {
        let hint = match e.rdkafka_error_code() {
            Some(
                RDKafkaErrorCode::NotImplemented
                | RDKafkaErrorCode::BadCompression
                | RDKafkaErrorCode::UnsupportedCompressionType,
            ) => {
                " (records compressed with a codec this build of the client cannot read: it \
                 reads none, gzip, snappy, lz4 and zstd)"
            }
            _ => "",
        };
        Error::Broker {
            op: "read",
            at: self.name.clone(),
            retryable: false,
            message: format!("{e}; retrying cannot mend it, the run stops{hint}"),
        }
    }
}

impl KafkaSource {
    /// The part of `topic`'s partition `partition`: one of those known, or (a partition added
    /// to a topic read in a group) a new one.
    fn part_index(&mut self, topic: &str, partition: i32) -> usize {
        if let Some(&i) = self.index.get(topic).and_then(|p| p.get(&partition)) {
            return i;
        }
        let i = self.parts.len();
        self.parts.push(Part {
            topic: topic.to_owned(),
            partition,
            name: format!("kafka://{}/{topic}/{partition}", self.cluster),
        });
        self.next.push(None);
        let name = &self.parts[i].name;
        self.identity.push(
            self.carried_identities
                .remove(name)
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default(),
        );
        self.at_end.push(false);
        self.listed_end.push(0);
        self.index
            .entry(topic.to_owned())
            .or_default()
            .insert(partition, i);
        i
    }

    /// The assignment of parts `indices` at `offsets` (a part missing there from its first
    /// offset kept), each offset checked against what the broker keeps, and each part's
    /// topic against the one the lake read (*Topic identity* in the module doc).
    fn assignment(
        &mut self,
        indices: &[usize],
        offsets: &BTreeMap<String, u64>,
    ) -> Result<TopicPartitionList> {
        // Per part: where it starts, and its listed end.
        let mut starts: Vec<(usize, Option<u64>, i64)> = Vec::new();
        // Per part whose topic can be checked: the offset of the record that tells it.
        let mut to_check: Vec<(usize, u64)> = Vec::new();
        // Per part that ends before the offset the lake read it to: that offset.
        let mut short: HashMap<usize, u64> = HashMap::new();
        for &i in indices {
            let part = &self.parts[i];
            let (low, high) = self
                .consumer
                .fetch_watermarks(&part.topic, part.partition, BROKER_TIMEOUT)
                .map_err(|e| broker_error("read the offsets of", &part.name, &e))?;
            let recorded = self.identity[i].resume_at(offsets.get(&part.name).copied());
            if let Some(n) = recorded.filter(|n| i64::try_from(*n).unwrap_or(i64::MAX) > high) {
                // Shorter than what the lake read: created again, or the broker lost records.
                // The last record read tells which if the partition still reaches it.
                let last = self.identity[i].last.map(|r| r.offset);
                match last.filter(|at| i64::try_from(*at).is_ok_and(|at| at < high)) {
                    Some(at) => {
                        to_check.push((i, at));
                        short.insert(i, n);
                    }
                    None => {
                        let why =
                            format!("the lake read it up to offset {n}, and it ends at {high}");
                        self.recreated(i, n, &why)?;
                    }
                }
                starts.push((i, None, high));
                continue;
            }
            let (next, skipped) = start_at(&part.name, recorded, low, high, self.reset_earliest)?;
            if let (Some(n), None) = (next, &skipped) {
                if let Some(at) = self.identity[i].record_to_check(n, low) {
                    to_check.push((i, at));
                }
            }
            self.skipped.extend(skipped);
            starts.push((i, next, high));
        }
        let found = self.records_at(&to_check)?;
        for (i, at) in to_check {
            let name = self.parts[i].name.clone();
            match (self.identity[i].last, found.get(&i)) {
                (Some(read), Some(now)) if read == *now => {
                    if let Some(n) = short.get(&i) {
                        // The same topic, with records the lake read gone from its end:
                        // reading it from its start would write them twice.
                        let high = starts.iter().find(|s| s.0 == i).map_or(0, |s| s.2);
                        return Err(Error::InputChanged(format!(
                            "part `{name}`: the lake read it up to offset {n}, and it ends at \
                             {high}, its record at offset {at} the one the lake read: the \
                             broker lost records; nothing was written (read on once it has \
                             them again, or under another job after checking what it holds)"
                        )));
                    }
                }
                (Some(_), None) if short.contains_key(&i) => {
                    let n = short[&i];
                    let why = format!("the lake read it up to offset {n}, and it is shorter");
                    self.recreated(i, n, &why)?;
                }
                (Some(read), Some(now)) => {
                    let why = format!(
                        "the record at offset {at} is not the one the lake read there \
                         (timestamp {:?} and CRC-32C {:08x} of key and value, now {:?} and \
                         {:08x})",
                        read.timestamp_ms, read.crc32c, now.timestamp_ms, now.crc32c
                    );
                    let recorded = starts.iter().find(|s| s.0 == i).and_then(|s| s.1);
                    let read_to = short.get(&i).copied().or(recorded).unwrap_or(at + 1);
                    self.recreated(i, read_to, &why)?;
                    if let Some(s) = starts.iter_mut().find(|s| s.0 == i) {
                        s.1 = None;
                    }
                }
                (Some(_), None) => tracing::warn!(
                    part = %name,
                    offset = at,
                    "the record the lake read last of this part is no longer on the broker \
                     (compacted, or in a transaction the broker aborted since): its topic \
                     cannot be checked; it is checked again by a record this run reads"
                ),
                // A position without an identity (an older layout): the record before the
                // offset is taken as the part's, and recorded at the next checkpoint.
                (None, Some(now)) => self.identity[i].last = Some(*now),
                (None, None) => {}
            }
        }
        let mut assignment = TopicPartitionList::new();
        for (i, next, high) in starts {
            let part = &self.parts[i];
            let offset = match next {
                Some(n) => Offset::Offset(i64::try_from(n).unwrap_or(i64::MAX)),
                None => Offset::Beginning,
            };
            assignment
                .add_partition_offset(&part.topic, part.partition, offset)
                .map_err(|e| broker_error("assign", &part.name, &e))?;
            self.listed_end[i] = high;
            self.next[i] = next;
            self.at_end[i] = false;
        }
        Ok(assignment)
    }

    /// Part `i`, which the lake read up to offset `read_to`, is of a topic deleted and created
    /// again since (`why`): refused ([`Error::InputChanged`]), or with
    /// [`Kafka::restart_recreated_topics`] read from its start, the offsets up to `read_to`
    /// marked as the old topic's.
    fn recreated(&mut self, i: usize, read_to: u64, why: &str) -> Result<()> {
        let part = &self.parts[i].name;
        if !self.restart_recreated {
            return Err(Error::InputChanged(format!(
                "part `{part}`: the topic was deleted and created again since the lake read \
                 it ({why}); nothing was written. Run with --kafka-topic-recreated restart to \
                 read the new topic from its start into this lake, beside the old topic's \
                 records, or read it into a lake of its own"
            )));
        }
        tracing::warn!(part = %part, why, "the topic was created again: reading it from its start");
        let below = self.identity[i].old_topic_to.unwrap_or(0).max(read_to);
        self.identity[i] = Identity {
            last: None,
            old_topic_to: Some(below),
        };
        Ok(())
    }

    /// The records at the offsets of `wanted` (part, offset), read with a consumer of their
    /// own: per part, the record if it is still there (one missing was deleted, compacted or
    /// aborted since).
    fn records_at(&self, wanted: &[(usize, u64)]) -> Result<HashMap<usize, RecordId>> {
        let mut found = HashMap::new();
        if wanted.is_empty() {
            return Ok(found);
        }
        let consumer: BaseConsumer<Rebalances> =
            consumer_config(&self.brokers, "filesink-identity", &self.config)
                .create_with_context(Rebalances::default())
                .map_err(|e| broker_error("connect to", &self.name, &e))?;
        let mut list = TopicPartitionList::new();
        for (i, at) in wanted {
            let part = &self.parts[*i];
            let offset = Offset::Offset(i64::try_from(*at).unwrap_or(i64::MAX));
            list.add_partition_offset(&part.topic, part.partition, offset)
                .map_err(|e| broker_error("assign", &part.name, &e))?;
        }
        consumer
            .assign(&list)
            .map_err(|e| broker_error("assign the partitions of", &self.name, &e))?;
        let mut open: HashMap<usize, u64> = wanted.iter().copied().collect();
        let deadline = Instant::now() + BROKER_TIMEOUT;
        while !open.is_empty() {
            if Instant::now() >= deadline {
                return Err(Error::Broker {
                    op: "read the last records the lake read of",
                    at: self.name.clone(),
                    retryable: true,
                    message: format!("no answer in {} s", BROKER_TIMEOUT.as_secs()),
                });
            }
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Ok(m)) => {
                    let found_at = self
                        .index
                        .get(m.topic())
                        .and_then(|p| p.get(&m.partition()));
                    let Some(&i) = found_at else { continue };
                    let Some(at) = open.remove(&i) else { continue };
                    // A record after the one asked for: that one is gone.
                    if u64::try_from(m.offset()) == Ok(at) {
                        found.insert(i, RecordId::of(&m));
                    }
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    open.retain(|i, _| self.parts[*i].partition != p);
                }
                Some(Err(e)) => match e.rdkafka_error_code() {
                    Some(
                        RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
                    ) => {
                        // Retention deleted one meanwhile: those not read yet are not checked.
                        open.clear();
                    }
                    Some(c) if !retry_can_succeed(c) => return Err(self.fatal(&e)),
                    _ => {}
                },
            }
        }
        Ok(found)
    }

    /// The next rebalance of the group to hand on, if one is queued: the parts assigned, or
    /// those revoked (none if nothing was assigned).
    fn rebalanced(&mut self) -> Option<Next> {
        loop {
            let event = self
                .consumer
                .context()
                .events
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()?;
            match event {
                Rebalanced::Assigned(list) => {
                    let indices: Vec<usize> =
                        list.iter().map(|(t, p)| self.part_index(t, *p)).collect();
                    let names = indices
                        .iter()
                        .map(|i| self.parts[*i].name.clone())
                        .collect();
                    self.assigning = Some(indices);
                    return Some(Next::Assigned(names));
                }
                Rebalanced::Revoked => {
                    self.assigned_names
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clear();
                    let Some(indices) = self.assigned.take().filter(|a| !a.is_empty()) else {
                        continue;
                    };
                    let names = indices
                        .iter()
                        .map(|i| self.parts[*i].name.clone())
                        .collect();
                    return Some(Next::Revoked(names));
                }
            }
        }
    }

    /// Whether a rebalance waits to be handed on.
    fn rebalance_queued(&self) -> bool {
        !self
            .consumer
            .context()
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Whether every part read is at its end (`until_end`): every part given, or in a group
    /// every part assigned (none assigned: at once, once the group assigned nothing).
    fn ended(&self) -> bool {
        if !self.until_end {
            return false;
        }
        match (&self.group, &self.assigned) {
            (None, _) => self.at_end.iter().all(|e| *e),
            (Some(_), Some(assigned)) => assigned.iter().all(|i| self.at_end[*i]),
            (Some(_), None) => false,
        }
    }
}

impl Source for KafkaSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The parts given, or in a group every partition of the topics.
    fn parts(&mut self) -> Result<Vec<String>> {
        Ok(self.parts.iter().map(|p| p.name.clone()).collect())
    }

    fn assigns_parts(&self) -> bool {
        self.group.is_some()
    }

    /// Commits the offsets of committed records to the consumer group (the job's name unless
    /// [`Kafka::group`] names one): for lag monitoring only (`GroupCommitter`).
    fn commit_hook(&mut self, job: &str) -> Option<CommitHook> {
        let parts = self
            .parts
            .iter()
            .map(|p| (p.name.clone(), (p.topic.clone(), p.partition)))
            .collect();
        let (consumer, assigned) = match &self.group {
            Some(_) => (self.consumer.clone(), Some(self.assigned_names.clone())),
            None => {
                let mut config = consumer_config(&self.brokers, job, &self.config);
                // The last commit, as the run ends, waits at most this long for a broker that
                // is down.
                config.set("socket.timeout.ms", "10000");
                match config.create_with_context(Rebalances::default()) {
                    Ok(c) => (Arc::new(c), None),
                    Err(e) => {
                        tracing::warn!(source = %self.name, error = %e, "no offsets will be committed to the consumer group");
                        return None;
                    }
                }
            }
        };
        let committer = GroupCommitter {
            consumer,
            assigned,
            parts,
            name: self.name.clone(),
            last: Mutex::new(None),
        };
        Some(Arc::new(move |position: &serde_json::Value| {
            committer.commit(position);
        }))
    }

    /// Places every part given at its recorded offset; in a group, keeps the recorded offsets
    /// and joins the group: the parts come with its assignment.
    fn seek(&mut self, position: Option<&serde_json::Value>) -> Result<()> {
        let recorded = match position {
            None => PartOffsets::default(),
            Some(v) => PartOffsets::from_json(v).ok_or_else(|| {
                Error::corrupt(
                    format!("position of source `{}`", self.name),
                    "it holds no offsets of topic-partitions",
                )
            })?,
        };
        // Offsets of parts this run does not read are kept as they were: the ledger may ask
        // this job's position where it stood in them.
        self.carried = recorded.parts.clone();
        self.take_identities(&recorded.identities);
        if self.group.is_some() {
            let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
            return self
                .consumer
                .subscribe(&topics)
                .map_err(|e| broker_error("join the consumer group of", &self.name, &e));
        }
        for part in &self.parts {
            self.carried.remove(&part.name);
        }
        let all: Vec<usize> = (0..self.parts.len()).collect();
        let assignment = self.assignment(&all, &recorded.parts)?;
        self.consumer
            .assign(&assignment)
            .map_err(|e| broker_error("assign the partitions of", &self.name, &e))
    }

    /// Assigns the parts of the last [`Next::Assigned`] at `offsets`.
    fn resume_parts(&mut self, offsets: &BTreeMap<String, u64>) -> Result<()> {
        let Some(indices) = self.assigning.take() else {
            return Ok(());
        };
        let assignment = self.assignment(&indices, offsets)?;
        self.consumer
            .assign(&assignment)
            .map_err(|e| broker_error("assign the partitions of", &self.name, &e))?;
        *self
            .assigned_names
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = indices
            .iter()
            .map(|i| self.parts[*i].name.clone())
            .collect();
        self.assigned = Some(indices);
        Ok(())
    }

    fn next(&mut self, records_max: usize, deadline: Instant) -> Result<Next> {
        if let Some(skipped) = self.skipped.pop_front() {
            return Ok(Next::Skipped(skipped));
        }
        if let Some(rebalanced) = self.rebalanced() {
            return Ok(rebalanced);
        }
        let mut records: Vec<Vec<u8>> = Vec::new();
        let mut advanced = false;
        while records.len() < records_max {
            if self.ended() {
                break;
            }
            // Wait for the first record until the deadline; then take what is there.
            let wait = match records.is_empty() {
                true => deadline.saturating_duration_since(Instant::now()),
                false => Duration::ZERO,
            };
            let polled = self.consumer.poll(wait);
            // A rebalance during the poll: the records before it go first, then it.
            let rebalanced = self.rebalance_queued();
            let message = match polled {
                None if rebalanced => break,
                None if records.is_empty() && Instant::now() < deadline => continue,
                None => break,
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    self.note_end(p);
                    continue;
                }
                Some(Err(e)) => {
                    self.poll_error(e)?;
                    continue;
                }
                Some(Ok(m)) => m,
            };
            let found = self.index.get(message.topic());
            let Some(&i) = found.and_then(|p| p.get(&message.partition())) else {
                continue;
            };
            if self.group.is_some() && !self.assigned.as_ref().is_some_and(|a| a.contains(&i)) {
                // Fetched before a revoke: the part is another job's now.
                continue;
            }
            let Ok(after) = u64::try_from(message.offset() + 1) else {
                continue;
            };
            // A part at its end stays there for `until_end`: records that come after it are
            // read while the others are, and the run ends once every part reached its end.
            self.next[i] = Some(after);
            self.identity[i].read(&message);
            advanced = true;
            if let Some(value) = message.payload() {
                records.push(match self.columns.is_empty() {
                    true => value.to_vec(),
                    false => add_fields(value, &column_values(&message, &self.columns)),
                });
            }
            if rebalanced {
                break;
            }
        }
        if !records.is_empty() || advanced {
            return Ok(Next::Records {
                records,
                position: self.position(),
            });
        }
        if let Some(rebalanced) = self.rebalanced() {
            return Ok(rebalanced);
        }
        if self.ended() {
            return Ok(Next::End);
        }
        Ok(Next::Idle)
    }
}
