//! Rows a Parquet file gathers before it encodes them, appended into growing Arrow columns.
//!
//! A writer hands each file the rows of its bucket as they come: at 1,000 partitions, a
//! handful of rows per chunk, each a zero-copy slice of the chunk the partitioner cut. Kept
//! as slices, they pinned whole chunks until the writer copied them out in rounds
//! ([`super::Encoder::compact`]); every round made new small arrays for every file and
//! freed the chunks, and at 1,000 partitions the rounds' allocations and frees were a fifth
//! of an ingest's CPU. [`Gathered`] instead appends each slice's values at once to one
//! builder per column, whose buffers grow by doubling: one copy per row, amortised
//! allocations, and no chunk outlives the write that brought it.
//!
//! Columns allocate nothing until their first rows come, and a round that starts with a
//! small slice starts with buffers sized for the round before (the first for
//! [`FIRST_ROUND_ROWS`] rows, strings at the first slice's average length). Left to grow from
//! nothing, a builder doubled its buffers a dozen times per round; at 1,000 partitions those
//! reallocations, and the page faults of their fresh memory, were 6% of an ingest's CPU, and
//! the blocks they left behind 9% of its peak RSS. A round that starts with a batch of a
//! round's size (an unpartitioned input's chunks) reserves what the batch brings, as before:
//! sized ahead, its large buffers were fresh mappings every round, 10% more CPU.
//!
//! Flat columns only (the types JSON and CSV inputs give: integers, floats, dates,
//! timestamps, strings, binary, booleans); a schema with any other column gathers slices as
//! before.

use std::sync::Arc;

use arrow::array::builder::{BooleanBuilder, GenericByteBuilder, PrimitiveBuilder};
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    ArrowNativeType, ArrowPrimitiveType, BinaryType, ByteArrayType, DataType, Date32Type,
    Date64Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    LargeBinaryType, LargeUtf8Type, SchemaRef, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type, Utf8Type,
};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

/// Rows the first round of a file reserves room for (arrow's default builder capacity).
pub(crate) const FIRST_ROUND_ROWS: usize = 1024;
/// The most rows a round reserves room for: what the Parquet encoder gathers before it
/// encodes them.
const ROUND_ROWS_MAX: usize = ENCODE_ROWS;

/// Gathered rows are encoded once there are this many.
pub(crate) const ENCODE_ROWS: usize = 8192;
/// The most value bytes a string column reserves at the start of a round from an estimate.
const ESTIMATE_BYTES_MAX: usize = 1 << 20;

/// The fewest rows a round reserves room for, however small its file's share of the memory
/// budget.
const ROUND_ROWS_MIN: usize = 16;

/// The gathered rows of one file: a growing column per field of the schema.
pub(crate) struct Gathered {
    schema: SchemaRef,
    columns: Vec<Box<dyn Column>>,
    rows: usize,
    /// Rows of the last round taken; `FIRST_ROUND_ROWS` before the first.
    last_rows: usize,
    /// The most bytes a round reserves ahead ([`Gathered::reserve_at_most`]).
    reserve_max: usize,
}

impl Gathered {
    /// Growing columns for `schema`, if every field is of a type they take.
    pub(crate) fn new(schema: &SchemaRef) -> Option<Gathered> {
        let columns = schema
            .fields()
            .iter()
            .map(|f| column_for(f.data_type()))
            .collect::<Option<Vec<_>>>()?;
        if columns.is_empty() {
            return None; // rows without columns: kept as batches, which know their count
        }
        Some(Gathered {
            schema: schema.clone(),
            columns,
            rows: 0,
            last_rows: FIRST_ROUND_ROWS,
            reserve_max: usize::MAX,
        })
    }

    /// Reserves at most `bytes` ahead at the start of a round (at least [`ROUND_ROWS_MIN`]
    /// rows): the file's share of the writer's memory budget. Ten thousand open files that
    /// each reserved a thousand rows ahead held hundreds of megabytes that no budget counted;
    /// beyond the reservation the columns grow by doubling, as ever.
    pub(crate) fn reserve_at_most(&mut self, bytes: usize) {
        self.reserve_max = bytes;
    }

