//! Classic Parquet checkpoints of the Delta log (§Checkpoints, §Classic checkpoint,
//! §Multi-part checkpoint, §V1 Spec), the `_last_checkpoint` pointer (§Last Checkpoint File
//! Schema) and the names of the files in `_delta_log/` (design sections 5 and 8).
//!
//! Pure: bytes in, bytes out; the log reader and the background checkpoint task do the I/O.
//!
//! **Reading** ([`read_checkpoint`]) takes a classic checkpoint or every part of a multi-part
//! one, written by any engine, into an [`Entry`]. It is tolerant the way the protocol asks
//! (§Protocol Evolution; §Checkpoints: "any missing column should be treated as null"): only
//! the columns of the actions we know are decoded (a Parquet projection, so `stats_parsed`,
//! `partitionValues_parsed` and columns of future actions are never read, whatever their
//! types); fields we do not use may be absent; a set `deletionVector` is kept as JSON so the
//! feature check sees it. The Arrow schema another writer may have stored in the file is
//! ignored: the types come from the Parquet schema alone, so they are the same for every
//! writer. A V2-spec checkpoint with `sidecar` rows is refused ([`Error::NotSupported`]): its
//! files are elsewhere, and an [`Entry`] without them would be a silently wrong snapshot.
//!
//! **Writing** ([`write_checkpoint`]) produces the classic single-file V1 checkpoint of design
//! section 8 from a snapshot: one row per action, the other columns null; maps with Spark's
//! and delta-rs's names (`key_value`, `key`, `value`) and lists with `element`; snappy; row
//! groups of [`ROW_GROUP_ROWS`] rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBuilder, Int32Builder, Int64Builder,
    ListBuilder, MapBuilder, MapFieldNames, RecordBatch, StringBuilder, StructArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::actions::{
    Add, DomainMetadata, Entry, Extra, Format, Metadata, PartitionValues, Protocol, Remove, Txn,
};
use crate::{Error, Result};

/// Rows per row group of the checkpoints we write (design section 8): large enough that a
/// snapshot of 10⁵ files is one row group, small enough that a reader never holds more than
/// one such group of decoded rows per column.
pub(crate) const ROW_GROUP_ROWS: usize = 100_000;

/// The columns of a checkpoint [`read_checkpoint`] decodes, with the fields of each it uses.
/// `checkpointMetadata` and `sidecar` (§V2 Spec) are read whole, to notice V2 checkpoints.
const READ_COLUMNS: &[(&str, Option<&[&str]>)] = &[
    (
        "protocol",
        Some(&[
            "minReaderVersion",
            "minWriterVersion",
            "readerFeatures",
            "writerFeatures",
        ]),
    ),
    (
        "metaData",
        Some(&[
            "id",
            "name",
            "description",
            "format",
            "schemaString",
            "partitionColumns",
            "configuration",
            "createdTime",
        ]),
    ),
    ("txn", Some(&["appId", "version", "lastUpdated"])),
    (
        "domainMetadata",
        Some(&["domain", "configuration", "removed"]),
    ),
    (
        "remove",
        Some(&[
            "path",
            "deletionTimestamp",
            "dataChange",
            "extendedFileMetadata",
            "partitionValues",
            "size",
            "stats",
            "tags",
            "deletionVector",
            "baseRowId",
            "defaultRowCommitVersion",
        ]),
    ),
    (
        "add",
        Some(&[
            "path",
            "partitionValues",
            "size",
            "modificationTime",
            "dataChange",
            "stats",
            "tags",
            "deletionVector",
            "baseRowId",
            "defaultRowCommitVersion",
            "clusteringProvider",
        ]),
    ),
    ("checkpointMetadata", None),
    ("sidecar", None),
];

/// Decodes a classic checkpoint (`<v>.checkpoint.parquet`) or all parts of a multi-part one
/// (`<v>.checkpoint.<i>.<n>.parquet`, `parts` in the order of `i`) into one [`Entry`]: its
/// `protocol`, `metaData`, `txn`s, `domainMetadata`, `remove`s (tombstones) and `add`s, each
/// kind in the order of its rows; `commit_info` is `None` (§Checkpoints: a checkpoint holds
/// none), and a V2 checkpoint's `checkpointMetadata` goes to [`Entry::other`].
/// `what` names the checkpoint for errors, e.g. `_delta_log/00000000000000000010.checkpoint.parquet`.
///
/// `add.dataChange` and `remove.dataChange` read as `false` when absent (they mean nothing in
/// a checkpoint); every other field the action types require must be there.
///
/// Errors with [`Error::Corrupt`] naming `what` (and the part and row) when a part is not
/// Parquet, a column has an unexpected type, a required field is null, or the checkpoint
/// lacks its `protocol` or `metaData` or has two; with [`Error::NotSupported`] for `sidecar`
/// rows (a V2 checkpoint whose files are in sidecar files, §V2 Spec).
pub(crate) fn read_checkpoint(parts: &[Bytes], what: &str) -> Result<Entry> {
    if parts.is_empty() {
        return Err(Error::InvalidInput(format!(
            "no parts given to read the checkpoint `{what}`"
        )));
    }
    let mut entry = Entry::default();
    for (index, bytes) in parts.iter().enumerate() {
        let part = if parts.len() == 1 {
            what.to_owned()
        } else {
            format!("{what}, part {} of {}", index + 1, parts.len())
        };
        read_part(bytes.clone(), &part, &mut entry)?;
    }
    if entry.protocol.is_none() || entry.metadata.is_none() {
        let missing = if entry.protocol.is_none() {
            "protocol"
        } else {
            "metaData"
        };
        return Err(Error::corrupt(
            what,
            format!("the checkpoint has no `{missing}` action"),
        ));
    }
    Ok(entry)
}

fn read_part(bytes: Bytes, what: &str, entry: &mut Entry) -> Result<()> {
    let corrupt = |reason: String| Error::corrupt(what, reason);
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes, options)
        .map_err(|e| corrupt(format!("not a Parquet checkpoint: {e}")))?;
    let descr = builder.parquet_schema();
    let leaves = (0..descr.num_columns()).filter(|&i| {
        let column = descr.column(i);
        let path = column.path().parts();
        READ_COLUMNS.iter().any(|(root, fields)| {
            path[0] == *root
                && fields.is_none_or(|fields| path.get(1).is_none_or(|f| fields.contains(&&**f)))
        })
    });
    let mask = ProjectionMask::leaves(descr, leaves.collect::<Vec<_>>());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(8192)
        .build()
        .map_err(|e| corrupt(format!("cannot read the checkpoint: {e}")))?;
    let mut first_row = 0;
    for batch in reader {
        let batch = batch.map_err(|e| corrupt(format!("cannot decode the checkpoint: {e}")))?;
        for (name, _) in READ_COLUMNS {
            let Some(column) = batch.column_by_name(name) else {
                continue;
            };
            let Some(actions) = column.as_struct_opt() else {
                return Err(corrupt(format!(
                    "the column `{name}` is a {}, not a struct",
                    column.data_type()
                )));
            };
            for row in 0..actions.len() {
                if actions.is_null(row) {
                    continue;
                }
                let action = Action {
                    array: actions,
                    name,
                    row,
                };
                read_action(&action, entry).map_err(|e| match e {
                    ActionError::Malformed(reason) => {
                        Error::corrupt(format!("{what}, row {}", first_row + row + 1), reason)
                    }
                    ActionError::Refused(e) => e,
                })?;
            }
        }
        first_row += batch.num_rows();
    }
    Ok(())
}

/// Why an action of a checkpoint was not read.
enum ActionError {
    /// It is malformed; the caller makes this [`Error::Corrupt`] naming the row.
    Malformed(String),
    /// It is well-formed but filesink does not read such checkpoints.
    Refused(Error),
}

impl From<String> for ActionError {
    fn from(reason: String) -> Self {
        ActionError::Malformed(reason)
    }
}

