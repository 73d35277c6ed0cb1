//! What an `add` says about its file besides its size: the `stats` string (§Per-file
//! Statistics), the `partitionValues` (§Partition Value Serialization) and the `path`, a URI
//! (§Add File and Remove File).
//!
//! **Statistics** follow design section 7: `numRecords` always; `nullCount` for every leaf
//! column given; `minValues`/`maxValues` only where a reader may trust them: none for
//! booleans, binary, arrays and maps; floats only when both bounds are finite; strings with the
//! min cut to [`STRING_PREFIX_CHARS`] characters (a prefix is ≤ the value) and the max only
//! when it is that short; timestamps at millisecond precision with the min truncated down and
//! the max rounded **up** (design section 15, risk 5: a valid upper bound for every reader,
//! whether or not it widens the max itself); decimals as JSON numbers with exactly their
//! scale's fraction digits. Partition columns get no statistics (their values are in
//! `partitionValues`). Keys nest like the schema and come in schema order.
//!
//! **Partition values** come from the file's bucket (`col=value/…`, escaped by
//! [`crate::bucket::escape`]): each name and value unescaped, [`HIVE_DEFAULT_PARTITION`] and
//! the empty string both a null (§Partition Value Serialization: "an empty string for any type
//! translates to a null"; the one value a table cannot keep apart from null).
//!
//! **Paths** are relative URIs (RFC 2396): [`encode_path`] percent-encodes every byte but
//! ASCII letters, digits and `-_.~/=`, so the `%` of an escaped directory name is encoded again
//! (`ts=13%3A05` → `ts=13%253A05`, as Spark writes it) and spaces and non-ASCII text become
//! `%XX`. [`decode_path`] is its inverse for any engine's paths, and tells absolute URIs apart.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, NaiveDate};
use serde_json::Value;

use super::actions::PartitionValues;
use super::schema::{DeltaType, StructField, StructType};
use crate::bucket::escape::{
    escape_path_component, unescape_path_component, HIVE_DEFAULT_PARTITION,
};
use crate::protocol::{BucketId, ColumnPath, FileStats};
use crate::{Error, Result};

/// Longest string bound written, in characters (Spark's `dataSkippingStringPrefixLength`
/// default): the bound [`FileStats`] keeps already.
pub(crate) const STRING_PREFIX_CHARS: usize = FileStats::STRING_CHARS_MAX;

/// Default of `delta.dataSkippingNumIndexedCols`: statistics for the first 32 leaf columns.
pub(crate) const INDEXED_COLUMNS_DEFAULT: usize = 32;

