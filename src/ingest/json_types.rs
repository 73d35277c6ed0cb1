//! The typing rule for JSON input: a value lands in its column only if it fits exactly.
//!
//! arrow's JSON decoder is lenient by default: it truncates `1.75` into an integer column,
//! reads `"5"` into one, rounds integers beyond `i64` through a float, and drops fields the
//! schema does not have. `ingest` decodes with [`StrictJson`] instead, whose decoders accept:
//!
//! | column type | accepts | rejects (a bad record) |
//! |---|---|---|
//! | `Int8`…`Int64`, `UInt8`…`UInt64` | a JSON integer written without fraction or exponent, in range | `1.0`, `1e3`, `1.75`, out of range, `"5"`, `true` |
//! | `Float32`, `Float64` | any JSON number, rounded to the nearest float (as every JSON reader does) | a number beyond the type's range, `"1.5"`, `true` |
//! | `Boolean` | `true`, `false` | `"true"`, `1` |
//! | `Utf8`, `LargeUtf8` | a JSON string | numbers, booleans, objects, arrays |
//! | `Date32` | a string `YYYY-MM-DD` | a date with a time, numbers |
//! | `Timestamp(unit, tz)` | an RFC 3339 / ISO 8601 string with no digits below the unit; an integer count of units since the epoch | finer precision than the unit, fractions, out of range |
//! | `Decimal128(p, s)`, `Decimal256(p, s)` | a JSON number or a string spelling one (`12.34`, `"12.34"`, `1.5e3`), with no digit other than `0` beyond the scale and at most `p` digits | `12.345` in scale 2, more digits than `p`, `" 1"`, `"1,5"`, `true` |
//! | `List`, `LargeList`, `Struct` | an array / object whose elements / fields fit | anything else; a field the struct does not have |
//! | `Null` | `null` | any value |
//!
//! `null` (or a missing field) fits a nullable column only. A field that is not in the schema
//! is a bad record, at the top level and inside structs ([`arrow::json::ReaderBuilder::with_strict_mode`],
//! which covers only that). Every other type is refused when the schema is given
//! ([`check_schema`]), rather than decoded by a rule nobody wrote down.
//!
//! The checks are the decoders: each value is parsed once, as arrow's own decoders would.

