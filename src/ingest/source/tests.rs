use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Cursor as IoCursor, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::check::check_read;
use super::chunk::RawChunk;
use super::decode::{Decoder, Reused, REUSED_BATCH_ROWS};
use super::framing::{csv_fields, read_line_crc, tidy_csv_error, LastLine, RecordReader};
use super::infer::infer_schema;
use super::input::{Input, InputFormat};
use super::position::{Cursor, Prefix, SourcePosition, TimePartitionBy};
use super::*;
use crate::bucket::{BucketAssigner, BucketId};
use crate::error::{Error, Result};
use crate::ingest::flat_json::FlatJson;
use crate::ingest::json_types;

/// A job read `first` (whose last line has no line end) of a file, then `added` came: a
/// reader resuming there refuses a continued line, and reads on after a line end. Both
/// plain and gzip, where the check sits in the reader itself (the input may grow after
/// `check_read` looked), and in `check_read`.
#[test]
fn a_continued_last_line_is_refused_where_reading_resumes() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_ref(&Schema::new(vec![arrow::datatypes::Field::new(
        "n",
        arrow::datatypes::DataType::Int64,
        true,
    )]));
    let gzip = |text: &str| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    for (name, first, added, refused) in [
        ("cut.csv", "n\n12", "34\n56\n", true),
        ("ended.csv", "n\n12", "\n56\n", false),
        ("crlf.csv", "n\r\n12", "\r\n56\r\n", false),
        ("cut.jsonl", "{\"n\":12}", "{\"n\":34}\n", true),
        ("cut.csv.gz", "n\n12", "34\n56\n", true),
        ("ended.csv.gz", "n\n12", "\n56\n", false),
    ] {
        let path = dir.path().join(name);
        let compressed = name.ends_with(".gz");
        let bytes = |t: &str| {
            if compressed {
                gzip(t)
            } else {
                t.as_bytes().to_vec()
            }
        };
        std::fs::write(&path, bytes(first)).unwrap();
        let input = Input::file(&path).unwrap();
        let read = Prefix {
            offset: first.len() as u64,
            line: 1 + first.matches('\n').count() as u64,
            crc32c: Some(crc32c::crc32c(first.as_bytes())),
        };
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&bytes(added)).unwrap(); // another gzip member
        let format = InputFormat::from_path(name).unwrap();
        let mut source = InputSource::new(vec![input.clone()], format, schema.clone(), vec![read]);
        let got = source.next_raw(100);
        let checked = check_read("j", &[input], &[read]);
        if refused {
            let e = got.expect_err(name).to_string();
            assert!(e.contains("had no line end"), "{name}: {e}");
            let e = checked.expect_err(name).to_string();
            assert!(e.contains("had no line end"), "{name}: {e}");
        } else {
            let raw = got.unwrap().expect(name);
            assert_eq!(raw.records(), 1, "{name}");
            assert_eq!(checked.unwrap(), vec![true], "{name}");
        }
    }
}

/// A chunk of `in.jsonl` holding `records` (each ending with `\n`), from line 1.
fn raw_of(records: &[Vec<u8>]) -> RawChunk {
    let mut buf = Vec::new();
    let mut spans = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let start = buf.len();
        buf.extend_from_slice(r);
        spans.push((i as u64 + 1, start, buf.len()));
    }
    RawChunk {
        display: Arc::from("in.jsonl"),
        buf,
        spans,
        cursor: Cursor::START,
        read: Vec::new(),
        too_long: Vec::new(),
        position: None,
        parts: None,
    }
}

/// Chunks as framed: each chunk's bytes and its records' spans.
type Framed = Vec<(Vec<u8>, Vec<(u64, usize, usize)>)>;

/// Frames `data` the way `InputSource::next_raw_within` does (chunks of at most `records_max`
/// records, closed at `bytes_max` bytes), with or without the buffered run of lines first;
/// returns each chunk's bytes and spans, then the reader's end position.
fn frame_all(
    data: &[u8],
    capacity: usize,
    records_max: usize,
    bytes_max: usize,
    buffered: bool,
) -> (Framed, Prefix, String) {
    let mut r = RecordReader {
        reader: BufReader::with_capacity(capacity, IoCursor::new(data.to_vec())),
        offset: 0,
        line: 1,
        crc: 0,
        csv: false,
        last_line: LastLine::Taken,
    };
    let mut chunks = Vec::new();
    loop {
        let mut buf = Vec::new();
        let mut spans = Vec::new();
        let mut eof = false;
        while spans.len() < records_max && buf.len() < bytes_max {
            if buffered {
                match r.buffered_records(&mut buf, &mut spans, records_max, bytes_max) {
                    Ok(0) => {}
                    Ok(_) => continue,
                    Err(e) => return (chunks, r.prefix(), e.to_string()),
                }
            }
            let start = buf.len();
            match r.next_record(&mut buf) {
                Ok(Some(line)) => spans.push((line, start, buf.len())),
                Ok(None) => {
                    eof = true;
                    break;
                }
                Err(e) => return (chunks, r.prefix(), e.to_string()),
            }
        }
        if !spans.is_empty() {
            chunks.push((buf, spans));
        }
        if eof {
            return (chunks, r.prefix(), String::new());
        }
    }
}

