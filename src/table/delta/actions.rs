//! The Delta log actions filesink reads and writes (§Actions), and one log entry
//! (`_delta_log/<version>.json`: one action per line, §Delta Log Entries).
//!
//! **Tolerant reading** (§Protocol Evolution: unrecognized actions and fields must be ignored):
//! an action whose name we do not know (`cdc`, `checkpointMetadata`, a future one) is kept as
//! it was, and so is every field we do not know inside the actions we do (`extra`); the actions
//! we act on are parsed strictly, and a malformed one is [`Error::Corrupt`] naming the entry
//! and the line. Rendering an entry that was read writes those unknown parts back unchanged.
//!
//! **Our entries** are rendered from an [`Entry`], whose fields fix the order of the lines:
//! `commitInfo` first (required with In-Commit Timestamps, §In-Commit Timestamps), then
//! `protocol` and `metaData` (only when creating the table), `txn`, `domainMetadata`, `remove`
//! and `add` (design section 3).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// Unknown fields of an action, kept so rendering what was read loses nothing.
pub(crate) type Extra = Map<String, Value>;

/// `protocol` (§Protocol Evolution): the versions and features a client must implement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Protocol {
    /// Reader version needed to read the table.
    pub(crate) min_reader_version: i32,
    /// Writer version needed to write the table.
    pub(crate) min_writer_version: i32,
    /// Reader features (reader version 3 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reader_features: Option<Vec<String>>,
    /// Writer features (writer version 7 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) writer_features: Option<Vec<String>>,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

/// `metaData.format` (§Format Specification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Format {
    /// The encoding of the data files; filesink writes and accepts only `parquet`.
    pub(crate) provider: String,
    /// Options of the encoding.
    #[serde(default)]
    pub(crate) options: BTreeMap<String, Option<String>>,
}

impl Format {
    /// `{"provider":"parquet","options":{}}`.
    pub(crate) fn parquet() -> Self {
        Format {
            provider: "parquet".to_owned(),
            options: BTreeMap::new(),
        }
    }
}

/// `metaData` (§Change Metadata): the table's identity, schema, partitioning and properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Metadata {
    /// The table's unique id (a UUID).
    pub(crate) id: String,
    /// A user-given name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// A user-given description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// How the data files are encoded.
    pub(crate) format: Format,
    /// The schema as JSON text (`schema::StructType`).
    pub(crate) schema_string: String,
    /// The partition columns, outermost first.
    #[serde(default)]
    pub(crate) partition_columns: Vec<String>,
    /// Table properties (`delta.appendOnly`, …).
    #[serde(default)]
    pub(crate) configuration: BTreeMap<String, String>,
    /// When this metadata was made, in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created_time: Option<i64>,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

/// `txn` (§Transaction Identifiers): how far an application has written, atomically with its
/// data. filesink's appId is `filesink-<sink id>-<job>`, its version the checkpoint id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Txn {
    /// The application.
    pub(crate) app_id: String,
    /// The application's version of this commit.
    pub(crate) version: i64,
    /// When, in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_updated: Option<i64>,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

/// A partition value: `None` is a null partition value.
pub(crate) type PartitionValues = BTreeMap<String, Option<String>>;

/// `add` (§Add File and Remove File): a data file that is part of the table from this version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Add {
    /// The file, relative to the table root or absolute, as a URI (`stats::encode_path`).
    pub(crate) path: String,
    /// The file's partition values, by partition column.
    pub(crate) partition_values: PartitionValues,
    /// Its size in bytes.
    pub(crate) size: i64,
    /// When it was made, in milliseconds since the epoch.
    pub(crate) modification_time: i64,
    /// `false` when it only rearranges data already in the table (compaction).
    pub(crate) data_change: bool,
    /// Per-file statistics as a JSON string (`stats::render`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<String>,
    /// Tags of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tags: Option<BTreeMap<String, Option<String>>>,
    /// A deletion vector (never written by filesink; a table that has them is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deletion_vector: Option<Value>,
    /// Row tracking (never written by filesink).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) base_row_id: Option<i64>,
    /// Row tracking (never written by filesink).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) default_row_commit_version: Option<i64>,
    /// Clustering (never written by filesink).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clustering_provider: Option<String>,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

