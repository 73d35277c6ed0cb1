//! A consumer group's side of the source: rebalances queued for the reader, and the
//! commits of the lake's offsets to the group for monitoring.

use super::*;

/// The consumer's context: a group's rebalances, queued for [`KafkaSource::next`] to hand on
/// in order with the records (the callback runs inside a poll, on the reader's thread).
#[derive(Default)]
pub(super) struct Rebalances {
    pub(super) events: Mutex<VecDeque<Rebalanced>>,
}

/// A rebalance of the group.
#[derive(Debug)]
pub(super) enum Rebalanced {
    /// These topic-partitions are the consumer's now; not assigned yet: they are, at the
    /// lake's offsets, once the ingest took them (`Source::resume_parts`).
    Assigned(Vec<(String, i32)>),
    /// Everything assigned is given up (eager rebalancing revokes it all); unassigned already.
    Revoked,
}

/// librdkafka's own log, in the ingest's (`-v`, `RUST_LOG`): its errors and warnings say why a
/// broker is not reached.
impl ClientContext for Rebalances {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!(facility, "librdkafka: {message}"),
            RDKafkaLogLevel::Warning => tracing::warn!(facility, "librdkafka: {message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(facility, "librdkafka: {message}");
            }
            RDKafkaLogLevel::Debug => tracing::debug!(facility, "librdkafka: {message}"),
        }
    }
}

impl ConsumerContext for Rebalances {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let event = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalanced::Assigned(
                tpl.elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .collect(),
            ),
            // A revoke, or a rebalance error: nothing more is fetched of what was assigned.
            _ => {
                if let Err(e) = consumer.unassign() {
                    tracing::warn!(error = %e, "unassigning revoked Kafka partitions failed");
                }
                Rebalanced::Revoked
            }
        };
        tracing::info!(?event, "consumer group rebalanced");
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(event);
    }
}

/// Commits committed offsets to a consumer group: asynchronously after each checkpoint's
/// commit, and the last ones synchronously as it is dropped (the run ends), so that the group
/// shows where the lake stands. Without a group, through a consumer of its own that joins none
/// (it serves its own commit results); in a group, through the member itself (a commit from
/// outside a live group is refused), for the parts assigned to it only (another member holds
/// the newer offsets of the rest), leaving the polls to the reader.
pub(super) struct GroupCommitter {
    pub(super) consumer: Arc<BaseConsumer<Rebalances>>,
    /// In a group: the parts assigned to the member.
    pub(super) assigned: Option<Arc<Mutex<BTreeSet<String>>>>,
    pub(super) parts: HashMap<String, (String, i32)>,
    pub(super) name: String,
    /// The offsets of the last commit.
    pub(super) last: Mutex<Option<TopicPartitionList>>,
}

impl GroupCommitter {
    pub(super) fn commit(&self, position: &serde_json::Value) {
        let Some(offsets) = PartOffsets::from_json(position) else {
            return;
        };
        let assigned = self
            .assigned
            .as_ref()
            .map(|a| a.lock().unwrap_or_else(|e| e.into_inner()).clone());
        let mut list = TopicPartitionList::new();
        for (part, next) in &offsets.parts {
            if assigned.as_ref().is_some_and(|a| !a.contains(part)) {
                continue;
            }
            let (Some((topic, partition)), Ok(next)) = (self.parts.get(part), i64::try_from(*next))
            else {
                continue;
            };
            let _ = list.add_partition_offset(topic, *partition, Offset::Offset(next));
        }
        if list.count() == 0 {
            return;
        }
        if let Err(e) = self.consumer.commit(&list, CommitMode::Async) {
            tracing::warn!(source = %self.name, error = %e, "committing offsets to the consumer group failed");
        }
        if self.assigned.is_none() {
            // Serves the results of earlier commits, so that they do not pile up.
            let _ = self.consumer.poll(Duration::ZERO);
        }
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(list);
    }
}

impl Drop for GroupCommitter {
    fn drop(&mut self) {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(list) = last {
            if let Err(e) = self.consumer.commit(&list, CommitMode::Sync) {
                tracing::warn!(source = %self.name, error = %e, "committing offsets to the consumer group failed");
            }
        }
    }
}
