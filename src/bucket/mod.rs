//! Bucket assignment: which directory under the sink's base directory each row is written to.
//!
//! A [`BucketAssigner`] (Flink's `BucketAssigner`) splits every incoming [`RecordBatch`] into one
//! sub-batch per bucket. A bucket is named by a [`BucketId`], a relative directory path such as
//! `country=de/day=2024-05-01` or `2024-05-01--13`, or the empty path for the base directory.
//!
//! Three assigners are provided:
//!
//! * [`BasePathBucketAssigner`] writes everything into the base directory.
//! * [`HivePartitioner`] writes Hive-style `col=value/col2=value2` directories from column values,
//!   the layout Hive, Spark, pyarrow, DuckDB and Polars read as partition columns, optionally
//!   followed by time directories such as `dt=2026-11-30/hour=13` from a timestamp column
//!   ([`TimePartitioning`], in a fixed time zone).
//! * [`DateTimeBucketAssigner`] writes time buckets from processing time or a timestamp column,
//!   formatted with a chrono strftime pattern in UTC.
//!
//! Partitioning is vectorised: rows are grouped once (with [`arrow::row`] for column values),
//! then the batch is reordered with a single [`arrow::compute::take_record_batch`] and cut into
//! zero-copy slices. A batch that falls into one bucket is passed on without copying.
//!
//! # Escaping guarantees
//!
//! Partition values come from data, and data can be hostile. The directory names built from them
//! are safe by construction, not by a blacklist of bad values:
//!
//! * **No traversal.** Every directory [`HivePartitioner`] makes has the form `col=<value>`,
//!   where `col` is the escaped column name, which is never empty and never starts with `.` or
//!   `_`. The value is escaped by [`escape::escape_path_component`], which turns `/`, `\`, NUL,
//!   all other control characters, `=`, `%` and the other characters Hive escapes into `%XX`. So
//!   a value of `..`, `.`, `../../etc` or `/` gives the ordinary directory names `col=..`,
//!   `col=.`, `col=..%2F..%2Fetc` and `col=%2F`: one path component each, never `.` or `..`, never
//!   hidden, never absolute. A time directory ([`TimePartitioning`]) is `name=<value>` the same
//!   way: `name` is checked when the pattern is (ASCII letters, digits, `_`, `-`, starting with a
//!   letter or digit) and the formatted time is escaped like a column value, so a pattern cannot
//!   make a `/` inside a value, an empty component or `..` either. On top of that every [`BucketId`] is validated when it is made
//!   (non-empty components of at most 255 bytes, no `.` or `..`, no `/`, `\` or NUL, no leading
//!   `.` or `_`), whichever assigner made it, and when it is parsed back from serialized state.
//! * **No collisions.** The escaping is injective ([`escape::unescape_path_component`] inverts
//!   it), `%` itself is escaped so `%2F` (written `%252F`) and `/` (written `%2F`) stay apart,
//!   and `=` is escaped so the first `=` in a component always separates name from value.
//!   A null is written as `col=__HIVE_DEFAULT_PARTITION__` ([`HIVE_DEFAULT_PARTITION`]), the
//!   empty string as `col=`, and a string that literally reads `__HIVE_DEFAULT_PARTITION__` as
//!   `col=%5F_HIVE_DEFAULT_PARTITION__`: three different directories. Two rows share a directory
//!   only when their partition values format to the same text.
//! * **Clear failure instead of truncation.** A value whose component would be longer than 255
//!   bytes after escaping (the limit of common file systems) fails the whole batch with
//!   [`crate::Error::InvalidInput`] naming the column and the length; nothing is written and
//!   nothing panics. So does a bucket whose whole path is longer than the store takes under
//!   the sink's base ([`crate::Sink::partition_path_bytes_max`]), checked by the writer.
//!
//! Values that differ only in letter case or Unicode normalization are different directories
//! here, but a case-insensitive or normalizing file system (the macOS and Windows defaults) would
//! store them in one directory. Use a case-sensitive file system when such values occur.

use std::collections::HashMap;
use std::fmt;

use arrow::array::UInt32Array;
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};

pub mod escape;
mod hive;
mod hive_time;
mod time;

