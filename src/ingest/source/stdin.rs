//! Standard input (and any reader): read by a thread of its own ([`StdinRecords`]), so that
//! a chunk can close on a deadline as well as on its size.

use std::collections::VecDeque;
use std::io::{self, BufReader, Read};
use std::sync::mpsc;
use std::time::Instant;

use super::check::{skip_prefix, Skipped};
use super::compression::sniffed;
use super::framing::{too_long, LastLine, RecordReader, TOO_LONG_KEPT};
use super::input::Input;
use super::position::Prefix;
use super::{READ_BUFFER_BYTES, STDIN_BATCHES_AHEAD, STDIN_BATCH_RECORDS};
use crate::error::{Error, Result};

/// One record read by standard input's reader thread.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawRecord {
    /// Its first line number.
    line: u64,
    /// Its bytes in the batch's buffer.
    start: usize,
    end: usize,
    /// What is read of standard input up to its end.
    after: Prefix,
    /// For a record too long to read, set aside: its length (its bytes are its first ones).
    too_long: Option<u64>,
}

/// Records standard input's reader thread hands on at once.
#[derive(Debug, Default)]
pub(super) struct RawBatch {
    buf: Vec<u8>,
    records: Vec<RawRecord>,
    /// Set on the last batch: what is read at the end of the input (blank lines included).
    eof: Option<Prefix>,
}

/// A stream (standard input or a reader), read record by record by a thread of its own and
/// handed on as soon as records arrive: waiting for more input never holds back records that
/// already came, and the records read for schema inference are kept for [`InputSource`](super::Source).
pub struct StdinRecords {
    rx: mpsc::Receiver<io::Result<RawBatch>>,
    /// What skipping the prefix a job read found ([`StdinRecords::start_after`]), until taken.
    skipped: Option<mpsc::Receiver<io::Result<Skipped>>>,
    queue: VecDeque<RawBatch>,
    /// Records of the front batch already taken.
    taken: usize,
    /// What is read at the end of the input, once the thread reached it.
    pub(super) eof: Option<Prefix>,
    /// An error the reader thread sent while [`StdinRecords::take_arrived`] took what had
    /// come: the next [`StdinRecords::receive`] returns it.
    deferred: Option<io::Error>,
}

impl StdinRecords {
    /// Starts the reader thread of the stream `input`. With `set_aside`, a record too long
    /// to read is read past and queued as such (as a bad record); without,
    /// it ends the stream with an error.
    pub fn start(input: &Input, csv: bool, set_aside: bool) -> Result<StdinRecords> {
        StdinRecords::start_after(input, csv, None, set_aside)
    }

