//! Sources written outside this crate: the [`Source`] trait, and the reader that frames the
//! records one gives into chunks for the decoders, numbered on from the job's cursor, each
//! chunk carrying the position the source gave with its records.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::chunk::{PartsChange, RawChunk};
use super::decode::Decoder;
use super::input::InputFormat;
use super::position::{Cursor, Prefix};
use super::reader::SourceReader;
use crate::error::Result;

/// A replayable source of records written outside this crate: a message queue's partition,
/// an API with a cursor, a generator. [`Ingest::from_source`](crate::ingest::Ingest::from_source)
/// ingests it exactly once: every checkpoint records the position the source gave with the
/// last records before it, and a restarted job seeks the source there, so the records after
/// it are read again and those before it are not.
///
/// The records are lines of JSON (or CSV, as [`Ingest::input_format`](
/// crate::ingest::Ingest::input_format) says), decoded by the same decoders as files. Methods
/// are called from a thread of the ingest's own, never from an async task: they may block.
///
/// What a source must promise for exactly-once: reading after a position it gave yields the
/// same records every time (a replay), or [`Source::seek`] refuses.
pub trait Source: Send + 'static {
    /// What the source reads (`orders-topic`, `api:/v1/events`): named in messages and kept in
    /// every checkpoint, so that a job resumed with a source of another name is refused.
    fn name(&self) -> String;

    /// Places the source right after `position` (one it gave with a batch of records, as the
    /// job's last complete checkpoint recorded it), or at its start for `None`. A source that
    /// can no longer give what followed `position` (it was replaced, or has expired) refuses
    /// with [`Error::InputChanged`](crate::Error::InputChanged) rather than read on from elsewhere.
    fn seek(&mut self, position: Option<&serde_json::Value>) -> Result<()>;

    /// The next records, at most `records_max`, each one record without its line end, and the
    /// position right after the last of them. Waits for records until `deadline` at most:
    /// [`Next::Idle`] if none came by then. A source that ends says [`Next::End`] once it has
    /// nothing more; one that does not end (a stream) never does, and the ingest runs until
    /// it is stopped.
    fn next(&mut self, records_max: usize, deadline: Instant) -> Result<Next>;

    /// The parts of the source, each read in order on its own (a Kafka topic's partitions),
    /// named so that the names tell them apart across sources and clusters
    /// (`kafka://<cluster>/<topic>/<partition>`); empty (the default) for a source read as a
    /// whole. Called once per run, before [`Source::seek`].
    ///
    /// A source with parts gives positions of one form, [`PartOffsets`](super::PartOffsets): per part, the next
    /// offset to read. The lake then keeps one reader per part, whatever job reads it (its
    /// ledger, as for files): a job that names a part another job of the lake read takes it
    /// over where that job's latest checkpoint stands, once those records are visible, and is
    /// refused while a run of that job is live. So two jobs with overlapping parts never write
    /// a record twice, and any job can read on any part. [`Source::seek`] is then given, per
    /// part, the later of the job's own position and where the lake stands.
    fn parts(&mut self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// What to call once the records up to a position this source gave are committed
    /// (visible in the lake for good): after every checkpoint's commit, from the ingest's own
    /// task, so it must not block; `None` (the default) for nothing. A source may acknowledge
    /// them upstream with it (the Kafka source commits the offsets to its consumer group, so
    /// that lag monitoring works). Exactly-once must not rest on it: a crash can come between
    /// a commit and the call, and a restarted job seeks to the lake's position, never to an
    /// acknowledged one. Asked once per run, before reading, with the job's name.
    fn commit_hook(&mut self, job: &str) -> Option<CommitHook> {
        let _ = job;
        None
    }

    /// Whether the parts are handed to the source while it runs (a consumer group's
    /// assignment) rather than fixed; `false` (the default) for fixed. Then [`Source::parts`]
    /// names every part it may be handed, none is taken at start, and the source tells which
    /// it reads as they change: [`Next::Assigned`], answered by [`Source::resume_parts`], and
    /// [`Next::Revoked`]. At start the job releases the parts its last run still held, so that
    /// whichever job is handed them reads on.
    fn assigns_parts(&self) -> bool {
        false
    }

    /// Where to read the parts of the last [`Next::Assigned`] from: per part, the next offset
    /// (the later of where the lake stands in it and the job's own position); a part missing
    /// from `offsets` was never read into the lake, and is read from its start. Called before
    /// the next [`Source::next`], once the ingest holds them. The default refuses: a source
    /// that assigns parts implements it.
    fn resume_parts(&mut self, offsets: &BTreeMap<String, u64>) -> Result<()> {
        let _ = offsets;
        Err(crate::Error::NotSupported(
            "the source said parts were assigned to it, and cannot resume them".into(),
        ))
    }
}

