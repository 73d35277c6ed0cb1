//! The decoding stage: [`Decoder::decode`] turns a [`RawChunk`](super::RawChunk) into Arrow
//! records (flat JSON in one pass, the rest with arrow's JSON and CSV decoders), naming each
//! record that does not decode, and splits the batch by partition when the source has an
//! assigner. Any number of threads run it on successive chunks.

use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use super::chunk::{BadRecord, Chunk, RawChunk};
use super::framing::{record_text, tidy_csv_error, tidy_json_error};
use super::infer::{csv_read_schema, malformed};
use super::input::InputFormat;
use crate::bucket::BucketAssigner;
use crate::error::Result;
use crate::ingest::flat_json::FlatJson;
use crate::ingest::json_types::{self, StrictJson};

/// A check of decoded records for what would fail later, in the writer (a partition value
/// too long for a directory name): the row index and the reason of each record it rejects.
/// Rejected records are bad records of their own line, like records that do not decode.
pub type RowCheck = Arc<dyn Fn(&RecordBatch) -> Vec<(usize, String)> + Send + Sync>;

/// Turns framed records into Arrow records: typed by the schema, checked by the row check,
/// malformed ones an error (strict) or set aside. Any number of threads may decode successive
/// chunks of one source at once.
#[derive(Clone)]
pub struct Decoder {
    pub(super) format: InputFormat,
    pub(super) schema: SchemaRef,
    pub(super) strict: bool,
    pub(super) row_check: Option<RowCheck>,
    /// The Arrow decoder of the last chunk, kept for the next: a new one allocates its tape
    /// (about 2 MB for a chunk of eight fields) and its pages are faulted in and zeroed again
    /// for every chunk, 10% of a decoding thread's time. Taken out while in use; dropped
    /// after an error, whatever state that left it in.
    pub(super) reused: Reused,
    /// The one-pass decoder of flat JSON records, if the schema is flat: tried first on every
    /// chunk, arrow's decoder decodes what it declines.
    pub(super) flat: Option<Arc<FlatJson>>,
    /// The sink's bucket assigner, if the chunks are split here ([`InputSource::with_assigner`]).
    pub(super) assigner: Option<Arc<dyn BucketAssigner>>,
}

/// The Arrow decoder a [`Decoder`] keeps for its next chunk, with the rows it takes at once;
/// a clone starts without one.
#[derive(Default)]
pub(super) struct Reused(pub(super) std::sync::Mutex<Option<(ArrowDecoder, usize)>>);

impl Clone for Reused {
    fn clone(&self) -> Self {
        Reused::default()
    }
}

/// An Arrow decoder of the input format, for [`Decoder::reused`].
pub(super) enum ArrowDecoder {
    Json(arrow::json::reader::Decoder),
    Csv(Box<arrow::csv::reader::Decoder>),
}