pub use escape::HIVE_DEFAULT_PARTITION;
pub use hive::HivePartitioner;
pub use hive_time::{parse_time_zone, time_zone_name, TimePartitioning};
pub use time::DateTimeBucketAssigner;

pub(crate) use crate::protocol::bucket_id::truncate_for_message;
pub use crate::protocol::{BucketId, MAX_COMPONENT_BYTES};
use crate::{Error, Result};

/// Decides which directory each row goes to (Flink's `BucketAssigner`).
///
/// Implementations must be deterministic for the same batch and `now`, so that a replay after a
/// failure writes the same rows to the same buckets.
pub trait BucketAssigner: Send + Sync + fmt::Debug {
    /// Splits `batch` into one sub-batch per bucket, in any order, every input row in exactly
    /// one output batch, row order within a bucket preserved. Sub-batches may have columns
    /// removed (see [`HivePartitioner`]). A batch without rows gives no buckets.
    ///
    /// Must not panic on any input; returns [`Error::InvalidInput`] when a value cannot be
    /// turned into a safe directory name. `now` is the processing time.
    fn assign(
        &self,
        batch: &RecordBatch,
        now: DateTime<Utc>,
    ) -> Result<Vec<(BucketId, RecordBatch)>>;
}

/// Writes everything into the base directory (Flink's `BasePathBucketAssigner`).
///
/// The batch is returned unchanged, without copying.
#[derive(Debug, Clone, Default)]
pub struct BasePathBucketAssigner;

impl BucketAssigner for BasePathBucketAssigner {
    fn assign(
        &self,
        batch: &RecordBatch,
        _now: DateTime<Utc>,
    ) -> Result<Vec<(BucketId, RecordBatch)>> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        Ok(vec![(BucketId::root(), batch.clone())])
    }
}

/// Fails when a batch has more rows than `u32` indices can address.
fn check_row_count(rows: usize) -> Result<()> {
    if u32::try_from(rows).is_err() {
        return Err(Error::InvalidInput(format!(
            "batch has {rows} rows, more than the {} a bucket assigner can split",
            u32::MAX
        )));
    }
    Ok(())
}

/// Gives groups that got the same bucket name one group id.
///
/// `names[g]` is the bucket of group `g`; `group_of_row` is rewritten in place. Returns one
/// bucket per remaining group, in order of first appearance.
fn merge_equal_buckets(names: Vec<BucketId>, group_of_row: &mut [u32]) -> Vec<BucketId> {
    let mut index: HashMap<&BucketId, u32> = HashMap::with_capacity(names.len());
    let mut remap = Vec::with_capacity(names.len());
    let mut merged = false;
    for name in &names {
        let next = index.len() as u32;
        let id = *index.entry(name).or_insert(next);
        merged |= id != next;
        remap.push(id);
    }
    if !merged {
        return names;
    }
    for g in group_of_row.iter_mut() {
        *g = remap[*g as usize];
    }
    let mut unique = Vec::with_capacity(index.len());
    for (g, name) in names.iter().enumerate() {
        if remap[g] as usize == unique.len() {
            unique.push(name.clone());
        }
    }
    unique
}

/// Cuts `batch` into one sub-batch per group.
///
/// `group_of_row[r]` is the group (an index into `names`) of row `r`; it has one entry per row
/// of `batch`, and the batch has at most `u32::MAX` rows. Groups that share a name are merged.
/// One group returns `batch` itself, no copy. Otherwise the batch is reordered by group with a
/// single stable `take` and every group is a zero-copy slice of the result, so row order within
/// a group is kept.
fn split_by_group(
    batch: &RecordBatch,
    mut group_of_row: Vec<u32>,
    names: Vec<BucketId>,
) -> Result<Vec<(BucketId, RecordBatch)>> {
    debug_assert_eq!(group_of_row.len(), batch.num_rows());
    let names = merge_equal_buckets(names, &mut group_of_row);
    if names.len() == 1 {
        return Ok(names.into_iter().map(|n| (n, batch.clone())).collect());
    }

    // Counting sort of row numbers by group: stable, O(rows + groups).
    let mut counts = vec![0usize; names.len()];
    for &g in &group_of_row {
        counts[g as usize] += 1;
    }
    let mut starts = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for &c in &counts {
        starts.push(total);
        total += c;
    }
    let mut cursor = starts.clone();
    let mut order = vec![0u32; group_of_row.len()];
    for (row, &g) in group_of_row.iter().enumerate() {
        let slot = &mut cursor[g as usize];
        order[*slot] = row as u32;
        *slot += 1;
    }

    let reordered = arrow::compute::take_record_batch(batch, &UInt32Array::from(order))?;
    Ok(names
        .into_iter()
        .zip(starts.into_iter().zip(counts))
        .filter(|(_, (_, count))| *count > 0)
        .map(|(name, (start, count))| (name, reordered.slice(start, count)))
        .collect())
}