/// The run of buffered lines frames what `next_record` frames record by record: the same
/// records, spans and line numbers in the same chunks, and the same position and CRC-32C
/// after them, whatever the buffer's size, the chunks' limits and the lines (blank,
/// white space only, `\r\n`, a byte order mark, a last line without its line end).
#[test]
fn buffered_lines_frame_what_next_record_frames() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for case in 0..60 {
        let mut data = Vec::new();
        if case % 5 == 0 {
            data.extend_from_slice(BYTE_ORDER_MARK);
        }
        for i in 0..(next() % 300) {
            match next() % 8 {
                0 => data.extend_from_slice(b"\n"),
                1 => data.extend_from_slice(b"  \t \r\n"),
                2 => data.extend_from_slice(format!("{{\"id\":{i}}}\r\n").as_bytes()),
                3 => data.extend_from_slice(
                    format!(
                        "{{\"id\":{i},\"pad\":\"{}\"}}\n",
                        "x".repeat((next() % 200) as usize)
                    )
                    .as_bytes(),
                ),
                _ => data.extend_from_slice(format!(" {{\"id\":{i}}}\n").as_bytes()),
            }
        }
        if case % 3 == 0 {
            data.extend_from_slice(b"{\"last\":true}");
        } else if case % 3 == 1 {
            data.extend_from_slice(b"   ");
        }
        for capacity in [1, 16, 100, 4096] {
            for (records_max, bytes_max) in [(1, 1 << 20), (3, 50), (1000, 1 << 20), (7, 1)] {
                let theirs = frame_all(&data, capacity, records_max, bytes_max, false);
                let ours = frame_all(&data, capacity, records_max, bytes_max, true);
                assert_eq!(
                    ours, theirs,
                    "case {case}, capacity {capacity}, limits {records_max}/{bytes_max}"
                );
                assert_eq!(theirs.1.offset, data.len() as u64);
                assert_eq!(theirs.1.crc32c, Some(crc32c::crc32c(&data)));
            }
        }
    }
}

fn reader(data: &str, csv: bool) -> RecordReader {
    RecordReader {
        reader: Box::new(IoCursor::new(data.as_bytes().to_vec())),
        offset: 0,
        line: 1,
        crc: 0,
        csv,
        last_line: LastLine::Taken,
    }
}

/// `read_line_crc` reads what `read_until` reads, through any number of refills of the
/// reader's buffer, and stops at the limit; the CRC folds exactly the bytes appended.
#[test]
fn read_line_crc_matches_read_until_across_refills_and_at_the_limit() {
    let data: Vec<u8> = (0..5000u32)
        .flat_map(|i| {
            let mut line = format!(
                "{{\"id\":{i},\"pad\":\"{}\"}}",
                "x".repeat((i % 37) as usize)
            )
            .into_bytes();
            if i % 11 != 10 {
                line.push(b'\n');
            }
            line
        })
        .collect();
    for capacity in [1, 7, 64, 4096] {
        for limit in [1u64, 5, 40, 1 << 20] {
            let mut ours = BufReader::with_capacity(capacity, IoCursor::new(data.clone()));
            let mut theirs = IoCursor::new(data.clone());
            let mut buf = b"kept".to_vec();
            let mut crc = 0u32;
            let mut expected = b"kept".to_vec();
            loop {
                let before = buf.len();
                let n = read_line_crc(&mut ours, limit, &mut buf, &mut crc).unwrap();
                let m = (&mut theirs)
                    .take(limit)
                    .read_until(b'\n', &mut expected)
                    .unwrap();
                assert_eq!(n, m, "capacity {capacity}, limit {limit}");
                assert_eq!(buf.len() - before, n);
                assert!(n as u64 <= limit);
                if n == 0 {
                    break;
                }
            }
            assert_eq!(buf, expected, "capacity {capacity}, limit {limit}");
            assert_eq!(
                crc,
                crc32c::crc32c(&data),
                "capacity {capacity}, limit {limit}"
            );
        }
    }
}

