//! Time buckets from processing time or a timestamp column (Flink's `DateTimeBucketAssigner`).

use std::collections::HashMap;
use std::fmt::Write as _;

use arrow::array::{Array, ArrowPrimitiveType, AsArray, PrimitiveArray};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::RecordBatch;
use chrono::format::{Fixed, Item, Numeric, StrftimeItems};
use chrono::{DateTime, NaiveDate, Utc};

use super::{check_row_count, split_by_group, truncate_for_message, BucketAssigner, BucketId};
use crate::{Error, Result};

/// Where the time of a row comes from.
#[derive(Debug, Clone)]
enum TimeSource {
    /// The `now` passed to [`BucketAssigner::assign`].
    ProcessingTime,
    /// A timestamp or date column.
    EventTime(String),
}

/// Time buckets (Flink's `DateTimeBucketAssigner`): the directory is a chrono strftime pattern
/// applied to processing time or to a timestamp column, in UTC.
///
/// The default pattern, [`DateTimeBucketAssigner::DEFAULT_FORMAT`] (`%Y-%m-%d--%H`, Flink's
/// default), gives one directory per hour such as `2024-05-01--13`. A pattern may contain `/` to
/// make nested directories: `%Y/%m/%d` gives `2024/05/01`.
///
/// With [`DateTimeBucketAssigner::processing_time`] a whole batch goes into the bucket of the
/// `now` passed to [`BucketAssigner::assign`], without copying. With
/// [`DateTimeBucketAssigner::event_time`] each row goes into the bucket of its own timestamp,
/// and all columns are kept.
///
/// ```
/// use filesink::bucket::{BucketAssigner, DateTimeBucketAssigner};
///
/// let daily = DateTimeBucketAssigner::event_time("created_at").with_format("%Y/%m/%d")?;
/// assert!(DateTimeBucketAssigner::processing_time().with_format("%Q").is_err());
/// # let _ = daily;
/// # Ok::<(), filesink::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DateTimeBucketAssigner {
    source: TimeSource,
    pattern: String,
    items: Vec<Item<'static>>,
    /// Rows whose times agree after flooring to this many seconds format the same; 0 when the
    /// pattern shows fractions of a second.
    granularity_secs: i64,
    null_bucket: BucketId,
}

/// Seconds in a day.
const DAY: i64 = 86_400;

impl DateTimeBucketAssigner {
    /// Flink's default pattern: one directory per hour, e.g. `2024-05-01--13`.
    pub const DEFAULT_FORMAT: &'static str = "%Y-%m-%d--%H";

    /// The bucket directory of rows whose event-time column is null, unless changed with
    /// [`DateTimeBucketAssigner::with_null_bucket`].
    pub const DEFAULT_NULL_BUCKET: &'static str = "null_time";

    fn with_source(source: TimeSource) -> Self {
        let (items, granularity_secs) = compile(Self::DEFAULT_FORMAT)
            .expect("the default time bucket format is a valid pattern");
        DateTimeBucketAssigner {
            source,
            pattern: Self::DEFAULT_FORMAT.to_owned(),
            items,
            granularity_secs,
            null_bucket: BucketId(Self::DEFAULT_NULL_BUCKET.to_owned()),
        }
    }

    /// Buckets by processing time: each batch goes whole into the bucket of the `now` given to
    /// [`BucketAssigner::assign`].
    pub fn processing_time() -> Self {
        Self::with_source(TimeSource::ProcessingTime)
    }

    /// Buckets each row by the time in `column`, in UTC.
    ///
    /// The column may be any Arrow `Timestamp` unit, with or without a time zone (the stored
    /// instant is used, so the directory is in UTC either way), `Date32` or `Date64`.
    /// [`BucketAssigner::assign`] errors with [`Error::InvalidInput`] if the column is missing
    /// or of another type, or a time is outside chrono's range. Rows with a null time go to
    /// [`DateTimeBucketAssigner::DEFAULT_NULL_BUCKET`] (see
    /// [`DateTimeBucketAssigner::with_null_bucket`]).
    pub fn event_time(column: impl Into<String>) -> Self {
        Self::with_source(TimeSource::EventTime(column.into()))
    }

