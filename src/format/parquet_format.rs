//! Parquet through arrow's `ArrowWriter`, writing into memory that the sink drains into the
//! part file after every call.
//!
//! Small batches are gathered first, as Arrow, and handed to the writer together once they
//! reach [`ENCODE_ROWS`] rows or [`ENCODE_BYTES`] bytes (or the file flushes or ends). With
//! many partitions every batch brings each bucket a few rows: encoding them one call at a
//! time costs a column-writer pass per call, and an open row group holds column encoders
//! (pages, dictionaries: about 150 KiB per file at eight columns) for every file that has
//! only a few hundred rows. Gathered, a file that stays small never opens a row group until
//! it is finished or flushed.

use arrow::array::UInt32Array;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;

use super::Encoder;
use crate::Result;

/// Gathered rows are encoded once there are this many.
pub(crate) const ENCODE_ROWS: usize = 8192;
/// Gathered rows are encoded once they take this many bytes.
pub(crate) const ENCODE_BYTES: usize = 1 << 20;
/// The largest output buffer an encoder keeps between calls.
const KEPT_CAPACITY_MAX: usize = 64 << 10;

pub(crate) struct ParquetEncoder {
    writer: ArrowWriter<Vec<u8>>,
    schema: SchemaRef,
    /// Batches not handed to the writer yet, each in buffers of its own.
    gathered: Vec<RecordBatch>,
    gathered_rows: usize,
    gathered_bytes: usize,
}

impl std::fmt::Debug for ParquetEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field("in_progress_size", &self.writer.in_progress_size())
            .field("gathered_rows", &self.gathered_rows)
            .finish()
    }
}

impl ParquetEncoder {
    pub(crate) fn new(schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        Ok(ParquetEncoder {
            writer: ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?,
            schema,
            gathered: Vec::new(),
            gathered_rows: 0,
            gathered_bytes: 0,
        })
    }

    /// Hands the gathered batches to the writer, as one.
    fn encode_gathered(&mut self) -> Result<()> {
        match self.gathered.len() {
            0 => return Ok(()),
            1 => self.writer.write(&self.gathered[0])?,
            _ => {
                let batch = arrow::compute::concat_batches(&self.schema, &self.gathered)?;
                self.writer.write(&batch)?;
            }
        }
        self.gathered.clear();
        self.gathered_rows = 0;
        self.gathered_bytes = 0;
        Ok(())
    }

    /// The writer tracks offsets by count, not by the buffer, so taking the bytes is safe.
    ///
    /// The bytes are copied, not swapped in: a swap would leave the writer holding `out`'s
    /// old allocation (the sink's scratch buffer, sized by the largest write so far), and a
    /// thousand open files would each keep one. A buffer that grew past
    /// [`KEPT_CAPACITY_MAX`] for a row group is given back.
    fn drain(&mut self, out: &mut Vec<u8>) {
        let inner = self.writer.inner_mut();
        out.extend_from_slice(inner);
        if inner.capacity() > KEPT_CAPACITY_MAX {
            *inner = Vec::new();
        } else {
            inner.clear();
        }
    }
}

impl Encoder for ParquetEncoder {
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        if self.gathered.is_empty() && batch.num_rows() >= ENCODE_ROWS {
            self.writer.write(batch)?;
            self.drain(out);
            return Ok(());
        }
        // A copy in buffers of its own: the batch is usually a slice of a larger one (the
        // bucket's rows of a chunk), which it would keep alive, and whose size it would report.
        let rows = batch.num_rows();
        let own = arrow::compute::take_record_batch(
            batch,
            &UInt32Array::from_iter_values(0..rows as u32),
        )?;
        self.gathered_rows += rows;
        self.gathered_bytes += own.get_array_memory_size();
        self.gathered.push(own);
        if self.gathered_rows >= ENCODE_ROWS || self.gathered_bytes >= ENCODE_BYTES {
            self.encode_gathered()?;
            self.drain(out);
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> Result<()> {
        self.encode_gathered()?;
        self.writer.flush()?;
        self.drain(out);
        Ok(())
    }

    fn finish(mut self: Box<Self>, out: &mut Vec<u8>) -> Result<Option<ParquetMetaData>> {
        self.encode_gathered()?;
        let footer = self.writer.finish()?;
        self.drain(out);
        Ok(Some(footer))
    }

    /// The writer's real memory (`memory_size`), not its estimate of the encoded size
    /// (`in_progress_size`): at 1,000 open files the two differed by ten times; and the
    /// gathered batches.
    fn buffered_bytes(&self) -> usize {
        self.writer.memory_size() + self.gathered_bytes
    }
}
