//! The fast path of JSON decoding: lines that each hold one flat object of scalars, decoded in
//! one pass from the framed bytes straight into Arrow builders.
//!
//! arrow's JSON decoder first builds a tape of every token of the chunk, then decodes the tape
//! column by column through the typing rule's decoders ([`super::json_types`]): two passes and
//! an index per value, 57% of an ingest's CPU on flat records. [`FlatJson`] walks each record
//! once, finds each key's column (the key after the previous one's is tried first, which is
//! where it is in records written by one program) and appends the value to the column's builder.
//!
//! It never decides what is malformed. It answers only for a chunk whose every record it takes
//! exactly as arrow's decoder with the typing rule would, and gives up on the chunk at the first
//! thing it does not take: a value that does not fit its column, `null` in a non-nullable one,
//! a key the schema does not have, a key twice, an escape in a key, a lone surrogate, a control
//! character in a string, anything after the object, any JSON it does not read as JSON. The
//! chunk is then decoded by arrow's decoder as before, which names the bad record or decodes
//! what this declined. Where it answers, its values come from the same functions as the typing
//! rule's (`parse_int`, `parse_f64`, `timestamp_from_str`, ...) applied to the same text, and
//! the tests compare the two decoders on generated records of every kind.
//!
//! Schemas it serves: every column one of `Int8`…`Int64`, `UInt8`…`UInt64`, `Float32`,
//! `Float64`, `Boolean`, `Utf8`, `LargeUtf8`, `Date32`, `Timestamp`, `Decimal128`,
//! `Decimal256`. A schema with a nested or
//! `Null` column, with no column or with a name twice, is decoded by arrow's decoder only.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::builder::{BooleanBuilder, LargeStringBuilder, PrimitiveBuilder, StringBuilder};
use arrow::array::timezone::Tz;
use arrow::array::ArrayRef;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Decimal128Type, Decimal256Type, DecimalType,
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, SchemaRef, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow::record_batch::RecordBatch;

use super::json_types::{
    date32_from_str, decimal_from_str, parse_f32, parse_f64, parse_int, timestamp_from_str,
};

/// The fast decoder of one schema's flat records (see the module doc); `None` from
/// [`FlatJson::decode`] means "decode this chunk with arrow's decoder".
#[derive(Debug)]
pub(crate) struct FlatJson {
    schema: SchemaRef,
    columns: Vec<Column>,
    /// Column of each key, for keys out of the schema's order.
    by_name: HashMap<Box<[u8]>, usize>,
}

#[derive(Debug)]
struct Column {
    name: Box<[u8]>,
    kind: Kind,
    nullable: bool,
    data_type: DataType,
}

#[derive(Debug, Clone)]
enum Kind {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    Bool,
    Utf8,
    LargeUtf8,
    Date32,
    Timestamp(TimeUnit, Tz),
    Decimal128(u8, i8),
    Decimal256(u8, i8),
}

