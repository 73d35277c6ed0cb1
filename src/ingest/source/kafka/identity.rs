//! Topic identity: the record that tells a part's topic from another of the same name (see
//! *Topic identity* in the module doc).

use super::*;

/// A record of a part as the broker gave it: its offset, its timestamp and the CRC-32C of its
/// key and value. Two topics of one name (one deleted and created again) give the same one at
/// an offset only if the same records were produced into both, at the same millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct RecordId {
    pub(super) offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) timestamp_ms: Option<i64>,
    /// Of the key's length (`u32::MAX` without one) and bytes, then the value's.
    pub(super) crc32c: u32,
}

impl RecordId {
    pub(super) fn of(m: &BorrowedMessage<'_>) -> RecordId {
        let mut crc = 0;
        for field in [m.key(), m.payload()] {
            let len = field.map_or(u32::MAX, |f| u32::try_from(f.len()).unwrap_or(u32::MAX - 1));
            crc = crc32c::crc32c_append(crc, &len.to_le_bytes());
            crc = crc32c::crc32c_append(crc, field.unwrap_or_default());
        }
        RecordId {
            offset: u64::try_from(m.offset()).unwrap_or(0),
            timestamp_ms: m.timestamp().to_millis(),
            crc32c: crc,
        }
    }
}

/// What tells a part's topic from another of the same name, kept with the part's offset in
/// every position ([`PartOffsets::identities`]). See *Topic identity* in the module doc.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Identity {
    /// The last record the lake read of the part (`None`: none read since the position
    /// recorded one, or since a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) last: Option<RecordId>,
    /// After a restart of a recreated topic ([`Kafka::restart_recreated_topics`]): offsets
    /// up to this one are the old topic's, so an offset the lake's ledger gives up to it is
    /// not where this topic stands. Dropped once a record past it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) old_topic_to: Option<u64>,
}

impl Identity {
    /// Notes record `m` as the last read.
    pub(super) fn read(&mut self, m: &BorrowedMessage<'_>) {
        let id = RecordId::of(m);
        if self.old_topic_to.is_some_and(|to| id.offset >= to) {
            self.old_topic_to = None;
        }
        self.last = Some(id);
    }

    /// Where to read on from, given `offset`, the later of the job's own offset and the
    /// lake's: after a restart, an offset up to the old topic's end is the old topic's, and
    /// the job's own (after the last record it read of this topic, or its start) stands.
    pub(super) fn resume_at(&self, offset: Option<u64>) -> Option<u64> {
        match (self.old_topic_to, offset) {
            (Some(to), Some(n)) if n <= to => self.last.map(|r| r.offset + 1),
            _ => offset,
        }
    }

    /// The offset of the record to read to check the topic of a part read on from offset
    /// `next`, the broker keeping offsets from `low` on: the last record read, or (a position
    /// that recorded none) the one before `next`, which is then recorded; `None` if there is
    /// nothing to read (nothing read, or retention deleted it).
    pub(super) fn record_to_check(&mut self, next: u64, low: i64) -> Option<u64> {
        if self.last.is_some_and(|r| r.offset >= next) {
            // Not a record before the offset read on from: it tells nothing of it.
            self.last = None;
        }
        let at = match self.last {
            Some(r) => r.offset,
            None => next.checked_sub(1)?,
        };
        (i64::try_from(at).unwrap_or(i64::MAX) >= low).then_some(at)
    }
}