    /// Sets the chrono strftime pattern of the bucket directory, e.g. `%Y-%m-%d` or `%Y/%m/%d`.
    ///
    /// Errors with [`Error::Config`] if chrono cannot parse the pattern, or if it formats to a
    /// directory path that [`BucketId`] rejects (an empty component as in `%Y//%m`, a leading
    /// `.` or `_` as in `_%Y`, a `\`, a name over 255 bytes, or nothing at all as in `""`).
    /// This is checked against a spread of sample times; the bucket of every real row is
    /// validated again at assign time.
    pub fn with_format(mut self, pattern: &str) -> Result<Self> {
        let (items, granularity_secs) = compile(pattern).map_err(Error::Config)?;
        for sample in sample_times() {
            let formatted = format_time(&items, sample)
                .map_err(|e| Error::Config(format!("time bucket format {pattern:?}: {e}")))?;
            parse_time_bucket(&formatted).map_err(|problem| {
                Error::Config(format!(
                    "time bucket format {pattern:?} gives the bucket {:?} for {sample}: {problem}",
                    truncate_for_message(&formatted)
                ))
            })?;
        }
        self.pattern = pattern.to_owned();
        self.items = items;
        self.granularity_secs = granularity_secs;
        Ok(self)
    }

    /// Sets the bucket for rows whose event-time column is null (default
    /// [`DateTimeBucketAssigner::DEFAULT_NULL_BUCKET`]). `""` is the base directory.
    ///
    /// Errors with [`Error::Config`] if `bucket` is not a valid [`BucketId`].
    pub fn with_null_bucket(mut self, bucket: &str) -> Result<Self> {
        self.null_bucket = BucketId::parse_inner(bucket).map_err(|problem| {
            Error::Config(format!(
                "null time bucket {:?}: {problem}",
                truncate_for_message(bucket)
            ))
        })?;
        Ok(self)
    }

    /// The strftime pattern in use.
    pub fn format(&self) -> &str {
        &self.pattern
    }

    /// The event-time column, or `None` for processing time.
    pub fn column(&self) -> Option<&str> {
        match &self.source {
            TimeSource::ProcessingTime => None,
            TimeSource::EventTime(c) => Some(c),
        }
    }

    /// The bucket of `time`.
    fn bucket_of(&self, time: DateTime<Utc>) -> std::result::Result<BucketId, String> {
        let formatted = format_time(&self.items, time)?;
        parse_time_bucket(&formatted).map_err(|problem| {
            format!(
                "time bucket format {:?} gives the bucket {:?} for {time}: {problem}",
                self.pattern,
                truncate_for_message(&formatted)
            )
        })
    }

