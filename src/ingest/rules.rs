//! The rules an ingestion keeps besides reading: the job's identity (its default name, the
//! same inputs, format and partition columns on every run), distinct inputs, where the
//! bad-records file may be, the schema's partition columns, and the partition values a record
//! may carry.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;

use super::source::{
    infer_schema_settled, Input, InputFormat, Prefix, RowCheck, SourcePosition, StdinRecords,
    TimePartitionBy,
};
use super::Observer;
use crate::bucket::{BucketAssigner, HivePartitioner, TimePartitioning};
use crate::error::{Error, Result, Setting};

/// The job name derived from the inputs: `<stem of the first input>_<8 hex digits of the
/// CRC-32C of all canonical paths>`, so that a rerun over the same inputs resumes the same
/// job. `None` when an input is standard input, which names nothing.
pub fn default_job_name(inputs: &[Input]) -> Option<String> {
    if inputs.is_empty() || inputs.iter().any(Input::is_stdin) {
        return None;
    }
    let stem = Path::new(&inputs[0].canonical)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    let mut stem: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(39)
        .collect();
    if stem.is_empty() {
        stem = "input".to_string();
    }
    let mut crc = 0u32;
    for input in inputs {
        crc = crc32c::crc32c_append(crc, input.canonical.as_bytes());
        crc = crc32c::crc32c_append(crc, b"\n");
    }
    Some(format!("{stem}_{crc:08x}"))
}

/// Refuses inputs that name one file twice, under any two names (`./a` and `a`, a symbolic
/// or hard link, standard input redirected from it): its records would be written twice.
pub fn check_distinct(inputs: &[Input]) -> Result<()> {
    let mut names = std::collections::HashSet::with_capacity(inputs.len());
    let mut files = std::collections::HashMap::with_capacity(inputs.len());
    for a in inputs {
        if !names.insert(a.canonical.as_str()) {
            return Err(Error::Config(format!(
                "input `{}` is given twice; its records would be written twice",
                a.display
            )));
        }
        if let Some(id) = a.file_id {
            if let Some(b) = files.insert(id, a) {
                return Err(Error::Config(format!(
                    "input `{}` is the same file as input `{}` (a link to it); its records would \
                     be written twice",
                    a.display, b.display
                )));
            }
        }
    }
    Ok(())
}

/// `p` made absolute, with every part of it that exists resolved (symbolic links, `..`).
fn real_path(p: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(p)?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(mut real) = existing.canonicalize() {
            for part in rest.iter().rev() {
                real.push(part);
            }
            return Ok(real);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return Ok(abs),
        }
    }
}

/// The absolute path of the bad-records file `path` ([`super::Ingest::bad_records`]), refused
/// ([`Setting::BadRecords`]) inside the local lake `lake_dir`, where it would be listed as data, and
/// when it is one of the inputs.
pub fn check_bad_records_path(
    path: &Path,
    lake_dir: Option<&Path>,
    inputs: &[Input],
) -> Result<PathBuf> {
    let resolve_err = |e| Error::io("resolve", path, e);
    let absolute = std::path::absolute(path).map_err(resolve_err)?;
    if let Some(base) = lake_dir {
        let real = real_path(path).map_err(resolve_err)?;
        let real_base = real_path(base).map_err(resolve_err)?;
        if real.starts_with(&real_base) {
            return Err(Setting::BadRecords.refused(format!(
                "{{bad_records}} `{}` is inside the lake `{}`, where it would be listed as data; \
                 give a path outside it",
                Setting::value(path.display()),
                Setting::value(base.display())
            )));
        }
    }
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_dir() {
            return Err(Setting::BadRecords.refused(format!(
                "{{bad_records}} `{}` is a directory; give the path of a file (created if \
                 missing)",
                Setting::value(path.display())
            )));
        }
        let id = Some((meta.dev(), meta.ino()));
        if let Some(input) = inputs.iter().find(|i| i.file_id == id) {
            return Err(Setting::BadRecords.refused(format!(
                "{{bad_records}} `{}` is input `{}`",
                Setting::value(path.display()),
                Setting::value(&input.display)
            )));
        }
    }
    Ok(absolute)
}

