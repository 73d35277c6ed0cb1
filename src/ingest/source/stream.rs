//! A stream input (standard input, a reader) of an [`InputSource`]: started past what the job
//! read of it, which its reader thread ([`StdinRecords`]) compares as it skips, its CSV header
//! checked, then read in chunks that close on a linger as well as on their size.

use std::io;
use std::time::Instant;

use super::check::{stream_differs, Skipped, CONTINUED};
use super::chunk::RawChunk;
use super::framing::too_long_record;
use super::input::InputFormat;
use super::inputs::InputSource;
use super::position::{Cursor, Prefix};
use super::stdin::StdinRecords;
use super::CHUNK_BYTES_MAX;
use crate::error::{Error, Result};

impl InputSource {
    /// The next chunk of standard input: the records there are, once it has waited
    /// `linger` for more after the first; `None` at the end of the input.
    pub(super) fn next_stdin_chunk(&mut self, records_max: usize) -> Result<Option<RawChunk>> {
        let i = self.cursor.input;
        let display = self.inputs[i].display.clone();
        let read_err = |e: io::Error| Error::io("read", &display, e);
        if self.stdin.is_none() {
            // Past what the job read of it, if anything: the reader thread compares those
            // bytes first.
            let want = Some(self.read[i]).filter(|p| p.offset > 0);
            let csv = self.format == InputFormat::Csv;
            let stream = StdinRecords::start_after(&self.inputs[i], csv, want, !self.strict)?;
            self.stdin = Some(stream);
        }
        if !self.stdin_opened {
            if let Some(skipped) = self.stdin.as_mut().expect("started above").skipped() {
                return self.skipped_stdin(skipped.map_err(read_err)?, records_max);
            }
            if self.stream_reread && self.read[i].offset > 0 {
                // Started by inference (a job without a schema yet): an empty stream is
                // passed over here too, what the job read of it kept.
                let stdin = self.stdin.as_mut().expect("started above");
                while stdin.queued() == 0 && !stdin.at_end() {
                    stdin.receive(None).map_err(read_err)?;
                }
                if stdin.queued() == 0 && stdin.eof.is_none_or(|p| p.offset == 0) {
                    self.stdin_done = true;
                    return Ok(None);
                }
            }
            self.open_stdin()?;
            self.stdin_opened = true;
        }
        let stdin = self.stdin.as_mut().expect("started above");
        let mut buf = Vec::new();
        let mut spans = Vec::new();
        let mut set_aside = None;
        let mut last = None;
        let mut first_at = None;
        loop {
            while spans.len() < records_max && buf.len() < CHUNK_BYTES_MAX {
                let Some((line, rec, after, too_long)) = stdin.pop_record() else {
                    break;
                };
                last = Some(after);
                first_at.get_or_insert_with(Instant::now);
                if let Some(bytes) = too_long {
                    set_aside = Some(too_long_record(&display, line, rec, bytes));
                    break; // the chunk ends with it
                }
                let start = buf.len();
                buf.extend_from_slice(rec);
                spans.push((line, start, buf.len()));
            }
            if spans.len() >= records_max || buf.len() >= CHUNK_BYTES_MAX || set_aside.is_some() {
                break;
            }
            if stdin.at_end() {
                last = stdin.eof;
                break;
            }
            let until = first_at.map(|t| t + self.linger);
            if !stdin.receive(until).map_err(read_err)? && !stdin.at_end() {
                break; // lingered long enough
            }
        }
        let Some(after) = last else {
            return Ok(None);
        };
        self.bytes_read += after.offset - self.read[i].offset;
        self.set_read(i, after);
        if spans.is_empty() && set_aside.is_none() {
            return Ok(None);
        }
        self.cursor = Cursor {
            input: i,
            offset: after.offset,
            line: after.line,
        };
        let mut chunk = self.raw_chunk(buf, spans);
        chunk.too_long.extend(set_aside);
        Ok(Some(chunk))
    }

