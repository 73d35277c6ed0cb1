//! The framing stage: whole records (lines) read from a buffered input with their line numbers
//! and the running CRC-32C of every byte read ([`RecordReader`]); records longer than
//! [`RECORD_BYTES_MAX`](super::RECORD_BYTES_MAX) are cut short into bad records. Also the
//! tidy messages of CSV and JSON decoding errors.

use std::io::{self, BufRead};

use super::chunk::BadRecord;
use super::position::Prefix;
use super::{BYTE_ORDER_MARK, READ_BUFFER_BYTES, RECORD_BYTES_MAX};

/// Appends to `buf` the bytes of `reader` up to and including the next `\n`, at most `limit`
/// of them, and folds them into `crc`; returns how many. Like [`BufRead::read_until`], but the
/// CRC is taken from the reader's buffer before the copy: read back from `buf` just after it
/// was written, every line of `buf` that was last in another core's cache (a chunk's buffer is
/// freed by the decoder that read it, and the next one reuses its memory) stalled the loads on
/// the stores before them.
pub(super) fn read_line_crc<R: BufRead>(
    reader: &mut R,
    limit: u64,
    buf: &mut Vec<u8>,
    crc: &mut u32,
) -> io::Result<usize> {
    let mut read = 0usize;
    loop {
        let avail = match reader.fill_buf() {
            Ok(avail) => avail,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let room = limit.saturating_sub(read as u64).min(avail.len() as u64) as usize;
        let avail = &avail[..room];
        let (line_end, used) = match memchr::memchr(b'\n', avail) {
            Some(i) => (true, i + 1),
            None => (false, avail.len()),
        };
        *crc = crc32c::crc32c_append(*crc, &avail[..used]);
        buf.extend_from_slice(&avail[..used]);
        reader.consume(used);
        read += used;
        if line_end || used == 0 {
            return Ok(read);
        }
    }
}

/// The first bytes of a record longer than [`RECORD_BYTES_MAX`] that a bad-records file keeps.
pub(super) const TOO_LONG_KEPT: usize = 1024;

/// A record longer than [`RECORD_BYTES_MAX`], as [`RecordReader::next_record`] found it: the
/// error inside its `io::Error`. The reader stops inside the record; a run that sets bad
/// records aside skips its rest ([`RecordReader::skip_rest`]), any other stops.
#[derive(Debug)]
pub(super) struct RecordTooLong {
    /// The record's first line.
    pub(super) line: u64,
    /// Whether the record's part read so far holds an odd number of `"` (CSV: it is inside a
    /// quoted field).
    pub(super) quotes_odd: bool,
    /// Whether that part is the whole record (it ended at a line end, outside quotes).
    pub(super) complete: bool,
}

impl std::fmt::Display for RecordTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the record at line {} is longer than {RECORD_BYTES_MAX} bytes",
            self.line
        )
    }
}

impl std::error::Error for RecordTooLong {}

/// The record too long that `e` says the reader stopped in, if that is what it says.
pub(super) fn too_long(e: &io::Error) -> Option<&RecordTooLong> {
    e.get_ref()?.downcast_ref::<RecordTooLong>()
}

/// The bad record that stands for a record too long to read (`kept` its first bytes, `bytes`
/// its length): its first [`TOO_LONG_KEPT`] bytes, and why.
pub(super) fn too_long_record(display: &str, line: u64, kept: &[u8], bytes: u64) -> BadRecord {
    let kept = &kept[..kept.len().min(TOO_LONG_KEPT)];
    BadRecord {
        source: format!("{display}:{line}"),
        line: record_text(kept),
        error: format!(
            "the record takes {bytes} bytes, more than the {RECORD_BYTES_MAX} a record may \
             take; only its first {} are kept here",
            kept.len()
        ),
    }
}

/// Whether a record that ends the input without a line end is taken: the line-end rule. A
/// record is taken with its line end, or where the input is known complete, so that nothing is
/// committed shorter than its writer makes it.
#[derive(Debug, Clone, Default)]
pub(crate) enum LastLine {
    /// The input is complete: a stream at its end, an object, a compressed stream at its end.
    #[default]
    Taken,
    /// A plain file that may still be written: the record is taken only once the file holds
    /// nothing past what was read and was last changed at least `settle` ago; until then it is
    /// left unread, for a later run. A zero `settle` takes it at once.
    Settled {
        /// The file, opened (its size and time of last change are read from it).
        file: std::sync::Arc<std::fs::File>,
        /// How long the file must have been unchanged.
        settle: std::time::Duration,
    },
}

impl LastLine {
    /// Whether a record without a line end that ends at byte `end` of the input is taken.
    pub(super) fn takes(&self, end: u64) -> io::Result<bool> {
        match self {
            LastLine::Taken => Ok(true),
            LastLine::Settled { settle, .. } if settle.is_zero() => Ok(true),
            LastLine::Settled { file, settle } => {
                let meta = file.metadata()?;
                let unchanged = meta
                    .modified()?
                    .elapsed()
                    .is_ok_and(|since| since >= *settle);
                Ok(meta.len() == end && unchanged)
            }
        }
    }
}