use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::builder::PrimitiveBuilder;
use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, StringArray};
use arrow::compute::kernels::cast_utils::string_to_datetime;
use arrow::datatypes::{
    ArrowPrimitiveType, ArrowTimestampType, DataType, Date32Type, Decimal128Type, Decimal256Type,
    DecimalType, Field, FieldRef, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Schema, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow::error::ArrowError;
use arrow::json::reader::{ArrayDecoder, DecoderContext, DecoderFactory, Tape, TapeElement};
use serde_json::Value;

/// The decoders of the JSON typing rule (see the module doc); register with
/// [`arrow::json::ReaderBuilder::with_decoder_factory`], together with strict mode.
#[derive(Debug, Default)]
pub struct StrictJson;

impl DecoderFactory for StrictJson {
    fn make_default_decoder(
        &self,
        _ctx: &DecoderContext,
        field: &FieldRef,
        _is_nullable: bool,
    ) -> Result<Option<Box<dyn ArrayDecoder>>, ArrowError> {
        let dt = field.data_type();
        let d: Box<dyn ArrayDecoder> = match dt {
            DataType::Int8 => Number::<Int8Type>::boxed(dt, parse_int::<i8>),
            DataType::Int16 => Number::<Int16Type>::boxed(dt, parse_int::<i16>),
            DataType::Int32 => Number::<Int32Type>::boxed(dt, parse_int::<i32>),
            DataType::Int64 => Number::<Int64Type>::boxed(dt, parse_int::<i64>),
            DataType::UInt8 => Number::<UInt8Type>::boxed(dt, parse_int::<u8>),
            DataType::UInt16 => Number::<UInt16Type>::boxed(dt, parse_int::<u16>),
            DataType::UInt32 => Number::<UInt32Type>::boxed(dt, parse_int::<u32>),
            DataType::UInt64 => Number::<UInt64Type>::boxed(dt, parse_int::<u64>),
            DataType::Float32 => Number::<Float32Type>::boxed(dt, parse_f32),
            DataType::Float64 => Number::<Float64Type>::boxed(dt, parse_f64),
            DataType::Date32 => Box::new(Date32Decoder),
            DataType::Timestamp(unit, tz) => {
                let tz: Tz = tz.as_deref().unwrap_or("+00:00").parse()?;
                match unit {
                    TimeUnit::Second => Timestamp::<TimestampSecondType>::boxed(dt, tz),
                    TimeUnit::Millisecond => Timestamp::<TimestampMillisecondType>::boxed(dt, tz),
                    TimeUnit::Microsecond => Timestamp::<TimestampMicrosecondType>::boxed(dt, tz),
                    TimeUnit::Nanosecond => Timestamp::<TimestampNanosecondType>::boxed(dt, tz),
                }
            }
            DataType::Decimal128(p, sc) => Decimal::<Decimal128Type>::boxed(dt, *p, *sc),
            DataType::Decimal256(p, sc) => Decimal::<Decimal256Type>::boxed(dt, *p, *sc),
            // Null, Boolean, Utf8, LargeUtf8 (without primitive coercion), List, LargeList
            // and Struct (in strict mode): arrow's own decoders already follow the rule.
            _ => return Ok(None),
        };
        Ok(Some(d))
    }
}

/// Checks that every column of `schema` has a type the JSON typing rule covers; the error
/// names the first that does not.
pub fn check_schema(schema: &Schema) -> Result<(), String> {
    fn check(path: &str, dt: &DataType) -> Result<(), String> {
        match dt {
            DataType::Null => Ok(()),
            DataType::Decimal128(p, s) => check_decimal::<Decimal128Type>(path, dt, *p, *s),
            DataType::Decimal256(p, s) => check_decimal::<Decimal256Type>(path, dt, *p, *s),
            t if is_scalar(t) => Ok(()),
            DataType::List(f) | DataType::LargeList(f) => {
                check(&format!("{path}[]"), f.data_type())
            }
            DataType::Struct(fields) => fields
                .iter()
                .try_for_each(|f| check(&format!("{path}.{}", f.name()), f.data_type())),
            other => Err(format!(
                "column `{path}` has type {other}, which JSON input does not support (supported: \
                 Boolean, Int8..Int64, UInt8..UInt64, Float32, Float64, Utf8, LargeUtf8, Date32, \
                 Timestamp, Decimal128, Decimal256, List, LargeList, Struct, Null)"
            )),
        }
    }
    for f in schema.fields() {
        check(f.name(), f.data_type())?;
        if let DataType::Timestamp(_, Some(tz)) = f.data_type() {
            tz.parse::<Tz>()
                .map_err(|e| format!("column `{}` has an unknown time zone: {e}", f.name()))?;
        }
    }
    Ok(())
}

/// The first key that one object of the JSON text `rec` holds twice, at any depth (`"a"` and
/// `"\u0061"` are one key); `None` if there is none, or if `rec` is not JSON (the decoder
/// says what is wrong with it). arrow's decoder keeps the last value of a repeated key
/// without a word: a record that names one field twice is malformed, as a CSV header that
/// names one column twice is.
pub fn repeated_key(rec: &[u8]) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Scan<'a>(&'a mut Option<String>);
    impl<'de> DeserializeSeed<'de> for Scan<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Scan<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Scan(self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut keys = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if !keys.insert(key.clone()) && self.0.is_none() {
                    *self.0 = Some(key.into_owned());
                }
                map.next_value_seed(Scan(self.0))?;
            }
            Ok(())
        }
    }
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(rec);
    let _ = Scan(&mut found).deserialize(&mut de);
    found
}

