//! JSON lines through arrow-json: one object per record, one record per line.

use arrow::datatypes::SchemaRef;
use arrow::json::LineDelimitedWriter;
use arrow::record_batch::RecordBatch;

use parquet::file::metadata::ParquetMetaData;

use super::Encoder;
use crate::Result;

#[derive(Debug)]
pub(crate) struct JsonLinesEncoder;

impl JsonLinesEncoder {
    pub(crate) fn new(_schema: SchemaRef) -> Result<Self> {
        Ok(JsonLinesEncoder)
    }
}

impl Encoder for JsonLinesEncoder {
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        let mut writer = LineDelimitedWriter::new(out);
        writer.write(batch)?;
        writer.finish()?;
        Ok(())
    }

    fn flush(&mut self, _out: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }

    fn finish(self: Box<Self>, _out: &mut Vec<u8>) -> Result<Option<ParquetMetaData>> {
        Ok(None)
    }

    fn buffered_bytes(&self) -> usize {
        0
    }
}