/// With the sink's assigner, the decoding thread splits a chunk's good records by bucket,
/// exactly as the assigner splits them (each bucket's records in input order, the
/// partition column gone); a record whose partition value the row check refuses is set
/// aside first (or fails a strict run naming its line), never assigned. Both JSON
/// decoders, and a chunk without a good record.
#[test]
fn a_decoder_with_the_sinks_assigner_splits_the_good_records_by_bucket() {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Field, Int64Type};

    use crate::bucket::HivePartitioner;

    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("key", DataType::Utf8, true),
    ]));
    let long = "x".repeat(300); // too long for a directory name
    let keys = ["a", "../b", &long, "a", "", "/", "../b", "a\\u0000b", "a"];
    let raw = |keys: &[&str]| {
        let records: Vec<Vec<u8>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| match *k {
                "" => format!("{{\"id\":{i},\"key\":null}}\n").into_bytes(),
                k => format!("{{\"id\":{i},\"key\":\"{k}\"}}\n").into_bytes(),
            })
            .collect();
        raw_of(&records)
    };
    let partitioner = HivePartitioner::new(vec!["key".to_string()]).unwrap();
    let decoder = |strict: bool, flat: Option<Arc<FlatJson>>, assign: bool| Decoder {
        format: InputFormat::Jsonl,
        schema: schema.clone(),
        strict,
        row_check: Some(super::super::rules::partition_check(
            partitioner.clone(),
            None,
        )),
        reused: Reused::default(),
        flat,
        assigner: assign.then(|| Arc::new(partitioner.clone()) as Arc<dyn BucketAssigner>),
    };
    let ids_by_bucket = |buckets: &[(BucketId, RecordBatch)]| -> Vec<(String, Vec<i64>)> {
        let mut out: Vec<(String, Vec<i64>)> = buckets
            .iter()
            .map(|(id, b)| {
                assert_eq!(b.schema().fields().len(), 1, "the partition column is gone");
                let ids = b.column(0).as_primitive::<Int64Type>().values().to_vec();
                (id.to_string(), ids)
            })
            .collect();
        out.sort();
        out
    };
    for flat in [FlatJson::new(&schema).map(Arc::new), None] {
        let plain = decoder(false, flat.clone(), false)
            .decode(raw(&keys))
            .unwrap();
        let expected = ids_by_bucket(
            &partitioner
                .assign(plain.batch.as_ref().unwrap(), chrono::Utc::now())
                .unwrap(),
        );
        let split = decoder(false, flat.clone(), true)
            .decode(raw(&keys))
            .unwrap();
        assert!(split.batch.is_none() && plain.buckets.is_empty());
        assert_eq!(split.records(), keys.len() - 1);
        assert_eq!(plain.records(), keys.len() - 1);
        assert_eq!(split.bad.len(), 1);
        assert_eq!(split.bad[0].source, "in.jsonl:3");
        let got = ids_by_bucket(&split.buckets);
        assert_eq!(got, expected);
        assert_eq!(got.len(), 5, "{got:?}");
        for (_, ids) in &got {
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "input order: {ids:?}");
        }
        let err = decoder(true, flat.clone(), true)
            .decode(raw(&keys))
            .unwrap_err();
        assert!(err.to_string().contains("in.jsonl:3"), "{err}");
        let none = decoder(false, flat.clone(), true)
            .decode(raw(&[&long]))
            .unwrap();
        assert!(none.batch.is_none() && none.buckets.is_empty() && none.records() == 0);
        assert_eq!(none.bad.len(), 1);
        // A batch the assigner refuses stays whole, for the writer to refuse as a write.
        let refusing = Decoder {
            assigner: Some(Arc::new(Refusing)),
            ..decoder(false, flat, false)
        };
        let whole = refusing.decode(raw(&keys)).unwrap();
        assert!(whole.buckets.is_empty());
        assert_eq!(
            whole.batch.as_ref().map(|b| b.num_rows()),
            Some(keys.len() - 1)
        );
        assert_eq!(whole.records(), keys.len() - 1);
    }

    #[derive(Debug)]
    struct Refusing;
    impl BucketAssigner for Refusing {
        fn assign(
            &self,
            _: &RecordBatch,
            _: chrono::DateTime<chrono::Utc>,
        ) -> Result<Vec<(BucketId, RecordBatch)>> {
            Err(Error::InvalidInput("refused".into()))
        }
    }
}

/// One decoder, kept from chunk to chunk: a chunk that fails (a malformed record, a
/// record cut short, a line too many) leaves nothing behind for the next one, in JSON
/// and in CSV.
#[test]
fn a_reused_arrow_decoder_carries_nothing_from_a_failed_chunk() {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
    for (format, good, bad) in [
        (
            InputFormat::Jsonl,
            ["{\"a\":1}\n{\"a\":2}\n", "{\"a\":3}\n"],
            [
                "{\"a\":7}\n{\"a\":}\n",
                "{\"a\":8}\n{\"a\":9",
                "{\"a\":5}{\"a\":6}\n",
            ],
        ),
        (
            InputFormat::Csv,
            ["1\n2\n", "3\n"],
            ["7\nx\n", "8\n9,9\n", "5\n6\n"],
        ),
    ] {
        let decoder = Decoder {
            format,
            schema: schema.clone(),
            strict: true,
            row_check: None,
            reused: Reused::default(),
            flat: None,
            assigner: None,
        };
        let values = |b: RecordBatch| -> Vec<i64> {
            b.column(0).as_primitive::<Int64Type>().values().to_vec()
        };
        assert_eq!(
            values(decoder.decode_all(good[0].as_bytes(), 2).unwrap()),
            [1, 2]
        );
        for (i, bad) in bad.iter().enumerate() {
            // The last one holds one record too many for what the chunk framed.
            let n = if i == 2 { 1 } else { 2 };
            assert!(
                decoder.decode_all(bad.as_bytes(), n).is_err(),
                "{format:?} {bad:?}"
            );
            assert_eq!(
                values(decoder.decode_all(good[1].as_bytes(), 1).unwrap()),
                [3]
            );
        }
        // A chunk larger than the default gets a decoder of its size, kept for the next
        // chunks up to that size (not rebuilt for each), which still tell a record too
        // many from the right count.
        let big = REUSED_BATCH_ROWS * 2;
        let records = |n: usize| -> String {
            (0..n)
                .map(|i| match format {
                    InputFormat::Jsonl => format!("{{\"a\":{i}}}\n"),
                    InputFormat::Csv => format!("{i}\n"),
                })
                .collect()
        };
        let kept_rows = |d: &Decoder| d.reused.0.lock().unwrap().as_ref().map(|(_, r)| *r);
        assert_eq!(
            decoder
                .decode_all(records(big).as_bytes(), big)
                .unwrap()
                .num_rows(),
            big
        );
        assert_eq!(kept_rows(&decoder), Some(big + 1));
        assert_eq!(
            decoder
                .decode_all(records(big - 5).as_bytes(), big - 5)
                .unwrap()
                .num_rows(),
            big - 5
        );
        assert_eq!(kept_rows(&decoder), Some(big + 1), "reused, not rebuilt");
        assert!(decoder
            .decode_all(records(big - 4).as_bytes(), big - 5)
            .is_err());
        assert_eq!(
            values(decoder.decode_all(good[1].as_bytes(), 1).unwrap()),
            [3]
        );
    }
}