impl FlatJson {
    /// The fast decoder of `schema`, if every column has a type it serves.
    pub(crate) fn new(schema: &SchemaRef) -> Option<FlatJson> {
        let columns = schema
            .fields()
            .iter()
            .map(|f| {
                let kind = match f.data_type() {
                    DataType::Int8 => Kind::I8,
                    DataType::Int16 => Kind::I16,
                    DataType::Int32 => Kind::I32,
                    DataType::Int64 => Kind::I64,
                    DataType::UInt8 => Kind::U8,
                    DataType::UInt16 => Kind::U16,
                    DataType::UInt32 => Kind::U32,
                    DataType::UInt64 => Kind::U64,
                    DataType::Float32 => Kind::F32,
                    DataType::Float64 => Kind::F64,
                    DataType::Boolean => Kind::Bool,
                    DataType::Utf8 => Kind::Utf8,
                    DataType::LargeUtf8 => Kind::LargeUtf8,
                    DataType::Date32 => Kind::Date32,
                    DataType::Timestamp(unit, tz) => {
                        Kind::Timestamp(*unit, tz.as_deref().unwrap_or("+00:00").parse().ok()?)
                    }
                    DataType::Decimal128(p, s) => Kind::Decimal128(*p, *s),
                    DataType::Decimal256(p, s) => Kind::Decimal256(*p, *s),
                    _ => return None,
                };
                // A name that JSON writes with escapes is never matched raw: the chunk goes
                // to arrow's decoder instead of a wrong column.
                if f.name()
                    .bytes()
                    .any(|b| b == b'"' || b == b'\\' || b < 0x20)
                {
                    return None;
                }
                Some(Column {
                    name: f.name().as_bytes().into(),
                    kind,
                    nullable: f.is_nullable(),
                    data_type: f.data_type().clone(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        if columns.is_empty() {
            return None;
        }
        let by_name: HashMap<Box<[u8]>, usize> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        if by_name.len() != columns.len() {
            // A name twice: arrow's decoder puts a key in the first such column; this one
            // would not always.
            return None;
        }
        Some(FlatJson {
            schema: schema.clone(),
            columns,
            by_name,
        })
    }

    /// The records of `buf` at `spans` (start and end of each; one JSON object per record), or
    /// `None` where arrow's decoder is to decode them.
    pub(crate) fn decode(&self, buf: &[u8], spans: &[(u64, usize, usize)]) -> Option<RecordBatch> {
        let n = spans.len();
        let mut builders: Vec<Builder> = self
            .columns
            .iter()
            .map(|c| Builder::new(c, n, buf.len() / self.columns.len().max(1)))
            .collect();
        // `seen[c] == r + 1` once record `r` set column `c`.
        let mut seen = vec![0usize; self.columns.len()];
        let mut scratch = String::new();
        // Records start and end at line ends: char boundaries of the whole chunk's text.
        let all = std::str::from_utf8(buf).ok()?;
        for (r, &(_, start, end)) in spans.iter().enumerate() {
            let text = all.get(start..end)?;
            let mut p = Parser { s: text, i: 0 };
            let stamp = r + 1;
            p.skip_ws();
            p.eat(b'{')?;
            p.skip_ws();
            let mut next = 0; // the column the next key most likely names
            if !p.eat_if(b'}') {
                loop {
                    p.eat(b'"')?;
                    let c = match self.columns.get(next) {
                        Some(col) if p.eat_key(&col.name) => next,
                        _ => *self.by_name.get(p.key()?.as_bytes())?,
                    };
                    if seen[c] == stamp {
                        return None; // a repeated key
                    }
                    seen[c] = stamp;
                    next = c + 1;
                    p.skip_ws();
                    p.eat(b':')?;
                    p.skip_ws();
                    let v = p.value(&mut scratch)?;
                    builders[c].append(&self.columns[c], v)?;
                    p.skip_ws();
                    if p.eat_if(b',') {
                        p.skip_ws();
                        continue;
                    }
                    p.eat(b'}')?;
                    break;
                }
            }
            p.skip_ws();
            if p.i != text.len() {
                return None; // more than one value on the line
            }
            for (c, col) in self.columns.iter().enumerate() {
                if seen[c] != stamp {
                    if !col.nullable {
                        return None;
                    }
                    builders[c].append_null();
                }
            }
        }
        let arrays: Vec<ArrayRef> = builders.into_iter().map(Builder::finish).collect();
        RecordBatch::try_new(self.schema.clone(), arrays).ok()
    }
}

/// A JSON value of a flat record.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Null,
    Bool(bool),
    /// A number's text, and whether it has neither fraction nor exponent.
    Number(&'a str, bool),
    /// A string, unescaped.
    String(&'a str),
}

/// A cursor over one record's text.
struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Parser<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.eat_if(b).then_some(())
    }

    fn eat_if(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }

    /// A string's raw text up to its closing quote, if it has no escape and no control
    /// character; the cursor is left on the `\` of an escape.
    fn plain_string(&mut self) -> Option<(&'a str, bool)> {
        let b = self.bytes();
        let start = self.i;
        // Eight bytes at a time up to the first that may end the plain run: its exact place is
        // the lowest flagged byte (the bit tricks flag falsely only above a true hit).
        while let Some(word) = b.get(self.i..self.i + 8) {
            let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            let hits = special_bytes(x);
            if hits != 0 {
                self.i += hits.trailing_zeros() as usize / 8;
                break;
            }
            self.i += 8;
        }
        while let Some(&c) = b.get(self.i) {
            match c {
                b'"' => {
                    let s = self.s.get(start..self.i)?;
                    self.i += 1;
                    return Some((s, true));
                }
                b'\\' => return Some((self.s.get(start..self.i)?, false)),
                0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
        None
    }

    /// Whether the key after the opening quote is `name` (which has no character JSON
    /// escapes); if so, moves past its closing quote.
    fn eat_key(&mut self, name: &[u8]) -> bool {
        let b = self.bytes();
        let end = self.i + name.len();
        // Byte by byte: keys are short, and a call to memcmp per key cost 4% of an ingest.
        let same =
            b.get(end) == Some(&b'"') && b[self.i..end].iter().zip(name).all(|(x, y)| x == y);
        if same {
            self.i = end + 1;
        }
        same
    }

    /// An object key after its opening quote: a string without escapes.
    fn key(&mut self) -> Option<&'a str> {
        match self.plain_string()? {
            (k, true) => Some(k),
            (_, false) => None,
        }
    }

    fn literal(&mut self, word: &[u8], v: Value<'a>) -> Option<Value<'a>> {
        if self.bytes().get(self.i..self.i + word.len())? != word {
            return None;
        }
        self.i += word.len();
        Some(v)
    }

    /// A scalar value; a string with escapes is unescaped into `scratch`.
    fn value<'s>(&mut self, scratch: &'s mut String) -> Option<Value<'s>>
    where
        'a: 's,
    {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                let (head, closed) = self.plain_string()?;
                if closed {
                    return Some(Value::String(head));
                }
                scratch.clear();
                scratch.push_str(head);
                self.escaped_rest(scratch)?;
                Some(Value::String(scratch))
            }
            b'n' => self.literal(b"null", Value::Null),
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None, // an object, an array, or not JSON
        }
    }

    /// The rest of a string from an escape on, unescaped onto `out`, up to its closing quote.
    fn escaped_rest(&mut self, out: &mut String) -> Option<()> {
        loop {
            let (piece, closed) = self.plain_string()?;
            out.push_str(piece);
            if closed {
                return Some(());
            }
            self.i += 1; // the backslash
            let e = self.peek()?;
            self.i += 1;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let hi = self.hex4()?;
                    let c = match hi {
                        0xD800..=0xDBFF => {
                            self.eat(b'\\')?;
                            self.eat(b'u')?;
                            let lo = self.hex4()?;
                            if !(0xDC00..=0xDFFF).contains(&lo) {
                                return None;
                            }
                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                        }
                        0xDC00..=0xDFFF => return None,
                        _ => hi,
                    };
                    out.push(char::from_u32(c)?);
                }
                _ => return None,
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        u32::from_str_radix(h, 16).ok()
    }

    /// A number as JSON writes it: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Option<Value<'a>> {
        let start = self.i;
        self.eat_if(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut integral = true;
        if self.eat_if(b'.') {
            integral = false;
            self.at_least_one_digit()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            integral = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.at_least_one_digit()?;
        }
        Some(Value::Number(self.s.get(start..self.i)?, integral))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn at_least_one_digit(&mut self) -> Option<()> {
        let before = self.i;
        self.digits();
        (self.i > before).then_some(())
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` that is `"`, `\\` or below 0x20 is set (and maybe of bytes
/// above such a byte; never below the first).
fn special_bytes(x: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    zero(x ^ (ONES * u64::from(b'"')))
        | zero(x ^ (ONES * u64::from(b'\\')))
        | (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
}

/// A column being built.
enum Builder {
    I8(PrimitiveBuilder<Int8Type>),
    I16(PrimitiveBuilder<Int16Type>),
    I32(PrimitiveBuilder<Int32Type>),
    I64(PrimitiveBuilder<Int64Type>),
    U8(PrimitiveBuilder<UInt8Type>),
    U16(PrimitiveBuilder<UInt16Type>),
    U32(PrimitiveBuilder<UInt32Type>),
    U64(PrimitiveBuilder<UInt64Type>),
    F32(PrimitiveBuilder<Float32Type>),
    F64(PrimitiveBuilder<Float64Type>),
    Bool(BooleanBuilder),
    Utf8(StringBuilder),
    LargeUtf8(LargeStringBuilder),
    Date32(PrimitiveBuilder<Date32Type>),
    TsS(PrimitiveBuilder<TimestampSecondType>),
    TsMs(PrimitiveBuilder<TimestampMillisecondType>),
    TsUs(PrimitiveBuilder<TimestampMicrosecondType>),
    TsNs(PrimitiveBuilder<TimestampNanosecondType>),
    D128(PrimitiveBuilder<Decimal128Type>),
    D256(PrimitiveBuilder<Decimal256Type>),
}

/// Applies `$f` to the builder inside any variant.
macro_rules! each {
    ($b:expr, $x:ident => $f:expr) => {
        match $b {
            Builder::I8($x) => $f,
            Builder::I16($x) => $f,
            Builder::I32($x) => $f,
            Builder::I64($x) => $f,
            Builder::U8($x) => $f,
            Builder::U16($x) => $f,
            Builder::U32($x) => $f,
            Builder::U64($x) => $f,
            Builder::F32($x) => $f,
            Builder::F64($x) => $f,
            Builder::Bool($x) => $f,
            Builder::Utf8($x) => $f,
            Builder::LargeUtf8($x) => $f,
            Builder::Date32($x) => $f,
            Builder::TsS($x) => $f,
            Builder::TsMs($x) => $f,
            Builder::TsUs($x) => $f,
            Builder::TsNs($x) => $f,
            Builder::D128($x) => $f,
            Builder::D256($x) => $f,
        }
    };
}

fn primitive<T: ArrowPrimitiveType>(rows: usize, dt: &DataType) -> PrimitiveBuilder<T> {
    PrimitiveBuilder::<T>::with_capacity(rows).with_data_type(dt.clone())
}

/// A decimal value (a number, or a string spelling one) exact in column type `dt`, as the
/// typing rule parses it.
fn decimal<T: DecimalType>(v: Value<'_>, dt: &DataType, p: u8, s: i8) -> Option<T::Native> {
    match v {
        Value::Number(text, _) | Value::String(text) => decimal_from_str::<T>(text, p, s, dt).ok(),
        _ => None,
    }
}

/// An integer value of a column that takes integers only, as the typing rule parses it.
fn integer<T: std::str::FromStr>(v: Value<'_>, dt: &DataType) -> Option<T> {
    match v {
        Value::Number(text, true) => parse_int(text, dt).ok(),
        _ => None,
    }
}

impl Builder {
    /// A builder for `rows` values of `column`, strings about `bytes` long in all.
    fn new(column: &Column, rows: usize, bytes: usize) -> Builder {
        let dt = &column.data_type;
        match &column.kind {
            Kind::I8 => Builder::I8(primitive(rows, dt)),
            Kind::I16 => Builder::I16(primitive(rows, dt)),
            Kind::I32 => Builder::I32(primitive(rows, dt)),
            Kind::I64 => Builder::I64(primitive(rows, dt)),
            Kind::U8 => Builder::U8(primitive(rows, dt)),
            Kind::U16 => Builder::U16(primitive(rows, dt)),
            Kind::U32 => Builder::U32(primitive(rows, dt)),
            Kind::U64 => Builder::U64(primitive(rows, dt)),
            Kind::F32 => Builder::F32(primitive(rows, dt)),
            Kind::F64 => Builder::F64(primitive(rows, dt)),
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            Kind::Utf8 => Builder::Utf8(StringBuilder::with_capacity(rows, bytes)),
            Kind::LargeUtf8 => Builder::LargeUtf8(LargeStringBuilder::with_capacity(rows, bytes)),
            Kind::Date32 => Builder::Date32(primitive(rows, dt)),
            Kind::Timestamp(unit, _) => match unit {
                TimeUnit::Second => Builder::TsS(primitive(rows, dt)),
                TimeUnit::Millisecond => Builder::TsMs(primitive(rows, dt)),
                TimeUnit::Microsecond => Builder::TsUs(primitive(rows, dt)),
                TimeUnit::Nanosecond => Builder::TsNs(primitive(rows, dt)),
            },
            Kind::Decimal128(..) => Builder::D128(primitive(rows, dt)),
            Kind::Decimal256(..) => Builder::D256(primitive(rows, dt)),
        }
    }

    fn append_null(&mut self) {
        each!(self, b => b.append_null())
    }

    /// Appends `v` if it fits `column` by the typing rule; `None` if not.
    fn append(&mut self, column: &Column, v: Value<'_>) -> Option<()> {
        if let Value::Null = v {
            if !column.nullable {
                return None;
            }
            self.append_null();
            return Some(());
        }
        let dt = &column.data_type;
        match self {
            Builder::I8(b) => b.append_value(integer(v, dt)?),
            Builder::I16(b) => b.append_value(integer(v, dt)?),
            Builder::I32(b) => b.append_value(integer(v, dt)?),
            Builder::I64(b) => b.append_value(integer(v, dt)?),
            Builder::U8(b) => b.append_value(integer(v, dt)?),
            Builder::U16(b) => b.append_value(integer(v, dt)?),
            Builder::U32(b) => b.append_value(integer(v, dt)?),
            Builder::U64(b) => b.append_value(integer(v, dt)?),
            Builder::F32(b) => match v {
                Value::Number(text, _) => b.append_value(parse_f32(text, dt).ok()?),
                _ => return None,
            },
            Builder::F64(b) => match v {
                Value::Number(text, _) => b.append_value(parse_f64(text, dt).ok()?),
                _ => return None,
            },
            Builder::Bool(b) => match v {
                Value::Bool(x) => b.append_value(x),
                _ => return None,
            },
            Builder::Utf8(b) => match v {
                Value::String(s) => b.append_value(s),
                _ => return None,
            },
            Builder::LargeUtf8(b) => match v {
                Value::String(s) => b.append_value(s),
                _ => return None,
            },
            Builder::Date32(b) => match v {
                Value::String(s) => b.append_value(date32_from_str(s).ok()?),
                _ => return None,
            },
            Builder::D128(b) => {
                let Kind::Decimal128(p, s) = column.kind else {
                    return None;
                };
                b.append_value(decimal::<Decimal128Type>(v, dt, p, s)?)
            }
            Builder::D256(b) => {
                let Kind::Decimal256(p, s) = column.kind else {
                    return None;
                };
                b.append_value(decimal::<Decimal256Type>(v, dt, p, s)?)
            }
            Builder::TsS(_) | Builder::TsMs(_) | Builder::TsUs(_) | Builder::TsNs(_) => {
                let Kind::Timestamp(unit, tz) = &column.kind else {
                    return None;
                };
                let t = match v {
                    Value::String(s) => timestamp_from_str(tz, *unit, dt, s).ok()?,
                    v => integer::<i64>(v, dt)?,
                };
                match self {
                    Builder::TsS(b) => b.append_value(t),
                    Builder::TsMs(b) => b.append_value(t),
                    Builder::TsUs(b) => b.append_value(t),
                    Builder::TsNs(b) => b.append_value(t),
                    _ => unreachable!("matched above"),
                }
            }
        }
        Some(())
    }

    fn finish(self) -> ArrayRef {
        each!(self, b => { let mut b = b; Arc::new(b.finish()) as ArrayRef })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Field, Schema};

    fn decode(schema: &SchemaRef, lines: &[&str]) -> Option<RecordBatch> {
        let mut buf = Vec::new();
        let mut spans = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            let start = buf.len();
            buf.extend_from_slice(l.as_bytes());
            buf.push(b'\n');
            spans.push((i as u64 + 1, start, buf.len()));
        }
        FlatJson::new(schema)?.decode(&buf, &spans)
    }

    /// What it takes itself: keys in any order, missing keys, every escape, surrogate pairs,
    /// JSON whitespace, numbers at the edges of their types. (That it takes them as arrow's
    /// decoder does is `source`'s test `the_flat_json_decoder_agrees_with_arrows`.)
    #[test]
    fn it_answers_for_flat_records_of_every_form() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("u", DataType::UInt64, true),
        ]));
        let b = decode(
            &schema,
            &[
                r#"{"n":-9223372036854775808,"s":"a\"b\\c\/d\b\f\n\r\t","u":18446744073709551615}"#,
                "\t{ \"u\" : 0 ,\r\"n\":-0}  ",
                r#"{"s":"\u00e9\u65E5\ud83d\ude00\u0000 é日本😀"}"#,
                r#"{}"#,
                r#"{"s":null,"n":null,"u":null}"#,
            ],
        )
        .expect("answered");
        let n = b.column(0).as_primitive::<Int64Type>();
        let s = b.column(1).as_string::<i32>();
        let u = b.column(2).as_primitive::<UInt64Type>();
        assert_eq!(n.value(0), i64::MIN);
        assert_eq!(s.value(0), "a\"b\\c/d\u{8}\u{c}\n\r\t");
        assert_eq!(u.value(0), u64::MAX);
        assert_eq!((n.value(1), u.value(1), s.is_null(1)), (0, 0, true));
        assert_eq!(s.value(2), "é日😀\0 é日本😀");
        assert_eq!(b.column(0).null_count(), 3);
        assert_eq!(b.column(1).null_count(), 3);
    }

    /// What it leaves to arrow's decoder, each alone in a chunk of good records.
    #[test]
    fn it_declines_what_is_not_a_flat_record_it_takes_exactly() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("k", DataType::Int64, false),
        ]));
        assert!(decode(&schema, &[r#"{"n":1,"s":"x","k":2}"#]).is_some());
        for bad in [
            r#"{"n":1,"n":2,"k":0}"#,
            r#"{"n":1,"other":2,"k":0}"#,
            r#"{"\u006e":1,"k":0}"#,
            r#"{"n":1}"#,
            r#"{"k":null}"#,
            r#"{"k":1.0}"#,
            r#"{"k":1e2}"#,
            r#"{"k":01}"#,
            r#"{"k":9223372036854775808}"#,
            r#"{"k":"1"}"#,
            r#"{"k":1,"s":5}"#,
            r#"{"k":1,"s":"\ud83d"}"#,
            r#"{"k":1,"s":"\udc00\ud83d"}"#,
            r#"{"k":1,"s":"\q"}"#,
            "{\"k\":1,\"s\":\"tab\there\"}",
            r#"{"k":1,"s":["x"]}"#,
            r#"{"k":1,"s":{"x":1}}"#,
            r#"{"k":1}{"k":2}"#,
            r#"{"k":1} x"#,
            r#"{"k":1,}"#,
            r#"{"k":1"#,
            r#"[{"k":1}]"#,
            "null",
            "\u{c}{\"k\":1}",
        ] {
            let lines = [r#"{"n":1,"s":"x","k":2}"#, bad, r#"{"k":3}"#];
            assert!(decode(&schema, &lines).is_none(), "{bad}");
        }
        // A nested or Null column: arrow's decoder only.
        for dt in [
            DataType::Null,
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        ] {
            let schema = Schema::new(vec![Field::new("x", dt, true)]);
            assert!(FlatJson::new(&Arc::new(schema)).is_none());
        }
        assert!(FlatJson::new(&Arc::new(Schema::empty())).is_none());
        let twice = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("a", DataType::Int64, true),
        ]);
        assert!(FlatJson::new(&Arc::new(twice)).is_none());
    }

    /// The word scan finds the first byte that may end a plain string, at every place, for
    /// every byte value, after any other bytes (control, quote, backslash, high) and before
    /// any.
    #[test]
    fn the_word_scan_finds_the_first_special_byte() {
        let special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        for v in 0..=255u8 {
            for at in 0..8 {
                for fill in [b'a', 0x7f, 0xe9, b'"', 0x1f] {
                    let mut w = [b'a'; 8];
                    w[at] = v;
                    for (k, x) in w.iter_mut().enumerate() {
                        if k > at {
                            *x = fill;
                        }
                    }
                    let want = w.iter().position(|&b| special(b));
                    let hits = special_bytes(u64::from_le_bytes(w));
                    let got = (hits != 0).then(|| hits.trailing_zeros() as usize / 8);
                    assert_eq!(got, want, "{w:?}");
                }
            }
        }
    }
}