    /// Rows gathered and not taken yet.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Appends the rows of `batch`, whose columns must have the types of the schema.
    pub(crate) fn append(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        if batch.num_columns() != self.columns.len() {
            return Err(ArrowError::SchemaError(format!(
                "a batch of {} columns for a file of {}",
                batch.num_columns(),
                self.columns.len()
            )));
        }
        // Every column is checked before any grows: a refused batch leaves the rows as they were.
        for (field, array) in self.schema.fields().iter().zip(batch.columns()) {
            if array.data_type() != field.data_type() {
                return Err(mismatch(field.data_type(), array.data_type()));
            }
        }
        // Sized only for a round of small slices: a batch of a round's size on its own (an
        // unpartitioned input's chunks) reserves what it brings, as the builders always did.
        let start = self.rows == 0 && batch.num_rows() < FIRST_ROUND_ROWS;
        let rows = match (start, self.reserve_max) {
            (false, _) | (true, usize::MAX) => self.last_rows,
            (true, max) => {
                let row_bytes: usize = self
                    .columns
                    .iter()
                    .zip(batch.columns())
                    .map(|(c, a)| c.row_bytes(a.as_ref()))
                    .sum();
                self.last_rows
                    .min(max / row_bytes.max(1))
                    .max(ROUND_ROWS_MIN)
            }
        };
        for (column, array) in self.columns.iter_mut().zip(batch.columns()) {
            if start {
                column.start_round(rows, array.as_ref(), self.reserve_max);
            }
            column.append(array.as_ref())?;
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    /// The gathered rows as one batch, leaving none behind.
    pub(crate) fn take(&mut self) -> Result<RecordBatch, ArrowError> {
        let columns = self.columns.iter_mut().map(|c| c.finish()).collect();
        if self.rows > 0 {
            // A round that ended with a large batch (appended once the round had begun) must
            // not make the next round of small slices reserve room for all of it.
            self.last_rows = self.rows.min(ROUND_ROWS_MAX);
        }
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

/// A column being gathered.
trait Column: Send {
    /// Readies the empty column for a round of about `rows` rows, of which `first` (of the
    /// column's type, checked) are the first, reserving at most about `bytes_max`.
    fn start_round(&mut self, rows: usize, first: &dyn Array, bytes_max: usize);
    /// About how many bytes a row of `first` takes in this column.
    fn row_bytes(&self, first: &dyn Array) -> usize;
    fn append(&mut self, array: &dyn Array) -> Result<(), ArrowError>;
    fn finish(&mut self) -> ArrayRef;
}

fn mismatch(want: &DataType, got: &DataType) -> ArrowError {
    ArrowError::SchemaError(format!("a {got} column for a file's {want} column"))
}

struct Primitive<T: ArrowPrimitiveType>(PrimitiveBuilder<T>, DataType);

impl<T: ArrowPrimitiveType> Column for Primitive<T> {
    fn start_round(&mut self, rows: usize, _first: &dyn Array, _bytes_max: usize) {
        if self.0.capacity() < rows {
            self.0 = PrimitiveBuilder::<T>::with_capacity(rows).with_data_type(self.1.clone());
        }
    }

    fn row_bytes(&self, _first: &dyn Array) -> usize {
        std::mem::size_of::<T::Native>()
    }

    fn append(&mut self, array: &dyn Array) -> Result<(), ArrowError> {
        let a = array
            .as_primitive_opt::<T>()
            .ok_or_else(|| mismatch(&self.1, array.data_type()))?;
        self.0.append_array(a);
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.0.finish())
    }
}

/// The builder, its type, and the value bytes of the last round taken (`None` before the
/// first).
struct Bytes<T: ByteArrayType>(GenericByteBuilder<T>, DataType, Option<usize>);

impl<T: ByteArrayType> Column for Bytes<T> {
    fn start_round(&mut self, rows: usize, first: &dyn Array, bytes_max: usize) {
        let bytes = self
            .2
            .unwrap_or_else(|| (self.row_bytes(first)).saturating_mul(rows));
        let bytes = bytes.min(ESTIMATE_BYTES_MAX).min(bytes_max);
        self.0 = GenericByteBuilder::<T>::with_capacity(rows, bytes);
    }

    fn row_bytes(&self, first: &dyn Array) -> usize {
        first.as_bytes_opt::<T>().map_or(0, |a| {
            let offsets = a.value_offsets();
            let span = offsets[a.len()].as_usize() - offsets[0].as_usize();
            span / a.len().max(1)
        }) + std::mem::size_of::<T::Offset>()
    }

    fn append(&mut self, array: &dyn Array) -> Result<(), ArrowError> {
        let a = array
            .as_bytes_opt::<T>()
            .ok_or_else(|| mismatch(&self.1, array.data_type()))?;
        self.0.append_array(a)
    }

    fn finish(&mut self) -> ArrayRef {
        self.2 = Some(self.0.values_slice().len())
            .filter(|&n| n > 0)
            .or(self.2);
        Arc::new(self.0.finish())
    }
}

struct Boolean(BooleanBuilder);

impl Column for Boolean {
    fn start_round(&mut self, rows: usize, _first: &dyn Array, _bytes_max: usize) {
        if self.0.capacity() < rows {
            self.0 = BooleanBuilder::with_capacity(rows);
        }
    }

    fn row_bytes(&self, _first: &dyn Array) -> usize {
        1
    }

    fn append(&mut self, array: &dyn Array) -> Result<(), ArrowError> {
        let a = array
            .as_boolean_opt()
            .ok_or_else(|| mismatch(&DataType::Boolean, array.data_type()))?;
        self.0.append_array(a);
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.0.finish())
    }
}

fn primitive<T: ArrowPrimitiveType>(dt: &DataType) -> Box<dyn Column> {
    Box::new(Primitive::<T>(
        PrimitiveBuilder::<T>::with_capacity(0).with_data_type(dt.clone()),
        dt.clone(),
    ))
}

fn bytes<T: ByteArrayType>(dt: &DataType) -> Box<dyn Column> {
    Box::new(Bytes::<T>(
        GenericByteBuilder::<T>::with_capacity(0, 0),
        dt.clone(),
        None,
    ))
}

fn column_for(dt: &DataType) -> Option<Box<dyn Column>> {
    Some(match dt {
        DataType::Int8 => primitive::<Int8Type>(dt),
        DataType::Int16 => primitive::<Int16Type>(dt),
        DataType::Int32 => primitive::<Int32Type>(dt),
        DataType::Int64 => primitive::<Int64Type>(dt),
        DataType::UInt8 => primitive::<UInt8Type>(dt),
        DataType::UInt16 => primitive::<UInt16Type>(dt),
        DataType::UInt32 => primitive::<UInt32Type>(dt),
        DataType::UInt64 => primitive::<UInt64Type>(dt),
        DataType::Float32 => primitive::<Float32Type>(dt),
        DataType::Float64 => primitive::<Float64Type>(dt),
        DataType::Date32 => primitive::<Date32Type>(dt),
        DataType::Date64 => primitive::<Date64Type>(dt),
        DataType::Timestamp(TimeUnit::Second, _) => primitive::<TimestampSecondType>(dt),
        DataType::Timestamp(TimeUnit::Millisecond, _) => primitive::<TimestampMillisecondType>(dt),
        DataType::Timestamp(TimeUnit::Microsecond, _) => primitive::<TimestampMicrosecondType>(dt),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => primitive::<TimestampNanosecondType>(dt),
        DataType::Utf8 => bytes::<Utf8Type>(dt),
        DataType::LargeUtf8 => bytes::<LargeUtf8Type>(dt),
        DataType::Binary => bytes::<BinaryType>(dt),
        DataType::LargeBinary => bytes::<LargeBinaryType>(dt),
        DataType::Boolean => Box::new(Boolean(BooleanBuilder::with_capacity(0))),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Int64Array, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::{Field, Schema};

    /// Slices of batches with and without nulls, appended in turn, come back as their
    /// concatenation, types (a timestamp's zone) and nulls included; taking leaves nothing
    /// behind; a batch of other types is an error, not a panic.
    #[test]
    fn appended_slices_come_back_as_their_concatenation() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Millisecond, Some("+01:00".into())),
                true,
            ),
        ]));
        let batch = |n: i64, nulls: bool| {
            let some = |i: i64| !nulls || i % 3 != 0;
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter((0..n).map(|i| some(i).then_some(i)))),
                    Arc::new(StringArray::from_iter(
                        (0..n).map(|i| some(i).then(|| format!("v{i}"))),
                    )),
                    Arc::new(BooleanArray::from_iter(
                        (0..n).map(|i| some(i).then_some(i % 2 == 0)),
                    )),
                    Arc::new(
                        TimestampMillisecondArray::from_iter((0..n).map(|i| some(i).then_some(i)))
                            .with_timezone("+01:00"),
                    ),
                ],
            )
            .unwrap()
        };
        let parts = [
            batch(10, false).slice(3, 4),
            batch(20, true).slice(5, 11),
            batch(5, false),
            batch(9, true).slice(8, 1),
        ];
        let mut g = Gathered::new(&schema).unwrap();
        for p in &parts {
            g.append(p).unwrap();
        }
        assert_eq!(g.rows(), 21);
        let want = arrow::compute::concat_batches(&schema, &parts).unwrap();
        assert_eq!(g.take().unwrap(), want);
        assert_eq!(g.rows(), 0);
        g.append(&parts[1]).unwrap();
        assert_eq!(g.take().unwrap(), parts[1]);

        let other = RecordBatch::try_from_iter([
            ("i", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("s", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("b", Arc::new(BooleanArray::from(vec![true])) as ArrayRef),
            ("t", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ])
        .unwrap();
        assert!(g.append(&other).is_err());
        let nested = Schema::new(vec![Field::new(
            "l",
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            true,
        )]);
        assert!(Gathered::new(&Arc::new(nested)).is_none());
        assert!(Gathered::new(&Arc::new(Schema::empty())).is_none());
    }

    /// Rounds of any size, each sized from the one before (or from an estimate), still come
    /// back as what was appended: a first slice of empty strings, of nulls only, or of one
    /// value longer than the estimate's cap; a round far larger than the one before; large
    /// string and binary columns.
    #[test]
    fn rounds_sized_from_the_last_come_back_whole() {
        use arrow::array::{LargeBinaryArray, LargeStringArray};
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("l", DataType::LargeUtf8, true),
            Field::new("b", DataType::LargeBinary, true),
            Field::new("i", DataType::Int64, true),
        ]));
        let batch = |values: Vec<Option<String>>| {
            let n = values.len() as i64;
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(values.clone())),
                    Arc::new(LargeStringArray::from(values.clone())),
                    Arc::new(LargeBinaryArray::from_iter(
                        values.iter().map(|v| v.as_ref().map(|s| s.as_bytes())),
                    )),
                    Arc::new(Int64Array::from_iter_values(0..n)),
                ],
            )
            .unwrap()
        };
        let many = |n: usize, len: usize| (0..n).map(|i| Some(format!("{i:0len$}"))).collect();
        let rounds: Vec<Vec<RecordBatch>> = vec![
            vec![batch(vec![Some(String::new()); 3]), batch(many(2_000, 30))],
            vec![batch(vec![None; 5]), batch(many(10, 8))],
            vec![batch(vec![Some("x".repeat(3 << 20))]), batch(many(50, 4))],
            vec![
                batch(many(1, 1)),
                batch(many(20_000, 12)),
                batch(vec![None]),
            ],
        ];
        let mut g = Gathered::new(&schema).unwrap();
        for round in &rounds {
            for b in round {
                g.append(b).unwrap();
            }
            let want = arrow::compute::concat_batches(&schema, round).unwrap();
            assert_eq!(g.take().unwrap(), want);
            // The next round reserves for at most the encoder's round.
            assert_eq!(g.last_rows, want.num_rows().min(ROUND_ROWS_MAX));
        }
    }
}
