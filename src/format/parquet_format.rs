//! Parquet through arrow's `ArrowWriter`, writing into memory that the sink drains into the
//! part file after every call.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use super::Encoder;
use crate::Result;

pub(crate) struct ParquetEncoder {
    writer: ArrowWriter<Vec<u8>>,
}

impl std::fmt::Debug for ParquetEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field("in_progress_size", &self.writer.in_progress_size())
            .finish()
    }
}

impl ParquetEncoder {
    pub(crate) fn new(schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        Ok(ParquetEncoder {
            writer: ArrowWriter::try_new(Vec::new(), schema, Some(props))?,
        })
    }

    /// The writer tracks offsets by count, not by the buffer, so taking the bytes is safe.
    fn drain(&mut self, out: &mut Vec<u8>) {
        let inner = self.writer.inner_mut();
        if out.is_empty() {
            std::mem::swap(out, inner);
        } else {
            out.append(inner);
        }
    }
}

impl Encoder for ParquetEncoder {
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        self.writer.write(batch)?;
        self.drain(out);
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> Result<()> {
        self.writer.flush()?;
        self.drain(out);
        Ok(())
    }

    fn finish(mut self: Box<Self>, out: &mut Vec<u8>) -> Result<()> {
        self.writer.finish()?;
        self.drain(out);
        Ok(())
    }

    /// The writer's real memory (`memory_size`), not its estimate of the encoded size
    /// (`in_progress_size`): at 1,000 open files the two differed by ten times.
    fn buffered_bytes(&self) -> usize {
        self.writer.memory_size()
    }
}