/// Reads whole records (a line; for CSV, lines until the quotes balance) and keeps the
/// position and the CRC-32C of everything read.
pub(super) struct RecordReader<R = Box<dyn BufRead + Send>> {
    pub(super) reader: R,
    pub(super) offset: u64,
    pub(super) line: u64,
    pub(super) crc: u32,
    pub(super) csv: bool,
    /// Whether a last record without a line end is taken ([`LastLine`]).
    pub(super) last_line: LastLine,
}

impl<R: BufRead> RecordReader<R> {
    /// What is read so far.
    pub(super) fn prefix(&self) -> Prefix {
        Prefix {
            offset: self.offset,
            line: self.line,
            crc32c: Some(self.crc),
        }
    }

    /// Appends to `buf` the non-blank records among the whole lines the reader has buffered,
    /// each with its span (first line, start, end) in `spans`, while `spans` holds fewer than
    /// `records_max` and `buf` fewer than `bytes_max` bytes: what [`RecordReader::next_record`]
    /// called as often would append, with the CRC-32C taken over the whole run of lines at
    /// once (line by line it was a tenth of the reader thread's CPU, each short line too short
    /// for the CRC's parallel path). Returns how many records it appended.
    ///
    /// Whatever needs more than the buffered lines it leaves to `next_record`: a line that
    /// goes on past the buffer (or the end of the input), the input's first line (which may
    /// open with a byte order mark), and CSV (where a quoted field may span lines).
    pub(super) fn buffered_records(
        &mut self,
        buf: &mut Vec<u8>,
        spans: &mut Vec<(u64, usize, usize)>,
        records_max: usize,
        bytes_max: usize,
    ) -> io::Result<usize> {
        if self.csv || self.offset == 0 {
            return Ok(0);
        }
        let avail = match self.reader.fill_buf() {
            Ok(avail) => avail,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut used = 0;
        let mut line = self.line;
        let mut appended = 0;
        for end in memchr::memchr_iter(b'\n', avail) {
            if spans.len() >= records_max || buf.len() >= bytes_max {
                break;
            }
            let record = &avail[used..=end];
            if record.len() as u64 > RECORD_BYTES_MAX {
                break; // `next_record` names it
            }
            if !record.iter().all(|b| b.is_ascii_whitespace()) {
                let start = buf.len();
                buf.extend_from_slice(record);
                spans.push((line, start, buf.len()));
                appended += 1;
            }
            line += 1;
            used = end + 1;
        }
        self.crc = crc32c::crc32c_append(self.crc, &avail[..used]);
        self.offset += used as u64;
        self.line = line;
        self.reader.consume(used);
        Ok(appended)
    }

    /// Reads on to the end of the record `next_record` stopped in because it is too long
    /// (`tl`, after its first `read` bytes), keeping none of it; returns the record's length.
    pub(super) fn skip_rest(&mut self, tl: &RecordTooLong, read: u64) -> io::Result<u64> {
        if tl.complete {
            return Ok(read);
        }
        let mut quotes_odd = tl.quotes_odd;
        let mut bytes = read;
        let mut piece = Vec::new();
        loop {
            piece.clear();
            let limit = READ_BUFFER_BYTES as u64;
            let n = read_line_crc(&mut self.reader, limit, &mut piece, &mut self.crc)?;
            self.offset += n as u64;
            bytes += n as u64;
            if self.csv && piece.iter().filter(|&&b| b == b'"').count() % 2 == 1 {
                quotes_odd = !quotes_odd;
            }
            if piece.ends_with(b"\n") {
                self.line += 1;
                if !quotes_odd {
                    return Ok(bytes);
                }
            } else if (n as u64) < limit {
                if quotes_odd {
                    // As `next_record` refuses it: taken as one record, the rest of a file
                    // cut inside a quoted field would later become records of its own.
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the CSV record at line {} ends inside a quoted field at the end \
                             of the input (a file still being written?)",
                            tl.line
                        ),
                    ));
                }
                return Ok(bytes); // the end of the input
            }
        }
    }

    /// Appends the next non-blank record to `buf`, always ending it with `\n`; returns its
    /// first line number, or `None` at end of input. A record longer than
    /// [`RECORD_BYTES_MAX`] is an error ([`RecordTooLong`]), with the reader inside it and
    /// the record's first bytes in `buf`.
    pub(super) fn next_record(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<u64>> {
        loop {
            let start = buf.len();
            let first_line = self.line;
            let at_start = self.offset == 0;
            let before = (self.offset, self.line, self.crc);
            let mut quotes = 0usize;
            loop {
                let piece_start = buf.len();
                let limit = RECORD_BYTES_MAX + 1 - (piece_start - start) as u64;
                let n = read_line_crc(&mut self.reader, limit, buf, &mut self.crc)?;
                if n == 0 {
                    break;
                }
                self.offset += n as u64;
                let piece = &buf[piece_start..];
                if piece.ends_with(b"\n") {
                    self.line += 1;
                }
                if self.csv {
                    quotes += piece.iter().filter(|&&b| b == b'"').count();
                }
                let piece_ends_line = piece.ends_with(b"\n");
                if (buf.len() - start) as u64 > RECORD_BYTES_MAX {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        RecordTooLong {
                            line: first_line,
                            quotes_odd: quotes % 2 == 1,
                            complete: piece_ends_line && quotes % 2 == 0,
                        },
                    ));
                }
                if !piece.ends_with(b"\n") {
                    break; // end of input
                }
                if quotes % 2 == 1 {
                    continue; // a quoted field spans lines
                }
                break;
            }
            if buf.len() == start {
                return Ok(None);
            }
            let unended = !buf.ends_with(b"\n") || quotes % 2 == 1;
            if unended && !self.last_line.takes(self.offset)? {
                // The input ends inside a record that may still be written: left for a later
                // run, which reads it whole.
                (self.offset, self.line, self.crc) = before;
                buf.truncate(start);
                return Ok(None);
            }
            if quotes % 2 == 1 {
                // The input ends inside a quoted field: a file cut while it was written. Taken
                // as a record, its rest would later become records of its own.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the CSV record at line {first_line} ends inside a quoted field at the \
                         end of the input (a file still being written?)"
                    ),
                ));
            }
            if at_start && buf[start..].starts_with(BYTE_ORDER_MARK) {
                // A UTF-8 byte order mark opens the input, not its first record.
                buf.drain(start..start + BYTE_ORDER_MARK.len());
            }
            if buf[start..].iter().all(|b| b.is_ascii_whitespace()) {
                buf.truncate(start);
                continue;
            }
            if !buf.ends_with(b"\n") {
                buf.push(b'\n');
            }
            return Ok(Some(first_line));
        }
    }
}

