//! Schema inference: the columns of a new job from its first records
//! ([`INFER_RECORDS`](super::INFER_RECORDS), more for fields null so far), by the JSON typing
//! rule that CSV follows too; in the records' key order.

use std::collections::VecDeque;
use std::io::{self, Cursor as IoCursor};
use std::time::Instant;

use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use serde::Deserialize;

use super::framing::{csv_fields, json_error, too_long, RecordReader};
use super::input::{open_file, Input, InputFormat};
use super::stdin::StdinRecords;
use super::{INFER_NULL_RECORDS, INFER_NULL_STDIN_BYTES, INFER_RECORDS};
use crate::error::{Error, Result};
use crate::ingest::json_types::{self, refine_inferred};

/// Where schema inference reads records: a file, or records standard input already sent.
pub(super) enum InferReader {
    File(RecordReader),
    Queued(VecDeque<(u64, Vec<u8>)>),
}

impl InferReader {
    /// As `next_record`, but with `set_aside` a record too long to read is read past (the
    /// run sets it aside when it decodes it).
    pub(super) fn next_record_within(
        &mut self,
        buf: &mut Vec<u8>,
        set_aside: bool,
    ) -> io::Result<Option<u64>> {
        loop {
            let start = buf.len();
            match self.next_record(buf) {
                Err(e) if set_aside && too_long(&e).is_some() => {
                    let InferReader::File(r) = self else {
                        return Err(e);
                    };
                    let tl = too_long(&e).expect("checked above");
                    r.skip_rest(tl, (buf.len() - start) as u64)?;
                    buf.truncate(start);
                }
                other => return other,
            }
        }
    }

