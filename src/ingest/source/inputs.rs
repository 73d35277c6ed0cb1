//! The source over inputs: files, objects and streams of JSON lines or CSV, plain or
//! compressed, read in order from a position, framed into chunks of whole records.

use super::check::Skipped;
use super::check::{
    continues_last_record, crc_of_prefix, is_blank, stream_differs, BlankScan, CONTINUED,
};
use super::chunk::{Chunk, RawChunk};
use super::decode::Reused;
use super::decode::{Decoder, RowCheck};
use super::framing::csv_fields;
use super::framing::{too_long, too_long_record, RecordReader};
use super::input::open_file;
use super::input::{Input, InputFormat};
use super::position::{Cursor, Prefix};
use super::stdin::StdinRecords;
use super::{CHUNK_BYTES_MAX, READ_BUFFER_BYTES, RECORD_TYPICAL_SLACK};
use crate::bucket::BucketAssigner;
use crate::error::{Error, Result};
use crate::ingest::flat_json::FlatJson;
use arrow::datatypes::SchemaRef;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads the inputs from a position, in chunks of decoded records.
pub struct InputSource {
    pub(super) inputs: Vec<Input>,
    pub(super) format: InputFormat,
    schema: SchemaRef,
    pub(super) strict: bool,
    pub(super) cursor: Cursor,
    /// Per input, what is read of it.
    pub(super) read: Vec<Prefix>,
    /// Inputs whose prefix moved since the last chunk.
    moved: Vec<usize>,
    reader: Option<RecordReader>,
    stdin: Option<StdinRecords>,
    /// Standard input is positioned at its prefix (skipped up to it and checked).
    stdin_opened: bool,
    /// Standard input is not read at all (a finished job that goes on for its files).
    stdin_done: bool,
    /// A finished job reads its stream again ([`InputSource::with_stream_reread`]): one that is
    /// empty brings nothing and is passed over, its position kept.
    stream_reread: bool,
    /// How long a chunk of standard input waits for more records once it has one.
    linger: Duration,
    /// Input bytes consumed so far (headers and blank lines included).
    bytes_read: u64,
    /// Checks of the decoded records beyond their types.
    row_check: Option<RowCheck>,
    /// The input names, shared with the chunks.
    pub(super) displays: Vec<Arc<str>>,
    /// As [`Decoder::flat`], shared by the decoders.
    flat: Option<Arc<FlatJson>>,
    /// As [`Decoder::assigner`].
    assigner: Option<Arc<dyn BucketAssigner>>,
}

impl InputSource {
    /// A source over `inputs` that reads each input on from what `read` says was read of it
    /// (an input that grew is read on; an unchanged one yields nothing). A malformed record is
    /// an error, unless the source [sets bad records aside](InputSource::setting_bad_records_aside).
    /// A chunk of standard input closes once it has waited [`InputSource::with_linger`] (100
    /// ms by default) for more records after its first.
    pub fn new(
        inputs: Vec<Input>,
        format: InputFormat,
        schema: SchemaRef,
        read: Vec<Prefix>,
    ) -> InputSource {
        let (strict, stdin, stdin_done, linger) = (true, None, false, Duration::from_millis(100));
        assert_eq!(read.len(), inputs.len(), "one prefix per input");
        let cursor = match read.first() {
            Some(p) => Cursor {
                input: 0,
                offset: p.offset,
                line: p.line,
            },
            None => Cursor::START,
        };
        let displays = inputs
            .iter()
            .map(|i| Arc::from(i.display.as_str()))
            .collect();
        InputSource {
            displays,
            inputs,
            format,
            strict,
            cursor,
            read,
            moved: Vec::new(),
            reader: None,
            stdin,
            stdin_opened: false,
            stdin_done,
            stream_reread: false,
            linger,
            bytes_read: 0,
            row_check: None,
            assigner: None,
            flat: match format {
                InputFormat::Jsonl => FlatJson::new(&schema).map(Arc::new),
                InputFormat::Csv => None,
            },
            schema,
        }
    }