/// Appends the action in one non-null cell of an action column to `entry`.
fn read_action(a: &Action<'_>, entry: &mut Entry) -> std::result::Result<(), ActionError> {
    match a.name {
        "protocol" => {
            if entry.protocol.is_some() {
                return Err("a second `protocol` in the checkpoint".to_owned().into());
            }
            entry.protocol = Some(Protocol {
                min_reader_version: a.need(Action::int, "minReaderVersion")?,
                min_writer_version: a.need(Action::int, "minWriterVersion")?,
                reader_features: a.strings("readerFeatures")?,
                writer_features: a.strings("writerFeatures")?,
                extra: Extra::new(),
            });
        }
        "metaData" => {
            if entry.metadata.is_some() {
                return Err("a second `metaData` in the checkpoint".to_owned().into());
            }
            let format = a.need(Action::child, "format")?;
            let configuration = a
                .map("configuration")?
                .unwrap_or_default()
                .into_iter()
                // §Change Metadata: a map from string to string; a null value has no meaning.
                .filter_map(|(k, v)| Some((k, v?)))
                .collect();
            entry.metadata = Some(Metadata {
                id: a.need(Action::string, "id")?,
                name: a.string("name")?,
                description: a.string("description")?,
                format: Format {
                    provider: format.need(Action::string, "provider")?,
                    options: format.map("options")?.unwrap_or_default(),
                },
                schema_string: a.need(Action::string, "schemaString")?,
                partition_columns: a.strings("partitionColumns")?.unwrap_or_default(),
                configuration,
                created_time: a.long("createdTime")?,
                extra: Extra::new(),
            });
        }
        "txn" => entry.txns.push(Txn {
            app_id: a.need(Action::string, "appId")?,
            version: a.need(Action::long, "version")?,
            last_updated: a.long("lastUpdated")?,
            extra: Extra::new(),
        }),
        "domainMetadata" => entry.domain_metadata.push(DomainMetadata {
            domain: a.need(Action::string, "domain")?,
            configuration: a.need(Action::string, "configuration")?,
            removed: a.need(Action::boolean, "removed")?,
            extra: Extra::new(),
        }),
        "remove" => entry.removes.push(Remove {
            path: a.need(Action::string, "path")?,
            deletion_timestamp: a.long("deletionTimestamp")?,
            data_change: a.boolean("dataChange")?.unwrap_or(false),
            extended_file_metadata: a.boolean("extendedFileMetadata")?,
            partition_values: a.map("partitionValues")?,
            size: a.long("size")?,
            stats: a.string("stats")?,
            tags: a.map("tags")?,
            deletion_vector: a.json("deletionVector")?,
            base_row_id: a.long("baseRowId")?,
            default_row_commit_version: a.long("defaultRowCommitVersion")?,
            extra: Extra::new(),
        }),
        "add" => entry.adds.push(Add {
            path: a.need(Action::string, "path")?,
            partition_values: a.need(Action::map, "partitionValues")?,
            size: a.need(Action::long, "size")?,
            modification_time: a.need(Action::long, "modificationTime")?,
            data_change: a.boolean("dataChange")?.unwrap_or(false),
            stats: a.string("stats")?,
            tags: a.map("tags")?,
            deletion_vector: a.json("deletionVector")?,
            base_row_id: a.long("baseRowId")?,
            default_row_commit_version: a.long("defaultRowCommitVersion")?,
            clustering_provider: a.string("clusteringProvider")?,
            extra: Extra::new(),
        }),
        "sidecar" => {
            return Err(ActionError::Refused(Error::NotSupported(
                "the checkpoint refers to sidecar files (a V2 checkpoint, §V2 Spec); filesink \
                 reads classic V1 checkpoints only"
                    .to_owned(),
            )))
        }
        other => {
            let value = json_value(a.array, a.row)?;
            entry.other.push((other.to_owned(), value));
        }
    }
    Ok(())
}

/// One non-null cell of a struct column: an action, or a struct inside one.
struct Action<'a> {
    array: &'a StructArray,
    /// The column path, for errors (`add`, `metaData.format`).
    name: &'a str,
    row: usize,
}