/// The leaf columns whose statistics the files of a table carry (design section 7, "Which
/// columns"), in schema order, partition columns excluded: exactly those named by the table
/// property `delta.dataSkippingStatsColumns` when it is set (comma-separated, nested names
/// with `.`, names quoted in backticks when they hold a `.` or `,`; a struct stands for all its
/// leaves; matched without case, as Spark does; names of no column are skipped), else the
/// first `delta.dataSkippingNumIndexedCols` leaves (default [`INDEXED_COLUMNS_DEFAULT`], `-1`
/// all). An array or a map counts as one leaf, as in Spark, and gets only its `nullCount`.
///
/// Errors with [`Error::Corrupt`] when `delta.dataSkippingNumIndexedCols` is not an integer of
/// at least -1.
pub(crate) fn indexed_columns(
    schema: &StructType,
    partition_columns: &[String],
    configuration: &BTreeMap<String, String>,
) -> Result<Vec<ColumnPath>> {
    let mut leaves = Vec::new();
    for field in &schema.fields {
        if !partition_columns.contains(&field.name) {
            push_leaves(field, &mut Vec::new(), &mut leaves);
        }
    }
    if let Some(list) = configuration.get("delta.dataSkippingStatsColumns") {
        let wanted: Vec<ColumnPath> = split_unquoted(list, ',')
            .iter()
            .map(|name| {
                split_unquoted(name.trim(), '.')
                    .iter()
                    .map(|part| part.trim().trim_matches('`').to_lowercase())
                    .collect()
            })
            .collect();
        leaves.retain(|leaf| {
            wanted.iter().any(|w| {
                !w.is_empty()
                    && w.len() <= leaf.len()
                    && w.iter().zip(leaf).all(|(w, l)| *w == l.to_lowercase())
            })
        });
        return Ok(leaves);
    }
    let key = "delta.dataSkippingNumIndexedCols";
    let count = match configuration.get(key) {
        None => INDEXED_COLUMNS_DEFAULT,
        Some(v) => match v.trim().parse::<i64>() {
            Ok(-1) => leaves.len(),
            Ok(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => {
                return Err(Error::corrupt(
                    format!("table property `{key}`"),
                    format!("{v:?} is not an integer of at least -1"),
                ))
            }
        },
    };
    leaves.truncate(count);
    Ok(leaves)
}

fn push_leaves(field: &StructField, path: &mut ColumnPath, leaves: &mut Vec<ColumnPath>) {
    path.push(field.name.clone());
    match &field.data_type {
        DeltaType::Struct(s) => s.fields.iter().for_each(|f| push_leaves(f, path, leaves)),
        _ => leaves.push(path.clone()),
    }
    path.pop();
}

/// Splits `s` at `separator`s outside backtick quotes.
fn split_unquoted(s: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    for c in s.chars() {
        if c == '`' {
            quoted = !quoted;
        }
        if c == separator && !quoted {
            parts.push(String::new());
        } else {
            parts.last_mut().expect("never empty").push(c);
        }
    }
    parts
}

/// The rendered bounds of one leaf column, JSON text.
#[derive(Default)]
struct Bounds {
    min: Option<String>,
    max: Option<String>,
}

/// Renders the `stats` string of an `add` for a file of the table `schema` (the table's whole
/// schema; columns named in `partition_columns` are left out). Statistics of columns the
/// schema does not have, or that cannot have bounds (inside arrays and maps), are left out:
/// fewer statistics only make readers skip fewer files.
///
/// Errors with [`Error::InvalidInput`] naming the column when a value does not have the JSON
/// type the column's Delta type needs (see [`FileStats`]).
pub(crate) fn render(
    stats: &FileStats,
    schema: &StructType,
    partition_columns: &[String],
) -> Result<String> {
    let fields: Vec<&StructField> = schema
        .fields
        .iter()
        .filter(|f| !partition_columns.contains(&f.name))
        .collect();
    let mut bounds = BTreeMap::new();
    collect_bounds(stats, &fields, &mut Vec::new(), &mut bounds)?;

    let mut out = String::with_capacity(128);
    write!(out, "{{\"numRecords\":{}", stats.num_records).expect("write to String");
    out.push_str(",\"minValues\":");
    section(&mut out, &fields, &mut Vec::new(), &|path, _| {
        bounds.get(path).and_then(|b: &Bounds| b.min.clone())
    });
    out.push_str(",\"maxValues\":");
    section(&mut out, &fields, &mut Vec::new(), &|path, _| {
        bounds.get(path).and_then(|b: &Bounds| b.max.clone())
    });
    out.push_str(",\"nullCount\":");
    section(&mut out, &fields, &mut Vec::new(), &|path, _| {
        stats.null_count.get(path).map(|n| n.to_string())
    });
    out.push('}');
    Ok(out)
}

/// Writes one JSON object of the statistics of `fields` (nested like the schema), asking
/// `value` for the JSON text of each primitive leaf, and returns whether it holds any member.
/// Structs with no value inside are left out; arrays and maps have none.
fn section(
    out: &mut String,
    fields: &[&StructField],
    path: &mut ColumnPath,
    value: &dyn Fn(&ColumnPath, &str) -> Option<String>,
) -> bool {
    out.push('{');
    let mut any = false;
    for field in fields {
        path.push(field.name.clone());
        let mark = out.len();
        if any {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(&field.name).expect("a string serializes"));
        out.push(':');
        let written = match &field.data_type {
            DeltaType::Primitive(type_name) => match value(path, type_name) {
                Some(text) => {
                    out.push_str(&text);
                    true
                }
                None => false,
            },
            DeltaType::Struct(s) => {
                let nested: Vec<&StructField> = s.fields.iter().collect();
                section(out, &nested, path, value)
            }
            DeltaType::Array(_) | DeltaType::Map(_) => false,
        };
        if written {
            any = true;
        } else {
            out.truncate(mark);
        }
        path.pop();
    }
    out.push('}');
    any
}

fn collect_bounds(
    stats: &FileStats,
    fields: &[&StructField],
    path: &mut ColumnPath,
    bounds: &mut BTreeMap<ColumnPath, Bounds>,
) -> Result<()> {
    for field in fields {
        path.push(field.name.clone());
        match &field.data_type {
            DeltaType::Primitive(type_name) => {
                let b = leaf_bounds(
                    stats.min_values.get(path),
                    stats.max_values.get(path),
                    type_name,
                )
                .map_err(|reason| {
                    Error::InvalidInput(format!(
                        "statistics of column `{}` ({type_name}): {reason}",
                        path.join(".")
                    ))
                })?;
                bounds.insert(path.clone(), b);
            }
            DeltaType::Struct(s) => {
                let nested: Vec<&StructField> = s.fields.iter().collect();
                collect_bounds(stats, &nested, path, bounds)?;
            }
            DeltaType::Array(_) | DeltaType::Map(_) => {}
        }
        path.pop();
    }
    Ok(())
}

type BoundResult = std::result::Result<Bounds, String>;

fn leaf_bounds(min: Option<&Value>, max: Option<&Value>, type_name: &str) -> BoundResult {
    let normalized = type_name.to_ascii_lowercase().replace(' ', "");
    match normalized.as_str() {
        "byte" | "short" | "integer" | "long" => {
            let int = |v: &Value| match v.as_i64() {
                Some(i) => Ok(i.to_string()),
                None => Err(format!("{v} is not an integer")),
            };
            Ok(Bounds {
                min: min.map(int).transpose()?,
                max: max.map(int).transpose()?,
            })
        }
        "float" | "double" => {
            // Both bounds finite, or none: a max without NaN would let a reader skip a file
            // holding NaN, and a lone bound says little.
            let finite = |v: Option<&Value>| -> std::result::Result<Option<String>, String> {
                match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Number(n)) => {
                        Ok(n.as_f64().filter(|f| f.is_finite()).map(|_| n.to_string()))
                    }
                    Some(v) => Err(format!("{v} is not a number")),
                }
            };
            match (finite(min)?, finite(max)?) {
                (Some(min), Some(max)) => Ok(Bounds {
                    min: Some(min),
                    max: Some(max),
                }),
                _ => Ok(Bounds::default()),
            }
        }
        "string" => {
            let text = |v: &Value| match v {
                Value::String(s) => Ok(s.clone()),
                v => Err(format!("{v} is not a string")),
            };
            let min = min.map(text).transpose()?.map(|s| {
                let prefix: String = s.chars().take(STRING_PREFIX_CHARS).collect();
                json_string(&prefix)
            });
            let max = max
                .map(text)
                .transpose()?
                .filter(|s| s.chars().count() <= STRING_PREFIX_CHARS)
                .map(|s| json_string(&s));
            Ok(Bounds { min, max })
        }
        "date" => Ok(Bounds {
            min: min.map(date).transpose()?,
            max: max.map(date).transpose()?,
        }),
        "timestamp" | "timestamp_ntz" => {
            let zone = normalized == "timestamp";
            Ok(Bounds {
                min: min.map(|v| timestamp(v, false, zone)).transpose()?,
                max: max.map(|v| timestamp(v, true, zone)).transpose()?,
            })
        }
        decimal if decimal.starts_with("decimal(") => {
            let scale = decimal_scale(decimal).ok_or("not a decimal type")?;
            Ok(Bounds {
                min: min.map(|v| decimal_number(v, scale)).transpose()?,
                max: max.map(|v| decimal_number(v, scale)).transpose()?,
            })
        }
        // boolean (nullCount only, as Spark), binary, and types we do not write.
        _ => Ok(Bounds::default()),
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn date(v: &Value) -> std::result::Result<String, String> {
    let day = match v {
        Value::String(s) => NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .map_err(|_| format!("{v} is not a date YYYY-MM-DD"))?,
        Value::Number(n) => n
            .as_i64()
            .and_then(|d| i32::try_from(d).ok())
            .and_then(|d| NaiveDate::from_num_days_from_ce_opt(d.checked_add(719_163)?))
            .ok_or_else(|| format!("{v} is not a day since the epoch"))?,
        v => return Err(format!("{v} is not a date")),
    };
    Ok(json_string(&day.format("%Y-%m-%d").to_string()))
}

/// Microseconds → `"2026-11-30T13:05:00.123Z"` (no `Z` without time zone): truncated down to
/// the millisecond for a min, rounded up for a max.
fn timestamp(v: &Value, round_up: bool, zone: bool) -> std::result::Result<String, String> {
    let micros = v
        .as_i64()
        .ok_or_else(|| format!("{v} is not an integer of microseconds"))?;
    let mut millis = micros.div_euclid(1000);
    if round_up && micros.rem_euclid(1000) != 0 {
        millis += 1;
    }
    let t = DateTime::from_timestamp_millis(millis)
        .ok_or_else(|| format!("{micros} microseconds is out of range"))?;
    let text = if zone {
        t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    } else {
        t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
    };
    Ok(json_string(&text))
}

fn decimal_scale(type_name: &str) -> Option<usize> {
    let inner = type_name.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (_, scale) = inner.split_once(',')?;
    scale.trim().parse().ok()
}

/// A decimal value as a JSON number with exactly `scale` fraction digits.
fn decimal_number(v: &Value, scale: usize) -> std::result::Result<String, String> {
    let text = match v {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        v => return Err(format!("{v} is not decimal text")),
    };
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.strip_prefix('+').unwrap_or(&text)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let valid = !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit());
    if !valid {
        return Err(format!("{v} is not decimal text"));
    }
    if frac.len() > scale {
        return Err(format!("{v} has more than {scale} fraction digits"));
    }
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let mut out = format!("{sign}{int}");
    if scale > 0 {
        out.push('.');
        out.push_str(frac);
        out.extend(std::iter::repeat_n('0', scale - frac.len()));
    }
    if out
        .trim_start_matches('-')
        .trim_matches(['0', '.'])
        .is_empty()
    {
        out = out.trim_start_matches('-').to_owned();
    }
    Ok(out)
}