#[test]
fn records_skip_blank_lines_and_keep_positions() {
    let mut r = reader("{\"a\":1}\n\n  \n{\"a\":2}", false);
    let mut buf = Vec::new();
    assert_eq!(r.next_record(&mut buf).unwrap(), Some(1));
    assert_eq!((r.offset, r.line), (8, 2));
    buf.clear();
    assert_eq!(r.next_record(&mut buf).unwrap(), Some(4));
    assert_eq!(buf, b"{\"a\":2}\n");
    assert_eq!(r.offset, 19);
    assert_eq!(r.next_record(&mut buf).unwrap(), None);
}

#[test]
fn csv_records_span_lines_inside_quotes() {
    let mut r = reader("a,b\n1,\"x\ny\"\n2,z\n", true);
    let mut buf = Vec::new();
    assert_eq!(r.next_record(&mut buf).unwrap(), Some(1));
    buf.clear();
    assert_eq!(r.next_record(&mut buf).unwrap(), Some(2));
    assert_eq!(csv_fields(&buf), vec!["1", "x\ny"]);
    buf.clear();
    assert_eq!(r.next_record(&mut buf).unwrap(), Some(4));
    assert_eq!(r.line, 5);
}

/// A CSV input that ends inside a quoted field was cut while it was written: an error,
/// not a record whose rest would later become records of its own.
#[test]
fn a_csv_input_ending_inside_quotes_is_an_error() {
    for data in ["a,b\n1,\"abc", "a,b\n1,\"abc\n", "a,b\n1,\"a\"\"b"] {
        let mut r = reader(data, true);
        let mut buf = Vec::new();
        assert_eq!(r.next_record(&mut buf).unwrap(), Some(1));
        buf.clear();
        let e = r.next_record(&mut buf).unwrap_err();
        assert!(
            e.to_string().contains("inside a quoted field"),
            "{data:?}: {e}"
        );
    }
    let mut r = reader("a,b\n1,\"a\"\"b\"", true);
    let mut buf = Vec::new();
    r.next_record(&mut buf).unwrap();
    buf.clear();
    assert_eq!(
        r.next_record(&mut buf).unwrap(),
        Some(2),
        "quotes closed at the end"
    );
}

/// A stream whose bytes come in `pieces`, each one read at once, then, after `pause`,
/// its end.
struct Paced {
    pieces: VecDeque<Vec<u8>>,
    pause: Duration,
}

impl Read for Paced {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(piece) = self.pieces.front_mut() else {
            std::thread::sleep(std::mem::take(&mut self.pause));
            return Ok(0);
        };
        let n = piece.len().min(buf.len());
        buf[..n].copy_from_slice(&piece[..n]);
        piece.drain(..n);
        if piece.is_empty() {
            self.pieces.pop_front();
        }
        Ok(n)
    }
}

/// A JSON field `null` in the first records of a stream takes the type of its first value
/// among the records that came before the first checkpoint's deadline, those already
/// queued too: here they come in two pieces of 600 records (the first value at record
/// 1100, in the second), and nothing more until after the deadline.
#[test]
fn a_stream_field_null_so_far_is_typed_from_the_records_that_came() {
    let lines: Vec<String> = (0..1200)
        .map(|i| match i < 1100 {
            true => format!("{{\"id\":{i},\"x\":null}}\n"),
            false => format!("{{\"id\":{i},\"x\":{i}}}\n"),
        })
        .collect();
    let pieces = lines.chunks(600).map(|c| c.concat().into_bytes()).collect();
    let pause = Duration::from_secs(3);
    let input = Input::reader("paced", Paced { pieces, pause });
    let deadline = Instant::now() + Duration::from_secs(1);
    let (schema, _) = infer_schema(
        &input,
        InputFormat::Jsonl,
        true,
        Some(deadline),
        INFER_NULL_RECORDS,
    )
    .unwrap();
    assert_eq!(
        schema.field_with_name("x").unwrap().data_type(),
        &arrow::datatypes::DataType::Int64
    );
}

/// The schema inferred (strictly) from a JSON-lines file holding `text`.
fn infer_file(name: &str, text: &str) -> Schema {
    let input = std::env::temp_dir().join(format!("filesink-{name}-{}.jsonl", std::process::id()));
    std::fs::write(&input, text).unwrap();
    let (schema, _) = infer_schema(
        &Input::resolve(input.to_str().unwrap()).unwrap(),
        InputFormat::Jsonl,
        true,
        None,
        INFER_NULL_RECORDS,
    )
    .unwrap();
    std::fs::remove_file(&input).unwrap();
    schema
}

