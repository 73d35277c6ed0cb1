//! The source over inputs: files, objects and streams of JSON lines or CSV, plain or
//! compressed, read in order from a position, framed into chunks of whole records.

use super::check::{continues_last_record, CONTINUED};
use super::chunk::{Chunk, RawChunk};
use super::decode::Reused;
use super::decode::{Decoder, RowCheck};
use super::decompress;
use super::file::{self, Opened};
use super::framing::csv_fields;
use super::framing::{too_long, too_long_record, LastLine, RecordReader};
use super::input::open_file;
use super::input::{Input, InputFormat};
use super::position::{Cursor, Prefix};
use super::ranges::Ranges;
use super::reader::SourceReader;
use super::stdin::StdinRecords;
use super::{CHUNK_BYTES_MAX, RECORD_TYPICAL_SLACK};
use crate::bucket::BucketAssigner;
use crate::error::{Error, Result};
use crate::ingest::flat_json::FlatJson;
use arrow::datatypes::SchemaRef;
use std::io::{self, BufRead};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Reads the inputs from a position, in chunks of decoded records.
pub struct InputSource {
    pub(super) inputs: Vec<Input>,
    pub(super) format: InputFormat,
    pub(super) schema: SchemaRef,
    pub(super) strict: bool,
    pub(super) cursor: Cursor,
    /// Per input, what is read of it.
    pub(super) read: Vec<Prefix>,
    /// Inputs whose prefix moved since the last chunk.
    pub(super) moved: Vec<usize>,
    pub(super) reader: Option<RecordReader>,
    pub(super) stdin: Option<StdinRecords>,
    /// Standard input is positioned at its prefix (skipped up to it and checked).
    pub(super) stdin_opened: bool,
    /// Standard input is not read at all (a finished job that goes on for its files).
    pub(super) stdin_done: bool,
    /// A finished job reads its stream again ([`InputSource::with_stream_reread`]): one that is
    /// empty brings nothing and is passed over, its position kept.
    pub(super) stream_reread: bool,
    /// How long a chunk of standard input waits for more records once it has one.
    pub(super) linger: Duration,
    /// Input bytes consumed so far (headers and blank lines included).
    pub(super) bytes_read: u64,
    /// Checks of the decoded records beyond their types.
    pub(super) row_check: Option<RowCheck>,
    /// The input names, shared with the chunks.
    pub(super) displays: Vec<Arc<str>>,
    /// As [`Decoder::flat`], shared by the decoders.
    pub(super) flat: Option<Arc<FlatJson>>,
    /// As [`Decoder::assigner`].
    pub(super) assigner: Option<Arc<dyn BucketAssigner>>,
    /// How long a file must have been unchanged for its last record to be taken without a
    /// line end ([`InputSource::with_settle`]).
    pub(super) settle: Duration,
}

/// How long a file must have been unchanged before a last record without a line end is taken
/// by default: one hour.
pub const SETTLE_DEFAULT: Duration = Duration::from_secs(3600);

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
            settle: SETTLE_DEFAULT,
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

    /// The line-end rule: a record is taken with its line end. A plain file's last record
    /// without one is taken only once the file was unchanged for `settle` (and holds nothing
    /// past it): until then it may still be written, and is left for a later run, which reads
    /// it whole. [`SETTLE_DEFAULT`] by default; zero takes it at once (the inputs are known to
    /// be complete). Standard input at its end, objects and compressed files are complete.
    pub fn with_settle(mut self, settle: Duration) -> InputSource {
        self.settle = settle;
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
    pub(super) fn set_read(&mut self, i: usize, p: Prefix) {
        self.read[i] = p;
        if !self.moved.contains(&i) {
            self.moved.push(i);
        }
    }

    /// Goes on with the input after the current one.
    pub(super) fn next_input(&mut self) {
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
        SourceReader::decoder(self)
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
                    last_line: LastLine::Taken,
                });
            }
            let mut chunk = self.raw_chunk(buf, spans);
            chunk.too_long.extend(set_aside);
            return Ok(Some(chunk));
        }
    }

    /// The chunk of the records `spans` of `buf`, with the inputs whose prefix moved since the
    /// last one.
    pub(super) fn raw_chunk(&mut self, buf: Vec<u8>, spans: Vec<(u64, usize, usize)>) -> RawChunk {
        let read = self.moved.drain(..).map(|i| (i, self.read[i])).collect();
        RawChunk {
            display: self.displays[self.cursor.input].clone(),
            buf,
            spans,
            cursor: self.cursor,
            read,
            too_long: Vec::new(),
            position: None,
            parts: None,
        }
    }

    /// Checks a CSV header against the schema.
    pub(super) fn check_header(&self, header: &[u8]) -> Result<()> {
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

    /// The record reader of the current input (a file or an object) past what the job read
    /// of it: a plain file by a seek, a compressed one or an object by reading it again.
    fn open_reader(&mut self) -> Result<RecordReader> {
        let i = self.cursor.input;
        let input = self.inputs[i].clone();
        let read = self.read[i];
        let opened = if input.compression.is_some() || input.is_object() {
            decompress::open_past(&input, read)?
        } else {
            file::open_past(&input, read, self.format == InputFormat::Csv, self.settle)?
        };
        if opened.read != read {
            self.set_read(i, opened.read);
        }
        let Opened {
            reader,
            read,
            last,
            blank,
            last_line,
        } = opened;
        self.reader_at(i, &input, reader, (read, last, blank), last_line)
    }

    /// The record reader of input `i` over `reader`, which stands at the end of `p`, whose
    /// last byte is `last`; of a CSV input whose `p` is `blank` (nothing, or white space
    /// only), past its header, checked against the schema. An input that continues the line
    /// of the record read last is refused ([`continues_last_record`]): it grew that way after
    /// [`check_read`] looked. A last record without a line end is taken as `last_line` says.
    pub(super) fn reader_at(
        &mut self,
        i: usize,
        input: &Input,
        mut reader: Box<dyn BufRead + Send>,
        (mut p, last, blank): (Prefix, Option<u8>, bool),
        last_line: LastLine,
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
                last_line: last_line.clone(),
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
                last_line: LastLine::Taken,
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
            last_line,
        })
    }
}

/// Files, objects and streams, in order: chunks never span two inputs, and a chunk of a stream
/// keeps [`CHUNK_BYTES_MAX`] whatever `bytes_max` says. Plain files of JSON lines may be read
/// in ranges by the decoding threads ([`InputSource::ranges`]).
impl SourceReader for InputSource {
    fn decoder(&self) -> Decoder {
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

    fn ranges(&self) -> Option<Ranges> {
        InputSource::ranges(self)
    }

    fn next_chunk(
        &mut self,
        records_max: usize,
        bytes_max: usize,
        _closed: &AtomicBool,
    ) -> Option<Result<Option<RawChunk>>> {
        Some(self.next_raw_within(records_max, bytes_max))
    }

    fn end(&self) -> (Cursor, Vec<Prefix>, u64) {
        (self.cursor, self.read.clone(), self.bytes_read)
    }
}
