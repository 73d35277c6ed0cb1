//! Parquet through arrow's column writers ([`super::parquet_columns`], columns encoded in
//! parallel), writing into memory that the sink drains into the part file after every call.
//!
//! Small batches are gathered first, as Arrow, and handed to the writer together once they
//! reach [`ENCODE_ROWS`](super::parquet_gather::ENCODE_ROWS) rows or [`ENCODE_BYTES`] bytes (or the file flushes or ends). With
//! many partitions every batch brings each bucket a few rows: encoding them one call at a
//! time costs a column-writer pass per call, and an open row group holds column encoders
//! (pages, dictionaries: about 150 KiB per file at eight columns) for every file that has
//! only a few hundred rows. Gathered, a file that stays small never opens a row group until
//! it is finished or flushed.
//!
//! Rows of flat columns (the types JSON and CSV give) are appended on arrival to growing
//! columns ([`super::parquet_gather`]): one copy per row into buffers that grow by doubling,
//! and the chunk the bucket assigner sliced them from is free once the write returns.
//!
//! A batch with nested columns is first kept as it came, *loose*: usually a zero-copy slice of
//! the chunk the bucket assigner split, so it keeps that whole chunk alive. The writer calls
//! [`Encoder::compact`] every few chunks, which copies each file's loose slices into one
//! batch of its own: one copy (and one set of allocations) for several slices. Copying every
//! slice on arrival into arrays of its own cost a third of the CPU at 1,000 partitions, where
//! a chunk brings each bucket a handful of rows: eight columns' allocations for every handful.

use std::collections::HashSet;

use arrow::array::{Array, AsArray, UInt32Array};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::parquet_columns::ColumnsWriter;
use super::parquet_gather::{Gathered, ENCODE_ROWS};
use super::Encoder;
use crate::Result;

/// Gathered rows are encoded once they take this many bytes.
pub(crate) const ENCODE_BYTES: usize = 1 << 20;
/// Gathered batches are concatenated into one once there are this many.
const GATHERED_BATCHES_MAX: usize = 32;

/// Values of a column a file's dictionary decision looks at.
const DICTIONARY_SAMPLE_ROWS: usize = 4096;
/// Fewer values than this are too few to judge: the column keeps the writer properties.
const DICTIONARY_SAMPLE_ROWS_MIN: usize = 256;

/// `props`, with dictionary encoding turned off for each top-level column of `batch` (a
/// file's first rows) whose first values are mostly (more than half) distinct.
///
/// A dictionary pays where values repeat. Where they do not (ids, timestamps as text, free
/// text), parquet-rs still interns every value until the dictionary passes its page size
/// limit (1 MiB) and only then falls back to plain: a file of 40,000 distinct 20-byte
/// values is dictionary-encoded whole, for a dictionary as large as the plain values plus an
/// index per value; at 24 partitions the interning was 26% of an ingest's CPU samples and
/// half its heap. This makes the same fallback early, from a sample, per file.
/// Columns with dictionaries turned off stay off; nested columns keep the properties.
fn plain_where_mostly_distinct(props: &WriterProperties, batch: &RecordBatch) -> WriterProperties {
    let plain: Vec<ColumnPath> = batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| (ColumnPath::from(field.name().as_str()), column))
        .filter(|(path, column)| props.dictionary_enabled(path) && mostly_distinct(column.as_ref()))
        .map(|(path, _)| path)
        .collect();
    if plain.is_empty() {
        return props.clone();
    }
    plain
        .into_iter()
        .fold(props.clone().into_builder(), |b, path| {
            b.set_column_dictionary_enabled(path, false)
        })
        .build()
}

/// Whether more than half of the first [`DICTIONARY_SAMPLE_ROWS`] non-null values of
/// `column` are distinct; `false` for too few values and for types it does not judge.
fn mostly_distinct(column: &dyn Array) -> bool {
    let sample = column.slice(0, column.len().min(DICTIONARY_SAMPLE_ROWS));
    let values = sample.len() - sample.null_count();
    if values < DICTIONARY_SAMPLE_ROWS_MIN {
        return false;
    }
    match sample.data_type() {
        DataType::Utf8 => more_than_half_distinct(
            sample
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(str::as_bytes)),
            values,
        ),
        DataType::LargeUtf8 => more_than_half_distinct(
            sample
                .as_string::<i64>()
                .iter()
                .map(|v| v.map(str::as_bytes)),
            values,
        ),
        DataType::Binary => more_than_half_distinct(sample.as_binary::<i32>().iter(), values),
        DataType::LargeBinary => more_than_half_distinct(sample.as_binary::<i64>().iter(), values),
        t => match t.primitive_width() {
            Some(width) => {
                let data = sample.to_data();
                let bytes = &data.buffers()[0].as_slice()
                    [data.offset() * width..(data.offset() + data.len()) * width];
                let nulls = data.nulls();
                more_than_half_distinct(
                    bytes
                        .chunks_exact(width)
                        .enumerate()
                        .map(|(i, v)| nulls.is_none_or(|n| n.is_valid(i)).then_some(v)),
                    values,
                )
            }
            None => false,
        },
    }
}