/// `schema` with every `Timestamp(Second, tz)` column (also inside lists and structs) made
/// `Timestamp(Millisecond, tz)`: the same instants, exactly, in a unit every output format can
/// name. Parquet has no logical type for seconds, so a column of seconds would be written as a
/// bare INT64 that pyarrow, DuckDB and Delta readers read as integers. The names of UTC (`UTC`,
/// `Etc/UTC`, `Z`, as delta-rs and pyarrow spell it) become the offset `+00:00`: the same zone,
/// which arrow takes without a time zone database.
pub fn exact_in_every_format(schema: Schema) -> Schema {
    fn zone(tz: &Option<Arc<str>>) -> Option<Arc<str>> {
        match tz.as_deref() {
            Some(z)
                if ["utc", "etc/utc", "z", "etc/uct", "uct", "zulu", "etc/zulu"]
                    .contains(&z.to_ascii_lowercase().as_str()) =>
            {
                Some("+00:00".into())
            }
            _ => tz.clone(),
        }
    }
    fn widen(dt: &DataType) -> DataType {
        match dt {
            DataType::Timestamp(TimeUnit::Second, tz) => {
                DataType::Timestamp(TimeUnit::Millisecond, zone(tz))
            }
            DataType::Timestamp(unit, tz) => DataType::Timestamp(*unit, zone(tz)),
            DataType::List(f) => DataType::List(Arc::new(field(f))),
            DataType::LargeList(f) => DataType::LargeList(Arc::new(field(f))),
            DataType::Struct(fields) => DataType::Struct(fields.iter().map(|f| field(f)).collect()),
            other => other.clone(),
        }
    }
    fn field(f: &Field) -> Field {
        f.clone().with_data_type(widen(f.data_type()))
    }
    let fields: Vec<Field> = schema.fields().iter().map(|f| field(f)).collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Integer literals of a record that serde_json reads as floats, by column path (`a`, `a.b`,
/// `a[]`, as [`refine_inferred`] names them): `-0`, and integers beyond both `Int64` and
/// `UInt64`. Arrow's inference types them `Float64` like fractions; [`refine_inferred`] tells
/// them apart by these. Only the top-level fields in `fields` are looked at, when given.
pub(super) fn float_read_integers(
    record: &[u8],
    fields: Option<&[&str]>,
    into: &mut std::collections::HashMap<String, Vec<String>>,
) {
    use serde_json::value::RawValue;
    fn walk(path: &str, raw: &RawValue, into: &mut std::collections::HashMap<String, Vec<String>>) {
        let t = raw.get().trim();
        match t.as_bytes().first() {
            Some(b'{') => {
                let Ok(m) =
                    serde_json::from_str::<std::collections::HashMap<String, Box<RawValue>>>(t)
                else {
                    return;
                };
                for (k, v) in &m {
                    walk(&format!("{path}.{k}"), v, into);
                }
            }
            Some(b'[') => {
                let Ok(items) = serde_json::from_str::<Vec<Box<RawValue>>>(t) else {
                    return;
                };
                for v in &items {
                    walk(&format!("{path}[]"), v, into);
                }
            }
            Some(b'-' | b'0'..=b'9')
                if !t.contains(['.', 'e', 'E'])
                    && (t == "-0" || (t.parse::<i64>().is_err() && t.parse::<u64>().is_err())) =>
            {
                into.entry(path.to_string())
                    .or_default()
                    .push(t.to_string());
            }
            _ => {}
        }
    }
    let Ok(m) = serde_json::from_slice::<std::collections::HashMap<String, Box<RawValue>>>(record)
    else {
        return;
    };
    for (k, v) in &m {
        if fields.is_none_or(|f| f.contains(&k.as_str())) {
            walk(k, v, into);
        }
    }
}

/// Where arrow's inference widened integers to `Float64` (which would round them), makes the
/// column an integer one when every sampled value is an integer literal: `UInt64` when some
/// are beyond `Int64` and none is negative, `Int64` when all fit it (a `-0` among them, which
/// serde_json reads as a float); a column holding both negative integers and integers beyond
/// `Int64`, or integers beyond `UInt64`, fits no integer type and is an error. A column whose
/// sample has a fraction or an exponent stays `Float64`. `float_read` holds the integer
/// literals serde_json read as floats (`float_read_integers`).
pub fn refine_inferred(
    schema: Schema,
    values: &[Value],
    float_read: &std::collections::HashMap<String, Vec<String>>,
) -> Result<Schema, String> {
    let all: Vec<&Value> = values.iter().collect();
    let fields = schema
        .fields()
        .iter()
        .map(|f| {
            let vals: Vec<&Value> = all.iter().filter_map(|v| v.get(f.name())).collect();
            let dt = refine(f.name(), f.data_type(), &vals, float_read)?;
            Ok(Arc::new(f.as_ref().clone().with_data_type(dt)))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

fn refine(
    path: &str,
    dt: &DataType,
    vals: &[&Value],
    float_read: &std::collections::HashMap<String, Vec<String>>,
) -> Result<DataType, String> {
    Ok(match dt {
        DataType::Float64 => {
            let nums: Vec<&serde_json::Number> =
                vals.iter().filter_map(|v| v.as_number()).collect();
            let literals = float_read.get(path).map_or(&[][..], Vec::as_slice);
            // Every number serde_json read as a float is one of the integer literals.
            let integers = nums.iter().filter(|n| n.is_f64()).count() == literals.len();
            let beyond = nums.iter().any(|n| !n.is_i64() && n.is_u64());
            let negative = nums.iter().any(|n| n.as_i64().is_some_and(|i| i < 0));
            match literals.iter().find(|l| *l != "-0") {
                Some(wide) if integers => {
                    return Err(format!(
                        "column `{path}` holds integers beyond the 64-bit range ({wide}), which \
                         no integer type holds; pass --schema FILE (Float64 rounds them)"
                    ))
                }
                _ => {}
            }
            match (integers, beyond, negative) {
                (true, true, false) => DataType::UInt64,
                (true, true, true) => {
                    return Err(format!(
                        "column `{path}` holds negative integers and integers beyond Int64, which \
                         no integer type holds both of; pass --schema FILE (Float64 rounds them)"
                    ))
                }
                (true, false, _) if !nums.is_empty() => DataType::Int64,
                _ => DataType::Float64,
            }
        }
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| {
                    let child: Vec<&Value> = vals.iter().filter_map(|v| v.get(f.name())).collect();
                    let dt = refine(
                        &format!("{path}.{}", f.name()),
                        f.data_type(),
                        &child,
                        float_read,
                    )?;
                    Ok(Arc::new(f.as_ref().clone().with_data_type(dt)))
                })
                .collect::<Result<Vec<_>, String>>()?
                .into(),
        ),
        DataType::List(f) => {
            let child: Vec<&Value> = vals.iter().filter_map(|v| v.as_array()).flatten().collect();
            let dt = refine(&format!("{path}[]"), f.data_type(), &child, float_read)?;
            DataType::List(Arc::new(f.as_ref().clone().with_data_type(dt)))
        }
        other => other.clone(),
    })
}

pub(super) fn parse_int<T: FromStr>(s: &str, dt: &DataType) -> Result<T, String> {
    // `-0` is the integer 0, also for an unsigned column.
    let s = if s == "-0" { "0" } else { s };
    s.parse().map_err(|_| {
        if s.contains(['.', 'e', 'E']) {
            format!("{s} is not an integer, and column type {dt} takes integers only")
        } else {
            format!("{s} is out of range for {dt}")
        }
    })
}

pub(super) fn parse_f64(s: &str, dt: &DataType) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s} is out of range for {dt}")),
    }
}