    pub(super) fn next_record(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<u64>> {
        match self {
            InferReader::File(r) => r.next_record(buf),
            InferReader::Queued(q) => Ok(q.pop_front().map(|(line, rec)| {
                buf.extend_from_slice(&rec);
                line
            })),
        }
    }
}

/// Infers the schema from the first [`INFER_RECORDS`] records of `input` (a JSON field `null`
/// in all of them: from its first value, up to [`INFER_NULL_RECORDS`]). For standard input
/// the records read are kept and handed to [`InputSource::new`](super::InputSource::new); with a `stdin_deadline`, standard
/// input is inferred from the records that came by then (at least one), so a slow input is
/// not held back until [`INFER_RECORDS`] records have come; for a field `null` so far it
/// waits for at most `stdin_records` records (those the first checkpoint waits for anyway).
///
/// A malformed record among them is an error naming its line when `strict`; otherwise it is
/// skipped here (and reported when it is decoded).
pub fn infer_schema(
    input: &Input,
    format: InputFormat,
    strict: bool,
    stdin_deadline: Option<Instant>,
    stdin_records: usize,
) -> Result<(Schema, Option<StdinRecords>)> {
    let (mut reader, mut prefix) = match input.is_stdin() {
        false => {
            let (reader, _) =
                open_file(input).map_err(|e| Error::io("open input", &input.display, e))?;
            let r = RecordReader {
                reader,
                offset: 0,
                line: 1,
                crc: 0,
                csv: format == InputFormat::Csv,
            };
            (InferReader::File(r), None)
        }
        true => {
            let csv = format == InputFormat::Csv;
            let mut stdin = StdinRecords::start(input, csv, !strict)?;
            // A CSV header alone says nothing about the types: wait for a row too.
            let least = if csv { 2 } else { 1 };
            stdin
                .fill(INFER_RECORDS + 1, least, stdin_deadline)
                .map_err(|e| Error::io("read", &input.display, e))?;
            (
                InferReader::Queued(stdin.peek(INFER_RECORDS + 1)),
                Some(stdin),
            )
        }
    };
    let read_err = |e: io::Error| Error::io("read input", &input.display, e);
    let mut buf = Vec::new();
    match format {
        InputFormat::Jsonl => {
            let mut values = Vec::new();
            let mut key_order: Vec<String> = Vec::new();
            let mut seen_keys = std::collections::HashSet::new();
            // Integer literals serde_json reads as floats (`-0`, beyond 64 bits), by column.
            let mut float_read = std::collections::HashMap::new();
            let mut read = 0;
            while values.len() < INFER_RECORDS {
                buf.clear();
                let Some(line) = reader
                    .next_record_within(&mut buf, !strict)
                    .map_err(read_err)?
                else {
                    break;
                };
                read += 1;
                match serde_json::from_slice::<serde_json::Value>(&buf) {
                    Ok(v @ serde_json::Value::Object(_)) => {
                        json_types::float_read_integers(&buf, None, &mut float_read);
                        if let Ok(keys) = serde_json::from_slice::<KeyOrder>(&buf) {
                            for k in keys.0 {
                                if seen_keys.insert(k.clone()) {
                                    key_order.push(k);
                                }
                            }
                        }
                        values.push(v);
                    }
                    Ok(_) if strict => {
                        return Err(malformed(&input.display, line, "not a JSON object"));
                    }
                    Err(e) if strict => {
                        return Err(malformed(&input.display, line, &json_error(&e)))
                    }
                    _ => {}
                }
            }
            // A field null in all of them would be typed `Null`, and every later value of it
            // would be a bad record: read on for its first value.
            let mut waiting: Vec<&String> = key_order
                .iter()
                .filter(|k| !values.iter().any(|v| v.get(k).is_some_and(typed)))
                .collect();
            while !waiting.is_empty() && read < INFER_NULL_RECORDS {
                buf.clear();
                // What cannot be read here (a record too long, in a strict run) stops the run
                // where the run reaches it, after the records before it: not here.
                let Ok(next) = reader.next_record_within(&mut buf, !strict) else {
                    break;
                };
                let Some(_) = next else {
                    // A stream: its next records, if they come before the first checkpoint
                    // is due (as many records as it waits for, or its deadline).
                    let wait = stdin_records.min(INFER_NULL_RECORDS);
                    let Some(stdin) = prefix.as_mut() else {
                        break;
                    };
                    let mut rest = stdin.peek_after(read, wait);
                    if rest.is_empty() {
                        if !stdin.more_arrived(wait, INFER_NULL_STDIN_BYTES, stdin_deadline) {
                            break;
                        }
                        rest = stdin.peek_after(read, wait);
                    }
                    reader = InferReader::Queued(rest);
                    continue;
                };
                read += 1;
                // A malformed record is the decoding's to report.
                let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_slice(&buf) else {
                    continue;
                };
                // Only the fields it gives their first values: its other fields, unlike the
                // first records', could change the types those gave.
                let mut found = serde_json::Map::new();
                waiting.retain(|k| match v.get(k).filter(|x| typed(x)) {
                    Some(x) => {
                        found.insert(k.to_string(), x.clone());
                        false
                    }
                    None => true,
                });
                if !found.is_empty() {
                    let keys: Vec<&str> = found.keys().map(String::as_str).collect();
                    json_types::float_read_integers(&buf, Some(&keys), &mut float_read);
                    values.push(serde_json::Value::Object(found));
                }
            }
            if values.is_empty() {
                // No records, no columns: an empty input is not an error.
                return Ok((Schema::empty(), prefix));
            }
            let schema = arrow::json::reader::infer_json_schema_from_iterator(
                values.iter().map(Ok::<_, ArrowError>),
            )
            .map_err(|e| cannot_infer(input, e))?;
            let schema = refine_inferred(schema, &values, &float_read)
                .map_err(|e| cannot_infer(input, e))?;
            Ok((in_key_order(schema, &key_order), prefix))
        }
        InputFormat::Csv => {
            let Some(_) = reader.next_record(&mut buf).map_err(read_err)? else {
                // No header, no records: an empty input is not an error.
                return Ok((Schema::empty(), prefix));
            };
            let columns = csv_fields(&buf).len();
            let mut records = 0;
            let mut rec = Vec::new();
            while records < INFER_RECORDS {
                rec.clear();
                let Some(line) = reader
                    .next_record_within(&mut rec, !strict)
                    .map_err(read_err)?
                else {
                    break;
                };
                let n = csv_fields(&rec).len();
                if n != columns {
                    if strict {
                        return Err(malformed(
                            &input.display,
                            line,
                            &format!("expected {columns} fields, found {n}"),
                        ));
                    }
                    continue;
                }
                buf.extend_from_slice(&rec);
                records += 1;
            }
            let (schema, _) = arrow::csv::reader::Format::default()
                .with_header(true)
                .infer_schema(IoCursor::new(&buf), None)
                .map_err(|e| cannot_infer(input, e))?;
            // With no record at all the columns have no types yet: `Null` (a job with them
            // takes the types of its first records, in a later run).
            match records {
                0 => Ok((schema, prefix)),
                _ => Ok((csv_text_where_empty(schema), prefix)),
            }
        }
    }
}

/// Whether a JSON value gives its field a type: a scalar, or an array or object holding one
/// (`null`, `[]`, `{}` and `[null]` give none).
pub(super) fn typed(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Array(a) => a.iter().any(typed),
        serde_json::Value::Object(o) => o.values().any(typed),
        _ => true,
    }
}