/// Refuses to create the lake directory `dir`, which does not exist, inside another sink's
/// tree: not even the directories on the way are made (the sink's identity refuses the sink
/// itself, `manifest::sink_identity`, but only once its directory exists).
pub fn check_not_inside_a_sink(dir: &Path) -> Result<()> {
    let absolute = real_path(dir).map_err(|e| Error::io("resolve", dir, e))?;
    let Some(above) = absolute
        .ancestors()
        .skip(1)
        .find(|a| a.join(crate::protocol::METADATA_DIR).is_dir())
    else {
        return Ok(());
    };
    Err(Error::NestedSink {
        reason: format!(
            "`{}` would be inside the sink `{}`; a sink owns its whole tree, so choose a \
             location outside every other sink",
            dir.display(),
            above.display()
        ),
    })
}

/// Refuses an input inside the lake `lake_dir` where the lake lists its files as data (no
/// path component below the lake starting with `.` or `_`): its records are the lake's own,
/// and ingesting them writes them again.
pub fn check_inputs_outside_lake(inputs: &[Input], lake_dir: &Path) -> Result<()> {
    let real_base = real_path(lake_dir).map_err(|e| Error::io("resolve", lake_dir, e))?;
    for input in inputs {
        // A file's path is its canonical one already (`Input::file`).
        let Some(real) = &input.path else { continue };
        let Ok(inside) = real.strip_prefix(&real_base) else {
            continue;
        };
        let hidden = inside.components().any(|c| {
            c.as_os_str()
                .to_str()
                .is_some_and(|n| n.starts_with(['.', '_']))
        });
        if !hidden {
            return Err(Error::Config(format!(
                "input `{}` is inside the lake `{}`, which lists it as data: ingesting it would \
                 write its records into the lake again; give inputs outside the lake",
                input.display,
                lake_dir.display()
            )));
        }
    }
    Ok(())
}

/// Infers the schema from the first input that has records (an input without records says
/// nothing about the columns); a schema without columns if none has any.
pub(super) fn infer_from_inputs(
    inputs: &[Input],
    format: InputFormat,
    strict: bool,
    within: (Option<Instant>, usize),
    settle: Duration,
) -> Result<(Schema, Option<StdinRecords>)> {
    let mut first = None;
    for input in inputs {
        let (schema, prefix) = infer_schema_settled(input, format, strict, within, settle)?;
        // Standard input cannot be read twice: what it gave is what there is. Columns that
        // are all `Null` (a CSV header alone) have no types yet: the next input may give them.
        let typed = schema
            .fields()
            .iter()
            .any(|f| f.data_type() != &arrow::datatypes::DataType::Null);
        if typed || input.is_stdin() {
            return Ok((schema, prefix));
        }
        first.get_or_insert((schema, prefix));
    }
    Ok(first.expect("at least one input"))
}

/// Each partition column must be a column of the schema,
/// of a scalar type (a list or a struct has no one directory name: `["a, b"]` and `["a","b"]`
/// would share one, and the column leaves the data); the time column too, of a type that
/// holds times, and no time directory may have the name of a column (readers would see two
/// columns of that name: the time column stays in the data).
pub(super) fn check_partition_columns(
    partition_by: &[String],
    time: Option<&TimePartitioning>,
    schema: &Schema,
) -> Result<()> {
    for col in partition_by {
        let Ok(field) = schema.field_with_name(col) else {
            return Err(Error::Config(format!(
                "partition column `{col}` is not in the input (columns: {})",
                describe_schema(schema)
            )));
        };
        if field.data_type().is_nested() {
            return Err(Error::Config(format!(
                "partition column `{col}` has type {}; a partition column must hold one value \
                 per record (a number, a string, a date, a time), not a list or a structure",
                field.data_type()
            )));
        }
    }
    let Some(time) = time else {
        return Ok(());
    };
    let col = time.column();
    let field = schema.field_with_name(col).map_err(|_| {
        Error::Config(format!(
            "time partition column `{col}` is not in the input (columns: {})",
            describe_schema(schema)
        ))
    })?;
    if !TimePartitioning::supports_type(field.data_type()) {
        return Err(Error::Config(format!(
            "time partition column `{col}` has type {}; it must be a timestamp, a date, or \
             strings holding RFC 3339 timestamps (give a --schema with a Timestamp type)",
            field.data_type()
        )));
    }
    if let Some(name) = time.names().find(|n| schema.field_with_name(n).is_ok()) {
        return Err(Error::Config(format!(
            "time directory `{name}` has the name of a column of the input; name it otherwise"
        )));
    }
    Ok(())
}