pub(super) fn parse_f32(s: &str, dt: &DataType) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s} is out of range for {dt}")),
    }
}

type ParseNumber<N> = fn(&str, &DataType) -> Result<N, String>;

/// A column of JSON numbers (never strings), each parsed by `parse`.
struct Number<T: ArrowPrimitiveType> {
    data_type: DataType,
    parse: ParseNumber<T::Native>,
    _type: PhantomData<fn(T) -> T>,
}

impl<T: ArrowPrimitiveType> Number<T> {
    fn boxed(dt: &DataType, parse: ParseNumber<T::Native>) -> Box<dyn ArrayDecoder> {
        Box::new(Number::<T> {
            data_type: dt.clone(),
            parse,
            _type: PhantomData,
        })
    }
}

impl<T: ArrowPrimitiveType> ArrayDecoder for Number<T> {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut b = PrimitiveBuilder::<T>::with_capacity(pos.len());
        for &p in pos {
            match tape.get(p) {
                TapeElement::Null => b.append_null(),
                TapeElement::Number(idx) => {
                    let v = (self.parse)(tape.get_string(idx), &self.data_type)
                        .map_err(ArrowError::JsonError)?;
                    b.append_value(v);
                }
                _ => return Err(mismatch(tape, p, &self.data_type)),
            }
        }
        Ok(Arc::new(b.finish()))
    }
}