impl<'a> Action<'a> {
    /// The field's array, or `None` when the column is absent or the value null.
    fn field(&self, name: &str) -> Option<&'a ArrayRef> {
        self.array
            .column_by_name(name)
            .filter(|a| a.is_valid(self.row))
    }

    fn wrong_type(&self, name: &str, expected: &str, array: &ArrayRef) -> String {
        format!(
            "`{}.{name}` is a {}, not {expected}",
            self.name,
            array.data_type()
        )
    }

    /// A field the action must have: `get` (`Action::string`, …) of it, not null.
    fn need<T>(
        &self,
        get: impl Fn(&Self, &'a str) -> std::result::Result<Option<T>, String>,
        name: &'a str,
    ) -> std::result::Result<T, String> {
        get(self, name)?.ok_or_else(|| format!("`{}.{name}` is missing or null", self.name))
    }

    fn string(&self, name: &str) -> std::result::Result<Option<String>, String> {
        let Some(array) = self.field(name) else {
            return Ok(None);
        };
        match string_at(array, self.row) {
            Some(Ok(s)) => Ok(s.map(str::to_owned)),
            Some(Err(e)) => Err(format!("`{}.{name}` is a string {e}", self.name)),
            None => Err(self.wrong_type(name, "a string", array)),
        }
    }

    fn long(&self, name: &str) -> std::result::Result<Option<i64>, String> {
        self.field(name)
            .map(|array| {
                integer_at(array, self.row).ok_or_else(|| self.wrong_type(name, "a long", array))
            })
            .transpose()
    }

    fn int(&self, name: &str) -> std::result::Result<Option<i32>, String> {
        self.long(name)?
            .map(|v| {
                i32::try_from(v)
                    .map_err(|_| format!("`{}.{name}` = {v} is out of range", self.name))
            })
            .transpose()
    }

    fn boolean(&self, name: &str) -> std::result::Result<Option<bool>, String> {
        self.field(name)
            .map(|array| {
                array
                    .as_boolean_opt()
                    .map(|b: &BooleanArray| b.value(self.row))
                    .ok_or_else(|| self.wrong_type(name, "a boolean", array))
            })
            .transpose()
    }

    /// A `map<string,string>`, null values kept (a null partition value).
    fn map(&self, name: &str) -> std::result::Result<Option<PartitionValues>, String> {
        self.field(name)
            .map(|array| {
                map_at(array.as_ref(), self.row)
                    .map_err(|reason| format!("`{}.{name}` {reason}", self.name))
            })
            .transpose()
    }

    /// An `array<string>`; null elements are an error.
    fn strings(&self, name: &str) -> std::result::Result<Option<Vec<String>>, String> {
        let Some(array) = self.field(name) else {
            return Ok(None);
        };
        let list = array
            .as_list_opt::<i32>()
            .ok_or_else(|| self.wrong_type(name, "a list of strings", array))?;
        let values = list.value(self.row);
        (0..values.len())
            .map(|i| {
                match string_at(&values, i)
                    .ok_or_else(|| self.wrong_type(name, "a list of strings", array))?
                {
                    Ok(Some(s)) => Ok(s.to_owned()),
                    Ok(None) => Err(format!("`{}.{name}` has a null element", self.name)),
                    Err(e) => Err(format!("`{}.{name}` has an element {e}", self.name)),
                }
            })
            .collect::<std::result::Result<_, _>>()
            .map(Some)
    }

    /// A struct field, as an [`Action`] of its own.
    fn child(&self, name: &'a str) -> std::result::Result<Option<Action<'a>>, String> {
        let Some(array) = self.field(name) else {
            return Ok(None);
        };
        let array = array
            .as_struct_opt()
            .ok_or_else(|| self.wrong_type(name, "a struct", array))?;
        Ok(Some(Action {
            array,
            name,
            row: self.row,
        }))
    }

    /// Any field, as JSON (a `deletionVector`).
    fn json(&self, name: &str) -> std::result::Result<Option<Value>, String> {
        self.field(name)
            .map(|array| json_value(array, self.row))
            .transpose()
    }
}

/// The string at `row`: `None` when `array` holds no strings, `Some(Err)` for binary that is
/// not UTF-8 (a writer that did not annotate its strings).
fn string_at(array: &dyn Array, row: usize) -> Option<std::result::Result<Option<&str>, String>> {
    if array.is_null(row) {
        return matches!(array.data_type(), DataType::Utf8 | DataType::Binary).then_some(Ok(None));
    }
    if let Some(strings) = array.as_string_opt::<i32>() {
        return Some(Ok(Some(strings.value(row))));
    }
    let binary = array.as_binary_opt::<i32>()?;
    Some(
        std::str::from_utf8(binary.value(row))
            .map(Some)
            .map_err(|e| format!("that is not UTF-8: {e}")),
    )
}

/// The map of strings at a non-null `row`: a map, or the list of key-value structs of a writer
/// that did not annotate it as one. The error completes "`<field>` …".
fn map_at(array: &dyn Array, row: usize) -> std::result::Result<PartitionValues, String> {
    let wrong = || format!("is a {}, not a map of strings", array.data_type());
    let (entries, offsets) = if let Some(map) = array.as_map_opt() {
        (map.entries(), map.value_offsets())
    } else if let Some(list) = array.as_list_opt::<i32>() {
        let entries = list.values().as_struct_opt().ok_or_else(wrong)?;
        (entries, list.value_offsets())
    } else {
        return Err(wrong());
    };
    if entries.num_columns() != 2 {
        return Err(wrong());
    }
    let (keys, values) = (entries.column(0), entries.column(1));
    let mut out = BTreeMap::new();
    for i in offsets[row] as usize..offsets[row + 1] as usize {
        let key = match string_at(keys.as_ref(), i).ok_or_else(wrong)? {
            Ok(Some(key)) => key.to_owned(),
            Ok(None) => return Err("has a null key".to_owned()),
            Err(e) => return Err(format!("has a key {e}")),
        };
        let value = string_at(values.as_ref(), i)
            .ok_or_else(wrong)?
            .map_err(|e| format!("has a value {e}"))?;
        out.insert(key, value.map(str::to_owned));
    }
    Ok(out)
}

/// The integer at a non-null `row` of an Int32 or Int64 column.
fn integer_at(array: &dyn Array, row: usize) -> Option<i64> {
    use arrow::datatypes::{Int32Type, Int64Type};
    if let Some(a) = array.as_primitive_opt::<Int64Type>() {
        return Some(a.value(row));
    }
    array
        .as_primitive_opt::<Int32Type>()
        .map(|a| i64::from(a.value(row)))
}

/// The value at `row` as JSON, for fields kept only to be looked at (`deletionVector`, a V2
/// `checkpointMetadata`). A type without a JSON form becomes a string naming the type, so a
/// set value never reads as absent.
fn json_value(array: &dyn Array, row: usize) -> std::result::Result<Value, String> {
    use arrow::datatypes::{Float64Type, Int16Type, Int8Type};
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    if let Some(Ok(Some(s))) = string_at(array, row) {
        return Ok(Value::String(s.to_owned()));
    }
    if let Some(v) = integer_at(array, row) {
        return Ok(v.into());
    }
    if let Some(a) = array.as_primitive_opt::<Int16Type>() {
        return Ok(a.value(row).into());
    }
    if let Some(a) = array.as_primitive_opt::<Int8Type>() {
        return Ok(a.value(row).into());
    }
    if let Some(a) = array.as_primitive_opt::<Float64Type>() {
        return Ok(a.value(row).into());
    }
    if let Some(a) = array.as_boolean_opt() {
        return Ok(a.value(row).into());
    }
    if let Some(s) = array.as_struct_opt() {
        let mut out = Map::new();
        for (field, column) in s.fields().iter().zip(s.columns()) {
            let value = json_value(column, row)?;
            if !value.is_null() {
                out.insert(field.name().clone(), value);
            }
        }
        return Ok(Value::Object(out));
    }
    if let Some(list) = array.as_list_opt::<i32>() {
        let values = list.value(row);
        return (0..values.len())
            .map(|i| json_value(&values, i))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if array.as_map_opt().is_some() {
        return Ok(Value::Object(
            map_at(array, row)?
                .into_iter()
                .map(|(k, v)| (k, v.map_or(Value::Null, Value::String)))
                .collect(),
        ));
    }
    Ok(Value::String(format!("<{}>", array.data_type())))
}

/// What a classic checkpoint holds (§Checkpoints), borrowed from a snapshot: the tombstones
/// already filtered by the retention of design section 8, every `txn`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckpointContent<'a> {
    /// The table's protocol.
    pub(crate) protocol: &'a Protocol,
    /// The table's metadata.
    pub(crate) metadata: &'a Metadata,
    /// Every application's latest `txn`.
    pub(crate) txns: &'a [Txn],
    /// The live `add`s.
    pub(crate) adds: &'a [Add],
    /// The unexpired tombstones.
    pub(crate) removes: &'a [Remove],
    /// The domains; tombstones (`removed = true`) are left out of the checkpoint.
    pub(crate) domain_metadata: &'a [DomainMetadata],
}

/// One row of a checkpoint we write.
#[derive(Clone, Copy)]
enum Row<'a> {
    Protocol(&'a Protocol),
    Metadata(&'a Metadata),
    Txn(&'a Txn),
    Domain(&'a DomainMetadata),
    Remove(&'a Remove),
    Add(&'a Add),
}

/// The classic single-file V1 checkpoint (`<v>.checkpoint.parquet`) of `state`, with exactly
/// the schema of design section 8 ([`checkpoint_schema`]). Rows: the protocol, the metadata,
/// the `txn`s, the live domains, the tombstones, the `add`s, in the order given.
///
/// - `add.dataChange` is written `false` (a checkpoint records state, not a change);
///   `remove` rows carry no `stats` or `tags` (§Checkpoints).
/// - `readerFeatures` is null unless the reader version is 3, then a list (empty when the
///   protocol has none); `writerFeatures` likewise for writer version 7 (§Checkpoint Schema).
/// - Fields of actions that the schema has no column for are not written: unknown fields
///   (`extra`, §Protocol Evolution lets readers ignore them) and `remove`s' deletion vectors
///   and row tracking.
///
/// Errors with [`Error::InvalidInput`] for an `add` with a deletion vector, row tracking or a
/// clustering provider: a table with those features is refused before anything is written
/// (design section 12), and dropping them from a checkpoint would change the table.
pub(crate) fn write_checkpoint(state: &CheckpointContent<'_>) -> Result<Vec<u8>> {
    write_with_row_groups(state, ROW_GROUP_ROWS)
}

/// [`write_checkpoint`] with row groups of `row_group_rows` rows (the tests use small ones).
fn write_with_row_groups(state: &CheckpointContent<'_>, row_group_rows: usize) -> Result<Vec<u8>> {
    if let Some(add) = state.adds.iter().find(|a| {
        a.deletion_vector.is_some()
            || a.base_row_id.is_some()
            || a.default_row_commit_version.is_some()
            || a.clustering_provider.is_some()
    }) {
        return Err(Error::InvalidInput(format!(
            "the `add` of `{}` has a deletion vector, row tracking or clustering, which \
             filesink's checkpoints cannot hold",
            add.path
        )));
    }
    let rows: Vec<Row<'_>> = [Row::Protocol(state.protocol), Row::Metadata(state.metadata)]
        .into_iter()
        .chain(state.txns.iter().map(Row::Txn))
        .chain(
            state
                .domain_metadata
                .iter()
                .filter(|d| !d.removed)
                .map(Row::Domain),
        )
        .chain(state.removes.iter().map(Row::Remove))
        .chain(state.adds.iter().map(Row::Add))
        .collect();
    let schema = checkpoint_schema();
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(row_group_rows))
        .build();
    let mut out = Vec::new();
    // No stored Arrow schema: readers take the types from the Parquet schema, as with Spark's
    // and delta-rs's checkpoints.
    let options = ArrowWriterOptions::new()
        .with_properties(properties)
        .with_skip_arrow_metadata(true);
    let mut writer = ArrowWriter::try_new_with_options(&mut out, schema.clone(), options)?;
    for chunk in rows.chunks(row_group_rows) {
        writer.write(&batch(&schema, chunk)?)?;
    }
    writer.close()?;
    Ok(out)
}

/// `map<string,string>` as Spark and delta-rs write it: entries `key_value`, a non-null
/// `key`, a nullable `value` (what [`MapBuilder`] makes with [`map_names`]).
fn map_type() -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, true),
    ]);
    DataType::Map(
        Arc::new(Field::new("key_value", DataType::Struct(entries), false)),
        false,
    )
}

fn map_names() -> MapFieldNames {
    MapFieldNames {
        entry: "key_value".to_owned(),
        key: "key".to_owned(),
        value: "value".to_owned(),
    }
}

/// `array<string>` with non-null items named `element`.
fn element_field() -> Arc<Field> {
    Arc::new(Field::new("element", DataType::Utf8, false))
}

fn list_type() -> DataType {
    DataType::List(element_field())
}

fn struct_of(fields: Vec<Field>) -> DataType {
    DataType::Struct(Fields::from(fields))
}

/// The schema of the checkpoints we write (design section 8). Every action column is a
/// nullable struct; inside it, the fields an action must have are non-null.
pub(crate) fn checkpoint_schema() -> SchemaRef {
    use DataType::{Boolean, Int32, Int64, Utf8};
    let f = Field::new;
    Arc::new(Schema::new(vec![
        f(
            "txn",
            struct_of(vec![
                f("appId", Utf8, false),
                f("version", Int64, false),
                f("lastUpdated", Int64, true),
            ]),
            true,
        ),
        f(
            "add",
            struct_of(vec![
                f("path", Utf8, false),
                f("partitionValues", map_type(), false),
                f("size", Int64, false),
                f("modificationTime", Int64, false),
                f("dataChange", Boolean, false),
                f("stats", Utf8, true),
                f("tags", map_type(), true),
            ]),
            true,
        ),
        f(
            "remove",
            struct_of(vec![
                f("path", Utf8, false),
                f("deletionTimestamp", Int64, true),
                f("dataChange", Boolean, false),
                f("extendedFileMetadata", Boolean, true),
                f("partitionValues", map_type(), true),
                f("size", Int64, true),
            ]),
            true,
        ),
        f(
            "metaData",
            struct_of(vec![
                f("id", Utf8, false),
                f("name", Utf8, true),
                f("description", Utf8, true),
                f(
                    "format",
                    struct_of(vec![
                        f("provider", Utf8, false),
                        f("options", map_type(), false),
                    ]),
                    false,
                ),
                f("schemaString", Utf8, false),
                f("partitionColumns", list_type(), false),
                f("configuration", map_type(), false),
                f("createdTime", Int64, true),
            ]),
            true,
        ),
        f(
            "protocol",
            struct_of(vec![
                f("minReaderVersion", Int32, false),
                f("minWriterVersion", Int32, false),
                f("readerFeatures", list_type(), true),
                f("writerFeatures", list_type(), true),
            ]),
            true,
        ),
        f(
            "domainMetadata",
            struct_of(vec![
                f("domain", Utf8, false),
                f("configuration", Utf8, false),
                f("removed", Boolean, false),
            ]),
            true,
        ),
    ]))
}

/// The builders of one struct column's fields, filled row by row.
enum Builder {
    String(StringBuilder),
    Long(Int64Builder),
    Int(Int32Builder),
    Bool(BooleanBuilder),
    Map(MapBuilder<StringBuilder, StringBuilder>),
    List(ListBuilder<StringBuilder>),
    Struct(Column),
}

/// One value appended to a [`Builder`] (`None` is null).
enum Cell<'a> {
    String(Option<&'a str>),
    Long(Option<i64>),
    Int(Option<i32>),
    Bool(Option<bool>),
    Map(Option<Vec<(&'a str, Option<&'a str>)>>),
    List(Option<&'a [String]>),
    /// A struct's cells, or `None` for a null struct.
    Struct(Option<Vec<Cell<'a>>>),
}

impl Builder {
    fn new(data_type: &DataType) -> Self {
        match data_type {
            DataType::Utf8 => Builder::String(StringBuilder::new()),
            DataType::Int64 => Builder::Long(Int64Builder::new()),
            DataType::Int32 => Builder::Int(Int32Builder::new()),
            DataType::Boolean => Builder::Bool(BooleanBuilder::new()),
            DataType::Map(..) => Builder::Map(MapBuilder::new(
                Some(map_names()),
                StringBuilder::new(),
                StringBuilder::new(),
            )),
            DataType::List(_) => {
                Builder::List(ListBuilder::new(StringBuilder::new()).with_field(element_field()))
            }
            DataType::Struct(fields) => Builder::Struct(Column::new(fields.clone())),
            other => unreachable!("checkpoint_schema has no {other} field"),
        }
    }

    fn append(&mut self, cell: Cell<'_>) {
        match (self, cell) {
            (Builder::String(b), Cell::String(v)) => b.append_option(v),
            (Builder::Long(b), Cell::Long(v)) => b.append_option(v),
            (Builder::Int(b), Cell::Int(v)) => b.append_option(v),
            (Builder::Bool(b), Cell::Bool(v)) => b.append_option(v),
            (Builder::Map(b), Cell::Map(v)) => {
                let valid = v.is_some();
                for (key, value) in v.into_iter().flatten() {
                    b.keys().append_value(key);
                    b.values().append_option(value);
                }
                b.append(valid)
                    .expect("keys and values are appended in pairs");
            }
            (Builder::List(b), Cell::List(v)) => match v {
                Some(items) => {
                    for item in items {
                        b.values().append_value(item);
                    }
                    b.append(true);
                }
                None => b.append(false),
            },
            (Builder::Struct(b), Cell::Struct(v)) => b.append(v),
            _ => unreachable!("a cell of the field's type"),
        }
    }

    fn append_null(&mut self) {
        match self {
            Builder::String(b) => b.append_null(),
            Builder::Long(b) => b.append_null(),
            Builder::Int(b) => b.append_null(),
            Builder::Bool(b) => b.append_null(),
            Builder::Map(b) => b.append(false).expect("no pending entries"),
            Builder::List(b) => b.append(false),
            Builder::Struct(b) => b.append(None),
        }
    }

    fn finish(&mut self) -> Result<ArrayRef> {
        Ok(match self {
            Builder::String(b) => Arc::new(b.finish()),
            Builder::Long(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Map(b) => Arc::new(b.finish()),
            Builder::List(b) => Arc::new(b.finish()),
            Builder::Struct(b) => Arc::new(b.finish()?),
        })
    }
}

/// A struct column being built: its fields' builders and which rows hold a value.
struct Column {
    fields: Fields,
    builders: Vec<Builder>,
    valid: Vec<bool>,
}

impl Column {
    fn new(fields: Fields) -> Self {
        let builders = fields.iter().map(|f| Builder::new(f.data_type())).collect();
        Column {
            fields,
            builders,
            valid: Vec::new(),
        }
    }

    /// Appends a row: the cells in the order of the fields, or `None` for a null struct (its
    /// fields are null too, which is what lets non-null fields sit in a nullable struct).
    fn append(&mut self, cells: Option<Vec<Cell<'_>>>) {
        self.valid.push(cells.is_some());
        match cells {
            Some(cells) => {
                debug_assert_eq!(cells.len(), self.builders.len());
                for (builder, cell) in self.builders.iter_mut().zip(cells) {
                    builder.append(cell);
                }
            }
            None => self.builders.iter_mut().for_each(Builder::append_null),
        }
    }

    fn finish(&mut self) -> Result<StructArray> {
        let columns = self
            .builders
            .iter_mut()
            .map(Builder::finish)
            .collect::<Result<Vec<_>>>()?;
        let nulls = NullBuffer::from(std::mem::take(&mut self.valid));
        Ok(StructArray::try_new(
            self.fields.clone(),
            columns,
            Some(nulls),
        )?)
    }
}

fn map_cells(map: &BTreeMap<String, Option<String>>) -> Vec<(&str, Option<&str>)> {
    map.iter()
        .map(|(k, v)| (k.as_str(), v.as_deref()))
        .collect()
}

/// The cells of `row` in the column `name`, or `None` when the row holds another action.
fn cells<'a>(name: &str, row: Row<'a>) -> Option<Vec<Cell<'a>>> {
    Some(match (name, row) {
        ("txn", Row::Txn(t)) => vec![
            Cell::String(Some(&t.app_id)),
            Cell::Long(Some(t.version)),
            Cell::Long(t.last_updated),
        ],
        ("add", Row::Add(a)) => vec![
            Cell::String(Some(&a.path)),
            Cell::Map(Some(map_cells(&a.partition_values))),
            Cell::Long(Some(a.size)),
            Cell::Long(Some(a.modification_time)),
            Cell::Bool(Some(false)),
            Cell::String(a.stats.as_deref()),
            Cell::Map(a.tags.as_ref().map(map_cells)),
        ],
        ("remove", Row::Remove(r)) => vec![
            Cell::String(Some(&r.path)),
            Cell::Long(r.deletion_timestamp),
            Cell::Bool(Some(r.data_change)),
            Cell::Bool(r.extended_file_metadata),
            Cell::Map(r.partition_values.as_ref().map(map_cells)),
            Cell::Long(r.size),
        ],
        ("metaData", Row::Metadata(m)) => vec![
            Cell::String(Some(&m.id)),
            Cell::String(m.name.as_deref()),
            Cell::String(m.description.as_deref()),
            Cell::Struct(Some(vec![
                Cell::String(Some(&m.format.provider)),
                Cell::Map(Some(map_cells(&m.format.options))),
            ])),
            Cell::String(Some(&m.schema_string)),
            Cell::List(Some(&m.partition_columns)),
            Cell::Map(Some(
                m.configuration
                    .iter()
                    .map(|(k, v)| (k.as_str(), Some(v.as_str())))
                    .collect(),
            )),
            Cell::Long(m.created_time),
        ],
        ("protocol", Row::Protocol(p)) => {
            // §Checkpoint Schema: the lists are set on reader 3 / writer 7 and null otherwise.
            let features = |version: bool, list: &'a Option<Vec<String>>| {
                version.then(|| list.as_deref().unwrap_or(&[]))
            };
            vec![
                Cell::Int(Some(p.min_reader_version)),
                Cell::Int(Some(p.min_writer_version)),
                Cell::List(features(p.min_reader_version == 3, &p.reader_features)),
                Cell::List(features(p.min_writer_version == 7, &p.writer_features)),
            ]
        }
        ("domainMetadata", Row::Domain(d)) => vec![
            Cell::String(Some(&d.domain)),
            Cell::String(Some(&d.configuration)),
            Cell::Bool(Some(d.removed)),
        ],
        _ => return None,
    })
}

/// One record batch of `rows`.
fn batch(schema: &SchemaRef, rows: &[Row<'_>]) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| {
            let DataType::Struct(fields) = field.data_type() else {
                unreachable!("every checkpoint column is a struct")
            };
            let mut column = Column::new(fields.clone());
            for &row in rows {
                column.append(cells(field.name(), row));
            }
            Ok(Arc::new(column.finish()?) as ArrayRef)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// `_delta_log/_last_checkpoint` (§Last Checkpoint File Schema): where the newest checkpoint
/// is, so a reader finds the log's end without listing it (design section 5).
///
/// Fields we do not use (`checkpointSchema`, `checksum`, `tags`, a V2 checkpoint's
/// `v2Checkpoint`) are kept in `extra`. The pointers filesink writes carry none of them (no
/// `checksum`: optional, design section 8); a pointer read from another engine is never
/// rendered again (its `checksum` would no longer match a changed field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LastCheckpoint {
    /// The table version of the checkpoint.
    pub(crate) version: i64,
    /// The number of actions (rows) in the checkpoint.
    pub(crate) size: i64,
    /// The number of parts of a multi-part checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parts: Option<i64>,
    /// The checkpoint's size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size_in_bytes: Option<i64>,
    /// The number of `add` actions in the checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) num_of_add_files: Option<i64>,
    /// Fields we do not use.
    #[serde(flatten)]
    pub(crate) extra: Extra,
}

impl LastCheckpoint {
    /// Parses `_last_checkpoint`; `what` names it for errors. Errors with [`Error::Corrupt`]
    /// when it is not a JSON object with a `version` and a `size`, or a field we use has
    /// another type.
    pub(crate) fn parse(bytes: &[u8], what: &str) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::corrupt(what, e.to_string()))
    }

    /// The file's content: one JSON object, fields in the order of the type, no newline
    /// (`{"version":40,"size":1214,"sizeInBytes":98211,"numOfAddFiles":1180}`).
    pub(crate) fn render(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("integers and JSON values serialize")
    }
}