/// The schema of a new job can be written: no two columns have one name (Parquet readers
/// refuse such a file, and JSON lines output would write the name twice), and every column
/// that stays in the data (not a partition column) can be written in `format`: CSV holds no
/// lists or structures. Checked before anything is created, so that such a job fails before
/// it exists rather than at its first write. (A resumed job keeps the schema it started
/// with, which passed.)
pub(super) fn check_output_columns(
    format: &crate::format::FileFormat,
    schema: &Schema,
    partition_by: &[String],
) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    for f in schema.fields() {
        if !names.insert(f.name().as_str()) {
            return Err(Error::Config(format!(
                "column `{}` appears twice in the input's columns (a CSV header, or --schema); \
                 give each column its own name",
                f.name()
            )));
        }
    }
    if let crate::format::FileFormat::Csv(_) = format {
        if let Some(f) = schema
            .fields()
            .iter()
            .find(|f| f.data_type().is_nested() && !partition_by.contains(f.name()))
        {
            return Err(Error::Config(format!(
                "column `{}` of type {} cannot be written as CSV; write JSON lines or Parquet \
                 (--format), or give a --schema without it",
                f.name(),
                f.data_type()
            )));
        }
    }
    Ok(())
}

/// `name type, …`.
pub fn describe_schema(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A resumed job must be run over the same inputs, read the same way, with the same
/// partition columns and time directories.
/// How a refusal of a job's options says what to do instead.
const NEW_JOB: &str = "give the same options to resume it, or --job NAME to start a new job \
    beside it";

pub(super) fn check_same_job(
    job: &str,
    p: &SourcePosition,
    inputs: &[String],
    format: InputFormat,
    partition_by: &[String],
    partition_by_time: Option<&TimePartitionBy>,
) -> Result<()> {
    if p.inputs != inputs {
        return Err(Error::InvalidInput(format!(
            "job `{job}` was started with other inputs ({}); give the same inputs to resume it, \
             or another --job",
            p.inputs.join(", ")
        )));
    }
    if p.input_format != format {
        return Err(Error::InvalidInput(format!(
            "job `{job}` reads its inputs as {}, not {}; {NEW_JOB}",
            p.input_format.name(),
            format.name()
        )));
    }
    if p.partition_by != partition_by {
        return Err(Error::InvalidInput(format!(
            "job `{job}` was started with --partition-by `{}`, not `{}`; {NEW_JOB}",
            p.partition_by.join(","),
            partition_by.join(",")
        )));
    }
    if p.partition_by_time.as_ref() != partition_by_time {
        let describe = |t: Option<&TimePartitionBy>| {
            t.map_or("no --partition-by-time".to_owned(), |t| format!("`{t}`"))
        };
        return Err(Error::InvalidInput(format!(
            "job `{job}` was started with {}, not {}; {NEW_JOB}",
            describe(p.partition_by_time.as_ref()),
            describe(partition_by_time)
        )));
    }
    Ok(())
}

/// What a position of version 1 (which recorded only the cursor) says was read of each
/// input: the inputs before the cursor in full as they are now, the cursor's input up to its
/// offset. Their checksums are computed as they are read again, not checked.
pub(super) fn legacy_read(
    job: &str,
    p: &SourcePosition,
    inputs: &[Input],
    observer: &mut dyn Observer,
) -> Vec<Prefix> {
    let mut read = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let prefix = if i < p.cursor.input {
            let offset = input.size_bytes.unwrap_or(0);
            Prefix {
                offset,
                line: 1,
                crc32c: None,
            }
        } else if i == p.cursor.input {
            Prefix {
                offset: p.cursor.offset,
                line: p.cursor.line,
                crc32c: None,
            }
        } else {
            Prefix::START
        };
        read.push(prefix);
    }
    observer.note(&format!(
        "job `{job}` was checkpointed by an older filesink that did not record what it read of \
         its inputs: resuming at {} without checking that they are unchanged",
        inputs
            .get(p.cursor.input)
            .map_or("the end".to_string(), |i| format!(
                "byte {} of `{}`",
                p.cursor.offset, i.display
            ))
    ));
    read
}

