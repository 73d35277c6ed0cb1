//! Hive-style time directories (`dt=2026-11-30/hour=13`) from a timestamp column, the time
//! part of a [`HivePartitioner`](super::HivePartitioner).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use arrow::array::{Array, ArrowPrimitiveType, AsArray, PrimitiveArray};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::RecordBatch;
use chrono::format::Item;
use chrono::{DateTime, FixedOffset};

use super::escape::{escape_path_component, HIVE_DEFAULT_PARTITION};
use super::time::{compile, sample_times};
use super::{truncate_for_message, MAX_COMPONENT_BYTES};
use crate::{Error, Result};

/// Seconds in a day.
const DAY: i64 = 86_400;

/// Time partition directories from one column: a pattern of `/`-separated `name=strftime`
/// components, each one Hive directory, in a fixed time zone (UTC unless
/// [`TimePartitioning::with_offset`] says otherwise).
///
/// `TimePartitioning::new("ts", "dt=%Y-%m-%d/hour=%H")` puts a row whose `ts` is
/// `2026-11-30T13:05:00Z` into `dt=2026-11-30/hour=13`. Every component must name its
/// directory (`name=`); the name is ASCII letters, digits, `_` and `-`, starting with a letter
/// or digit, and each name appears once. The value is a chrono strftime pattern, formatted in
/// the time zone and then escaped like every Hive value
/// ([`escape_path_component`]: `%H:%M` gives `13%3A05`), so no value can hold `/` or be `..`.
///
/// The column may be:
///
/// * an Arrow `Timestamp` of any unit, with or without a time zone: the stored instant (UTC)
///   shown in the partitioning's time zone, whatever zone the column type names;
/// * `Date32` or `Date64`: a calendar day, as midnight of that day in the time zone (a date is
///   never shifted to another day);
/// * `Utf8` or `LargeUtf8` holding RFC 3339 timestamps with an offset, such as
///   `2026-11-30T13:05:00Z` or `2026-11-30T14:05:00+01:00`, what JSON lines usually carry. A
///   string that is not one (no offset, another layout, empty) is an error of its row.
///
/// A null time gives [`HIVE_DEFAULT_PARTITION`] in every time directory
/// (`dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__`), as a null column value
/// does in [`HivePartitioner`](super::HivePartitioner). The column stays in the written data.
///
/// ```
/// use filesink::bucket::{parse_time_zone, TimePartitioning};
///
/// let t = TimePartitioning::new("ts", "dt=%Y-%m-%d/hour=%H")?
///     .with_offset(parse_time_zone("+01:00")?);
/// assert_eq!(t.names().collect::<Vec<_>>(), ["dt", "hour"]);
/// // Every component names its directory.
/// assert!(TimePartitioning::new("ts", "%Y-%m-%d").is_err());
/// # Ok::<(), filesink::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TimePartitioning {
    column: String,
    pattern: String,
    offset: FixedOffset,
    components: Vec<Component>,
    /// Local times that agree after flooring to this many seconds format the same; 0 when a
    /// pattern shows fractions of a second.
    granularity_secs: i64,
}

/// One `name=strftime` directory of the pattern.
#[derive(Debug, Clone)]
struct Component {
    name: String,
    items: Vec<Item<'static>>,
}

/// A row's time as local seconds from the epoch (UTC seconds plus the offset) and
/// nanoseconds within the second; `None` for a null.
type LocalTime = Option<(i64, u32)>;

/// The rows of a batch grouped by their time directories.
pub(super) struct TimeGroups {
    /// The group of every row.
    pub(super) group_of_row: Vec<u32>,
    /// Per group, its directory names (`name=value`, one per component), or why its rows
    /// cannot be placed; a row whose time is not a time has a group of its own.
    pub(super) groups: Vec<std::result::Result<Vec<String>, String>>,
    /// The first row of every group.
    pub(super) first_rows: Vec<usize>,
}