/// Splits one CSV record into fields (RFC 4180 quoting, `,` delimiter).
pub fn csv_fields(record: &[u8]) -> Vec<String> {
    let mut rec = record;
    while let Some(r) = rec.strip_suffix(b"\n").or_else(|| rec.strip_suffix(b"\r")) {
        rec = r;
    }
    let mut fields = Vec::new();
    let mut cur = Vec::new();
    let mut in_quotes = false;
    let mut i = 0;
    while i < rec.len() {
        let b = rec[i];
        if in_quotes {
            if b == b'"' {
                if rec.get(i + 1) == Some(&b'"') {
                    cur.push(b'"');
                    i += 1;
                } else {
                    in_quotes = false;
                }
            } else {
                cur.push(b);
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == b',' {
            fields.push(String::from_utf8_lossy(&cur).into_owned());
            cur.clear();
        } else {
            cur.push(b);
        }
        i += 1;
    }
    fields.push(String::from_utf8_lossy(&cur).into_owned());
    fields
}

pub(super) fn record_text(record: &[u8]) -> String {
    let mut rec = record;
    while let Some(r) = rec.strip_suffix(b"\n").or_else(|| rec.strip_suffix(b"\r")) {
        rec = r;
    }
    String::from_utf8_lossy(rec).into_owned()
}

/// Removes arrow's own `for line N`/`at line N` (counted from the start of the batch, not of
/// the file) from a CSV error message.
pub(super) fn tidy_csv_error(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    loop {
        let hit = [" for line ", " at line "]
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, p.len())))
            .min();
        let Some((i, len)) = hit else {
            out.push_str(rest);
            return out;
        };
        let after = &rest[i + len..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push_str(&rest[..i + len]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..i]);
        rest = &after[digits..];
    }
}

/// A serde_json error without its position inside the record (`at line 1 column 7`), which
/// would be read as a position in the file.
pub(super) fn json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => &msg,
    };
    format!("invalid JSON: {msg}")
}

pub(super) fn tidy_json_error(msg: &str) -> String {
    let msg = msg.strip_prefix("Json error: ").unwrap_or(msg);
    // Strict mode's words for a field outside the schema (at the end, after any
    // `whilst decoding field '…': ` of the structs around it).
    let msg = match (
        msg.rfind("column '"),
        msg.strip_suffix("' missing from schema"),
    ) {
        (Some(i), Some(head)) if i + 8 <= head.len() => {
            format!(
                "{}field `{}` is not in the schema",
                &msg[..i],
                &head[i + 8..]
            )
        }
        _ => msg.to_string(),
    };
    msg.replace(
        "Encountered unmasked nulls in non-nullable StructArray child:",
        "null or missing value for non-nullable",
    )
}