/// The error for a JSON value of the wrong kind: `expected <type> got <value>`.
fn mismatch(tape: &Tape<'_>, p: u32, dt: &DataType) -> ArrowError {
    tape.error(p, &dt.to_string())
}

/// The days since the epoch of a string `YYYY-MM-DD`: a `Date32` value.
pub(super) fn date32_from_str(s: &str) -> Result<i32, String> {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date");
    // The common spelling without chrono's format parser, which costs more than the rest of
    // a CSV record; any other spelling takes the parser, and the same date comes out.
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        s.get(r)?.bytes().try_fold(0u32, |n, b| {
            b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
        })
    };
    let fast = match s.as_bytes() {
        [_, _, _, _, b'-', _, _, b'-', _, _] => (|| {
            let y = i32::try_from(digits(0..4)?).ok()?;
            chrono::NaiveDate::from_ymd_opt(y, digits(5..7)?, digits(8..10)?)
        })(),
        _ => None,
    };
    fast.or_else(|| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
        .filter(|_| s.len() >= 10)
        .and_then(|d| i32::try_from((d - epoch).num_days()).ok())
        .ok_or_else(|| format!("\"{s}\" is not a date YYYY-MM-DD (column type Date32)"))
}

/// A column of type `dt` (`Date32` or `Timestamp`) from text, each value parsed by the rule
/// for JSON strings (a null stays null): the typing rule of CSV input too.
pub(super) fn typed_from_text(text: &StringArray, dt: &DataType) -> Result<ArrayRef, String> {
    fn each<T: ArrowPrimitiveType>(
        text: &StringArray,
        dt: &DataType,
        parse: impl Fn(&str) -> Result<T::Native, String>,
    ) -> Result<ArrayRef, String> {
        let mut b = PrimitiveBuilder::<T>::with_capacity(text.len()).with_data_type(dt.clone());
        for v in text.iter() {
            match v {
                None => b.append_null(),
                Some(s) => b.append_value(parse(s)?),
            }
        }
        Ok(Arc::new(b.finish()))
    }
    match dt {
        DataType::Date32 => each::<Date32Type>(text, dt, date32_from_str),
        DataType::Timestamp(unit, tz) => {
            let tz: Tz = tz
                .as_deref()
                .unwrap_or("+00:00")
                .parse()
                .map_err(|e| format!("{dt}: {e}"))?;
            let parse = |s: &str| timestamp_from_str(&tz, *unit, dt, s);
            match unit {
                TimeUnit::Second => each::<TimestampSecondType>(text, dt, parse),
                TimeUnit::Millisecond => each::<TimestampMillisecondType>(text, dt, parse),
                TimeUnit::Microsecond => each::<TimestampMicrosecondType>(text, dt, parse),
                TimeUnit::Nanosecond => each::<TimestampNanosecondType>(text, dt, parse),
            }
        }
        DataType::Decimal128(p, sc) => each::<Decimal128Type>(text, dt, |s| {
            decimal_from_str::<Decimal128Type>(s, *p, *sc, dt)
        }),
        DataType::Decimal256(p, sc) => each::<Decimal256Type>(text, dt, |s| {
            decimal_from_str::<Decimal256Type>(s, *p, *sc, dt)
        }),
        other => Err(format!("column type {other} is not read from text here")),
    }
}

