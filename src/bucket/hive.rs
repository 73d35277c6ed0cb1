//! Hive-style `col=value/col2=value2` partition directories.

use std::collections::HashMap;
use std::collections::HashSet;

use arrow::array::{Array, ArrayRef};
use arrow::buffer::NullBuffer;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows, SortField};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use chrono::{DateTime, Utc};

use super::escape::{escape_path_component, HIVE_DEFAULT_PARTITION};
use super::hive_time::TimePartitioning;
use super::{
    check_row_count, split_by_group, truncate_for_message, BucketAssigner, BucketId,
    MAX_COMPONENT_BYTES,
};
use crate::{Error, Result};

/// Hive-style `col=value/col2=value2/` directories from one or more columns.
///
/// Each partition column gives one directory level, in the order the columns were given. Values
/// are formatted with arrow's display formatting (integers, strings, dictionary-encoded strings,
/// booleans, decimals, dates and timestamps all work; a timestamp looks like
/// `2024-05-01T13:00:00`), then escaped with [`escape_path_component`], so `/` becomes `%2F`,
/// `:` becomes `%3A` and so on. A null is written as [`HIVE_DEFAULT_PARTITION`], the empty
/// string as `col=`. Column names are escaped the same way. See the
/// [module documentation](super) for why the result can never leave the base directory and why
/// two different values never share a directory.
///
/// By default the partition columns are removed from the written data, as Hive, Spark, pyarrow
/// and DuckDB expect: their values are in the path. [`HivePartitioner::keep_partition_columns`]
/// keeps them.
///
/// A batch with a value whose directory name would be longer than 255 bytes after escaping is
/// rejected as a whole with [`Error::InvalidInput`].
///
/// With [`HivePartitioner::with_time`] (or [`HivePartitioner::by_time`], without partition
/// columns) time directories from a timestamp column follow the column directories:
/// `country=DE/dt=2026-11-30/hour=13` (see [`TimePartitioning`]). The time column stays in the
/// written data.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use arrow::array::{ArrayRef, Int64Array, StringArray};
/// use arrow::record_batch::RecordBatch;
/// use filesink::bucket::{BucketAssigner, HivePartitioner};
///
/// let batch = RecordBatch::try_from_iter([
///     ("country", Arc::new(StringArray::from(vec!["de", "fr", "de"])) as ArrayRef),
///     ("amount", Arc::new(Int64Array::from(vec![10, 20, 30])) as ArrayRef),
/// ])?;
///
/// let partitioner = HivePartitioner::new(["country"])?;
/// let mut buckets = partitioner.assign(&batch, chrono::Utc::now())?;
/// buckets.sort_by(|a, b| a.0.cmp(&b.0));
///
/// assert_eq!(buckets.len(), 2);
/// assert_eq!(buckets[0].0.as_str(), "country=de");
/// assert_eq!(buckets[0].1.num_rows(), 2);
/// // The partition column is in the path, not in the data.
/// assert_eq!(buckets[0].1.num_columns(), 1);
/// assert_eq!(buckets[1].0.as_str(), "country=fr");
/// assert_eq!(buckets[1].1.num_rows(), 1);
/// # Ok::<(), filesink::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct HivePartitioner {
    /// Partition column names, outermost directory first.
    columns: Vec<String>,
    /// `columns`, escaped for the path.
    escaped: Vec<String>,
    /// Whether the partition columns stay in the written data.
    keep: bool,
    /// Time directories after the column directories.
    time: Option<TimePartitioning>,
}