/// The `partitionValues` of a file in `bucket`, for a table partitioned by
/// `partition_columns` (in order: the bucket's directories must name exactly these columns).
///
/// Errors with [`Error::InvalidInput`] naming the bucket when a directory is not `name=value`,
/// names another column, or does not unescape.
pub(crate) fn partition_values(
    bucket: &BucketId,
    partition_columns: &[String],
) -> Result<PartitionValues> {
    let invalid = |reason: String| {
        Error::InvalidInput(format!(
            "bucket `{bucket}` does not fit the table's partition columns {partition_columns:?}: {reason}"
        ))
    };
    let components: Vec<&str> = bucket.components().collect();
    if components.len() != partition_columns.len() {
        return Err(invalid(format!(
            "{} directories for {} columns",
            components.len(),
            partition_columns.len()
        )));
    }
    let mut values = PartitionValues::new();
    for (component, column) in components.iter().zip(partition_columns) {
        let (name, value) = component
            .split_once('=')
            .ok_or_else(|| invalid(format!("directory `{component}` is not `name=value`")))?;
        let name = unescape_path_component(name).map_err(|e| invalid(e.to_string()))?;
        if &name != column {
            return Err(invalid(format!(
                "directory `{component}` is not of column `{column}`"
            )));
        }
        let value = if value == HIVE_DEFAULT_PARTITION || value.is_empty() {
            None
        } else {
            Some(unescape_path_component(value).map_err(|e| invalid(e.to_string()))?)
        };
        values.insert(name, value);
    }
    Ok(values)
}