impl TimePartitioning {
    /// Partitions by the time in `column` with `pattern` (see the [type doc](Self)), in UTC.
    ///
    /// Errors with [`Error::Config`] if the column name is empty, or the pattern is empty,
    /// has an empty component (`dt=%F//hour=%H`), a component without `name=`, a name that
    /// is not a plain Hive name or appears twice, an empty value, a strftime error, or gives a
    /// directory name longer than 255 bytes.
    pub fn new(column: impl Into<String>, pattern: &str) -> Result<Self> {
        let column = column.into();
        let bad = |why: String| Error::Config(format!("time partition pattern {pattern:?}: {why}"));
        if column.is_empty() {
            return Err(Error::Config(
                "the time partition column is empty".to_owned(),
            ));
        }
        if pattern.is_empty() {
            return Err(bad("it is empty".to_owned()));
        }
        let mut components = Vec::new();
        let mut seen = HashSet::new();
        let mut granularity_secs = DAY;
        for part in pattern.split('/') {
            if part.is_empty() {
                return Err(bad(
                    "it has an empty component (a leading, trailing or doubled `/`)".to_owned(),
                ));
            }
            let Some((name, value)) = part.split_once('=') else {
                return Err(bad(format!(
                    "component {:?} does not name its directory: write it as `name=…`, e.g. \
                     `dt=%Y-%m-%d/hour=%H`",
                    truncate_for_message(part)
                )));
            };
            check_name(name).map_err(|why| {
                bad(format!(
                    "directory name {:?} {why}",
                    truncate_for_message(name)
                ))
            })?;
            if !seen.insert(name) {
                return Err(bad(format!("directory name `{name}` appears twice")));
            }
            if value.is_empty() {
                return Err(bad(format!(
                    "directory `{name}=` has no value: give a strftime pattern after `=`"
                )));
            }
            let (items, g) = compile(value).map_err(&bad)?;
            granularity_secs = granularity_secs.min(g);
            components.push(Component {
                name: name.to_owned(),
                items,
            });
        }
        let t = TimePartitioning {
            column,
            pattern: pattern.to_owned(),
            offset: FixedOffset::east_opt(0).expect("UTC is an offset"),
            components,
            granularity_secs,
        };
        // Every directory it makes must format and fit, across the range of times.
        for sample in sample_times() {
            let secs = sample.timestamp();
            let time = Some((secs, sample.timestamp_subsec_nanos()));
            t.names_of(time)
                .map_err(|why| bad(format!("at {sample}: {why}")))?;
        }
        Ok(t)
    }

    /// The time zone the directories are in: a fixed offset from UTC (default UTC).
    pub fn with_offset(mut self, offset: FixedOffset) -> Self {
        self.offset = offset;
        self
    }

    /// The time column.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// The pattern, as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The time zone.
    pub fn offset(&self) -> FixedOffset {
        self.offset
    }