/// The writer's partition check, made per record before the records reach it: a record whose
/// partition value cannot name a directory (longer than 255 bytes once escaped, a time that
/// is not one), or whose partition path is longer than `path_max` bytes
/// ([`crate::Sink::partition_path_bytes_max`]), is a bad record of its own line, not an error
/// of its whole chunk (and of every run that reads it again).
pub(super) fn partition_check(partitioner: HivePartitioner, path_max: Option<usize>) -> RowCheck {
    let time = partitioner.time().cloned();
    let columns = match partitioner.columns() {
        [] => None,
        cols => HivePartitioner::new(cols.to_vec())
            .ok()
            .map(|p| column_check(p.keep_partition_columns(true))),
    };
    let whole = partitioner.keep_partition_columns(true);
    Arc::new(move |batch: &RecordBatch| {
        let mut bad = columns.as_ref().map_or_else(Vec::new, |check| check(batch));
        // The time directories of the batch's rows, at most this long with their `/`.
        let mut time_bytes = 0;
        if let Some(time) = &time {
            let (errors, longest) = time.check_rows(batch);
            bad.extend(errors);
            time_bytes = longest + 1;
        }
        if let Some(max) = path_max {
            // A cheap bound first (a value escapes to at most 3 bytes per byte), the
            // escaped lengths only if it does not rule a long path out.
            let within = |exact| {
                column_bytes_bound(&whole, batch, exact).is_some_and(|b| b + time_bytes <= max)
            };
            if !within(false) && !within(true) {
                bad.extend(long_paths(&whole, batch, &bad, max));
            }
        }
        bad
    })
}

/// The rows of `batch` not already in `bad` whose partition path (as `whole`, which keeps the
/// partition columns, assigns it) is longer than `max` bytes.
fn long_paths(
    whole: &HivePartitioner,
    batch: &RecordBatch,
    bad: &[(usize, String)],
    max: usize,
) -> Vec<(usize, String)> {
    use arrow::array::{Array, AsArray, UInt32Array};
    use arrow::datatypes::{Field, UInt32Type};
    // The rows the other checks passed, each with its row number in a column of its own.
    let mut keep = vec![true; batch.num_rows()];
    for (row, _) in bad {
        keep[*row] = false;
    }
    let rows =
        UInt32Array::from_iter_values((0..batch.num_rows() as u32).filter(|&r| keep[r as usize]));
    // Only the columns that name the directories.
    let schema = batch.schema();
    let mut names: Vec<&str> = whole.columns().iter().map(String::as_str).collect();
    names.extend(whole.time().map(|t| t.column()));
    let Ok(mut cols) = names
        .iter()
        .map(|n| schema.index_of(n))
        .collect::<std::result::Result<Vec<_>, _>>()
    else {
        return Vec::new(); // the writer's split reports it
    };
    cols.sort_unstable();
    cols.dedup();
    let Ok(good) = batch
        .project(&cols)
        .and_then(|b| arrow::compute::take_record_batch(&b, &rows))
    else {
        return Vec::new();
    };
    let mut fields = good.schema().fields().to_vec();
    let name = (0..)
        .map(|i| format!("row{i}"))
        .find(|n| good.schema().index_of(n).is_err())
        .expect("a free column name");
    fields.push(Arc::new(Field::new(
        name,
        arrow::datatypes::DataType::UInt32,
        false,
    )));
    let mut columns = good.columns().to_vec();
    columns.push(Arc::new(rows));
    let Ok(numbered) =
        RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
    else {
        return Vec::new();
    };
    let Ok(buckets) = whole.assign(&numbered, chrono::Utc::now()) else {
        return Vec::new(); // the writer's split reports it
    };
    let mut long = Vec::new();
    for (bucket, b) in buckets {
        let Err(why) = crate::protocol::bucket_id::check_partition_path(&bucket, Some(max)) else {
            continue;
        };
        let rows = b.column(b.num_columns() - 1).as_primitive::<UInt32Type>();
        long.extend(rows.values().iter().map(|&r| (r as usize, why.clone())));
        debug_assert_eq!(rows.null_count(), 0);
    }
    long
}

