//! Schema inference: the columns of a new job from its first records
//! ([`INFER_RECORDS`](super::INFER_RECORDS), more for fields null so far), by the JSON typing
//! rule that CSV follows too; in the records' key order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Cursor as IoCursor};
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use serde::Deserialize;

use super::framing::{csv_fields, json_error, too_long, LastLine, RecordReader};
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
    let within = (stdin_deadline, stdin_records);
    infer_schema_settled(input, format, strict, within, super::SETTLE_DEFAULT)
}

/// [`infer_schema`], with a file's last record without a line end read as the line-end rule
/// with `settle` reads it ([`InputSource::with_settle`](super::InputSource::with_settle)):
/// what the run will not take says nothing of the columns.
pub(crate) fn infer_schema_settled(
    input: &Input,
    format: InputFormat,
    strict: bool,
    (stdin_deadline, stdin_records): (Option<Instant>, usize),
    settle: Duration,
) -> Result<(Schema, Option<StdinRecords>)> {
    let mut sample = Sample::open(input, format, strict, stdin_deadline, stdin_records)?;
    if let (InferReader::File(r), Some(path), None) =
        (&mut sample.reader, &input.path, input.compression)
    {
        let file =
            std::fs::File::open(path).map_err(|e| Error::io("open input", &input.display, e))?;
        r.last_line = LastLine::Settled {
            file: std::sync::Arc::new(file),
            settle,
        };
    }
    let schema = match format {
        InputFormat::Jsonl => sample.json_schema()?,
        InputFormat::Csv => sample.csv_schema()?,
    };
    Ok((schema, sample.stdin))
}

/// The records of an input that schema inference reads, and how it reads them
/// ([`infer_schema`]).
struct Sample<'a> {
    /// The input.
    input: &'a Input,
    /// Where the records come from.
    reader: InferReader,
    /// Standard input's records, kept for the run; `None` for a file.
    stdin: Option<StdinRecords>,
    /// Whether a malformed record is an error.
    strict: bool,
    /// How long standard input is waited for.
    stdin_deadline: Option<Instant>,
    /// How many records of standard input a field `null` so far waits for at most.
    stdin_records: usize,
}

/// What the first records of a JSON input say.
#[derive(Default)]
struct JsonSeen {
    /// The records read (objects), then, for each field `null` in all of them, an object of
    /// its first value.
    values: Vec<serde_json::Value>,
    /// The top-level keys, in the order they first appeared.
    key_order: Vec<String>,
    /// Integer literals serde_json reads as floats (`-0`, beyond 64 bits), by column.
    float_read: HashMap<String, Vec<String>>,
    /// How many records were read.
    read: usize,
}

