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
mod tests;
