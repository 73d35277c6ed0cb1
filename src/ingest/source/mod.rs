//! What an ingest reads. The pipeline reads every source through one interface,
//! `SourceReader` (`reader.rs`: chunks of framed records, each tagged with the position after
//! it), whose implementations are:
//!
//! - the inputs filesink knows ([`InputSource`]): JSON lines or CSV files, objects on object
//!   stores and standard input, plain or compressed, read in order, each kind opened past what
//!   the job read of it in a file of its own (`file.rs`: a plain file by a seek;
//!   `decompress.rs`: a compressed file or an object, read again from its start; `stream.rs`:
//!   a stream, compared as it is skipped), their identity across runs kept by filesink
//!   (below);
//! - any other replayable source, written outside this crate: the [`Source`] trait
//!   (`custom.rs`). It hands out records with a position of its own, which every checkpoint
//!   records ([`SourcePosition::source`]) and a restarted job seeks to ([`Source::seek`]); the
//!   records are framed and decoded as those of an input are.
//!
//! A new kind of source is a new implementation of `SourceReader`, in a file of its own: the
//! pipeline, the writing loop and the checkpoints do not change.
//!
//! The rest of this page is about the inputs: records read in chunks of whole records, each
//! chunk tagged with the position of the next unread record.
//!
//! A position ([`Cursor`]) is an input index, the byte offset of the next unread record in it,
//! and that record's line number. It is stored in every checkpoint (inside
//! [`SourcePosition`]), so a resumed run seeks to exactly the record after the last complete
//! checkpoint and every record is written once.
//!
//! What identifies the data behind a position: per input, a [`Prefix`]: how many bytes the job
//! read and the CRC-32C of those bytes, computed as they are read. A resumed run first checks
//! each input against it ([`check_read`]): an input whose first bytes differ, or that is
//! shorter, changed under the job and is refused ([`Error::InputChanged`](crate::Error::InputChanged)); an input that
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
//! Reading and decoding are two stages. [`InputSource::next_raw`] frames whole records and keeps
//! the position and CRC-32C (one thread: the bytes of an input are read in order);
//! [`Decoder::decode`] turns a [`RawChunk`] into Arrow records, and any number of threads may
//! run it on successive chunks at once, as long as their results are taken back in the order
//! the chunks were read (the ingest pipeline does; see `ingest`'s module doc). Records are
//! decoded in batches: flat JSON records in one pass by `flat_json`, anything it declines and
//! CSV with arrow's JSON and CSV decoders; only when a batch fails is it decoded again record
//! by record, to name the bad line.

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};

mod check;
mod chunk;
mod compression;
mod custom;
mod decode;
mod decompress;
mod file;
pub(crate) use file::unended;
mod framing;
mod glob;
mod infer;
mod input;
mod inputs;
#[cfg(feature = "kafka")]
pub mod kafka;
mod object;
mod position;
mod ranges;
mod reader;
mod stdin;
mod stream;
#[cfg(test)]
mod tests;
pub use check::check_read;
use check::{continues_last_record, CONTINUED};
pub(crate) use chunk::PartsChange;
pub use chunk::{BadRecord, Chunk, RawChunk};
pub use compression::InputCompression;
pub use custom::{CommitHook, Next, Skipped, Source};
pub(crate) use custom::{CustomReader, CustomReading};
pub use decode::{Decoder, RowCheck};
pub use framing::csv_fields;
use framing::{too_long, too_long_record, LastLine, RecordReader, RecordTooLong};
pub(crate) use infer::infer_schema_settled;
pub use infer::{check_csv_schema, infer_schema};
pub(crate) use input::epoch_ns;
pub use input::{Input, InputFormat};
pub use inputs::{InputSource, SETTLE_DEFAULT};
#[cfg(feature = "kafka")]
pub use kafka::{Kafka, KafkaColumn, KafkaSource};
pub use position::{Cursor, PartOffsets, Prefix, SourcePosition, TimePartitionBy};
pub use ranges::{Lane, LaneNext, Ranges};
pub(crate) use reader::SourceReader;
pub use stdin::StdinRecords;

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

/// The schema as a shared reference.
pub fn schema_ref(schema: &Schema) -> SchemaRef {
    Arc::new(schema.clone())
}