/// What a [`Source`] is told of positions whose records are committed ([`Source::commit_hook`]).
pub type CommitHook = Arc<dyn Fn(&serde_json::Value) + Send + Sync>;

/// What [`Source::next`] gives.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Records, and the position right after the last of them.
    Records {
        /// One record each (a line of JSON or CSV), without its line end.
        records: Vec<Vec<u8>>,
        /// Where the source stands after them: what [`Source::seek`] takes.
        position: serde_json::Value,
    },
    /// No record came by the deadline.
    Idle,
    /// The source has ended: there will be no more records.
    End,
    /// These parts were handed to the source ([`Source::assigns_parts`]): the ingest takes
    /// them in the lake's ledger (waiting for a live job that holds one to release it) and
    /// answers with [`Source::resume_parts`].
    Assigned(Vec<String>),
    /// The source gave these parts up, and gives no record of them after this. The ingest
    /// takes a checkpoint of every record handed out before (every open file rolled), waits
    /// for its commit, and releases the parts in the lake's ledger at the offsets it recorded:
    /// the job they are handed to next reads on from there.
    Revoked(Vec<String>),
    /// Records the source could no longer give were passed over, as it was told to (the
    /// Kafka source's `offset_reset_earliest`): the run's summary reports them as possible
    /// loss ([`IngestSummary::skipped`](crate::ingest::IngestSummary::skipped)).
    Skipped(Skipped),
}

/// Records a source passed over because it could no longer give them ([`Next::Skipped`]):
/// offsets `from..to` of a part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The part (`kafka://<cluster>/<topic>/<partition>`), or the source's name.
    pub part: String,
    /// The first offset passed over.
    pub from: u64,
    /// The offset read on from.
    pub to: u64,
    /// Why they could not be given (`deleted by retention`).
    pub reason: String,
}

/// A [`Source`] and how its records are read.
pub(crate) struct CustomReading {
    pub(crate) source: Box<dyn Source>,
    pub(crate) decoder: Decoder,
    /// Its name, for bad records and errors.
    pub(crate) name: Arc<str>,
    /// The job's cursor: its records are counted on from there.
    pub(crate) start: Cursor,
    /// How long a chunk waits for records.
    pub(crate) linger: Duration,
    pub(crate) format: InputFormat,
}

/// The reader of a custom source: frames the records it gives as chunks.
pub(crate) struct CustomReader {
    custom: CustomReading,
    /// Records framed so far by this run.
    produced: u64,
    bytes_read: u64,
    /// The answer to the last [`Next::Assigned`], which the source waits for.
    assigned: Option<std::sync::mpsc::Receiver<BTreeMap<String, u64>>>,
}

impl CustomReader {
    pub(crate) fn new(custom: CustomReading) -> CustomReader {
        CustomReader {
            custom,
            produced: 0,
            bytes_read: 0,
            assigned: None,
        }
    }

