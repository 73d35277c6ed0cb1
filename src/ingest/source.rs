//! The resumable source: JSON lines or CSV files (or standard input), read in chunks of
//! whole records, each chunk tagged with the position of the next unread record.
//!
//! A position ([`Cursor`]) is an input index, the byte offset of the next unread record in it,
//! and that record's line number. It is stored in every checkpoint (inside
//! [`SourcePosition`]), so a resumed run seeks to exactly the record after the last complete
//! checkpoint and every record is written once.
//!
//! What identifies the data behind a position: per input, a [`Prefix`]: how many bytes the job
//! read and the CRC-32C of those bytes, computed as they are read. A resumed run first checks
//! each input against it ([`check_read`]): an input whose first bytes differ, or that is
//! shorter, changed under the job and is refused ([`Error::InputChanged`]); an input that
//! only grew is read on from where the job stopped, so appended records are ingested once.
//! A stream (standard input, or a reader: [`Input::reader`]) cannot be checked beforehand:
//! the bytes a resumed run skips are checked as they are skipped.
//!
//! A stream is read by a thread of its own ([`StdinRecords`]), so a chunk can close on a
//! deadline as well as on its size: records that trickle in are handed on within a short
//! linger instead of waiting for a full chunk.
//!
//! An input may be compressed with gzip or zstd ([`InputCompression`]): a file by its
//! extension (`events.jsonl.gz`, `x.csv.zst`) or else by its first bytes, a stream by its first
//! bytes. Everything above is then about the decompressed bytes: offsets, lines and the
//! CRC-32C of a [`Prefix`] count decompressed bytes, so a resumed run decompresses the prefix
//! again, to check it and to skip to its end, where a plain file seeks. An input that grew by
//! another gzip member or zstd frame is read on like a plain file that grew; a stream that is
//! corrupt or cut short is an error naming the input.
//!
//! Reading and decoding are two stages. [`Source::next_raw`] frames whole records and keeps
//! the position and CRC-32C (one thread: the bytes of an input are read in order);
//! [`Decoder::decode`] turns a [`RawChunk`] into Arrow records, and any number of threads may
//! run it on successive chunks at once, as long as their results are taken back in the order
//! the chunks were read (the ingest pipeline does; see `ingest`'s module doc). Records are
//! decoded in batches: flat JSON records in one pass by `flat_json`, anything it declines and
//! CSV with arrow's JSON and CSV decoders; only when a batch fails is it decoded again record
//! by record, to name the bad line.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor as IoCursor, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{AsArray, BooleanArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

mod ranges;
pub use ranges::{Lane, LaneNext, Ranges};

use super::flat_json::FlatJson;
use super::json_types::{self, refine_inferred, StrictJson};
use crate::bucket::{BucketAssigner, BucketId};
use crate::error::{Error, Result};

/// Records read to infer a schema.
pub const INFER_RECORDS: usize = 1000;
/// Records read at most to infer the type of a JSON field that is `null` (or missing) in
/// every one of the first [`INFER_RECORDS`]: inference reads on until each such field has a
/// value, or this many records in all (on standard input, of those that have come).
pub const INFER_NULL_RECORDS: usize = 100_000;
/// The most bytes of standard input inference holds for [`INFER_NULL_RECORDS`]: on a stream
/// it looks only at the records that have come, and holds them until they are written.
const INFER_NULL_STDIN_BYTES: usize = 64 << 20;
/// A chunk closes once its records take this many bytes (it holds at least one record).
pub const CHUNK_BYTES_MAX: usize = 1 << 20;
/// Room a chunk's buffer keeps beyond its size for the record that crosses it.
const RECORD_TYPICAL_SLACK: usize = 64 << 10;
/// The longest record accepted.
pub const RECORD_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Read buffer per input.
const READ_BUFFER_BYTES: usize = 1 << 20;
/// Most records standard input's reader thread hands on at once.
const STDIN_BATCH_RECORDS: usize = 1024;
/// Batches standard input's reader thread reads ahead.
const STDIN_BATCHES_AHEAD: usize = 16;
/// The UTF-8 byte order mark some tools write at the start of a file.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";
/// The first bytes of a gzip member.
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
/// The first bytes of a zstd frame.
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// How an input is compressed. Positions in a compressed input count decompressed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputCompression {
    /// gzip (`.gz`), one member or several one after the other (as `cat a.gz b.gz` makes).
    Gzip,
    /// Zstandard (`.zst`), one frame or several.
    Zstd,
}

impl InputCompression {
    /// The compression a file name's last extension says (`.gz`, `.gzip`, `.zst`, `.zstd`),
    /// if it says one.
    pub fn from_path(path: &str) -> Option<InputCompression> {
        let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "gz" | "gzip" => Some(InputCompression::Gzip),
            "zst" | "zstd" => Some(InputCompression::Zstd),
            _ => None,
        }
    }

    /// The compression the first bytes of an input say: gzip's `1f 8b`, zstd's `28 b5 2f fd`
    /// (neither can begin a JSON or CSV text).
    pub fn from_magic(first: &[u8]) -> Option<InputCompression> {
        if first.starts_with(GZIP_MAGIC) {
            Some(InputCompression::Gzip)
        } else if first.starts_with(ZSTD_MAGIC) {
            Some(InputCompression::Zstd)
        } else {
            None
        }
    }

    /// `gzip` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            InputCompression::Gzip => "gzip",
            InputCompression::Zstd => "zstd",
        }
    }

    /// The decompressed bytes of `r`.
    fn decoder(self, r: impl Read + Send + 'static) -> io::Result<Box<dyn Read + Send>> {
        let inner: Box<dyn Read + Send> = match self {
            InputCompression::Gzip => Box::new(GzipMembers::new(BufReader::new(r))),
            InputCompression::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
        };
        Ok(Box::new(Decompressed {
            inner,
            compression: self,
        }))
    }
}

/// Every member of a gzip stream, one after the other, as `gzip -d` reads them: zero bytes
/// after the last member (the padding some writers and tape tools add) end the stream, as
/// `gzip -t` accepts them; anything else after a member must be another member.
struct GzipMembers<R: BufRead> {
    member: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: BufRead> GzipMembers<R> {
    fn new(r: R) -> Self {
        GzipMembers {
            member: Some(flate2::bufread::GzDecoder::new(r)),
        }
    }
}

impl<R: BufRead> Read for GzipMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(member) = self.member.as_mut() else {
                return Ok(0);
            };
            if buf.is_empty() {
                return Ok(0);
            }
            let n = member.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // The member ended: another member, zero padding to the end, or the end.
            let mut r = self.member.take().expect("a member").into_inner();
            let mut zeros = 0u64;
            loop {
                let avail = r.fill_buf()?;
                if avail.is_empty() {
                    return Ok(0);
                }
                let z = avail.iter().take_while(|b| **b == 0).count();
                if z == 0 {
                    break;
                }
                zeros += z as u64;
                r.consume(z);
            }
            if zeros > 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{zeros} zero bytes after a member, then more data"),
                ));
            }
            self.member = Some(flate2::bufread::GzDecoder::new(r));
        }
    }
}

/// A decoder whose own errors say that the compressed stream is corrupt or cut short
/// ([`io::ErrorKind::InvalidData`]); errors of the system pass through as they are.
struct Decompressed {
    inner: Box<dyn Read + Send>,
    compression: InputCompression,
}

impl Read for Decompressed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted || e.raw_os_error().is_some() {
                return e;
            }
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the {} stream is corrupt or cut short ({e})",
                    self.compression.name()
                ),
            )
        })
    }
}

/// `r`, decompressed if its first bytes are those of a compressed stream. Reads at most the
/// bytes that can still begin one (a plain text is told by its first byte), and hands them on.
fn sniffed(mut r: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
    let mut byte = [0u8; 1];
    let open = |h: &[u8]| {
        [GZIP_MAGIC, ZSTD_MAGIC]
            .iter()
            .any(|m| m.starts_with(h) && h.len() < m.len())
    };
    while open(&head) {
        match r.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => head.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let compression = InputCompression::from_magic(&head);
    let r: Box<dyn Read + Send> = Box::new(IoCursor::new(head).chain(r));
    match compression {
        Some(c) => c.decoder(r),
        None => Ok(r),
    }
}

/// A file's device and inode.
type FileId = (u64, u64);

/// The decompressed bytes of the file or object `input` from its start, buffered, and the
/// file's device and inode (`None` for an object).
fn open_file(input: &Input) -> io::Result<(Box<dyn BufRead + Send>, Option<FileId>)> {
    let (raw, id): (Box<dyn Read + Send>, _) = match &input.object {
        Some(object) => (object.open(0)?, None),
        None => {
            let file = File::open(input.path.as_ref().expect("a file"))?;
            let meta = file.metadata()?;
            (Box::new(file), Some((meta.dev(), meta.ino())))
        }
    };
    let reader: Box<dyn Read + Send> = match input.compression {
        None => raw,
        Some(c) => c.decoder(raw)?,
    };
    Ok((
        Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, reader)),
        id,
    ))
}

/// A check of decoded records for what would fail later, in the writer (a partition value
/// too long for a directory name): the row index and the reason of each record it rejects.
/// Rejected records are bad records of their own line, like records that do not decode.
pub type RowCheck = Arc<dyn Fn(&RecordBatch) -> Vec<(usize, String)> + Send + Sync>;

/// The format of the input files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputFormat {
    /// Newline-delimited JSON: one object per line (`.jsonl`, `.json`, `.ndjson`).
    Jsonl,
    /// Comma-separated values with a header line (`.csv`).
    Csv,
}

impl InputFormat {
    /// The format a file name's extension says, if it says one; a compression extension is
    /// looked through (`events.jsonl.gz` is JSON lines, [`InputCompression::from_path`]).
    pub fn from_path(path: &str) -> Option<InputFormat> {
        let mut path = Path::new(path);
        if InputCompression::from_path(path.to_str()?).is_some() {
            path = Path::new(path.file_stem()?);
        }
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jsonl" | "json" | "ndjson" => Some(InputFormat::Jsonl),
            "csv" => Some(InputFormat::Csv),
            _ => None,
        }
    }

    /// The format of `inputs`, from their file extensions (standard input: JSON lines);
    /// an error if an extension says nothing or the inputs mix formats.
    pub fn of_inputs(inputs: &[Input]) -> Result<InputFormat> {
        let mut format = None;
        for input in inputs {
            let f = if input.is_stdin() {
                InputFormat::Jsonl
            } else {
                InputFormat::from_path(&input.display).ok_or_else(|| {
                    Error::Config(format!(
                        "cannot tell the format of `{}` from its name; give the input format \
                         (`--input-format jsonl` or `csv`, `Ingest::input_format` in the library)",
                        input.display
                    ))
                })?
            };
            match format {
                None => format = Some(f),
                Some(g) if g != f => {
                    return Err(Error::Config(
                        "the inputs mix JSON lines and CSV; ingest them as separate jobs".into(),
                    ))
                }
                Some(_) => {}
            }
        }
        format.ok_or_else(|| Error::Config("no inputs".into()))
    }

    /// `jsonl` or `csv`.
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::Jsonl => "jsonl",
            InputFormat::Csv => "csv",
        }
    }
}

/// One input: a file, or a stream (standard input, or a reader).
#[derive(Debug, Clone)]
pub struct Input {
    /// As given (used in messages: `events.jsonl:123`).
    pub display: String,
    /// The file; `None` for a stream.
    pub path: Option<PathBuf>,
    /// What identifies the input in a checkpoint: the canonical absolute path of a file, `-`
    /// for standard input, `reader:<name>` for a reader.
    pub canonical: String,
    /// The file's size when the run started; `None` for a stream.
    pub size_bytes: Option<u64>,
    /// Device and inode of the file (for standard input, of the file it is redirected from,
    /// if it is one): two names of one file are one input.
    pub file_id: Option<(u64, u64)>,
    /// How the file is compressed: as its extension says, else as its first bytes say. `None`
    /// for a stream, whose first bytes are looked at when it is read.
    pub compression: Option<InputCompression>,
    /// The reader of [`Input::reader`]; `None` for files and standard input.
    pub(crate) stream: Option<Stream>,
    /// The object of an input on an object store ([`Input::object`]).
    pub(crate) object: Option<super::object_input::ObjectInput>,
}

/// The reader of an [`Input::reader`], taken by the first read: a stream is read once.
#[derive(Clone)]
pub(crate) struct Stream(Arc<Mutex<Option<Box<dyn Read + Send>>>>);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stream")
    }
}

impl Input {
    /// Resolves an input as a command line names it: `-` is standard input, anything else a
    /// file that must exist.
    pub fn resolve(arg: &str) -> Result<Input> {
        if arg == "-" {
            return Ok(Input::stdin());
        }
        Input::file(arg)
    }

    /// The process's standard input, read once (a job that reads it needs a name).
    pub fn stdin() -> Input {
        Input {
            display: "<stdin>".to_string(),
            path: None,
            canonical: "-".to_string(),
            size_bytes: None,
            file_id: stdin_file_id(),
            compression: None,
            stream: None,
            object: None,
        }
    }

