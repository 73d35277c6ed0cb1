//! File formats: how a stream of [`RecordBatch`]es becomes the bytes of one part file.
//!
//! - [`FileFormat::Parquet`] is a *bulk* format: a Parquet file cannot be resumed halfway (its
//!   footer comes last), so its part files roll at every checkpoint.
//! - [`FileFormat::JsonLines`] and [`FileFormat::Csv`] are *row* formats: every batch encodes to
//!   self-contained lines, so a file can stay open across checkpoints and be resumed at its
//!   durable length after a restart.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;

use crate::Result;

mod csv;
mod jsonl;
mod parquet_columns;
mod parquet_format;
mod parquet_gather;
pub(crate) mod stats;

/// Options of the CSV row format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// Field delimiter. Default `,`.
    pub delimiter: u8,
    /// Whether each part file starts with a header line. Default `true`.
    pub header: bool,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            delimiter: b',',
            header: true,
        }
    }
}

/// The format part files are written in.
// Built once per sink, never in a hot path: the size of the Parquet variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum FileFormat {
    /// Apache Parquet, with the given writer properties (compression, row-group size,
    /// statistics...). Rolls at every checkpoint.
    ///
    /// Where the properties enable dictionary encoding of a top-level column, a file whose
    /// first values of that column are mostly distinct writes it plain: the fallback
    /// parquet-rs makes once a dictionary passes its page size limit, made early.
    Parquet(WriterProperties),
    /// Newline-delimited JSON, one object per record.
    JsonLines,
    /// Comma-separated values.
    Csv(CsvOptions),
}

impl FileFormat {
    /// Parquet with Snappy compression and otherwise default properties (the defaults of Spark
    /// and pyarrow).
    pub fn parquet() -> Self {
        FileFormat::Parquet(
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build(),
        )
    }

    /// Parquet with the given writer properties.
    pub fn parquet_with(properties: WriterProperties) -> Self {
        FileFormat::Parquet(properties)
    }

    /// JSON lines.
    pub fn json_lines() -> Self {
        FileFormat::JsonLines
    }

    /// CSV with a header line and `,` as delimiter.
    pub fn csv() -> Self {
        FileFormat::Csv(CsvOptions::default())
    }

    /// The name recorded in writer state: `parquet`, `jsonl` or `csv`.
    pub fn name(&self) -> &'static str {
        match self {
            FileFormat::Parquet(_) => "parquet",
            FileFormat::JsonLines => "jsonl",
            FileFormat::Csv(_) => "csv",
        }
    }

    /// The part-file suffix used when none is configured.
    pub fn default_suffix(&self) -> &'static str {
        match self {
            FileFormat::Parquet(_) => ".parquet",
            FileFormat::JsonLines => ".jsonl",
            FileFormat::Csv(_) => ".csv",
        }
    }

    /// Whether an open file can be kept across a checkpoint and resumed at its durable length.
    pub fn is_resumable(&self) -> bool {
        !matches!(self, FileFormat::Parquet(_))
    }

    /// A new encoder for one part file with `schema`. `resumed` says whether the file already
    /// has content (no CSV header then).
    pub(crate) fn encoder(&self, schema: SchemaRef, resumed: bool) -> Result<Box<dyn Encoder>> {
        Ok(match self {
            FileFormat::Parquet(props) => {
                Box::new(parquet_format::ParquetEncoder::new(schema, props.clone())?)
            }
            FileFormat::JsonLines => Box::new(jsonl::JsonLinesEncoder::new(schema)?),
            FileFormat::Csv(opts) => Box::new(csv::CsvEncoder::new(schema, opts, resumed)?),
        })
    }
}

/// Turns batches into the bytes of one part file.
///
/// Encoders never touch storage: they append finished bytes to `out`, and the writer passes
/// them on. A row-format encoder appends everything at once; Parquet buffers a row group.
pub(crate) trait Encoder: Send + std::fmt::Debug {
    /// Encodes `batch`, appending the bytes that are ready to `out`.
    fn write(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()>;

    /// Appends every buffered byte to `out` without ending the file (flushes a Parquet row
    /// group early under memory pressure).
    fn flush(&mut self, out: &mut Vec<u8>) -> Result<()>;

    /// Ends the file (the Parquet footer), appending the last bytes to `out`. Returns the
    /// footer's metadata for a Parquet file (the statistics of a table's `add` come from it,
    /// [`stats::file_stats`]), `None` for a row format.
    fn finish(self: Box<Self>, out: &mut Vec<u8>) -> Result<Option<ParquetMetaData>>;

    /// Bytes held in memory that are not yet in `out`.
    fn buffered_bytes(&self) -> usize;

    /// Reserves at most about `bytes` of memory ahead for rows to come (the file's share of
    /// the writer's budget); what rows bring beyond it grows as they come.
    fn reserve_at_most(&mut self, _bytes: usize) {}

    /// Copies what `write` kept by reference (rows of the batches it was given, which keep
    /// those whole batches alive) into buffers of its own. The writer calls it every few
    /// batches, so that an encoder never keeps more than those batches alive.
    fn compact(&mut self) -> Result<()> {
        Ok(())
    }
}
