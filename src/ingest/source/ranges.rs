//! Ranges of the input files, read on the decoding threads: no reader thread in between.
//!
//! The reader thread of [`InputSource`] reads every byte of the inputs on one thread and hands the
//! chunks to the decoding threads; on two cores it is the stage the others wait for, not by
//! its CPU but by its place: both decoders wait on it while it waits for a core
//! (measured by `scripts/bench-parallel`). Here each decoding thread reads its own ranges
//! of the files (`pread`), frames their records, and decodes them.
//!
//! # Who owns a record
//!
//! The bytes of the inputs still to read are cut, in input order, into ranges
//! `[start, end)` of about [`CHUNK_BYTES_MAX`](super::CHUNK_BYTES_MAX) bytes (times the chunk scale the writing loop
//! asks for); range `k` goes to decoding thread `k mod N`, and the writing loop takes the
//! decoded chunks back in that round, so in input order. A range never spans two inputs.
//!
//! A record belongs to the range it **starts** in. A record starts at the position a job
//! resumes from and after every `\n` (a JSON line cannot hold a raw line end: JSON strings
//! escape it; CSV, whose quoted fields may span lines, keeps the reader thread). So range `k`
//! holds the bytes `[s, e)`: `s` the first record start at or after its `start`, `e` the
//! first at or after its `end` (or the end of the file): its last record may run past `end`,
//! and the next range begins where that record ends, by the same rule. A range in which no
//! record starts (a record longer than a range) holds nothing. A range is cut by bytes only:
//! one of short records holds more than the reader thread's chunk of at most
//! `CHUNK_RECORDS_MAX` records (the memory budget counts bytes, which stay the same). Within `[s, e)` the records are
//! framed by the same [`RecordReader`] as on the reader thread: blank lines, a byte order mark,
//! a last line without a line end and records longer than [`RECORD_BYTES_MAX`] are treated
//! exactly alike.
//!
//! # The position: a baton handed from range to range
//!
//! A chunk's position ([`Cursor`] and [`Prefix`]) needs what a thread reading its own range
//! does not know: the line number of `s` and the CRC-32C of everything before `s`. Each range
//! counts its own line ends and takes the CRC of its own bytes; then it waits for the
//! **baton** of the range before it (what is read of each input after that range), folds its
//! own count and CRC into it (`crc32c_combine`), and hands it on, before it decodes. So the
//! chunk leaves the thread with the exact position a reader thread would have given it, and
//! the writing loop, the checkpoint and a resumed run do not know the difference. The baton
//! also checks the cut: the range before must have ended where this one starts (`e` of range
//! `k - 1` is `s` of range `k`: both are the first record start after the same bytes); an
//! input that changed under the run so that they differ is refused.
//!
//! Waiting for the baton costs little: a range waits only for the framing of the range before
//! (a tenth of a range's work), and hands its baton on before it decodes. No thread waits on
//! one that waits on it: the baton goes in range order, and a thread hands on every baton it
//! owes before it takes another range. A thread that stops without handing on its baton (an
//! error, a writing loop that stopped taking chunks) closes the relay: the threads waiting for
//! a baton stop too, sending nothing; the writing loop stops at the error, in input order.
//!
//! # Crash points
//!
//! Reading writes nothing: a range's chunk reaches a checkpoint only through the writing loop,
//! in input order, with the position after its records, and a checkpoint stores the position
//! of the last chunk handed to the writers. So a crash anywhere (a range read but not
//! decoded, decoded but not taken, taken but not checkpointed) leaves the last complete
//! checkpoint's position, and the resumed run reads on from there, as after a crash of the
//! reader thread. What this module must guarantee is only that every position is exact: the
//! offset a record start (`e` of some range), the line number and the CRC-32C those of every
//! byte before it (`ranges_frame_what_the_reader_thread_frames` checks each chunk's, against
//! the reader thread's framing; the kill tests of `tests/kill_resume.rs` run with ranges too).
//!
//! Only whole files of JSON lines, uncompressed and local, with a time-interval checkpoint
//! schedule are read this way ([`InputSource::ranges`]): a schedule by record counts cuts chunks at
//! exact record numbers, which a range cannot know, and streams, compressed inputs and objects
//! cannot be read at an offset.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{
    continues_last_record, too_long, too_long_record, BadRecord, Cursor, Input, InputSource,
    LastLine, Prefix, RawChunk, RecordReader, RecordTooLong, CONTINUED, READ_BUFFER_BYTES,
    RECORD_BYTES_MAX, RECORD_TYPICAL_SLACK,
};
use crate::error::{Error, Result};

/// The byte ranges of a [`InputSource`]'s input files, read by the decoding threads themselves
/// ([`InputSource::ranges`]; cheap to clone: the threads share it).
///
/// Range `k` (about [`CHUNK_BYTES_MAX`](super::CHUNK_BYTES_MAX) bytes, in input order) is read
/// by thread `k mod N` ([`Ranges::lane`]), and holds the records that start in it. Each range
/// frames its records with the reader thread's own framing, then waits for the position after
/// the range before it (line number and CRC-32C of everything read), folds its own into it and
/// hands it on before it decodes: each chunk leaves with the exact position a reader thread
/// would have given it. A thread that stops early closes the relay, and the others stop. The
/// crash points and invariants are in this module's source (`src/ingest/source/ranges.rs`).
#[derive(Clone)]
pub struct Ranges(Arc<Shared>);