impl<'a> Sample<'a> {
    /// Opens `input` for inference; standard input is read until it has sent enough records
    /// or `stdin_deadline` has passed.
    fn open(
        input: &'a Input,
        format: InputFormat,
        strict: bool,
        stdin_deadline: Option<Instant>,
        stdin_records: usize,
    ) -> Result<Sample<'a>> {
        let (reader, stdin) = match input.is_stdin() {
            false => {
                let (reader, _) =
                    open_file(input).map_err(|e| Error::io("open input", &input.display, e))?;
                let r = RecordReader {
                    reader,
                    offset: 0,
                    line: 1,
                    crc: 0,
                    csv: format == InputFormat::Csv,
                    last_line: LastLine::Taken,
                };
                (InferReader::File(r), None)
            }
            true => {
                let csv = format == InputFormat::Csv;
                let mut stdin = StdinRecords::start(input, csv, !strict)?;
                // A CSV header alone says nothing about the types: wait for a row too.
                let least = if csv { 2 } else { 1 };
                // No more records than the first checkpoint waits for: a stream that sends
                // fewer than the inference window and stays open is checkpointed on its
                // schedule, not held until the window fills or the stream ends.
                let wanted = (INFER_RECORDS + 1).min(stdin_records.max(least));
                stdin
                    .fill(wanted, least, stdin_deadline)
                    .map_err(|e| Error::io("read", &input.display, e))?;
                (
                    InferReader::Queued(stdin.peek(INFER_RECORDS + 1)),
                    Some(stdin),
                )
            }
        };
        Ok(Sample {
            input,
            reader,
            stdin,
            strict,
            stdin_deadline,
            stdin_records,
        })
    }

    /// The error of a failed read.
    fn read_err(&self, e: io::Error) -> Error {
        Error::io("read input", &self.input.display, e)
    }

    /// The schema of JSON lines, in the records' key order.
    fn json_schema(&mut self) -> Result<Schema> {
        let mut seen = self.first_json_records()?;
        self.first_values(&mut seen);
        if seen.values.is_empty() {
            // No records, no columns: an empty input is not an error.
            return Ok(Schema::empty());
        }
        let schema = arrow::json::reader::infer_json_schema_from_iterator(
            seen.values.iter().map(Ok::<_, ArrowError>),
        )
        .map_err(|e| cannot_infer(self.input, e))?;
        let schema = refine_inferred(schema, &seen.values, &seen.float_read)
            .map_err(|e| cannot_infer(self.input, e))?;
        Ok(in_key_order(schema, &seen.key_order))
    }

    /// Reads the first [`INFER_RECORDS`] JSON objects.
    fn first_json_records(&mut self) -> Result<JsonSeen> {
        let mut seen = JsonSeen::default();
        let mut seen_keys = HashSet::new();
        let mut buf = Vec::new();
        while seen.values.len() < INFER_RECORDS {
            buf.clear();
            let Some(line) = self
                .reader
                .next_record_within(&mut buf, !self.strict)
                .map_err(|e| self.read_err(e))?
            else {
                break;
            };
            seen.read += 1;
            match serde_json::from_slice::<serde_json::Value>(&buf) {
                Ok(v @ serde_json::Value::Object(_)) => {
                    json_types::float_read_integers(&buf, None, &mut seen.float_read);
                    if let Ok(keys) = serde_json::from_slice::<KeyOrder>(&buf) {
                        for k in keys.0 {
                            if seen_keys.insert(k.clone()) {
                                seen.key_order.push(k);
                            }
                        }
                    }
                    seen.values.push(v);
                }
                Ok(_) if self.strict => {
                    return Err(malformed(&self.input.display, line, "not a JSON object"));
                }
                Err(e) if self.strict => {
                    return Err(malformed(&self.input.display, line, &json_error(&e)))
                }
                _ => {}
            }
        }
        Ok(seen)
    }

    /// Reads on for the first value of each field `null` in all the records `seen` so far,
    /// up to [`INFER_NULL_RECORDS`] records, and adds those values to `seen`.
    fn first_values(&mut self, seen: &mut JsonSeen) {
        // A field null in all of them would be typed `Null`, and every later value of it
        // would be a bad record: read on for its first value.
        let mut waiting: Vec<&String> = seen
            .key_order
            .iter()
            .filter(|k| !seen.values.iter().any(|v| v.get(k).is_some_and(typed)))
            .collect();
        let mut buf = Vec::new();
        while !waiting.is_empty() && seen.read < INFER_NULL_RECORDS {
            buf.clear();
            // What cannot be read here (a record too long, in a strict run) stops the run
            // where the run reaches it, after the records before it: not here.
            let Ok(next) = self.reader.next_record_within(&mut buf, !self.strict) else {
                break;
            };
            let Some(_) = next else {
                // A stream: its next records, if they come before the first checkpoint
                // is due (as many records as it waits for, or its deadline).
                if !self.more_of_stream(seen.read) {
                    break;
                }
                continue;
            };
            seen.read += 1;
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
                json_types::float_read_integers(&buf, Some(&keys), &mut seen.float_read);
                seen.values.push(serde_json::Value::Object(found));
            }
        }
    }

    /// Reads standard input's records after the first `read` from now on, once they come;
    /// false if there are none (a file, or a stream that sent no more in time).
    fn more_of_stream(&mut self, read: usize) -> bool {
        let wait = self.stdin_records.min(INFER_NULL_RECORDS);
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        let mut rest = stdin.peek_after(read, wait);
        if rest.is_empty() {
            if !stdin.more_arrived(wait, INFER_NULL_STDIN_BYTES, self.stdin_deadline) {
                return false;
            }
            rest = stdin.peek_after(read, wait);
        }
        self.reader = InferReader::Queued(rest);
        true
    }

    /// The schema of CSV records, from their header and first [`INFER_RECORDS`] rows.
    fn csv_schema(&mut self) -> Result<Schema> {
        let mut buf = Vec::new();
        let Some(_) = self
            .reader
            .next_record(&mut buf)
            .map_err(|e| self.read_err(e))?
        else {
            // No header, no records: an empty input is not an error.
            return Ok(Schema::empty());
        };
        let columns = csv_fields(&buf).len();
        let mut records = 0;
        let mut rec = Vec::new();
        while records < INFER_RECORDS {
            rec.clear();
            let Some(line) = self
                .reader
                .next_record_within(&mut rec, !self.strict)
                .map_err(|e| self.read_err(e))?
            else {
                break;
            };
            let n = csv_fields(&rec).len();
            if n != columns {
                if self.strict {
                    return Err(malformed(
                        &self.input.display,
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
            .map_err(|e| cannot_infer(self.input, e))?;
        // With no record at all the columns have no types yet: `Null` (a job with them
        // takes the types of its first records, in a later run).
        match records {
            0 => Ok(schema),
            _ => Ok(csv_text_where_empty(schema)),
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
