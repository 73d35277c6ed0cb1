//! A Parquet file's [`FileStats`], computed from the footer the encoder just wrote (design
//! `docs/design/delta.md`, section 7, "Per-file statistics"): no I/O, the footer is in memory.
//!
//! Each leaf column reachable through structs (`["geo", "lat_e6"]`) gets the row-group
//! statistics that parquet's `StatisticsConverter` turns into Arrow arrays, reduced over the
//! row groups. Only bounds every reader may trust are kept (the rules are on [`FileStats`]):
//!
//! - a row group without statistics makes the column's null count and bounds unknown; a row
//!   group of nulls only has no bounds and needs none (an all-null column has a null count
//!   and no bounds);
//! - a max Parquet marks inexact (a truncated string, incremented) is dropped, and so is any
//!   inexact min but a string's (Parquet cuts a string min to a prefix, which is ≤ the value);
//! - floats keep bounds only when every row group's NaN count is known and 0 and both bounds
//!   are finite: Parquet's min/max leave NaN out, and a max without NaN would let a reader
//!   skip a file holding NaN;
//! - strings: the min is cut to [`FileStats::STRING_CHARS_MAX`] characters, a longer max is
//!   dropped;
//! - timestamps of any unit become microseconds (a min rounded down, a max rounded up from
//!   nanoseconds), dates `"YYYY-MM-DD"`, decimals their decimal text;
//! - booleans keep their bounds; binary, `Float16`, times, durations, `Date64`, `Decimal256`
//!   get a null count only, and columns inside lists and maps nothing (their Parquet null
//!   count counts nulls at every level, not the column's).
//!
//! A column whose statistics cannot be converted is left out with a warning: fewer statistics
//! only make readers skip fewer files, and the vote must not fail for them.

use std::cmp::Ordering;
use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Decimal32Type, Decimal64Type, Field, Float32Type,
    Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Schema, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use chrono::NaiveDate;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;
use serde_json::Value;

use crate::protocol::{ColumnPath, FileStats};

/// The statistics of the Parquet file whose footer is `footer`, written with the Arrow
/// `schema`.
pub(crate) fn file_stats(schema: &Schema, footer: &ParquetMetaData) -> FileStats {
    let mut stats = FileStats {
        num_records: u64::try_from(footer.file_metadata().num_rows()).unwrap_or(0),
        ..FileStats::default()
    };
    let descr = footer.file_metadata().schema_descr();
    let parquet_leaves: HashMap<&[String], usize> = descr
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| (c.path().parts(), i))
        .collect();
    let mut leaves = Vec::new();
    for field in schema.fields() {
        struct_leaves(field, &mut Vec::new(), &mut leaves);
    }
    for (path, field) in leaves {
        let Some(&index) = parquet_leaves.get(path.as_slice()) else {
            continue;
        };
        if let Err(e) = column_stats(&mut stats, &path, field, index, footer) {
            tracing::warn!(
                column = %path.join("."),
                error = %e,
                "no statistics for this column"
            );
        }
    }
    stats
}

/// The leaves of `field` reachable through structs only, with their paths.
fn struct_leaves<'a>(
    field: &'a Field,
    path: &mut ColumnPath,
    out: &mut Vec<(ColumnPath, &'a Field)>,
) {
    path.push(field.name().clone());
    match field.data_type() {
        DataType::Struct(children) => {
            for child in children {
                struct_leaves(child, path, out);
            }
        }
        t if t.is_nested() => {}
        _ => out.push((path.clone(), field)),
    }
    path.pop();
}

/// Which way a value converted to a coarser unit is rounded, so that it stays a bound.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Round {
    Down,
    Up,
}

/// One bound, in a form that compares across row groups.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Date(i32),
    Micros(i64),
    /// The unscaled value; the scale is the column's.
    Decimal(i128),
}

