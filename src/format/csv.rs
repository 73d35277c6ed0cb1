//! CSV, each value formatted as arrow-csv formats it (arrow's display formatting, the same
//! date and time formats), quoted where needed as the `csv` crate quotes it. The header goes at
//! the start of each part file only, so a resumed file does not get a second one.
//!
//! A null is an empty field and an empty string is `""`: readers tell them apart (pyarrow with
//! `strings_can_be_null=True, quoted_strings_can_be_null=False`, DuckDB with
//! `allow_quoted_nulls=false`), where an empty field for both would turn one into the other.

use arrow::array::Array;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
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

impl CsvEncoder {
    /// Field `i` of a line: after a delimiter unless first, quoted if it holds the delimiter, a
    /// quote or a line end (quotes doubled), or if it is empty and `quote_empty`.
    fn field(&self, out: &mut Vec<u8>, i: usize, bytes: &[u8], quote_empty: bool) {
        if i > 0 {
            out.push(self.delimiter);
        }
        let quoted = (quote_empty && bytes.is_empty())
            || bytes
                .iter()
                .any(|&b| b == self.delimiter || matches!(b, b'"' | b'\n' | b'\r'));
        if !quoted {
            out.extend_from_slice(bytes);
            return;
        }
        out.push(b'"');
        for &b in bytes {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    }
}

impl Encoder for CsvEncoder {
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        let only = batch.num_columns() == 1;
        if self.header_pending {
            for (i, f) in batch.schema().fields().iter().enumerate() {
                self.field(out, i, f.name().as_bytes(), only);
            }
            out.push(b'\n');
            self.header_pending = false;
        }
        let options = FormatOptions::default().with_null("");
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let strings: Vec<bool> = batch
            .columns()
            .iter()
            .map(|c| {
                matches!(
                    c.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                )
            })
            .collect();
        let mut text = String::new();
        for row in 0..batch.num_rows() {
            for (i, formatter) in formatters.iter().enumerate() {
                if batch.column(i).is_null(row) {
                    // A lone empty field is quoted, or the line would be empty.
                    self.field(out, i, b"", only);
                    continue;
                }
                text.clear();
                formatter
                    .value(row)
                    .write(&mut text)
                    .map_err(|e| Error::InvalidInput(format!("row {}: {e}", row + 1)))?;
                self.field(out, i, text.as_bytes(), only || strings[i]);
            }
            out.push(b'\n');
        }
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