    /// The job had finished, and reads its stream (standard input, a reader) again: an empty
    /// one is passed over, without touching what the job read of it (a rerun without a pipe),
    /// any other must begin with what the job read.
    pub fn with_stream_reread(mut self) -> InputSource {
        self.stream_reread = true;
        self
    }

    /// Sets malformed records aside in [`Chunk::bad`] instead of failing on the first.
    pub fn setting_bad_records_aside(mut self) -> InputSource {
        self.strict = false;
        self
    }

    /// Starts standard input with the records inference already read of it
    /// ([`infer_schema`](super::infer_schema)).
    pub fn with_stdin_records(mut self, records: StdinRecords) -> InputSource {
        self.stdin = Some(records);
        self
    }

    /// Does not read standard input at all: the job read it to its end already.
    pub fn with_stdin_done(mut self) -> InputSource {
        self.stdin_done = true;
        self
    }

    /// How long a chunk of standard input waits for more records after its first.
    pub fn with_linger(mut self, linger: Duration) -> InputSource {
        self.linger = linger;
        self
    }

    /// Also rejects the decoded records that `check` rejects.
    pub fn with_row_check(mut self, check: RowCheck) -> InputSource {
        self.row_check = Some(check);
        self
    }

    /// Also splits each chunk's good records into buckets with `assigner` ([`Chunk::buckets`]),
    /// on the decoding threads: the ingest's writers then take their buckets as they are,
    /// instead of the one thread that hands the chunks to them splitting every chunk. The
    /// assigner must be the sink's.
    pub fn with_assigner(mut self, assigner: Arc<dyn BucketAssigner>) -> InputSource {
        self.assigner = Some(assigner);
        self
    }

    /// Input bytes consumed by this source so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The position after everything returned so far.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// Per input, what is read of it after everything returned so far.
    pub fn read(&self) -> &[Prefix] {
        &self.read
    }

    /// Records that input `i` is read up to `p`.
    fn set_read(&mut self, i: usize, p: Prefix) {
        self.read[i] = p;
        if !self.moved.contains(&i) {
            self.moved.push(i);
        }
    }

    /// Goes on with the input after the current one.
    fn next_input(&mut self) {
        self.reader = None;
        let next = self.cursor.input + 1;
        self.cursor = match self.read.get(next) {
            Some(p) => Cursor {
                input: next,
                offset: p.offset,
                line: p.line,
            },
            None => Cursor {
                input: next,
                offset: 0,
                line: 1,
            },
        };
    }

    /// The decoder of this source's records (cheap to clone: one per decoding thread).
    pub fn decoder(&self) -> Decoder {
        Decoder {
            format: self.format,
            schema: self.schema.clone(),
            strict: self.strict,
            row_check: self.row_check.clone(),
            reused: Reused::default(),
            flat: self.flat.clone(),
            assigner: self.assigner.clone(),
        }
    }

    /// The next chunk of at most `records_max` records (good and bad), decoded, or `None`
    /// when every input is read. A chunk never spans two inputs.
    pub fn next_chunk(&mut self, records_max: usize) -> Result<Option<Chunk>> {
        match self.next_raw(records_max)? {
            Some(raw) => self.decoder().decode(raw).map(Some),
            None => Ok(None),
        }
    }

    /// The next chunk of at most `records_max` records (and about [`CHUNK_BYTES_MAX`] bytes,
    /// at least one record), framed but not decoded, or `None` when every input is read. A
    /// chunk never spans two inputs.
    pub fn next_raw(&mut self, records_max: usize) -> Result<Option<RawChunk>> {
        self.next_raw_within(records_max, CHUNK_BYTES_MAX)
    }