/// `<version>.json`, the log entry of a version (§Delta Log Entries).
pub(crate) fn commit_file_name(version: i64) -> String {
    format!("{version:020}.json")
}

/// `<version>.checkpoint.parquet`, a classic checkpoint (§Classic checkpoint).
pub(crate) fn checkpoint_file_name(version: i64) -> String {
    format!("{version:020}.checkpoint.parquet")
}

/// `<version>.checkpoint.<part>.<parts>.parquet`, part `part` (from 1) of a multi-part
/// checkpoint (§Multi-part checkpoint).
pub(crate) fn checkpoint_part_file_name(version: i64, part: i32, parts: i32) -> String {
    format!("{version:020}.checkpoint.{part:010}.{parts:010}.parquet")
}

/// A file of `_delta_log/` that matters to a reader of the log, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFile {
    /// `<v>.json`: the entry of version `v`.
    Commit(i64),
    /// `<v>.checkpoint.parquet` (`part` `None`) or part `(i, n)` of a multi-part checkpoint
    /// `<v>.checkpoint.<i>.<n>.parquet`.
    Checkpoint {
        /// The version it holds.
        version: i64,
        /// `(part, parts)`, from 1, of a multi-part checkpoint.
        part: Option<(i32, i32)>,
    },
    /// `<v>.checkpoint.<uuid>.json|parquet`: a UUID-named V2 checkpoint (§UUID-named
    /// checkpoint), which filesink does not read; named so the reader can refuse it or skip it
    /// knowingly.
    V2Checkpoint(i64),
}