    /// Starts the reader thread of the stream `input`, which first reads the bytes of
    /// `prefix`, what a job read of the stream before, and compares them byte for byte
    /// (CRC-32C), whatever they end with (blank lines, a last record without a line end);
    /// [`StdinRecords::skipped`] tells what it found, and records come only after them.
    pub(super) fn start_after(
        input: &Input,
        csv: bool,
        prefix: Option<Prefix>,
        set_aside: bool,
    ) -> Result<StdinRecords> {
        let stream = input.take_stream()?;
        let (tx, rx) = mpsc::sync_channel(STDIN_BATCHES_AHEAD);
        let (skip_tx, skip_rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("filesink-stdin".into())
            .spawn(move || {
                let stream = match sniffed(stream) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = skip_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let mut reader = RecordReader {
                    reader: BufReader::with_capacity(READ_BUFFER_BYTES, stream),
                    offset: 0,
                    line: 1,
                    crc: 0,
                    csv,
                    last_line: LastLine::Taken,
                };
                if let Some(want) = prefix {
                    let skipped = skip_prefix(&mut reader.reader, want);
                    let at = match &skipped {
                        Ok(Skipped::Same(p, _)) => Some(*p),
                        _ => None,
                    };
                    let _ = skip_tx.send(skipped);
                    let Some(at) = at else {
                        return;
                    };
                    reader.offset = at.offset;
                    reader.line = at.line;
                    reader.crc = at.crc32c.expect("set by skip_prefix");
                }
                read_stdin(reader, tx, set_aside)
            })
            .map_err(|e| Error::io("start a reader thread for", &input.display, e))?;
        Ok(StdinRecords {
            rx,
            skipped: prefix.map(|_| skip_rx),
            queue: VecDeque::new(),
            taken: 0,
            eof: None,
            deferred: None,
        })
    }

    /// What the reader thread found where the job's prefix should be; `None` for a stream
    /// started without one, or once taken.
    pub(super) fn skipped(&mut self) -> Option<io::Result<Skipped>> {
        let rx = self.skipped.take()?;
        Some(
            rx.recv()
                .unwrap_or_else(|_| Err(io::Error::other("the standard input reader stopped"))),
        )
    }

    /// Records received and not taken yet.
    pub(super) fn queued(&self) -> usize {
        self.queue.iter().map(|b| b.records.len()).sum::<usize>() - self.taken
    }

    /// Whether every record of the input was taken.
    pub(super) fn at_end(&self) -> bool {
        self.eof.is_some() && self.queued() == 0
    }

    /// Waits for the next batch until `until` (forever if `None`); `false` if none came by
    /// then or the input has ended.
    pub(super) fn receive(&mut self, until: Option<Instant>) -> io::Result<bool> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        if self.eof.is_some() {
            return Ok(false);
        }
        let msg = match until {
            None => self.rx.recv().ok(),
            Some(t) => match self
                .rx
                .recv_timeout(t.saturating_duration_since(Instant::now()))
            {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(false),
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        match msg {
            Some(Ok(batch)) => {
                self.eof = batch.eof;
                self.queue.push_back(batch);
                Ok(true)
            }
            Some(Err(e)) => Err(e),
            None => Err(io::Error::other("the standard input reader stopped")),
        }
    }

    /// Waits until `n` records are queued or the input ends; with a `deadline`, returns at
    /// the deadline with what came by then (at least `least` records, however long they take).
    pub(super) fn fill(
        &mut self,
        n: usize,
        least: usize,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        while self.queued() < n && self.eof.is_none() {
            let until = deadline.filter(|_| self.queued() >= least);
            if !self.receive(until)? {
                break;
            }
        }
        Ok(())
    }

    /// Waits for the next batch of records, unless `records` records or `bytes` bytes are
    /// queued, the input ended, or `deadline` passes first; returns whether one came. An
    /// error the reader thread sends is kept for the next [`StdinRecords::receive`], where it
    /// would have come without this.
    pub(super) fn more_arrived(
        &mut self,
        records: usize,
        bytes: usize,
        deadline: Option<Instant>,
    ) -> bool {
        let queued_bytes: usize = self.queue.iter().map(|b| b.buf.len()).sum();
        if self.queued() >= records || queued_bytes >= bytes || self.deferred.is_some() {
            return false;
        }
        match self.receive(deadline) {
            Ok(came) => came,
            Err(e) => {
                self.deferred = Some(e);
                false
            }
        }
    }

    /// Copies of the first `n` queued records, with their first line numbers.
    pub(super) fn peek(&self, n: usize) -> VecDeque<(u64, Vec<u8>)> {
        self.peek_after(0, n)
    }

    /// Copies of the `n` queued records after the first `after`, with their first line
    /// numbers. Records too long to read, set aside, are not among them.
    pub(super) fn peek_after(&self, after: usize, n: usize) -> VecDeque<(u64, Vec<u8>)> {
        let mut skip = self.taken;
        let mut passed = 0;
        let mut out = VecDeque::new();
        for b in &self.queue {
            for r in &b.records[skip..] {
                if out.len() == n {
                    return out;
                }
                if r.too_long.is_some() {
                    continue; // nothing to infer from
                }
                if passed < after {
                    passed += 1;
                    continue;
                }
                out.push_back((r.line, b.buf[r.start..r.end].to_vec()));
            }
            skip = 0;
        }
        out
    }

    /// Takes the next queued record: its first line, bytes and the prefix after it.
    pub(super) fn pop(&mut self) -> Option<(u64, &[u8], Prefix)> {
        self.pop_record()
            .map(|(line, rec, after, _)| (line, rec, after))
    }

    /// As [`StdinRecords::pop`], and for a record too long to read, set aside, its length
    /// (its bytes are its first ones).
    pub(super) fn pop_record(&mut self) -> Option<(u64, &[u8], Prefix, Option<u64>)> {
        loop {
            let front = self.queue.front()?;
            if self.taken < front.records.len() {
                break;
            }
            self.queue.pop_front();
            self.taken = 0;
        }
        let i = self.taken;
        self.taken += 1;
        let front = self.queue.front().expect("checked above");
        let r = front.records[i];
        Some((r.line, &front.buf[r.start..r.end], r.after, r.too_long))
    }
}

/// The reader thread of [`StdinRecords`]: hands on a batch as soon as the next record is not
/// already buffered (reading it may wait), or the batch is full.
pub(super) fn read_stdin(
    mut reader: RecordReader<BufReader<Box<dyn Read + Send>>>,
    tx: mpsc::SyncSender<io::Result<RawBatch>>,
    set_aside: bool,
) {
    loop {
        let mut batch = RawBatch::default();
        let mut failed = None;
        loop {
            let start = batch.buf.len();
            // A CSV header is no record to set aside: without it nothing can be read.
            let set_aside = set_aside && !(reader.csv && reader.offset == 0);
            match reader.next_record(&mut batch.buf) {
                Ok(Some(line)) => batch.records.push(RawRecord {
                    line,
                    start,
                    end: batch.buf.len(),
                    after: reader.prefix(),
                    too_long: None,
                }),
                Ok(None) => {
                    batch.eof = Some(reader.prefix());
                    break;
                }
                Err(e) => {
                    let read = (batch.buf.len() - start) as u64;
                    let kept = (start + TOO_LONG_KEPT).min(batch.buf.len());
                    batch.buf.truncate(kept);
                    batch.buf.shrink_to(READ_BUFFER_BYTES);
                    let skipped = match too_long(&e).filter(|_| set_aside) {
                        Some(tl) => reader.skip_rest(tl, read).map(|bytes| (tl.line, bytes)),
                        None => Err(e),
                    };
                    match skipped {
                        Ok((line, bytes)) => batch.records.push(RawRecord {
                            line,
                            start,
                            end: kept,
                            after: reader.prefix(),
                            too_long: Some(bytes),
                        }),
                        Err(e) => {
                            batch.buf.truncate(start);
                            failed = Some(e);
                        }
                    }
                    break;
                }
            }
            if batch.records.len() >= STDIN_BATCH_RECORDS
                || batch.buf.len() >= READ_BUFFER_BYTES
                || !reader.reader.buffer().contains(&b'\n')
            {
                break;
            }
        }
        let end = batch.eof.is_some();
        if (!batch.records.is_empty() || end) && tx.send(Ok(batch)).is_err() {
            return;
        }
        if let Some(e) = failed {
            let _ = tx.send(Err(e));
            return;
        }
        if end {
            return;
        }
    }
}