/// Decimal text lands exactly or is refused: never rounded (arrow's parser rounds a digit
/// beyond the scale), never out of its precision, never from text that is not a number.
#[test]
fn decimals_are_exact_or_refused() {
    use arrow::datatypes::{i256, Decimal128Type, Decimal256Type};
    let d = DataType::Decimal128(10, 2);
    let dec = |s: &str| json_types::decimal_from_str::<Decimal128Type>(s, 10, 2, &d);
    for (s, v) in [
        ("12.34", 1234),
        ("-12.34", -1234),
        ("+12.3", 1230),
        ("12", 1200),
        ("12.3400000", 1234),
        ("0.5", 50),
        (".5", 50),
        ("5.", 500),
        ("-0", 0),
        ("0e-400", 0),
        ("1.5e1", 1500),
        ("1.5E+1", 1500),
        ("1234e-2", 1234),
        ("1234000e-5", 1234),
        ("1.2345e2", 12345),
        ("99999999.99", 9_999_999_999),
        ("-99999999.99", -9_999_999_999),
        ("00000000000012.34", 1234),
    ] {
        assert_eq!(dec(s), Ok(v), "{s}");
    }
    for (s, why) in [
        ("12.345", "more digits after the point"),
        ("0.001", "more digits after the point"),
        ("1e-3", "more digits after the point"),
        ("1.23456e2", "more digits after the point"),
        ("1e-400", "more digits after the point"),
        ("100000000", "does not fit"),
        ("1e8", "does not fit"),
        ("1e400", "does not fit"),
        ("1e99999999999999999999", "does not fit"),
        ("", "not a decimal"),
        ("-", "not a decimal"),
        (".", "not a decimal"),
        ("1e", "not a decimal"),
        ("1e+", "not a decimal"),
        (" 1", "not a decimal"),
        ("1 ", "not a decimal"),
        ("1,5", "not a decimal"),
        ("1.2.3", "not a decimal"),
        ("0x10", "not a decimal"),
        ("NaN", "not a decimal"),
        ("inf", "not a decimal"),
        ("--1", "not a decimal"),
    ] {
        let e = dec(s).unwrap_err();
        assert!(e.contains(why), "{s}: {e}");
    }
    // A negative scale keeps hundreds: 1200 is 12 of them, 1250 is not whole.
    let d = DataType::Decimal128(5, -2);
    let dec = |s: &str| json_types::decimal_from_str::<Decimal128Type>(s, 5, -2, &d);
    assert_eq!(dec("1200"), Ok(12));
    assert_eq!(dec("1.2e3"), Ok(12));
    assert!(dec("1250").unwrap_err().contains("more digits"));
    // Beyond 38 digits.
    let d = DataType::Decimal256(50, 3);
    let big = format!("{}.125", "9".repeat(47));
    let v = json_types::decimal_from_str::<Decimal256Type>(&big, 50, 3, &d).unwrap();
    assert_eq!(v.to_string(), format!("{}125", "9".repeat(47)));
    assert_eq!(
        json_types::decimal_from_str::<Decimal256Type>("-1.5", 50, 3, &d),
        Ok(i256::from_i128(-1500))
    );
}

/// The fast path of `date32_from_str` gives what chrono's parser gives, on every spelling.
#[test]
fn dates_parse_as_chrono_parses_them() {
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
    for s in [
        "2026-11-30",
        "0001-01-01",
        "9999-12-31",
        "2024-02-29",
        "2023-02-29",
        "2026-13-01",
        "2026-00-10",
        "2026-1-05",
        "2026-01-5",
        "+2026-11-30",
        "2026-11-30T10:00:00",
        "2026/11/30",
        "20x6-11-30",
        "2026-11-3x",
        "1969-12-31",
        "-001-01-01",
    ] {
        let chrono = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .ok()
            .filter(|_| s.len() >= 10)
            .map(|d| (d - epoch).num_days() as i32);
        assert_eq!(json_types::date32_from_str(s).ok(), chrono, "{s}");
    }
}

/// Integer literals serde_json reads as floats do not make a column `Float64`: `-0` is
/// an integer (beside integers of `Int64` or beyond it), and integers beyond 64 bits are
/// an error rather than floats that round them; at the top level, in structs, in lists
/// and in a field typed by its first value after the first records. A fraction or an
/// exponent keeps `Float64`.
#[test]
fn integer_literals_read_as_floats_keep_an_integer_column() {
    use arrow::datatypes::DataType;
    let of =
        |schema: &Schema, name: &str| schema.field_with_name(name).unwrap().data_type().clone();
    let s = infer_file(
        "negzero",
        "{\"a\":-0,\"b\":-0,\"c\":-0.0,\"d\":1e3,\"s\":{\"x\":-0},\"l\":[-0,3],\"late\":null}\n\
         {\"a\":5,\"b\":18446744073709551615,\"c\":5,\"d\":2,\"s\":{\"x\":-7},\"l\":[],\"late\":null}\n",
    );
    assert_eq!(of(&s, "a"), DataType::Int64);
    assert_eq!(of(&s, "b"), DataType::UInt64);
    assert_eq!(of(&s, "c"), DataType::Float64);
    assert_eq!(of(&s, "d"), DataType::Float64);
    let DataType::Struct(fields) = of(&s, "s") else {
        panic!()
    };
    assert_eq!(fields[0].data_type(), &DataType::Int64);
    let DataType::List(item) = of(&s, "l") else {
        panic!()
    };
    assert_eq!(item.data_type(), &DataType::Int64);

    let mut text = String::new();
    for i in 0..1000 {
        text.push_str(&format!("{{\"i\":{i},\"late\":null}}\n"));
    }
    text.push_str("{\"i\":1000,\"late\":-0}\n{\"i\":-0.5,\"late\":7}\n");
    let s = infer_file("latezero", &text);
    assert_eq!(of(&s, "late"), DataType::Int64);
    assert_eq!(of(&s, "i"), DataType::Int64);

    for (name, text) in [
        (
            "wide",
            "{\"id\":123456789012345678901234567890}\n{\"id\":1}\n",
        ),
        ("below", "{\"id\":-9223372036854775809}\n"),
        ("nested", "{\"s\":{\"id\":[99999999999999999999]}}\n"),
    ] {
        let input =
            std::env::temp_dir().join(format!("filesink-{name}-{}.jsonl", std::process::id()));
        std::fs::write(&input, text).unwrap();
        let err = infer_schema(
            &Input::resolve(input.to_str().unwrap()).unwrap(),
            InputFormat::Jsonl,
            true,
            None,
            INFER_NULL_RECORDS,
        )
        .err()
        .expect("refused")
        .to_string();
        std::fs::remove_file(&input).unwrap();
        assert!(err.contains("beyond the 64-bit range"), "{name}: {err}");
    }
    let s = infer_file(
        "widefraction",
        "{\"v\":123456789012345678901234567890}\n{\"v\":0.5}\n",
    );
    assert_eq!(of(&s, "v"), DataType::Float64);
    // And `-0` is read into such a column as 0, also an unsigned one.
    assert_eq!(json_types::parse_int::<u64>("-0", &DataType::UInt64), Ok(0));
    assert_eq!(json_types::parse_int::<i64>("-0", &DataType::Int64), Ok(0));
}