#[allow(dead_code)] // for compaction and vacuum (docs/design/delta.md, steps 11-13)
/// The bucket (partition directory) of a file with these `partitionValues`, the inverse of
/// [`partition_values`] (a null, and so an empty string, becomes
/// [`HIVE_DEFAULT_PARTITION`]). Compaction writes its output into it.
///
/// Errors with [`Error::InvalidInput`] when a partition column has no value in `values`, or
/// the directory name is not valid.
pub(crate) fn bucket_of(
    values: &PartitionValues,
    partition_columns: &[String],
) -> Result<BucketId> {
    let mut components = Vec::with_capacity(partition_columns.len());
    for column in partition_columns {
        let value = values.get(column).ok_or_else(|| {
            Error::InvalidInput(format!(
                "partitionValues {values:?} have no value for the partition column `{column}`"
            ))
        })?;
        let value = match value.as_deref() {
            None | Some("") => HIVE_DEFAULT_PARTITION.to_owned(),
            Some(v) => escape_path_component(v),
        };
        components.push(format!("{}={value}", escape_path_component(column)));
    }
    BucketId::from_components(components)
}

/// Whether `b` stays as it is in an encoded path.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/' | b'=')
}

/// A relative file path (`country=DE/dt=2026-11-30/part-….parquet`) as the URI an `add` or
/// `remove` carries: every byte but ASCII letters, digits and `-_.~/=` becomes `%XX`
/// (uppercase hex), non-ASCII text byte by byte in UTF-8.
pub(crate) fn encode_path(relative: &str) -> String {
    let mut out = String::with_capacity(relative.len() + 16);
    for &b in relative.as_bytes() {
        if unreserved(b) {
            out.push(char::from(b));
        } else {
            write!(out, "%{b:02X}").expect("write to String");
        }
    }
    out
}