    fn assign_event_time(
        &self,
        batch: &RecordBatch,
        column: &str,
    ) -> Result<Vec<(BucketId, RecordBatch)>> {
        let array = batch.column_by_name(column).ok_or_else(|| {
            Error::InvalidInput(format!(
                "time bucket column `{column}` is not in the batch schema"
            ))
        })?;
        let g = self.granularity_secs;
        let (group_of_row, times) = match array.data_type() {
            DataType::Timestamp(TimeUnit::Second, _) => {
                group_times(array.as_primitive::<TimestampSecondType>(), g, |v| (v, 0))
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => group_times(
                array.as_primitive::<TimestampMillisecondType>(),
                g,
                |v| split_subsecond(v, 1_000),
            ),
            DataType::Timestamp(TimeUnit::Microsecond, _) => group_times(
                array.as_primitive::<TimestampMicrosecondType>(),
                g,
                |v| split_subsecond(v, 1_000_000),
            ),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => group_times(
                array.as_primitive::<TimestampNanosecondType>(),
                g,
                |v| split_subsecond(v, 1_000_000_000),
            ),
            DataType::Date32 => group_times(array.as_primitive::<Date32Type>(), g, |v| {
                (i64::from(v) * DAY, 0)
            }),
            DataType::Date64 => group_times(array.as_primitive::<Date64Type>(), g, |v| {
                split_subsecond(v, 1_000)
            }),
            other => {
                return Err(Error::InvalidInput(format!(
                    "time bucket column `{column}` has type {other}, expected a timestamp, Date32 or Date64"
                )))
            }
        };

        let names = times
            .into_iter()
            .map(|t| match t {
                None => Ok(self.null_bucket.clone()),
                Some((secs, nanos)) => {
                    let time = DateTime::from_timestamp(secs, nanos).ok_or_else(|| {
                        Error::InvalidInput(format!(
                            "a time in column `{column}` is out of the supported range ({secs} seconds from the epoch)"
                        ))
                    })?;
                    self.bucket_of(time).map_err(Error::InvalidInput)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        split_by_group(batch, group_of_row, names)
    }
}

impl BucketAssigner for DateTimeBucketAssigner {
    /// Processing time: the whole batch, unchanged, into the bucket of `now`. Event time: each
    /// row into the bucket of its time, buckets in order of first appearance.
    fn assign(
        &self,
        batch: &RecordBatch,
        now: DateTime<Utc>,
    ) -> Result<Vec<(BucketId, RecordBatch)>> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(Vec::new());
        }
        check_row_count(rows)?;
        match &self.source {
            TimeSource::ProcessingTime => {
                let id = self.bucket_of(now).map_err(Error::InvalidInput)?;
                Ok(vec![(id, batch.clone())])
            }
            TimeSource::EventTime(column) => self.assign_event_time(batch, column),
        }
    }
}

/// `value` in units of `1/per_second` seconds as whole seconds and nanoseconds.
fn split_subsecond(value: i64, per_second: i64) -> Time {
    let secs = value.div_euclid(per_second);
    let sub = value.rem_euclid(per_second);
    // `per_second` divides 10^9 and `sub < per_second`, so this is below 10^9.
    (secs, (sub * (1_000_000_000 / per_second)) as u32)
}

/// A time as whole seconds from the epoch and nanoseconds within the second.
type Time = (i64, u32);

/// Groups the rows of `array` by their time floored to `granularity_secs` (0: exact).
///
/// Returns the group of every row and, for every group in order of first appearance, the
/// time of its first row, or `None` for the group of nulls.
fn group_times<T: ArrowPrimitiveType>(
    array: &PrimitiveArray<T>,
    granularity_secs: i64,
    to_time: impl Fn(T::Native) -> Time,
) -> (Vec<u32>, Vec<Option<Time>>) {
    let values = array.values();
    let nulls = array.logical_nulls();
    let mut group_of_row = Vec::with_capacity(values.len());
    let mut times = Vec::new();
    let mut groups: HashMap<Option<Time>, u32> = HashMap::new();
    let mut last: Option<(Option<Time>, u32)> = None;
    for (row, &value) in values.iter().enumerate() {
        let (time, key) = if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
            (None, None)
        } else {
            let (secs, nanos) = to_time(value);
            let key = if granularity_secs > 0 {
                (secs.div_euclid(granularity_secs), 0)
            } else {
                (secs, nanos)
            };
            (Some((secs, nanos)), Some(key))
        };
        let group = match last {
            // Event times usually arrive roughly in order: skip the hash lookup for runs.
            Some((prev, g)) if prev == key => g,
            _ => *groups.entry(key).or_insert_with(|| {
                times.push(time);
                (times.len() - 1) as u32
            }),
        };
        last = Some((key, group));
        group_of_row.push(group);
    }
    (group_of_row, times)
}

/// Validates a formatted time bucket. Unlike [`BucketId::parse`], the base directory is not
/// allowed: a pattern that formats to nothing is a mistake ([`super::BasePathBucketAssigner`]
/// does that on purpose).
fn parse_time_bucket(formatted: &str) -> std::result::Result<BucketId, String> {
    if formatted.is_empty() {
        return Err("an empty path, the base directory".to_owned());
    }
    BucketId::parse_inner(formatted)
}

/// Formats `time` with parsed strftime `items`.
fn format_time(
    items: &[Item<'static>],
    time: DateTime<Utc>,
) -> std::result::Result<String, String> {
    let mut out = String::new();
    write!(out, "{}", time.format_with_items(items.iter()))
        .map_err(|_| format!("chrono cannot format {time} with this pattern"))?;
    Ok(out)
}

/// Parses a strftime pattern and works out how coarse a time can be floored without changing
/// its formatted text.
pub(super) fn compile(pattern: &str) -> std::result::Result<(Vec<Item<'static>>, i64), String> {
    let items = StrftimeItems::new(pattern)
        .parse_to_owned()
        .map_err(|e| format!("invalid time bucket format {pattern:?}: {e}"))?;
    let mut granularity = DAY;
    for item in &items {
        let g = match item {
            Item::Error => return Err(format!("invalid time bucket format {pattern:?}")),
            Item::Literal(_) | Item::OwnedLiteral(_) | Item::Space(_) | Item::OwnedSpace(_) => DAY,
            Item::Numeric(numeric, _) => match numeric {
                Numeric::Year
                | Numeric::YearDiv100
                | Numeric::YearMod100
                | Numeric::IsoYear
                | Numeric::IsoYearDiv100
                | Numeric::IsoYearMod100
                | Numeric::Quarter
                | Numeric::Month
                | Numeric::Day
                | Numeric::WeekFromSun
                | Numeric::WeekFromMon
                | Numeric::IsoWeek
                | Numeric::NumDaysFromSun
                | Numeric::WeekdayFromMon
                | Numeric::Ordinal => DAY,
                Numeric::Hour | Numeric::Hour12 => 3_600,
                Numeric::Minute => 60,
                Numeric::Second | Numeric::Timestamp => 1,
                _ => 0,
            },
            Item::Fixed(fixed) => match fixed {
                Fixed::ShortMonthName
                | Fixed::LongMonthName
                | Fixed::ShortWeekdayName
                | Fixed::LongWeekdayName
                // Always UTC: the same for every time.
                | Fixed::TimezoneName
                | Fixed::TimezoneOffsetColon
                | Fixed::TimezoneOffsetDoubleColon
                | Fixed::TimezoneOffsetTripleColon
                | Fixed::TimezoneOffsetColonZ
                | Fixed::TimezoneOffset
                | Fixed::TimezoneOffsetZ => DAY,
                Fixed::LowerAmPm | Fixed::UpperAmPm => 3_600,
                Fixed::RFC2822 => 1,
                _ => 0,
            },
        };
        granularity = granularity.min(g);
    }
    Ok((items, granularity))
}

/// Times to try a pattern on: every month and weekday name, whole and fractional seconds,
/// single- and double-digit fields, and the ends of the supported range.
pub(super) fn sample_times() -> Vec<DateTime<Utc>> {
    let mut samples = vec![DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC];
    let mut at = |y: i32, m: u32, d: u32, h: u32, min: u32, s: u32, n: u32| {
        if let Some(t) =
            NaiveDate::from_ymd_opt(y, m, d).and_then(|d| d.and_hms_nano_opt(h, min, s, n))
        {
            samples.push(t.and_utc());
        }
    };
    at(1970, 1, 1, 0, 0, 0, 0);
    at(2024, 2, 29, 13, 45, 59, 123_456_789);
    at(1, 1, 1, 0, 0, 0, 0);
    at(-1, 12, 31, 23, 59, 59, 999_999_999);
    at(9999, 12, 31, 23, 59, 59, 999_999_999);
    at(10_000, 1, 1, 0, 0, 0, 0);
    for m in 1..=12 {
        at(
            2023,
            m,
            10 + m,
            m * 2 - 1,
            m * 4,
            m * 3,
            if m % 2 == 0 { 0 } else { 1_000 * m },
        );
    }
    for d in 1..=7 {
        at(2024, 9, d, d * 3, 0, 0, 0);
    }
    samples
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, Date32Array, Date64Array, Int64Array, StringArray, TimestampMicrosecondArray,
        TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray,
    };

    use super::super::test_util::{assert_safe, ids_by_bucket};
    use super::*;

    /// 2023-11-14T22:13:20Z.
    const T0: i64 = 1_700_000_000;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    fn with_ids(time: ArrayRef) -> RecordBatch {
        let n = time.len() as i64;
        RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())) as ArrayRef,
            ),
            ("t", time),
        ])
        .unwrap()
    }

    fn buckets(
        assigner: &DateTimeBucketAssigner,
        batch: &RecordBatch,
    ) -> std::collections::HashMap<String, Vec<i64>> {
        let out = assigner.assign(batch, at(0)).unwrap();
        let total: usize = out.iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(total, batch.num_rows());
        for (_, b) in &out {
            assert_eq!(b.schema(), batch.schema(), "event time keeps all columns");
        }
        ids_by_bucket(&out, "id")
    }

    #[test]
    fn processing_time_default_format() {
        let data: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        let batch = RecordBatch::try_from_iter([("s", data.clone())]).unwrap();
        let a = DateTimeBucketAssigner::processing_time();
        assert_eq!(a.format(), DateTimeBucketAssigner::DEFAULT_FORMAT);
        assert_eq!(a.column(), None);
        let out = a.assign(&batch, at(T0)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.as_str(), "2023-11-14--22");
        assert_eq!(out[0].1, batch);
        assert!(Arc::ptr_eq(out[0].1.column(0), &data));
        assert!(a.assign(&batch.slice(0, 0), at(T0)).unwrap().is_empty());
    }

    #[test]
    fn nested_pattern_makes_nested_dirs() {
        let a = DateTimeBucketAssigner::processing_time()
            .with_format("%Y/%m/%d")
            .unwrap();
        let batch = with_ids(Arc::new(Date32Array::from(vec![0])));
        let out = a.assign(&batch, at(T0)).unwrap();
        let id = &out[0].0;
        assert_eq!(id.as_str(), "2023/11/14");
        assert_eq!(id.components().collect::<Vec<_>>(), ["2023", "11", "14"]);
        assert_safe(id);
    }

    #[test]
    fn invalid_patterns_are_config_errors() {
        for bad in [
            "%Q", "%", "%Y-%", "%Y//%m", "/%Y", "%Y/", "", "_%Y", ".%Y", "%Y/..", "%Y\\%m",
            "%Y/%.f", "%Y\0",
        ] {
            let err = DateTimeBucketAssigner::processing_time()
                .with_format(bad)
                .unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{bad:?}: {err:?}");
        }
        let long = format!("%Y{}", "x".repeat(260));
        assert!(matches!(
            DateTimeBucketAssigner::processing_time()
                .with_format(&long)
                .unwrap_err(),
            Error::Config(_)
        ));
        for good in [
            "%Y-%m-%d",
            "%Y/%m/%d/%H",
            "dt=%F",
            "%s",
            "%Y%m%d%H%M%S%.3f",
            "%D",
        ] {
            DateTimeBucketAssigner::processing_time()
                .with_format(good)
                .unwrap_or_else(|e| panic!("{good:?}: {e}"));
        }
    }

    #[test]
    fn granularity_follows_finest_field() {
        let g = |p: &str| compile(p).unwrap().1;
        assert_eq!(g("%Y-%m-%d"), DAY);
        assert_eq!(g(DateTimeBucketAssigner::DEFAULT_FORMAT), 3_600);
        assert_eq!(g("%H:%M"), 60);
        assert_eq!(g("%s"), 1);
        assert_eq!(g("%S%.f"), 0);
        assert_eq!(g("static"), DAY);
    }

    #[test]
    fn event_time_timestamp_units() {
        // 2023-11-14T22:13:20, +1h, -1s (previous hour), +30min (same hour), null.
        let secs = [T0, T0 + 3_600, T0 - 1_000, T0 + 1_800];
        let expect = |got: std::collections::HashMap<String, Vec<i64>>| {
            assert_eq!(got.len(), 4, "{got:?}");
            assert_eq!(got["2023-11-14--22"], [0, 3]);
            assert_eq!(got["2023-11-14--23"], [1]);
            assert_eq!(got["2023-11-14--21"], [2]);
            assert_eq!(got["null_time"], [4]);
        };
        let with_null = |scale: i64| -> Vec<Option<i64>> {
            secs.iter()
                .map(|s| Some(s * scale + scale / 2))
                .chain([None])
                .collect()
        };
        let a = DateTimeBucketAssigner::event_time("t");
        assert_eq!(a.column(), Some("t"));
        for tz in [None, Some("+05:30"), Some("UTC")] {
            let arrays: Vec<ArrayRef> = vec![
                Arc::new(TimestampSecondArray::from(with_null(1)).with_timezone_opt(tz)),
                Arc::new(TimestampMillisecondArray::from(with_null(1_000)).with_timezone_opt(tz)),
                Arc::new(
                    TimestampMicrosecondArray::from(with_null(1_000_000)).with_timezone_opt(tz),
                ),
                Arc::new(
                    TimestampNanosecondArray::from(with_null(1_000_000_000)).with_timezone_opt(tz),
                ),
            ];
            for array in arrays {
                expect(buckets(&a, &with_ids(array)));
            }
        }
    }

    #[test]
    fn event_time_subsecond_pattern_and_negative_times() {
        let a = DateTimeBucketAssigner::event_time("t")
            .with_format("%Y%m%dT%H%M%S%.3f")
            .unwrap();
        let array = TimestampMillisecondArray::from(vec![-1, 0, 1, -1]);
        let got = buckets(&a, &with_ids(Arc::new(array)));
        assert_eq!(got["19691231T235959.999"], [0, 3]);
        assert_eq!(got["19700101T000000.000"], [1]);
        assert_eq!(got["19700101T000000.001"], [2]);
    }

    #[test]
    fn event_time_dates() {
        let a = DateTimeBucketAssigner::event_time("t")
            .with_format("%Y-%m-%d")
            .unwrap();
        let d32 = Date32Array::from(vec![Some(19_723), Some(0), None, Some(19_723), Some(-1)]);
        let got = buckets(&a, &with_ids(Arc::new(d32)));
        assert_eq!(got["2024-01-01"], [0, 3]);
        assert_eq!(got["1970-01-01"], [1]);
        assert_eq!(got["null_time"], [2]);
        assert_eq!(got["1969-12-31"], [4]);

        let d64 = Date64Array::from(vec![1_704_067_200_000, 0]);
        let got = buckets(&a, &with_ids(Arc::new(d64)));
        assert_eq!(got["2024-01-01"], [0]);
        assert_eq!(got["1970-01-01"], [1]);
    }

    #[test]
    fn coarse_pattern_merges_many_keys() {
        let a = DateTimeBucketAssigner::event_time("t")
            .with_format("year=%Y")
            .unwrap();
        let d32 = Date32Array::from(vec![19_723, 19_724, 0, 19_800, 1]);
        let got = buckets(&a, &with_ids(Arc::new(d32)));
        assert_eq!(got.len(), 2);
        assert_eq!(got["year=2024"], [0, 1, 3]);
        assert_eq!(got["year=1970"], [2, 4]);
    }

    #[test]
    fn custom_null_bucket() {
        let a = DateTimeBucketAssigner::event_time("t")
            .with_null_bucket("no/time")
            .unwrap();
        let got = buckets(
            &a,
            &with_ids(Arc::new(TimestampSecondArray::from(vec![None, Some(T0)]))),
        );
        assert_eq!(got["no/time"], [0]);
        assert_eq!(got["2023-11-14--22"], [1]);
        for bad in ["__null__", "..", "a//b", ".x"] {
            assert!(matches!(
                DateTimeBucketAssigner::event_time("t")
                    .with_null_bucket(bad)
                    .unwrap_err(),
                Error::Config(_)
            ));
        }
    }

    #[test]
    fn bad_event_time_columns_are_invalid_input() {
        let a = DateTimeBucketAssigner::event_time("t");
        let strings = with_ids(Arc::new(StringArray::from(vec!["2024-01-01"])));
        let err = a.assign(&strings, at(0)).unwrap_err();
        let Error::InvalidInput(msg) = err else {
            panic!("{err:?}")
        };
        assert!(msg.contains("`t`") && msg.contains("Utf8"), "{msg}");

        let missing = DateTimeBucketAssigner::event_time("nope");
        assert!(matches!(
            missing.assign(&strings, at(0)).unwrap_err(),
            Error::InvalidInput(_)
        ));

        // Out of chrono's range: an error, not a panic.
        let huge = with_ids(Arc::new(TimestampSecondArray::from(vec![
            i64::MAX,
            i64::MIN,
        ])));
        assert!(matches!(
            a.assign(&huge, at(0)).unwrap_err(),
            Error::InvalidInput(_)
        ));
        let far = with_ids(Arc::new(Date32Array::from(vec![i32::MAX])));
        assert!(matches!(
            a.assign(&far, at(0)).unwrap_err(),
            Error::InvalidInput(_)
        ));
    }

    #[test]
    fn sliced_event_time_batch() {
        let a = DateTimeBucketAssigner::event_time("t");
        let batch = with_ids(Arc::new(TimestampSecondArray::from(vec![
            Some(T0),
            None,
            Some(T0 + 3_600),
            Some(T0),
        ])));
        let got = buckets(&a, &batch.slice(1, 3));
        assert_eq!(got["null_time"], [1]);
        assert_eq!(got["2023-11-14--23"], [2]);
        assert_eq!(got["2023-11-14--22"], [3]);
    }
}