    /// The directory names, outermost first (`dt`, `hour`).
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.components.iter().map(|c| c.name.as_str())
    }

    /// Whether arrow type `t` can be the time column.
    pub fn supports_type(t: &DataType) -> bool {
        matches!(
            t,
            DataType::Timestamp(_, _)
                | DataType::Date32
                | DataType::Date64
                | DataType::Utf8
                | DataType::LargeUtf8
        )
    }

    /// The directory names of a local time: `name=value` per component.
    fn names_of(&self, time: LocalTime) -> std::result::Result<Vec<String>, String> {
        let Some((local, nanos)) = time else {
            return Ok(self
                .components
                .iter()
                .map(|c| format!("{}={HIVE_DEFAULT_PARTITION}", c.name))
                .collect());
        };
        let out_of_range = || format!("{local} local seconds from the epoch is out of range");
        let utc = local
            .checked_sub(i64::from(self.offset.local_minus_utc()))
            .ok_or_else(out_of_range)?;
        // Both the instant and its local clock time must be in chrono's range.
        DateTime::from_timestamp(local, nanos).ok_or_else(out_of_range)?;
        let at = DateTime::from_timestamp(utc, nanos)
            .ok_or_else(out_of_range)?
            .with_timezone(&self.offset);
        let mut names = Vec::with_capacity(self.components.len());
        let mut text = String::new();
        for c in &self.components {
            text.clear();
            write!(text, "{}", at.format_with_items(c.items.iter()))
                .map_err(|_| format!("`{}` cannot format {at}", c.name))?;
            let value = escape_path_component(&text);
            let len = c.name.len() + 1 + value.len();
            if len > MAX_COMPONENT_BYTES {
                return Err(format!(
                    "`{}` makes a {len}-byte directory name for {at}, more than the \
                     {MAX_COMPONENT_BYTES}-byte limit",
                    c.name
                ));
            }
            names.push(format!("{}={value}", c.name));
        }
        Ok(names)
    }

    /// Groups the rows of `batch` by their time directories, formatting each group's names
    /// once. Errors with [`Error::InvalidInput`] only if the column is missing or of a type
    /// that holds no times; a row whose value is not a time gets a group of its own whose
    /// names are the reason.
    pub(super) fn groups(&self, batch: &RecordBatch) -> Result<TimeGroups> {
        let column = &self.column;
        let array = batch.column_by_name(column).ok_or_else(|| {
            Error::InvalidInput(format!(
                "time partition column `{column}` is not in the batch schema"
            ))
        })?;
        let off = i64::from(self.offset.local_minus_utc());
        let mut grouper = Grouper::new(self, array.len());
        match array.data_type() {
            DataType::Timestamp(TimeUnit::Second, _) => grouper
                .primitive(array.as_primitive::<TimestampSecondType>(), |v| {
                    instant(v, 1, off)
                }),
            DataType::Timestamp(TimeUnit::Millisecond, _) => grouper
                .primitive(array.as_primitive::<TimestampMillisecondType>(), |v| {
                    instant(v, 1_000, off)
                }),
            DataType::Timestamp(TimeUnit::Microsecond, _) => grouper
                .primitive(array.as_primitive::<TimestampMicrosecondType>(), |v| {
                    instant(v, 1_000_000, off)
                }),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => grouper
                .primitive(array.as_primitive::<TimestampNanosecondType>(), |v| {
                    instant(v, 1_000_000_000, off)
                }),
            // A date is a calendar day: midnight of it in the time zone, never shifted.
            DataType::Date32 => grouper.primitive(array.as_primitive::<Date32Type>(), |v| {
                Ok((i64::from(v) * DAY, 0))
            }),
            DataType::Date64 => grouper.primitive(array.as_primitive::<Date64Type>(), |v| {
                // Milliseconds of a date: the day it falls on.
                Ok((v.div_euclid(1_000 * DAY) * DAY, 0))
            }),
            DataType::Utf8 => {
                let a = array.as_string::<i32>();
                grouper.strings(a.len(), |i| a.is_null(i), |i| a.value(i), off)
            }
            DataType::LargeUtf8 => {
                let a = array.as_string::<i64>();
                grouper.strings(a.len(), |i| a.is_null(i), |i| a.value(i), off)
            }
            other => {
                return Err(Error::InvalidInput(format!(
                    "time partition column `{column}` has type {other}, expected a timestamp, \
                     Date32, Date64, or strings holding RFC 3339 timestamps"
                )))
            }
        }
        Ok(grouper.finish())
    }

    /// The rows of `batch` whose time cannot name its directories (a string that is not an
    /// RFC 3339 timestamp, a time out of range), with the reason of each, without a row
    /// number: a check that lets a caller set those rows aside before the batch reaches a
    /// writer, which would refuse the whole batch. Nothing when the column is missing or of
    /// another type: [`BucketAssigner::assign`](super::BucketAssigner::assign) reports that for
    /// the whole batch.
    pub fn row_errors(&self, batch: &RecordBatch) -> Vec<(usize, String)> {
        self.check_rows(batch).0
    }

    /// [`TimePartitioning::row_errors`], and the most bytes the directories of one of the
    /// other rows take (`dt=…/hour=…`, with their `/`; 0 if none).
    pub(crate) fn check_rows(&self, batch: &RecordBatch) -> (Vec<(usize, String)>, usize) {
        let Ok(g) = self.groups(batch) else {
            return (Vec::new(), 0);
        };
        let longest = g
            .groups
            .iter()
            .filter_map(|names| names.as_ref().ok())
            .map(|names| {
                names
                    .iter()
                    .map(|n| n.len() + 1)
                    .sum::<usize>()
                    .saturating_sub(1)
            })
            .max()
            .unwrap_or(0);
        if g.groups.iter().all(|n| n.is_ok()) {
            return (Vec::new(), longest);
        }
        let errors = g
            .group_of_row
            .iter()
            .enumerate()
            .filter_map(|(row, &group)| match &g.groups[group as usize] {
                Err(why) => Some((
                    row,
                    format!("time partition column `{}`: {why}", self.column),
                )),
                Ok(_) => None,
            })
            .collect();
        (errors, longest)
    }
}

/// The local time of `value` units of `1/per_second` seconds from the epoch, `off` seconds
/// east of UTC.
fn instant(value: i64, per_second: i64, off: i64) -> std::result::Result<(i64, u32), String> {
    let secs = value.div_euclid(per_second);
    let sub = value.rem_euclid(per_second);
    // `per_second` divides 10^9 and `sub < per_second`, so this is below 10^9.
    let nanos = (sub * (1_000_000_000 / per_second)) as u32;
    let local = secs
        .checked_add(off)
        .ok_or_else(|| format!("{value} is out of range"))?;
    Ok((local, nanos))
}