/// The unscaled value of decimal text `s` (`[+-]digits[.digits][e[+-]digits]`, as JSON
/// writes a number) in column type `dt`, `Decimal128(precision, scale)` or `Decimal256`:
/// exact, or why not. A digit other than `0` beyond the scale would be rounded away by
/// arrow's parser, so it is refused first; arrow's parser then finds the value in range or not.
pub(super) fn decimal_from_str<T: DecimalType>(
    s: &str,
    precision: u8,
    scale: i8,
    dt: &DataType,
) -> Result<T::Native, String> {
    let not_a_number = || format!("\"{s}\" is not a decimal number (column type {dt})");
    let b = s.as_bytes();
    let digits_from = |mut i: usize| {
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (start, i)
    };
    let sign = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let (int_start, mut i) = digits_from(sign);
    let int = &b[int_start..i];
    let mut frac: &[u8] = &[];
    if b.get(i) == Some(&b'.') {
        let (start, end) = digits_from(i + 1);
        frac = &b[start..end];
        i = end;
    }
    if int.is_empty() && frac.is_empty() {
        return Err(not_a_number());
    }
    // The power of ten the last digit stands for: minus the fraction's length, plus the
    // exponent (saturated: a longer exponent is out of range either way).
    let mut power = -(frac.len() as i64);
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let negative = b.get(i + 1) == Some(&b'-');
        let (start, end) =
            digits_from(i + 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-'))));
        if start == end {
            return Err(not_a_number());
        }
        let exponent = b[start..end].iter().fold(0i64, |n, d| {
            n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
        power = power.saturating_add(if negative { -exponent } else { exponent });
        i = end;
    }
    if i != b.len() {
        return Err(not_a_number());
    }
    // The power of ten of the last digit other than `0` must be one the scale keeps.
    let trailing_zeros = int
        .iter()
        .chain(frac)
        .rev()
        .take_while(|&&d| d == b'0')
        .count();
    let digits = int.len() + frac.len();
    if trailing_zeros < digits && power.saturating_add(trailing_zeros as i64) < -i64::from(scale) {
        return Err(format!(
            "\"{s}\" has more digits after the point than column type {dt} keeps, and would be \
             rounded"
        ));
    }
    arrow::compute::kernels::cast_utils::parse_decimal::<T>(s, precision, scale).map_err(
        |e| match e.to_string().contains("does not fit") {
            true => format!("\"{s}\" does not fit column type {dt}"),
            false => not_a_number(),
        },
    )
}

/// A decimal column: JSON numbers, and strings that spell one, exact in the column's scale.
struct Decimal<T: DecimalType> {
    data_type: DataType,
    precision: u8,
    scale: i8,
    _type: PhantomData<fn(T) -> T>,
}

impl<T: DecimalType> Decimal<T> {
    fn boxed(dt: &DataType, precision: u8, scale: i8) -> Box<dyn ArrayDecoder> {
        Box::new(Decimal::<T> {
            data_type: dt.clone(),
            precision,
            scale,
            _type: PhantomData,
        })
    }
}

impl<T: DecimalType> ArrayDecoder for Decimal<T> {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut b =
            PrimitiveBuilder::<T>::with_capacity(pos.len()).with_data_type(self.data_type.clone());
        for &p in pos {
            let text = match tape.get(p) {
                TapeElement::Null => {
                    b.append_null();
                    continue;
                }
                TapeElement::String(idx) | TapeElement::Number(idx) => tape.get_string(idx),
                _ => return Err(mismatch(tape, p, &self.data_type)),
            };
            let v = decimal_from_str::<T>(text, self.precision, self.scale, &self.data_type)
                .map_err(ArrowError::JsonError)?;
            b.append_value(v);
        }
        Ok(Arc::new(b.finish()))
    }
}

/// Whether `dt` is one of the scalar types the typing rule covers (CSV input takes these
/// only; JSON input also `Null`, lists and structs). A decimal's precision and scale are
/// checked apart ([`check_schema`]).
pub(super) fn is_scalar(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _)
    )
}

/// Checks the precision and scale of decimal column `path` of type `dt`: within arrow's
/// limits, and a scale of 0 or more (Parquet and Delta hold no other), so that a job never
/// starts with a schema it cannot write.
fn check_decimal<T: DecimalType>(
    path: &str,
    dt: &DataType,
    precision: u8,
    scale: i8,
) -> Result<(), String> {
    arrow::datatypes::validate_decimal_precision_and_scale::<T>(precision, scale)
        .map_err(|e| format!("column `{path}` has type {dt}: {e}"))?;
    if scale < 0 {
        return Err(format!(
            "column `{path}` has type {dt}, whose negative scale Parquet and Delta tables do not \
             hold; give a scale of 0 or more"
        ));
    }
    Ok(())
}