#[cfg(test)]
pub(crate) mod test_util {
    //! Helpers shared by the bucket tests.

    use std::collections::HashMap;
    use std::path::{Component, Path};

    use arrow::array::{Array, AsArray, Int64Array};
    use arrow::record_batch::RecordBatch;

    use super::BucketId;

    /// Deterministic xorshift64* generator, so property tests need no extra crates.
    pub(crate) struct XorShift(u64);

    impl XorShift {
        pub(crate) fn new(seed: u64) -> Self {
            XorShift(seed.max(1))
        }

        pub(crate) fn next_u64(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }

        /// A random string biased towards characters that matter for paths.
        pub(crate) fn string(&mut self, max_len: usize) -> String {
            const SPECIAL: &[char] = &[
                '/', '\\', '.', '%', '=', '\0', '_', ':', '*', '?', '"', '<', '>', '|', '#', '\'',
                '{', '}', '[', ']', '^', '\n', '\x7f', ' ', '~', '$', 'é', '東', '🦀', 'F', '2',
            ];
            let len = self.below(max_len as u64 + 1) as usize;
            let mut s = String::new();
            for _ in 0..len {
                let c = match self.below(4) {
                    0 => SPECIAL[self.below(SPECIAL.len() as u64) as usize],
                    1 => char::from(self.below(128) as u8),
                    2 => char::from_u32(self.below(0x11_0000) as u32).unwrap_or('\u{fffd}'),
                    _ => char::from(b'a' + self.below(26) as u8),
                };
                s.push(c);
            }
            s
        }
    }

    /// Asserts that `id` re-validates and that joined under a base path every component is an
    /// ordinary name, so the bucket directory is strictly inside the base.
    pub(crate) fn assert_safe(id: &BucketId) {
        assert_eq!(&BucketId::parse(id.as_str()).unwrap(), id);
        let base = Path::new("/base/dir");
        for joined in [base.join(id.as_str()), id.path_under(base)] {
            assert!(joined.starts_with(base), "{joined:?} escapes the base");
            let rest = joined.strip_prefix(base).unwrap();
            let mut n = 0;
            for c in rest.components() {
                n += 1;
                match c {
                    Component::Normal(name) => {
                        let name = name.to_str().unwrap();
                        assert!(!name.starts_with('.') && !name.starts_with('_'));
                    }
                    other => panic!("component {other:?} of {joined:?} is not a normal name"),
                }
            }
            assert_eq!(n, id.components().count());
        }
    }