impl Add {
    /// An `add` of the kind filesink writes: no tags, deletion vector or row tracking.
    pub(crate) fn new(
        path: String,
        partition_values: PartitionValues,
        size: i64,
        modification_time: i64,
        data_change: bool,
        stats: Option<String>,
    ) -> Self {
        Add {
            path,
            partition_values,
            size,
            modification_time,
            data_change,
            stats,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
            extra: Extra::new(),
        }
    }
}

/// `remove` (§Add File and Remove File): a file no longer in the table from this version on
/// (a tombstone until vacuum).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Remove {
    /// The file, as in its `add`.
    pub(crate) path: String,
    /// When it was removed, in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deletion_timestamp: Option<i64>,
    /// `false` when the same records are added back in the same version (compaction).
    pub(crate) data_change: bool,
    /// Whether `partitionValues` and `size` are present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) extended_file_metadata: Option<bool>,
    /// The file's partition values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) partition_values: Option<PartitionValues>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<i64>,
    /// Its statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<String>,
    /// Its tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tags: Option<BTreeMap<String, Option<String>>>,
    /// A deletion vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deletion_vector: Option<Value>,
    /// Row tracking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) base_row_id: Option<i64>,
    /// Row tracking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) default_row_commit_version: Option<i64>,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

/// `domainMetadata` (§Domain Metadata): preserved, never written by filesink on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DomainMetadata {
    /// The domain.
    pub(crate) domain: String,
    /// Its configuration, a string.
    pub(crate) configuration: String,
    /// Whether this is a tombstone of the domain.
    pub(crate) removed: bool,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

/// `commitInfo.filesink`: which checkpoint of which job wrote the entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FilesinkInfo {
    /// The job.
    pub(crate) job: String,
    /// The checkpoint id.
    pub(crate) checkpoint: u64,
}

/// `commitInfo` (§Commit Provenance Information): free-form; these are the fields filesink
/// writes, everything else another engine wrote is kept in `extra`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommitInfo {
    /// When the commit was attempted, in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timestamp: Option<i64>,
    /// With In-Commit Timestamps: max(now, previous + 1), in milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) in_commit_timestamp: Option<i64>,
    /// `STREAMING UPDATE`, `OPTIMIZE`, `WRITE`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) operation: Option<String>,
    /// Parameters of the operation (Spark writes strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) operation_parameters: Option<Map<String, Value>>,
    /// The version the commit was based on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) read_version: Option<i64>,
    /// `Serializable`, `SnapshotIsolation`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) isolation_level: Option<String>,
    /// Whether the commit only added files without reading the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) is_blind_append: Option<bool>,
    /// The writer, `filesink/<version>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine_info: Option<String>,
    /// A unique id of the commit attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) txn_id: Option<String>,
    /// filesink's own provenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) filesink: Option<FilesinkInfo>,
    /// Fields we do not know.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

/// One log entry (one version), split by action. Rendering writes the actions in the order of
/// the fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Entry {
    /// `commitInfo`, first.
    pub(crate) commit_info: Option<CommitInfo>,
    /// `protocol`, at most one.
    pub(crate) protocol: Option<Protocol>,
    /// `metaData`, at most one.
    pub(crate) metadata: Option<Metadata>,
    /// `txn`s, at most one per appId.
    pub(crate) txns: Vec<Txn>,
    /// `domainMetadata`, at most one per domain.
    pub(crate) domain_metadata: Vec<DomainMetadata>,
    /// `remove`s, at most one per path.
    pub(crate) removes: Vec<Remove>,
    /// `add`s, at most one per path.
    pub(crate) adds: Vec<Add>,
    /// Actions we do not know, by name, as they were read.
    pub(crate) other: Vec<(String, Value)>,
}

/// Names of the actions [`Entry`] parses; everything else goes to [`Entry::other`].
const COMMIT_INFO: &str = "commitInfo";
const PROTOCOL: &str = "protocol";
const METADATA: &str = "metaData";
const TXN: &str = "txn";
const DOMAIN_METADATA: &str = "domainMetadata";
const REMOVE: &str = "remove";
const ADD: &str = "add";

/// Appends `{"<name>":<action>}\n`, the action's fields in the order of its type (not through
/// a `serde_json::Value`, whose maps sort their keys).
fn line<T: Serialize>(out: &mut Vec<u8>, name: &str, action: &T) -> Result<()> {
    out.push(b'{');
    serde_json::to_writer(&mut *out, name).expect("a string serializes");
    out.push(b':');
    serde_json::to_writer(&mut *out, action)
        .map_err(|e| Error::InvalidInput(format!("cannot render the `{name}` action: {e}")))?;
    out.extend_from_slice(b"}\n");
    Ok(())
}