/// What a file name in `_delta_log/` is, or `None` for everything a reader of the log skips:
/// `_last_checkpoint`, `.crc` files (§Version Checksum File), log compaction files
/// (`<x>.<y>.compacted.json`, §Log Compaction Files), hidden and temporary files (names
/// starting with `.`), directories (`_sidecars`, `_staged_commits`) and anything unknown.
/// Versions are 20 digits (§Delta Log Entries: zero-padded to 20); the part numbers of a
/// multi-part checkpoint any number of digits, with `1 ≤ part ≤ parts`.
pub(crate) fn parse_log_file_name(name: &str) -> Option<LogFile> {
    fn digits(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
    let (version, rest) = name.split_at_checked(20)?;
    if !digits(version) {
        return None;
    }
    let version: i64 = version.parse().ok()?;
    let rest = rest.strip_prefix('.')?;
    if rest == "json" {
        return Some(LogFile::Commit(version));
    }
    let rest = rest.strip_prefix("checkpoint.")?;
    if rest == "parquet" {
        return Some(LogFile::Checkpoint {
            version,
            part: None,
        });
    }
    if let Some(middle) = rest.strip_suffix(".parquet") {
        if let Some((part, parts)) = middle.split_once('.') {
            if digits(part) && digits(parts) {
                let (part, parts): (i32, i32) = (part.parse().ok()?, parts.parse().ok()?);
                return (1 <= part && part <= parts).then_some(LogFile::Checkpoint {
                    version,
                    part: Some((part, parts)),
                });
            }
        }
    }
    let uuid = rest
        .strip_suffix(".parquet")
        .or_else(|| rest.strip_suffix(".json"))?;
    (!uuid.is_empty() && uuid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .then_some(LogFile::V2Checkpoint(version))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use arrow::array::{Float64Array, Int32Array, Int64Array, StringArray};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    fn protocol(reader: i32, writer: i32, features: Option<&[&str]>) -> Protocol {
        let list = features.map(|f| f.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        Protocol {
            min_reader_version: reader,
            min_writer_version: writer,
            reader_features: list.clone(),
            writer_features: list,
            extra: Extra::new(),
        }
    }

    fn metadata() -> Metadata {
        Metadata {
            id: "5f1c7a9e-3b2d-4c8e-9f0a-1b2c3d4e5f60".into(),
            name: Some("orders".into()),
            description: None,
            format: Format::parquet(),
            schema_string: r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"country","type":"string","nullable":true,"metadata":{}},{"name":"dt","type":"string","nullable":true,"metadata":{}}]}"#.into(),
            partition_columns: vec!["country".into(), "dt".into()],
            configuration: [
                ("delta.appendOnly".to_owned(), "false".to_owned()),
                ("delta.checkpointInterval".to_owned(), "10".to_owned()),
            ]
            .into(),
            created_time: Some(1_764_590_000_123),
            extra: Extra::new(),
        }
    }

    fn add(path: &str, country: Option<&str>, size: i64) -> Add {
        Add::new(
            path.into(),
            [
                ("country".to_owned(), country.map(str::to_owned)),
                ("dt".to_owned(), Some("2026-11-30".to_owned())),
            ]
            .into(),
            size,
            1_764_589_999_871,
            true,
            Some(format!(
                r#"{{"numRecords":{size},"minValues":{{"id":1}},"maxValues":{{"id":{size}}},"nullCount":{{"id":0}}}}"#
            )),
        )
    }

    fn remove(path: &str) -> Remove {
        Remove {
            path: path.into(),
            deletion_timestamp: Some(1_764_590_000_000),
            data_change: false,
            extended_file_metadata: Some(true),
            partition_values: Some(
                [
                    ("country".to_owned(), None),
                    ("dt".to_owned(), Some("2026-11-29".to_owned())),
                ]
                .into(),
            ),
            size: Some(1234),
            stats: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            extra: Extra::new(),
        }
    }

    fn txn(app: &str, version: i64, last_updated: Option<i64>) -> Txn {
        Txn {
            app_id: app.into(),
            version,
            last_updated,
            extra: Extra::new(),
        }
    }

    fn domain(name: &str, removed: bool) -> DomainMetadata {
        DomainMetadata {
            domain: name.into(),
            configuration: r#"{"k":"v"}"#.into(),
            removed,
            extra: Extra::new(),
        }
    }

    struct Owned {
        protocol: Protocol,
        metadata: Metadata,
        txns: Vec<Txn>,
        adds: Vec<Add>,
        removes: Vec<Remove>,
        domain_metadata: Vec<DomainMetadata>,
    }

    impl Owned {
        fn content(&self) -> CheckpointContent<'_> {
            CheckpointContent {
                protocol: &self.protocol,
                metadata: &self.metadata,
                txns: &self.txns,
                adds: &self.adds,
                removes: &self.removes,
                domain_metadata: &self.domain_metadata,
            }
        }
    }

    fn state(protocol: Protocol) -> Owned {
        let mut tagged = add("country=FR/dt=2026-11-30/part-c.parquet", Some("FR"), 3);
        tagged.tags = Some([("INSERTION_TIME".to_owned(), Some("1".to_owned()))].into());
        tagged.stats = None;
        Owned {
            protocol,
            metadata: metadata(),
            txns: vec![
                txn("filesink-0193-orders", 42, Some(1_764_590_000_123)),
                txn("another-app", 7, None),
            ],
            adds: vec![
                add("country=DE/dt=2026-11-30/part-a.parquet", Some("DE"), 1),
                add(
                    "country=__HIVE_DEFAULT_PARTITION__/dt=2026-11-30/part-b.parquet",
                    None,
                    2,
                ),
                add(
                    "country=a%2520b%2525c/dt=2026-11-30/part-d.parquet",
                    Some("a b%c"),
                    4,
                ),
                tagged,
            ],
            removes: vec![remove(
                "country=__HIVE_DEFAULT_PARTITION__/dt=2026-11-29/part-x.parquet",
            )],
            domain_metadata: vec![domain("delta.live", false), domain("delta.gone", true)],
        }
    }

    /// What reading back `state`'s checkpoint must give.
    fn expected(state: &Owned) -> Entry {
        let mut protocol = state.protocol.clone();
        if protocol.min_reader_version != 3 {
            protocol.reader_features = None;
        } else if protocol.reader_features.is_none() {
            protocol.reader_features = Some(Vec::new());
        }
        if protocol.min_writer_version != 7 {
            protocol.writer_features = None;
        } else if protocol.writer_features.is_none() {
            protocol.writer_features = Some(Vec::new());
        }
        Entry {
            protocol: Some(protocol),
            metadata: Some(state.metadata.clone()),
            txns: state.txns.clone(),
            domain_metadata: state
                .domain_metadata
                .iter()
                .filter(|d| !d.removed)
                .cloned()
                .collect(),
            removes: state.removes.clone(),
            adds: state
                .adds
                .iter()
                .map(|a| Add {
                    data_change: false,
                    ..a.clone()
                })
                .collect(),
            ..Entry::default()
        }
    }

    const WHAT: &str = "_delta_log/00000000000000000010.checkpoint.parquet";

    fn read_one(bytes: Vec<u8>) -> Result<Entry> {
        read_checkpoint(&[Bytes::from(bytes)], WHAT)
    }

    #[test]
    fn written_checkpoints_read_back() {
        for protocol in [
            protocol(1, 2, None),
            // Lists on a table without features are written null.
            protocol(1, 2, Some(&["appendOnly"])),
            protocol(3, 7, Some(&["timestampNtz", "domainMetadata"])),
            // Reader 3 / writer 7 always have the lists, empty when there are none.
            protocol(3, 7, None),
            protocol(2, 5, None),
        ] {
            let state = state(protocol);
            let bytes = write_checkpoint(&state.content()).unwrap();
            assert_eq!(read_one(bytes).unwrap(), expected(&state));
        }
    }

    #[test]
    fn small_row_groups_keep_every_row_in_order() {
        let mut state = state(protocol(1, 2, None));
        state.adds = (0..20_000)
            .map(|i| {
                add(
                    &format!("country=DE/dt=2026-11-30/part-{i}.parquet"),
                    Some("DE"),
                    i,
                )
            })
            .collect();
        let bytes = write_with_row_groups(&state.content(), 7_000).unwrap();
        let reader = SerializedFileReader::new(Bytes::from(bytes.clone())).unwrap();
        let groups: Vec<i64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, [7_000, 7_000, 6_006]);
        assert_eq!(read_one(bytes).unwrap(), expected(&state));
    }

    /// The Parquet schema of design section 8, as Spark and delta-rs name maps and lists.
    #[test]
    fn written_schema_is_the_designs() {
        let state = state(protocol(1, 2, None));
        let bytes = write_checkpoint(&state.content()).unwrap();
        let reader = SerializedFileReader::new(Bytes::from(bytes)).unwrap();
        let metadata = reader.metadata();
        let mut printed = Vec::new();
        parquet::schema::printer::print_schema(
            &mut printed,
            metadata.file_metadata().schema_descr().root_schema(),
        );
        let printed = String::from_utf8(printed).unwrap();
        assert_eq!(printed, GOLDEN_SCHEMA, "{printed}");
        assert!(metadata.file_metadata().key_value_metadata().is_none());
        for column in metadata.row_group(0).columns() {
            assert_eq!(column.compression(), Compression::SNAPPY);
        }
    }

    const GOLDEN_SCHEMA: &str = r#"message arrow_schema {
  OPTIONAL group txn {
    REQUIRED BYTE_ARRAY appId (STRING);
    REQUIRED INT64 version;
    OPTIONAL INT64 lastUpdated;
  }
  OPTIONAL group add {
    REQUIRED BYTE_ARRAY path (STRING);
    REQUIRED group partitionValues (MAP) {
      REPEATED group key_value {
        REQUIRED BYTE_ARRAY key (STRING);
        OPTIONAL BYTE_ARRAY value (STRING);
      }
    }
    REQUIRED INT64 size;
    REQUIRED INT64 modificationTime;
    REQUIRED BOOLEAN dataChange;
    OPTIONAL BYTE_ARRAY stats (STRING);
    OPTIONAL group tags (MAP) {
      REPEATED group key_value {
        REQUIRED BYTE_ARRAY key (STRING);
        OPTIONAL BYTE_ARRAY value (STRING);
      }
    }
  }
  OPTIONAL group remove {
    REQUIRED BYTE_ARRAY path (STRING);
    OPTIONAL INT64 deletionTimestamp;
    REQUIRED BOOLEAN dataChange;
    OPTIONAL BOOLEAN extendedFileMetadata;
    OPTIONAL group partitionValues (MAP) {
      REPEATED group key_value {
        REQUIRED BYTE_ARRAY key (STRING);
        OPTIONAL BYTE_ARRAY value (STRING);
      }
    }
    OPTIONAL INT64 size;
  }
  OPTIONAL group metaData {
    REQUIRED BYTE_ARRAY id (STRING);
    OPTIONAL BYTE_ARRAY name (STRING);
    OPTIONAL BYTE_ARRAY description (STRING);
    REQUIRED group format {
      REQUIRED BYTE_ARRAY provider (STRING);
      REQUIRED group options (MAP) {
        REPEATED group key_value {
          REQUIRED BYTE_ARRAY key (STRING);
          OPTIONAL BYTE_ARRAY value (STRING);
        }
      }
    }
    REQUIRED BYTE_ARRAY schemaString (STRING);
    REQUIRED group partitionColumns (LIST) {
      REPEATED group list {
        REQUIRED BYTE_ARRAY element (STRING);
      }
    }
    REQUIRED group configuration (MAP) {
      REPEATED group key_value {
        REQUIRED BYTE_ARRAY key (STRING);
        OPTIONAL BYTE_ARRAY value (STRING);
      }
    }
    OPTIONAL INT64 createdTime;
  }
  OPTIONAL group protocol {
    REQUIRED INT32 minReaderVersion;
    REQUIRED INT32 minWriterVersion;
    OPTIONAL group readerFeatures (LIST) {
      REPEATED group list {
        REQUIRED BYTE_ARRAY element (STRING);
      }
    }
    OPTIONAL group writerFeatures (LIST) {
      REPEATED group list {
        REQUIRED BYTE_ARRAY element (STRING);
      }
    }
  }
  OPTIONAL group domainMetadata {
    REQUIRED BYTE_ARRAY domain (STRING);
    REQUIRED BYTE_ARRAY configuration (STRING);
    REQUIRED BOOLEAN removed;
  }
}
"#;

    #[test]
    fn adds_a_checkpoint_cannot_hold_are_refused() {
        let mut state = state(protocol(1, 2, None));
        state.adds[1].deletion_vector = Some(serde_json::json!({"storageType": "u"}));
        let err = write_checkpoint(&state.content()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("part-b.parquet")),
            "{err:?}"
        );
    }

    /// A Parquet file of `columns` (no stored Arrow schema, like other engines' checkpoints).
    fn parquet_of(columns: Vec<(&str, ArrayRef)>) -> Bytes {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut out = Vec::new();
        let options = ArrowWriterOptions::new().with_skip_arrow_metadata(true);
        let mut writer =
            ArrowWriter::try_new_with_options(&mut out, batch.schema(), options).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        Bytes::from(out)
    }

    /// A struct column of nullable fields, valid where `valid` says.
    fn structure(fields: Vec<(&str, ArrayRef)>, valid: &[bool]) -> ArrayRef {
        let (fields, arrays): (Vec<_>, Vec<_>) = fields
            .into_iter()
            .map(|(name, array)| (Field::new(name, array.data_type().clone(), true), array))
            .unzip();
        Arc::new(
            StructArray::try_new(
                fields.into(),
                arrays,
                Some(NullBuffer::from(valid.to_vec())),
            )
            .unwrap(),
        )
    }

    fn strings(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    fn longs(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    /// The entries of one map cell.
    type Pairs<'a> = &'a [(&'a str, Option<&'a str>)];

    fn maps(rows: &[Option<Pairs<'_>>]) -> ArrayRef {
        let mut b = MapBuilder::new(
            Some(map_names()),
            StringBuilder::new(),
            StringBuilder::new(),
        );
        for row in rows {
            for (k, v) in row.iter().copied().flatten() {
                b.keys().append_value(k);
                b.values().append_option(*v);
            }
            b.append(row.is_some()).unwrap();
        }
        Arc::new(b.finish())
    }

    /// Rows: protocol, metaData, add, checkpointMetadata; in the shapes of other writers.
    fn odd_checkpoint(add_fields: Vec<(&str, ArrayRef)>) -> Bytes {
        let only = |i: usize| -> Vec<bool> { (0..4).map(|r| r == i).collect() };
        parquet_of(vec![
            (
                "protocol",
                structure(
                    vec![
                        // Int64 where Int32 is usual.
                        ("minReaderVersion", longs(&[Some(1), None, None, None])),
                        ("minWriterVersion", longs(&[Some(2), None, None, None])),
                    ],
                    &only(0),
                ),
            ),
            (
                "metaData",
                structure(
                    vec![
                        ("id", strings(&[None, Some("t-1"), None, None])),
                        (
                            "format",
                            structure(
                                vec![("provider", strings(&[None, Some("parquet"), None, None]))],
                                &only(1),
                            ),
                        ),
                        ("schemaString", strings(&[None, Some("{}"), None, None])),
                    ],
                    &only(1),
                ),
            ),
            ("add", structure(add_fields, &only(2))),
            ("futureAction", Arc::new(Float64Array::from(vec![1.5; 4]))),
            (
                "checkpointMetadata",
                structure(
                    vec![
                        ("version", longs(&[None, None, None, Some(10)])),
                        ("tags", maps(&[None, None, None, Some(&[("a", Some("b"))])])),
                    ],
                    &only(3),
                ),
            ),
        ])
    }

    fn minimal_add_fields() -> Vec<(&'static str, ArrayRef)> {
        vec![
            ("path", strings(&[None, None, Some("p.parquet"), None])),
            (
                "partitionValues",
                maps(&[None, None, Some(&[("c", None), ("d", Some("x"))]), None]),
            ),
            ("size", longs(&[None, None, Some(5), None])),
            ("modificationTime", longs(&[None, None, Some(6), None])),
        ]
    }

    /// §Protocol Evolution and §Checkpoints: unknown columns and fields are ignored, missing
    /// optional ones read as null, `stats_parsed` is never decoded, a deletion vector is kept.
    #[test]
    fn other_writers_shapes_are_read_tolerantly() {
        let mut fields = minimal_add_fields();
        fields.push((
            "stats_parsed",
            structure(
                vec![("numRecords", longs(&[None, None, Some(3), None]))],
                &[false, false, true, false],
            ),
        ));
        fields.push((
            "deletionVector",
            structure(
                vec![
                    ("storageType", strings(&[None, None, Some("u"), None])),
                    (
                        "pathOrInlineDv",
                        strings(&[None, None, Some("ab^-aqEH.-t@S}K{vb[*k^"), None]),
                    ),
                    (
                        "offset",
                        Arc::new(Int32Array::from(vec![None, None, Some(4), None])),
                    ),
                    ("cardinality", longs(&[None, None, Some(6), None])),
                ],
                &[false, false, true, false],
            ),
        ));
        fields.push(("futureField", Arc::new(Float64Array::from(vec![2.5; 4]))));
        let entry = read_checkpoint(&[odd_checkpoint(fields)], WHAT).unwrap();
        let protocol = entry.protocol.unwrap();
        assert_eq!(
            (protocol.min_reader_version, protocol.min_writer_version),
            (1, 2)
        );
        assert_eq!(protocol.reader_features, None);
        let metadata = entry.metadata.unwrap();
        assert_eq!(metadata.id, "t-1");
        assert!(metadata.partition_columns.is_empty() && metadata.configuration.is_empty());
        assert!(metadata.format.options.is_empty());
        let [add] = &entry.adds[..] else {
            panic!("{:?}", entry.adds)
        };
        assert_eq!(add.path, "p.parquet");
        assert_eq!(
            add.partition_values,
            [
                ("c".to_owned(), None),
                ("d".to_owned(), Some("x".to_owned()))
            ]
            .into()
        );
        assert_eq!(
            (add.size, add.modification_time, add.data_change),
            (5, 6, false)
        );
        assert_eq!((&add.stats, &add.tags), (&None, &None));
        assert_eq!(
            add.deletion_vector,
            Some(serde_json::json!({
                "storageType": "u",
                "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                "offset": 4,
                "cardinality": 6
            }))
        );
        assert!(add.extra.is_empty());
        assert_eq!(
            entry.other,
            [(
                "checkpointMetadata".to_owned(),
                serde_json::json!({"version": 10, "tags": {"a": "b"}})
            )]
        );
        assert!(entry.txns.is_empty() && entry.removes.is_empty());
        assert!(entry.domain_metadata.is_empty() && entry.commit_info.is_none());
    }

    fn assert_corrupt(result: Result<Entry>, what: &str, reason: &str) {
        match result {
            Err(Error::Corrupt { what: w, reason: r }) => {
                assert_eq!(w, what);
                assert!(r.contains(reason), "{r:?} lacks {reason:?}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn malformed_checkpoints_are_corrupt_naming_the_file_and_row() {
        assert_corrupt(
            read_checkpoint(&[Bytes::from_static(b"PAR1 not really")], WHAT),
            WHAT,
            "not a Parquet checkpoint",
        );
        let mut fields = minimal_add_fields();
        fields[2] = ("size", strings(&[None, None, Some("5"), None]));
        assert_corrupt(
            read_checkpoint(&[odd_checkpoint(fields)], WHAT),
            &format!("{WHAT}, row 3"),
            "`add.size` is a Utf8, not a long",
        );
        let mut fields = minimal_add_fields();
        fields[0] = ("path", strings(&[None, None, None, None]));
        assert_corrupt(
            read_checkpoint(&[odd_checkpoint(fields)], WHAT),
            &format!("{WHAT}, row 3"),
            "`add.path` is missing or null",
        );
        let mut fields = minimal_add_fields();
        fields[1] = ("partitionValues", longs(&[None, None, Some(1), None]));
        assert_corrupt(
            read_checkpoint(&[odd_checkpoint(fields)], WHAT),
            &format!("{WHAT}, row 3"),
            "`add.partitionValues` is a Int64, not a map of strings",
        );
        // An action column that is not a struct.
        let bytes = parquet_of(vec![("protocol", longs(&[Some(1)]))]);
        assert_corrupt(
            read_checkpoint(&[bytes], WHAT),
            WHAT,
            "`protocol` is a Int64",
        );
        // No protocol.
        let bytes = parquet_of(vec![(
            "txn",
            structure(
                vec![
                    ("appId", strings(&[Some("a")])),
                    ("version", longs(&[Some(1)])),
                ],
                &[true],
            ),
        )]);
        assert_corrupt(
            read_checkpoint(&[bytes], WHAT),
            WHAT,
            "no `protocol` action",
        );
        assert!(matches!(
            read_checkpoint(&[], WHAT),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn sidecars_are_refused() {
        let mut columns = vec![(
            "sidecar",
            structure(
                vec![
                    ("path", strings(&[Some("3a0d65cd.parquet")])),
                    ("sizeInBytes", longs(&[Some(1)])),
                ],
                &[true],
            ),
        )];
        let err = read_checkpoint(&[parquet_of(columns.clone())], WHAT).unwrap_err();
        assert!(
            matches!(&err, Error::NotSupported(m) if m.contains("sidecar")),
            "{err:?}"
        );
        // A null `sidecar` column (delta-rs writes one in V1 checkpoints) is fine.
        columns[0].1 = structure(
            vec![("path", strings(&[None])), ("sizeInBytes", longs(&[None]))],
            &[false],
        );
        let state = state(protocol(1, 2, None));
        let ours = Bytes::from(write_checkpoint(&state.content()).unwrap());
        read_checkpoint(&[ours, parquet_of(columns)], WHAT).unwrap();
    }

    #[test]
    fn parts_are_read_in_order_and_hold_one_protocol_and_metadata() {
        let state = state(protocol(1, 2, None));
        let ours = Bytes::from(write_checkpoint(&state.content()).unwrap());
        let txn_part = parquet_of(vec![(
            "txn",
            structure(
                vec![
                    ("appId", strings(&[Some("late"), None])),
                    ("version", longs(&[Some(9), None])),
                ],
                &[true, false],
            ),
        )]);
        let entry = read_checkpoint(&[ours.clone(), txn_part.clone()], WHAT).unwrap();
        let mut want = expected(&state);
        want.txns.push(txn("late", 9, None));
        assert_eq!(entry, want);
        let entry = read_checkpoint(&[txn_part, ours.clone()], WHAT).unwrap();
        assert_eq!(entry.txns[0].app_id, "late");
        assert_corrupt(
            read_checkpoint(&[ours.clone(), ours], WHAT),
            &format!("{WHAT}, part 2 of 2, row 1"),
            "a second `protocol`",
        );
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/delta")
            .join(name)
            .join("_delta_log")
    }

    /// The snapshot at `version` by replaying the JSON entries of `log` (§Action
    /// Reconciliation, the parts of it a checkpoint needs).
    fn replay(log: &Path, version: i64) -> Entry {
        let mut protocol = None;
        let mut metadata = None;
        let mut txns = BTreeMap::new();
        let mut adds = BTreeMap::new();
        let mut removes = BTreeMap::new();
        for v in 0..=version {
            let name = commit_file_name(v);
            let bytes = std::fs::read(log.join(&name)).unwrap();
            let entry = Entry::parse(&bytes, &name).unwrap();
            protocol = entry.protocol.or(protocol);
            metadata = entry.metadata.or(metadata);
            for t in entry.txns {
                txns.insert(t.app_id.clone(), t);
            }
            for r in entry.removes {
                adds.remove(&r.path);
                removes.insert(r.path.clone(), r);
            }
            for a in entry.adds {
                removes.remove(&a.path);
                adds.insert(a.path.clone(), a);
            }
        }
        Entry {
            protocol,
            metadata,
            txns: txns.into_values().collect(),
            adds: adds.into_values().collect(),
            removes: removes.into_values().collect(),
            ..Entry::default()
        }
    }

    /// `checkpoint` holds what replaying the log up to `version` gives, compared field by
    /// field (`dataChange` means nothing in a checkpoint; delta-rs writes `true`).
    fn assert_same_snapshot(checkpoint: &Entry, replayed: &Entry) {
        assert_eq!(checkpoint.protocol, replayed.protocol);
        assert_eq!(checkpoint.metadata, replayed.metadata);
        let mut txns = checkpoint.txns.clone();
        txns.sort_by(|a, b| a.app_id.cmp(&b.app_id));
        assert_eq!(txns, replayed.txns);
        let key = |a: &Add| {
            (
                a.path.clone(),
                a.partition_values.clone(),
                a.size,
                a.modification_time,
                a.stats.clone(),
                a.tags.clone().filter(|t| !t.is_empty()),
                a.deletion_vector.is_some(),
            )
        };
        let mut adds: Vec<_> = checkpoint.adds.iter().map(key).collect();
        adds.sort();
        assert_eq!(adds, replayed.adds.iter().map(key).collect::<Vec<_>>());
        let key = |r: &Remove| {
            (
                r.path.clone(),
                r.deletion_timestamp,
                r.partition_values.clone(),
                r.size,
                r.extended_file_metadata,
            )
        };
        let mut removes: Vec<_> = checkpoint.removes.iter().map(key).collect();
        removes.sort();
        assert_eq!(
            removes,
            replayed.removes.iter().map(key).collect::<Vec<_>>()
        );
        assert!(checkpoint.commit_info.is_none() && checkpoint.other.is_empty());
    }

    fn read_fixture(log: &Path) -> (LastCheckpoint, Entry) {
        let last = LastCheckpoint::parse(
            &std::fs::read(log.join("_last_checkpoint")).unwrap(),
            "_last_checkpoint",
        )
        .unwrap();
        let names: Vec<String> = match last.parts {
            None => vec![checkpoint_file_name(last.version)],
            Some(n) => (1..=n as i32)
                .map(|i| checkpoint_part_file_name(last.version, i, n as i32))
                .collect(),
        };
        let parts: Vec<Bytes> = names
            .iter()
            .map(|n| Bytes::from(std::fs::read(log.join(n)).unwrap()))
            .collect();
        let entry = read_checkpoint(&parts, &names[0]).unwrap();
        (last, entry)
    }

    /// delta-rs's own classic checkpoint of a partitioned table (a null partition value, one
    /// with a space and `%`, a `txn`, a tombstone) holds what its JSON entries replay to.
    #[test]
    fn delta_rs_checkpoint_matches_its_log() {
        let log = fixture("partitioned");
        let (last, entry) = read_fixture(&log);
        assert_eq!(last.version, 5);
        assert_eq!(entry.adds.len() as i64, last.num_of_add_files.unwrap());
        let replayed = replay(&log, last.version);
        assert_same_snapshot(&entry, &replayed);
        // What the fixture was made to hold (fixtures/delta/make_fixtures.py).
        let values: Vec<_> = entry
            .adds
            .iter()
            .map(|a| a.partition_values["country"].as_deref())
            .collect();
        for value in [Some("DE"), None, Some("a b%c"), Some("IT")] {
            assert!(values.contains(&value), "{value:?} in {values:?}");
        }
        assert_eq!(
            entry.txns,
            [txn("filesink-fixture-orders", 7, Some(1_764_590_000_000))]
        );
        assert_eq!(entry.removes.len(), 1);
        let metadata = entry.metadata.as_ref().unwrap();
        assert_eq!(metadata.partition_columns, ["country"]);
        assert_eq!(metadata.configuration["delta.appendOnly"], "false");
    }

    /// The same checkpoint, split into two parts with delta-rs's schema.
    #[test]
    fn multi_part_checkpoint_matches_the_log() {
        let (last, entry) = read_fixture(&fixture("multipart"));
        assert_eq!((last.version, last.parts), (5, Some(2)));
        assert_same_snapshot(&entry, &replay(&fixture("partitioned"), 5));
    }

    /// Protocol (3, 7) with `timestampNtz`, and `stats_parsed` / `partitionValues_parsed`
    /// (`delta.checkpoint.writeStatsAsStruct`) beside the JSON `stats`.
    #[test]
    fn delta_rs_checkpoint_with_features_and_parsed_stats_matches_its_log() {
        let log = fixture("features");
        let (last, entry) = read_fixture(&log);
        assert_same_snapshot(&entry, &replay(&log, last.version));
        let protocol = entry.protocol.as_ref().unwrap();
        assert_eq!(
            (protocol.min_reader_version, protocol.min_writer_version),
            (3, 7)
        );
        assert_eq!(
            protocol.reader_features.as_deref(),
            Some(&["timestampNtz".to_owned()][..])
        );
        assert!(entry.adds.iter().all(|a| a.stats.is_some()));
    }

    /// Our checkpoint of delta-rs's table, read back by us; with `FILESINK_DELTA_PYTHON` set
    /// (the Python of `scripts/test`, with deltalake), also by delta-rs, through
    /// `fixtures/delta/check_our_checkpoint.py`: the table's log is copied to a temporary
    /// directory, the JSON entries up to the checkpoint's version are deleted, our checkpoint
    /// and `_last_checkpoint` written, and delta-rs must see the same files, partition values,
    /// protocol, metadata and `txn` as in the original log.
    #[test]
    fn our_checkpoint_of_a_delta_rs_table_is_read_by_delta_rs() {
        let python = std::env::var_os("FILESINK_DELTA_PYTHON");
        if python.is_none() {
            eprintln!(
                "NOTICE: FILESINK_DELTA_PYTHON is not set; delta-rs does not read our \
                 checkpoints in this run (fixtures/delta/README.md)"
            );
        }
        for name in ["partitioned", "features"] {
            let log = fixture(name);
            let version = read_fixture(&log).0.version;
            let replayed = replay(&log, version);
            let content = CheckpointContent {
                protocol: replayed.protocol.as_ref().unwrap(),
                metadata: replayed.metadata.as_ref().unwrap(),
                txns: &replayed.txns,
                adds: &replayed.adds,
                removes: &replayed.removes,
                domain_metadata: &[],
            };
            let bytes = write_checkpoint(&content).unwrap();
            assert_same_snapshot(&read_one(bytes.clone()).unwrap(), &replayed);
            if let Some(python) = &python {
                delta_rs_reads(python, &log, version, &content, &bytes);
            }
        }
    }

    /// Runs `fixtures/delta/check_our_checkpoint.py` on a copy of `log` that starts at our
    /// checkpoint `bytes` of `version`.
    fn delta_rs_reads(
        python: &std::ffi::OsStr,
        log: &Path,
        version: i64,
        content: &CheckpointContent<'_>,
        bytes: &[u8],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("table");
        let target = table.join("_delta_log");
        std::fs::create_dir_all(&target).unwrap();
        // The checkpoint's own version keeps its JSON entry (design section 13, `delta_log`).
        for v in version.. {
            let name = commit_file_name(v);
            if !log.join(&name).exists() {
                break;
            }
            std::fs::copy(log.join(&name), target.join(&name)).unwrap();
        }
        std::fs::write(target.join(checkpoint_file_name(version)), bytes).unwrap();
        let rows = 2 + content.txns.len() + content.adds.len() + content.removes.len();
        let pointer = LastCheckpoint {
            version,
            size: rows as i64,
            parts: None,
            size_in_bytes: Some(bytes.len() as i64),
            num_of_add_files: Some(content.adds.len() as i64),
            extra: Extra::new(),
        };
        std::fs::write(target.join("_last_checkpoint"), pointer.render()).unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/delta/check_our_checkpoint.py");
        let output = std::process::Command::new(python)
            .arg(&script)
            .arg(&table)
            .arg(log.parent().unwrap())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}: {}\n{}",
            log.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("{}", String::from_utf8_lossy(&output.stdout).trim());
    }

    #[test]
    fn last_checkpoint_round_trips_and_keeps_unknown_fields() {
        let ours = LastCheckpoint {
            version: 40,
            size: 1214,
            parts: None,
            size_in_bytes: Some(98_211),
            num_of_add_files: Some(1180),
            extra: Extra::new(),
        };
        let text = ours.render();
        assert_eq!(
            std::str::from_utf8(&text).unwrap(),
            r#"{"version":40,"size":1214,"sizeInBytes":98211,"numOfAddFiles":1180}"#
        );
        assert_eq!(LastCheckpoint::parse(&text, "l").unwrap(), ours);

        let spark = br#"{"version":10,"size":13,"parts":3,"sizeInBytes":5,"numOfAddFiles":9,
            "checkpointSchema":{"type":"struct","fields":[]},"tags":{"a":"b"},
            "checksum":"ab12","v2Checkpoint":{"path":"x.json"}}"#;
        let parsed = LastCheckpoint::parse(spark, "l").unwrap();
        assert_eq!(
            (parsed.version, parsed.size, parsed.parts),
            (10, 13, Some(3))
        );
        let keys: Vec<_> = parsed.extra.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["checkpointSchema", "checksum", "tags", "v2Checkpoint"]
        );

        for bad in [&b"{}"[..], b"{\"version\":\"1\",\"size\":1}", b"", b"[1]"] {
            let err = LastCheckpoint::parse(bad, "_delta_log/_last_checkpoint").unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { what, .. } if what == "_delta_log/_last_checkpoint"),
                "{err:?}"
            );
        }
    }

    #[test]
    fn log_file_names() {
        assert_eq!(commit_file_name(7), "00000000000000000007.json");
        assert_eq!(
            checkpoint_file_name(10),
            "00000000000000000010.checkpoint.parquet"
        );
        assert_eq!(
            checkpoint_part_file_name(10, 2, 3),
            "00000000000000000010.checkpoint.0000000002.0000000003.parquet"
        );
        let cases = [
            ("00000000000000000007.json", Some(LogFile::Commit(7))),
            (
                "00000000000000000010.checkpoint.parquet",
                Some(LogFile::Checkpoint {
                    version: 10,
                    part: None,
                }),
            ),
            (
                "00000000000000000010.checkpoint.0000000002.0000000003.parquet",
                Some(LogFile::Checkpoint {
                    version: 10,
                    part: Some((2, 3)),
                }),
            ),
            (
                "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
                Some(LogFile::V2Checkpoint(10)),
            ),
            (
                "00000000000000000020.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet",
                Some(LogFile::V2Checkpoint(20)),
            ),
            ("09223372036854775807.json", Some(LogFile::Commit(i64::MAX))),
            ("09223372036854775808.json", None),
            (
                "00000000000000000010.checkpoint.0000000004.0000000003.parquet",
                None,
            ),
            (
                "00000000000000000010.checkpoint.0000000000.0000000003.parquet",
                None,
            ),
            ("00000000000000000007.crc", None),
            (
                "00000000000000000004.00000000000000000007.compacted.json",
                None,
            ),
            ("_last_checkpoint", None),
            ("_sidecars", None),
            ("_staged_commits", None),
            (".00000000000000000007.json.crc", None),
            (".00000000000000000007.json.3f2a.tmp", None),
            ("00000000000000000007.json.tmp", None),
            ("0000000000000000007.json", None),
            ("000000000000000000007.json", None),
            ("0000000000000000000x.json", None),
            ("00000000000000000010.checkpoint..parquet", None),
            ("00000000000000000010.checkpoint.parquet.crc", None),
            ("", None),
            ("ü0000000000000000000.json", None),
        ];
        for (name, want) in cases {
            assert_eq!(parse_log_file_name(name), want, "{name}");
        }
    }
}