    /// [`InputSource::next_raw`], with a chunk of a file closing at about `bytes_max` bytes (a
    /// chunk of standard input keeps [`CHUNK_BYTES_MAX`] and at most
    /// [`crate::ingest::CHUNK_RECORDS_MAX`] records: it waits for them).
    pub fn next_raw_within(
        &mut self,
        records_max: usize,
        bytes_max: usize,
    ) -> Result<Option<RawChunk>> {
        let records_max = records_max.max(1);
        loop {
            if self.cursor.input >= self.inputs.len() {
                return Ok(None);
            }
            if self.inputs[self.cursor.input].is_stdin() {
                if !self.stdin_done {
                    // Not grown: a chunk of a stream waits for its records.
                    let records_max = records_max.min(crate::ingest::CHUNK_RECORDS_MAX);
                    if let Some(chunk) = self.next_stdin_chunk(records_max)? {
                        return Ok(Some(chunk));
                    }
                }
                self.next_input();
                continue;
            }
            if self.reader.is_none() {
                self.reader = Some(self.open_reader()?);
            }
            let input = &self.inputs[self.cursor.input];
            let reader = self.reader.as_mut().expect("opened above");
            let offset_before = reader.offset;
            // Sized once: grown record by record it was copied at every doubling, and the last
            // doubling left it twice the chunk.
            let mut buf = Vec::with_capacity(bytes_max + RECORD_TYPICAL_SLACK);
            let mut spans = Vec::new();
            let mut set_aside = None;
            let mut eof = false;
            while spans.len() < records_max && buf.len() < bytes_max {
                match reader.buffered_records(&mut buf, &mut spans, records_max, bytes_max) {
                    Ok(0) => {}
                    Ok(_) => continue,
                    Err(e) => {
                        return Err(Error::io(
                            "read input",
                            format!("{}:{}", input.display, reader.line),
                            e,
                        ))
                    }
                }
                let start = buf.len();
                let failed = match reader.next_record(&mut buf) {
                    Ok(Some(line)) => {
                        spans.push((line, start, buf.len()));
                        continue;
                    }
                    Ok(None) => {
                        eof = true;
                        break;
                    }
                    Err(e) => e,
                };
                let read_err =
                    |line: u64, e| Error::io("read input", format!("{}:{line}", input.display), e);
                let Some(tl) = too_long(&failed).filter(|_| !self.strict) else {
                    return Err(read_err(reader.line, failed));
                };
                // Set aside: its first bytes go to the bad records, the rest is read past.
                let read = (buf.len() - start) as u64;
                let bytes = reader
                    .skip_rest(tl, read)
                    .map_err(|e| read_err(reader.line, e))?;
                set_aside = Some(too_long_record(
                    &input.display,
                    tl.line,
                    &buf[start..],
                    bytes,
                ));
                buf.truncate(start);
                buf.shrink_to(bytes_max + RECORD_TYPICAL_SLACK);
                break; // the chunk ends with it
            }
            let after = Cursor {
                input: self.cursor.input,
                offset: reader.offset,
                line: reader.line,
            };
            let prefix = reader.prefix();
            self.bytes_read += reader.offset - offset_before;
            self.set_read(after.input, prefix);
            if spans.is_empty() && set_aside.is_none() {
                // This input is done: go on with the next one.
                self.next_input();
                continue;
            }
            self.cursor = after;
            if eof {
                // Keep the cursor at the end of this input; the next call moves on.
                self.reader = Some(RecordReader {
                    reader: Box::new(io::empty()),
                    offset: prefix.offset,
                    line: prefix.line,
                    crc: prefix.crc32c.unwrap_or(0),
                    csv: false,
                });
            }
            let mut chunk = self.raw_chunk(buf, spans);
            chunk.too_long.extend(set_aside);
            return Ok(Some(chunk));
        }
    }

    /// The chunk of the records `spans` of `buf`, with the inputs whose prefix moved since the
    /// last one.
    fn raw_chunk(&mut self, buf: Vec<u8>, spans: Vec<(u64, usize, usize)>) -> RawChunk {
        let read = self.moved.drain(..).map(|i| (i, self.read[i])).collect();
        RawChunk {
            display: self.displays[self.cursor.input].clone(),
            buf,
            spans,
            cursor: self.cursor,
            read,
            too_long: Vec::new(),
            position: None,
        }
    }