impl HivePartitioner {
    /// Partitions by `columns`, outermost directory first.
    ///
    /// Errors with [`Error::Config`] if `columns` is empty, names a column twice, or a name is
    /// empty, starts with `.` or `_`, or is too long to leave room for a value in a 255-byte
    /// directory name.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(columns: I) -> Result<Self> {
        let columns: Vec<String> = columns.into_iter().map(Into::into).collect();
        if columns.is_empty() {
            return Err(Error::Config(
                "hive partitioning needs at least one partition column".to_owned(),
            ));
        }
        let mut seen = HashSet::with_capacity(columns.len());
        let mut escaped = Vec::with_capacity(columns.len());
        for name in &columns {
            if name.is_empty() {
                return Err(Error::Config("partition column name is empty".to_owned()));
            }
            if name.starts_with('.') || name.starts_with('_') {
                return Err(Error::Config(format!(
                    "partition column name {:?} starts with '.' or '_', which readers treat as hidden",
                    truncate_for_message(name)
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(Error::Config(format!(
                    "partition column {:?} is listed twice",
                    truncate_for_message(name)
                )));
            }
            let e = escape_path_component(name);
            // `name=` plus at least the empty value must fit in one directory name.
            if e.len() + 1 > MAX_COMPONENT_BYTES {
                return Err(Error::Config(format!(
                    "partition column name {:?} is {} bytes after escaping, too long for a {MAX_COMPONENT_BYTES}-byte directory name",
                    truncate_for_message(name),
                    e.len()
                )));
            }
            escaped.push(e);
        }
        Ok(HivePartitioner {
            columns,
            escaped,
            keep: false,
            time: None,
        })
    }

    /// Partitions by time directories only (see [`TimePartitioning`]).
    pub fn by_time(time: TimePartitioning) -> Self {
        HivePartitioner {
            columns: Vec::new(),
            escaped: Vec::new(),
            keep: false,
            time: Some(time),
        }
    }

    /// Adds time directories after the column directories: `country=DE/dt=2026-11-30/hour=13`.
    ///
    /// Errors with [`Error::Config`] if a time directory has the name of a partition column:
    /// readers would see one partition column twice.
    pub fn with_time(mut self, time: TimePartitioning) -> Result<Self> {
        if let Some(name) = time.names().find(|n| self.escaped.iter().any(|e| e == n)) {
            return Err(Error::Config(format!(
                "time directory `{name}` has the name of a partition column"
            )));
        }
        self.time = Some(time);
        Ok(self)
    }

    /// The time directories, if any.
    pub fn time(&self) -> Option<&TimePartitioning> {
        self.time.as_ref()
    }

    /// Whether the partition columns stay in the written data. Default `false`: they are
    /// removed, as Hive, Spark, pyarrow and DuckDB do, since their values are in the path.
    pub fn keep_partition_columns(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    /// The partition column names, outermost directory first (none with
    /// [`HivePartitioner::by_time`]).
    pub fn columns(&self) -> &[String] {
        &self.columns
    }
}

/// Formats the values of one partition column into `col=value` directory names.
struct ColumnNamer<'a> {
    name: &'a str,
    escaped_name: &'a str,
    formatter: ArrayFormatter<'a>,
    /// Logical nulls, so a dictionary key pointing at a null value counts as null too.
    nulls: Option<NullBuffer>,
}

impl<'a> ColumnNamer<'a> {
    fn new(name: &'a str, escaped_name: &'a str, array: &'a ArrayRef) -> Result<Self> {
        // A list or a structure formats into text that other values share (`["a, b"]` and
        // `["a","b"]` both as `[a, b]`), and the column leaves the data: refused.
        if array.data_type().is_nested() {
            return Err(Error::InvalidInput(format!(
                "partition column `{name}` has type {}; a partition column must hold one value \
                 per row, not a list or a structure",
                array.data_type()
            )));
        }
        let formatter =
            ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default()).map_err(|e| {
                Error::InvalidInput(format!(
                    "partition column `{name}` has type {} whose values cannot be formatted as directory names: {e}",
                    array.data_type()
                ))
            })?;
        Ok(ColumnNamer {
            name,
            escaped_name,
            formatter,
            nulls: array.logical_nulls(),
        })
    }

    /// The directory name for the value at `row`.
    fn component(&self, row: usize) -> Result<String> {
        let value = if self.nulls.as_ref().is_some_and(|n| n.is_null(row)) {
            HIVE_DEFAULT_PARTITION.to_owned()
        } else {
            let text = self.formatter.value(row).try_to_string().map_err(|e| {
                Error::InvalidInput(format!(
                    "cannot format the value in row {row} of partition column `{}`: {e}",
                    self.name
                ))
            })?;
            escape_path_component(&text)
        };
        let len = self.escaped_name.len() + 1 + value.len();
        if len > MAX_COMPONENT_BYTES {
            return Err(Error::InvalidInput(format!(
                "the value in row {row} of partition column `{}` makes a {len}-byte directory name after escaping, more than the {MAX_COMPONENT_BYTES}-byte limit",
                self.name
            )));
        }
        let mut component = String::with_capacity(len);
        component.push_str(self.escaped_name);
        component.push('=');
        component.push_str(&value);
        Ok(component)
    }
}

/// The bucket of row `row`: one `col=value` per partition column.
fn bucket_of_row(namers: &[ColumnNamer<'_>], row: usize) -> Result<BucketId> {
    let components = namers
        .iter()
        .map(|n| n.component(row))
        .collect::<Result<Vec<_>>>()?;
    // Escaping already guarantees the rules; validate anyway so no path can slip through.
    BucketId::from_components(components)
}

/// The group of every row and the first row of every group, groups numbered in order of first
/// appearance.
type Groups = (Vec<u32>, Vec<usize>);

/// Groups rows with equal partition values.
///
/// Uses arrow's binary row encoding of the partition columns when it supports their types, and
/// falls back to grouping by formatted directory name otherwise.
fn group_rows(columns: &[ArrayRef], namers: &[ColumnNamer<'_>]) -> Result<Groups> {
    let fields: Vec<SortField> = columns
        .iter()
        .map(|c| SortField::new(c.data_type().clone()))
        .collect();
    let encoded = if RowConverter::supports_fields(&fields) {
        RowConverter::new(fields)
            .and_then(|conv| conv.convert_columns(columns))
            .ok()
    } else {
        None
    };
    match encoded {
        Some(encoded) => Ok(group_encoded_rows(&encoded)),
        None => {
            let rows = columns.first().map_or(0, |c| c.len());
            group_rows_by_name(namers, rows)
        }
    }
}

/// Groups rows by their binary row encoding: equal values, equal bytes.
fn group_encoded_rows(encoded: &Rows) -> Groups {
    let mut group_of_row = Vec::with_capacity(encoded.num_rows());
    let mut first_rows = Vec::new();
    // aHash (randomly seeded, so no worse against crafted keys than SipHash) instead of
    // SipHash: hashing every row's key was 4% of CPU at 24 partitions. ahash is already built
    // for arrow.
    let mut groups: HashMap<_, u32, ahash::RandomState> =
        HashMap::with_hasher(ahash::RandomState::new());
    let mut last = None;
    for (row, key) in encoded.iter().enumerate() {
        let group = match last {
            // Runs of equal values are common; skip the hash lookup for them.
            Some((prev, g)) if prev == key => g,
            _ => *groups.entry(key).or_insert_with(|| {
                first_rows.push(row);
                (first_rows.len() - 1) as u32
            }),
        };
        last = Some((key, group));
        group_of_row.push(group);
    }
    (group_of_row, first_rows)
}

/// Groups rows by their directory name, for types without a row encoding.
fn group_rows_by_name(namers: &[ColumnNamer<'_>], rows: usize) -> Result<Groups> {
    let mut group_of_row = Vec::with_capacity(rows);
    let mut first_rows = Vec::new();
    let mut groups: HashMap<BucketId, u32, ahash::RandomState> =
        HashMap::with_hasher(ahash::RandomState::new());
    for row in 0..rows {
        let id = bucket_of_row(namers, row)?;
        let next = first_rows.len() as u32;
        let group = *groups.entry(id).or_insert(next);
        if group == next {
            first_rows.push(row);
        }
        group_of_row.push(group);
    }
    Ok((group_of_row, first_rows))
}

/// The groups of column groups (`by_columns`: the group of every row and the bucket of every
/// group) crossed with the time groups of `batch`: each pair of a column group and a time group
/// that occurs is one group, its bucket the column directories then the time directories.
fn with_time_groups(
    time: &TimePartitioning,
    batch: &RecordBatch,
    by_columns: Option<(Vec<u32>, Vec<BucketId>)>,
) -> Result<(Vec<u32>, Vec<BucketId>)> {
    let t = time.groups(batch)?;
    let time_names = |g: usize| -> Result<&Vec<String>> {
        t.groups[g].as_ref().map_err(|why| {
            Error::InvalidInput(format!(
                "row {}: time partition column `{}`: {why}",
                t.first_rows[g],
                time.column()
            ))
        })
    };
    let Some((column_of_row, column_names)) = by_columns else {
        let names = (0..t.groups.len())
            .map(|g| BucketId::from_components(time_names(g)?))
            .collect::<Result<Vec<_>>>()?;
        return Ok((t.group_of_row, names));
    };
    let mut pairs: HashMap<(u32, u32), u32, ahash::RandomState> =
        HashMap::with_hasher(ahash::RandomState::new());
    let mut names = Vec::new();
    let mut group_of_row = Vec::with_capacity(column_of_row.len());
    let mut last: Option<((u32, u32), u32)> = None;
    for (&c, &tg) in column_of_row.iter().zip(&t.group_of_row) {
        let key = (c, tg);
        let group = match last {
            Some((prev, g)) if prev == key => g,
            _ => match pairs.get(&key) {
                Some(&g) => g,
                None => {
                    let g = names.len() as u32;
                    let dirs = column_names[c as usize]
                        .components()
                        .chain(time_names(tg as usize)?.iter().map(String::as_str));
                    names.push(BucketId::from_components(dirs)?);
                    pairs.insert(key, g);
                    g
                }
            },
        };
        last = Some((key, group));
        group_of_row.push(group);
    }
    Ok((group_of_row, names))
}

impl BucketAssigner for HivePartitioner {
    /// Splits `batch` by the values of the partition columns.
    ///
    /// Buckets come in order of first appearance in the batch. Errors with
    /// [`Error::InvalidInput`] if a partition column (or the time column) is missing from the
    /// batch, or a value cannot be formatted, is too long for a directory name or is not a
    /// time; nothing of the batch is assigned then.
    fn assign(
        &self,
        batch: &RecordBatch,
        _now: DateTime<Utc>,
    ) -> Result<Vec<(BucketId, RecordBatch)>> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(Vec::new());
        }
        check_row_count(rows)?;

        let schema = batch.schema_ref();
        let mut indices = Vec::with_capacity(self.columns.len());
        for name in &self.columns {
            let index = schema.index_of(name).map_err(|_| {
                Error::InvalidInput(format!(
                    "partition column `{name}` is not in the batch schema"
                ))
            })?;
            indices.push(index);
        }
        let by_columns = if self.columns.is_empty() {
            None
        } else {
            let columns: Vec<ArrayRef> = indices.iter().map(|&i| batch.column(i).clone()).collect();
            let namers = self
                .columns
                .iter()
                .zip(&self.escaped)
                .zip(&columns)
                .map(|((name, escaped), array)| ColumnNamer::new(name, escaped, array))
                .collect::<Result<Vec<_>>>()?;
            let (group_of_row, first_rows) = group_rows(&columns, &namers)?;
            // Format each distinct value once, from the first row that has it.
            let names = first_rows
                .iter()
                .map(|&row| bucket_of_row(&namers, row))
                .collect::<Result<Vec<_>>>()?;
            Some((group_of_row, names))
        };
        let (group_of_row, names) = match (&self.time, by_columns) {
            (None, Some(by_columns)) => by_columns,
            (Some(time), by_columns) => with_time_groups(time, batch, by_columns)?,
            // Not made by the constructors; everything in the base directory.
            (None, None) => (vec![0; rows], vec![BucketId::root()]),
        };

        let data = if self.keep {
            batch.clone()
        } else {
            let remaining: Vec<usize> = (0..batch.num_columns())
                .filter(|i| !indices.contains(i))
                .collect();
            batch.project(&remaining)?
        };
        split_by_group(&data, group_of_row, names)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Arc;

    use arrow::array::{
        BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Int32Array, Int64Array,
        StringArray, TimestampMillisecondArray,
    };
    use arrow::datatypes::Int8Type;

    use super::super::escape::unescape_path_component;
    use super::super::test_util::{assert_safe, ids_by_bucket, XorShift};
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    fn id_column(n: usize) -> ArrayRef {
        Arc::new(Int64Array::from((0..n as i64).collect::<Vec<_>>()))
    }

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    /// Partitions a one-string-column batch (plus row ids) and returns bucket -> row ids.
    fn partition_strings(values: Vec<Option<&str>>) -> Result<HashMap<String, Vec<i64>>> {
        let n = values.len();
        let b = batch(vec![
            ("id", id_column(n)),
            ("v", Arc::new(StringArray::from(values)) as ArrayRef),
        ]);
        let out = HivePartitioner::new(["v"])?.assign(&b, now())?;
        let total: usize = out.iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(total, n);
        for (_, sub) in &out {
            assert_eq!(sub.num_columns(), 1, "partition column must be removed");
        }
        Ok(ids_by_bucket(&out, "id"))
    }

    #[test]
    fn config_errors() {
        for cols in [
            vec![],
            vec![""],
            vec!["a", "a"],
            vec![".hidden"],
            vec!["_tmp"],
        ] {
            let err = HivePartitioner::new(cols.clone()).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{cols:?}: {err:?}");
        }
        let long = "c".repeat(300);
        assert!(matches!(
            HivePartitioner::new([long]).unwrap_err(),
            Error::Config(_)
        ));
        let p = HivePartitioner::new(vec!["a".to_owned(), "b".to_owned()]).unwrap();
        assert_eq!(p.columns(), ["a", "b"]);
    }

    #[test]
    fn multi_column_every_row_once_order_preserved() {
        let n = 1000;
        let a: Vec<i64> = (0..n).map(|i| (i * 7) % 3).collect();
        let b: Vec<&str> = (0..n)
            .map(|i| ["x", "y/z", "", "w"][(i as usize * 13) % 4])
            .collect();
        let rb = batch(vec![
            ("a", Arc::new(Int64Array::from(a.clone())) as ArrayRef),
            ("id", id_column(n as usize)),
            ("b", Arc::new(StringArray::from(b.clone())) as ArrayRef),
        ]);
        let out = HivePartitioner::new(["a", "b"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        for (_, sub) in &out {
            assert_eq!(sub.schema().fields().len(), 1);
            assert_eq!(sub.schema().field(0).name(), "id");
        }
        let by_bucket = ids_by_bucket(&out, "id");

        // Expected: rows grouped by (a, b) in input order.
        let mut expected: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for i in 0..n as usize {
            let key = format!("a={}/b={}", a[i], escape_path_component(b[i]));
            expected.entry(key).or_default().push(i as i64);
        }
        let got: BTreeMap<String, Vec<i64>> = by_bucket.into_iter().collect();
        assert_eq!(got, expected);
        assert!(got.contains_key("a=0/b=y%2Fz"));
        assert!(got.contains_key("a=1/b="));

        // Buckets come in order of first appearance.
        assert_eq!(out[0].0.as_str(), format!("a={}/b={}", a[0], b[0]));
    }

    #[test]
    fn keep_partition_columns() {
        let rb = batch(vec![
            ("id", id_column(4)),
            (
                "p",
                Arc::new(Int32Array::from(vec![1, 2, 1, 2])) as ArrayRef,
            ),
        ]);
        let out = HivePartitioner::new(["p"])
            .unwrap()
            .keep_partition_columns(true)
            .assign(&rb, now())
            .unwrap();
        assert_eq!(out.len(), 2);
        for (id, sub) in &out {
            assert_eq!(sub.schema(), rb.schema());
            let p = sub.column(1).as_any().downcast_ref::<Int32Array>().unwrap();
            assert!(p.values().iter().all(|v| id.as_str() == format!("p={v}")));
        }
    }

    #[test]
    fn single_bucket_fast_path_does_not_copy() {
        let data: ArrayRef = Arc::new(Int64Array::from(vec![5, 6, 7]));
        let rb = batch(vec![
            (
                "p",
                Arc::new(StringArray::from(vec!["same"; 3])) as ArrayRef,
            ),
            ("data", data.clone()),
        ]);
        let out = HivePartitioner::new(["p"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.as_str(), "p=same");
        assert_eq!(out[0].1.num_rows(), 3);
        assert!(Arc::ptr_eq(out[0].1.column(0), &data));

        let kept = HivePartitioner::new(["p"])
            .unwrap()
            .keep_partition_columns(true)
            .assign(&rb, now())
            .unwrap();
        assert_eq!(kept[0].1, rb);
        assert!(Arc::ptr_eq(kept[0].1.column(1), &data));
    }

    #[test]
    fn empty_batch_gives_no_buckets() {
        let rb = batch(vec![(
            "p",
            Arc::new(StringArray::from(Vec::<&str>::new())) as ArrayRef,
        )]);
        let out = HivePartitioner::new(["p"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn only_partition_columns_keeps_row_count() {
        let rb = batch(vec![(
            "p",
            Arc::new(StringArray::from(vec!["a", "b", "a"])) as ArrayRef,
        )]);
        let out = HivePartitioner::new(["p"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        let counts: HashMap<_, _> = out
            .iter()
            .map(|(id, b)| (id.to_string(), (b.num_columns(), b.num_rows())))
            .collect();
        assert_eq!(counts["p=a"], (0, 2));
        assert_eq!(counts["p=b"], (0, 1));
    }

    #[test]
    fn missing_column_is_invalid_input() {
        let rb = batch(vec![("id", id_column(2))]);
        let err = HivePartitioner::new(["nope"])
            .unwrap()
            .assign(&rb, now())
            .unwrap_err();
        let Error::InvalidInput(msg) = err else {
            panic!("{err:?}")
        };
        assert!(msg.contains("`nope`"), "{msg}");
    }

    /// A list formats into text other lists share (`["a, b"]` and `["a","b"]` both as
    /// `[a, b]`), and the column leaves the data: refused, not bucketed.
    #[test]
    fn a_nested_column_is_invalid_input() {
        use arrow::array::{ListBuilder, StringBuilder};
        let mut lists = ListBuilder::new(StringBuilder::new());
        lists.values().append_value("a, b");
        lists.append(true);
        lists.values().append_value("a");
        lists.values().append_value("b");
        lists.append(true);
        let rb = batch(vec![
            ("id", id_column(2)),
            ("l", Arc::new(lists.finish()) as ArrayRef),
        ]);
        let err = HivePartitioner::new(["l"])
            .unwrap()
            .assign(&rb, now())
            .unwrap_err();
        let Error::InvalidInput(msg) = err else {
            panic!("{err:?}")
        };
        assert!(msg.contains("not a list or a structure"), "{msg}");
    }

    #[test]
    fn nulls_go_to_default_partition() {
        let got = partition_strings(vec![Some("a"), None, Some("a"), None]).unwrap();
        assert_eq!(got["v=a"], [0, 2]);
        assert_eq!(got["v=__HIVE_DEFAULT_PARTITION__"], [1, 3]);

        let ints = batch(vec![
            ("id", id_column(3)),
            (
                "n",
                Arc::new(Int64Array::from(vec![None, Some(-4), None])) as ArrayRef,
            ),
        ]);
        let out = HivePartitioner::new(["n"])
            .unwrap()
            .assign(&ints, now())
            .unwrap();
        let got = ids_by_bucket(&out, "id");
        assert_eq!(got["n=__HIVE_DEFAULT_PARTITION__"], [0, 2]);
        assert_eq!(got["n=-4"], [1]);
    }

    #[test]
    fn empty_null_and_literal_marker_are_three_buckets() {
        let got = partition_strings(vec![
            Some(""),
            None,
            Some(HIVE_DEFAULT_PARTITION),
            Some(""),
            None,
            Some(HIVE_DEFAULT_PARTITION),
        ])
        .unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got["v="], [0, 3]);
        assert_eq!(got["v=__HIVE_DEFAULT_PARTITION__"], [1, 4]);
        assert_eq!(got["v=%5F_HIVE_DEFAULT_PARTITION__"], [2, 5]);
    }

    #[test]
    fn hostile_values_stay_inside_and_do_not_collide() {
        let hostile = vec![
            "../",
            "../../etc",
            "/",
            "a/b",
            "\0",
            "=",
            ".",
            "..",
            "%2F",
            "%252F",
            "\\",
            "..\\..\\windows",
            "/etc/passwd",
            "C:",
            "a=b/c=d",
            "\n",
            " ",
            "ünïcödé",
            "東京",
            "🦀",
        ];
        let values: Vec<Option<&str>> = hostile.iter().copied().map(Some).collect();
        let got = partition_strings(values).unwrap();
        // Every value its own bucket.
        assert_eq!(got.len(), hostile.len());
        for (i, v) in hostile.iter().enumerate() {
            let expected = format!("v={}", escape_path_component(v));
            assert_eq!(got[&expected], [i as i64], "value {v:?}");
        }
        assert!(got.contains_key("v=..%2F..%2Fetc"));
        assert!(got.contains_key("v=%2F"));
        assert!(got.contains_key("v=%252F"));
        assert!(got.contains_key("v=%00"));
        assert!(got.contains_key("v=%3D"));
        assert!(got.contains_key("v=."));
        assert!(got.contains_key("v=.."));
        assert!(got.contains_key("v=東京"));
        assert!(got.contains_key("v=🦀"));
    }

    #[test]
    fn hostile_column_names_are_escaped() {
        let rb = batch(vec![
            ("id", id_column(1)),
            ("a/../b=c", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ]);
        let out = HivePartitioner::new(["a/../b=c"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        assert_eq!(out[0].0.as_str(), "a%2F..%2Fb%3Dc=1");
        assert_safe(&out[0].0);
    }

    #[test]
    fn too_long_value_is_a_clear_error() {
        let huge = "x".repeat(10 * 1024);
        let err = partition_strings(vec![Some("ok"), Some(&huge)]).unwrap_err();
        let Error::InvalidInput(msg) = err else {
            panic!("{err:?}")
        };
        assert!(msg.contains("`v`"), "{msg}");
        assert!(msg.contains(&(10 * 1024 + 2).to_string()), "{msg}");
        assert!(msg.len() < 300, "{msg}");

        // Escaping can push a value over the limit: 100 '/' are 300 bytes escaped.
        let slashes = "/".repeat(100);
        let err = partition_strings(vec![Some(&slashes)]).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)));

        // Right at the limit is fine: "v=" + 253 bytes.
        let max = "y".repeat(253);
        let got = partition_strings(vec![Some(&max)]).unwrap();
        assert_eq!(got.keys().next().unwrap().len(), 255);
        let over = "y".repeat(254);
        assert!(partition_strings(vec![Some(&over)]).is_err());
    }

    #[test]
    fn formats_many_types() {
        let n = 2;
        let dict: DictionaryArray<Int8Type> = vec![Some("red"), None].into_iter().collect();
        let dec = Decimal128Array::from(vec![12345, -5])
            .with_precision_and_scale(10, 2)
            .unwrap();
        let rb = batch(vec![
            ("id", id_column(n)),
            (
                "flag",
                Arc::new(BooleanArray::from(vec![true, false])) as ArrayRef,
            ),
            (
                "day",
                Arc::new(Date32Array::from(vec![19_723, 0])) as ArrayRef,
            ),
            (
                "ts",
                Arc::new(TimestampMillisecondArray::from(vec![
                    1_704_067_200_000,
                    1_704_067_200_500,
                ])) as ArrayRef,
            ),
            ("dec", Arc::new(dec) as ArrayRef),
            ("color", Arc::new(dict) as ArrayRef),
        ]);
        let out = HivePartitioner::new(["flag", "day", "ts", "dec", "color"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        let got = ids_by_bucket(&out, "id");
        assert_eq!(
            got["flag=true/day=2024-01-01/ts=2024-01-01T00%3A00%3A00/dec=123.45/color=red"],
            [0]
        );
        assert_eq!(
            got["flag=false/day=1970-01-01/ts=2024-01-01T00%3A00%3A00.500/dec=-0.05/color=__HIVE_DEFAULT_PARTITION__"],
            [1]
        );
    }

    #[test]
    fn dictionary_keys_with_same_value_share_a_bucket() {
        // Two distinct keys pointing at equal values, and a key pointing at a null value.
        let keys = arrow::array::Int8Array::from(vec![0, 1, 2, 0, 1]);
        let values: ArrayRef = Arc::new(StringArray::from(vec![Some("x"), Some("x"), None]));
        let dict = DictionaryArray::<Int8Type>::try_new(keys, values).unwrap();
        let rb = batch(vec![
            ("id", id_column(5)),
            ("d", Arc::new(dict) as ArrayRef),
        ]);
        let out = HivePartitioner::new(["d"])
            .unwrap()
            .assign(&rb, now())
            .unwrap();
        let got = ids_by_bucket(&out, "id");
        assert_eq!(got.len(), 2);
        assert_eq!(got["d=x"], [0, 1, 3, 4]);
        assert_eq!(got["d=__HIVE_DEFAULT_PARTITION__"], [2]);
    }

    #[test]
    fn sliced_input_batches_work() {
        let rb = batch(vec![
            ("id", id_column(10)),
            (
                "p",
                Arc::new(Int64Array::from(vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 1])) as ArrayRef,
            ),
        ]);
        let sliced = rb.slice(3, 5);
        let out = HivePartitioner::new(["p"])
            .unwrap()
            .assign(&sliced, now())
            .unwrap();
        let got = ids_by_bucket(&out, "id");
        assert_eq!(got["p=1"], [3, 5, 7]);
        assert_eq!(got["p=0"], [4, 6]);
    }

    #[test]
    fn name_grouping_fallback_agrees_with_row_encoding() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some("x"),
            None,
            Some("x"),
            Some(""),
            None,
            Some("y"),
        ]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![1, 1, 1, 2, 1, 1]));
        let columns = vec![a, b];
        let names = ["a".to_owned(), "b".to_owned()];
        let namers: Vec<ColumnNamer<'_>> = names
            .iter()
            .zip(&columns)
            .map(|(n, c)| ColumnNamer::new(n, n, c).unwrap())
            .collect();
        let by_rows = group_rows(&columns, &namers).unwrap();
        let by_name = group_rows_by_name(&namers, 6).unwrap();
        assert_eq!(by_rows, by_name);
        assert_eq!(by_rows, (vec![0, 1, 0, 2, 1, 3], vec![0, 1, 3, 5]));
    }

    #[test]
    fn property_random_strings_are_injective_and_safe() {
        let mut rng = XorShift::new(0xC0FFEE);
        let mut seen_escaped: HashMap<String, String> = HashMap::new();
        for round in 0..40 {
            let n = 1 + rng.below(200) as usize;
            let mut values: Vec<Option<String>> = Vec::with_capacity(n);
            for _ in 0..n {
                // Reuse earlier values often, so buckets get several rows.
                let v = if !values.is_empty() && rng.below(3) == 0 {
                    values[rng.below(values.len() as u64) as usize].clone()
                } else if rng.below(20) == 0 {
                    None
                } else {
                    Some(rng.string(if round % 10 == 0 { 120 } else { 16 }))
                };
                values.push(v);
            }
            for s in values.iter().flatten() {
                let e = escape_path_component(s);
                assert_eq!(&unescape_path_component(&e).unwrap(), s);
                assert_ne!(e, HIVE_DEFAULT_PARTITION);
                if let Some(prev) = seen_escaped.insert(e.clone(), s.clone()) {
                    assert_eq!(&prev, s, "{prev:?} and {s:?} both escape to {e:?}");
                }
            }

            let rb = batch(vec![
                ("id", id_column(n)),
                ("v", Arc::new(StringArray::from(values.clone())) as ArrayRef),
            ]);
            let result = HivePartitioner::new(["v"]).unwrap().assign(&rb, now());
            let too_long = values
                .iter()
                .flatten()
                .any(|s| escape_path_component(s).len() + 2 > MAX_COMPONENT_BYTES);
            let out = match result {
                Err(Error::InvalidInput(_)) if too_long => continue,
                Err(e) => panic!("unexpected error {e:?}"),
                Ok(out) => {
                    assert!(!too_long);
                    out
                }
            };
            let got = ids_by_bucket(&out, "id");
            let mut expected: HashMap<String, Vec<i64>> = HashMap::new();
            for (i, v) in values.iter().enumerate() {
                let value = match v {
                    None => HIVE_DEFAULT_PARTITION.to_owned(),
                    Some(s) => escape_path_component(s),
                };
                expected
                    .entry(format!("v={value}"))
                    .or_default()
                    .push(i as i64);
            }
            assert_eq!(got, expected);
            // Decoding the directory gives back the value.
            for (id, sub) in &out {
                let ids = sub.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                let raw = id.as_str().strip_prefix("v=").unwrap();
                let decoded = if raw == HIVE_DEFAULT_PARTITION {
                    None
                } else {
                    Some(unescape_path_component(raw).unwrap())
                };
                for row in ids.values() {
                    assert_eq!(values[*row as usize], decoded);
                }
            }
        }
    }
}