    /// A stream read from `reader`, once, like standard input: a job that reads it needs a
    /// name, and a resumed run skips what the job already read of the stream, checking that
    /// it is the same bytes. `name` identifies the stream in the job's checkpoints: a rerun
    /// must give the same.
    pub fn reader(name: impl Into<String>, reader: impl Read + Send + 'static) -> Input {
        let name = name.into();
        Input {
            canonical: format!("reader:{name}"),
            display: name,
            path: None,
            size_bytes: None,
            file_id: None,
            compression: None,
            stream: Some(Stream(Arc::new(Mutex::new(Some(Box::new(reader)))))),
            object: None,
        }
    }

    /// What a stream reads from: the reader of [`Input::reader`] (taken: a stream is read
    /// once), or standard input.
    fn take_stream(&self) -> Result<Box<dyn Read + Send>> {
        match &self.stream {
            None => Ok(Box::new(io::stdin())),
            Some(Stream(r)) => r
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "input `{}` is a stream that was read already",
                        self.display
                    ))
                }),
        }
    }

    /// A file, which must exist; it is named in messages as given here, and identified in a
    /// checkpoint by its canonical absolute path.
    pub fn file(path: impl AsRef<Path>) -> Result<Input> {
        let path = path.as_ref();
        let arg = path.display().to_string();
        let path = path.to_path_buf();
        let canonical = path
            .canonicalize()
            .map_err(|e| Error::io("open input", &arg, e))?;
        let meta = std::fs::metadata(&canonical).map_err(|e| Error::io("open input", &arg, e))?;
        if !meta.is_file() {
            return Err(Error::InvalidInput(format!("input `{arg}` is not a file")));
        }
        let canonical_str = canonical
            .to_str()
            .ok_or_else(|| Error::InvalidInput(format!("input path `{arg}` is not UTF-8")))?
            .to_string();
        let compression = match InputCompression::from_path(&arg) {
            Some(c) => Some(c),
            None => {
                let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
                File::open(&canonical)
                    .and_then(|f| f.take(ZSTD_MAGIC.len() as u64).read_to_end(&mut head))
                    .map_err(|e| Error::io("read input", &arg, e))?;
                InputCompression::from_magic(&head)
            }
        };
        Ok(Input {
            display: arg.to_string(),
            path: Some(canonical),
            canonical: canonical_str,
            size_bytes: Some(meta.len()),
            file_id: Some((meta.dev(), meta.ino())),
            compression,
            stream: None,
            object: None,
        })
    }

    /// An object input (see [`Input::object`]).
    pub(crate) fn from_object(
        url: String,
        size_bytes: u64,
        compression: Option<InputCompression>,
        object: super::object_input::ObjectInput,
    ) -> Input {
        Input {
            display: url.clone(),
            path: None,
            canonical: url,
            size_bytes: Some(size_bytes),
            file_id: None,
            compression,
            stream: None,
            object: Some(object),
        }
    }

    /// Whether this is a stream (standard input or a reader), read once, not a file or an
    /// object.
    pub fn is_stdin(&self) -> bool {
        self.path.is_none() && self.object.is_none()
    }

    /// Whether this is an object of an object store ([`Input::object`]).
    pub fn is_object(&self) -> bool {
        self.object.is_some()
    }
}

/// Where the source stands: the next unread record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Index of the input being read (equal to the number of inputs once all are read).
    pub input: usize,
    /// Byte offset of the next unread record in that input (0: not started; for CSV the
    /// header comes next).
    pub offset: u64,
    /// Line number (1-based) of that record.
    pub line: u64,
}

impl Cursor {
    /// The start of the first input.
    pub const START: Cursor = Cursor {
        input: 0,
        offset: 0,
        line: 1,
    };
}

/// What a job has read of one input: every byte before `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefix {
    /// Bytes read: the offset of the next unread record.
    pub offset: u64,
    /// Line number (1-based) of the next unread record.
    pub line: u64,
    /// CRC-32C of the bytes before `offset`. `None` only for a position written by a build
    /// that did not record it: those bytes are then read again to compute it, unchecked.
    pub crc32c: Option<u32>,
}

impl Prefix {
    /// Nothing read yet.
    pub const START: Prefix = Prefix {
        offset: 0,
        line: 1,
        crc32c: Some(0),
    };
}

/// The source position stored in every checkpoint of an `ingest` job (the opaque JSON of
/// [`crate::Coordinator::checkpoint`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourcePosition {
    /// Version of this layout.
    pub version: u32,
    /// The job's inputs, canonical absolute paths (or `-`).
    pub inputs: Vec<String>,
    /// Their format.
    pub input_format: InputFormat,
    /// The partition columns the job writes with.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// The time directories the job writes with (absent in a position of a job without them,
    /// and in every position before version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_by_time: Option<TimePartitionBy>,
    /// The next unread record.
    #[serde(flatten)]
    pub cursor: Cursor,
    /// Per input, what the job has read of it (empty in a version 1 position, which recorded
    /// only the cursor).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<Prefix>,
    /// Records written up to this checkpoint.
    pub records: u64,
    /// Bad records set aside up to this checkpoint.
    #[serde(default)]
    pub bad_records: u64,
    /// Where in the `--bad-records` file a run resumed from this checkpoint looks for lines
    /// its job wrote after the checkpoint (finding them by their tags, place and text, it does
    /// not write them again): the file's length at this checkpoint, or less while a killed
    /// run's lines are still ahead (see `ingest::bad_records`). The file is never cut back
    /// (other jobs may append to it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_records_len: Option<u64>,
    /// The absolute path of that `--bad-records` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_records_file: Option<String>,
    /// CRC-32C of the (up to 4 KiB) bytes of that file before `bad_records_len`: a file
    /// truncated or replaced since, and grown past that length again, is told apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_records_tail: Option<u32>,
    /// The schema every record is decoded with.
    pub schema: Schema,
}

/// The time partitioning of a job ([`super::Ingest::partition_by_time`]), as its identity
/// records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimePartitionBy {
    /// The time column.
    pub column: String,
    /// The pattern of the time directories (`dt=%Y-%m-%d/hour=%H`).
    pub pattern: String,
    /// The time zone ([`crate::bucket::time_zone_name`]: `UTC`, `+HH:MM`).
    pub time_zone: String,
}

impl std::fmt::Display for TimePartitionBy {
    /// As the command line gives it: `--partition-by-time ts=… --time-zone …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--partition-by-time {}={} --time-zone {}",
            self.column, self.pattern, self.time_zone
        )
    }
}

impl SourcePosition {
    /// Current version of the layout. Version 2 added [`SourcePosition::read`], version 3
    /// [`SourcePosition::partition_by_time`]. A position without time partitioning is written
    /// as version 2 ([`SourcePosition::version_for`]), so that a build without time
    /// partitioning resumes it, and refuses one with it instead of writing another layout.
    pub const VERSION: u32 = 3;

    /// The version a new position with this time partitioning is written as.
    pub fn version_for(partition_by_time: Option<&TimePartitionBy>) -> u32 {
        match partition_by_time {
            Some(_) => 3,
            None => 2,
        }
    }

    /// As JSON for a checkpoint.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("source positions serialize")
    }

    /// Reads a checkpoint's source position.
    pub fn from_json(job: &str, v: &serde_json::Value) -> Result<SourcePosition> {
        let what = || format!("source position of job `{job}`");
        let p: SourcePosition = serde_json::from_value(v.clone()).map_err(|e| {
            Error::corrupt(
                what(),
                format!("it is not one the ingestion engine wrote ({e})"),
            )
        })?;
        if p.version == 0 || p.version > Self::VERSION {
            return Err(Error::UnsupportedVersion {
                what: what(),
                found: p.version,
                supported: Self::VERSION,
            });
        }
        Ok(p)
    }
}

/// A record that could not be decoded, as written to `--bad-records`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadRecord {
    /// `file:line`.
    pub source: String,
    /// The record's text (lossy UTF-8, without its line end).
    pub line: String,
    /// Why it was rejected.
    pub error: String,
}

/// Whole records framed by [`Source::next_raw`], not decoded yet, and the position right
/// after them: the unit decoders work on in parallel.
#[derive(Debug)]
pub struct RawChunk {
    /// The input's name, for errors and bad records.
    display: Arc<str>,
    /// The records, each ending with `\n`.
    buf: Vec<u8>,
    /// (first line, start, end) of each record in `buf`.
    spans: Vec<(u64, usize, usize)>,
    /// The next unread record after this chunk.
    cursor: Cursor,
    /// As [`Chunk::read`].
    read: Vec<(usize, Prefix)>,
    /// Records too long to read, set aside by a run that sets bad records aside: after the
    /// records of `spans`, in the input.
    too_long: Vec<BadRecord>,
}

impl RawChunk {
    /// How many records it holds (good and bad).
    pub fn records(&self) -> usize {
        self.spans.len()
    }

    /// How many bytes its records take.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }
}

/// Decoded records and the position right after them.
#[derive(Debug)]
#[non_exhaustive]
pub struct Chunk {
    /// The good records; `None` if there were none, or if they are in [`Chunk::buckets`].
    pub batch: Option<RecordBatch>,
    /// The good records split by the bucket assigner the source was given
    /// ([`Source::with_assigner`]): each bucket's records in input order. Empty without an
    /// assigner (and if the assigner refused the batch, which then stays whole in `batch`).
    pub buckets: Vec<(BucketId, RecordBatch)>,
    /// Records set aside (only when bad records are collected).
    pub bad: Vec<BadRecord>,
    /// The next unread record after this chunk.
    pub cursor: Cursor,
    /// What is read of each input whose [`Prefix`] moved since the previous chunk (this
    /// chunk's input, and inputs passed over without records).
    pub read: Vec<(usize, Prefix)>,
}

impl Chunk {
    /// How many good records the chunk holds, whole or in buckets.
    pub fn records(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::num_rows)
            + self
                .buckets
                .iter()
                .map(|(_, b)| b.num_rows())
                .sum::<usize>()
    }
}