/// A field `null` in the first records takes its type from its first value, and only
/// it: the rest of that record (`code` as a string, where the first records had integers)
/// changes no other column's type; `[]`, `{}` and `[null]` give no type, the first value
/// that holds one does.
#[test]
fn a_field_null_so_far_is_typed_by_its_first_value_alone() {
    use arrow::datatypes::DataType;
    let mut text = String::new();
    for i in 0..1000 {
        text.push_str(&format!(
            "{{\"code\":{i},\"error\":null,\"tags\":[],\"extra\":{{}}}}\n"
        ));
    }
    text.push_str("{\"code\":\"E_TIMEOUT\",\"error\":{\"msg\":\"slow\"},\"tags\":[null]}\n");
    text.push_str("{\"code\":1,\"tags\":[\"a\"],\"extra\":{\"k\":{}}}\n");
    text.push_str("{\"code\":2,\"extra\":{\"k\":1.5}}\n");
    let schema = infer_file("nulls", &text);
    let dt = |name: &str| schema.field_with_name(name).unwrap().data_type().clone();
    assert_eq!(dt("code"), DataType::Int64);
    assert!(matches!(dt("error"), DataType::Struct(f) if f[0].data_type() == &DataType::Utf8));
    assert!(matches!(dt("tags"), DataType::List(f) if f.data_type() == &DataType::Utf8));
    assert!(
        matches!(dt("extra"), DataType::Struct(f) if f.len() == 1
            && matches!(f[0].data_type(), DataType::Float64)),
        "{:?}",
        dt("extra")
    );
}

#[test]
fn inferred_json_fields_keep_the_input_order() {
    let schema = infer_file("order", "{\"z\":1,\"a\":\"x\"}\n{\"m\":1.5,\"z\":2}\n");
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["z", "a", "m"]);
}

#[test]
fn csv_fields_unquote() {
    assert_eq!(
        csv_fields(b"a,\"b,c\",\"d\"\"e\"\r\n"),
        vec!["a", "b,c", "d\"e"]
    );
    assert_eq!(csv_fields(b"\n"), vec![""]);
}

#[test]
fn csv_errors_lose_arrow_line_numbers() {
    assert_eq!(
        tidy_csv_error("Csv error: incorrect number of fields for line 1, expected 4 got 3"),
        "Csv error: incorrect number of fields, expected 4 got 3"
    );
    assert_eq!(
        tidy_csv_error(
            "Error while parsing value 'x' as type 'Int64' for column 0 at line 0. Row data: '[x]'"
        ),
        "Error while parsing value 'x' as type 'Int64' for column 0. Row data: '[x]'"
    );
}

#[test]
fn source_positions_round_trip_through_json() {
    let p = SourcePosition {
        version: SourcePosition::VERSION,
        inputs: vec!["/data/events.jsonl".into()],
        input_format: InputFormat::Jsonl,
        partition_by: vec!["day".into()],
        partition_by_time: Some(TimePartitionBy {
            column: "ts".into(),
            pattern: "dt=%Y-%m-%d/hour=%H".into(),
            time_zone: "+01:00".into(),
        }),
        cursor: Cursor {
            input: 0,
            offset: 123,
            line: 4,
        },
        read: vec![Prefix {
            offset: 123,
            line: 4,
            crc32c: Some(7),
        }],
        records: 3,
        bad_records: 0,
        bad_records_len: None,
        bad_records_file: None,
        bad_records_tail: None,
        schema: Schema::new(vec![arrow::datatypes::Field::new(
            "id",
            arrow::datatypes::DataType::Int64,
            true,
        )]),
        source: None,
    };
    let v = p.to_json();
    assert_eq!(v["offset"], 123);
    assert_eq!(SourcePosition::from_json("j", &v).unwrap(), p);

    // A position without time partitioning has no such field, and one written before it
    // existed reads as "no time partitioning".
    let mut old = p.clone();
    old.partition_by_time = None;
    old.version = SourcePosition::version_for(None);
    let mut v = old.to_json();
    assert!(v.get("partition_by_time").is_none(), "{v}");
    assert_eq!(v["version"], 2);
    v.as_object_mut().unwrap().remove("partition_by_time");
    assert_eq!(SourcePosition::from_json("j", &v).unwrap(), old);
}