    /// The next chunk of standard input: the records there are, once it has waited
    /// `linger` for more after the first; `None` at the end of the input.
    fn next_stdin_chunk(&mut self, records_max: usize) -> Result<Option<RawChunk>> {
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
    fn skipped_stdin(&mut self, skipped: Skipped, records_max: usize) -> Result<Option<RawChunk>> {
        let i = self.cursor.input;
        let want = self.read[i];
        let what = match self.inputs[i].stream.is_some() {
            true => format!("input `{}`", self.inputs[i].display),
            false => "standard input".to_string(),
        };
        match skipped {
            Skipped::Same(p, blank) => {
                self.set_read(i, p);
                if blank && self.format == InputFormat::Csv {
                    // Blank lines only: the header is still to come.
                    self.read_stdin_header()?;
                }
                let p = self.read[i];
                self.cursor = Cursor {
                    input: i,
                    offset: p.offset,
                    line: p.line,
                };
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
    fn open_stdin(&mut self) -> Result<()> {
        let i = self.cursor.input;
        let want = self.read[i];
        let csv = self.format == InputFormat::Csv;
        let display = self.inputs[i].display.clone();
        let is_reader = self.inputs[i].stream.is_some();
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
            let what = if is_reader {
                format!("input `{display}`")
            } else {
                "standard input".to_string()
            };
            return Err(stream_differs(&what, want.offset));
        }
        self.set_read(i, at);
        if csv && want.offset == 0 {
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
    fn read_stdin_header(&mut self) -> Result<()> {
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

    /// Checks a CSV header against the schema.
    fn check_header(&self, header: &[u8]) -> Result<()> {
        let input = &self.inputs[self.cursor.input];
        let names = csv_fields(header);
        let expected: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        if names != expected {
            return Err(Error::InvalidInput(format!(
                "the header of `{}` ({}) does not match the job's columns ({})",
                input.display,
                names.join(", "),
                expected.join(", ")
            )));
        }
        Ok(())
    }

    fn open_reader(&mut self) -> Result<RecordReader> {
        let i = self.cursor.input;
        let input = self.inputs[i].clone();
        let open_err = |e: io::Error| Error::io("open input", &input.display, e);
        if input.compression.is_some() || input.is_object() {
            return self.open_compressed(i, &input);
        }
        let path = input
            .path
            .as_ref()
            .expect("standard input is read elsewhere");
        let mut file = File::open(path).map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        let mut p = self.read[i];
        if input.file_id != Some((meta.dev(), meta.ino())) || meta.len() < p.offset {
            return Err(Error::InputChanged(format!(
                "input `{}` changed while the job ran: it was replaced or cut short",
                input.display
            )));
        }
        let csv = self.format == InputFormat::Csv;
        let mut blank = p.offset == 0;
        let last = match p.crc32c {
            Some(_) if p.offset == 0 => None,
            Some(_) => {
                if csv {
                    // Whether the header is still to come ([`reader_at`]).
                    blank = is_blank(&mut (&mut file).take(p.offset)).map_err(open_err)?;
                }
                // Checked against the file by `check_read` before the run; the last byte
                // again, for a line continued since (`continues_last_record`).
                file.seek(SeekFrom::Start(p.offset - 1)).map_err(open_err)?;
                let mut last = [0u8; 1];
                file.read_exact(&mut last).map_err(open_err)?;
                Some(last[0])
            }
            None => {
                // A position that did not record a checksum: read the bytes to compute it.
                let mut at = 0;
                blank = true;
                let mut scan = BlankScan {
                    inner: &mut file,
                    blank: &mut blank,
                    at: &mut at,
                };
                let (crc, newlines, n, last) =
                    crc_of_prefix(&mut scan, p.offset).map_err(open_err)?;
                if n < p.offset {
                    return Err(Error::InputChanged(format!(
                        "input `{}` changed while the job ran: it was cut short",
                        input.display
                    )));
                }
                p = Prefix {
                    offset: p.offset,
                    line: 1 + newlines,
                    crc32c: Some(crc),
                };
                self.set_read(i, p);
                last
            }
        };
        let reader: Box<dyn BufRead + Send> =
            Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, file));
        self.reader_at(i, &input, reader, p, last, blank)
    }

    /// The reader of the compressed input `i`, past what the job read of it: a compressed
    /// stream cannot be seeked into, so the prefix is decompressed again, and checked on the
    /// way (the check before the run, [`check_read`], read it too).
    fn open_compressed(&mut self, i: usize, input: &Input) -> Result<RecordReader> {
        let open_err = |e: io::Error| Error::io("open input", &input.display, e);
        let (mut reader, file_id) = open_file(input).map_err(open_err)?;
        let changed = || {
            Error::InputChanged(format!(
                "input `{}` changed while the job ran: it was replaced, edited or cut short",
                input.display
            ))
        };
        if input.file_id != file_id {
            return Err(changed());
        }
        let mut p = self.read[i];
        let (mut blank, mut at) = (true, 0);
        let mut scan = BlankScan {
            inner: &mut reader,
            blank: &mut blank,
            at: &mut at,
        };
        let (crc, newlines, n, last) = crc_of_prefix(&mut scan, p.offset).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidData {
                changed()
            } else {
                Error::io("read input", &input.display, e)
            }
        })?;
        if n < p.offset || p.crc32c.is_some_and(|want| want != crc) {
            return Err(changed());
        }
        if p.crc32c.is_none() {
            p = Prefix {
                offset: p.offset,
                line: 1 + newlines,
                crc32c: Some(crc),
            };
            self.set_read(i, p);
        }
        self.reader_at(i, input, reader, p, last, blank)
    }

    /// The record reader of input `i` over `reader`, which stands at the end of `p`, whose
    /// last byte is `last`; of a CSV input whose `p` is `blank` (nothing, or white space
    /// only), past its header, checked against the schema. An input that continues the line
    /// of the record read last is refused ([`continues_last_record`]): it grew that way after
    /// [`check_read`] looked.
    fn reader_at(
        &mut self,
        i: usize,
        input: &Input,
        mut reader: Box<dyn BufRead + Send>,
        mut p: Prefix,
        last: Option<u8>,
        blank: bool,
    ) -> Result<RecordReader> {
        let csv = self.format == InputFormat::Csv;
        let open_err = |e: io::Error| Error::io("open input", &input.display, e);
        let next = reader.fill_buf().map_err(open_err)?.first().copied();
        if continues_last_record(&p, last, next) {
            return Err(Error::InputChanged(format!(
                "input `{}` changed while the job ran: {CONTINUED}",
                input.display
            )));
        }
        if csv && blank {
            // The header (after blank lines, which a run may have read alone while the input
            // held nothing else): check it against the schema.
            let mut header = Vec::new();
            let mut rr = RecordReader {
                reader,
                offset: p.offset,
                line: p.line,
                crc: p.crc32c.expect("computed above"),
                csv,
            };
            if rr.next_record(&mut header).map_err(open_err)?.is_some() {
                self.check_header(&header)?;
            }
            self.bytes_read += rr.offset - p.offset;
            p = rr.prefix();
            self.set_read(i, p);
            reader = rr.reader;
        } else if csv && !input.is_stdin() && input.stream.is_none() {
            // Past the header, which another job may have read (the lake's ledger hands a
            // file on where the last job stopped): read it again from the start, and check
            // it against this job's columns, or its values would land in other columns.
            let (start, _) = open_file(input).map_err(open_err)?;
            let mut header = Vec::new();
            let mut rr = RecordReader {
                reader: start,
                offset: 0,
                line: 1,
                crc: 0,
                csv,
            };
            if rr.next_record(&mut header).map_err(open_err)?.is_some() {
                self.check_header(&header)?;
            }
        }
        self.cursor.offset = p.offset;
        self.cursor.line = p.line;
        Ok(RecordReader {
            reader,
            offset: p.offset,
            line: p.line,
            crc: p.crc32c.expect("computed above"),
            csv,
        })
    }
}
