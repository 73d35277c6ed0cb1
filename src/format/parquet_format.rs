//! Parquet through arrow's column writers ([`super::parquet_columns`], columns encoded in
//! parallel), writing into memory that the sink drains into the part file after every call.
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
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;

use super::parquet_columns::ColumnsWriter;
use super::Encoder;
use crate::Result;

/// Gathered rows are encoded once there are this many.
pub(crate) const ENCODE_ROWS: usize = 8192;
/// Gathered rows are encoded once they take this many bytes.
pub(crate) const ENCODE_BYTES: usize = 1 << 20;
/// Gathered batches are concatenated into one once there are this many.
const GATHERED_BATCHES_MAX: usize = 32;

pub(crate) struct ParquetEncoder {
    /// Made when the first rows are encoded: a file that only gathers until it is finished
    /// holds no writer (its buffers and metadata) until then.
    writer: Option<ColumnsWriter>,
    props: WriterProperties,
    schema: SchemaRef,
    /// Batches not handed to the writer yet, each in buffers of its own.
    gathered: Vec<RecordBatch>,
    gathered_rows: usize,
    gathered_bytes: usize,
}

impl std::fmt::Debug for ParquetEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field(
                "memory_size",
                &self.writer.as_ref().map(|w| w.memory_size()),
            )
            .field("gathered_rows", &self.gathered_rows)
            .finish()
    }
}

impl ParquetEncoder {
    pub(crate) fn new(schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        // A schema Parquet cannot take is refused now, not when the first rows are encoded.
        parquet::arrow::ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)?;
        Ok(ParquetEncoder {
            writer: None,
            props,
            schema,
            gathered: Vec::new(),
            gathered_rows: 0,
            gathered_bytes: 0,
        })
    }

    /// The writer, made on first use.
    fn writer(&mut self) -> Result<&mut ColumnsWriter> {
        if self.writer.is_none() {
            self.writer = Some(ColumnsWriter::new(self.schema.clone(), self.props.clone())?);
        }
        Ok(self.writer.as_mut().expect("made above"))
    }

    /// Hands the gathered batches to the writer, as one.
    fn encode_gathered(&mut self) -> Result<()> {
        match self.gathered.len() {
            0 => return Ok(()),
            1 => {
                let batch = self.gathered.pop().expect("one batch");
                self.writer()?.write(&batch)?;
            }
            _ => {
                let batch = arrow::compute::concat_batches(&self.schema, &self.gathered)?;
                self.writer()?.write(&batch)?;
            }
        }
        self.gathered.clear();
        self.gathered_rows = 0;
        self.gathered_bytes = 0;
        Ok(())
    }

    /// The writer tracks offsets by count, not by the buffer, so taking the bytes is safe.
    ///
    /// The writer's buffer is taken, and nothing is left in its place: swapping `out` in would
    /// leave the writer holding `out`'s old allocation (the sink's scratch buffer, sized by the
    /// largest write so far), and a thousand open files would each keep one.
    fn drain(&mut self, out: &mut Vec<u8>) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let bytes = std::mem::take(writer.output());
        if out.is_empty() {
            *out = bytes;
        } else {
            out.extend_from_slice(&bytes);
        }
    }
}

impl Encoder for ParquetEncoder {
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        if self.gathered.is_empty() && batch.num_rows() >= ENCODE_ROWS {
            self.writer()?.write(batch)?;
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
        } else if self.gathered.len() >= GATHERED_BATCHES_MAX {
            // Many batches of a few rows each cost more in array headers and aligned
            // allocations than in rows: gather them into one.
            let one = arrow::compute::concat_batches(&self.schema, &self.gathered)?;
            self.gathered_bytes = one.get_array_memory_size();
            self.gathered = vec![one];
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> Result<()> {
        self.encode_gathered()?;
        if let Some(writer) = self.writer.as_mut() {
            writer.flush()?;
        }
        self.drain(out);
        Ok(())
    }

    fn finish(mut self: Box<Self>, out: &mut Vec<u8>) -> Result<Option<ParquetMetaData>> {
        self.encode_gathered()?;
        let footer = self.writer()?.finish()?;
        self.drain(out);
        Ok(Some(footer))
    }

    /// The writer's real memory (`memory_size`), not its estimate of the encoded size
    /// (`in_progress_size`): at 1,000 open files the two differed by ten times; and the
    /// gathered batches.
    fn buffered_bytes(&self) -> usize {
        self.writer.as_ref().map_or(0, |w| w.memory_size()) + self.gathered_bytes
    }
}