impl std::fmt::Debug for Ranges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ranges").finish_non_exhaustive()
    }
}

struct Shared {
    inputs: Vec<Input>,
    displays: Vec<Arc<str>>,
    strict: bool,
    /// As [`InputSource::with_settle`].
    settle: std::time::Duration,
    plan: Mutex<Plan>,
    baton: Mutex<Baton>,
    handed: Condvar,
}

/// The cutting of the inputs into ranges, in order, as the threads ask for them.
struct Plan {
    /// Per input, what the job had read of it when the run began.
    begun: Vec<Prefix>,
    /// The input being cut, its file and length, and where its next range starts.
    input: usize,
    open: Option<(Arc<File>, u64)>,
    next: u64,
    /// How many ranges are cut so far (their numbers are `0..cut`).
    cut: u64,
    /// Cut ranges not yet taken by their thread.
    ahead: BTreeMap<u64, Planned>,
    /// Number of the first range past the end (every input cut), or past a failed one.
    end: Option<u64>,
    /// Whether the last range cut is one whose input failed to open (nothing sends the end).
    failed: bool,
}

/// What range `k` is.
enum Planned {
    Range(Range),
    /// Opening its input failed: the run stops there.
    Failed(Error),
}

/// The bytes `[start, end)` of input `input`; `first` if it starts where the run began
/// reading that input (a record starts there).
struct Range {
    input: usize,
    file: Arc<File>,
    start: u64,
    end: u64,
    first: bool,
}

/// What is read of each input after the last range that handed the baton on.
struct Baton {
    /// The number of the range whose turn it is.
    next: u64,
    read: Vec<Prefix>,
    /// Bytes framed so far.
    bytes: u64,
    /// A thread stopped without handing its baton on.
    closed: bool,
}

/// What a decoding thread does next.
#[derive(Debug)]
pub enum LaneNext {
    /// Decode these records.
    Records(RawChunk),
    /// Every input is read: the position after the last range, what is read of each input,
    /// and how many bytes this run read.
    End(Cursor, Vec<Prefix>, u64),
    /// The run stops here, at this range's place in the order.
    Failed(Error),
    /// The run stops here after these records, the range's records before the failure: if
    /// decoding them fails (a malformed record, with bad records an error), that error comes
    /// first in the input and is the one to report.
    FailedAfter(RawChunk, Error),
}