/// A directory name part is ASCII letters, digits, `_` and `-`, starting with a letter or a
/// digit: no escaping, never hidden, never `.` or `..`.
fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    let first = name.bytes().next().ok_or("is empty")?;
    if !first.is_ascii_alphanumeric() {
        return Err("must start with an ASCII letter or digit");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err("may hold only ASCII letters, digits, `_` and `-`");
    }
    if name.len() + 1 >= MAX_COMPONENT_BYTES {
        return Err("is too long");
    }
    Ok(())
}

/// The grouping key of a row: its local time floored to the granularity, the null group, or
/// a row of its own (a value that is not a time).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Time(i64, u32),
    Null,
    Bad(usize),
}

/// Builds [`TimeGroups`] row by row.
struct Grouper<'a> {
    time: &'a TimePartitioning,
    keys: HashMap<Key, u32, ahash::RandomState>,
    last: Option<(Key, u32)>,
    out: TimeGroups,
}

impl<'a> Grouper<'a> {
    fn new(time: &'a TimePartitioning, rows: usize) -> Self {
        Grouper {
            time,
            keys: HashMap::with_hasher(ahash::RandomState::new()),
            last: None,
            out: TimeGroups {
                group_of_row: Vec::with_capacity(rows),
                groups: Vec::new(),
                first_rows: Vec::new(),
            },
        }
    }

    /// Adds row `row`: its local time, or why it has none.
    fn push(&mut self, row: usize, time: std::result::Result<LocalTime, String>) {
        let g = self.time.granularity_secs;
        let key = match &time {
            Ok(None) => Key::Null,
            Ok(Some((secs, _))) if g > 0 => Key::Time(secs.div_euclid(g), 0),
            Ok(Some((secs, nanos))) => Key::Time(*secs, *nanos),
            Err(_) => Key::Bad(row),
        };
        let group = match self.last {
            // Times usually arrive roughly in order: skip the hash lookup for runs.
            Some((prev, group)) if prev == key => group,
            _ => {
                let next = self.out.groups.len() as u32;
                let group = *self.keys.entry(key).or_insert(next);
                if group == next {
                    self.out
                        .groups
                        .push(time.and_then(|t| self.time.names_of(t)));
                    self.out.first_rows.push(row);
                }
                group
            }
        };
        self.last = Some((key, group));
        self.out.group_of_row.push(group);
    }

    fn primitive<T: ArrowPrimitiveType>(
        &mut self,
        array: &PrimitiveArray<T>,
        local: impl Fn(T::Native) -> std::result::Result<(i64, u32), String>,
    ) {
        let nulls = array.logical_nulls();
        for (row, &v) in array.values().iter().enumerate() {
            let time = if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                Ok(None)
            } else {
                local(v).map(Some)
            };
            self.push(row, time);
        }
    }

    fn strings<'s>(
        &mut self,
        rows: usize,
        is_null: impl Fn(usize) -> bool,
        value: impl Fn(usize) -> &'s str,
        off: i64,
    ) {
        for row in 0..rows {
            let time = if is_null(row) {
                Ok(None)
            } else {
                parse_rfc3339(value(row), off).map(Some)
            };
            self.push(row, time);
        }
    }

    fn finish(self) -> TimeGroups {
        self.out
    }
}

/// The local time of an RFC 3339 timestamp string, `off` seconds east of UTC.
fn parse_rfc3339(s: &str, off: i64) -> std::result::Result<(i64, u32), String> {
    let t = DateTime::parse_from_rfc3339(s).map_err(|_| {
        format!(
            "{:?} is not an RFC 3339 timestamp with an offset, such as 2026-11-30T13:05:00Z \
             or 2026-11-30T14:05:00+01:00",
            truncate_for_message(s)
        )
    })?;
    let local = t
        .timestamp()
        .checked_add(off)
        .ok_or_else(|| format!("{:?} is out of range", truncate_for_message(s)))?;
    Ok((local, t.timestamp_subsec_nanos()))
}

