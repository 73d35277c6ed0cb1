//! Statistics of one data file ([`FileStats`]), as a committable carries them
//! ([`super::Committable::stats`]) from the vote to the table's log.
//!
//! The type is format-neutral: the Parquet encoder computes it from the footer it just wrote
//! (`crate::format`), a table format renders it (the Delta `stats` string). Serialized, it is
//! one object per file with one entry per leaf column, in column-path order:
//!
//! ```json
//! {"num_records":1000,"columns":[
//!   {"path":["geo","lat_e6"],"null_count":0,"min":-3,"max":51000000},
//!   {"path":["id"],"null_count":0,"min":1,"max":1000},
//!   {"path":["name"],"null_count":3,"min":"Ann"}]}
//! ```
//!
//! A member that is unknown is left out (`"max"` above: the longest name was too long to keep);
//! a column with nothing known has no entry.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A column by its names from the top-level field down (`["geo", "lat_e6"]`).
pub type ColumnPath = Vec<String>;

/// Statistics of one data file: its record count and, per leaf column, bounds and nulls.
///
/// Values are typed JSON, per leaf column path (from the top-level field down, through
/// structs): integers and floats as JSON numbers, booleans as JSON booleans, strings as JSON
/// strings, dates as `"YYYY-MM-DD"` strings, timestamps (with or without time zone, of any
/// unit) as integer **microseconds** since the epoch (a min rounded down, a max rounded up
/// when the unit is finer), decimals as JSON strings of the decimal text (`"-12.50"`: a JSON
/// number cannot carry 38 digits).
///
/// Every bound is a true bound of the file's values, or absent: a column whose chunks had no
/// statistics has no entry; a max that Parquet marks inexact is absent; float bounds are
/// absent unless the file holds no NaN and both are finite; a string min is cut to
/// [`FileStats::STRING_CHARS_MAX`] characters (a prefix is ≤ the value) and a longer string
/// max is absent. So a committable's statistics stay small whatever the data.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "FileStatsRepr", try_from = "FileStatsRepr")]
pub struct FileStats {
    /// Records in the file (the footer's `num_rows`).
    pub num_records: u64,
    /// Smallest value per leaf column.
    pub min_values: BTreeMap<ColumnPath, Value>,
    /// Largest value per leaf column.
    pub max_values: BTreeMap<ColumnPath, Value>,
    /// Nulls per leaf column.
    pub null_count: BTreeMap<ColumnPath, u64>,
}

impl FileStats {
    /// The longest string bound kept, in characters (Spark's `dataSkippingStringPrefixLength`
    /// default, which Delta tables use).
    pub const STRING_CHARS_MAX: usize = 32;

    /// Every column path that has any statistic, in order.
    pub fn columns(&self) -> BTreeSet<&ColumnPath> {
        self.min_values
            .keys()
            .chain(self.max_values.keys())
            .chain(self.null_count.keys())
            .collect()
    }
}

/// The serialized form: one entry per column, members absent when unknown.
// Unknown members are ignored, as everywhere in the protocol's records: a newer meaning comes
// with a newer format version, which older builds refuse.
#[derive(Clone, Serialize, Deserialize)]
struct FileStatsRepr {
    num_records: u64,
    #[serde(default)]
    columns: Vec<ColumnStatsRepr>,
}

#[derive(Clone, Serialize, Deserialize)]
struct ColumnStatsRepr {
    path: ColumnPath,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    null_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max: Option<Value>,
}

impl From<FileStats> for FileStatsRepr {
    fn from(s: FileStats) -> Self {
        let columns = s
            .columns()
            .into_iter()
            .map(|path| ColumnStatsRepr {
                path: path.clone(),
                null_count: s.null_count.get(path).copied(),
                min: s.min_values.get(path).cloned(),
                max: s.max_values.get(path).cloned(),
            })
            .collect();
        FileStatsRepr {
            num_records: s.num_records,
            columns,
        }
    }
}

impl TryFrom<FileStatsRepr> for FileStats {
    type Error = String;