/// A CSV column of type `Null` (a job whose runs saw only a header) holds no value: a
/// record with one is refused, not decoded with the value dropped (Arrow's CSV decoder
/// drops every value of a `Null` column); empty values decode.
#[test]
fn a_csv_value_in_a_null_column_is_refused_not_dropped() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("msg", DataType::Null, true),
    ]));
    let decoder = Decoder {
        format: InputFormat::Csv,
        schema: schema.clone(),
        strict: true,
        row_check: None,
        reused: Reused::default(),
        flat: None,
        assigner: None,
    };
    let b = decoder.decode_all(b"1,\n2,\n", 2).unwrap();
    assert_eq!(b.schema(), schema);
    assert_eq!(b.column(1).len(), 2);
    let e = decoder.decode_all(b"3,\n4,hello\n", 2).unwrap_err();
    assert!(e.to_string().contains("column `msg` has type Null"), "{e}");
}

// Values the flat decoder takes (first of each pair) and values it must leave to arrow's
// decoder or decode the same (second), per column type
// (`the_flat_json_decoder_agrees_with_arrows`).
const FLAT_INTS: &[&str] = &[
    "0",
    "7",
    "-0",
    "-128",
    "127",
    "128",
    "-129",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1.0",
    "1e3",
    "1E+2",
    "01",
    "-",
    "1.",
    ".5",
    "+1",
    "\"5\"",
    "true",
    "null",
    "[1]",
    "{}",
    "0x10",
    "1_0",
    "NaN",
];
const FLAT_FLOATS: &[&str] = &[
    "1.5",
    "-0.0",
    "0",
    "1e308",
    "1e309",
    "-1e309",
    "3.4e38",
    "3.5e38",
    "1E-5",
    "2.5e-400",
    "123456789012345678901234567890",
    "0.1000000000000000055511151231257827",
    "1.",
    ".5",
    "+1",
    "-01",
    "1e",
    "1e+",
    "\"1.5\"",
    "null",
    "Infinity",
    "false",
];
const FLAT_BOOLS: &[&str] = &[
    "true", "false", "null", "True", "1", "\"true\"", "tru", "nul",
];
const FLAT_STRINGS: &[&str] = &[
    "\"abc\"",
    "\"\"",
    "\"é日本😀\"",
    "\"a\\\"b\\\\c\\/d\"",
    "\"\\b\\f\\n\\r\\t\"",
    "\"\\u00e9\\u65E5\"",
    "\"\\ud83d\\ude00\"",
    "\"\\u0000\"",
    "\"\\ud83d\"",
    "\"\\ud83dx\"",
    "\"\\udc00\"",
    "\"\\ud83d\\u0041\"",
    "\"\\x\"",
    "\"\\u00g0\"",
    "\"\\u00\"",
    "\"tab\there\"",
    "\"bell\u{7}\"",
    "\"unterminated",
    "5",
    "null",
    "true",
    "[\"a\"]",
    "{\"a\":1}",
    "\"\\\\\"",
    "\"x\\\"",
    // Longer than a word: escapes, stops and ends at every place in one.
    "\"a longer string, with é and 日本 in it and more\"",
    "\"0123456\\n89abcdef0123456789\"",
    "\"01234567\\\"9abcdef\\u00e9\"",
    "\"0123456789abcdef\"",
    "\"012345678\tbcdef\"",
    "\"0123456789ab\u{7f}def\"",
    "\"0123456789abcdefghij",
    "\"0123456789abcdef\\ud83d\\ude00\"",
];
const FLAT_DATES: &[&str] = &[
    "\"2026-11-30\"",
    "\"1970-01-01\"",
    "\"1969-12-31\"",
    "\"2026-02-30\"",
    "\"2026-11-30T01:00:00\"",
    "\"20261130\"",
    "\"2026-1-3\"",
    "19000",
    "null",
];
const FLAT_STAMPS: &[&str] = &[
    "\"2026-11-30T01:02:03Z\"",
    "\"2026-11-30 01:02:03+05:00\"",
    "\"2026-11-30T01:02:03.123Z\"",
    "\"2026-11-30T01:02:03.1234Z\"",
    "\"2026-11-30T01:02:03\"",
    "\"2026-11-30\"",
    "1700000000000",
    "-1",
    "1.5",
    "1e3",
    "\"garbage\"",
    "null",
    "\"9999999-01-01T00:00:00Z\"",
    "true",
];
const FLAT_DECIMALS: &[&str] = &[
    "12.34",
    "\"12.34\"",
    "-0.5",
    "0",
    "-0",
    "1e2",
    "\"1.5E+1\"",
    "12.300",
    "12.345",
    "\"12.345\"",
    "99999999.99",
    "100000000",
    "1e-400",
    "0e-400",
    "1e99999999999999999999",
    "\"1,5\"",
    "\" 1\"",
    "\"\"",
    "\"\\u0031\"",
    "01",
    "1.",
    ".5",
    "+1",
    "true",
    "null",
    "[1]",
];