    /// Waits for the offsets of the parts last assigned, and hands them to the source.
    /// `None`: the run ended meanwhile.
    fn resume_assigned(&mut self, closed: &AtomicBool) -> Option<Result<()>> {
        let rx = self.assigned.take()?;
        loop {
            if closed.load(Ordering::Relaxed) {
                return None;
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(offsets) => return Some(self.custom.source.resume_parts(&offsets)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                // The writing loop ended without answering: it failed, and says why.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// A chunk of no records that tells the writing loop of `change`.
    fn parts_chunk(&self, change: PartsChange) -> RawChunk {
        RawChunk {
            display: self.custom.name.clone(),
            buf: Vec::new(),
            spans: Vec::new(),
            cursor: self.cursor(),
            read: Vec::new(),
            too_long: Vec::new(),
            position: None,
            parts: Some(change),
        }
    }
}

/// The chunks of a custom source: as many records as it gives at once, up to `records_max`
/// (its records are not cut to `bytes_max`), waiting as long as it gives none.
impl SourceReader for CustomReader {
    fn decoder(&self) -> Decoder {
        self.custom.decoder.clone()
    }

    fn next_chunk(
        &mut self,
        records_max: usize,
        _bytes_max: usize,
        closed: &AtomicBool,
    ) -> Option<Result<Option<RawChunk>>> {
        if self.assigned.is_some() {
            match self.resume_assigned(closed)? {
                Ok(()) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        loop {
            if closed.load(Ordering::Relaxed) {
                return None;
            }
            let deadline = Instant::now() + self.custom.linger;
            return Some(
                match self.custom.source.next(records_max.max(1), deadline) {
                    Ok(Next::Records { records, .. }) if records.is_empty() => continue,
                    Ok(Next::Records { records, position }) => {
                        Ok(Some(self.frame(records, position)))
                    }
                    Ok(Next::Idle) => continue,
                    Ok(Next::End) => Ok(None),
                    Ok(Next::Assigned(parts)) => {
                        let (reply, rx) = std::sync::mpsc::sync_channel(1);
                        self.assigned = Some(rx);
                        Ok(Some(
                            self.parts_chunk(PartsChange::Assigned { parts, reply }),
                        ))
                    }
                    Ok(Next::Revoked(parts)) => {
                        Ok(Some(self.parts_chunk(PartsChange::Revoked(parts))))
                    }
                    Ok(Next::Skipped(skipped)) => {
                        Ok(Some(self.parts_chunk(PartsChange::Skipped(skipped))))
                    }
                    Err(e) => Err(e),
                },
            );
        }
    }

    /// The records are numbered on from the job's cursor, as lines are.
    fn end(&self) -> (Cursor, Vec<Prefix>, u64) {
        (self.cursor(), Vec::new(), self.bytes_read)
    }
}

impl CustomReader {
    /// Where the job stands after the records framed so far.
    fn cursor(&self) -> Cursor {
        let start = self.custom.start;
        Cursor {
            input: 0,
            offset: start.offset + self.produced,
            line: start.line + self.produced,
        }
    }

    /// `records` as a chunk: one line each. A JSON record's own line ends are white space
    /// between its tokens (a JSON string cannot hold one), so they become spaces.
    fn frame(&mut self, records: Vec<Vec<u8>>, position: serde_json::Value) -> RawChunk {
        let line = self.cursor().line;
        let bytes: usize = records.iter().map(|r| r.len() + 1).sum();
        let mut buf = Vec::with_capacity(bytes);
        let mut spans = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            let start = buf.len();
            buf.extend_from_slice(record);
            if self.custom.format == InputFormat::Jsonl {
                for b in &mut buf[start..] {
                    if *b == b'\n' || *b == b'\r' {
                        *b = b' ';
                    }
                }
            }
            buf.push(b'\n');
            spans.push((line + i as u64, start, buf.len()));
        }
        self.produced += records.len() as u64;
        self.bytes_read += bytes as u64;
        RawChunk {
            display: self.custom.name.clone(),
            buf,
            spans,
            cursor: self.cursor(),
            read: Vec::new(),
            too_long: Vec::new(),
            position: Some(position),
            parts: None,
        }
    }
}