    /// Goes on after the reader thread of standard input compared the bytes the job read of
    /// it with what came: the next chunk if they are the same, nothing if the stream is empty
    /// and the job had finished (a rerun without a pipe), otherwise an error.
    pub(super) fn skipped_stdin(
        &mut self,
        skipped: Skipped,
        records_max: usize,
    ) -> Result<Option<RawChunk>> {
        let i = self.cursor.input;
        let want = self.read[i];
        let what = self.stream_name(i);
        match skipped {
            Skipped::Same(p, blank) => {
                // Blank lines only: the header is still to come.
                self.stream_at(i, p, blank && self.format == InputFormat::Csv)?;
                self.stdin_opened = true;
                self.next_stdin_chunk(records_max)
            }
            Skipped::Empty if self.stream_reread => {
                // Nothing new, and what the job read of it stays as it was.
                self.stdin_done = true;
                Ok(None)
            }
            Skipped::Empty | Skipped::Differs => Err(stream_differs(&what, want.offset)),
            Skipped::Continued => Err(Error::InputChanged(format!("{what}: {CONTINUED}"))),
        }
    }

    /// For a stream started before the source (by schema inference, so of a job that read
    /// nothing of it yet): skips the records of standard input the job already read, checking
    /// that they are the same bytes, and checks a CSV header.
    pub(super) fn open_stdin(&mut self) -> Result<()> {
        let i = self.cursor.input;
        let want = self.read[i];
        let csv = self.format == InputFormat::Csv;
        let display = self.inputs[i].display.clone();
        let stdin = self.stdin.as_mut().expect("started");
        let read_err = |e: io::Error| Error::io("read", &display, e);
        let mut at = Prefix::START;
        while at.offset < want.offset {
            if stdin.queued() == 0 && !stdin.at_end() {
                stdin.receive(None).map_err(read_err)?;
                continue;
            }
            match stdin.pop() {
                Some((_, _, after)) => at = after,
                None => {
                    // The end: blank lines after the last record count too.
                    at = stdin.eof.unwrap_or(at);
                    break;
                }
            }
        }
        let same = at.offset == want.offset && want.crc32c.is_none_or(|c| at.crc32c == Some(c));
        if !same {
            return Err(stream_differs(&self.stream_name(i), want.offset));
        }
        self.stream_at(i, at, csv && want.offset == 0)
    }

    /// How messages name stream `i`: a reader by its name, else standard input.
    fn stream_name(&self, i: usize) -> String {
        match self.inputs[i].stream.is_some() {
            true => format!("input `{}`", self.inputs[i].display),
            false => "standard input".to_string(),
        }
    }

    /// Records that stream `i` is read up to `p`, then reads its CSV header if `header` (it
    /// is still to come), and places the cursor after what is read.
    fn stream_at(&mut self, i: usize, p: Prefix, header: bool) -> Result<()> {
        self.set_read(i, p);
        if header {
            self.read_stdin_header()?;
        }
        let p = self.read[i];
        self.cursor = Cursor {
            input: i,
            offset: p.offset,
            line: p.line,
        };
        Ok(())
    }

    /// Reads the CSV header of standard input (its next record) and checks it against the
    /// schema.
    pub(super) fn read_stdin_header(&mut self) -> Result<()> {
        let i = self.cursor.input;
        let display = self.inputs[i].display.clone();
        let read_err = |e: io::Error| Error::io("read", &display, e);
        let stdin = self.stdin.as_mut().expect("started");
        while stdin.queued() == 0 && !stdin.at_end() {
            stdin.receive(None).map_err(read_err)?;
        }
        let mut header = Vec::new();
        if let Some((_, rec, after)) = stdin.pop() {
            header.extend_from_slice(rec);
            self.check_header(&header)?;
            self.bytes_read += after.offset - self.read[i].offset;
            self.set_read(i, after);
        }
        Ok(())
    }
}