/// Whether more than half of `count` non-null values (`values` holds them and nulls) are
/// distinct. Counts only up to the answer: stops once more than half are distinct, or once
/// the values left cannot make them so. ahash, allocated once: a file of a checkpoint at
/// 1,000 partitions holds ~1,000 rows, and SipHash with rehashing took 15% of such an ingest.
fn more_than_half_distinct<'a>(
    values: impl Iterator<Item = Option<&'a [u8]>>,
    count: usize,
) -> bool {
    let half = count / 2;
    let mut seen = HashSet::with_capacity_and_hasher(half + 1, ahash::RandomState::new());
    let mut left = count;
    for v in values.flatten() {
        left -= 1;
        seen.insert(v);
        if seen.len() > half || seen.len() + left <= half {
            break;
        }
    }
    seen.len() > half
}

/// What `batch` holds of the buffers it points into (a slice: its share, not the whole).
fn slice_bytes(batch: &RecordBatch) -> usize {
    batch.columns().iter().map(|c| array_slice_bytes(c)).sum()
}

/// [`ArrayData::get_slice_memory_size`](arrow::array::ArrayData::get_slice_memory_size)
/// without making the `ArrayData` (allocations, for every column of every slice) for the
/// flat types JSON and CSV give.
fn array_slice_bytes(a: &dyn Array) -> usize {
    let len = a.len();
    let nulls = a.nulls().map_or(0, |n| n.len().div_ceil(8));
    let values = match a.data_type() {
        DataType::Utf8 => offsets_bytes(a.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => offsets_bytes(a.as_string::<i64>().value_offsets()),
        DataType::Binary => offsets_bytes(a.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => offsets_bytes(a.as_binary::<i64>().value_offsets()),
        DataType::Boolean => len.div_ceil(8),
        t => match t.primitive_width() {
            Some(width) => len * width,
            None => {
                return a
                    .to_data()
                    .get_slice_memory_size()
                    .unwrap_or_else(|_| a.get_array_memory_size())
            }
        },
    };
    values + nulls
}

/// The offsets and the value bytes they span.
fn offsets_bytes<O: arrow::array::OffsetSizeTrait>(offsets: &[O]) -> usize {
    let span = match (offsets.first(), offsets.last()) {
        (Some(first), Some(last)) => (*last - *first).as_usize(),
        _ => 0,
    };
    std::mem::size_of_val(offsets) + span
}

pub(crate) struct ParquetEncoder {
    /// Made when the first rows are encoded: a file that only gathers until it is finished
    /// holds no writer (its buffers and metadata) until then.
    writer: Option<ColumnsWriter>,
    props: WriterProperties,
    schema: SchemaRef,
    /// Batches not handed to the writer yet, each in buffers of its own.
    gathered: Vec<RecordBatch>,
    /// Batches not handed to the writer yet as they were written (slices of larger batches,
    /// kept alive by them), after `gathered` in row order.
    loose: Vec<RecordBatch>,
    /// Rows not handed to the writer yet, appended as they were written (after `gathered`
    /// and `loose` in row order): for a flat schema, instead of `loose`.
    growing: Option<Gathered>,
    /// Rows in `gathered`, `loose` and `growing`.
    gathered_rows: usize,
    /// Bytes of `gathered`, of `loose` (their share of the buffers they point into) and of
    /// `growing` (the bytes of the rows appended; its buffers grow by doubling).
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
            growing: Gathered::new(&schema),
            writer: None,
            props,
            schema,
            gathered: Vec::new(),
            loose: Vec::new(),
            gathered_rows: 0,
            gathered_bytes: 0,
        })
    }

    /// The writer, made on first use with properties for a file whose first rows are
    /// `batch` ([`plain_where_mostly_distinct`]).
    fn writer_for(&mut self, batch: &RecordBatch) -> Result<&mut ColumnsWriter> {
        if self.writer.is_none() {
            let props = plain_where_mostly_distinct(&self.props, batch);
            self.writer = Some(ColumnsWriter::new(self.schema.clone(), props)?);
        }
        Ok(self.writer.as_mut().expect("made above"))
    }

    /// The writer, made on first use.
    fn writer(&mut self) -> Result<&mut ColumnsWriter> {
        if self.writer.is_none() {
            self.writer = Some(ColumnsWriter::new(self.schema.clone(), self.props.clone())?);
        }
        Ok(self.writer.as_mut().expect("made above"))
    }

    /// Hands the gathered and loose batches to the writer, as one.
    fn encode_gathered(&mut self) -> Result<()> {
        let mut batches = std::mem::take(&mut self.gathered);
        batches.append(&mut self.loose);
        if let Some(g) = self.growing.as_mut().filter(|g| g.rows() > 0) {
            batches.push(g.take()?);
        }
        match batches.len() {
            0 => return Ok(()),
            1 => self.writer_for(&batches[0])?.write(&batches[0])?,
            _ => {
                let batch = arrow::compute::concat_batches(&self.schema, &batches)?;
                self.writer_for(&batch)?.write(&batch)?;
            }
        }
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
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        if self.gathered_rows == 0 && rows >= ENCODE_ROWS {
            self.writer_for(batch)?.write(batch)?;
            self.drain(out);
            return Ok(());
        }
        match self.growing.as_mut() {
            Some(g) => g.append(batch)?,
            None => self.loose.push(batch.clone()),
        }
        self.gathered_rows += rows;
        self.gathered_bytes += slice_bytes(batch);
        if self.gathered_rows >= ENCODE_ROWS || self.gathered_bytes >= ENCODE_BYTES {
            self.encode_gathered()?;
            self.drain(out);
        }
        Ok(())
    }

    /// The loose slices, copied into one batch of their own (concatenated: one set of
    /// allocations for all of them). Many gathered batches of a few rows each cost more in
    /// array headers and aligned allocations than in rows: past [`GATHERED_BATCHES_MAX`] they
    /// are concatenated into one as well.
    fn compact(&mut self) -> Result<()> {
        let own = match self.loose.len() {
            0 => return Ok(()),
            // A concatenation of one batch may hand back its buffers: a copy.
            1 => {
                let batch = &self.loose[0];
                arrow::compute::take_record_batch(
                    batch,
                    &UInt32Array::from_iter_values(0..batch.num_rows() as u32),
                )?
            }
            _ => arrow::compute::concat_batches(&self.schema, &self.loose)?,
        };
        self.loose.clear();
        self.gathered.push(own);
        if self.gathered.len() >= GATHERED_BATCHES_MAX {
            let one = arrow::compute::concat_batches(&self.schema, &self.gathered)?;
            self.gathered = vec![one];
        }
        self.gathered_bytes = self.gathered.iter().map(slice_bytes).sum();
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

    fn reserve_at_most(&mut self, bytes: usize) {
        if let Some(g) = self.growing.as_mut() {
            g.reserve_at_most(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::parquet_columns::tests::{batch, read};
    use super::*;

    /// Which columns of a file's first rows lose their dictionary: the mostly distinct ones
    /// of the types it judges, not the repeating ones, not nested ones, not with too few
    /// values; and the file written says so in its column chunks' encodings.
    #[test]
    fn columns_of_mostly_distinct_values_are_written_plain() {
        use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
        use arrow::datatypes::{Field, Schema};
        use parquet::basic::Encoding;

        let n = 5000i64;
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(Int64Array::from_iter_values(0..n))),
            (
                "qty",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 100))),
            ),
            (
                "amount",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| i as f64 * 1.5),
                )),
            ),
            (
                "ts",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("t-{i}")),
                )),
            ),
            (
                "country",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| ["DE", "FR"][i as usize % 2]),
                )),
            ),
            // Distinct, but 200 values only: too few to judge.
            (
                "rare",
                Arc::new(StringArray::from_iter(
                    (0..n).map(|i| (i < 200).then(|| format!("r-{i}"))),
                )),
            ),
        ];
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|(name, c)| Field::new(*name, c.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_new(
            schema.clone(),
            columns.into_iter().map(|(_, c)| c).collect(),
        )
        .unwrap();
        let nested = super::super::parquet_columns::tests::batch(0, 5000);

        let props = WriterProperties::builder().build();
        let adapted = plain_where_mostly_distinct(&props, &batch);
        let dictionary = |p: &WriterProperties, c: &str| p.dictionary_enabled(&ColumnPath::from(c));
        for (column, want) in [
            ("id", false),
            ("qty", true),
            ("amount", false),
            ("ts", false),
            ("country", true),
            ("rare", true),
        ] {
            assert_eq!(dictionary(&adapted, column), want, "{column}");
        }
        // Nested columns keep the properties; a column already off stays off.
        let adapted = plain_where_mostly_distinct(&props, &nested);
        assert!(dictionary(&adapted, "point.tag") && dictionary(&adapted, "list.list.item"));
        assert!(!dictionary(&adapted, "id"));
        let off = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .build();
        assert!(!dictionary(
            &plain_where_mostly_distinct(&off, &batch),
            "qty"
        ));

        let mut encoder = ParquetEncoder::new(schema, props).unwrap();
        let mut out = Vec::new();
        encoder.write(&batch, &mut out).unwrap();
        let footer = Box::new(encoder).finish(&mut out).unwrap().unwrap();
        let chunks = footer.row_group(0).columns();
        let has_dictionary: Vec<bool> = chunks
            .iter()
            .map(|c| c.encodings().any(|e| e == Encoding::RLE_DICTIONARY))
            .collect();
        assert_eq!(has_dictionary, [false, true, false, false, true, true]);
        let (_, got) = read(out);
        assert_eq!(got, batch);
    }

    fn buffer_refs(b: &RecordBatch) -> usize {
        b.column(0).to_data().buffers()[0].strong_count()
    }

    /// Finishes `encoder` into `out` and checks that the file holds the slices `written`
    /// (parent, offset, length) of `parents`, in order, 18,000 rows in all.
    fn assert_file_holds(
        encoder: ParquetEncoder,
        mut out: Vec<u8>,
        parents: &[RecordBatch],
        written: Vec<(usize, usize, usize)>,
    ) {
        let schema = parents[0].schema();
        let footer = Box::new(encoder).finish(&mut out).unwrap().unwrap();
        assert_eq!(footer.file_metadata().num_rows(), 18_000);
        let (_, got) = read(out);
        let written: Vec<RecordBatch> = written
            .into_iter()
            .map(|(i, offset, len)| parents[i].slice(offset, len))
            .collect();
        assert_eq!(
            got,
            arrow::compute::concat_batches(&schema, &written).unwrap()
        );
    }

    /// Slices of larger batches (flat, nested and repeated columns) written a few rows at a
    /// time, with compactions, a flush and the threshold encoding between them: the file
    /// holds every row once, in order; the encoder counts a slice by its share, and once it
    /// has compacted it keeps none of the batches the slices were cut from.
    #[test]
    fn loose_slices_are_encoded_in_order_and_released_by_compaction() {
        let parents: Vec<RecordBatch> = (0..6).map(|i| batch(i * 3000, 3000)).collect();
        let schema = parents[0].schema();
        let mut encoder =
            ParquetEncoder::new(schema.clone(), WriterProperties::builder().build()).unwrap();
        let (mut out, mut written) = (Vec::new(), Vec::new());
        for (i, parent) in parents.iter().enumerate() {
            let before = buffer_refs(parent);
            for (offset, len) in [(0, 7), (7, 1), (8, 992), (1000, 2000)] {
                let slice = parent.slice(offset, len);
                if len < 10 {
                    // Flat columns count their share (nested ones may count their children
                    // whole).
                    for c in &slice.columns()[..2] {
                        assert!(array_slice_bytes(c) * 10 < c.get_array_memory_size());
                    }
                }
                encoder.write(&slice, &mut out).unwrap();
                written.push((i, offset, len));
            }
            match i {
                1 => encoder.flush(&mut out).unwrap(),
                _ if i % 2 == 0 => {
                    if !encoder.loose.is_empty() {
                        assert!(buffer_refs(parent) > before);
                    }
                    Encoder::compact(&mut encoder).unwrap();
                    assert_eq!(buffer_refs(parent), before, "parent {i} kept alive");
                }
                _ => {}
            }
        }
        assert_file_holds(encoder, out, &parents, written);
    }

    /// Flat rows written a few at a time, with a flush and the threshold encoding between
    /// them, are appended on arrival: no batch they were cut from stays alive after the write,
    /// compaction has nothing to do, and the file holds every row once, in order.
    #[test]
    fn flat_rows_are_appended_on_arrival_and_keep_no_batch_alive() {
        let parents: Vec<RecordBatch> = (0..6)
            .map(|i| batch(i * 3000, 3000).project(&[0, 1]).unwrap())
            .collect();
        let schema = parents[0].schema();
        let mut encoder =
            ParquetEncoder::new(schema.clone(), WriterProperties::builder().build()).unwrap();
        assert!(encoder.growing.is_some());
        let (mut out, mut written) = (Vec::new(), Vec::new());
        for (i, parent) in parents.iter().enumerate() {
            let before = buffer_refs(parent);
            for (offset, len) in [(0, 7), (7, 1), (8, 992), (1000, 2000)] {
                encoder.write(&parent.slice(offset, len), &mut out).unwrap();
                assert_eq!(buffer_refs(parent), before, "parent {i} kept alive");
                assert!(encoder.loose.is_empty());
                written.push((i, offset, len));
            }
            if i == 1 {
                encoder.flush(&mut out).unwrap();
            }
            Encoder::compact(&mut encoder).unwrap();
            assert!(encoder.gathered.is_empty());
        }
        assert_file_holds(encoder, out, &parents, written);
    }
}