/// Rows a reused Arrow decoder takes at once, at least: every chunk's records (a chunk has at
/// most [`crate::ingest::CHUNK_RECORDS_MAX`] until chunks grow with many open files; a larger
/// one gets a decoder of its own size, kept in turn and reused for chunks up to that size)
/// and one more, which tells that a buffer held more.
pub(super) const REUSED_BATCH_ROWS: usize = crate::ingest::CHUNK_RECORDS_MAX + 1;

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("format", &self.format)
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder of records in `format` into `schema`; `strict`: a record that does not
    /// decode fails the chunk, else it is set aside as a bad record.
    pub(crate) fn new(format: InputFormat, schema: SchemaRef, strict: bool) -> Decoder {
        Decoder {
            format,
            flat: match format {
                InputFormat::Jsonl => FlatJson::new(&schema).map(Arc::new),
                InputFormat::Csv => None,
            },
            schema,
            strict,
            row_check: None,
            reused: Reused::default(),
            assigner: None,
        }
    }

    /// Also checks each decoded batch with `check` (see [`InputSource::with_row_check`](super::InputSource::with_row_check)).
    pub(crate) fn with_row_check(mut self, check: RowCheck) -> Decoder {
        self.row_check = Some(check);
        self
    }

    /// Also splits the good records into buckets with `assigner` (see
    /// [`InputSource::with_assigner`](super::InputSource::with_assigner)).
    pub(crate) fn with_assigner(mut self, assigner: Arc<dyn BucketAssigner>) -> Decoder {
        self.assigner = Some(assigner);
        self
    }

    /// Decodes `raw`: its records all at once, and only if that fails record by record.
    /// With an assigner, the good records are split into buckets (after the row check, which
    /// sets aside what the assigner would refuse).
    ///
    /// A batch the assigner refuses (which the row check lets through only in cases it
    /// cannot tell, such as a batch of more than `u32::MAX` rows) stays whole: the writer's own
    /// split refuses it again, as a write error of this chunk, as without an assigner.
    pub fn decode(&self, raw: RawChunk) -> Result<Chunk> {
        let (mut batch, mut bad) = match raw.spans.is_empty() {
            true => (None, Vec::new()),
            false => self.decode_records(&raw)?,
        };
        // The framed bytes go before the split makes its copy of the records.
        let RawChunk {
            cursor,
            read,
            too_long,
            position,
            parts,
            ..
        } = raw;
        bad.extend(too_long);
        let mut buckets = Vec::new();
        if let (Some(assigner), Some(b)) = (&self.assigner, &batch) {
            if let Ok(split) = assigner.assign(b, chrono::Utc::now()) {
                buckets = split;
                batch = None;
            }
        }
        Ok(Chunk {
            batch,
            buckets,
            bad,
            cursor,
            read,
            position,
            parts,
        })
    }

    /// The records of `raw`: all at once, and only if that fails record by record.
    pub(super) fn decode_records(
        &self,
        raw: &RawChunk,
    ) -> Result<(Option<RecordBatch>, Vec<BadRecord>)> {
        if let Some(batch) = self
            .flat
            .as_ref()
            .and_then(|f| f.decode(&raw.buf, &raw.spans))
        {
            // It declines a record with a key twice: its batch has none.
            return self.check_rows(raw, Some(batch), None, Vec::new(), true);
        }
        let n = raw.spans.len();
        if let Ok(batch) = self.decode_all(&raw.buf, n) {
            return self.check_rows(raw, Some(batch), None, Vec::new(), false);
        }
        let input = &raw.display;
        let mut batches = Vec::new();
        let mut bad = Vec::new();
        let mut decoded = Vec::new();
        for (i, &(line, start, end)) in raw.spans.iter().enumerate() {
            let rec = &raw.buf[start..end];
            match self.decode_all(rec, 1) {
                Ok(b) => {
                    batches.push(b);
                    decoded.push(i);
                }
                Err(e) => {
                    let msg = match self.format {
                        InputFormat::Jsonl => tidy_json_error(&e.to_string()),
                        InputFormat::Csv => tidy_csv_error(&e.to_string()),
                    };
                    if self.strict {
                        return Err(malformed(input, line, &msg));
                    }
                    bad.push(BadRecord {
                        source: format!("{input}:{line}"),
                        line: record_text(rec),
                        error: msg,
                    });
                }
            }
        }
        let batch = if batches.is_empty() {
            None
        } else {
            Some(arrow::compute::concat_batches(&self.schema, &batches)?)
        };
        self.check_rows(raw, batch, Some(&decoded), bad, false)
    }

    /// Applies the checks beyond decoding to `batch`, whose row `i` is the record of span
    /// `decoded[i]` (of span `i` when `decoded` is `None`): a rejected record is an error
    /// naming its line, or goes to `bad`. JSON records are checked for a key given twice
    /// unless `keys_checked` (arrow's decoder keeps the last value).
    pub(super) fn check_rows(
        &self,
        raw: &RawChunk,
        batch: Option<RecordBatch>,
        decoded: Option<&[usize]>,
        mut bad: Vec<BadRecord>,
        keys_checked: bool,
    ) -> Result<(Option<RecordBatch>, Vec<BadRecord>)> {
        let Some(b) = &batch else {
            return Ok((batch, bad));
        };
        let mut rejected = Vec::new();
        if self.format == InputFormat::Csv {
            rejected.extend(non_finite_floats(b));
        }
        if self.format == InputFormat::Jsonl && !keys_checked {
            for row in 0..b.num_rows() {
                let (_, start, end) = raw.spans[decoded.map_or(row, |d| d[row])];
                if let Some(key) = json_types::repeated_key(&raw.buf[start..end]) {
                    rejected.push((
                        row,
                        format!(
                            "key `{key}` appears twice in one object; its first value would be \
                             dropped"
                        ),
                    ));
                }
            }
        }
        if let Some(check) = &self.row_check {
            rejected.extend(check(b));
        }
        if rejected.is_empty() {
            return Ok((batch, bad));
        }
        rejected.sort_by_key(|(row, _)| *row);
        let input = &raw.display;
        let mut keep = vec![true; b.num_rows()];
        for (row, msg) in rejected {
            if !keep[row] {
                continue; // one reason per record
            }
            let (line, start, end) = raw.spans[decoded.map_or(row, |d| d[row])];
            if self.strict {
                return Err(malformed(input, line, &msg));
            }
            keep[row] = false;
            bad.push(BadRecord {
                source: format!("{input}:{line}"),
                line: record_text(&raw.buf[start..end]),
                error: msg,
            });
        }
        let kept = arrow::compute::filter_record_batch(b, &BooleanArray::from(keep))?;
        Ok(((kept.num_rows() > 0).then_some(kept), bad))
    }

    /// Decodes `buf`, which must hold exactly `n` records.
    pub(super) fn decode_all(&self, buf: &[u8], n: usize) -> Result<RecordBatch, ArrowError> {
        let kept = self
            .reused
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let (decoder, rows) = match kept {
            Some((d, rows)) if n < rows => (d, rows),
            _ => {
                let rows = n.max(REUSED_BATCH_ROWS - 1) + 1;
                (self.arrow_decoder(rows)?, rows)
            }
        };
        let (batch, decoder) = Self::decode_with(decoder, buf)?;
        *self.reused.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((decoder, rows));
        let batch = match batch {
            Some(b) if self.format == InputFormat::Csv => self.csv_typed(b)?,
            Some(b) => b,
            None => RecordBatch::new_empty(self.schema.clone()),
        };
        if batch.num_rows() != n {
            return Err(ArrowError::JsonError(if n == 1 {
                format!("{} records on one line", batch.num_rows())
            } else {
                format!("expected {n} records, decoded {}", batch.num_rows())
            }));
        }
        Ok(batch)
    }

    /// `batch`, decoded from CSV with text for the schema's `Null`, `Date32`, `Timestamp`, `LargeUtf8` and
    /// decimal columns ([`csv_read_schema`]), back in the schema: a value of a `Null` column
    /// is an error (a job's schema has such columns when its runs saw a header and no record
    /// yet), and dates, timestamps and decimals are parsed by the typing rule of JSON input
    /// ([`json_types::date32_from_str`], [`json_types::timestamp_from_str`],
    /// [`json_types::decimal_from_str`]). Arrow's CSV decoder would drop every value of a
    /// `Null` column, cut a timestamp to the column's unit (`10:00:00.750` in a column of
    /// seconds), a date-time to its day in a `Date32` column and `12.345` to `12.35` in a
    /// decimal column of scale 2, all without a word.
    pub(super) fn csv_typed(&self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        let mut columns = batch.columns().to_vec();
        let mut changed = false;
        for (i, field) in self.schema.fields().iter().enumerate() {
            let dt = field.data_type();
            let column = match dt {
                DataType::Null => {
                    if columns[i].null_count() != batch.num_rows() {
                        return Err(ArrowError::CsvError(format!(
                            "column `{}` has type Null and holds no value, but the record has one",
                            field.name()
                        )));
                    }
                    arrow::array::new_null_array(&DataType::Null, batch.num_rows())
                }
                DataType::Date32
                | DataType::Timestamp(_, _)
                | DataType::Decimal128(_, _)
                | DataType::Decimal256(_, _) => {
                    let text = columns[i].as_string::<i32>();
                    json_types::typed_from_text(text, dt).map_err(|e| {
                        ArrowError::CsvError(format!("column `{}`: {e}", field.name()))
                    })?
                }
                DataType::LargeUtf8 => arrow::compute::cast(&columns[i], dt)?,
                _ => continue,
            };
            columns[i] = column;
            changed = true;
        }
        if !changed {
            return Ok(batch);
        }
        RecordBatch::try_new(self.schema.clone(), columns)
    }

    /// A new Arrow decoder of the input format that takes `batch_rows` rows at once.
    pub(super) fn arrow_decoder(&self, batch_rows: usize) -> Result<ArrowDecoder, ArrowError> {
        Ok(match self.format {
            InputFormat::Jsonl => ArrowDecoder::Json(
                arrow::json::ReaderBuilder::new(self.schema.clone())
                    .with_strict_mode(true)
                    .with_decoder_factory(Arc::new(StrictJson))
                    .with_batch_size(batch_rows)
                    .build_decoder()?,
            ),
            InputFormat::Csv => ArrowDecoder::Csv(Box::new(
                arrow::csv::ReaderBuilder::new(Arc::new(csv_read_schema(&self.schema)))
                    .with_header(false)
                    .with_batch_size(batch_rows)
                    .build_decoder(),
            )),
        })
    }

    /// Every record of `buf` through `decoder`, which is handed back only if it succeeded
    /// (and so holds nothing any more).
    pub(super) fn decode_with(
        decoder: ArrowDecoder,
        buf: &[u8],
    ) -> Result<(Option<RecordBatch>, ArrowDecoder), ArrowError> {
        Ok(match decoder {
            ArrowDecoder::Json(mut d) => {
                let mut pos = 0;
                while pos < buf.len() {
                    let k = d.decode(&buf[pos..])?;
                    if k == 0 {
                        break;
                    }
                    pos += k;
                }
                if pos < buf.len() {
                    return Err(ArrowError::JsonError(
                        "more than one JSON value on a line".into(),
                    ));
                }
                if d.has_partial_record() {
                    return Err(ArrowError::JsonError("incomplete JSON value".into()));
                }
                (d.flush()?, ArrowDecoder::Json(d))
            }
            ArrowDecoder::Csv(mut d) => {
                let mut pos = 0;
                while pos < buf.len() {
                    let k = d.decode(&buf[pos..])?;
                    if k == 0 {
                        break;
                    }
                    pos += k;
                }
                d.decode(&[])?;
                if pos < buf.len() {
                    return Err(ArrowError::CsvError("more records than lines".into()));
                }
                (d.flush()?, ArrowDecoder::Csv(d))
            }
        })
    }
}

/// The rows of `batch` with a NaN or an infinity in a float column (CSV reads `NaN` and
/// `inf`; JSON has no such numbers): such a value is a bad record in either format, since
/// JSON lines output cannot hold it and would write `null`.
pub(super) fn non_finite_floats(batch: &RecordBatch) -> Vec<(usize, String)> {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Float32Type, Float64Type};
    let mut out = Vec::new();
    for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let mut push = |row: usize, v: f64| {
            out.push((
                row,
                format!(
                    "{v} in column `{}`: NaN and infinities are not accepted",
                    f.name()
                ),
            ))
        };
        match col.data_type() {
            DataType::Float64 => {
                let a = col.as_primitive::<Float64Type>();
                if a.values().iter().any(|v| !v.is_finite()) {
                    for (row, v) in a.iter().enumerate() {
                        match v {
                            Some(v) if !v.is_finite() => push(row, v),
                            _ => {}
                        }
                    }
                }
            }
            DataType::Float32 => {
                let a = col.as_primitive::<Float32Type>();
                if a.values().iter().any(|v| !v.is_finite()) {
                    for (row, v) in a.iter().enumerate() {
                        match v {
                            Some(v) if !v.is_finite() => push(row, f64::from(v)),
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}