impl Scalar {
    fn compare(&self, other: &Scalar) -> Option<Ordering> {
        use Scalar::*;
        match (self, other) {
            (Bool(a), Bool(b)) => Some(a.cmp(b)),
            (Int(a), Int(b)) | (Decimal(a), Decimal(b)) => Some(a.cmp(b)),
            (Float(a), Float(b)) => a.partial_cmp(b),
            // Byte order of UTF-8 is code point order, Parquet's order of strings.
            (Str(a), Str(b)) => Some(a.cmp(b)),
            (Date(a), Date(b)) => Some(a.cmp(b)),
            (Micros(a), Micros(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

fn column_stats(
    stats: &mut FileStats,
    path: &ColumnPath,
    field: &Field,
    index: usize,
    footer: &ParquetMetaData,
) -> parquet::errors::Result<()> {
    let descr = footer.file_metadata().schema_descr();
    let row_groups = footer.row_groups();
    let converter = StatisticsConverter::from_column_index(index, field, descr)?
        .with_missing_null_counts_as_zero(false);
    let nulls = converter.row_group_null_counts(row_groups)?;
    if nulls.null_count() == 0 {
        stats
            .null_count
            .insert(path.clone(), nulls.values().iter().sum());
    }

    let mins = converter.row_group_mins(row_groups)?;
    let maxes = converter.row_group_maxes(row_groups)?;
    let min_exact = converter.row_group_is_min_value_exact(row_groups)?;
    let max_exact = converter.row_group_is_max_value_exact(row_groups)?;
    let is_float = matches!(mins.data_type(), DataType::Float32 | DataType::Float64);
    let is_string = matches!(
        mins.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    if is_float {
        let nans = converter.row_group_nan_counts(row_groups)?;
        if nans.null_count() > 0 || nans.values().iter().any(|&n| n > 0) {
            return Ok(());
        }
    }

    let mut min: Option<Scalar> = None;
    let mut max: Option<Scalar> = None;
    let (mut min_known, mut max_known) = (true, true);
    for (i, row_group) in row_groups.iter().enumerate() {
        let rows = u64::try_from(row_group.num_rows()).unwrap_or(0);
        if nulls.is_valid(i) && nulls.value(i) == rows {
            continue;
        }
        let exact = |flags: &arrow::array::BooleanArray| flags.is_valid(i) && flags.value(i);
        match scalar(&mins, i, Round::Down) {
            Some(v) if exact(&min_exact) || is_string => {
                if min
                    .as_ref()
                    .is_none_or(|m| v.compare(m) == Some(Ordering::Less))
                {
                    min = Some(v);
                }
            }
            _ => min_known = false,
        }
        match scalar(&maxes, i, Round::Up) {
            Some(v) if exact(&max_exact) => {
                if max
                    .as_ref()
                    .is_none_or(|m| v.compare(m) == Some(Ordering::Greater))
                {
                    max = Some(v);
                }
            }
            _ => max_known = false,
        }
    }
    let min = min
        .filter(|_| min_known)
        .and_then(|v| json(v, mins.data_type(), Round::Down));
    let max = max
        .filter(|_| max_known)
        .and_then(|v| json(v, maxes.data_type(), Round::Up));
    if is_float && (min.is_none() || max.is_none()) {
        return Ok(());
    }
    if let Some(v) = min {
        stats.min_values.insert(path.clone(), v);
    }
    if let Some(v) = max {
        stats.max_values.insert(path.clone(), v);
    }
    Ok(())
}

/// Element `i` of a row-group statistics array, or `None` when unknown or of a type without
/// bounds.
fn scalar(array: &ArrayRef, i: usize, round: Round) -> Option<Scalar> {
    if array.is_null(i) {
        return None;
    }
    Some(match array.data_type() {
        DataType::Boolean => Scalar::Bool(array.as_boolean().value(i)),
        DataType::Int8 => Scalar::Int(array.as_primitive::<Int8Type>().value(i).into()),
        DataType::Int16 => Scalar::Int(array.as_primitive::<Int16Type>().value(i).into()),
        DataType::Int32 => Scalar::Int(array.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => Scalar::Int(array.as_primitive::<Int64Type>().value(i).into()),
        DataType::UInt8 => Scalar::Int(array.as_primitive::<UInt8Type>().value(i).into()),
        DataType::UInt16 => Scalar::Int(array.as_primitive::<UInt16Type>().value(i).into()),
        DataType::UInt32 => Scalar::Int(array.as_primitive::<UInt32Type>().value(i).into()),
        DataType::UInt64 => Scalar::Int(array.as_primitive::<UInt64Type>().value(i).into()),
        DataType::Float32 => Scalar::Float(array.as_primitive::<Float32Type>().value(i).into()),
        DataType::Float64 => Scalar::Float(array.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => Scalar::Str(array.as_string::<i32>().value(i).to_owned()),
        DataType::LargeUtf8 => Scalar::Str(array.as_string::<i64>().value(i).to_owned()),
        DataType::Utf8View => Scalar::Str(array.as_string_view().value(i).to_owned()),
        DataType::Date32 => Scalar::Date(array.as_primitive::<Date32Type>().value(i)),
        DataType::Timestamp(unit, _) => {
            let micros = match unit {
                TimeUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .value(i)
                    .checked_mul(1_000_000)?,
                TimeUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .value(i)
                    .checked_mul(1_000)?,
                TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(i),
                TimeUnit::Nanosecond => {
                    let nanos = array.as_primitive::<TimestampNanosecondType>().value(i);
                    let down = nanos.div_euclid(1_000);
                    if round == Round::Up && nanos.rem_euclid(1_000) != 0 {
                        down + 1
                    } else {
                        down
                    }
                }
            };
            Scalar::Micros(micros)
        }
        DataType::Decimal32(_, _) => {
            Scalar::Decimal(array.as_primitive::<Decimal32Type>().value(i).into())
        }
        DataType::Decimal64(_, _) => {
            Scalar::Decimal(array.as_primitive::<Decimal64Type>().value(i).into())
        }
        DataType::Decimal128(_, _) => {
            Scalar::Decimal(array.as_primitive::<Decimal128Type>().value(i))
        }
        _ => return None,
    })
}

/// A bound as the typed JSON of [`FileStats`], or `None` when it cannot be one (a non-finite
/// float, a string max too long to keep, a date out of range).
fn json(v: Scalar, data_type: &DataType, round: Round) -> Option<Value> {
    Some(match v {
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => match i64::try_from(i) {
            Ok(i) => Value::from(i),
            Err(_) => Value::from(u64::try_from(i).ok()?),
        },
        Scalar::Float(f) => Value::Number(serde_json::Number::from_f64(f)?),
        Scalar::Str(s) => {
            if s.chars().count() <= FileStats::STRING_CHARS_MAX {
                Value::String(s)
            } else if round == Round::Down {
                Value::String(s.chars().take(FileStats::STRING_CHARS_MAX).collect())
            } else {
                return None;
            }
        }
        Scalar::Date(days) => {
            let day = NaiveDate::from_num_days_from_ce_opt(days.checked_add(719_163)?)?;
            Value::String(day.format("%Y-%m-%d").to_string())
        }
        Scalar::Micros(m) => Value::from(m),
        Scalar::Decimal(unscaled) => {
            let scale = match data_type {
                DataType::Decimal32(_, s)
                | DataType::Decimal64(_, s)
                | DataType::Decimal128(_, s) => *s,
                _ => return None,
            };
            Value::String(decimal_text(unscaled, scale))
        }
    })
}

/// `unscaled × 10^-scale` as decimal text with exactly `scale` fraction digits (`-1250`, 2 →
/// `"-12.50"`); a negative scale appends zeros.
fn decimal_text(unscaled: i128, scale: i8) -> String {
    let sign = if unscaled < 0 { "-" } else { "" };
    let digits = unscaled.unsigned_abs().to_string();
    if scale <= 0 {
        let zeros = if unscaled == 0 {
            0
        } else {
            scale.unsigned_abs()
        };
        return format!("{sign}{digits}{}", "0".repeat(usize::from(zeros)));
    }
    let scale = usize::from(scale.unsigned_abs());
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
        Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, LargeStringArray, ListArray,
        StringArray, StringViewArray, StructArray, TimestampMicrosecondArray,
        TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray, UInt64Array,
    };
    use arrow::datatypes::Fields;
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    use serde_json::json;

    use super::*;
    use crate::format::parquet_format::ParquetEncoder;
    use crate::format::Encoder;

    fn path(p: &str) -> ColumnPath {
        p.split('.').map(str::to_owned).collect()
    }

    /// Writes each of `row_groups` as a row group of its own with our encoder and returns the
    /// statistics of its footer, after checking that the footer read back from the bytes says
    /// the same as the one the writer returned.
    fn stats_with(props: WriterProperties, row_groups: &[RecordBatch]) -> FileStats {
        let schema = row_groups[0].schema();
        let mut encoder: Box<dyn Encoder> =
            Box::new(ParquetEncoder::new(schema.clone(), props).unwrap());
        let mut out = Vec::new();
        for batch in row_groups {
            encoder.write(batch, &mut out).unwrap();
            encoder.flush(&mut out).unwrap();
        }
        let footer = encoder.finish(&mut out).unwrap().expect("a Parquet footer");
        assert_eq!(footer.num_row_groups(), row_groups.len());
        let stats = file_stats(&schema, &footer);
        let reread = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(out)).unwrap();
        assert_eq!(
            file_stats(&schema, reread.metadata()),
            stats,
            "the footer read back says what the writer's footer said"
        );
        let rows: usize = row_groups.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(stats.num_records, rows as u64);
        stats
    }

    fn stats_of(row_groups: &[RecordBatch]) -> FileStats {
        stats_with(WriterProperties::builder().build(), row_groups)
    }

    /// One-column batches, one per row group.
    fn column(name: &str, arrays: Vec<ArrayRef>) -> Vec<RecordBatch> {
        arrays
            .into_iter()
            .map(|a| RecordBatch::try_from_iter([(name, a)]).unwrap())
            .collect()
    }

    /// (min, max, null count) of column `p`.
    fn bounds(s: &FileStats, p: &str) -> (Option<Value>, Option<Value>, Option<u64>) {
        (
            s.min_values.get(&path(p)).cloned(),
            s.max_values.get(&path(p)).cloned(),
            s.null_count.get(&path(p)).copied(),
        )
    }

    #[test]
    fn integers_reduce_over_row_groups() {
        let s = stats_of(&column(
            "i",
            vec![
                Arc::new(Int64Array::from(vec![Some(5), None, Some(9)])),
                Arc::new(Int64Array::from(vec![Some(-7), Some(3), None])),
            ],
        ));
        assert_eq!(bounds(&s, "i"), (Some(json!(-7)), Some(json!(9)), Some(2)));
        for (array, min, max) in [
            (
                Arc::new(Int8Array::from(vec![i8::MIN, i8::MAX])) as ArrayRef,
                json!(-128),
                json!(127),
            ),
            (
                Arc::new(Int16Array::from(vec![-300, 300])),
                json!(-300),
                json!(300),
            ),
            (
                Arc::new(Int32Array::from(vec![i32::MIN, 0])),
                json!(i32::MIN),
                json!(0),
            ),
            (
                Arc::new(UInt64Array::from(vec![1, u64::MAX])),
                json!(1),
                json!(u64::MAX),
            ),
        ] {
            let s = stats_of(&column("i", vec![array]));
            assert_eq!(bounds(&s, "i"), (Some(min), Some(max), Some(0)));
        }
    }

    #[test]
    fn floats_have_bounds_only_without_nan_and_infinity() {
        let s = stats_of(&column(
            "f",
            vec![
                Arc::new(Float64Array::from(vec![Some(1.5), None])),
                Arc::new(Float64Array::from(vec![Some(-0.25), Some(99.0)])),
            ],
        ));
        assert_eq!(
            bounds(&s, "f"),
            (Some(json!(-0.25)), Some(json!(99.0)), Some(1))
        );
        // A NaN in one row group: Parquet's bounds leave it out, so none are kept.
        let s = stats_of(&column(
            "f",
            vec![
                Arc::new(Float64Array::from(vec![1.5, 2.0])),
                Arc::new(Float64Array::from(vec![f64::NAN, 3.0])),
            ],
        ));
        assert_eq!(bounds(&s, "f"), (None, None, Some(0)));
        let s = stats_of(&column(
            "f",
            vec![Arc::new(Float32Array::from(vec![Some(f32::NAN), None]))],
        ));
        assert_eq!(bounds(&s, "f"), (None, None, Some(1)));
        let s = stats_of(&column(
            "f",
            vec![Arc::new(Float32Array::from(vec![0.5, f32::INFINITY]))],
        ));
        assert_eq!(bounds(&s, "f"), (None, None, Some(0)));
        let s = stats_of(&column(
            "f",
            vec![Arc::new(Float32Array::from(vec![0.5, -2.0]))],
        ));
        assert_eq!(
            bounds(&s, "f"),
            (Some(json!(-2.0)), Some(json!(0.5)), Some(0))
        );
    }

    #[test]
    fn strings_keep_a_short_prefix_min_and_only_a_short_max() {
        let s = stats_of(&column(
            "s",
            vec![
                Arc::new(StringArray::from(vec![Some("pear"), None])),
                Arc::new(StringArray::from(vec![Some("apple"), Some("zoe")])),
            ],
        ));
        assert_eq!(
            bounds(&s, "s"),
            (Some(json!("apple")), Some(json!("zoe")), Some(1))
        );
        // Longer than the bound kept: the min is cut, the max dropped. 40 characters of two
        // bytes each are longer than Parquet's 64-byte truncation too, which marks the max
        // inexact.
        let long_min = format!("b{}", "ä".repeat(39));
        let long_max = "ä".repeat(40);
        let s = stats_of(&column(
            "s",
            vec![Arc::new(StringArray::from(vec![
                long_min.as_str(),
                long_max.as_str(),
            ]))],
        ));
        let cut: String = long_min.chars().take(FileStats::STRING_CHARS_MAX).collect();
        assert_eq!(bounds(&s, "s"), (Some(json!(cut)), None, Some(0)));
        // A max Parquet keeps exact (40 bytes) is still dropped when longer than the bound.
        let ascii = "q".repeat(FileStats::STRING_CHARS_MAX + 8);
        let s = stats_of(&column(
            "s",
            vec![Arc::new(StringArray::from(vec!["b", ascii.as_str()]))],
        ));
        assert_eq!(bounds(&s, "s"), (Some(json!("b")), None, Some(0)));
        // Exactly the bound: kept whole.
        let exact = "y".repeat(FileStats::STRING_CHARS_MAX);
        let s = stats_of(&column(
            "s",
            vec![Arc::new(StringArray::from(vec!["b", exact.as_str()]))],
        ));
        assert_eq!(
            bounds(&s, "s"),
            (Some(json!("b")), Some(json!(exact)), Some(0))
        );
        // Other string arrays give the same.
        let expected = (Some(json!("apple")), Some(json!("pear")), Some(0));
        let large: ArrayRef = Arc::new(LargeStringArray::from(vec!["pear", "apple"]));
        let view: ArrayRef = Arc::new(StringViewArray::from(vec!["pear", "apple"]));
        let dict: ArrayRef = Arc::new(
            vec!["pear", "apple", "pear"]
                .into_iter()
                .collect::<DictionaryArray<Int32Type>>(),
        );
        for array in [large, view, dict] {
            let s = stats_of(&column("s", vec![array]));
            assert_eq!(bounds(&s, "s"), expected);
        }
    }

    #[test]
    fn booleans_dates_and_decimals() {
        let s = stats_of(&column(
            "b",
            vec![Arc::new(BooleanArray::from(vec![
                Some(true),
                None,
                Some(false),
            ]))],
        ));
        assert_eq!(
            bounds(&s, "b"),
            (Some(json!(false)), Some(json!(true)), Some(1))
        );
        // 2026-11-30 is day 20,787; 1969-12-31 is day -1.
        let s = stats_of(&column(
            "d",
            vec![Arc::new(Date32Array::from(vec![20_787, -1]))],
        ));
        assert_eq!(
            bounds(&s, "d"),
            (
                Some(json!("1969-12-31")),
                Some(json!("2026-11-30")),
                Some(0)
            )
        );
        let decimals = Decimal128Array::from(vec![Some(-1250), Some(100_000), None])
            .with_precision_and_scale(10, 2)
            .unwrap();
        let s = stats_of(&column("m", vec![Arc::new(decimals)]));
        assert_eq!(
            bounds(&s, "m"),
            (Some(json!("-12.50")), Some(json!("1000.00")), Some(1))
        );
        // 38 digits: stored as a 16-byte fixed-length array, never truncated by Parquet.
        let big = Decimal128Array::from(vec![-(10_i128.pow(37)), 10_i128.pow(38) - 1])
            .with_precision_and_scale(38, 5)
            .unwrap();
        let s = stats_of(&column("m", vec![Arc::new(big)]));
        assert_eq!(
            bounds(&s, "m"),
            (
                Some(json!("-100000000000000000000000000000000.00000")),
                Some(json!("999999999999999999999999999999999.99999")),
                Some(0)
            )
        );
    }

    #[test]
    fn timestamps_of_every_unit_become_microseconds() {
        let utc: Option<Arc<str>> = Some("UTC".into());
        // 2026-11-30T13:00:00Z, in seconds.
        let t = 1_796_043_600_i64;
        let cases: Vec<(ArrayRef, i64, i64)> = vec![
            (
                Arc::new(TimestampSecondArray::from(vec![t, t + 1]).with_timezone_opt(utc.clone())),
                t * 1_000_000,
                (t + 1) * 1_000_000,
            ),
            (
                Arc::new(
                    TimestampMillisecondArray::from(vec![t * 1000 + 7, t * 1000 + 999])
                        .with_timezone_opt(utc.clone()),
                ),
                t * 1_000_000 + 7_000,
                t * 1_000_000 + 999_000,
            ),
            (
                Arc::new(
                    TimestampMicrosecondArray::from(vec![t * 1_000_000 + 1, t * 1_000_000 + 2])
                        .with_timezone_opt(Some("+01:00")),
                ),
                t * 1_000_000 + 1,
                t * 1_000_000 + 2,
            ),
            // Nanoseconds: the min rounds down, the max up, so both stay bounds.
            (
                Arc::new(
                    TimestampNanosecondArray::from(vec![
                        t * 1_000_000_000 + 1_999,
                        t * 1_000_000_000 + 5_001,
                    ])
                    .with_timezone_opt(utc.clone()),
                ),
                t * 1_000_000 + 1,
                t * 1_000_000 + 6,
            ),
            // Without a time zone, and before the epoch: down is still down.
            (
                Arc::new(TimestampNanosecondArray::from(vec![-1_500, -1_000])),
                -2,
                -1,
            ),
        ];
        for (array, min, max) in cases {
            let what = array.data_type().clone();
            let s = stats_of(&column("ts", vec![array]));
            assert_eq!(
                bounds(&s, "ts"),
                (Some(json!(min)), Some(json!(max)), Some(0)),
                "{what}"
            );
        }
    }

    #[test]
    fn struct_leaves_have_paths_and_count_their_parents_nulls() {
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("z", DataType::Int16, true)),
            Arc::new(Int16Array::from(vec![Some(-7), None, Some(7)])) as ArrayRef,
        )]);
        let geo_fields = Fields::from(vec![
            Field::new("lat_e6", DataType::Int32, true),
            Field::new("inner", inner.data_type().clone(), true),
        ]);
        let geo = StructArray::try_new(
            geo_fields,
            vec![
                Arc::new(Int32Array::from(vec![Some(-3), Some(0), Some(51_000_000)])),
                Arc::new(inner),
            ],
            // The second row's `geo` is null: its leaves are null there too.
            Some(vec![true, false, true].into()),
        )
        .unwrap();
        let tags = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1)]),
            None,
            Some(vec![]),
        ]);
        let batch = RecordBatch::try_from_iter([
            ("geo", Arc::new(geo) as ArrayRef),
            ("tags", Arc::new(tags) as ArrayRef),
        ])
        .unwrap();
        let s = stats_of(&[batch]);
        assert_eq!(
            bounds(&s, "geo.lat_e6"),
            (Some(json!(-3)), Some(json!(51_000_000)), Some(1))
        );
        assert_eq!(
            bounds(&s, "geo.inner.z"),
            (Some(json!(-7)), Some(json!(7)), Some(1))
        );
        // Lists get nothing: only struct leaves are columns of the statistics.
        assert_eq!(
            s.columns().into_iter().cloned().collect::<Vec<_>>(),
            vec![path("geo.inner.z"), path("geo.lat_e6")]
        );
    }

    #[test]
    fn all_null_columns_count_nulls_and_have_no_bounds() {
        let s = stats_of(&column(
            "n",
            vec![
                Arc::new(Int64Array::from(vec![None, None])),
                Arc::new(Int64Array::from(vec![None::<i64>])),
            ],
        ));
        assert_eq!(bounds(&s, "n"), (None, None, Some(3)));
        // A row group of nulls only does not hide the others' bounds.
        let s = stats_of(&column(
            "n",
            vec![
                Arc::new(StringArray::from(vec![None::<&str>])),
                Arc::new(StringArray::from(vec![Some("k")])),
            ],
        ));
        assert_eq!(
            bounds(&s, "n"),
            (Some(json!("k")), Some(json!("k")), Some(1))
        );
    }

    #[test]
    fn binary_gets_a_null_count_only() {
        let s = stats_of(&column(
            "b",
            vec![Arc::new(BinaryArray::from(vec![
                Some(&b"\x00\x01"[..]),
                None,
            ]))],
        ));
        assert_eq!(bounds(&s, "b"), (None, None, Some(1)));
    }

    #[test]
    fn columns_written_without_statistics_have_no_entry() {
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::None)
            .build();
        let s = stats_with(
            props,
            &column("i", vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]),
        );
        assert_eq!(s.num_records, 3);
        assert!(s.columns().is_empty(), "{s:?}");
    }

    #[test]
    fn decimal_text_has_exactly_the_scale() {
        for (unscaled, scale, text) in [
            (-1250, 2, "-12.50"),
            (5, 3, "0.005"),
            (-5, 3, "-0.005"),
            (0, 2, "0.00"),
            (42, 0, "42"),
            (42, -2, "4200"),
            (0, -2, "0"),
            (i128::MAX, 38, "1.70141183460469231731687303715884105727"),
        ] {
            assert_eq!(decimal_text(unscaled, scale), text, "{unscaled} {scale}");
        }
    }
}