/// Appends to `buf` the bytes of `reader` up to and including the next `\n`, at most `limit`
/// of them, and folds them into `crc`; returns how many. Like [`BufRead::read_until`], but the
/// CRC is taken from the reader's buffer before the copy: read back from `buf` just after it
/// was written, every line of `buf` that was last in another core's cache (a chunk's buffer is
/// freed by the decoder that read it, and the next one reuses its memory) stalled the loads on
/// the stores before them.
fn read_line_crc<R: BufRead>(
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
const TOO_LONG_KEPT: usize = 1024;

/// A record longer than [`RECORD_BYTES_MAX`], as [`RecordReader::next_record`] found it: the
/// error inside its `io::Error`. The reader stops inside the record; a run that sets bad
/// records aside skips its rest ([`RecordReader::skip_rest`]), any other stops.
#[derive(Debug)]
struct RecordTooLong {
    /// The record's first line.
    line: u64,
    /// Whether the record's part read so far holds an odd number of `"` (CSV: it is inside a
    /// quoted field).
    quotes_odd: bool,
    /// Whether that part is the whole record (it ended at a line end, outside quotes).
    complete: bool,
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
fn too_long(e: &io::Error) -> Option<&RecordTooLong> {
    e.get_ref()?.downcast_ref::<RecordTooLong>()
}

/// The bad record that stands for a record too long to read (`kept` its first bytes, `bytes`
/// its length): its first [`TOO_LONG_KEPT`] bytes, and why.
fn too_long_record(display: &str, line: u64, kept: &[u8], bytes: u64) -> BadRecord {
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

/// Reads whole records (a line; for CSV, lines until the quotes balance) and keeps the
/// position and the CRC-32C of everything read.
struct RecordReader<R = Box<dyn BufRead + Send>> {
    reader: R,
    offset: u64,
    line: u64,
    crc: u32,
    csv: bool,
}

impl<R: BufRead> RecordReader<R> {
    /// What is read so far.
    fn prefix(&self) -> Prefix {
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
    fn buffered_records(
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
    fn skip_rest(&mut self, tl: &RecordTooLong, read: u64) -> io::Result<u64> {
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
    fn next_record(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<u64>> {
        loop {
            let start = buf.len();
            let first_line = self.line;
            let at_start = self.offset == 0;
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

fn record_text(record: &[u8]) -> String {
    let mut rec = record;
    while let Some(r) = rec.strip_suffix(b"\n").or_else(|| rec.strip_suffix(b"\r")) {
        rec = r;
    }
    String::from_utf8_lossy(rec).into_owned()
}

/// Removes arrow's own `for line N`/`at line N` (counted from the start of the batch, not of
/// the file) from a CSV error message.
fn tidy_csv_error(msg: &str) -> String {
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
fn json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => &msg,
    };
    format!("invalid JSON: {msg}")
}

fn tidy_json_error(msg: &str) -> String {
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

/// One record read by standard input's reader thread.
#[derive(Debug, Clone, Copy)]
struct RawRecord {
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
struct RawBatch {
    buf: Vec<u8>,
    records: Vec<RawRecord>,
    /// Set on the last batch: what is read at the end of the input (blank lines included).
    eof: Option<Prefix>,
}

/// A stream (standard input or a reader), read record by record by a thread of its own and
/// handed on as soon as records arrive: waiting for more input never holds back records that
/// already came, and the records read for schema inference are kept for [`Source`].
pub struct StdinRecords {
    rx: mpsc::Receiver<io::Result<RawBatch>>,
    /// What skipping the prefix a job read found ([`StdinRecords::start_after`]), until taken.
    skipped: Option<mpsc::Receiver<io::Result<Skipped>>>,
    queue: VecDeque<RawBatch>,
    /// Records of the front batch already taken.
    taken: usize,
    /// What is read at the end of the input, once the thread reached it.
    eof: Option<Prefix>,
    /// An error the reader thread sent while [`StdinRecords::take_arrived`] took what had
    /// come: the next [`StdinRecords::receive`] returns it.
    deferred: Option<io::Error>,
}

/// What the first bytes of a stream are, against the prefix a job read of it
/// ([`StdinRecords::start_after`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skipped {
    /// The same bytes: records are read on after them; `true` if they hold nothing but
    /// white space (and a byte order mark), so no CSV header either.
    Same(Prefix, bool),
    /// No bytes at all.
    Empty,
    /// Other bytes, or fewer.
    Differs,
    /// The same bytes, the last of them not a line end, and the stream goes on with the same
    /// line ([`continues_last_record`]).
    Continued,
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
    fn start_after(
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
    fn skipped(&mut self) -> Option<io::Result<Skipped>> {
        let rx = self.skipped.take()?;
        Some(
            rx.recv()
                .unwrap_or_else(|_| Err(io::Error::other("the standard input reader stopped"))),
        )
    }

    /// Records received and not taken yet.
    fn queued(&self) -> usize {
        self.queue.iter().map(|b| b.records.len()).sum::<usize>() - self.taken
    }

    /// Whether every record of the input was taken.
    fn at_end(&self) -> bool {
        self.eof.is_some() && self.queued() == 0
    }

    /// Waits for the next batch until `until` (forever if `None`); `false` if none came by
    /// then or the input has ended.
    fn receive(&mut self, until: Option<Instant>) -> io::Result<bool> {
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
    fn fill(&mut self, n: usize, least: usize, deadline: Option<Instant>) -> io::Result<()> {
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
    fn more_arrived(&mut self, records: usize, bytes: usize, deadline: Option<Instant>) -> bool {
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
    fn peek(&self, n: usize) -> VecDeque<(u64, Vec<u8>)> {
        self.peek_after(0, n)
    }

    /// Copies of the `n` queued records after the first `after`, with their first line
    /// numbers. Records too long to read, set aside, are not among them.
    fn peek_after(&self, after: usize, n: usize) -> VecDeque<(u64, Vec<u8>)> {
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
    fn pop(&mut self) -> Option<(u64, &[u8], Prefix)> {
        self.pop_record()
            .map(|(line, rec, after, _)| (line, rec, after))
    }

    /// As [`StdinRecords::pop`], and for a record too long to read, set aside, its length
    /// (its bytes are its first ones).
    fn pop_record(&mut self) -> Option<(u64, &[u8], Prefix, Option<u64>)> {
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
fn read_stdin(
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

/// Where schema inference reads records: a file, or records standard input already sent.
enum InferReader {
    File(RecordReader),
    Queued(VecDeque<(u64, Vec<u8>)>),
}

impl InferReader {
    /// As `next_record`, but with `set_aside` a record too long to read is read past (the
    /// run sets it aside when it decodes it).
    fn next_record_within(
        &mut self,
        buf: &mut Vec<u8>,
        set_aside: bool,
    ) -> io::Result<Option<u64>> {
        loop {
            let start = buf.len();
            match self.next_record(buf) {
                Err(e) if set_aside && too_long(&e).is_some() => {
                    let InferReader::File(r) = self else {
                        return Err(e);
                    };
                    let tl = too_long(&e).expect("checked above");
                    r.skip_rest(tl, (buf.len() - start) as u64)?;
                    buf.truncate(start);
                }
                other => return other,
            }
        }
    }

    fn next_record(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<u64>> {
        match self {
            InferReader::File(r) => r.next_record(buf),
            InferReader::Queued(q) => Ok(q.pop_front().map(|(line, rec)| {
                buf.extend_from_slice(&rec);
                line
            })),
        }
    }
}

/// Infers the schema from the first [`INFER_RECORDS`] records of `input` (a JSON field `null`
/// in all of them: from its first value, up to [`INFER_NULL_RECORDS`]). For standard input
/// the records read are kept and handed to [`Source::new`]; with a `stdin_deadline`, standard
/// input is inferred from the records that came by then (at least one), so a slow input is
/// not held back until [`INFER_RECORDS`] records have come; for a field `null` so far it
/// waits for at most `stdin_records` records (those the first checkpoint waits for anyway).
///
/// A malformed record among them is an error naming its line when `strict`; otherwise it is
/// skipped here (and reported when it is decoded).
pub fn infer_schema(
    input: &Input,
    format: InputFormat,
    strict: bool,
    stdin_deadline: Option<Instant>,
    stdin_records: usize,
) -> Result<(Schema, Option<StdinRecords>)> {
    let (mut reader, mut prefix) = match input.is_stdin() {
        false => {
            let (reader, _) =
                open_file(input).map_err(|e| Error::io("open input", &input.display, e))?;
            let r = RecordReader {
                reader,
                offset: 0,
                line: 1,
                crc: 0,
                csv: format == InputFormat::Csv,
            };
            (InferReader::File(r), None)
        }
        true => {
            let csv = format == InputFormat::Csv;
            let mut stdin = StdinRecords::start(input, csv, !strict)?;
            // A CSV header alone says nothing about the types: wait for a row too.
            let least = if csv { 2 } else { 1 };
            stdin
                .fill(INFER_RECORDS + 1, least, stdin_deadline)
                .map_err(|e| Error::io("read", &input.display, e))?;
            (
                InferReader::Queued(stdin.peek(INFER_RECORDS + 1)),
                Some(stdin),
            )
        }
    };
    let read_err = |e: io::Error| Error::io("read input", &input.display, e);
    let mut buf = Vec::new();
    match format {
        InputFormat::Jsonl => {
            let mut values = Vec::new();
            let mut key_order: Vec<String> = Vec::new();
            let mut seen_keys = std::collections::HashSet::new();
            // Integer literals serde_json reads as floats (`-0`, beyond 64 bits), by column.
            let mut float_read = std::collections::HashMap::new();
            let mut read = 0;
            while values.len() < INFER_RECORDS {
                buf.clear();
                let Some(line) = reader
                    .next_record_within(&mut buf, !strict)
                    .map_err(read_err)?
                else {
                    break;
                };
                read += 1;
                match serde_json::from_slice::<serde_json::Value>(&buf) {
                    Ok(v @ serde_json::Value::Object(_)) => {
                        json_types::float_read_integers(&buf, None, &mut float_read);
                        if let Ok(keys) = serde_json::from_slice::<KeyOrder>(&buf) {
                            for k in keys.0 {
                                if seen_keys.insert(k.clone()) {
                                    key_order.push(k);
                                }
                            }
                        }
                        values.push(v);
                    }
                    Ok(_) if strict => {
                        return Err(malformed(&input.display, line, "not a JSON object"));
                    }
                    Err(e) if strict => {
                        return Err(malformed(&input.display, line, &json_error(&e)))
                    }
                    _ => {}
                }
            }
            // A field null in all of them would be typed `Null`, and every later value of it
            // would be a bad record: read on for its first value.
            let mut waiting: Vec<&String> = key_order
                .iter()
                .filter(|k| !values.iter().any(|v| v.get(k).is_some_and(typed)))
                .collect();
            while !waiting.is_empty() && read < INFER_NULL_RECORDS {
                buf.clear();
                // What cannot be read here (a record too long, in a strict run) stops the run
                // where the run reaches it, after the records before it: not here.
                let Ok(next) = reader.next_record_within(&mut buf, !strict) else {
                    break;
                };
                let Some(_) = next else {
                    // A stream: its next records, if they come before the first checkpoint
                    // is due (as many records as it waits for, or its deadline).
                    let wait = stdin_records.min(INFER_NULL_RECORDS);
                    let Some(stdin) = prefix.as_mut() else {
                        break;
                    };
                    let mut rest = stdin.peek_after(read, wait);
                    if rest.is_empty() {
                        if !stdin.more_arrived(wait, INFER_NULL_STDIN_BYTES, stdin_deadline) {
                            break;
                        }
                        rest = stdin.peek_after(read, wait);
                    }
                    reader = InferReader::Queued(rest);
                    continue;
                };
                read += 1;
                // A malformed record is the decoding's to report.
                let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_slice(&buf) else {
                    continue;
                };
                // Only the fields it gives their first values: its other fields, unlike the
                // first records', could change the types those gave.
                let mut found = serde_json::Map::new();
                waiting.retain(|k| match v.get(k).filter(|x| typed(x)) {
                    Some(x) => {
                        found.insert(k.to_string(), x.clone());
                        false
                    }
                    None => true,
                });
                if !found.is_empty() {
                    let keys: Vec<&str> = found.keys().map(String::as_str).collect();
                    json_types::float_read_integers(&buf, Some(&keys), &mut float_read);
                    values.push(serde_json::Value::Object(found));
                }
            }
            if values.is_empty() {
                // No records, no columns: an empty input is not an error.
                return Ok((Schema::empty(), prefix));
            }
            let schema = arrow::json::reader::infer_json_schema_from_iterator(
                values.iter().map(Ok::<_, ArrowError>),
            )
            .map_err(|e| cannot_infer(input, e))?;
            let schema = refine_inferred(schema, &values, &float_read)
                .map_err(|e| cannot_infer(input, e))?;
            Ok((in_key_order(schema, &key_order), prefix))
        }
        InputFormat::Csv => {
            let Some(_) = reader.next_record(&mut buf).map_err(read_err)? else {
                // No header, no records: an empty input is not an error.
                return Ok((Schema::empty(), prefix));
            };
            let columns = csv_fields(&buf).len();
            let mut records = 0;
            let mut rec = Vec::new();
            while records < INFER_RECORDS {
                rec.clear();
                let Some(line) = reader
                    .next_record_within(&mut rec, !strict)
                    .map_err(read_err)?
                else {
                    break;
                };
                let n = csv_fields(&rec).len();
                if n != columns {
                    if strict {
                        return Err(malformed(
                            &input.display,
                            line,
                            &format!("expected {columns} fields, found {n}"),
                        ));
                    }
                    continue;
                }
                buf.extend_from_slice(&rec);
                records += 1;
            }
            let (schema, _) = arrow::csv::reader::Format::default()
                .with_header(true)
                .infer_schema(IoCursor::new(&buf), None)
                .map_err(|e| cannot_infer(input, e))?;
            // With no record at all the columns have no types yet: `Null` (a job with them
            // takes the types of its first records, in a later run).
            match records {
                0 => Ok((schema, prefix)),
                _ => Ok((csv_text_where_empty(schema), prefix)),
            }
        }
    }
}

/// Whether a JSON value gives its field a type: a scalar, or an array or object holding one
/// (`null`, `[]`, `{}` and `[null]` give none).
fn typed(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Array(a) => a.iter().any(typed),
        serde_json::Value::Object(o) => o.values().any(typed),
        _ => true,
    }
}

/// `schema`, inferred from CSV records, with text (`Utf8`) for every column that was empty in
/// all of them: Arrow infers `Null` there, and its CSV decoder drops every value of a `Null`
/// column without a word, so a column empty in the first records lost all its later values.
/// Every CSV value is text; a column with none yet can hold any.
fn csv_text_where_empty(schema: Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Null => Field::new(f.name(), DataType::Utf8, true),
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The schema Arrow's CSV decoder reads with: text for the columns whose values
/// [`Decoder::csv_typed`] checks and converts itself (`Null`, `Date32`, `Timestamp`,
/// decimals).
fn csv_read_schema(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Null
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _) => Field::new(f.name(), DataType::Utf8, true),
            // Arrow's CSV decoder has no LargeUtf8: read as Utf8, cast after.
            DataType::LargeUtf8 => f.as_ref().clone().with_data_type(DataType::Utf8),
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Checks that every column of `schema` has a type the typing rule of CSV input covers (the
/// scalar types of JSON input's rule, [`json_types::check_schema`]; a CSV value is never a
/// list or a struct): the error names the first that does not. `Null` is refused too: the
/// CSV decoder drops every value of such a column.
pub fn check_csv_schema(schema: &Schema) -> std::result::Result<(), String> {
    for f in schema.fields() {
        match f.data_type() {
            DataType::Null => {
                return Err(format!(
                    "column `{}` has type Null, which holds no CSV value (every value in it \
                     would be dropped); give it a type such as Utf8",
                    f.name()
                ))
            }
            t if json_types::is_scalar(t) => {}
            other => {
                return Err(format!(
                    "column `{}` has type {other}, which CSV input does not support \
                     (supported: Boolean, Int8..Int64, UInt8..UInt64, Float32, Float64, Utf8, \
                     LargeUtf8, Date32, Timestamp, Decimal128, Decimal256)",
                    f.name()
                ))
            }
        }
    }
    // The time zone of a timestamp column, as JSON input's rule checks it.
    json_types::check_schema(schema)
}

/// The keys of a JSON object in the order they appear (a `serde_json::Value` sorts them).
struct KeyOrder(Vec<String>);

impl<'de> Deserialize<'de> for KeyOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KeyOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<KeyOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(KeyOrder(keys))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// `schema` with its top-level fields in the order their keys first appeared in the input.
fn in_key_order(schema: Schema, order: &[String]) -> Schema {
    let at: std::collections::HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.sort_by_key(|f| at.get(f.name().as_str()).copied().unwrap_or(usize::MAX));
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

fn malformed(input: &str, line: u64, msg: &str) -> Error {
    Error::InvalidInput(format!("malformed record at {input}:{line}: {msg}"))
}

fn cannot_infer(input: &Input, e: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!(
        "cannot infer a schema from `{}`: {e}",
        input.display
    ))
}

/// Reads the inputs from a position, in chunks of decoded records.
pub struct Source {
    inputs: Vec<Input>,
    format: InputFormat,
    schema: SchemaRef,
    strict: bool,
    cursor: Cursor,
    /// Per input, what is read of it.
    read: Vec<Prefix>,
    /// Inputs whose prefix moved since the last chunk.
    moved: Vec<usize>,
    reader: Option<RecordReader>,
    stdin: Option<StdinRecords>,
    /// Standard input is positioned at its prefix (skipped up to it and checked).
    stdin_opened: bool,
    /// Standard input is not read at all (a finished job that goes on for its files).
    stdin_done: bool,
    /// A finished job reads its stream again ([`Source::with_stream_reread`]): one that is
    /// empty brings nothing and is passed over, its position kept.
    stream_reread: bool,
    /// How long a chunk of standard input waits for more records once it has one.
    linger: Duration,
    /// Input bytes consumed so far (headers and blank lines included).
    bytes_read: u64,
    /// Checks of the decoded records beyond their types.
    row_check: Option<RowCheck>,
    /// The input names, shared with the chunks.
    displays: Vec<Arc<str>>,
    /// As [`Decoder::flat`], shared by the decoders.
    flat: Option<Arc<FlatJson>>,
    /// As [`Decoder::assigner`].
    assigner: Option<Arc<dyn BucketAssigner>>,
}

impl Source {
    /// A source over `inputs` that reads each input on from what `read` says was read of it
    /// (an input that grew is read on; an unchanged one yields nothing). With `strict`, a
    /// malformed record is an error; otherwise it is returned in [`Chunk::bad`].
    ///
    /// A chunk of standard input closes once it has waited `linger` for more records after
    /// its first; with `stdin_done`, standard input is not read at all.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        inputs: Vec<Input>,
        format: InputFormat,
        schema: SchemaRef,
        strict: bool,
        read: Vec<Prefix>,
        stdin: Option<StdinRecords>,
        stdin_done: bool,
        linger: Duration,
    ) -> Source {
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
        Source {
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
    pub fn with_stream_reread(mut self) -> Source {
        self.stream_reread = true;
        self
    }

    /// Also rejects the decoded records that `check` rejects.
    pub fn with_row_check(mut self, check: RowCheck) -> Source {
        self.row_check = Some(check);
        self
    }

    /// Also splits each chunk's good records into buckets with `assigner` ([`Chunk::buckets`]),
    /// on the decoding threads: the ingest's writers then take their buckets as they are,
    /// instead of the one thread that hands the chunks to them splitting every chunk. The
    /// assigner must be the sink's.
    pub fn with_assigner(mut self, assigner: Arc<dyn BucketAssigner>) -> Source {
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

    /// [`Source::next_raw`], with a chunk of a file closing at about `bytes_max` bytes (a
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

/// Turns framed records into Arrow records: typed by the schema, checked by the row check,
/// malformed ones an error (strict) or set aside. Any number of threads may decode successive
/// chunks of one source at once.
#[derive(Clone)]
pub struct Decoder {
    format: InputFormat,
    schema: SchemaRef,
    strict: bool,
    row_check: Option<RowCheck>,
    /// The Arrow decoder of the last chunk, kept for the next: a new one allocates its tape
    /// (about 2 MB for a chunk of eight fields) and its pages are faulted in and zeroed again
    /// for every chunk, 10% of a decoding thread's time. Taken out while in use; dropped
    /// after an error, whatever state that left it in.
    reused: Reused,
    /// The one-pass decoder of flat JSON records, if the schema is flat: tried first on every
    /// chunk, arrow's decoder decodes what it declines.
    flat: Option<Arc<FlatJson>>,
    /// The sink's bucket assigner, if the chunks are split here ([`Source::with_assigner`]).
    assigner: Option<Arc<dyn BucketAssigner>>,
}

/// The Arrow decoder a [`Decoder`] keeps for its next chunk, with the rows it takes at once;
/// a clone starts without one.
#[derive(Default)]
struct Reused(std::sync::Mutex<Option<(ArrowDecoder, usize)>>);

impl Clone for Reused {
    fn clone(&self) -> Self {
        Reused::default()
    }
}

/// An Arrow decoder of the input format, for [`Decoder::reused`].
enum ArrowDecoder {
    Json(arrow::json::reader::Decoder),
    Csv(Box<arrow::csv::reader::Decoder>),
}

/// Rows a reused Arrow decoder takes at once, at least: every chunk's records (a chunk has at
/// most [`crate::ingest::CHUNK_RECORDS_MAX`] until chunks grow with many open files; a larger
/// one gets a decoder of its own size, kept in turn and reused for chunks up to that size)
/// and one more, which tells that a buffer held more.
const REUSED_BATCH_ROWS: usize = crate::ingest::CHUNK_RECORDS_MAX + 1;

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("format", &self.format)
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// Decodes `raw`: its records all at once, and only if that fails record by record.
    /// With an assigner, the good records are split into buckets (after the row check, which
    /// sets aside what the assigner would refuse).
    ///
    /// A batch the assigner refuses (which the row check lets through only in cases it
    /// cannot tell, such as a batch of more than `u32::MAX` rows) stays whole: the writer's own
    /// split refuses it again, as a write error of this chunk, as without an assigner.
    pub fn decode(&self, raw: RawChunk) -> Result<Chunk> {
        let (mut batch, mut bad) = match raw.spans.is_empty() {
            true => (None, Vec::new()),
            false => self.decode_records(&raw)?,
        };
        // The framed bytes go before the split makes its copy of the records.
        let RawChunk {
            cursor,
            read,
            too_long,
            ..
        } = raw;
        bad.extend(too_long);
        let mut buckets = Vec::new();
        if let (Some(assigner), Some(b)) = (&self.assigner, &batch) {
            if let Ok(split) = assigner.assign(b, chrono::Utc::now()) {
                buckets = split;
                batch = None;
            }
        }
        Ok(Chunk {
            batch,
            buckets,
            bad,
            cursor,
            read,
        })
    }

    /// The records of `raw`: all at once, and only if that fails record by record.
    fn decode_records(&self, raw: &RawChunk) -> Result<(Option<RecordBatch>, Vec<BadRecord>)> {
        if let Some(batch) = self
            .flat
            .as_ref()
            .and_then(|f| f.decode(&raw.buf, &raw.spans))
        {
            // It declines a record with a key twice: its batch has none.
            return self.check_rows(raw, Some(batch), None, Vec::new(), true);
        }
        let n = raw.spans.len();
        if let Ok(batch) = self.decode_all(&raw.buf, n) {
            return self.check_rows(raw, Some(batch), None, Vec::new(), false);
        }
        let input = &raw.display;
        let mut batches = Vec::new();
        let mut bad = Vec::new();
        let mut decoded = Vec::new();
        for (i, &(line, start, end)) in raw.spans.iter().enumerate() {
            let rec = &raw.buf[start..end];
            match self.decode_all(rec, 1) {
                Ok(b) => {
                    batches.push(b);
                    decoded.push(i);
                }
                Err(e) => {
                    let msg = match self.format {
                        InputFormat::Jsonl => tidy_json_error(&e.to_string()),
                        InputFormat::Csv => tidy_csv_error(&e.to_string()),
                    };
                    if self.strict {
                        return Err(malformed(input, line, &msg));
                    }
                    bad.push(BadRecord {
                        source: format!("{input}:{line}"),
                        line: record_text(rec),
                        error: msg,
                    });
                }
            }
        }
        let batch = if batches.is_empty() {
            None
        } else {
            Some(arrow::compute::concat_batches(&self.schema, &batches)?)
        };
        self.check_rows(raw, batch, Some(&decoded), bad, false)
    }

    /// Applies the checks beyond decoding to `batch`, whose row `i` is the record of span
    /// `decoded[i]` (of span `i` when `decoded` is `None`): a rejected record is an error
    /// naming its line, or goes to `bad`. JSON records are checked for a key given twice
    /// unless `keys_checked` (arrow's decoder keeps the last value).
    fn check_rows(
        &self,
        raw: &RawChunk,
        batch: Option<RecordBatch>,
        decoded: Option<&[usize]>,
        mut bad: Vec<BadRecord>,
        keys_checked: bool,
    ) -> Result<(Option<RecordBatch>, Vec<BadRecord>)> {
        let Some(b) = &batch else {
            return Ok((batch, bad));
        };
        let mut rejected = Vec::new();
        if self.format == InputFormat::Csv {
            rejected.extend(non_finite_floats(b));
        }
        if self.format == InputFormat::Jsonl && !keys_checked {
            for row in 0..b.num_rows() {
                let (_, start, end) = raw.spans[decoded.map_or(row, |d| d[row])];
                if let Some(key) = json_types::repeated_key(&raw.buf[start..end]) {
                    rejected.push((
                        row,
                        format!(
                            "key `{key}` appears twice in one object; its first value would be \
                             dropped"
                        ),
                    ));
                }
            }
        }
        if let Some(check) = &self.row_check {
            rejected.extend(check(b));
        }
        if rejected.is_empty() {
            return Ok((batch, bad));
        }
        rejected.sort_by_key(|(row, _)| *row);
        let input = &raw.display;
        let mut keep = vec![true; b.num_rows()];
        for (row, msg) in rejected {
            if !keep[row] {
                continue; // one reason per record
            }
            let (line, start, end) = raw.spans[decoded.map_or(row, |d| d[row])];
            if self.strict {
                return Err(malformed(input, line, &msg));
            }
            keep[row] = false;
            bad.push(BadRecord {
                source: format!("{input}:{line}"),
                line: record_text(&raw.buf[start..end]),
                error: msg,
            });
        }
        let kept = arrow::compute::filter_record_batch(b, &BooleanArray::from(keep))?;
        Ok(((kept.num_rows() > 0).then_some(kept), bad))
    }

    /// Decodes `buf`, which must hold exactly `n` records.
    fn decode_all(&self, buf: &[u8], n: usize) -> Result<RecordBatch, ArrowError> {
        let kept = self
            .reused
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let (decoder, rows) = match kept {
            Some((d, rows)) if n < rows => (d, rows),
            _ => {
                let rows = n.max(REUSED_BATCH_ROWS - 1) + 1;
                (self.arrow_decoder(rows)?, rows)
            }
        };
        let (batch, decoder) = Self::decode_with(decoder, buf)?;
        *self.reused.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((decoder, rows));
        let batch = match batch {
            Some(b) if self.format == InputFormat::Csv => self.csv_typed(b)?,
            Some(b) => b,
            None => RecordBatch::new_empty(self.schema.clone()),
        };
        if batch.num_rows() != n {
            return Err(ArrowError::JsonError(if n == 1 {
                format!("{} records on one line", batch.num_rows())
            } else {
                format!("expected {n} records, decoded {}", batch.num_rows())
            }));
        }
        Ok(batch)
    }

    /// `batch`, decoded from CSV with text for the schema's `Null`, `Date32`, `Timestamp`, `LargeUtf8` and
    /// decimal columns ([`csv_read_schema`]), back in the schema: a value of a `Null` column
    /// is an error (a job's schema has such columns when its runs saw a header and no record
    /// yet), and dates, timestamps and decimals are parsed by the typing rule of JSON input
    /// ([`json_types::date32_from_str`], [`json_types::timestamp_from_str`],
    /// [`json_types::decimal_from_str`]). Arrow's CSV decoder would drop every value of a
    /// `Null` column, cut a timestamp to the column's unit (`10:00:00.750` in a column of
    /// seconds), a date-time to its day in a `Date32` column and `12.345` to `12.35` in a
    /// decimal column of scale 2, all without a word.
    fn csv_typed(&self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        let mut columns = batch.columns().to_vec();
        let mut changed = false;
        for (i, field) in self.schema.fields().iter().enumerate() {
            let dt = field.data_type();
            let column = match dt {
                DataType::Null => {
                    if columns[i].null_count() != batch.num_rows() {
                        return Err(ArrowError::CsvError(format!(
                            "column `{}` has type Null and holds no value, but the record has one",
                            field.name()
                        )));
                    }
                    arrow::array::new_null_array(&DataType::Null, batch.num_rows())
                }
                DataType::Date32
                | DataType::Timestamp(_, _)
                | DataType::Decimal128(_, _)
                | DataType::Decimal256(_, _) => {
                    let text = columns[i].as_string::<i32>();
                    json_types::typed_from_text(text, dt).map_err(|e| {
                        ArrowError::CsvError(format!("column `{}`: {e}", field.name()))
                    })?
                }
                DataType::LargeUtf8 => arrow::compute::cast(&columns[i], dt)?,
                _ => continue,
            };
            columns[i] = column;
            changed = true;
        }
        if !changed {
            return Ok(batch);
        }
        RecordBatch::try_new(self.schema.clone(), columns)
    }

    /// A new Arrow decoder of the input format that takes `batch_rows` rows at once.
    fn arrow_decoder(&self, batch_rows: usize) -> Result<ArrowDecoder, ArrowError> {
        Ok(match self.format {
            InputFormat::Jsonl => ArrowDecoder::Json(
                arrow::json::ReaderBuilder::new(self.schema.clone())
                    .with_strict_mode(true)
                    .with_decoder_factory(Arc::new(StrictJson))
                    .with_batch_size(batch_rows)
                    .build_decoder()?,
            ),
            InputFormat::Csv => ArrowDecoder::Csv(Box::new(
                arrow::csv::ReaderBuilder::new(Arc::new(csv_read_schema(&self.schema)))
                    .with_header(false)
                    .with_batch_size(batch_rows)
                    .build_decoder(),
            )),
        })
    }

    /// Every record of `buf` through `decoder`, which is handed back only if it succeeded
    /// (and so holds nothing any more).
    fn decode_with(
        decoder: ArrowDecoder,
        buf: &[u8],
    ) -> Result<(Option<RecordBatch>, ArrowDecoder), ArrowError> {
        Ok(match decoder {
            ArrowDecoder::Json(mut d) => {
                let mut pos = 0;
                while pos < buf.len() {
                    let k = d.decode(&buf[pos..])?;
                    if k == 0 {
                        break;
                    }
                    pos += k;
                }
                if pos < buf.len() {
                    return Err(ArrowError::JsonError(
                        "more than one JSON value on a line".into(),
                    ));
                }
                if d.has_partial_record() {
                    return Err(ArrowError::JsonError("incomplete JSON value".into()));
                }
                (d.flush()?, ArrowDecoder::Json(d))
            }
            ArrowDecoder::Csv(mut d) => {
                let mut pos = 0;
                while pos < buf.len() {
                    let k = d.decode(&buf[pos..])?;
                    if k == 0 {
                        break;
                    }
                    pos += k;
                }
                d.decode(&[])?;
                if pos < buf.len() {
                    return Err(ArrowError::CsvError("more records than lines".into()));
                }
                (d.flush()?, ArrowDecoder::Csv(d))
            }
        })
    }
}

/// Device and inode of the file standard input is redirected from, if it is a file.
fn stdin_file_id() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
    let meta = File::from(fd).metadata().ok()?;
    meta.is_file().then(|| (meta.dev(), meta.ino()))
}

/// CRC-32C and number of line ends of the first `len` bytes of `r`, how many bytes there
/// were (fewer than `len` if it ends sooner), and the last of them.
fn crc_of_prefix(r: &mut impl Read, len: u64) -> io::Result<(u32, u64, u64, Option<u8>)> {
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let (mut crc, mut newlines, mut n) = (0u32, 0u64, 0u64);
    let mut last = None;
    while n < len {
        let want = (len - n).min(buf.len() as u64) as usize;
        let got = match r.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        crc = crc32c::crc32c_append(crc, &buf[..got]);
        newlines += buf[..got].iter().filter(|&&b| b == b'\n').count() as u64;
        n += got as u64;
        last = Some(buf[got - 1]);
    }
    Ok((crc, newlines, n, last))
}

/// The error for a stream (`what`) that does not begin with the `read` bytes a job read.
fn stream_differs(what: &str, read: u64) -> Error {
    Error::InputChanged(format!(
        "{what} is not what the job read before: the job already read {read} bytes of it, and \
         the first bytes now differ or end sooner; feed it the same input again, or use \
         another --job for this one"
    ))
}

/// Reads the first `want.offset` bytes of `r` and compares them with what a job read
/// ([`Skipped`]); `r` then stands after them.
fn skip_prefix(r: &mut impl BufRead, want: Prefix) -> io::Result<Skipped> {
    let mut blank = true;
    let mut at = 0u64;
    let mut seen = BlankScan {
        inner: &mut *r,
        blank: &mut blank,
        at: &mut at,
    };
    let (crc, _, n, last) = crc_of_prefix(&mut seen, want.offset)?;
    if n == 0 {
        return Ok(Skipped::Empty);
    }
    if n < want.offset || want.crc32c.is_some_and(|c| c != crc) {
        return Ok(Skipped::Differs);
    }
    let next = loop {
        match r.fill_buf() {
            Ok(b) => break b.first().copied(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    let read = Prefix {
        offset: want.offset,
        line: want.line,
        crc32c: Some(crc),
    };
    if continues_last_record(&read, last, next) {
        return Ok(Skipped::Continued);
    }
    Ok(Skipped::Same(read, blank))
}

/// Whether `r` holds only white space (after a byte order mark at its start): reads up to
/// its first other byte, so a prefix that holds a CSV header is decided at once.
fn is_blank(r: &mut impl Read) -> io::Result<bool> {
    let (mut blank, mut at) = (true, 0);
    let mut scan = BlankScan {
        inner: r,
        blank: &mut blank,
        at: &mut at,
    };
    let mut buf = [0u8; 4096];
    while *scan.blank {
        match scan.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(blank)
}

/// A reader that notes whether what was read through it is only white space, after a byte
/// order mark at its start ([`skip_prefix`]).
struct BlankScan<'a, R> {
    inner: &'a mut R,
    blank: &'a mut bool,
    /// Bytes read so far.
    at: &'a mut u64,
}

impl<R: Read> Read for BlankScan<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for (k, b) in buf[..n].iter().enumerate() {
            let pos = *self.at + k as u64;
            let in_mark = pos < BYTE_ORDER_MARK.len() as u64 && BYTE_ORDER_MARK[pos as usize] == *b;
            if !b.is_ascii_whitespace() && !in_mark {
                *self.blank = false;
            }
        }
        *self.at += n as u64;
        Ok(n)
    }
}

/// Whether an input whose first bytes a job read, the last of them `last`, continues the
/// record the job read last, when its next byte is `next`: that record then ended the input
/// without a line end (a file still being written), the job wrote it as it was, and the rest
/// of its line has come since. Reading on would make a second record of that rest. A line
/// end first (`\n`, or `\r` of `\r\n`) only ends the record the job read. `read` is what
/// the job read: a byte order mark alone (a file its writer began with the mark) holds no
/// record, so whatever follows is a line of its own.
fn continues_last_record(read: &Prefix, last: Option<u8>, next: Option<u8>) -> bool {
    let mark_only = read.offset == BYTE_ORDER_MARK.len() as u64
        && read.crc32c == Some(crc32c::crc32c(BYTE_ORDER_MARK));
    !mark_only
        && matches!((last, next), (Some(l), Some(n)) if l != b'\n' && n != b'\n' && n != b'\r')
}

/// What [`Error::InputChanged`] says of an input that [`continues_last_record`].
const CONTINUED: &str = "its last record had no line end when the job read it, and what was \
    added since continues that line: the job wrote the record as it was then, and reading on \
    would split it in two. Nothing was written; the job cannot go on with this file. Ingest \
    the lines after the continued one as another job (a file of its own), and mend that \
    record by hand. Write each line whole before a file is ingested (or write to another \
    name and rename)";

/// Checks that every input file still begins with the bytes `job` read of it (`read`, one
/// prefix per input): at least as long, and the same CRC-32C over those bytes. Returns, per
/// input, whether it grew beyond them (always `false` for standard input, which is checked
/// as it is read again, and for a prefix without a checksum).
///
/// A compressed input is checked over its decompressed bytes: its prefix is decompressed, and
/// one byte more to tell whether it grew.
///
/// An input that changed is refused with [`Error::InputChanged`], naming it.
pub fn check_read(job: &str, inputs: &[Input], read: &[Prefix]) -> Result<Vec<bool>> {
    let mut grew = Vec::with_capacity(inputs.len());
    for (input, p) in inputs.iter().zip(read) {
        if input.is_stdin() {
            grew.push(false);
            continue;
        }
        let open_err = |e: io::Error| Error::io("read input", &input.display, e);
        let changed = |how: String| {
            Error::InputChanged(format!(
                "input `{}` changed since job `{job}` read it: {how}; nothing was written. \
                 Put the original back to read on, or give the new content a name of its \
                 own: the lake keeps what it took of this one",
                input.display
            ))
        };
        if input.compression.is_some() || input.is_object() {
            grew.push(check_compressed(input, p, &changed)?);
            continue;
        }
        let path = input.path.as_ref().expect("a file");
        let mut file = File::open(path).map_err(open_err)?;
        let len = file.metadata().map_err(open_err)?.len();
        if len < p.offset {
            return Err(changed(format!(
                "it has {len} bytes, and the job already read {}",
                p.offset
            )));
        }
        if let Some(want) = p.crc32c {
            let (crc, _, n, last) = crc_of_prefix(&mut file, p.offset).map_err(open_err)?;
            if n < p.offset {
                return Err(changed(format!(
                    "it has {n} bytes, and the job already read {}",
                    p.offset
                )));
            }
            if crc != want {
                return Err(changed(format!(
                    "its first {} bytes, which the job already read, are not the same",
                    p.offset
                )));
            }
            let mut next = [0u8; 1];
            let next = match file.read(&mut next).map_err(open_err)? {
                0 => None,
                _ => Some(next[0]),
            };
            if continues_last_record(p, last, next) {
                return Err(changed(CONTINUED.into()));
            }
        }
        grew.push(len > p.offset && p.crc32c.is_some());
    }
    Ok(grew)
}

/// [`check_read`] of one compressed input: whether it grew beyond `p`.
fn check_compressed(input: &Input, p: &Prefix, changed: &dyn Fn(String) -> Error) -> Result<bool> {
    let (mut reader, _) =
        open_file(input).map_err(|e| Error::io("open input", &input.display, e))?;
    let read_err = |e: io::Error| Error::io("read input", &input.display, e);
    let (crc, _, n, last) = crc_of_prefix(&mut reader, p.offset).map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidData {
            changed(format!(
                "the first {} bytes once decompressed, which the job already read, cannot be \
                 read again: {e}",
                p.offset
            ))
        } else {
            read_err(e)
        }
    })?;
    if n < p.offset {
        return Err(changed(format!(
            "it has {n} bytes once decompressed, and the job already read {}",
            p.offset
        )));
    }
    match p.crc32c {
        Some(want) if crc != want => Err(changed(format!(
            "its first {} bytes once decompressed, which the job already read, are not the same",
            p.offset
        ))),
        Some(_) => {
            let next = reader.fill_buf().map_err(read_err)?.first().copied();
            if continues_last_record(p, last, next) {
                return Err(changed(CONTINUED.into()));
            }
            Ok(next.is_some())
        }
        None => Ok(false),
    }
}

/// The rows of `batch` with a NaN or an infinity in a float column (CSV reads `NaN` and
/// `inf`; JSON has no such numbers): such a value is a bad record in either format, since
/// JSON lines output cannot hold it and would write `null`.
fn non_finite_floats(batch: &RecordBatch) -> Vec<(usize, String)> {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Float32Type, Float64Type};
    let mut out = Vec::new();
    for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let mut push = |row: usize, v: f64| {
            out.push((
                row,
                format!(
                    "{v} in column `{}`: NaN and infinities are not accepted",
                    f.name()
                ),
            ))
        };
        match col.data_type() {
            DataType::Float64 => {
                let a = col.as_primitive::<Float64Type>();
                if a.values().iter().any(|v| !v.is_finite()) {
                    for (row, v) in a.iter().enumerate() {
                        match v {
                            Some(v) if !v.is_finite() => push(row, v),
                            _ => {}
                        }
                    }
                }
            }
            DataType::Float32 => {
                let a = col.as_primitive::<Float32Type>();
                if a.values().iter().any(|v| !v.is_finite()) {
                    for (row, v) in a.iter().enumerate() {
                        match v {
                            Some(v) if !v.is_finite() => push(row, f64::from(v)),
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The schema as a shared reference.
pub fn schema_ref(schema: &Schema) -> SchemaRef {
    Arc::new(schema.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job read `first` (whose last line has no line end) of a file, then `added` came: a
    /// reader resuming there refuses a continued line, and reads on after a line end. Both
    /// plain and gzip, where the check sits in the reader itself (the input may grow after
    /// `check_read` looked), and in `check_read`.
    #[test]
    fn a_continued_last_line_is_refused_where_reading_resumes() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let schema = schema_ref(&Schema::new(vec![arrow::datatypes::Field::new(
            "n",
            arrow::datatypes::DataType::Int64,
            true,
        )]));
        let gzip = |text: &str| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        for (name, first, added, refused) in [
            ("cut.csv", "n\n12", "34\n56\n", true),
            ("ended.csv", "n\n12", "\n56\n", false),
            ("crlf.csv", "n\r\n12", "\r\n56\r\n", false),
            ("cut.jsonl", "{\"n\":12}", "{\"n\":34}\n", true),
            ("cut.csv.gz", "n\n12", "34\n56\n", true),
            ("ended.csv.gz", "n\n12", "\n56\n", false),
        ] {
            let path = dir.path().join(name);
            let compressed = name.ends_with(".gz");
            let bytes = |t: &str| {
                if compressed {
                    gzip(t)
                } else {
                    t.as_bytes().to_vec()
                }
            };
            std::fs::write(&path, bytes(first)).unwrap();
            let input = Input::file(&path).unwrap();
            let read = Prefix {
                offset: first.len() as u64,
                line: 1 + first.matches('\n').count() as u64,
                crc32c: Some(crc32c::crc32c(first.as_bytes())),
            };
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(&bytes(added)).unwrap(); // another gzip member
            let format = InputFormat::from_path(name).unwrap();
            let mut source = Source::new(
                vec![input.clone()],
                format,
                schema.clone(),
                true,
                vec![read],
                None,
                false,
                Duration::from_secs(1),
            );
            let got = source.next_raw(100);
            let checked = check_read("j", &[input], &[read]);
            if refused {
                let e = got.expect_err(name).to_string();
                assert!(e.contains("had no line end"), "{name}: {e}");
                let e = checked.expect_err(name).to_string();
                assert!(e.contains("had no line end"), "{name}: {e}");
            } else {
                let raw = got.unwrap().expect(name);
                assert_eq!(raw.records(), 1, "{name}");
                assert_eq!(checked.unwrap(), vec![true], "{name}");
            }
        }
    }

    /// A chunk of `in.jsonl` holding `records` (each ending with `\n`), from line 1.
    fn raw_of(records: &[Vec<u8>]) -> RawChunk {
        let mut buf = Vec::new();
        let mut spans = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let start = buf.len();
            buf.extend_from_slice(r);
            spans.push((i as u64 + 1, start, buf.len()));
        }
        RawChunk {
            display: Arc::from("in.jsonl"),
            buf,
            spans,
            cursor: Cursor::START,
            read: Vec::new(),
            too_long: Vec::new(),
        }
    }

    /// Chunks as framed: each chunk's bytes and its records' spans.
    type Framed = Vec<(Vec<u8>, Vec<(u64, usize, usize)>)>;

    /// Frames `data` the way `Source::next_raw_within` does (chunks of at most `records_max`
    /// records, closed at `bytes_max` bytes), with or without the buffered run of lines first;
    /// returns each chunk's bytes and spans, then the reader's end position.
    fn frame_all(
        data: &[u8],
        capacity: usize,
        records_max: usize,
        bytes_max: usize,
        buffered: bool,
    ) -> (Framed, Prefix, String) {
        let mut r = RecordReader {
            reader: BufReader::with_capacity(capacity, IoCursor::new(data.to_vec())),
            offset: 0,
            line: 1,
            crc: 0,
            csv: false,
        };
        let mut chunks = Vec::new();
        loop {
            let mut buf = Vec::new();
            let mut spans = Vec::new();
            let mut eof = false;
            while spans.len() < records_max && buf.len() < bytes_max {
                if buffered {
                    match r.buffered_records(&mut buf, &mut spans, records_max, bytes_max) {
                        Ok(0) => {}
                        Ok(_) => continue,
                        Err(e) => return (chunks, r.prefix(), e.to_string()),
                    }
                }
                let start = buf.len();
                match r.next_record(&mut buf) {
                    Ok(Some(line)) => spans.push((line, start, buf.len())),
                    Ok(None) => {
                        eof = true;
                        break;
                    }
                    Err(e) => return (chunks, r.prefix(), e.to_string()),
                }
            }
            if !spans.is_empty() {
                chunks.push((buf, spans));
            }
            if eof {
                return (chunks, r.prefix(), String::new());
            }
        }
    }

    /// The run of buffered lines frames what `next_record` frames record by record: the same
    /// records, spans and line numbers in the same chunks, and the same position and CRC-32C
    /// after them, whatever the buffer's size, the chunks' limits and the lines (blank,
    /// white space only, `\r\n`, a byte order mark, a last line without its line end).
    #[test]
    fn buffered_lines_frame_what_next_record_frames() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..60 {
            let mut data = Vec::new();
            if case % 5 == 0 {
                data.extend_from_slice(BYTE_ORDER_MARK);
            }
            for i in 0..(next() % 300) {
                match next() % 8 {
                    0 => data.extend_from_slice(b"\n"),
                    1 => data.extend_from_slice(b"  \t \r\n"),
                    2 => data.extend_from_slice(format!("{{\"id\":{i}}}\r\n").as_bytes()),
                    3 => data.extend_from_slice(
                        format!(
                            "{{\"id\":{i},\"pad\":\"{}\"}}\n",
                            "x".repeat((next() % 200) as usize)
                        )
                        .as_bytes(),
                    ),
                    _ => data.extend_from_slice(format!(" {{\"id\":{i}}}\n").as_bytes()),
                }
            }
            if case % 3 == 0 {
                data.extend_from_slice(b"{\"last\":true}");
            } else if case % 3 == 1 {
                data.extend_from_slice(b"   ");
            }
            for capacity in [1, 16, 100, 4096] {
                for (records_max, bytes_max) in [(1, 1 << 20), (3, 50), (1000, 1 << 20), (7, 1)] {
                    let theirs = frame_all(&data, capacity, records_max, bytes_max, false);
                    let ours = frame_all(&data, capacity, records_max, bytes_max, true);
                    assert_eq!(
                        ours, theirs,
                        "case {case}, capacity {capacity}, limits {records_max}/{bytes_max}"
                    );
                    assert_eq!(theirs.1.offset, data.len() as u64);
                    assert_eq!(theirs.1.crc32c, Some(crc32c::crc32c(&data)));
                }
            }
        }
    }

    fn reader(data: &str, csv: bool) -> RecordReader {
        RecordReader {
            reader: Box::new(IoCursor::new(data.as_bytes().to_vec())),
            offset: 0,
            line: 1,
            crc: 0,
            csv,
        }
    }

    /// `read_line_crc` reads what `read_until` reads, through any number of refills of the
    /// reader's buffer, and stops at the limit; the CRC folds exactly the bytes appended.
    #[test]
    fn read_line_crc_matches_read_until_across_refills_and_at_the_limit() {
        let data: Vec<u8> = (0..5000u32)
            .flat_map(|i| {
                let mut line = format!(
                    "{{\"id\":{i},\"pad\":\"{}\"}}",
                    "x".repeat((i % 37) as usize)
                )
                .into_bytes();
                if i % 11 != 10 {
                    line.push(b'\n');
                }
                line
            })
            .collect();
        for capacity in [1, 7, 64, 4096] {
            for limit in [1u64, 5, 40, 1 << 20] {
                let mut ours = BufReader::with_capacity(capacity, IoCursor::new(data.clone()));
                let mut theirs = IoCursor::new(data.clone());
                let mut buf = b"kept".to_vec();
                let mut crc = 0u32;
                let mut expected = b"kept".to_vec();
                loop {
                    let before = buf.len();
                    let n = read_line_crc(&mut ours, limit, &mut buf, &mut crc).unwrap();
                    let m = (&mut theirs)
                        .take(limit)
                        .read_until(b'\n', &mut expected)
                        .unwrap();
                    assert_eq!(n, m, "capacity {capacity}, limit {limit}");
                    assert_eq!(buf.len() - before, n);
                    assert!(n as u64 <= limit);
                    if n == 0 {
                        break;
                    }
                }
                assert_eq!(buf, expected, "capacity {capacity}, limit {limit}");
                assert_eq!(
                    crc,
                    crc32c::crc32c(&data),
                    "capacity {capacity}, limit {limit}"
                );
            }
        }
    }

    /// With the sink's assigner, the decoding thread splits a chunk's good records by bucket,
    /// exactly as the assigner splits them (each bucket's records in input order, the
    /// partition column gone); a record whose partition value the row check refuses is set
    /// aside first (or fails a strict run naming its line), never assigned. Both JSON
    /// decoders, and a chunk without a good record.
    #[test]
    fn a_decoder_with_the_sinks_assigner_splits_the_good_records_by_bucket() {
        use arrow::array::AsArray;
        use arrow::datatypes::{DataType, Field, Int64Type};

        use crate::bucket::HivePartitioner;

        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("key", DataType::Utf8, true),
        ]));
        let long = "x".repeat(300); // too long for a directory name
        let keys = ["a", "../b", &long, "a", "", "/", "../b", "a\\u0000b", "a"];
        let raw = |keys: &[&str]| {
            let records: Vec<Vec<u8>> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| match *k {
                    "" => format!("{{\"id\":{i},\"key\":null}}\n").into_bytes(),
                    k => format!("{{\"id\":{i},\"key\":\"{k}\"}}\n").into_bytes(),
                })
                .collect();
            raw_of(&records)
        };
        let partitioner = HivePartitioner::new(vec!["key".to_string()]).unwrap();
        let decoder = |strict: bool, flat: Option<Arc<FlatJson>>, assign: bool| Decoder {
            format: InputFormat::Jsonl,
            schema: schema.clone(),
            strict,
            row_check: Some(super::super::rules::partition_check(
                partitioner.clone(),
                None,
            )),
            reused: Reused::default(),
            flat,
            assigner: assign.then(|| Arc::new(partitioner.clone()) as Arc<dyn BucketAssigner>),
        };
        let ids_by_bucket = |buckets: &[(BucketId, RecordBatch)]| -> Vec<(String, Vec<i64>)> {
            let mut out: Vec<(String, Vec<i64>)> = buckets
                .iter()
                .map(|(id, b)| {
                    assert_eq!(b.schema().fields().len(), 1, "the partition column is gone");
                    let ids = b.column(0).as_primitive::<Int64Type>().values().to_vec();
                    (id.to_string(), ids)
                })
                .collect();
            out.sort();
            out
        };
        for flat in [FlatJson::new(&schema).map(Arc::new), None] {
            let plain = decoder(false, flat.clone(), false)
                .decode(raw(&keys))
                .unwrap();
            let expected = ids_by_bucket(
                &partitioner
                    .assign(plain.batch.as_ref().unwrap(), chrono::Utc::now())
                    .unwrap(),
            );
            let split = decoder(false, flat.clone(), true)
                .decode(raw(&keys))
                .unwrap();
            assert!(split.batch.is_none() && plain.buckets.is_empty());
            assert_eq!(split.records(), keys.len() - 1);
            assert_eq!(plain.records(), keys.len() - 1);
            assert_eq!(split.bad.len(), 1);
            assert_eq!(split.bad[0].source, "in.jsonl:3");
            let got = ids_by_bucket(&split.buckets);
            assert_eq!(got, expected);
            assert_eq!(got.len(), 5, "{got:?}");
            for (_, ids) in &got {
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "input order: {ids:?}");
            }
            let err = decoder(true, flat.clone(), true)
                .decode(raw(&keys))
                .unwrap_err();
            assert!(err.to_string().contains("in.jsonl:3"), "{err}");
            let none = decoder(false, flat.clone(), true)
                .decode(raw(&[&long]))
                .unwrap();
            assert!(none.batch.is_none() && none.buckets.is_empty() && none.records() == 0);
            assert_eq!(none.bad.len(), 1);
            // A batch the assigner refuses stays whole, for the writer to refuse as a write.
            let refusing = Decoder {
                assigner: Some(Arc::new(Refusing)),
                ..decoder(false, flat, false)
            };
            let whole = refusing.decode(raw(&keys)).unwrap();
            assert!(whole.buckets.is_empty());
            assert_eq!(
                whole.batch.as_ref().map(|b| b.num_rows()),
                Some(keys.len() - 1)
            );
            assert_eq!(whole.records(), keys.len() - 1);
        }

        #[derive(Debug)]
        struct Refusing;
        impl BucketAssigner for Refusing {
            fn assign(
                &self,
                _: &RecordBatch,
                _: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<(BucketId, RecordBatch)>> {
                Err(Error::InvalidInput("refused".into()))
            }
        }
    }

    /// One decoder, kept from chunk to chunk: a chunk that fails (a malformed record, a
    /// record cut short, a line too many) leaves nothing behind for the next one, in JSON
    /// and in CSV.
    #[test]
    fn a_reused_arrow_decoder_carries_nothing_from_a_failed_chunk() {
        use arrow::array::AsArray;
        use arrow::datatypes::{DataType, Field, Int64Type, Schema};
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        for (format, good, bad) in [
            (
                InputFormat::Jsonl,
                ["{\"a\":1}\n{\"a\":2}\n", "{\"a\":3}\n"],
                [
                    "{\"a\":7}\n{\"a\":}\n",
                    "{\"a\":8}\n{\"a\":9",
                    "{\"a\":5}{\"a\":6}\n",
                ],
            ),
            (
                InputFormat::Csv,
                ["1\n2\n", "3\n"],
                ["7\nx\n", "8\n9,9\n", "5\n6\n"],
            ),
        ] {
            let decoder = Decoder {
                format,
                schema: schema.clone(),
                strict: true,
                row_check: None,
                reused: Reused::default(),
                flat: None,
                assigner: None,
            };
            let values = |b: RecordBatch| -> Vec<i64> {
                b.column(0).as_primitive::<Int64Type>().values().to_vec()
            };
            assert_eq!(
                values(decoder.decode_all(good[0].as_bytes(), 2).unwrap()),
                [1, 2]
            );
            for (i, bad) in bad.iter().enumerate() {
                // The last one holds one record too many for what the chunk framed.
                let n = if i == 2 { 1 } else { 2 };
                assert!(
                    decoder.decode_all(bad.as_bytes(), n).is_err(),
                    "{format:?} {bad:?}"
                );
                assert_eq!(
                    values(decoder.decode_all(good[1].as_bytes(), 1).unwrap()),
                    [3]
                );
            }
            // A chunk larger than the default gets a decoder of its size, kept for the next
            // chunks up to that size (not rebuilt for each), which still tell a record too
            // many from the right count.
            let big = REUSED_BATCH_ROWS * 2;
            let records = |n: usize| -> String {
                (0..n)
                    .map(|i| match format {
                        InputFormat::Jsonl => format!("{{\"a\":{i}}}\n"),
                        InputFormat::Csv => format!("{i}\n"),
                    })
                    .collect()
            };
            let kept_rows = |d: &Decoder| d.reused.0.lock().unwrap().as_ref().map(|(_, r)| *r);
            assert_eq!(
                decoder
                    .decode_all(records(big).as_bytes(), big)
                    .unwrap()
                    .num_rows(),
                big
            );
            assert_eq!(kept_rows(&decoder), Some(big + 1));
            assert_eq!(
                decoder
                    .decode_all(records(big - 5).as_bytes(), big - 5)
                    .unwrap()
                    .num_rows(),
                big - 5
            );
            assert_eq!(kept_rows(&decoder), Some(big + 1), "reused, not rebuilt");
            assert!(decoder
                .decode_all(records(big - 4).as_bytes(), big - 5)
                .is_err());
            assert_eq!(
                values(decoder.decode_all(good[1].as_bytes(), 1).unwrap()),
                [3]
            );
        }
    }

    #[test]
    fn records_skip_blank_lines_and_keep_positions() {
        let mut r = reader("{\"a\":1}\n\n  \n{\"a\":2}", false);
        let mut buf = Vec::new();
        assert_eq!(r.next_record(&mut buf).unwrap(), Some(1));
        assert_eq!((r.offset, r.line), (8, 2));
        buf.clear();
        assert_eq!(r.next_record(&mut buf).unwrap(), Some(4));
        assert_eq!(buf, b"{\"a\":2}\n");
        assert_eq!(r.offset, 19);
        assert_eq!(r.next_record(&mut buf).unwrap(), None);
    }

    #[test]
    fn csv_records_span_lines_inside_quotes() {
        let mut r = reader("a,b\n1,\"x\ny\"\n2,z\n", true);
        let mut buf = Vec::new();
        assert_eq!(r.next_record(&mut buf).unwrap(), Some(1));
        buf.clear();
        assert_eq!(r.next_record(&mut buf).unwrap(), Some(2));
        assert_eq!(csv_fields(&buf), vec!["1", "x\ny"]);
        buf.clear();
        assert_eq!(r.next_record(&mut buf).unwrap(), Some(4));
        assert_eq!(r.line, 5);
    }

    /// A CSV input that ends inside a quoted field was cut while it was written: an error,
    /// not a record whose rest would later become records of its own.
    #[test]
    fn a_csv_input_ending_inside_quotes_is_an_error() {
        for data in ["a,b\n1,\"abc", "a,b\n1,\"abc\n", "a,b\n1,\"a\"\"b"] {
            let mut r = reader(data, true);
            let mut buf = Vec::new();
            assert_eq!(r.next_record(&mut buf).unwrap(), Some(1));
            buf.clear();
            let e = r.next_record(&mut buf).unwrap_err();
            assert!(
                e.to_string().contains("inside a quoted field"),
                "{data:?}: {e}"
            );
        }
        let mut r = reader("a,b\n1,\"a\"\"b\"", true);
        let mut buf = Vec::new();
        r.next_record(&mut buf).unwrap();
        buf.clear();
        assert_eq!(
            r.next_record(&mut buf).unwrap(),
            Some(2),
            "quotes closed at the end"
        );
    }

    /// A stream whose bytes come in `pieces`, each one read at once, then, after `pause`,
    /// its end.
    struct Paced {
        pieces: VecDeque<Vec<u8>>,
        pause: Duration,
    }

    impl Read for Paced {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some(piece) = self.pieces.front_mut() else {
                std::thread::sleep(std::mem::take(&mut self.pause));
                return Ok(0);
            };
            let n = piece.len().min(buf.len());
            buf[..n].copy_from_slice(&piece[..n]);
            piece.drain(..n);
            if piece.is_empty() {
                self.pieces.pop_front();
            }
            Ok(n)
        }
    }

    /// A JSON field `null` in the first records of a stream takes the type of its first value
    /// among the records that came before the first checkpoint's deadline, those already
    /// queued too: here they come in two pieces of 600 records (the first value at record
    /// 1100, in the second), and nothing more until after the deadline.
    #[test]
    fn a_stream_field_null_so_far_is_typed_from_the_records_that_came() {
        let lines: Vec<String> = (0..1200)
            .map(|i| match i < 1100 {
                true => format!("{{\"id\":{i},\"x\":null}}\n"),
                false => format!("{{\"id\":{i},\"x\":{i}}}\n"),
            })
            .collect();
        let pieces = lines.chunks(600).map(|c| c.concat().into_bytes()).collect();
        let pause = Duration::from_secs(3);
        let input = Input::reader("paced", Paced { pieces, pause });
        let deadline = Instant::now() + Duration::from_secs(1);
        let (schema, _) = infer_schema(
            &input,
            InputFormat::Jsonl,
            true,
            Some(deadline),
            INFER_NULL_RECORDS,
        )
        .unwrap();
        assert_eq!(
            schema.field_with_name("x").unwrap().data_type(),
            &arrow::datatypes::DataType::Int64
        );
    }

    /// The schema inferred (strictly) from a JSON-lines file holding `text`.
    fn infer_file(name: &str, text: &str) -> Schema {
        let input =
            std::env::temp_dir().join(format!("filesink-{name}-{}.jsonl", std::process::id()));
        std::fs::write(&input, text).unwrap();
        let (schema, _) = infer_schema(
            &Input::resolve(input.to_str().unwrap()).unwrap(),
            InputFormat::Jsonl,
            true,
            None,
            INFER_NULL_RECORDS,
        )
        .unwrap();
        std::fs::remove_file(&input).unwrap();
        schema
    }

    /// Decimal text lands exactly or is refused: never rounded (arrow's parser rounds a digit
    /// beyond the scale), never out of its precision, never from text that is not a number.
    #[test]
    fn decimals_are_exact_or_refused() {
        use arrow::datatypes::{i256, Decimal128Type, Decimal256Type};
        let d = DataType::Decimal128(10, 2);
        let dec = |s: &str| json_types::decimal_from_str::<Decimal128Type>(s, 10, 2, &d);
        for (s, v) in [
            ("12.34", 1234),
            ("-12.34", -1234),
            ("+12.3", 1230),
            ("12", 1200),
            ("12.3400000", 1234),
            ("0.5", 50),
            (".5", 50),
            ("5.", 500),
            ("-0", 0),
            ("0e-400", 0),
            ("1.5e1", 1500),
            ("1.5E+1", 1500),
            ("1234e-2", 1234),
            ("1234000e-5", 1234),
            ("1.2345e2", 12345),
            ("99999999.99", 9_999_999_999),
            ("-99999999.99", -9_999_999_999),
            ("00000000000012.34", 1234),
        ] {
            assert_eq!(dec(s), Ok(v), "{s}");
        }
        for (s, why) in [
            ("12.345", "more digits after the point"),
            ("0.001", "more digits after the point"),
            ("1e-3", "more digits after the point"),
            ("1.23456e2", "more digits after the point"),
            ("1e-400", "more digits after the point"),
            ("100000000", "does not fit"),
            ("1e8", "does not fit"),
            ("1e400", "does not fit"),
            ("1e99999999999999999999", "does not fit"),
            ("", "not a decimal"),
            ("-", "not a decimal"),
            (".", "not a decimal"),
            ("1e", "not a decimal"),
            ("1e+", "not a decimal"),
            (" 1", "not a decimal"),
            ("1 ", "not a decimal"),
            ("1,5", "not a decimal"),
            ("1.2.3", "not a decimal"),
            ("0x10", "not a decimal"),
            ("NaN", "not a decimal"),
            ("inf", "not a decimal"),
            ("--1", "not a decimal"),
        ] {
            let e = dec(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
        // A negative scale keeps hundreds: 1200 is 12 of them, 1250 is not whole.
        let d = DataType::Decimal128(5, -2);
        let dec = |s: &str| json_types::decimal_from_str::<Decimal128Type>(s, 5, -2, &d);
        assert_eq!(dec("1200"), Ok(12));
        assert_eq!(dec("1.2e3"), Ok(12));
        assert!(dec("1250").unwrap_err().contains("more digits"));
        // Beyond 38 digits.
        let d = DataType::Decimal256(50, 3);
        let big = format!("{}.125", "9".repeat(47));
        let v = json_types::decimal_from_str::<Decimal256Type>(&big, 50, 3, &d).unwrap();
        assert_eq!(v.to_string(), format!("{}125", "9".repeat(47)));
        assert_eq!(
            json_types::decimal_from_str::<Decimal256Type>("-1.5", 50, 3, &d),
            Ok(i256::from_i128(-1500))
        );
    }

    /// The fast path of `date32_from_str` gives what chrono's parser gives, on every spelling.
    #[test]
    fn dates_parse_as_chrono_parses_them() {
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for s in [
            "2026-11-30",
            "0001-01-01",
            "9999-12-31",
            "2024-02-29",
            "2023-02-29",
            "2026-13-01",
            "2026-00-10",
            "2026-1-05",
            "2026-01-5",
            "+2026-11-30",
            "2026-11-30T10:00:00",
            "2026/11/30",
            "20x6-11-30",
            "2026-11-3x",
            "1969-12-31",
            "-001-01-01",
        ] {
            let chrono = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .filter(|_| s.len() >= 10)
                .map(|d| (d - epoch).num_days() as i32);
            assert_eq!(json_types::date32_from_str(s).ok(), chrono, "{s}");
        }
    }

    /// Integer literals serde_json reads as floats do not make a column `Float64`: `-0` is
    /// an integer (beside integers of `Int64` or beyond it), and integers beyond 64 bits are
    /// an error rather than floats that round them; at the top level, in structs, in lists
    /// and in a field typed by its first value after the first records. A fraction or an
    /// exponent keeps `Float64`.
    #[test]
    fn integer_literals_read_as_floats_keep_an_integer_column() {
        use arrow::datatypes::DataType;
        let of =
            |schema: &Schema, name: &str| schema.field_with_name(name).unwrap().data_type().clone();
        let s = infer_file(
            "negzero",
            "{\"a\":-0,\"b\":-0,\"c\":-0.0,\"d\":1e3,\"s\":{\"x\":-0},\"l\":[-0,3],\"late\":null}\n\
             {\"a\":5,\"b\":18446744073709551615,\"c\":5,\"d\":2,\"s\":{\"x\":-7},\"l\":[],\"late\":null}\n",
        );
        assert_eq!(of(&s, "a"), DataType::Int64);
        assert_eq!(of(&s, "b"), DataType::UInt64);
        assert_eq!(of(&s, "c"), DataType::Float64);
        assert_eq!(of(&s, "d"), DataType::Float64);
        let DataType::Struct(fields) = of(&s, "s") else {
            panic!()
        };
        assert_eq!(fields[0].data_type(), &DataType::Int64);
        let DataType::List(item) = of(&s, "l") else {
            panic!()
        };
        assert_eq!(item.data_type(), &DataType::Int64);

        let mut text = String::new();
        for i in 0..1000 {
            text.push_str(&format!("{{\"i\":{i},\"late\":null}}\n"));
        }
        text.push_str("{\"i\":1000,\"late\":-0}\n{\"i\":-0.5,\"late\":7}\n");
        let s = infer_file("latezero", &text);
        assert_eq!(of(&s, "late"), DataType::Int64);
        assert_eq!(of(&s, "i"), DataType::Int64);

        for (name, text) in [
            (
                "wide",
                "{\"id\":123456789012345678901234567890}\n{\"id\":1}\n",
            ),
            ("below", "{\"id\":-9223372036854775809}\n"),
            ("nested", "{\"s\":{\"id\":[99999999999999999999]}}\n"),
        ] {
            let input =
                std::env::temp_dir().join(format!("filesink-{name}-{}.jsonl", std::process::id()));
            std::fs::write(&input, text).unwrap();
            let err = infer_schema(
                &Input::resolve(input.to_str().unwrap()).unwrap(),
                InputFormat::Jsonl,
                true,
                None,
                INFER_NULL_RECORDS,
            )
            .err()
            .expect("refused")
            .to_string();
            std::fs::remove_file(&input).unwrap();
            assert!(err.contains("beyond the 64-bit range"), "{name}: {err}");
        }
        let s = infer_file(
            "widefraction",
            "{\"v\":123456789012345678901234567890}\n{\"v\":0.5}\n",
        );
        assert_eq!(of(&s, "v"), DataType::Float64);
        // And `-0` is read into such a column as 0, also an unsigned one.
        assert_eq!(json_types::parse_int::<u64>("-0", &DataType::UInt64), Ok(0));
        assert_eq!(json_types::parse_int::<i64>("-0", &DataType::Int64), Ok(0));
    }

    /// A field `null` in the first records takes its type from its first value, and only
    /// it: the rest of that record (`code` as a string, where the first records had integers)
    /// changes no other column's type; `[]`, `{}` and `[null]` give no type, the first value
    /// that holds one does.
    #[test]
    fn a_field_null_so_far_is_typed_by_its_first_value_alone() {
        use arrow::datatypes::DataType;
        let mut text = String::new();
        for i in 0..1000 {
            text.push_str(&format!(
                "{{\"code\":{i},\"error\":null,\"tags\":[],\"extra\":{{}}}}\n"
            ));
        }
        text.push_str("{\"code\":\"E_TIMEOUT\",\"error\":{\"msg\":\"slow\"},\"tags\":[null]}\n");
        text.push_str("{\"code\":1,\"tags\":[\"a\"],\"extra\":{\"k\":{}}}\n");
        text.push_str("{\"code\":2,\"extra\":{\"k\":1.5}}\n");
        let schema = infer_file("nulls", &text);
        let dt = |name: &str| schema.field_with_name(name).unwrap().data_type().clone();
        assert_eq!(dt("code"), DataType::Int64);
        assert!(matches!(dt("error"), DataType::Struct(f) if f[0].data_type() == &DataType::Utf8));
        assert!(matches!(dt("tags"), DataType::List(f) if f.data_type() == &DataType::Utf8));
        assert!(
            matches!(dt("extra"), DataType::Struct(f) if f.len() == 1
                && matches!(f[0].data_type(), DataType::Float64)),
            "{:?}",
            dt("extra")
        );
    }

    #[test]
    fn inferred_json_fields_keep_the_input_order() {
        let schema = infer_file("order", "{\"z\":1,\"a\":\"x\"}\n{\"m\":1.5,\"z\":2}\n");
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["z", "a", "m"]);
    }

    #[test]
    fn csv_fields_unquote() {
        assert_eq!(
            csv_fields(b"a,\"b,c\",\"d\"\"e\"\r\n"),
            vec!["a", "b,c", "d\"e"]
        );
        assert_eq!(csv_fields(b"\n"), vec![""]);
    }

    #[test]
    fn csv_errors_lose_arrow_line_numbers() {
        assert_eq!(
            tidy_csv_error("Csv error: incorrect number of fields for line 1, expected 4 got 3"),
            "Csv error: incorrect number of fields, expected 4 got 3"
        );
        assert_eq!(
            tidy_csv_error("Error while parsing value 'x' as type 'Int64' for column 0 at line 0. Row data: '[x]'"),
            "Error while parsing value 'x' as type 'Int64' for column 0. Row data: '[x]'"
        );
    }

    #[test]
    fn source_positions_round_trip_through_json() {
        let p = SourcePosition {
            version: SourcePosition::VERSION,
            inputs: vec!["/data/events.jsonl".into()],
            input_format: InputFormat::Jsonl,
            partition_by: vec!["day".into()],
            partition_by_time: Some(TimePartitionBy {
                column: "ts".into(),
                pattern: "dt=%Y-%m-%d/hour=%H".into(),
                time_zone: "+01:00".into(),
            }),
            cursor: Cursor {
                input: 0,
                offset: 123,
                line: 4,
            },
            read: vec![Prefix {
                offset: 123,
                line: 4,
                crc32c: Some(7),
            }],
            records: 3,
            bad_records: 0,
            bad_records_len: None,
            bad_records_file: None,
            bad_records_tail: None,
            schema: Schema::new(vec![arrow::datatypes::Field::new(
                "id",
                arrow::datatypes::DataType::Int64,
                true,
            )]),
        };
        let v = p.to_json();
        assert_eq!(v["offset"], 123);
        assert_eq!(SourcePosition::from_json("j", &v).unwrap(), p);

        // A position without time partitioning has no such field, and one written before it
        // existed reads as "no time partitioning".
        let mut old = p.clone();
        old.partition_by_time = None;
        old.version = SourcePosition::version_for(None);
        let mut v = old.to_json();
        assert!(v.get("partition_by_time").is_none(), "{v}");
        assert_eq!(v["version"], 2);
        v.as_object_mut().unwrap().remove("partition_by_time");
        assert_eq!(SourcePosition::from_json("j", &v).unwrap(), old);
    }

    /// A CSV column of type `Null` (a job whose runs saw only a header) holds no value: a
    /// record with one is refused, not decoded with the value dropped (Arrow's CSV decoder
    /// drops every value of a `Null` column); empty values decode.
    #[test]
    fn a_csv_value_in_a_null_column_is_refused_not_dropped() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("msg", DataType::Null, true),
        ]));
        let decoder = Decoder {
            format: InputFormat::Csv,
            schema: schema.clone(),
            strict: true,
            row_check: None,
            reused: Reused::default(),
            flat: None,
            assigner: None,
        };
        let b = decoder.decode_all(b"1,\n2,\n", 2).unwrap();
        assert_eq!(b.schema(), schema);
        assert_eq!(b.column(1).len(), 2);
        let e = decoder.decode_all(b"3,\n4,hello\n", 2).unwrap_err();
        assert!(e.to_string().contains("column `msg` has type Null"), "{e}");
    }

    /// The one-pass decoder of flat records gives what arrow's decoder gives, on every kind of
    /// value, good and bad, of every column type it serves: a chunk decodes to the same
    /// records, the same bad records and the same error with it as without it. And it answers
    /// itself (does not hand the chunk on) for the records it is there for.
    #[test]
    fn the_flat_json_decoder_agrees_with_arrows() {
        use arrow::datatypes::{DataType, Field, TimeUnit};
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("i8", DataType::Int8, true),
            Field::new("i64", DataType::Int64, true),
            Field::new("u64", DataType::UInt64, true),
            Field::new("f32", DataType::Float32, true),
            Field::new("f64", DataType::Float64, true),
            Field::new("b", DataType::Boolean, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("ls", DataType::LargeUtf8, true),
            Field::new("d", DataType::Date32, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new(
                "tsz",
                DataType::Timestamp(TimeUnit::Second, Some("+02:00".into())),
                true,
            ),
            Field::new("dec", DataType::Decimal128(10, 2), true),
            Field::new("dec256", DataType::Decimal256(40, 3), true),
            Field::new("nn", DataType::Int64, false),
        ]));
        let flat = FlatJson::new(&schema).map(Arc::new);
        assert!(flat.is_some());
        // Values the fast decoder takes (first of each pair) and values it must leave to
        // arrow's decoder or decode the same (second), per column.
        let ints = [
            "0",
            "7",
            "-0",
            "-128",
            "127",
            "128",
            "-129",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "1.0",
            "1e3",
            "1E+2",
            "01",
            "-",
            "1.",
            ".5",
            "+1",
            "\"5\"",
            "true",
            "null",
            "[1]",
            "{}",
            "0x10",
            "1_0",
            "NaN",
        ];
        let floats = [
            "1.5",
            "-0.0",
            "0",
            "1e308",
            "1e309",
            "-1e309",
            "3.4e38",
            "3.5e38",
            "1E-5",
            "2.5e-400",
            "123456789012345678901234567890",
            "0.1000000000000000055511151231257827",
            "1.",
            ".5",
            "+1",
            "-01",
            "1e",
            "1e+",
            "\"1.5\"",
            "null",
            "Infinity",
            "false",
        ];
        let bools = [
            "true", "false", "null", "True", "1", "\"true\"", "tru", "nul",
        ];
        let strings = [
            "\"abc\"",
            "\"\"",
            "\"é日本😀\"",
            "\"a\\\"b\\\\c\\/d\"",
            "\"\\b\\f\\n\\r\\t\"",
            "\"\\u00e9\\u65E5\"",
            "\"\\ud83d\\ude00\"",
            "\"\\u0000\"",
            "\"\\ud83d\"",
            "\"\\ud83dx\"",
            "\"\\udc00\"",
            "\"\\ud83d\\u0041\"",
            "\"\\x\"",
            "\"\\u00g0\"",
            "\"\\u00\"",
            "\"tab\there\"",
            "\"bell\u{7}\"",
            "\"unterminated",
            "5",
            "null",
            "true",
            "[\"a\"]",
            "{\"a\":1}",
            "\"\\\\\"",
            "\"x\\\"",
            // Longer than a word: escapes, stops and ends at every place in one.
            "\"a longer string, with é and 日本 in it and more\"",
            "\"0123456\\n89abcdef0123456789\"",
            "\"01234567\\\"9abcdef\\u00e9\"",
            "\"0123456789abcdef\"",
            "\"012345678\tbcdef\"",
            "\"0123456789ab\u{7f}def\"",
            "\"0123456789abcdefghij",
            "\"0123456789abcdef\\ud83d\\ude00\"",
        ];
        let dates = [
            "\"2026-11-30\"",
            "\"1970-01-01\"",
            "\"1969-12-31\"",
            "\"2026-02-30\"",
            "\"2026-11-30T01:00:00\"",
            "\"20261130\"",
            "\"2026-1-3\"",
            "19000",
            "null",
        ];
        let stamps = [
            "\"2026-11-30T01:02:03Z\"",
            "\"2026-11-30 01:02:03+05:00\"",
            "\"2026-11-30T01:02:03.123Z\"",
            "\"2026-11-30T01:02:03.1234Z\"",
            "\"2026-11-30T01:02:03\"",
            "\"2026-11-30\"",
            "1700000000000",
            "-1",
            "1.5",
            "1e3",
            "\"garbage\"",
            "null",
            "\"9999999-01-01T00:00:00Z\"",
            "true",
        ];
        let decimals = [
            "12.34",
            "\"12.34\"",
            "-0.5",
            "0",
            "-0",
            "1e2",
            "\"1.5E+1\"",
            "12.300",
            "12.345",
            "\"12.345\"",
            "99999999.99",
            "100000000",
            "1e-400",
            "0e-400",
            "1e99999999999999999999",
            "\"1,5\"",
            "\" 1\"",
            "\"\"",
            "\"\\u0031\"",
            "01",
            "1.",
            ".5",
            "+1",
            "true",
            "null",
            "[1]",
        ];
        let columns: [(&str, &[&str]); 14] = [
            ("i8", &ints),
            ("i64", &ints),
            ("u64", &ints),
            ("f32", &floats),
            ("f64", &floats),
            ("b", &bools),
            ("s", &strings),
            ("ls", &strings),
            ("d", &dates),
            ("ts", &stamps),
            ("tsz", &stamps),
            ("dec", &decimals),
            ("dec256", &decimals),
            ("nn", &ints),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let spaces = ["", " ", "\t", "  ", "\r"];
        // One record: mostly the first few values of each column, in schema order.
        let record =
            |clean: bool, mostly_clean: bool, rand: &mut dyn FnMut(usize) -> usize| -> Vec<u8> {
                let mut order: Vec<usize> = (0..columns.len()).collect();
                if !clean && rand(4) == 0 {
                    order.swap(rand(columns.len()), rand(columns.len()));
                }
                let mut fields = Vec::new();
                for c in order {
                    if columns[c].0 != "nn" && rand(5) == 0 {
                        continue; // a missing field
                    }
                    let (name, values) = columns[c];
                    // Not clean: a chunk of mostly good values, or a chunk of any values.
                    let any = !clean && (!mostly_clean || rand(10) == 0);
                    let v = if any {
                        values[rand(values.len())]
                    } else {
                        values[rand(2)]
                    };
                    fields.push(format!(
                        "\"{name}\"{}:{}{v}",
                        spaces[rand(2)],
                        spaces[rand(2)]
                    ));
                }
                if !clean && !mostly_clean {
                    match rand(12) {
                        0 => fields.push("\"extra\":1".into()),
                        1 => fields.push(format!("\"i64\":{}", rand(9))),
                        2 => fields.push("\"i\\u0036\\u0034\":3".into()),
                        _ => {}
                    }
                }
                let ws = spaces[rand(spaces.len())];
                let mut text = format!("{ws}{{{ws}{}{ws}}}{ws}", fields.join(&format!("{ws},")));
                if !clean && !mostly_clean {
                    match rand(20) {
                        0 => text.push_str("{}"),
                        1 => text.push_str(" x"),
                        2 => text = format!("[{text}]"),
                        3 => {
                            let cut = (0..=text.len() / 2)
                                .rev()
                                .find(|&i| text.is_char_boundary(i));
                            text.truncate(cut.unwrap_or(0))
                        }
                        4 => text = "null".into(),
                        _ => {}
                    }
                }
                let mut bytes = text.into_bytes();
                if !clean && !mostly_clean && rand(40) == 0 {
                    let at = rand(bytes.len());
                    bytes[at] = 0xff; // not UTF-8
                }
                bytes.push(b'\n');
                bytes
            };
        let decoder = |strict: bool, flat: Option<Arc<FlatJson>>| Decoder {
            format: InputFormat::Jsonl,
            schema: schema.clone(),
            strict,
            row_check: None,
            reused: Reused::default(),
            flat,
            assigner: None,
        };
        let outcome = |d: &Decoder, raw: &RawChunk| match d.decode_records(raw) {
            Ok((batch, bad)) => Ok((batch, bad)),
            Err(e) => Err(e.to_string()),
        };
        let (mut answered, mut clean_chunks) = (0, 0);
        for round in 0..3_000 {
            let clean = round % 3 == 0;
            let size = 1 + rand(if round % 2 == 0 { 1 } else { 8 });
            let records: Vec<Vec<u8>> = (0..size)
                .map(|_| record(clean, round % 3 == 1, &mut rand))
                .collect();
            let raw = raw_of(&records);
            for strict in [true, false] {
                let fast = outcome(&decoder(strict, flat.clone()), &raw);
                let arrow = outcome(&decoder(strict, None), &raw);
                assert_eq!(
                    fast,
                    arrow,
                    "strict {strict}, records:\n{}",
                    String::from_utf8_lossy(&raw.buf)
                );
            }
            let took = flat
                .as_ref()
                .unwrap()
                .decode(&raw.buf, &raw.spans)
                .is_some();
            answered += usize::from(took);
            if clean {
                clean_chunks += 1;
                assert!(took, "declined:\n{}", String::from_utf8_lossy(&raw.buf));
            }
        }
        // Some of the generated chunks that are not clean are good too.
        assert!(
            answered > clean_chunks + 100,
            "{answered} of {clean_chunks}"
        );
    }
}