/// A column of every type the flat decoder serves.
fn flat_schema() -> SchemaRef {
    use arrow::datatypes::{DataType, Field, TimeUnit};
    Arc::new(Schema::new(vec![
        Field::new("i8", DataType::Int8, true),
        Field::new("i64", DataType::Int64, true),
        Field::new("u64", DataType::UInt64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("ls", DataType::LargeUtf8, true),
        Field::new("d", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new(
            "tsz",
            DataType::Timestamp(TimeUnit::Second, Some("+02:00".into())),
            true,
        ),
        Field::new("dec", DataType::Decimal128(10, 2), true),
        Field::new("dec256", DataType::Decimal256(40, 3), true),
        Field::new("nn", DataType::Int64, false),
    ]))
}

/// The one-pass decoder of flat records gives what arrow's decoder gives, on every kind of
/// value, good and bad, of every column type it serves: a chunk decodes to the same
/// records, the same bad records and the same error with it as without it. And it answers
/// itself (does not hand the chunk on) for the records it is there for.
#[test]
fn the_flat_json_decoder_agrees_with_arrows() {
    let schema = flat_schema();
    let flat = FlatJson::new(&schema).map(Arc::new);
    assert!(flat.is_some());
    let columns: [(&str, &[&str]); 14] = [
        ("i8", FLAT_INTS),
        ("i64", FLAT_INTS),
        ("u64", FLAT_INTS),
        ("f32", FLAT_FLOATS),
        ("f64", FLAT_FLOATS),
        ("b", FLAT_BOOLS),
        ("s", FLAT_STRINGS),
        ("ls", FLAT_STRINGS),
        ("d", FLAT_DATES),
        ("ts", FLAT_STAMPS),
        ("tsz", FLAT_STAMPS),
        ("dec", FLAT_DECIMALS),
        ("dec256", FLAT_DECIMALS),
        ("nn", FLAT_INTS),
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let spaces = ["", " ", "\t", "  ", "\r"];
    // One record: mostly the first few values of each column, in schema order.
    let record =
        |clean: bool, mostly_clean: bool, rand: &mut dyn FnMut(usize) -> usize| -> Vec<u8> {
            let mut order: Vec<usize> = (0..columns.len()).collect();
            if !clean && rand(4) == 0 {
                order.swap(rand(columns.len()), rand(columns.len()));
            }
            let mut fields = Vec::new();
            for c in order {
                if columns[c].0 != "nn" && rand(5) == 0 {
                    continue; // a missing field
                }
                let (name, values) = columns[c];
                // Not clean: a chunk of mostly good values, or a chunk of any values.
                let any = !clean && (!mostly_clean || rand(10) == 0);
                let v = if any {
                    values[rand(values.len())]
                } else {
                    values[rand(2)]
                };
                fields.push(format!(
                    "\"{name}\"{}:{}{v}",
                    spaces[rand(2)],
                    spaces[rand(2)]
                ));
            }
            if !clean && !mostly_clean {
                match rand(12) {
                    0 => fields.push("\"extra\":1".into()),
                    1 => fields.push(format!("\"i64\":{}", rand(9))),
                    2 => fields.push("\"i\\u0036\\u0034\":3".into()),
                    _ => {}
                }
            }
            let ws = spaces[rand(spaces.len())];
            let mut text = format!("{ws}{{{ws}{}{ws}}}{ws}", fields.join(&format!("{ws},")));
            if !clean && !mostly_clean {
                match rand(20) {
                    0 => text.push_str("{}"),
                    1 => text.push_str(" x"),
                    2 => text = format!("[{text}]"),
                    3 => {
                        let cut = (0..=text.len() / 2)
                            .rev()
                            .find(|&i| text.is_char_boundary(i));
                        text.truncate(cut.unwrap_or(0))
                    }
                    4 => text = "null".into(),
                    _ => {}
                }
            }
            let mut bytes = text.into_bytes();
            if !clean && !mostly_clean && rand(40) == 0 {
                let at = rand(bytes.len());
                bytes[at] = 0xff; // not UTF-8
            }
            bytes.push(b'\n');
            bytes
        };
    let decoder = |strict: bool, flat: Option<Arc<FlatJson>>| Decoder {
        format: InputFormat::Jsonl,
        schema: schema.clone(),
        strict,
        row_check: None,
        reused: Reused::default(),
        flat,
        assigner: None,
    };
    let outcome = |d: &Decoder, raw: &RawChunk| match d.decode_records(raw) {
        Ok((batch, bad)) => Ok((batch, bad)),
        Err(e) => Err(e.to_string()),
    };
    let (mut answered, mut clean_chunks) = (0, 0);
    for round in 0..3_000 {
        let clean = round % 3 == 0;
        let size = 1 + rand(if round % 2 == 0 { 1 } else { 8 });
        let records: Vec<Vec<u8>> = (0..size)
            .map(|_| record(clean, round % 3 == 1, &mut rand))
            .collect();
        let raw = raw_of(&records);
        for strict in [true, false] {
            let fast = outcome(&decoder(strict, flat.clone()), &raw);
            let arrow = outcome(&decoder(strict, None), &raw);
            assert_eq!(
                fast,
                arrow,
                "strict {strict}, records:\n{}",
                String::from_utf8_lossy(&raw.buf)
            );
        }
        let took = flat
            .as_ref()
            .unwrap()
            .decode(&raw.buf, &raw.spans)
            .is_some();
        answered += usize::from(took);
        if clean {
            clean_chunks += 1;
            assert!(took, "declined:\n{}", String::from_utf8_lossy(&raw.buf));
        }
    }
    // Some of the generated chunks that are not clean are good too.
    assert!(
        answered > clean_chunks + 100,
        "{answered} of {clean_chunks}"
    );
}