impl Entry {
    /// The entry as written to `_delta_log/<version>.json`: one JSON object per line, each
    /// line ending in `\n`, in the order of the fields.
    ///
    /// Errors with [`Error::InvalidInput`] when the entry breaks a rule of §Delta Log Entries
    /// (two `txn`s of one appId, two `add`s or two `remove`s of one path, two
    /// `domainMetadata` of one domain): such an entry must never reach the log.
    pub(crate) fn render(&self) -> Result<Vec<u8>> {
        self.check_unique()?;
        let mut out = Vec::with_capacity(256 + 512 * (self.adds.len() + self.removes.len()));
        if let Some(c) = &self.commit_info {
            line(&mut out, COMMIT_INFO, c)?;
        }
        if let Some(p) = &self.protocol {
            line(&mut out, PROTOCOL, p)?;
        }
        if let Some(m) = &self.metadata {
            line(&mut out, METADATA, m)?;
        }
        for t in &self.txns {
            line(&mut out, TXN, t)?;
        }
        for d in &self.domain_metadata {
            line(&mut out, DOMAIN_METADATA, d)?;
        }
        for r in &self.removes {
            line(&mut out, REMOVE, r)?;
        }
        for a in &self.adds {
            line(&mut out, ADD, a)?;
        }
        for (name, value) in &self.other {
            line(&mut out, name, value)?;
        }
        Ok(out)
    }