/// Parses a time zone for time partitioning: `UTC` (or `Z`), or a fixed offset `+HH:MM` or
/// `-HH:MM` from UTC (hours 0 to 23). Errors with [`Error::Config`] otherwise; named zones
/// such as `Europe/Berlin` are not supported (their offset changes over the year).
pub fn parse_time_zone(s: &str) -> Result<FixedOffset> {
    let bad = || {
        Error::Config(format!(
            "time zone {:?}: expected UTC, +HH:MM or -HH:MM (a fixed offset from UTC)",
            truncate_for_message(s)
        ))
    };
    if s.eq_ignore_ascii_case("utc") || s == "Z" {
        return Ok(FixedOffset::east_opt(0).expect("UTC is an offset"));
    }
    let b = s.as_bytes();
    if b.len() != 6 || b[3] != b':' {
        return Err(bad());
    }
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return Err(bad()),
    };
    let two = |i: usize| -> Option<i32> {
        let (h, l) = (b[i], b[i + 1]);
        (h.is_ascii_digit() && l.is_ascii_digit())
            .then(|| i32::from(h - b'0') * 10 + i32::from(l - b'0'))
    };
    let (hours, minutes) = (two(1).ok_or_else(bad)?, two(4).ok_or_else(bad)?);
    if hours > 23 || minutes > 59 {
        return Err(bad());
    }
    FixedOffset::east_opt(sign * (hours * 3_600 + minutes * 60)).ok_or_else(bad)
}