    fn try_from(r: FileStatsRepr) -> Result<Self, String> {
        let mut s = FileStats {
            num_records: r.num_records,
            ..FileStats::default()
        };
        let mut seen = BTreeSet::new();
        for c in r.columns {
            if c.path.is_empty() || c.path.iter().any(String::is_empty) {
                return Err(format!(
                    "statistics of column path {:?}: empty name",
                    c.path
                ));
            }
            if !seen.insert(c.path.clone()) {
                return Err(format!("statistics of column path {:?} twice", c.path));
            }
            if let Some(n) = c.null_count {
                if n > r.num_records {
                    return Err(format!(
                        "column path {:?} has {n} nulls in {} records",
                        c.path, r.num_records
                    ));
                }
                s.null_count.insert(c.path.clone(), n);
            }
            // `"min": null` reads as absent.
            if let Some(v) = c.min {
                s.min_values.insert(c.path.clone(), v);
            }
            if let Some(v) = c.max {
                s.max_values.insert(c.path, v);
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(p: &str) -> ColumnPath {
        p.split('.').map(str::to_owned).collect()
    }

    fn sample() -> FileStats {
        let mut s = FileStats {
            num_records: 1000,
            ..FileStats::default()
        };
        s.min_values.insert(path("id"), json!(1));
        s.max_values.insert(path("id"), json!(1000));
        s.null_count.insert(path("id"), 0);
        s.min_values.insert(path("name"), json!("Ann"));
        s.null_count.insert(path("name"), 3);
        s.min_values.insert(path("geo.lat_e6"), json!(-3));
        s.max_values.insert(path("geo.lat_e6"), json!(51_000_000));
        s.null_count.insert(path("geo.lat_e6"), 0);
        s.min_values.insert(path("amount"), json!("-12.50"));
        s.max_values.insert(path("amount"), json!("1000.00"));
        s.null_count.insert(path("flag"), 1000);
        s
    }

    #[test]
    fn serialized_form_is_one_entry_per_column_in_path_order() {
        let text = serde_json::to_string(&sample()).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"num_records":1000,"columns":["#,
                r#"{"path":["amount"],"min":"-12.50","max":"1000.00"},"#,
                r#"{"path":["flag"],"null_count":1000},"#,
                r#"{"path":["geo","lat_e6"],"null_count":0,"min":-3,"max":51000000},"#,
                r#"{"path":["id"],"null_count":0,"min":1,"max":1000},"#,
                r#"{"path":["name"],"null_count":3,"min":"Ann"}]}"#
            )
        );
        let back: FileStats = serde_json::from_str(&text).unwrap();
        assert_eq!(back, sample());
        let empty = FileStats {
            num_records: 7,
            ..FileStats::default()
        };
        let text = serde_json::to_string(&empty).unwrap();
        assert_eq!(text, r#"{"num_records":7,"columns":[]}"#);
        assert_eq!(serde_json::from_str::<FileStats>(&text).unwrap(), empty);
        assert_eq!(
            serde_json::from_str::<FileStats>(r#"{"num_records":7}"#).unwrap(),
            empty
        );
    }

    #[test]
    fn damaged_statistics_are_refused() {
        for bad in [
            r#"{"columns":[]}"#,
            r#"{"num_records":-1,"columns":[]}"#,
            r#"{"num_records":1,"columns":[{"path":[]}]}"#,
            r#"{"num_records":1,"columns":[{"path":["a",""]}]}"#,
            r#"{"num_records":1,"columns":[{"path":["a"]},{"path":["a"],"min":1}]}"#,
            r#"{"num_records":1,"columns":[{"path":["a"],"null_count":2}]}"#,
            r#"{"num_records":1,"columns":[{"path":["a"],"null_count":"2"}]}"#,
            r#"{"num_records":1,"columns":{"a":{}}}"#,
        ] {
            assert!(serde_json::from_str::<FileStats>(bad).is_err(), "{bad}");
        }
    }
}
