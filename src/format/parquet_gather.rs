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
//! Flat columns only (the types JSON and CSV inputs give: integers, floats, dates,
//! timestamps, strings, binary, booleans); a schema with any other column gathers slices as
//! before.

use std::sync::Arc;

use arrow::array::builder::{BooleanBuilder, GenericByteBuilder, PrimitiveBuilder};
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    ArrowPrimitiveType, BinaryType, ByteArrayType, DataType, Date32Type, Date64Type, Float32Type,
    Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, LargeBinaryType, LargeUtf8Type,
    SchemaRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
    Utf8Type,
};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

/// The gathered rows of one file: a growing column per field of the schema.
pub(crate) struct Gathered {
    schema: SchemaRef,
    columns: Vec<Box<dyn Column>>,
    rows: usize,
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
        })
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
        for (column, array) in self.columns.iter_mut().zip(batch.columns()) {
            column.append(array.as_ref())?;
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    /// The gathered rows as one batch, leaving none behind.
    pub(crate) fn take(&mut self) -> Result<RecordBatch, ArrowError> {
        let columns = self.columns.iter_mut().map(|c| c.finish()).collect();
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

/// A column being gathered.
trait Column: Send {
    fn append(&mut self, array: &dyn Array) -> Result<(), ArrowError>;
    fn finish(&mut self) -> ArrayRef;
}

fn mismatch(want: &DataType, got: &DataType) -> ArrowError {
    ArrowError::SchemaError(format!("a {got} column for a file's {want} column"))
}

struct Primitive<T: ArrowPrimitiveType>(PrimitiveBuilder<T>, DataType);

impl<T: ArrowPrimitiveType> Column for Primitive<T> {
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

struct Bytes<T: ByteArrayType>(GenericByteBuilder<T>, DataType);

impl<T: ByteArrayType> Column for Bytes<T> {
    fn append(&mut self, array: &dyn Array) -> Result<(), ArrowError> {
        let a = array
            .as_bytes_opt::<T>()
            .ok_or_else(|| mismatch(&self.1, array.data_type()))?;
        self.0.append_array(a)
    }

    fn finish(&mut self) -> ArrayRef {
        Arc::new(self.0.finish())
    }
}

struct Boolean(BooleanBuilder);

impl Column for Boolean {
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
        PrimitiveBuilder::<T>::new().with_data_type(dt.clone()),
        dt.clone(),
    ))
}

fn bytes<T: ByteArrayType>(dt: &DataType) -> Box<dyn Column> {
    Box::new(Bytes::<T>(GenericByteBuilder::<T>::new(), dt.clone()))
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
        DataType::Boolean => Box::new(Boolean(BooleanBuilder::new())),
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
}