/// `Date32` from strings `YYYY-MM-DD`.
struct Date32Decoder;

impl ArrayDecoder for Date32Decoder {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut b = PrimitiveBuilder::<Date32Type>::with_capacity(pos.len());
        for &p in pos {
            match tape.get(p) {
                TapeElement::Null => b.append_null(),
                TapeElement::String(idx) => {
                    let days =
                        date32_from_str(tape.get_string(idx)).map_err(ArrowError::JsonError)?;
                    b.append_value(days);
                }
                _ => return Err(mismatch(tape, p, &DataType::Date32)),
            }
        }
        Ok(Arc::new(b.finish()))
    }
}

/// A timestamp column: strings as arrow parses them, exact in the column's unit, or integer
/// counts of the unit.
struct Timestamp<T: ArrowTimestampType> {
    data_type: DataType,
    tz: Tz,
    _type: PhantomData<fn(T) -> T>,
}

impl<T: ArrowTimestampType> Timestamp<T> {
    fn boxed(dt: &DataType, tz: Tz) -> Box<dyn ArrayDecoder> {
        Box::new(Timestamp::<T> {
            data_type: dt.clone(),
            tz,
            _type: PhantomData,
        })
    }

    fn parse_string(&self, s: &str) -> Result<i64, String> {
        timestamp_from_str(&self.tz, T::UNIT, &self.data_type, s)
    }
}

/// The count of `unit`s since the epoch of a timestamp string, as arrow parses it (in `tz`
/// where it names no offset), exact in the unit: a value of column type `dt`.
pub(super) fn timestamp_from_str(
    tz: &Tz,
    unit: TimeUnit,
    dt: &DataType,
    s: &str,
) -> Result<i64, String> {
    let t = string_to_datetime(tz, s)
        .map_err(|_| format!("\"{s}\" is not a timestamp (column type {dt})"))?;
    // arrow keeps the first nine digits of a fraction and drops the rest unseen.
    if beyond_nanoseconds(s) {
        return Err(format!(
            "\"{s}\" is more precise than column type {dt}, and would be truncated"
        ));
    }
    let per_second: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let step = 1_000_000_000 / per_second;
    let nanos = i64::from(t.timestamp_subsec_nanos());
    if nanos % step != 0 {
        return Err(format!(
            "\"{s}\" is more precise than column type {dt}, and would be truncated"
        ));
    }
    t.timestamp()
        .checked_mul(per_second)
        .and_then(|v| v.checked_add(nanos / step))
        .ok_or_else(|| format!("\"{s}\" is out of range for {dt}"))
}

/// Whether the fraction of seconds in timestamp text `s` has a digit other than `0` after
/// its ninth: a value finer than nanoseconds, which no timestamp unit holds.
fn beyond_nanoseconds(s: &str) -> bool {
    // The text arrow parses as a timestamp has no `.` but the fraction's.
    let Some(dot) = s.find('.') else {
        return false;
    };
    s[dot + 1..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .skip(9)
        .any(|b| b != b'0')
}

impl<T: ArrowTimestampType> ArrayDecoder for Timestamp<T> {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut b =
            PrimitiveBuilder::<T>::with_capacity(pos.len()).with_data_type(self.data_type.clone());
        for &p in pos {
            let v = match tape.get(p) {
                TapeElement::Null => {
                    b.append_null();
                    continue;
                }
                TapeElement::String(idx) => self.parse_string(tape.get_string(idx)),
                TapeElement::Number(idx) => parse_int::<i64>(tape.get_string(idx), &self.data_type),
                _ => return Err(mismatch(tape, p, &self.data_type)),
            };
            b.append_value(v.map_err(ArrowError::JsonError)?);
        }
        Ok(Arc::new(b.finish()))
    }
}
