//! CSV through arrow-csv. The header goes at the start of each part file only, so a resumed
//! file does not get a second one.

use arrow::csv::WriterBuilder;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::file::metadata::ParquetMetaData;

use super::{CsvOptions, Encoder};
use crate::{Error, Result};

#[derive(Debug)]
pub(crate) struct CsvEncoder {
    delimiter: u8,
    header_pending: bool,
}

impl CsvEncoder {
    pub(crate) fn new(schema: SchemaRef, opts: &CsvOptions, resumed: bool) -> Result<Self> {
        if let Some(f) = schema.fields().iter().find(|f| f.data_type().is_nested()) {
            return Err(Error::InvalidInput(format!(
                "column `{}` of type {} cannot be written as CSV",
                f.name(),
                f.data_type()
            )));
        }
        Ok(CsvEncoder {
            delimiter: opts.delimiter,
            header_pending: opts.header && !resumed,
        })
    }
}

impl Encoder for CsvEncoder {
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        let mut writer = WriterBuilder::new()
            .with_header(self.header_pending)
            .with_delimiter(self.delimiter)
            .build(out);
        writer.write(batch)?;
        self.header_pending = false;
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
