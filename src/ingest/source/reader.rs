//! The one interface the pipeline reads every source through: [`SourceReader`].
//!
//! A source is read by one thread of the pipeline (see `ingest::pipeline`), which asks it for
//! chunks of framed records and hands them to the decoding threads; a source that can split
//! its bytes into ranges lets the decoding threads read them themselves. The implementations:
//!
//! | source | reader | file |
//! |---|---|---|
//! | files, plain or compressed, and objects of object stores, in order | [`InputSource`] | `inputs.rs`, opening each kind past what the job read in `file.rs` (a seek) and `decompress.rs` (read again from the start) |
//! | standard input and other streams | [`InputSource`], through a reader thread of its own ([`StdinRecords`]) | `stream.rs`, `stdin.rs` |
//! | a [`Source`] written outside the crate | `CustomReader` | `custom.rs` |
//!
//! A new kind of source is a new implementation: the pipeline, the writing loop and the
//! checkpoints do not change.
//!
//! [`InputSource`]: super::InputSource
//! [`StdinRecords`]: super::StdinRecords
//! [`Source`]: super::Source

use std::sync::atomic::AtomicBool;

use super::chunk::RawChunk;
use super::decode::Decoder;
use super::position::{Cursor, Prefix};
use super::ranges::Ranges;
use crate::error::Result;

/// A source as the pipeline reads it: chunks of whole records, each tagged with the position
/// after it, in the order they were read.
pub(crate) trait SourceReader: Send {
    /// The decoder of its records (cheap to clone: one per decoding thread).
    fn decoder(&self) -> Decoder;

    /// Byte ranges the decoding threads may read themselves, in place of this reader's
    /// chunks ([`Ranges`]); `None` (the default) for a source that is read in order only.
    fn ranges(&self) -> Option<Ranges> {
        None
    }

    /// The next chunk of at most `records_max` records (at least one) and of about
    /// `bytes_max` bytes; `Some(Ok(None))` once the source has ended. A source that waits for
    /// records gives up once `closed` is set (the pipeline takes no more chunks): `None`.
    fn next_chunk(
        &mut self,
        records_max: usize,
        bytes_max: usize,
        closed: &AtomicBool,
    ) -> Option<Result<Option<RawChunk>>>;

    /// Where the source stands after every chunk it gave: its position, what is read of each
    /// input (empty for a source without inputs), and the bytes it read.
    fn end(&self) -> (Cursor, Vec<Prefix>, u64);
}