#[allow(dead_code)] // for compaction and vacuum (docs/design/delta.md, steps 11-13)
/// The path of an `add` or `remove`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FilePath {
    /// Relative to the table root, percent-decoded (a path of the store).
    Relative(String),
    /// An absolute URI (`s3://…`, `file:///…`) or absolute path, as written: a file outside
    /// the table, kept in the snapshot but never compacted or vacuumed.
    Absolute(String),
}

#[allow(dead_code)] // for compaction and vacuum (docs/design/delta.md, steps 11-13)
/// Decodes the `path` of an `add` or `remove` written by any engine (§Add File and Remove
/// File: "a URI … which needs to be decoded to get the data file path").
///
/// Errors with [`Error::InvalidInput`] when a `%` is not followed by two hex digits or the
/// decoded bytes are not UTF-8.
pub(crate) fn decode_path(path: &str) -> Result<FilePath> {
    let has_scheme = path.split_once(':').is_some_and(|(scheme, _)| {
        let mut bytes = scheme.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    });
    if has_scheme || path.starts_with('/') {
        return Ok(FilePath::Absolute(path.to_owned()));
    }
    // The same `%XX` decoding as directory names; the message names the whole path.
    unescape_path_component(path)
        .map(FilePath::Relative)
        .map_err(|_| {
            Error::InvalidInput(format!(
                "file path `{path}` is not a valid URI: a `%` is not followed by two hex digits, \
                 or the decoded bytes are not UTF-8"
            ))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(p: &str) -> ColumnPath {
        p.split('.').map(str::to_owned).collect()
    }

    fn schema() -> StructType {
        StructType::parse(
            r#"{"type":"struct","fields":[
              {"name":"id","type":"long","nullable":false,"metadata":{}},
              {"name":"name","type":"string","nullable":true,"metadata":{}},
              {"name":"flag","type":"boolean","nullable":true,"metadata":{}},
              {"name":"score","type":"double","nullable":true,"metadata":{}},
              {"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},
              {"name":"day","type":"date","nullable":true,"metadata":{}},
              {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
              {"name":"local","type":"timestamp_ntz","nullable":true,"metadata":{}},
              {"name":"payload","type":"binary","nullable":true,"metadata":{}},
              {"name":"geo","type":{"type":"struct","fields":[
                 {"name":"lat_e6","type":"integer","nullable":false,"metadata":{}},
                 {"name":"inner","type":{"type":"struct","fields":[
                    {"name":"z","type":"short","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},
               "nullable":true,"metadata":{}},
              {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
              {"name":"country","type":"string","nullable":true,"metadata":{}}]}"#,
            "schema",
        )
        .unwrap()
    }

    fn stats(entries: &[(&str, Value, Value, u64)]) -> FileStats {
        let mut s = FileStats {
            num_records: 1000,
            ..FileStats::default()
        };
        for (p, min, max, nulls) in entries {
            if !min.is_null() {
                s.min_values.insert(path(p), min.clone());
            }
            if !max.is_null() {
                s.max_values.insert(path(p), max.clone());
            }
            s.null_count.insert(path(p), *nulls);
        }
        s
    }

    fn rendered(s: &FileStats) -> String {
        render(s, &schema(), &["country".to_owned()]).unwrap()
    }

    #[test]
    fn stats_string_nests_like_the_schema_in_schema_order() {
        let s = stats(&[
            ("id", json!(1), json!(1000), 0),
            ("name", json!("Ann"), json!("Zoe"), 3),
            ("flag", json!(false), json!(true), 1),
            ("score", json!(-1.5), json!(99.25), 7),
            ("amount", json!("-12.5"), json!("1000"), 0),
            ("day", json!("2026-11-30"), json!(20_787), 0),
            (
                "ts",
                json!(1_796_043_600_000_000_i64),
                json!(1_796_047_199_999_000_i64),
                0,
            ),
            (
                "local",
                json!(1_796_043_600_123_999_i64),
                json!(1_796_043_600_123_000_i64),
                0,
            ),
            ("payload", json!("AAEC"), json!("AAEC"), 2),
            ("geo.lat_e6", json!(-3), json!(51_000_000), 0),
            ("geo.inner.z", json!(-7), json!(7), 5),
            ("tags", Value::Null, Value::Null, 4),
            ("country", json!("DE"), json!("FR"), 0),
        ]);
        let golden = concat!(
            r#"{"numRecords":1000,"#,
            r#""minValues":{"id":1,"name":"Ann","score":-1.5,"amount":-12.50,"day":"2026-11-30","#,
            r#""ts":"2026-11-30T13:00:00.000Z","local":"2026-11-30T13:00:00.123","#,
            r#""geo":{"lat_e6":-3,"inner":{"z":-7}}},"#,
            r#""maxValues":{"id":1000,"name":"Zoe","score":99.25,"amount":1000.00,"day":"2026-11-30","#,
            r#""ts":"2026-11-30T13:59:59.999Z","local":"2026-11-30T13:00:00.123","#,
            r#""geo":{"lat_e6":51000000,"inner":{"z":7}}},"#,
            r#""nullCount":{"id":0,"name":3,"flag":1,"score":7,"amount":0,"day":0,"ts":0,"local":0,"#,
            r#""payload":2,"geo":{"lat_e6":0,"inner":{"z":5}}}}"#,
        );
        let text = rendered(&s);
        assert_eq!(text, golden);
        // It is JSON, and the decimal bounds are numbers.
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["minValues"]["amount"].is_number());
        assert!(v["minValues"].get("country").is_none());
    }

    #[test]
    fn timestamp_max_rounds_up_to_the_millisecond_and_min_truncates() {
        let s = stats(&[(
            "ts",
            json!(1_796_043_600_123_456_i64),
            json!(1_796_043_600_123_456_i64),
            0,
        )]);
        let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
        assert_eq!(v["minValues"]["ts"], "2026-11-30T13:00:00.123Z");
        assert_eq!(v["maxValues"]["ts"], "2026-11-30T13:00:00.124Z");
        // Before the epoch, down is still down.
        let s = stats(&[("ts", json!(-1_i64), json!(-1_i64), 0)]);
        let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
        assert_eq!(v["minValues"]["ts"], "1969-12-31T23:59:59.999Z");
        assert_eq!(v["maxValues"]["ts"], "1970-01-01T00:00:00.000Z");
        // A whole millisecond stays.
        let s = stats(&[("ts", json!(5_000_i64), json!(5_000_i64), 0)]);
        let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
        assert_eq!(v["maxValues"]["ts"], "1970-01-01T00:00:00.005Z");
    }

    #[test]
    fn long_strings_cut_the_min_and_drop_the_max() {
        let long: String = "ü".repeat(40);
        let exactly: String = "x".repeat(STRING_PREFIX_CHARS);
        let s = stats(&[("name", json!(long), json!(long), 0)]);
        let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
        assert_eq!(v["minValues"]["name"], "ü".repeat(STRING_PREFIX_CHARS));
        assert!(v["maxValues"].get("name").is_none());
        let s = stats(&[("name", json!(exactly), json!(exactly), 0)]);
        let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
        assert_eq!(v["maxValues"]["name"], exactly.as_str());
        // Quotes and control characters are escaped.
        let s = stats(&[("name", json!("a\"b\n"), json!("c\\d"), 0)]);
        let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
        assert_eq!(v["minValues"]["name"], "a\"b\n");
        assert_eq!(v["maxValues"]["name"], "c\\d");
    }

    #[test]
    fn float_bounds_need_both_finite() {
        for (min, max) in [
            (Value::Null, json!(1.0)),
            (json!(1.0), Value::Null),
            (Value::Null, Value::Null),
        ] {
            let s = stats(&[("score", min, max, 0)]);
            let v: Value = serde_json::from_str(&rendered(&s)).unwrap();
            assert!(v["minValues"].get("score").is_none());
            assert!(v["maxValues"].get("score").is_none());
            assert_eq!(v["nullCount"]["score"], 0);
        }
        // serde_json cannot hold NaN or infinity: `Value::from(f64::NAN)` is null.
        assert!(Value::from(f64::NAN).is_null());
    }

    #[test]
    fn no_column_statistics_still_gives_num_records() {
        let s = FileStats {
            num_records: 7,
            ..FileStats::default()
        };
        assert_eq!(
            rendered(&s),
            r#"{"numRecords":7,"minValues":{},"maxValues":{},"nullCount":{}}"#
        );
    }

    #[test]
    fn decimals_have_exactly_their_scale() {
        for (input, expected) in [
            (json!("1"), "1.00"),
            (json!("-0.5"), "-0.50"),
            (json!("-0"), "0.00"),
            (json!("007.10"), "7.10"),
            (json!(42), "42.00"),
            (json!("+3.14"), "3.14"),
        ] {
            assert_eq!(decimal_number(&input, 2).unwrap(), expected, "{input}");
        }
        assert_eq!(decimal_number(&json!("12"), 0).unwrap(), "12");
        for bad in [
            json!("1.234"),
            json!("1e5"),
            json!(""),
            json!("."),
            json!(1.5),
            json!(true),
        ] {
            assert!(decimal_number(&bad, 2).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_of_the_wrong_json_type_name_the_column() {
        let s = stats(&[("geo.lat_e6", json!("three"), json!(3), 0)]);
        let err = render(&s, &schema(), &[]).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.starts_with("statistics of column `geo.lat_e6` (integer)")),
            "{err:?}"
        );
        let s = stats(&[("ts", json!("2026-11-30T13:00:00Z"), json!(1), 0)]);
        assert!(render(&s, &schema(), &[]).is_err());
        let s = stats(&[("day", json!("30.11.2026"), Value::Null, 0)]);
        assert!(render(&s, &schema(), &[]).is_err());
    }

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn joined(paths: Vec<ColumnPath>) -> Vec<String> {
        paths.into_iter().map(|p| p.join(".")).collect()
    }

    #[test]
    fn indexed_columns_are_the_first_leaves_by_default() {
        let partitions = ["country".to_owned()];
        let all = indexed_columns(&schema(), &partitions, &config(&[])).unwrap();
        assert_eq!(
            joined(all),
            [
                "id",
                "name",
                "flag",
                "score",
                "amount",
                "day",
                "ts",
                "local",
                "payload",
                "geo.lat_e6",
                "geo.inner.z",
                "tags"
            ]
        );
        let three = config(&[("delta.dataSkippingNumIndexedCols", "3")]);
        assert_eq!(
            joined(indexed_columns(&schema(), &partitions, &three).unwrap()),
            ["id", "name", "flag"]
        );
        let none = config(&[("delta.dataSkippingNumIndexedCols", "0")]);
        assert!(indexed_columns(&schema(), &partitions, &none)
            .unwrap()
            .is_empty());
        let every = config(&[("delta.dataSkippingNumIndexedCols", "-1")]);
        assert_eq!(
            indexed_columns(&schema(), &partitions, &every)
                .unwrap()
                .len(),
            12
        );
        for bad in ["-2", "many", ""] {
            let c = config(&[("delta.dataSkippingNumIndexedCols", bad)]);
            let err = indexed_columns(&schema(), &partitions, &c).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{bad:?}: {err:?}");
        }
    }

    #[test]
    fn stats_columns_property_names_exactly_the_columns() {
        let c = config(&[
            (
                "delta.dataSkippingStatsColumns",
                "ts, GEO.inner ,`name`,nope,country",
            ),
            ("delta.dataSkippingNumIndexedCols", "1"),
        ]);
        assert_eq!(
            joined(indexed_columns(&schema(), &["country".to_owned()], &c).unwrap()),
            ["name", "ts", "geo.inner.z"]
        );
        assert_eq!(
            split_unquoted("`a.b`.c,d", '.'),
            ["`a.b`", "c,d"].map(String::from)
        );
        assert_eq!(
            split_unquoted("`a,b`,c", ','),
            ["`a,b`", "c"].map(String::from)
        );
    }

    fn hive_dir(column: &str, value: Option<&str>) -> String {
        let value = match value {
            None => HIVE_DEFAULT_PARTITION.to_owned(),
            Some(v) => escape_path_component(v),
        };
        format!("{}={value}", escape_path_component(column))
    }

    #[test]
    fn partition_values_and_paths_round_trip_hostile_values() {
        let columns = vec!["k".to_owned(), "dt".to_owned()];
        for value in [
            Some("plain"),
            Some("hello world"),
            Some("100%"),
            Some("%2F"),
            Some("a=b"),
            Some("a/b"),
            Some("../.."),
            Some("13:05"),
            Some("grüße 東京 🦀"),
            Some("a+b&c?d#e"),
            Some(HIVE_DEFAULT_PARTITION),
            None,
        ] {
            let bucket = BucketId::from_components([
                hive_dir("k", value),
                hive_dir("dt", Some("2026-11-30")),
            ])
            .unwrap();
            let values = partition_values(&bucket, &columns).unwrap();
            assert_eq!(values["k"].as_deref(), value, "{bucket}");
            assert_eq!(values["dt"].as_deref(), Some("2026-11-30"));
            assert_eq!(bucket_of(&values, &columns).unwrap(), bucket);

            let relative = format!("{bucket}/part-orders_0-0193-7.parquet");
            let encoded = encode_path(&relative);
            assert!(
                encoded.bytes().all(|b| b.is_ascii_graphic()),
                "{encoded:?} has a space, control or non-ASCII byte"
            );
            assert_eq!(decode_path(&encoded).unwrap(), FilePath::Relative(relative));
        }
    }

    #[test]
    fn escaped_directories_are_encoded_again_as_spark_does() {
        let bucket = BucketId::from_components([hive_dir("k", Some("a b%c=d/e ü"))]).unwrap();
        assert_eq!(bucket.as_str(), "k=a b%25c%3Dd%2Fe ü");
        assert_eq!(
            encode_path(&format!("{bucket}/part-0.parquet")),
            "k=a%20b%2525c%253Dd%252Fe%20%C3%BC/part-0.parquet"
        );
        assert_eq!(
            encode_path("ts=13%3A05/part-orders_0-0193-7.parquet"),
            "ts=13%253A05/part-orders_0-0193-7.parquet"
        );
    }

    #[test]
    fn empty_string_reads_as_null() {
        let bucket = BucketId::from_components(["k="]).unwrap();
        let values = partition_values(&bucket, &["k".to_owned()]).unwrap();
        assert_eq!(values["k"], None);
        // The one value a table cannot keep apart: it comes back as the null directory.
        assert_eq!(
            bucket_of(&values, &["k".to_owned()]).unwrap().as_str(),
            "k=__HIVE_DEFAULT_PARTITION__"
        );
    }

    #[test]
    fn buckets_not_matching_the_partition_columns_are_refused() {
        let columns = vec!["k".to_owned()];
        for bucket in ["", "k=1/j=2", "j=1", "k"] {
            let bucket = BucketId::parse(bucket).unwrap();
            let err = partition_values(&bucket, &columns).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{bucket}: {err:?}");
        }
        let err = bucket_of(&PartitionValues::new(), &columns).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        // An unpartitioned table: the root bucket, no values.
        assert!(partition_values(&BucketId::root(), &[]).unwrap().is_empty());
        assert_eq!(
            bucket_of(&PartitionValues::new(), &[]).unwrap(),
            BucketId::root()
        );
    }

    #[test]
    fn paths_of_other_engines_decode() {
        assert_eq!(
            decode_path("date=2017-12-10/part-000-c000.snappy.parquet").unwrap(),
            FilePath::Relative("date=2017-12-10/part-000-c000.snappy.parquet".into())
        );
        assert_eq!(
            decode_path("x=a%20b/p%C3%BC.parquet").unwrap(),
            FilePath::Relative("x=a b/pü.parquet".into())
        );
        // Unencoded unicode, as Spark's `Path.toUri.toString` leaves it, is fine too.
        assert_eq!(
            decode_path("x=ü/p.parquet").unwrap(),
            FilePath::Relative("x=ü/p.parquet".into())
        );
        for absolute in [
            "s3://bucket/events/part-0.parquet",
            "file:///tmp/t/part-0.parquet",
            "abfss://c@a.dfs.core.windows.net/t/p.parquet",
            "/tmp/t/part-0.parquet",
        ] {
            assert_eq!(
                decode_path(absolute).unwrap(),
                FilePath::Absolute(absolute.into())
            );
        }
        for bad in ["x=%zz/p.parquet", "p%", "%C3.parquet"] {
            assert!(
                matches!(decode_path(bad), Err(Error::InvalidInput(_))),
                "{bad}"
            );
        }
    }
}