/// `schema`, inferred from CSV records, with text (`Utf8`) for every column that was empty in
/// all of them: Arrow infers `Null` there, and its CSV decoder drops every value of a `Null`
/// column without a word, so a column empty in the first records lost all its later values.
/// Every CSV value is text; a column with none yet can hold any.
pub(super) fn csv_text_where_empty(schema: Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Null => Field::new(f.name(), DataType::Utf8, true),
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The schema Arrow's CSV decoder reads with: text for the columns whose values
/// [`Decoder::csv_typed`] checks and converts itself (`Null`, `Date32`, `Timestamp`,
/// decimals).
pub(super) fn csv_read_schema(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Null
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _) => Field::new(f.name(), DataType::Utf8, true),
            // Arrow's CSV decoder has no LargeUtf8: read as Utf8, cast after.
            DataType::LargeUtf8 => f.as_ref().clone().with_data_type(DataType::Utf8),
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Checks that every column of `schema` has a type the typing rule of CSV input covers (the
/// scalar types of JSON input's rule, [`json_types::check_schema`]; a CSV value is never a
/// list or a struct): the error names the first that does not. `Null` is refused too: the
/// CSV decoder drops every value of such a column.
pub fn check_csv_schema(schema: &Schema) -> std::result::Result<(), String> {
    for f in schema.fields() {
        match f.data_type() {
            DataType::Null => {
                return Err(format!(
                    "column `{}` has type Null, which holds no CSV value (every value in it \
                     would be dropped); give it a type such as Utf8",
                    f.name()
                ))
            }
            t if json_types::is_scalar(t) => {}
            other => {
                return Err(format!(
                    "column `{}` has type {other}, which CSV input does not support \
                     (supported: Boolean, Int8..Int64, UInt8..UInt64, Float32, Float64, Utf8, \
                     LargeUtf8, Date32, Timestamp, Decimal128, Decimal256)",
                    f.name()
                ))
            }
        }
    }
    // The time zone of a timestamp column, as JSON input's rule checks it.
    json_types::check_schema(schema)
}

/// The keys of a JSON object in the order they appear (a `serde_json::Value` sorts them).
pub(super) struct KeyOrder(Vec<String>);

impl<'de> Deserialize<'de> for KeyOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KeyOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<KeyOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(KeyOrder(keys))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// `schema` with its top-level fields in the order their keys first appeared in the input.
pub(super) fn in_key_order(schema: Schema, order: &[String]) -> Schema {
    let at: std::collections::HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.sort_by_key(|f| at.get(f.name().as_str()).copied().unwrap_or(usize::MAX));
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

pub(super) fn malformed(input: &str, line: u64, msg: &str) -> Error {
    Error::InvalidInput(format!("malformed record at {input}:{line}: {msg}"))
}

pub(super) fn cannot_infer(input: &Input, e: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!(
        "cannot infer a schema from `{}`: {e}",
        input.display
    ))
}