/// [`partition_check`] of the partition columns.
fn column_check(partitioner: HivePartitioner) -> RowCheck {
    Arc::new(move |batch: &RecordBatch| {
        let schema = batch.schema();
        let Ok(cols) = partitioner
            .columns()
            .iter()
            .map(|c| schema.index_of(c))
            .collect::<std::result::Result<Vec<_>, _>>()
        else {
            return Vec::new(); // the writer's split reports it
        };
        let Ok(part) = batch.project(&cols) else {
            return Vec::new();
        };
        if names_are_short(&part) {
            return Vec::new();
        }
        let now = chrono::Utc::now();
        if partitioner.assign(&part, now).is_ok() {
            return Vec::new();
        }
        (0..part.num_rows())
            .filter_map(|row| {
                let e = partitioner.assign(&part.slice(row, 1), now).err()?;
                let msg = match e {
                    Error::InvalidInput(m) => m,
                    other => other.to_string(),
                };
                Some((
                    row,
                    msg.replacen("the value in row 0 of", "the value of", 1),
                ))
            })
            .collect()
    })
}

/// Whether every value of these partition columns surely makes a directory name within the
/// limit; `false` means "check each one".
fn names_are_short(part: &RecordBatch) -> bool {
    let short = |exact| {
        column_names_bytes(part, exact).is_some_and(|names| names.iter().all(|&n| n <= 255))
    };
    short(false) || short(true)
}

/// At least as many bytes as the directories of `partitioner`'s columns take in any row of
/// `batch`, each with a `/` (see [`column_names_bytes`] for `exact`); `None` if it cannot
/// tell.
fn column_bytes_bound(
    partitioner: &HivePartitioner,
    batch: &RecordBatch,
    exact: bool,
) -> Option<usize> {
    let schema = batch.schema();
    let cols = partitioner
        .columns()
        .iter()
        .map(|c| schema.index_of(c))
        .collect::<std::result::Result<Vec<_>, _>>()
        .ok()?;
    let names = column_names_bytes(&batch.project(&cols).ok()?, exact)?;
    Some(names.iter().map(|n| n + 1).sum())
}