    fn check_unique(&self) -> Result<()> {
        fn unique<'a>(
            what: &str,
            keys: impl Iterator<Item = &'a str>,
        ) -> std::result::Result<(), String> {
            let mut seen = HashSet::new();
            for k in keys {
                if !seen.insert(k) {
                    return Err(format!("two `{what}` actions for `{k}`"));
                }
            }
            Ok(())
        }
        unique(TXN, self.txns.iter().map(|t| t.app_id.as_str()))
            .and_then(|()| unique(ADD, self.adds.iter().map(|a| a.path.as_str())))
            .and_then(|()| unique(REMOVE, self.removes.iter().map(|r| r.path.as_str())))
            .and_then(|()| {
                unique(
                    DOMAIN_METADATA,
                    self.domain_metadata.iter().map(|d| d.domain.as_str()),
                )
            })
            .map_err(|e| Error::InvalidInput(format!("a Delta log entry may not hold {e}")))
    }

    /// Parses an entry read from the log. `what` names it for errors, e.g.
    /// `_delta_log/00000000000000000007.json`.
    ///
    /// Empty lines are skipped. A line is a JSON object; each of its members is one action
    /// (normally there is exactly one), a member whose value is `null` is skipped. Unknown
    /// actions and unknown fields are kept. Errors with [`Error::Corrupt`] naming `what` and
    /// the line for a line that is not a JSON object, a known action that does not parse, or a
    /// second `protocol` or `metaData`.
    pub(crate) fn parse(bytes: &[u8], what: &str) -> Result<Self> {
        let mut entry = Entry::default();
        for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let number = index + 1;
            let corrupt = |reason: String| Error::corrupt(format!("{what}, line {number}"), reason);
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let object: Map<String, Value> =
                serde_json::from_slice(raw).map_err(|e| corrupt(e.to_string()))?;
            for (name, value) in object {
                if value.is_null() {
                    continue;
                }
                entry
                    .push(&name, value)
                    .map_err(|e| corrupt(format!("`{name}`: {e}")))?;
            }
        }
        Ok(entry)
    }

    fn push(&mut self, name: &str, value: Value) -> std::result::Result<(), String> {
        fn parse<T: serde::de::DeserializeOwned>(value: Value) -> std::result::Result<T, String> {
            serde_json::from_value(value).map_err(|e| e.to_string())
        }
        match name {
            COMMIT_INFO => {
                if self.commit_info.is_some() {
                    return Err("a second `commitInfo` in one entry".to_owned());
                }
                // Free-form (§Commit Provenance Information): a field of ours that another
                // engine uses with another type must not make the table unreadable.
                let info = match serde_json::from_value(value.clone()) {
                    Ok(info) => info,
                    Err(_) => match value {
                        Value::Object(extra) => CommitInfo {
                            extra,
                            ..CommitInfo::default()
                        },
                        _ => return Err("not a JSON object".to_owned()),
                    },
                };
                self.commit_info = Some(info);
            }
            PROTOCOL => {
                if self.protocol.is_some() {
                    return Err("a second `protocol` in one entry".to_owned());
                }
                self.protocol = Some(parse(value)?);
            }
            METADATA => {
                if self.metadata.is_some() {
                    return Err("a second `metaData` in one entry".to_owned());
                }
                self.metadata = Some(parse(value)?);
            }
            TXN => self.txns.push(parse(value)?),
            DOMAIN_METADATA => self.domain_metadata.push(parse(value)?),
            REMOVE => self.removes.push(parse(value)?),
            ADD => self.adds.push(parse(value)?),
            _ => self.other.push((name.to_owned(), value)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_commit_info() -> CommitInfo {
        let mut parameters = Map::new();
        parameters.insert("outputMode".into(), "Append".into());
        parameters.insert("queryId".into(), "filesink-0193-orders".into());
        parameters.insert("epochId".into(), "42".into());
        CommitInfo {
            timestamp: Some(1_764_590_000_123),
            operation: Some("STREAMING UPDATE".into()),
            operation_parameters: Some(parameters),
            read_version: Some(41),
            isolation_level: Some("Serializable".into()),
            is_blind_append: Some(true),
            engine_info: Some("filesink/0.1.0".into()),
            txn_id: Some("0193d2a8-6f1e-7c3a-9b1d-2f4e5a6b7c8d".into()),
            filesink: Some(FilesinkInfo {
                job: "orders".into(),
                checkpoint: 42,
            }),
            ..CommitInfo::default()
        }
    }

    fn sample_add(path: &str) -> Add {
        Add::new(
            path.into(),
            [
                ("country".to_owned(), Some("DE".to_owned())),
                ("dt".to_owned(), None),
            ]
            .into(),
            841_454,
            1_764_589_999_871,
            true,
            Some(r#"{"numRecords":1000,"minValues":{"id":1},"maxValues":{"id":1000},"nullCount":{"id":0}}"#.into()),
        )
    }

    fn sample_metadata() -> Metadata {
        Metadata {
            id: "5f1c7a9e-3b2d-4c8e-9f0a-1b2c3d4e5f60".into(),
            name: None,
            description: None,
            format: Format::parquet(),
            schema_string: r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}}]}"#.into(),
            partition_columns: vec!["country".into(), "dt".into()],
            configuration: BTreeMap::new(),
            created_time: Some(1_764_590_000_123),
            extra: Extra::new(),
        }
    }

    fn first_entry() -> Entry {
        Entry {
            commit_info: Some(sample_commit_info()),
            protocol: Some(Protocol {
                min_reader_version: 1,
                min_writer_version: 2,
                reader_features: None,
                writer_features: None,
                extra: Extra::new(),
            }),
            metadata: Some(sample_metadata()),
            txns: vec![Txn {
                app_id: "filesink-0193-orders".into(),
                version: 42,
                last_updated: Some(1_764_590_000_123),
                extra: Extra::new(),
            }],
            adds: vec![
                sample_add("country=DE/dt=2026-11-30/part-orders_0-0193-7.parquet"),
                sample_add("country=DE/dt=2026-11-30/part-orders_1-0193-2.parquet"),
            ],
            ..Entry::default()
        }
    }

    #[test]
    fn entry_renders_one_action_per_line_in_the_design_order() {
        let text = String::from_utf8(first_entry().render().unwrap()).unwrap();
        assert!(text.ends_with('\n'));
        let lines: Vec<&str> = text.lines().collect();
        let names: Vec<String> = lines
            .iter()
            .map(|l| {
                let v: Map<String, Value> = serde_json::from_str(l).unwrap();
                assert_eq!(v.len(), 1, "{l}");
                v.keys().next().unwrap().clone()
            })
            .collect();
        assert_eq!(
            names,
            ["commitInfo", "protocol", "metaData", "txn", "add", "add"]
        );
        assert_eq!(
            lines[0],
            concat!(
                r#"{"commitInfo":{"timestamp":1764590000123,"operation":"STREAMING UPDATE","#,
                r#""operationParameters":{"epochId":"42","outputMode":"Append","queryId":"filesink-0193-orders"},"#,
                r#""readVersion":41,"isolationLevel":"Serializable","isBlindAppend":true,"#,
                r#""engineInfo":"filesink/0.1.0","txnId":"0193d2a8-6f1e-7c3a-9b1d-2f4e5a6b7c8d","#,
                r#""filesink":{"job":"orders","checkpoint":42}}}"#
            )
        );
        assert_eq!(
            lines[1],
            r#"{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}"#
        );
        assert_eq!(
            lines[2],
            concat!(
                r#"{"metaData":{"id":"5f1c7a9e-3b2d-4c8e-9f0a-1b2c3d4e5f60","#,
                r#""format":{"provider":"parquet","options":{}},"#,
                r#""schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":false,\"metadata\":{}}]}","#,
                r#""partitionColumns":["country","dt"],"configuration":{},"createdTime":1764590000123}}"#
            )
        );
        assert_eq!(
            lines[3],
            r#"{"txn":{"appId":"filesink-0193-orders","version":42,"lastUpdated":1764590000123}}"#
        );
        assert_eq!(
            lines[4],
            concat!(
                r#"{"add":{"path":"country=DE/dt=2026-11-30/part-orders_0-0193-7.parquet","#,
                r#""partitionValues":{"country":"DE","dt":null},"size":841454,"#,
                r#""modificationTime":1764589999871,"dataChange":true,"#,
                r#""stats":"{\"numRecords\":1000,\"minValues\":{\"id\":1},\"maxValues\":{\"id\":1000},\"nullCount\":{\"id\":0}}"}}"#
            )
        );
    }

    #[test]
    fn entry_round_trips() {
        let entry = first_entry();
        let bytes = entry.render().unwrap();
        let parsed = Entry::parse(&bytes, "_delta_log/00000000000000000000.json").unwrap();
        assert_eq!(parsed, entry);
        assert_eq!(parsed.render().unwrap(), bytes);

        let compaction = Entry {
            commit_info: Some(CommitInfo {
                operation: Some("OPTIMIZE".into()),
                is_blind_append: Some(false),
                ..CommitInfo::default()
            }),
            txns: first_entry().txns,
            removes: vec![Remove {
                path: "a=1/part-x.parquet".into(),
                deletion_timestamp: Some(1_764_590_000_000),
                data_change: false,
                extended_file_metadata: Some(true),
                partition_values: Some([("a".to_owned(), Some("1".to_owned()))].into()),
                size: Some(1234),
                stats: None,
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
                extra: Extra::new(),
            }],
            adds: vec![sample_add("a=1/part-y.parquet")],
            ..Entry::default()
        };
        let bytes = compaction.render().unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        let order: Vec<_> = text.lines().map(|l| &l[2..6]).collect();
        assert_eq!(order, ["comm", "txn\"", "remo", "add\""]);
        assert_eq!(Entry::parse(&bytes, "v").unwrap(), compaction);
    }

    #[test]
    fn entries_breaking_the_log_entry_rules_are_not_rendered() {
        let mut twice = first_entry();
        twice.adds.push(twice.adds[0].clone());
        let err = twice.render().unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("two `add` actions for `country=DE/dt=2026-11-30/part-orders_0-0193-7.parquet`")),
            "{err:?}"
        );
        let mut txns = first_entry();
        txns.txns.push(txns.txns[0].clone());
        assert!(matches!(txns.render(), Err(Error::InvalidInput(_))));
    }

    #[test]
    fn unknown_actions_and_fields_are_kept() {
        let text = concat!(
            r#"{"commitInfo":{"timestamp":1,"clusterId":"c-1","notebook":{"notebookId":"44"}}}"#,
            "\n",
            r#"{"add":{"path":"p.parquet","partitionValues":{},"size":1,"modificationTime":2,"dataChange":true,"futureField":[1,2]}}"#,
            "\n",
            r#"{"cdc":{"path":"_change_data/c.parquet","partitionValues":{},"size":3,"dataChange":false}}"#,
            "\n",
            r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":[],"writerFeatures":["appendOnly"],"futureList":[]}}"#,
            "\n",
        );
        let entry = Entry::parse(text.as_bytes(), "v").unwrap();
        let info = entry.commit_info.as_ref().unwrap();
        assert_eq!(info.extra["clusterId"], "c-1");
        assert_eq!(
            entry.adds[0].extra["futureField"],
            serde_json::json!([1, 2])
        );
        assert_eq!(entry.other.len(), 1);
        assert_eq!(entry.other[0].0, "cdc");
        let protocol = entry.protocol.as_ref().unwrap();
        assert_eq!(
            protocol.writer_features.as_deref(),
            Some(&["appendOnly".to_owned()][..])
        );
        assert!(protocol.extra.contains_key("futureList"));
        // Rendered again (in our order), nothing is lost.
        let again = Entry::parse(&entry.render().unwrap(), "v").unwrap();
        assert_eq!(again, entry);
    }

    #[test]
    fn malformed_known_actions_are_corrupt_naming_entry_and_line() {
        let cases = [
            (
                "{\"txn\":{\"appId\":\"a\",\"version\":1}}\n{\"add\":{\"path\":\"p\"}}\n",
                "_delta_log/00000000000000000003.json, line 2",
            ),
            ("not json\n", "_delta_log/00000000000000000003.json, line 1"),
            ("[1,2]\n", "_delta_log/00000000000000000003.json, line 1"),
            (
                "\n{\"txn\":{\"appId\":\"a\",\"version\":\"one\"}}",
                "_delta_log/00000000000000000003.json, line 2",
            ),
            (
                "{\"protocol\":{\"minReaderVersion\":1,\"minWriterVersion\":2}}\n{\"protocol\":{\"minReaderVersion\":1,\"minWriterVersion\":2}}\n",
                "_delta_log/00000000000000000003.json, line 2",
            ),
        ];
        for (text, expected) in cases {
            let err =
                Entry::parse(text.as_bytes(), "_delta_log/00000000000000000003.json").unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { what, .. } if what == expected),
                "{text:?} gave {err:?}"
            );
        }
    }

    #[test]
    fn null_members_and_blank_lines_are_skipped() {
        let text = "\n{\"add\":null,\"txn\":{\"appId\":\"a\",\"version\":3}}\n\r\n";
        let entry = Entry::parse(text.as_bytes(), "v").unwrap();
        assert_eq!(entry.txns.len(), 1);
        assert!(entry.adds.is_empty());
    }

    /// A hand-written entry in the shape Spark and delta-rs write, from the examples of
    /// PROTOCOL.md (`fixtures/delta/README.md`).
    #[test]
    fn entry_written_by_another_engine_parses() {
        let bytes = include_bytes!("../../../fixtures/delta/engine_entry.json");
        let entry = Entry::parse(bytes, "fixtures/delta/engine_entry.json").unwrap();
        let info = entry.commit_info.as_ref().unwrap();
        assert_eq!(info.operation.as_deref(), Some("WRITE"));
        assert_eq!(info.extra["userName"], "michael@databricks.com");
        let protocol = entry.protocol.as_ref().unwrap();
        assert_eq!(
            (protocol.min_reader_version, protocol.min_writer_version),
            (3, 7)
        );
        let metadata = entry.metadata.as_ref().unwrap();
        assert_eq!(metadata.partition_columns, ["date", "region"]);
        assert_eq!(metadata.configuration["delta.appendOnly"], "true");
        let schema =
            super::super::schema::StructType::parse(&metadata.schema_string, "schemaString")
                .unwrap();
        assert_eq!(schema.fields.len(), 5);
        assert_eq!(entry.txns[0].app_id, "3ba13872-2d47-4e17-86a0-21afd2a22395");
        assert_eq!(entry.txns[0].version, 364_475);
        assert_eq!(entry.txns[0].last_updated, None);
        assert_eq!(entry.adds.len(), 2);
        let add = &entry.adds[0];
        assert_eq!(
            add.path,
            "date=2017-12-10/region=EU/part-00000-a9e5c5a1-c000.snappy.parquet"
        );
        assert_eq!(add.partition_values["date"].as_deref(), Some("2017-12-10"));
        assert_eq!(add.base_row_id, Some(4071));
        assert!(add
            .stats
            .as_deref()
            .unwrap()
            .starts_with("{\"numRecords\":1,"));
        assert_eq!(entry.adds[1].partition_values["region"], None);
        assert_eq!(
            entry.adds[1].tags.as_ref().unwrap()["INSERTION_TIME"].as_deref(),
            Some("1512909768000000")
        );
        assert_eq!(entry.removes.len(), 1);
        assert_eq!(entry.removes[0].deletion_timestamp, Some(1_515_488_792_485));
        assert_eq!(entry.domain_metadata[0].domain, "delta.deltaTableFeatureX");
        let others: Vec<_> = entry.other.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(others, ["cdc"]);
        // Rendering and reading it again keeps everything.
        let again = Entry::parse(&entry.render().unwrap(), "again").unwrap();
        assert_eq!(again, entry);
    }
}