impl InputSource {
    /// The ranges of this source's inputs, if they can be read on the decoding threads (see
    /// [`Ranges`]): every input a local, uncompressed file of JSON lines whose prefix
    /// records its checksum. `None` otherwise: the reader thread reads them.
    pub fn ranges(&self) -> Option<Ranges> {
        let eligible = self.format == super::InputFormat::Jsonl
            && !self.inputs.is_empty()
            && self.inputs.iter().all(|i| {
                i.path.is_some() && i.compression.is_none() && !i.is_object() && !i.is_stdin()
            })
            && self.read.iter().all(|p| p.crc32c.is_some())
            && self.cursor.input == 0;
        eligible.then(|| {
            Ranges(Arc::new(Shared {
                inputs: self.inputs.clone(),
                displays: self.displays.clone(),
                strict: self.strict,
                settle: self.settle,
                plan: Mutex::new(Plan {
                    begun: self.read.clone(),
                    input: 0,
                    open: None,
                    next: 0,
                    cut: 0,
                    ahead: BTreeMap::new(),
                    end: None,
                    failed: false,
                }),
                baton: Mutex::new(Baton {
                    next: 0,
                    read: self.read.clone(),
                    bytes: 0,
                    closed: false,
                }),
                handed: Condvar::new(),
            }))
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ranges {
    /// The ranges thread `lane` of `lanes` reads: `lane`, `lane + lanes`, …
    pub fn lane(&self, lane: usize, lanes: usize) -> Lane {
        Lane {
            ranges: self.clone(),
            k: lane as u64,
            step: lanes as u64,
            raw: Vec::new(),
            finished: false,
        }
    }

    /// Range `k`, cut to about `bytes` bytes if it is cut now; `None` past the end (or past a
    /// failed range).
    fn take(&self, k: u64, bytes: u64) -> Option<Planned> {
        let mut plan = lock(&self.0.plan);
        while plan.cut <= k && plan.end.is_none() {
            let planned = match self.cut_next(&mut plan, bytes) {
                Ok(Some(r)) => Planned::Range(r),
                Ok(None) => {
                    plan.end = Some(plan.cut);
                    break;
                }
                Err(e) => {
                    plan.end = Some(plan.cut + 1);
                    plan.failed = true;
                    Planned::Failed(e)
                }
            };
            let n = plan.cut;
            plan.ahead.insert(n, planned);
            plan.cut += 1;
        }
        plan.ahead.remove(&k)
    }

    /// Whether `k` is the number of the range past the last (which sends the end).
    fn is_end(&self, k: u64) -> bool {
        let plan = lock(&self.0.plan);
        plan.end == Some(k) && !plan.failed
    }

    /// Cuts the next range, opening the next input with bytes to read when the current one is
    /// cut to its end; `None` once every input is.
    fn cut_next(&self, plan: &mut Plan, bytes: u64) -> Result<Option<Range>> {
        loop {
            if plan.input >= self.0.inputs.len() {
                return Ok(None);
            }
            let Some((file, len)) = plan.open.clone() else {
                let p = plan.begun[plan.input];
                let (file, len) = self.open(plan.input, p)?;
                plan.open = Some((Arc::new(file), len));
                plan.next = p.offset;
                continue;
            };
            if plan.next >= len {
                plan.input += 1;
                plan.open = None;
                continue;
            }
            let start = plan.next;
            let end = len.min(start.saturating_add(bytes.max(1)));
            plan.next = end;
            return Ok(Some(Range {
                input: plan.input,
                file,
                start,
                end,
                first: start == plan.begun[plan.input].offset,
            }));
        }
    }

    /// Opens input `i` to read it on from `p`, with the checks the reader thread makes when it
    /// opens an input ([`InputSource::open_reader`]): the same file, not cut short, not continuing
    /// the line the job read last. Returns the file and how much of it is read: its length
    /// now, or, if it ends in a record without a line end that the line-end rule leaves
    /// ([`LastLine`]), up to that record.
    fn open(&self, i: usize, p: Prefix) -> Result<(File, u64)> {
        let input = &self.0.inputs[i];
        let open_err = |e: io::Error| Error::io("open input", &input.display, e);
        let path = input.path.as_ref().expect("ranges are read of files");
        let file = File::open(path).map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        if input.file_id != Some((meta.dev(), meta.ino())) || meta.len() < p.offset {
            return Err(Error::InputChanged(format!(
                "input `{}` changed while the job ran: it was replaced or cut short",
                input.display
            )));
        }
        if p.offset > 0 {
            let mut two = [0u8; 2];
            let n = read_full_at(&file, &mut two, p.offset - 1).map_err(open_err)?;
            let last = two.first().copied().filter(|_| n >= 1);
            let next = two.get(1).copied().filter(|_| n >= 2);
            if continues_last_record(&p, last, next) {
                return Err(Error::InputChanged(format!(
                    "input `{}` changed while the job ran: {CONTINUED}",
                    input.display
                )));
            }
        }
        let mut len = meta.len();
        if len > p.offset {
            let mut last = [0u8; 1];
            read_full_at(&file, &mut last, len - 1).map_err(open_err)?;
            let last_line = LastLine::Settled {
                file: Arc::new(file.try_clone().map_err(open_err)?),
                settle: self.0.settle,
            };
            if last[0] != b'\n' && !last_line.takes(len).map_err(open_err)? {
                len = after_last_line_end(&file, p.offset, len).map_err(open_err)?;
            }
        }
        Ok((file, len))
    }

    /// Waits until it is range `k`'s turn with the baton; `None` if the relay was closed.
    fn turn(&self, k: u64) -> Option<MutexGuard<'_, Baton>> {
        let mut baton = lock(&self.0.baton);
        while baton.next < k {
            if baton.closed {
                return None;
            }
            baton = self
                .0
                .handed
                .wait(baton)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        Some(baton)
    }

    /// Closes the relay: the threads waiting for a baton stop.
    fn close(&self) {
        lock(&self.0.baton).closed = true;
        self.0.handed.notify_all();
    }
}

/// The ranges one decoding thread reads, in order; dropped before the end (an error, a
/// writing loop that stopped taking chunks), it closes the relay.
pub struct Lane {
    ranges: Ranges,
    k: u64,
    step: u64,
    /// The bytes of the range being read, kept for the next.
    raw: Vec<u8>,
    finished: bool,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        if !self.finished {
            self.ranges.close();
        }
    }
}

/// A range's records, framed, with positions relative to the range's first byte `s`.
struct Framed {
    /// `s` and `e`: the range holds the bytes `[s, e)` (`None`: no record starts in it).
    bytes: Option<(u64, u64)>,
    buf: Vec<u8>,
    /// (line from `s`, start, end) of each record in `buf`.
    spans: Vec<(u64, usize, usize)>,
    /// Records too long to read: (line from `s`, first bytes kept, length).
    too_long: Vec<(u64, Vec<u8>, u64)>,
    /// Line ends in `[s, e)`, and their CRC-32C (from 0).
    lines: u64,
    crc: u32,
    /// Offset after the last byte framed.
    consumed: u64,
    /// Reading stopped at this line (from `s`) with this error.
    failed: Option<(u64, Failure)>,
}

/// Why reading a range stopped.
enum Failure {
    Read(io::Error),
    Changed(&'static str),
}

impl Failure {
    /// The error, naming the line it stopped at: `line` of the range that begins at line
    /// `base` of the input.
    fn at(self, display: &str, base: u64, line: u64) -> Error {
        match self {
            Failure::Read(e) => {
                // A record too long names its first line, counted from the range's.
                let e = match too_long(&e) {
                    Some(tl) => io::Error::new(
                        io::ErrorKind::InvalidData,
                        RecordTooLong {
                            line: base + tl.line,
                            ..*tl
                        },
                    ),
                    None => e,
                };
                Error::io("read input", format!("{display}:{}", base + line), e)
            }
            Failure::Changed(how) => Error::InputChanged(format!(
                "input `{display}` changed while the job ran: {how}"
            )),
        }
    }
}

impl Lane {
    /// The next thing this thread sends, for a chunk of about `bytes` bytes; `None` when it
    /// has nothing more to send (the end is another thread's, or the relay was closed).
    pub fn next(&mut self, bytes: usize) -> Option<LaneNext> {
        let k = self.k;
        self.k += self.step;
        let ranges = self.ranges.clone();
        let planned = match ranges.take(k, bytes as u64) {
            Some(p) => p,
            None => {
                if !ranges.is_end(k) {
                    self.finished = true;
                    return None;
                }
                let baton = ranges.turn(k)?;
                self.finished = true;
                let end = Cursor {
                    input: ranges.0.inputs.len(),
                    offset: 0,
                    line: 1,
                };
                return Some(LaneNext::End(end, baton.read.clone(), baton.bytes));
            }
        };
        let range = match planned {
            Planned::Range(r) => r,
            Planned::Failed(e) => {
                drop(ranges.turn(k)?);
                ranges.close();
                return Some(LaneNext::Failed(e));
            }
        };
        let framed = self.frame(&range);
        let mut baton = ranges.turn(k)?;
        let i = range.input;
        let base = baton.read[i];
        let display = &ranges.0.displays[i];
        // The relay stops at a failed range: the threads waiting for a baton stop too.
        let failed = |mut baton: MutexGuard<'_, Baton>, next: LaneNext| {
            baton.closed = true;
            drop(baton);
            ranges.0.handed.notify_all();
            Some(next)
        };
        if let Some((line, f)) = framed.failed {
            let e = f.at(display, base.line, line);
            if framed.spans.is_empty() {
                return failed(baton, LaneNext::Failed(e));
            }
            let mut spans = framed.spans;
            for span in &mut spans {
                span.0 += base.line;
            }
            let before = RawChunk {
                display: display.clone(),
                buf: framed.buf,
                spans,
                cursor: Cursor {
                    input: i,
                    offset: base.offset,
                    line: base.line,
                },
                read: Vec::new(),
                too_long: Vec::new(),
                position: None,
                parts: None,
            };
            return failed(baton, LaneNext::FailedAfter(before, e));
        }
        let moved = |found: u64| {
            Error::InputChanged(format!(
                "input `{display}` changed while the job ran: its bytes moved under the run \
                 (a record was read up to byte {}, the next record start found at {found})",
                base.offset
            ))
        };
        let after = match framed.bytes {
            // The record before runs over the whole range, or the input ends before it.
            None if base.offset >= range.end => base,
            None => return failed(baton, LaneNext::Failed(moved(range.end))),
            Some((s, e)) => {
                if s != base.offset {
                    return failed(baton, LaneNext::Failed(moved(s)));
                }
                Prefix {
                    offset: e,
                    line: base.line + framed.lines,
                    crc32c: Some(crc32c_combine(
                        base.crc32c.expect("ranges need checksums"),
                        framed.crc,
                        e - s,
                    )),
                }
            }
        };
        baton.read[i] = after;
        baton.bytes += after.offset - base.offset;
        baton.next = k + 1;
        drop(baton);
        ranges.0.handed.notify_all();
        let mut spans = framed.spans;
        for span in &mut spans {
            span.0 += base.line;
        }
        let too_long = framed
            .too_long
            .iter()
            .map(|(line, kept, len)| too_long_record(display, base.line + line, kept, *len))
            .collect::<Vec<BadRecord>>();
        Some(LaneNext::Records(RawChunk {
            display: display.clone(),
            buf: framed.buf,
            spans,
            cursor: Cursor {
                input: i,
                offset: after.offset,
                line: after.line,
            },
            read: vec![(i, after)],
            too_long,
            position: None,
            parts: None,
        }))
    }

    /// Reads and frames the records of `range` (see [`Ranges`]).
    fn frame(&mut self, range: &Range) -> Framed {
        let mut framed = Framed {
            bytes: None,
            buf: Vec::new(),
            spans: Vec::new(),
            too_long: Vec::new(),
            lines: 0,
            crc: 0,
            consumed: 0,
            failed: None,
        };
        // From the byte before the range (to tell whether a record starts at its first byte),
        // to a little past its end (where its last record most likely ends).
        let from = if range.first {
            range.start
        } else {
            range.start - 1
        };
        let want = (range.end - from) as usize + RECORD_TYPICAL_SLACK;
        if self.raw.len() < want {
            // Grown (and zeroed) only when a range is longer than any before.
            self.raw.resize(want, 0);
        }
        let got = match read_full_at(&range.file, &mut self.raw[..want], from) {
            Ok(n) => n,
            Err(e) => {
                framed.failed = Some((0, Failure::Read(e)));
                return framed;
            }
        };
        let raw = &self.raw[..got];
        let at_eof = got < want;
        let s = if range.first {
            range.start
        } else {
            let within = ((range.end - from) as usize).min(raw.len());
            match memchr::memchr(b'\n', &raw[..within]) {
                Some(j) => from + j as u64 + 1,
                None => return framed, // no record starts in this range
            }
        };
        if s >= range.end {
            return framed;
        }
        // The end: the first record start at or after `range.end`.
        let tail_from = (range.end - 1).max(s);
        let in_raw = (tail_from - from) as usize;
        let e = match memchr::memchr(b'\n', raw.get(in_raw..).unwrap_or(&[])) {
            Some(j) => tail_from + j as u64 + 1,
            None if at_eof => from + raw.len() as u64,
            None => {
                // A record runs past what was read: scan on for its end.
                match scan_to_line_end(&range.file, from + raw.len() as u64) {
                    Ok(e) => e,
                    Err(err) => {
                        framed.failed = Some((0, Failure::Read(err)));
                        return framed;
                    }
                }
            }
        };
        let raw_end = from + raw.len() as u64;
        let head = &raw[(s - from) as usize..(e.min(raw_end) - from) as usize];
        framed.bytes = Some((s, e));
        // Room for the records as they are (a chunk's buffer, handed on with it).
        framed.buf = Vec::with_capacity(((e - s) as usize).min(RECORD_BYTES_MAX as usize) + 1);
        let strict = self.ranges.0.strict;
        if e <= raw_end {
            frame_records(head, s, strict, &mut framed);
        } else {
            let rest = BufReader::with_capacity(
                READ_BUFFER_BYTES,
                FileAt {
                    file: range.file.clone(),
                    at: raw_end,
                    end: e,
                },
            );
            frame_records(head.chain(rest), s, strict, &mut framed);
        }
        if framed.failed.is_none() && framed.consumed != e {
            // The file was cut while the range was read.
            framed.failed = Some((framed.lines, Failure::Changed("it was cut short")));
        }
        framed
    }
}

/// Frames the records of `reader`, which holds the bytes of a range from its first record
/// start `s` to the first record start after it, into `framed`.
fn frame_records<R: BufRead>(reader: R, s: u64, strict: bool, framed: &mut Framed) {
    let mut rr = RecordReader {
        reader,
        offset: s,
        line: 0,
        crc: 0,
        csv: false,
        last_line: LastLine::Taken,
    };
    let mut buf = std::mem::take(&mut framed.buf);
    let capacity = buf.capacity();
    loop {
        if let Err(e) = rr.buffered_records(&mut buf, &mut framed.spans, usize::MAX, usize::MAX) {
            framed.failed = Some((rr.line, Failure::Read(e)));
            break;
        }
        let start = buf.len();
        let failed = match rr.next_record(&mut buf) {
            Ok(Some(line)) => {
                framed.spans.push((line, start, buf.len()));
                continue;
            }
            Ok(None) => break,
            Err(e) => e,
        };
        let Some(tl) = too_long(&failed).filter(|_| !strict) else {
            buf.truncate(start);
            framed.failed = Some((rr.line, Failure::Read(failed)));
            break;
        };
        let read = (buf.len() - start) as u64;
        let tl_line = tl.line;
        match rr.skip_rest(tl, read) {
            Ok(len) => {
                // Set aside after the chunk's records (`RawChunk::too_long`): it is the
                // range's last, since it runs past the range's end (a range is a few MiB).
                let kept = buf[start..].to_vec();
                framed.too_long.push((tl_line, kept, len));
                buf.truncate(start);
                buf.shrink_to(capacity);
            }
            Err(e) => {
                buf.truncate(start);
                framed.failed = Some((rr.line, Failure::Read(e)));
                break;
            }
        }
    }
    framed.buf = buf;
    framed.lines = rr.line;
    framed.crc = rr.crc;
    framed.consumed = rr.offset;
}

/// Reads into `buf` from `offset` until it is full or the file ends; returns how many bytes.
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The offset after the last `\n` in the bytes `[from, end)` of a file, or `from`.
fn after_last_line_end(file: &File, from: u64, end: u64) -> io::Result<u64> {
    let mut piece = vec![0u8; READ_BUFFER_BYTES];
    let mut to = end;
    while to > from {
        let at = to.saturating_sub(piece.len() as u64).max(from);
        let want = (to - at) as usize;
        let n = read_full_at(file, &mut piece[..want], at)?;
        if let Some(j) = memchr::memrchr(b'\n', &piece[..n]) {
            return Ok(at + j as u64 + 1);
        }
        to = at;
    }
    Ok(from)
}

/// The offset after the first `\n` at or after `from`, or the end of the file.
fn scan_to_line_end(file: &File, from: u64) -> io::Result<u64> {
    let mut piece = vec![0u8; READ_BUFFER_BYTES];
    let mut at = from;
    loop {
        let n = read_full_at(file, &mut piece, at)?;
        if let Some(j) = memchr::memchr(b'\n', &piece[..n]) {
            return Ok(at + j as u64 + 1);
        }
        at += n as u64;
        if n < piece.len() {
            return Ok(at);
        }
    }
}

/// The bytes `[at, end)` of a file, read at their offsets.
struct FileAt {
    file: Arc<File>,
    at: u64,
    end: u64,
}

impl Read for FileAt {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.at).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// The CRC-32C of `a` then `b`, from the CRC-32C of each and the length of `b`: the CRC of
/// `a` moved on by `len_b` zero bytes (a multiplication by x^(8 len_b) modulo the
/// polynomial), then that of `b` added. As zlib's `crc32_combine_op`; a few hundred shifts,
/// where the `crc32c` crate's `crc32c_combine` squares 32x32 bit matrices for every bit of
/// the length (a hundredth of a decoding thread's time, one call per range).
fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    multiply(x_to_8n(len_b), crc_a) ^ crc_b
}

/// The CRC-32C polynomial, bit-reflected.
const POLY: u32 = 0x82F6_3B78;

/// `a * b` modulo the polynomial (bit-reflected: the top bit is x^0).
fn multiply(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
}

/// x^(8 n) modulo the polynomial.
fn x_to_8n(mut n: u64) -> u32 {
    // x^(2^k), k = 0..67: enough for any length of bytes (8 n < 2^67).
    static POWERS: std::sync::OnceLock<[u32; 67]> = std::sync::OnceLock::new();
    let powers = POWERS.get_or_init(|| {
        let mut t = [0u32; 67];
        let mut p = 1u32 << 30; // x^1
        for slot in &mut t {
            *slot = p;
            p = multiply(p, p);
        }
        t
    });
    let mut p = 1u32 << 31; // x^0
    let mut k = 3; // 8 n = n * 2^3
    while n != 0 {
        if n & 1 != 0 {
            p = multiply(powers[k], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

#[cfg(test)]
mod tests {

    use arrow::datatypes::{DataType, Field, Schema};

    use std::os::unix::fs::FileExt as _;

    use super::super::{schema_ref, InputFormat};
    use super::*;

    #[test]
    fn combined_crcs_are_the_crc_of_both() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for cut in [0, 1, 2, 3, 7, 8, 9, 100, 1023, 1024, 4095, 4999, 5000] {
            let (a, b) = data.split_at(cut);
            let (ca, cb) = (crc32c::crc32c(a), crc32c::crc32c(b));
            let want = crc32c::crc32c(&data);
            assert_eq!(crc32c_combine(ca, cb, b.len() as u64), want, "cut {cut}");
            assert_eq!(crc32c::crc32c_combine(ca, cb, b.len()), want, "cut {cut}");
        }
        // Lengths past 32 bits (no data: against the crate's combine).
        for len in [1u64 << 32, (1 << 33) + 12345, (1 << 40) - 1] {
            assert_eq!(
                crc32c_combine(0xdead_beef, 0x1234_5678, len),
                crc32c::crc32c_combine(0xdead_beef, 0x1234_5678, len as usize),
                "len {len}"
            );
        }
    }

    /// Lines of JSON with what framing must treat alike: blank and white lines, `\r\n`, a byte
    /// order mark, records longer than a range, a last line without a line end.
    fn lines(seed: u64, n: usize, bom: bool, last_line_end: bool) -> Vec<u8> {
        let mut x = seed;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut out = Vec::new();
        if bom {
            out.extend_from_slice(b"\xEF\xBB\xBF");
        }
        for i in 0..n {
            match next() % 20 {
                0 => out.extend_from_slice(b"\n"),
                1 => out.extend_from_slice(b"  \t \n"),
                2 => out.extend_from_slice(format!("{{\"n\":{i}}}\r\n").as_bytes()),
                3 => {
                    let long = "x".repeat(300 + (next() % 3000) as usize);
                    out.extend_from_slice(format!("{{\"n\":{i},\"s\":\"{long}\"}}\n").as_bytes());
                }
                _ => {
                    let s = "y".repeat((next() % 40) as usize);
                    out.extend_from_slice(format!("{{\"n\":{i},\"s\":\"{s}\"}}\n").as_bytes());
                }
            }
        }
        if !last_line_end {
            out.extend_from_slice(b"{\"n\":-1}");
        }
        out
    }

    fn source(inputs: &[Input], read: Vec<Prefix>, strict: bool) -> InputSource {
        let schema = schema_ref(&Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let source = InputSource::new(inputs.to_vec(), InputFormat::Jsonl, schema, read);
        match strict {
            true => source,
            false => source.setting_bad_records_aside(),
        }
    }

    /// Every record (input, line, bytes), the bad records, what is read of each input at the
    /// end, and the bytes read.
    type Read = (Vec<(usize, u64, Vec<u8>)>, Vec<String>, Vec<Prefix>, u64);

    fn records_of(raw: &RawChunk, out: &mut Read) {
        let input = raw.cursor.input;
        for &(line, a, b) in &raw.spans {
            out.0.push((input, line, raw.buf[a..b].to_vec()));
        }
        out.1.extend(
            raw.too_long
                .iter()
                .map(|r| format!("{} {}", r.source, r.error)),
        );
    }

    fn serially(inputs: &[Input], read: &[Prefix]) -> Read {
        let mut s = source(inputs, read.to_vec(), false);
        let mut out = (Vec::new(), Vec::new(), Vec::new(), 0);
        while let Some(raw) = s.next_raw(1000).unwrap() {
            records_of(&raw, &mut out);
        }
        out.2 = s.read().to_vec();
        out.3 = s.bytes_read();
        out
    }

    /// Reads by ranges of `bytes` on `lanes` lanes, taken in their round from one thread; checks
    /// every chunk's position against the bytes of `data` (its input's).
    fn by_ranges(
        inputs: &[Input],
        data: &[Vec<u8>],
        read: &[Prefix],
        lanes: usize,
        bytes: usize,
    ) -> Read {
        let ranges = source(inputs, read.to_vec(), false)
            .ranges()
            .expect("eligible");
        let mut lanes: Vec<Lane> = (0..lanes).map(|d| ranges.lane(d, lanes)).collect();
        let mut out = (Vec::new(), Vec::new(), Vec::new(), 0);
        // Per input, a position checked last: (offset, line, CRC), moved on from there.
        let mut at: Vec<(usize, u64, u32)> = read
            .iter()
            .map(|p| (p.offset as usize, p.line, p.crc32c.unwrap()))
            .collect();
        for turn in (0..lanes.len()).cycle() {
            match lanes[turn]
                .next(bytes)
                .expect("a lane in turn has something")
            {
                LaneNext::Records(raw) => {
                    let (i, p) = raw.read[0];
                    let d = &data[i];
                    let to = p.offset as usize;
                    let (from, line, crc) = at[i];
                    assert!(
                        to == 0 || to == d.len() || d[to - 1] == b'\n',
                        "cut inside a record at {to}"
                    );
                    let piece = &d[from..to];
                    let line = line + memchr::memchr_iter(b'\n', piece).count() as u64;
                    let crc = crc32c::crc32c_append(crc, piece);
                    assert_eq!((p.line, p.crc32c), (line, Some(crc)), "position at {to}");
                    at[i] = (to, line, crc);
                    assert_eq!(
                        (raw.cursor.input, raw.cursor.offset, raw.cursor.line),
                        (i, p.offset, p.line)
                    );
                    records_of(&raw, &mut out);
                }
                LaneNext::End(cursor, read, n) => {
                    assert_eq!(cursor.input, inputs.len());
                    out.2 = read;
                    out.3 = n;
                    break;
                }
                LaneNext::Failed(e) | LaneNext::FailedAfter(_, e) => panic!("{e}"),
            }
        }
        out
    }

    #[test]
    fn ranges_frame_what_the_reader_thread_frames() {
        let dir = tempfile::tempdir().unwrap();
        // A record longer than what a range reads past its end (the rest read as a stream).
        let mut second = lines(2, 150, false, true);
        second.extend_from_slice(format!("{{\"s\":\"{}\"}}\n", "z".repeat(200_000)).as_bytes());
        second.extend(lines(4, 150, false, false));
        let data = [
            lines(1, 400, true, true),
            second,
            Vec::new(),
            lines(3, 50, false, true),
        ];
        let inputs: Vec<Input> = data
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let path = dir.path().join(format!("in{i}.jsonl"));
                std::fs::write(&path, d).unwrap();
                Input::file(&path).unwrap()
            })
            .collect();
        let start = vec![Prefix::START; inputs.len()];
        let want = serially(&inputs, &start);
        assert!(want.0.len() > 600);
        for lanes in [1, 2, 3] {
            for bytes in [97, 500, 4096, 1 << 20] {
                let got = by_ranges(&inputs, &data, &start, lanes, bytes);
                assert_eq!(got, want, "{lanes} lanes, ranges of {bytes} bytes");
            }
        }
        // Resumed inside the first input and inside the second (at a record start).
        let at = |d: &[u8], near: usize| {
            let o = d[near..].iter().position(|&b| b == b'\n').unwrap() + near + 1;
            Prefix {
                offset: o as u64,
                line: 1 + d[..o].iter().filter(|&&b| b == b'\n').count() as u64,
                crc32c: Some(crc32c::crc32c(&d[..o])),
            }
        };
        let end = |d: &[u8]| Prefix {
            offset: d.len() as u64,
            line: 1 + d.iter().filter(|&&b| b == b'\n').count() as u64,
            crc32c: Some(crc32c::crc32c(d)),
        };
        for read in [
            vec![
                at(&data[0], 5000),
                Prefix::START,
                Prefix::START,
                Prefix::START,
            ],
            vec![
                end(&data[0]),
                at(&data[1], 100),
                end(&data[2]),
                Prefix::START,
            ],
        ] {
            let want = serially(&inputs, &read);
            for (lanes, bytes) in [(1, 333), (2, 97), (3, 4096)] {
                assert_eq!(by_ranges(&inputs, &data, &read, lanes, bytes), want);
            }
        }
    }

    fn write(dir: &std::path::Path, name: &str, data: &[u8]) -> Input {
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        Input::file(&path).unwrap()
    }

    /// A thread that stops before the end closes the relay: the others stop instead of
    /// waiting for a baton that will not come.
    #[test]
    fn a_lane_dropped_before_its_turn_stops_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let data = lines(5, 2000, false, true);
        let input = write(dir.path(), "in.jsonl", &data);
        let ranges = source(&[input], vec![Prefix::START], false)
            .ranges()
            .unwrap();
        let mut a = ranges.lane(0, 2);
        let b = ranges.lane(1, 2);
        assert!(matches!(a.next(1000), Some(LaneNext::Records(_))));
        drop(b); // range 1 never handed on
        assert!(a.next(1000).is_none());
    }

    /// A file changed in place under the run, so that the range before ends where no record
    /// of this range starts: refused, not read twice or skipped.
    #[test]
    fn a_file_changed_between_two_ranges_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = lines(6, 2000, false, true);
        let input = write(dir.path(), "in.jsonl", &data);
        let path = input.path.clone().unwrap();
        let ranges = source(&[input], vec![Prefix::START], false)
            .ranges()
            .unwrap();
        let mut a = ranges.lane(0, 2);
        let b = ranges.lane(1, 2);
        let Some(LaneNext::Records(first)) = a.next(1000) else {
            panic!("records")
        };
        // The line end the first range ended with becomes part of a record.
        let mut changed = data.clone();
        changed[first.cursor.offset as usize - 1] = b' ';
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&changed, 0).unwrap();
        let mut lanes = [a, b];
        for turn in [1, 0].into_iter().cycle() {
            match lanes[turn].next(1000) {
                Some(LaneNext::Records(_)) => continue,
                Some(LaneNext::Failed(e @ Error::InputChanged(_))) => {
                    assert!(e.to_string().contains("in.jsonl"), "{e}");
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// An input that cannot be opened when the run comes to it stops the run there, after
    /// the records before it.
    #[test]
    fn an_input_gone_stops_the_run_at_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let data = lines(7, 300, false, true);
        let a = write(dir.path(), "a.jsonl", &data);
        let b = write(dir.path(), "b.jsonl", &data);
        let ranges = source(&[a, b.clone()], vec![Prefix::START; 2], false)
            .ranges()
            .unwrap();
        let mut lanes = [ranges.lane(0, 2), ranges.lane(1, 2)];
        let Some(LaneNext::Records(_)) = lanes[0].next(1 << 20) else {
            panic!("records of a.jsonl")
        };
        std::fs::remove_file(b.path.unwrap()).unwrap();
        match lanes[1].next(1 << 20) {
            Some(LaneNext::Failed(e)) => assert!(e.to_string().contains("b.jsonl"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(lanes[0].next(1 << 20).is_none());
    }

    /// Only plain local files of JSON lines are read in ranges.
    #[test]
    fn ranges_only_of_plain_files_of_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let plain = write(dir.path(), "a.jsonl", b"{}\n");
        let gz = {
            use std::io::Write as _;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b"{}\n").unwrap();
            write(dir.path(), "b.jsonl.gz", &e.finish().unwrap())
        };
        assert!(
            source(std::slice::from_ref(&plain), vec![Prefix::START], false)
                .ranges()
                .is_some()
        );
        assert!(source(&[plain.clone(), gz], vec![Prefix::START; 2], false)
            .ranges()
            .is_none());
        assert!(source(&[Input::stdin()], vec![Prefix::START], false)
            .ranges()
            .is_none());
        let unchecked = Prefix {
            crc32c: None,
            ..Prefix::START
        };
        assert!(source(std::slice::from_ref(&plain), vec![unchecked], false)
            .ranges()
            .is_none());
        let mut csv = source(&[plain], vec![Prefix::START], false);
        csv.format = InputFormat::Csv;
        assert!(csv.ranges().is_none());
    }

    /// A record longer than [`RECORD_BYTES_MAX`]: set aside as the reader thread sets it aside
    /// (its line, its first bytes), the records around it read; an error when strict.
    #[test]
    fn a_record_too_long_is_set_aside_as_the_reader_thread_does() {
        let dir = tempfile::tempdir().unwrap();
        let mut data = lines(8, 300, false, true);
        data.extend_from_slice(b"{\"s\":\"");
        data.resize(data.len() + RECORD_BYTES_MAX as usize, b'q');
        data.extend_from_slice(b"\"}\n");
        data.extend(lines(9, 300, false, false));
        let input = write(dir.path(), "in.jsonl", &data);
        let inputs = [input];
        let want = serially(&inputs, &[Prefix::START]);
        assert_eq!(want.1.len(), 1, "{:?}", want.1);
        let got = by_ranges(
            &inputs,
            std::slice::from_ref(&data),
            &[Prefix::START],
            2,
            1 << 20,
        );
        assert_eq!(got, want);
        let ranges = source(&inputs, vec![Prefix::START], true).ranges().unwrap();
        let mut lane = ranges.lane(0, 1);
        let failed = std::iter::from_fn(|| lane.next(1 << 20))
            .find_map(|n| match n {
                LaneNext::Failed(e) | LaneNext::FailedAfter(_, e) => Some(e),
                _ => None,
            })
            .expect("strict: an error");
        let mut s = source(&inputs, vec![Prefix::START], true);
        let serial = std::iter::from_fn(|| s.next_raw(1000).transpose())
            .find_map(|r| r.err())
            .expect("strict: an error");
        assert_eq!(chain(&failed), chain(&serial));
        assert!(chain(&failed).contains(":301"), "{}", chain(&failed));
    }

    /// An error and its sources, as the command line prints them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            out.push_str(&format!(": {s}"));
            source = s.source();
        }
        out
    }

    /// Strict, a malformed record and, later in the same range, a record too long: the
    /// malformed one is reported, as it comes first (the records before a failure in framing
    /// are decoded first).
    #[test]
    fn the_first_error_in_the_input_is_the_one_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut data = b"{\"n\":1}\n{\"n\":\n".to_vec();
        data.extend_from_slice(b"{\"s\":\"");
        data.resize(data.len() + RECORD_BYTES_MAX as usize, b'q');
        data.extend_from_slice(b"\"}\n");
        let input = write(dir.path(), "in.jsonl", &data);
        let inputs = [input];
        let ranges = source(&inputs, vec![Prefix::START], true).ranges().unwrap();
        let decoder = source(&inputs, vec![Prefix::START], true).decoder();
        let mut lane = ranges.lane(0, 1);
        let Some(LaneNext::FailedAfter(before, too_long)) = lane.next(1 << 20) else {
            panic!("the records before the failure")
        };
        assert!(chain(&too_long).contains("line 3"), "{}", chain(&too_long));
        assert_eq!(before.records(), 2);
        let e = decoder.decode(before).unwrap_err().to_string();
        assert!(e.contains("in.jsonl:2"), "{e}");
    }
}