/// The canonical name of an offset: `UTC`, or `+HH:MM` (`+HH:MM:SS` with seconds).
pub fn time_zone_name(offset: FixedOffset) -> String {
    let secs = offset.local_minus_utc();
    if secs == 0 {
        return "UTC".to_owned();
    }
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    let (h, m, s) = (a / 3_600, a / 60 % 60, a % 60);
    if s == 0 {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, Date32Array, Date64Array, Int64Array, LargeStringArray, StringArray,
        TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
        TimestampSecondArray,
    };
    use chrono::Utc;

    use super::super::test_util::{assert_safe, ids_by_bucket, XorShift};
    use super::super::{BucketAssigner, HivePartitioner};
    use super::*;

    /// 2026-11-30T13:05:00Z.
    const T: i64 = 1_796_043_900;

    fn tz(s: &str) -> FixedOffset {
        parse_time_zone(s).unwrap()
    }

    fn with_ids(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let n = cols[0].1.len() as i64;
        let mut all = vec![(
            "id",
            Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())) as ArrayRef,
        )];
        all.extend(cols);
        RecordBatch::try_from_iter(all).unwrap()
    }

    fn assign(p: &HivePartitioner, batch: &RecordBatch) -> HashMap<String, Vec<i64>> {
        let out = p.assign(batch, Utc::now()).unwrap();
        let total: usize = out.iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(total, batch.num_rows());
        ids_by_bucket(&out, "id")
    }

    fn by_time(pattern: &str, zone: &str) -> HivePartitioner {
        HivePartitioner::by_time(
            TimePartitioning::new("t", pattern)
                .unwrap()
                .with_offset(tz(zone)),
        )
    }

    #[test]
    fn hostile_or_malformed_patterns_are_config_errors() {
        let long_name = format!("{}=%Y", "n".repeat(255));
        let long_value = format!("dt=%Y{}", "x".repeat(260));
        let escaped_long = format!("dt=%Y{}", ":".repeat(90)); // 270 bytes escaped
        for bad in [
            "",
            "%Y",
            "dt=%Y/%m",
            "dt=%Y//hour=%H",
            "/dt=%Y",
            "dt=%Y/",
            "/",
            "dt=",
            "=%Y",
            "..=%Y",
            ".=%Y",
            ".dt=%Y",
            "_dt=%Y",
            "-dt=%Y",
            "d t=%Y",
            "d%t=%Y",
            "d\0t=%Y",
            "d\\t=%Y",
            "dé=%Y",
            "dt=%Y/dt=%m",
            "dt=%Q",
            "dt=%",
            "dt=%Y-%",
            &long_name,
            &long_value,
            &escaped_long,
        ] {
            let err = TimePartitioning::new("t", bad).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{bad:?}: {err:?}");
        }
        let err = TimePartitioning::new("t", "%Y-%m-%d")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("name=") && err.contains("dt=%Y-%m-%d/hour=%H"),
            "{err}"
        );
        assert!(TimePartitioning::new("", "dt=%Y").is_err());

        let t = TimePartitioning::new("t", "dt=%Y-%m-%d/hour=%H").unwrap();
        assert_eq!(t.names().collect::<Vec<_>>(), ["dt", "hour"]);
        assert_eq!((t.column(), t.pattern()), ("t", "dt=%Y-%m-%d/hour=%H"));
        assert_eq!(t.offset(), tz("UTC"));
        // A time directory cannot share its name with a partition column.
        let err = HivePartitioner::new(["dt"])
            .unwrap()
            .with_time(t)
            .unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err:?}");
    }

    #[test]
    fn time_zones_parse_and_print() {
        for (s, secs, name) in [
            ("UTC", 0, "UTC"),
            ("utc", 0, "UTC"),
            ("Z", 0, "UTC"),
            ("+00:00", 0, "UTC"),
            ("+01:00", 3_600, "+01:00"),
            ("-05:30", -19_800, "-05:30"),
            ("+23:59", 86_340, "+23:59"),
            ("-23:59", -86_340, "-23:59"),
        ] {
            let o = tz(s);
            assert_eq!(o.local_minus_utc(), secs, "{s}");
            assert_eq!(time_zone_name(o), name);
        }
        for bad in [
            "",
            "+1:00",
            "+24:00",
            "+01:60",
            "01:00",
            "+0100",
            "+01:00:00",
            "Europe/Berlin",
            "+aa:bb",
            "+01;00",
            "−01:00",
        ] {
            assert!(
                matches!(parse_time_zone(bad), Err(Error::Config(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            time_zone_name(FixedOffset::east_opt(3_661).unwrap()),
            "+01:01:01"
        );
    }

    #[test]
    fn every_timestamp_unit_and_time_zone() {
        // 13:05Z, 23:30Z (the next day east of UTC), 00:30Z (the day before west of UTC), null.
        let secs = [T, T + 37_500, T + 41_100];
        let with_null = |scale: i64| -> Vec<Option<i64>> {
            secs.iter()
                .map(|s| Some(s * scale + scale / 3))
                .chain([None])
                .collect()
        };
        for (zone, expect) in [
            (
                "UTC",
                [
                    "dt=2026-11-30/hour=13",
                    "dt=2026-11-30/hour=23",
                    "dt=2026-12-01/hour=00",
                ],
            ),
            (
                "+01:00",
                [
                    "dt=2026-11-30/hour=14",
                    "dt=2026-12-01/hour=00",
                    "dt=2026-12-01/hour=01",
                ],
            ),
            (
                "-05:30",
                [
                    "dt=2026-11-30/hour=07",
                    "dt=2026-11-30/hour=18",
                    "dt=2026-11-30/hour=19",
                ],
            ),
        ] {
            let p = by_time("dt=%Y-%m-%d/hour=%H", zone);
            for col_tz in [None, Some("+05:30"), Some("UTC")] {
                let arrays: Vec<ArrayRef> = vec![
                    Arc::new(TimestampSecondArray::from(with_null(1)).with_timezone_opt(col_tz)),
                    Arc::new(
                        TimestampMillisecondArray::from(with_null(1_000)).with_timezone_opt(col_tz),
                    ),
                    Arc::new(
                        TimestampMicrosecondArray::from(with_null(1_000_000))
                            .with_timezone_opt(col_tz),
                    ),
                    Arc::new(
                        TimestampNanosecondArray::from(with_null(1_000_000_000))
                            .with_timezone_opt(col_tz),
                    ),
                ];
                for array in arrays {
                    let got = assign(&p, &with_ids(vec![("t", array)]));
                    assert_eq!(got.len(), 4, "{zone}: {got:?}");
                    for (i, dir) in expect.iter().enumerate() {
                        assert_eq!(got[*dir], [i as i64], "{zone} {dir}");
                    }
                    assert_eq!(
                        got["dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__"],
                        [3]
                    );
                }
            }
        }
    }

    #[test]
    fn rfc3339_strings_with_offsets() {
        let values = vec![
            Some("2026-11-30T13:05:00Z"),
            Some("2026-11-30T14:05:00+01:00"),
            Some("2026-11-30T08:59:59.999999999-04:00"),
            Some("2026-12-01T00:30:00+02:00"),
            None,
        ];
        let p = by_time("dt=%Y-%m-%d/hour=%H", "UTC");
        for array in [
            Arc::new(StringArray::from(values.clone())) as ArrayRef,
            Arc::new(LargeStringArray::from(values.clone())) as ArrayRef,
        ] {
            let batch = with_ids(vec![("t", array)]);
            let got = assign(&p, &batch);
            assert_eq!(got["dt=2026-11-30/hour=13"], [0, 1]);
            assert_eq!(got["dt=2026-11-30/hour=12"], [2]);
            assert_eq!(got["dt=2026-11-30/hour=22"], [3]);
            assert_eq!(
                got["dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__"],
                [4]
            );
            // The time column stays in the data.
            let out = p.assign(&batch, Utc::now()).unwrap();
            assert!(out.iter().all(|(_, b)| b.schema() == batch.schema()));
        }
    }

    #[test]
    fn values_that_are_not_times_are_errors_of_their_rows() {
        let p = by_time("dt=%Y-%m-%d", "UTC");
        let bad = [
            "garbage",
            "",
            "2026-11-30",
            "2026-11-30T13:05:00",
            "2026-11-30 13:05:00",
            "2026-13-01T00:00:00Z",
            "../../etc",
            "2026-11-30T13:05:00Z/..",
            "\0",
        ];
        let mut values: Vec<Option<&str>> = vec![Some("2026-11-30T13:05:00Z")];
        values.extend(bad.iter().map(|s| Some(*s)));
        values.push(Some("2026-11-30T23:05:00Z"));
        let batch = with_ids(vec![("t", Arc::new(StringArray::from(values)) as ArrayRef)]);
        let time = p.time().unwrap();
        let errors = time.row_errors(&batch);
        let rows: Vec<usize> = errors.iter().map(|(r, _)| *r).collect();
        assert_eq!(rows, (1..=bad.len()).collect::<Vec<_>>());
        assert!(
            errors[0].1.contains("`t`") && errors[0].1.contains("RFC 3339"),
            "{errors:?}"
        );
        let err = p.assign(&batch, Utc::now()).unwrap_err();
        let Error::InvalidInput(msg) = err else {
            panic!("{err:?}")
        };
        assert!(msg.starts_with("row 1: "), "{msg}");
        // Without the bad rows, the batch is fine.
        assert!(time.row_errors(&batch.slice(0, 1)).is_empty());

        // Times beyond chrono's range: errors, not panics.
        let huge = with_ids(vec![(
            "t",
            Arc::new(TimestampSecondArray::from(vec![i64::MAX, i64::MIN, T])) as ArrayRef,
        )]);
        let p = by_time("dt=%Y-%m-%d", "-23:59");
        let rows: Vec<usize> = p
            .time()
            .unwrap()
            .row_errors(&huge)
            .iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(rows, [0, 1]);
        assert!(p.assign(&huge, Utc::now()).is_err());
        let far = with_ids(vec![(
            "t",
            Arc::new(Date32Array::from(vec![i32::MAX, i32::MIN])) as ArrayRef,
        )]);
        assert_eq!(p.time().unwrap().row_errors(&far).len(), 2);

        // A column of another type, or no column: the whole batch.
        let ints = with_ids(vec![("t", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        let msg = p.assign(&ints, Utc::now()).unwrap_err().to_string();
        assert!(msg.contains("`t`") && msg.contains("Int64"), "{msg}");
        assert!(p.time().unwrap().row_errors(&ints).is_empty());
        let other = by_time("dt=%Y", "UTC");
        let none = with_ids(vec![("x", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        assert!(matches!(
            other.assign(&none, Utc::now()),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn dates_are_days_never_shifted() {
        // 2024-01-01, 1970-01-01, null, 1969-12-31.
        let d32 = Date32Array::from(vec![Some(19_723), Some(0), None, Some(-1)]);
        let d64 = Date64Array::from(vec![
            Some(1_704_067_200_000),
            Some(0),
            None,
            Some(-86_400_000),
        ]);
        for zone in ["UTC", "-05:00", "+09:00"] {
            let p = by_time("day=%Y-%m-%d", zone);
            for array in [Arc::new(d32.clone()) as ArrayRef, Arc::new(d64.clone())] {
                let got = assign(&p, &with_ids(vec![("t", array)]));
                assert_eq!(got["day=2024-01-01"], [0], "{zone}");
                assert_eq!(got["day=1970-01-01"], [1]);
                assert_eq!(got["day=__HIVE_DEFAULT_PARTITION__"], [2]);
                assert_eq!(got["day=1969-12-31"], [3]);
            }
        }
    }

    #[test]
    fn values_are_escaped_like_hive_values() {
        let batch = with_ids(vec![(
            "t",
            Arc::new(TimestampSecondArray::from(vec![T])) as ArrayRef,
        )]);
        for (pattern, dir) in [
            ("t=%H:%M", "t=13%3A05"),
            ("d=%D", "d=11%2F30%2F26"),
            ("z=%Y%z", "z=2026+0000"),
            ("n=..", "n=.."),
            ("y=%Y/m=%m/d=%d", "y=2026/m=11/d=30"),
            ("ts=%s", "ts=1796043900"),
            ("w=%a%n", "w=Mon%0A"),
        ] {
            let p = by_time(pattern, "UTC");
            let out = p.assign(&batch, Utc::now()).unwrap();
            assert_eq!(out[0].0.as_str(), dir, "{pattern}");
            assert_safe(&out[0].0);
        }
    }

    #[test]
    fn column_directories_come_first_and_leave_the_data() {
        let batch = with_ids(vec![
            (
                "country",
                Arc::new(StringArray::from(vec!["DE", "FR", "DE", "DE", "../x"])) as ArrayRef,
            ),
            (
                "t",
                Arc::new(TimestampSecondArray::from(vec![T, T, T + 3_600, T, T])) as ArrayRef,
            ),
        ]);
        let p = HivePartitioner::new(["country"])
            .unwrap()
            .with_time(TimePartitioning::new("t", "dt=%Y-%m-%d/hour=%H").unwrap())
            .unwrap();
        let out = p.assign(&batch, Utc::now()).unwrap();
        for (_, b) in &out {
            let names: Vec<_> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(names, ["id", "t"]);
        }
        let got = ids_by_bucket(&out, "id");
        assert_eq!(got.len(), 4);
        assert_eq!(got["country=DE/dt=2026-11-30/hour=13"], [0, 3]);
        assert_eq!(got["country=DE/dt=2026-11-30/hour=14"], [2]);
        assert_eq!(got["country=FR/dt=2026-11-30/hour=13"], [1]);
        assert_eq!(got["country=..%2Fx/dt=2026-11-30/hour=13"], [4]);
        // In order of first appearance.
        assert_eq!(out[0].0.as_str(), "country=DE/dt=2026-11-30/hour=13");
    }

    #[test]
    fn one_bucket_is_not_copied() {
        let t: ArrayRef = Arc::new(TimestampSecondArray::from(vec![T, T + 1, T + 2]));
        let batch = with_ids(vec![("t", t.clone())]);
        let out = by_time("dt=%Y-%m-%d", "UTC")
            .assign(&batch, Utc::now())
            .unwrap();
        assert_eq!(out.len(), 1);
        assert!(Arc::ptr_eq(out[0].1.column(1), &t));
        assert!(by_time("dt=%Y", "UTC")
            .assign(&batch.slice(0, 0), Utc::now())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn property_random_strings_and_times_never_panic_and_stay_inside() {
        let mut rng = XorShift::new(0x7173);
        let p = by_time("dt=%Y-%m-%d/m=%M", "+05:45");
        for _ in 0..30 {
            let n = 1 + rng.below(60) as usize;
            let strings: Vec<Option<String>> = (0..n)
                .map(|_| match rng.below(4) {
                    0 => None,
                    1 => Some(rng.string(30)),
                    _ => {
                        let secs = (rng.next_u64() % 8_000_000_000) as i64 - 2_000_000_000;
                        DateTime::from_timestamp(secs, 0).map(|t| t.to_rfc3339())
                    }
                })
                .collect();
            let secs: Vec<i64> = (0..n).map(|_| rng.next_u64() as i64).collect();
            for array in [
                Arc::new(StringArray::from(strings.clone())) as ArrayRef,
                Arc::new(TimestampNanosecondArray::from(secs.clone())),
                Arc::new(TimestampSecondArray::from(secs.clone())),
            ] {
                let batch = with_ids(vec![("t", array)]);
                let errors = p.time().unwrap().row_errors(&batch);
                match p.assign(&batch, Utc::now()) {
                    Ok(out) => {
                        assert!(errors.is_empty());
                        ids_by_bucket(&out, "id");
                    }
                    Err(e) => {
                        assert!(matches!(e, Error::InvalidInput(_)));
                        assert!(!errors.is_empty());
                        // Without the rows it names, the batch is placed.
                        let keep: Vec<bool> = (0..n)
                            .map(|r| !errors.iter().any(|(row, _)| *row == r))
                            .collect();
                        let kept = arrow::compute::filter_record_batch(
                            &batch,
                            &arrow::array::BooleanArray::from(keep),
                        )
                        .unwrap();
                        let out = p.assign(&kept, Utc::now()).unwrap();
                        ids_by_bucket(&out, "id");
                    }
                }
            }
        }
    }
}