/// Per column of `part`, at least as many bytes as its directory name (`name=value`,
/// escaped) takes in any row: for strings exactly the longest if `exact` (a scan of every
/// value's bytes), else three times the longest value (a look at their lengths); a bound for
/// the other primitive types; `None` if it cannot tell.
fn column_names_bytes(part: &RecordBatch, exact: bool) -> Option<Vec<usize>> {
    use crate::bucket::escape::escaped_len;
    use arrow::array::{Array, AsArray, GenericStringArray, OffsetSizeTrait};
    use arrow::datatypes::DataType;
    fn longest<O: OffsetSizeTrait>(a: &GenericStringArray<O>, exact: bool) -> usize {
        let longest = if exact {
            (0..a.len())
                .filter(|&i| a.is_valid(i))
                .map(|i| escaped_len(a.value(i).as_bytes()))
                .max()
        } else {
            a.offsets()
                .windows(2)
                .map(|w| 3 * (w[1] - w[0]).as_usize())
                .max()
        };
        longest.unwrap_or(0)
    }
    part.schema()
        .fields()
        .iter()
        .zip(part.columns())
        .map(|(f, col)| {
            let value = match col.data_type() {
                DataType::Utf8 => longest(col.as_string::<i32>(), exact),
                DataType::LargeUtf8 => longest(col.as_string::<i64>(), exact),
                // `-9223372036854775808`, `18446744073709551615`: nothing to escape.
                t if t.is_integer() => 20,
                DataType::Boolean => 5,
                // Formatted in at most 64 characters, each escaped to at most 3 bytes.
                t if t.is_primitive() => 3 * 64,
                _ => return None,
            };
            // A null is the default partition's name.
            let value = value.max(crate::bucket::HIVE_DEFAULT_PARTITION.len());
            Some(escaped_len(f.name().as_bytes()) + 1 + value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray, TimestampSecondArray};
    use arrow::record_batch::RecordBatch;

    use super::partition_check;
    use crate::bucket::test_util::XorShift;
    use crate::bucket::{parse_time_zone, BucketAssigner, HivePartitioner, TimePartitioning};

    /// The partition check of `ingest` sets aside exactly the rows whose partition path is
    /// longer than the limit, whatever makes it long: values that escape or are null, or
    /// time directories whose length varies with the time in ways no sample of times
    /// covers (years of any length, `%C` of far years, seconds since the epoch), in any
    /// time zone. The oracle is the writer's own split, one row at a time.
    #[test]
    fn the_partition_check_sets_aside_exactly_the_rows_whose_path_is_too_long() {
        let mut rng = XorShift::new(11);
        let (min, max) = (
            chrono::DateTime::<chrono::Utc>::MIN_UTC.timestamp() + 14 * 3600,
            chrono::DateTime::<chrono::Utc>::MAX_UTC.timestamp() - 14 * 3600,
        );
        let alphabet = ['a', 'b', '/', ':', '%', 'é', '=', '\n'];
        let rows = 600;
        let values: Vec<Option<String>> = (0..rows)
            .map(|i| match i % 50 {
                0 => None,
                1 => Some(crate::bucket::HIVE_DEFAULT_PARTITION.to_string()),
                _ => Some(
                    (0..rng.below(60))
                        .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                        .collect(),
                ),
            })
            .collect();
        let times: Vec<Option<i64>> = (0..rows)
            .map(|i| match i % 37 {
                0 => None,
                1 => Some(min),
                2 => Some(max),
                _ => Some(min + (rng.next_u64() % (max - min) as u64) as i64),
            })
            .collect();
        let batch = RecordBatch::try_from_iter([
            ("p", Arc::new(StringArray::from(values)) as ArrayRef),
            ("t", Arc::new(TimestampSecondArray::from(times)) as ArrayRef),
        ])
        .unwrap();
        for zone in ["-14:00", "UTC", "+01:00", "+14:00"] {
            for pattern in [
                "a=%s%s%s%s/b=%C%C%C%C%C%C%C%C/c=%Y%Y%Y%Y",
                "dt=%Y-%m-%d/h=%H",
            ] {
                let time = TimePartitioning::new("t", pattern)
                    .unwrap()
                    .with_offset(parse_time_zone(zone).unwrap());
                let partitioner = HivePartitioner::new(["p"])
                    .unwrap()
                    .with_time(time)
                    .unwrap();
                let now = chrono::Utc::now();
                let lengths: Vec<Option<usize>> = (0..rows)
                    .map(|r| {
                        let split = partitioner.assign(&batch.slice(r, 1), now).ok()?;
                        Some(split[0].0.as_str().len())
                    })
                    .collect();
                let mut sorted: Vec<usize> = lengths.iter().flatten().copied().collect();
                sorted.sort_unstable();
                for limit in [
                    sorted[0],
                    sorted[sorted.len() / 2],
                    sorted[sorted.len() - 2],
                ] {
                    let check = partition_check(partitioner.clone(), Some(limit));
                    let mut long: Vec<usize> = check(&batch)
                        .into_iter()
                        .filter(|(r, _)| lengths[*r].is_some())
                        .map(|(r, why)| {
                            assert!(why.contains("partition path"), "{why}");
                            r
                        })
                        .collect();
                    long.sort_unstable();
                    let expected: Vec<usize> = (0..rows)
                        .filter(|&r| lengths[r].is_some_and(|n| n > limit))
                        .collect();
                    assert_eq!(long, expected, "{zone} {pattern} limit {limit}");
                }
            }
        }
    }
}