    /// The values of Int64 column `col` of every output batch, by bucket, asserting that each
    /// bucket appears once.
    pub(crate) fn ids_by_bucket(
        out: &[(BucketId, RecordBatch)],
        col: &str,
    ) -> HashMap<String, Vec<i64>> {
        let mut map = HashMap::new();
        for (id, batch) in out {
            assert_safe(id);
            let array = batch.column_by_name(col).unwrap();
            let values: &Int64Array = array.as_primitive();
            assert_eq!(values.null_count(), 0);
            let prev = map.insert(id.as_str().to_owned(), values.values().to_vec());
            assert!(prev.is_none(), "bucket {id} returned twice");
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};

    use super::test_util::{assert_safe, XorShift};
    use super::*;

    #[test]
    fn root_and_parse() {
        let root = BucketId::root();
        assert!(root.is_root());
        assert_eq!(root.as_str(), "");
        assert_eq!(BucketId::parse("").unwrap(), root);
        assert_eq!(
            BucketId::from_components(Vec::<String>::new()).unwrap(),
            root
        );
        assert_eq!(root.components().count(), 0);
        assert_eq!(root.path_under(Path::new("/b")), PathBuf::from("/b"));

        let id = BucketId::parse("a=1/b=2").unwrap();
        assert!(!id.is_root());
        assert_eq!(id.to_string(), "a=1/b=2");
        assert_eq!(id.components().collect::<Vec<_>>(), ["a=1", "b=2"]);
        assert_eq!(BucketId::from_components(["a=1", "b=2"]).unwrap(), id);
        assert_eq!(id.path_under(Path::new("/b")), PathBuf::from("/b/a=1/b=2"));
        assert_safe(&id);
    }

    #[test]
    fn rejects_bad_components() {
        let long = "x".repeat(256);
        for bad in [
            "/", "a/", "/a", "a//b", ".", "..", "a/../b", "./a", ".hidden", "_tmp", "a\\b", "a\0b",
            &long,
        ] {
            let err = BucketId::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{bad:?}: {err:?}");
        }
        for bad in ["", ".", "..", "a/b", "a\\b", "\0", "_x", ".x", &long] {
            let err = BucketId::from_components(["ok", bad]).unwrap_err();
            let Error::InvalidInput(msg) = err else {
                panic!("{bad:?} gave {err:?}")
            };
            assert!(
                msg.contains(&format!("{:?}", truncate_for_message(bad))),
                "{msg}"
            );
        }
        assert!(BucketId::parse(&"x".repeat(255)).is_ok());
        let msg = BucketId::parse(&long).unwrap_err().to_string();
        assert!(msg.contains("256 bytes"), "{msg}");
        assert!(
            msg.len() < 300,
            "message should not carry the whole value: {msg}"
        );
    }

    #[test]
    fn ordering_is_by_string() {
        let mut ids = [
            BucketId::parse("b").unwrap(),
            BucketId::root(),
            BucketId::parse("a=2").unwrap(),
            BucketId::parse("a=1").unwrap(),
        ];
        ids.sort();
        let strs: Vec<_> = ids.iter().map(BucketId::as_str).collect();
        assert_eq!(strs, ["", "a=1", "a=2", "b"]);
    }

    #[test]
    fn base_path_assigner_returns_batch_unchanged() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let strs: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let batch = RecordBatch::try_from_iter([("i", ints.clone()), ("s", strs)]).unwrap();
        let out = BasePathBucketAssigner.assign(&batch, Utc::now()).unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0].0.is_root());
        assert_eq!(out[0].1, batch);
        // No copy: the very same buffers.
        assert!(Arc::ptr_eq(out[0].1.column(0), &ints));

        let empty = batch.slice(0, 0);
        assert!(BasePathBucketAssigner
            .assign(&empty, Utc::now())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn split_by_group_is_stable_and_merges_equal_names() {
        let batch = RecordBatch::try_from_iter([(
            "i",
            Arc::new(Int64Array::from((0..10).collect::<Vec<i64>>())) as ArrayRef,
        )])
        .unwrap();
        let groups = vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0];
        let names = vec![
            BucketId::parse("x").unwrap(),
            BucketId::parse("y").unwrap(),
            BucketId::parse("x").unwrap(),
        ];
        let out = split_by_group(&batch, groups, names).unwrap();
        let got: Vec<(String, Vec<i64>)> = out
            .iter()
            .map(|(id, b)| {
                let v = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec();
                (id.to_string(), v)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("x".to_owned(), vec![0, 2, 3, 5, 6, 8, 9]),
                ("y".to_owned(), vec![1, 4, 7]),
            ]
        );
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "é".repeat(100);
        let t = truncate_for_message(&s);
        assert!(t.ends_with("(200 bytes)"), "{t}");
        assert_eq!(truncate_for_message("short"), "short");
    }

    #[test]
    fn property_random_components_validate_or_are_rejected_cleanly() {
        let mut rng = XorShift::new(0x5eed);
        for _ in 0..5_000 {
            let s = rng.string(12);
            match BucketId::parse(&s) {
                Ok(id) => {
                    assert_safe(&id);
                    assert_eq!(id.as_str(), s);
                }
                Err(e) => assert!(matches!(e, Error::InvalidInput(_))),
            }
        }
    }
}
