//! Arrow schema → Delta schema (`metaData.schemaString`, §Schema Serialization Format), and the
//! check that a job's schema fits a table's.
//!
//! The conversion table is section 7 of `docs/design/delta.md`: signed integers, floats,
//! strings, binary, `Date32`, microsecond timestamps (with a time zone → `timestamp`, without →
//! `timestamp_ntz`, which needs the `timestampNtz` table feature), `Decimal128`, structs, lists
//! and maps. Everything else is refused with [`Error::NotSupported`] naming the column and its
//! Arrow type, before anything is written. Field metadata is always written empty (`{}`):
//! filesink writes no column mapping, invariants, generated or identity columns.
//!
//! A table's columns are the job's data columns in schema order, then its partition columns
//! (taken out of the data, as Delta expects: their values live in `partitionValues`), then the
//! time directories of `--partition-by-time` as nullable `string` columns.
//!
//! [`check_compatible`] decides whether a job may append to an existing table: the table's
//! schema must equal the job's, except that the table may have extra *nullable* columns
//! (readers fill them with nulls, §Consistency Between Table Metadata and Data Files) and may
//! be more permissive about nulls than the job; the partition columns must be the same list.

use std::collections::HashMap;

use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Characters a column name must not contain: Spark cannot read such names without column
/// mapping, which filesink does not write.
const FORBIDDEN_NAME_CHARS: &[char] = &[' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='];

/// Largest precision of a Delta `decimal`.
const DECIMAL_PRECISION_MAX: u8 = 38;

/// A Delta data type as it appears in a `schemaString`: a primitive type name (`"long"`,
/// `"decimal(10,2)"`, `"timestamp_ntz"`, …) or a struct, array or map object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum DeltaType {
    /// A primitive type, by its name.
    Primitive(String),
    /// `{"type":"struct","fields":[…]}`.
    Struct(Box<StructType>),
    /// `{"type":"array","elementType":…,"containsNull":…}`.
    Array(Box<ArrayType>),
    /// `{"type":"map","keyType":…,"valueType":…,"valueContainsNull":…}`.
    Map(Box<MapType>),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum StructTag {
    #[serde(rename = "struct")]
    Struct,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum ArrayTag {
    #[serde(rename = "array")]
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum MapTag {
    #[serde(rename = "map")]
    Map,
}

/// A struct: the whole table schema, or a struct column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StructType {
    #[serde(rename = "type")]
    tag: StructTag,
    /// The fields, in order.
    pub(crate) fields: Vec<StructField>,
}

impl Default for StructType {
    /// A struct without fields.
    fn default() -> Self {
        StructType {
            tag: StructTag::Struct,
            fields: Vec::new(),
        }
    }
}

/// One (possibly nested) column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StructField {
    /// The column name.
    pub(crate) name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub(crate) data_type: DeltaType,
    /// Whether it may hold nulls.
    pub(crate) nullable: bool,
    /// Column metadata (column mapping, invariants, generated and identity columns, …); what
    /// filesink writes is always empty.
    #[serde(default)]
    pub(crate) metadata: serde_json::Map<String, serde_json::Value>,
}

/// An array column's type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArrayType {
    #[serde(rename = "type")]
    tag: ArrayTag,
    /// The type of the elements.
    #[serde(rename = "elementType")]
    pub(crate) element_type: DeltaType,
    /// Whether an element may be null.
    #[serde(rename = "containsNull")]
    pub(crate) contains_null: bool,
}

/// A map column's type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MapType {
    #[serde(rename = "type")]
    tag: MapTag,
    /// The type of the keys (never null).
    #[serde(rename = "keyType")]
    pub(crate) key_type: DeltaType,
    /// The type of the values.
    #[serde(rename = "valueType")]
    pub(crate) value_type: DeltaType,
    /// Whether a value may be null.
    #[serde(rename = "valueContainsNull")]
    pub(crate) value_contains_null: bool,
}

impl StructType {
    /// A struct of these fields.
    pub(crate) fn new(fields: Vec<StructField>) -> Self {
        StructType {
            tag: StructTag::Struct,
            fields,
        }
    }

    /// Parses a `schemaString`. `what` names where it came from for the error, e.g.
    /// "`metaData.schemaString` of `_delta_log/00000000000000000000.json`".
    pub(crate) fn parse(schema_string: &str, what: &str) -> Result<Self> {
        serde_json::from_str(schema_string).map_err(|e| Error::corrupt(what, e.to_string()))
    }

    /// The `schemaString`: compact JSON, fields in order, keys in Spark's order.
    pub(crate) fn to_schema_string(&self) -> String {
        serde_json::to_string(self).expect("a Delta schema always serializes")
    }

    #[allow(dead_code)] // for compaction and vacuum (docs/design/delta.md, steps 11-13)
    /// The top-level field called exactly `name`.
    pub(crate) fn field(&self, name: &str) -> Option<&StructField> {
        self.fields.iter().find(|f| f.name == name)
    }

    #[allow(dead_code)] // for compaction and vacuum (docs/design/delta.md, steps 11-13)
    /// Whether a column of type `timestamp_ntz` occurs anywhere, at any depth.
    pub(crate) fn has_timestamp_ntz(&self) -> bool {
        self.fields.iter().any(|f| f.data_type.has_timestamp_ntz())
    }
}

impl StructField {
    fn new(name: &str, data_type: DeltaType, nullable: bool) -> Self {
        StructField {
            name: name.to_owned(),
            data_type,
            nullable,
            metadata: serde_json::Map::new(),
        }
    }
}

impl DeltaType {
    fn primitive(name: &str) -> Self {
        DeltaType::Primitive(name.to_owned())
    }

    #[allow(dead_code)] // for compaction and vacuum (docs/design/delta.md, steps 11-13)
    fn has_timestamp_ntz(&self) -> bool {
        match self {
            DeltaType::Primitive(name) => name == "timestamp_ntz",
            DeltaType::Struct(s) => s.has_timestamp_ntz(),
            DeltaType::Array(a) => a.element_type.has_timestamp_ntz(),
            DeltaType::Map(m) => m.key_type.has_timestamp_ntz() || m.value_type.has_timestamp_ntz(),
        }
    }

    /// A short name for messages: the primitive name, or `struct` / `array` / `map`.
    fn describe(&self) -> String {
        match self {
            DeltaType::Primitive(name) => name.clone(),
            DeltaType::Struct(_) => "struct".to_owned(),
            DeltaType::Array(_) => "array".to_owned(),
            DeltaType::Map(_) => "map".to_owned(),
        }
    }
}

/// A job's table schema: what `metaData` of a new table says, and what an existing table is
/// checked against.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableSchema {
    /// Data columns, then partition columns, then time directories.
    pub(crate) schema: StructType,
    /// `metaData.partitionColumns`: the partition columns, then the time directories.
    pub(crate) partition_columns: Vec<String>,
    /// Whether a column is `timestamp_ntz`, so a new table needs the `timestampNtz` feature.
    pub(crate) needs_timestamp_ntz: bool,
}

/// Converts the schema of a job's records (partition columns included, as they come in) into
/// its Delta table schema.
///
/// `partition_by` names the Hive partition columns of `schema`, outermost first; they move to
/// the end, in that order. `time_directories` are the directory names of time partitioning
/// (`dt`, `hour`), appended as nullable `string` partition columns.
///
/// Errors: [`Error::NotSupported`] naming the column for a type a Delta table cannot hold, a
/// type a partition column cannot have, or a name Delta cannot keep apart or Spark cannot
/// read; [`Error::Config`] for a partition column that is not in the schema, a name given
/// twice, or a schema without any data column.
pub(crate) fn from_arrow(
    schema: &Schema,
    partition_by: &[String],
    time_directories: &[String],
) -> Result<TableSchema> {
    for (i, name) in partition_by.iter().chain(time_directories).enumerate() {
        if partition_by
            .iter()
            .chain(time_directories)
            .take(i)
            .any(|other| other.eq_ignore_ascii_case(name))
        {
            return Err(Error::Config(format!(
                "partition column `{name}` is given twice (Delta column names are compared without case)"
            )));
        }
    }
    for name in partition_by {
        if schema.field_with_name(name).is_err() {
            return Err(Error::Config(format!(
                "partition column `{name}` is not a column of the schema"
            )));
        }
    }
    for name in time_directories {
        if let Some(f) = schema
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(name) && !partition_by.contains(f.name()))
        {
            return Err(Error::Config(format!(
                "time directory `{name}` has the name of the column `{}`",
                f.name()
            )));
        }
    }

    let mut ntz = false;
    let mut fields = Vec::with_capacity(schema.fields().len() + time_directories.len());
    for field in schema.fields() {
        if !partition_by.contains(field.name()) {
            fields.push(convert_field(field, "", &mut ntz)?);
        }
    }
    if fields.is_empty() {
        return Err(Error::Config(
            "every column is a partition column; a Delta table needs at least one data column"
                .to_owned(),
        ));
    }
    for name in partition_by {
        let field = schema.field_with_name(name).expect("checked above");
        check_partition_type(field)?;
        fields.push(convert_field(field, "", &mut ntz)?);
    }
    for name in time_directories {
        check_name(name)?;
        fields.push(StructField::new(name, DeltaType::primitive("string"), true));
    }
    let schema = StructType::new(fields);
    check_names(&schema.fields, "")?;
    Ok(TableSchema {
        schema,
        partition_columns: partition_by
            .iter()
            .chain(time_directories)
            .cloned()
            .collect(),
        needs_timestamp_ntz: ntz,
    })
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn convert_field(field: &Field, prefix: &str, ntz: &mut bool) -> Result<StructField> {
    let path = join(prefix, field.name());
    check_name(field.name())?;
    let data_type = convert_type(field.data_type(), &path, ntz)?;
    Ok(StructField::new(
        field.name(),
        data_type,
        field.is_nullable(),
    ))
}

fn refuse(path: &str, data_type: &DataType, hint: &str) -> Error {
    Error::NotSupported(format!(
        "column `{path}` has arrow type {data_type:?}, which a Delta table cannot hold; {hint}"
    ))
}

fn convert_type(data_type: &DataType, path: &str, ntz: &mut bool) -> Result<DeltaType> {
    let primitive = |name: &str| Ok(DeltaType::primitive(name));
    match data_type {
        DataType::Boolean => primitive("boolean"),
        DataType::Int8 => primitive("byte"),
        DataType::Int16 => primitive("short"),
        DataType::Int32 => primitive("integer"),
        DataType::Int64 => primitive("long"),
        DataType::Float32 => primitive("float"),
        DataType::Float64 => primitive("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => primitive("string"),
        DataType::Dictionary(_, value)
            if matches!(
                value.as_ref(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            primitive("string")
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => primitive("binary"),
        DataType::Date32 => primitive("date"),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => primitive("timestamp"),
        DataType::Timestamp(TimeUnit::Microsecond, None) => {
            *ntz = true;
            primitive("timestamp_ntz")
        }
        DataType::Timestamp(_, _) => Err(refuse(path, data_type, "use Timestamp(Microsecond, …)")),
        DataType::Decimal128(p, s)
            if *p >= 1 && *p <= DECIMAL_PRECISION_MAX && *s >= 0 && (*s as u8) <= *p =>
        {
            primitive(&format!("decimal({p},{s})"))
        }
        DataType::Decimal128(_, _) => Err(refuse(
            path,
            data_type,
            "a Delta decimal has a precision of 1 to 38 and a scale of 0 to its precision",
        )),
        DataType::Struct(fields) => {
            let prefix = path;
            let fields = fields
                .iter()
                .map(|f| convert_field(f, prefix, ntz))
                .collect::<Result<Vec<_>>>()?;
            if fields.is_empty() {
                return Err(refuse(
                    path,
                    data_type,
                    "give the struct at least one field",
                ));
            }
            Ok(DeltaType::Struct(Box::new(StructType::new(fields))))
        }
        DataType::List(item) | DataType::LargeList(item) => {
            let element_type = convert_type(item.data_type(), &join(path, "element"), ntz)?;
            Ok(DeltaType::Array(Box::new(ArrayType {
                tag: ArrayTag::Array,
                element_type,
                contains_null: item.is_nullable(),
            })))
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(refuse(path, data_type, "its entries are not a struct"));
            };
            let [key, value] = kv.iter().collect::<Vec<_>>()[..] else {
                return Err(refuse(
                    path,
                    data_type,
                    "its entries are not a key and a value",
                ));
            };
            let key_type = convert_type(key.data_type(), &join(path, "key"), ntz)?;
            let value_type = convert_type(value.data_type(), &join(path, "value"), ntz)?;
            Ok(DeltaType::Map(Box::new(MapType {
                tag: MapTag::Map,
                key_type,
                value_type,
                value_contains_null: value.is_nullable(),
            })))
        }
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => Err(refuse(
            path,
            data_type,
            "Delta integers are signed; use Int64",
        )),
        DataType::Date64 => Err(refuse(path, data_type, "use Date32")),
        DataType::Float16 => Err(refuse(path, data_type, "use Float32")),
        DataType::FixedSizeBinary(_) => Err(refuse(path, data_type, "use Binary")),
        DataType::FixedSizeList(_, _) | DataType::ListView(_) | DataType::LargeListView(_) => {
            Err(refuse(path, data_type, "use List"))
        }
        DataType::Decimal256(_, _) | DataType::Decimal32(_, _) | DataType::Decimal64(_, _) => Err(
            refuse(path, data_type, "use Decimal128 with a precision up to 38"),
        ),
        _ => Err(refuse(
            path,
            data_type,
            "see the Delta type table in docs/design/delta.md",
        )),
    }
}

/// The partition column types of design section 7: a value that becomes a directory name and
/// reads back as the same value.
fn check_partition_type(field: &Field) -> Result<()> {
    let ok = match field.data_type() {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Date32
        | DataType::Decimal128(_, _) => true,
        DataType::Dictionary(_, value) => matches!(
            value.as_ref(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let hint = match field.data_type() {
        DataType::Timestamp(_, _) => "; partition by time directories instead",
        _ => "",
    };
    Err(Error::NotSupported(format!(
        "partition column `{}` has arrow type {:?}, which a Delta partition column cannot hold \
         (boolean, integers, strings, Date32 and Decimal128 can){hint}",
        field.name(),
        field.data_type()
    )))
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::NotSupported(
            "a column has an empty name, which a Delta table cannot hold".to_owned(),
        ));
    }
    if let Some(c) = name.chars().find(|c| FORBIDDEN_NAME_CHARS.contains(c)) {
        return Err(Error::NotSupported(format!(
            "column `{}` has {:?} in its name, which Delta tables without column mapping cannot \
             hold (none of {:?} may appear)",
            name.escape_debug(),
            c,
            FORBIDDEN_NAME_CHARS.iter().collect::<String>(),
        )));
    }
    Ok(())
}

/// Names unique without case at every struct level (§Schema Serialization Format).
fn check_names(fields: &[StructField], prefix: &str) -> Result<()> {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for f in fields {
        if let Some(other) = seen.insert(f.name.to_lowercase(), &f.name) {
            return Err(Error::NotSupported(format!(
                "columns `{}` and `{}` differ only in case, which a Delta table cannot keep apart",
                join(prefix, other),
                join(prefix, &f.name)
            )));
        }
        check_names_in(&f.data_type, &join(prefix, &f.name))?;
    }
    Ok(())
}

fn check_names_in(data_type: &DeltaType, path: &str) -> Result<()> {
    match data_type {
        DeltaType::Primitive(_) => Ok(()),
        DeltaType::Struct(s) => check_names(&s.fields, path),
        DeltaType::Array(a) => check_names_in(&a.element_type, &join(path, "element")),
        DeltaType::Map(m) => {
            check_names_in(&m.key_type, &join(path, "key"))?;
            check_names_in(&m.value_type, &join(path, "value"))
        }
    }
}

/// Checks that a job with schema `ours` may append to a table whose `metaData` has `table`
/// and `table_partitions`: same partition columns in the same order; every column of the job
/// in the table with the same type; the table may have extra columns only if they are
/// nullable, and may allow nulls where the job has none, never the other way round.
///
/// Errors with [`Error::Conflict`] at `location` naming the first difference.
/// Whether a job's record schema has no column types yet: no columns, or only `Null` ones (a
/// job that has seen no record, or a CSV header alone).
pub(crate) fn is_undecided(schema: &Schema) -> bool {
    schema
        .fields()
        .iter()
        .all(|f| f.data_type() == &DataType::Null)
}

/// `schema` with each nullable `Null` column (a field that was `null` in every record the job
/// inferred from) given the type of the table's nullable column of that name, where that is a
/// primitive type with an Arrow type of its own: the job then writes what the table holds
/// instead of being refused for a column it has no values of. Other columns are left as they
/// are.
pub(crate) fn fill_null_columns(schema: Schema, table: &StructType) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let typed = (f.data_type() == &DataType::Null && f.is_nullable())
                .then(|| {
                    table
                        .fields
                        .iter()
                        .find(|t| &t.name == f.name() && t.nullable)
                })
                .flatten()
                .and_then(|t| match &t.data_type {
                    DeltaType::Primitive(p) => arrow_of_primitive(p),
                    _ => None,
                });
            match typed {
                Some(dt) => f.as_ref().clone().with_data_type(dt),
                None => f.as_ref().clone(),
            }
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The Arrow type filesink writes for a Delta type, where it is a primitive type it writes.
pub(crate) fn arrow_type_of(data_type: &DeltaType) -> Option<DataType> {
    match data_type {
        DeltaType::Primitive(p) => arrow_of_primitive(p),
        _ => None,
    }
}

/// The Arrow type filesink writes for a Delta primitive type, where it writes one.
fn arrow_of_primitive(name: &str) -> Option<DataType> {
    Some(match normalize_primitive(name).as_str() {
        "boolean" => DataType::Boolean,
        "byte" => DataType::Int8,
        "short" => DataType::Int16,
        "integer" => DataType::Int32,
        "long" => DataType::Int64,
        "float" => DataType::Float32,
        "double" => DataType::Float64,
        "string" => DataType::Utf8,
        "date" => DataType::Date32,
        "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        "timestamp_ntz" => DataType::Timestamp(TimeUnit::Microsecond, None),
        other => {
            let (p, s) = other
                .strip_prefix("decimal(")?
                .strip_suffix(')')?
                .split_once(',')?;
            DataType::Decimal128(p.trim().parse().ok()?, s.trim().parse().ok()?)
        }
    })
}

/// With schema evolution (`DeltaOptions::add_columns`): the table's schema with the job's
/// top-level data columns that it lacks added, nullable, after its data columns and before its
/// partition columns; `None` if it lacks none. A column the job has that the table lacks and
/// that is not nullable in the job is added nullable (old rows have no value for it).
pub(crate) fn with_added_columns(
    table: &StructType,
    table_partitions: &[String],
    ours: &TableSchema,
) -> Option<StructType> {
    let added: Vec<StructField> = ours
        .schema
        .fields
        .iter()
        .filter(|f| !ours.partition_columns.contains(&f.name))
        .filter(|f| {
            !table
                .fields
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(&f.name))
        })
        .map(|f| {
            let mut f = f.clone();
            f.nullable = true;
            f
        })
        .collect();
    if added.is_empty() {
        return None;
    }
    let (data, partitions): (Vec<StructField>, Vec<StructField>) = table
        .fields
        .iter()
        .cloned()
        .partition(|f| !table_partitions.contains(&f.name));
    let mut evolved = table.clone();
    evolved.fields = data.into_iter().chain(added).chain(partitions).collect();
    Some(evolved)
}

pub(crate) fn check_compatible(
    location: &str,
    table: &StructType,
    table_partitions: &[String],
    ours: &TableSchema,
) -> Result<()> {
    let difference = if table_partitions != ours.partition_columns.as_slice() {
        Some(format!(
            "the table is partitioned by {:?}, the job by {:?}",
            table_partitions, ours.partition_columns
        ))
    } else {
        diff_struct(table, &ours.schema, "")
    };
    match difference {
        None => Ok(()),
        Some(d) => Err(Error::conflict(
            location,
            format!("the job's schema does not fit the table's: {d}"),
        )),
    }
}

fn diff_struct(table: &StructType, ours: &StructType, prefix: &str) -> Option<String> {
    for ours_field in &ours.fields {
        let path = join(prefix, &ours_field.name);
        let Some(table_field) = table.fields.iter().find(|f| f.name == ours_field.name) else {
            if let Some(f) = table
                .fields
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(&ours_field.name))
            {
                return Some(format!(
                    "column `{path}` is called `{}` in the table",
                    join(prefix, &f.name)
                ));
            }
            return Some(format!("column `{path}` is not in the table"));
        };
        if ours_field.nullable && !table_field.nullable {
            return Some(format!(
                "column `{path}` may be null in the job but not in the table"
            ));
        }
        if let Some(d) = diff_type(&table_field.data_type, &ours_field.data_type, &path) {
            return Some(d);
        }
    }
    for table_field in &table.fields {
        if !table_field.nullable && ours.fields.iter().all(|f| f.name != table_field.name) {
            return Some(format!(
                "the table's column `{}` is not nullable, and the job does not write it",
                join(prefix, &table_field.name)
            ));
        }
    }
    None
}

fn normalize_primitive(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase()
}

fn diff_type(table: &DeltaType, ours: &DeltaType, path: &str) -> Option<String> {
    match (table, ours) {
        (DeltaType::Primitive(t), DeltaType::Primitive(o))
            if normalize_primitive(t) == normalize_primitive(o) =>
        {
            None
        }
        (DeltaType::Struct(t), DeltaType::Struct(o)) => diff_struct(t, o, path),
        (DeltaType::Array(t), DeltaType::Array(o)) => {
            let element = join(path, "element");
            if o.contains_null && !t.contains_null {
                return Some(format!(
                    "column `{element}` may be null in the job but not in the table"
                ));
            }
            diff_type(&t.element_type, &o.element_type, &element)
        }
        (DeltaType::Map(t), DeltaType::Map(o)) => {
            let value = join(path, "value");
            if o.value_contains_null && !t.value_contains_null {
                return Some(format!(
                    "column `{value}` may be null in the job but not in the table"
                ));
            }
            diff_type(&t.key_type, &o.key_type, &join(path, "key"))
                .or_else(|| diff_type(&t.value_type, &o.value_type, &value))
        }
        _ => Some(format!(
            "column `{path}` is `{}` in the table, `{}` in the job",
            table.describe(),
            ours.describe()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// One column of every kind the conversion table accepts.
    fn representative() -> Schema {
        let geo = DataType::Struct(
            vec![
                Field::new("lat_e6", DataType::Int32, false),
                Field::new("lon_e6", DataType::Int32, true),
            ]
            .into(),
        );
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("country", DataType::Utf8, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("flag", DataType::Boolean, true),
            Field::new("tiny", DataType::Int8, true),
            Field::new("small", DataType::Int16, true),
            Field::new("mid", DataType::Int32, true),
            Field::new("ratio", DataType::Float32, true),
            Field::new("score", DataType::Float64, true),
            Field::new("amount", DataType::Decimal128(10, 2), true),
            Field::new("day", DataType::Date32, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("payload", DataType::Binary, true),
            Field::new(
                "label",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
            Field::new("geo", geo, true),
            Field::new_list("tags", Field::new_list_field(DataType::Utf8, true), true),
            Field::new_map(
                "attrs",
                "entries",
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int64, false),
                false,
                true,
            ),
        ])
    }

    #[test]
    fn representative_schema_string_is_golden() {
        let table =
            from_arrow(&representative(), &strings(&["country"]), &strings(&["dt"])).unwrap();
        let golden = concat!(
            r#"{"type":"struct","fields":["#,
            r#"{"name":"id","type":"long","nullable":false,"metadata":{}},"#,
            r#"{"name":"name","type":"string","nullable":true,"metadata":{}},"#,
            r#"{"name":"flag","type":"boolean","nullable":true,"metadata":{}},"#,
            r#"{"name":"tiny","type":"byte","nullable":true,"metadata":{}},"#,
            r#"{"name":"small","type":"short","nullable":true,"metadata":{}},"#,
            r#"{"name":"mid","type":"integer","nullable":true,"metadata":{}},"#,
            r#"{"name":"ratio","type":"float","nullable":true,"metadata":{}},"#,
            r#"{"name":"score","type":"double","nullable":true,"metadata":{}},"#,
            r#"{"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},"#,
            r#"{"name":"day","type":"date","nullable":true,"metadata":{}},"#,
            r#"{"name":"ts","type":"timestamp","nullable":false,"metadata":{}},"#,
            r#"{"name":"payload","type":"binary","nullable":true,"metadata":{}},"#,
            r#"{"name":"label","type":"string","nullable":true,"metadata":{}},"#,
            r#"{"name":"geo","type":{"type":"struct","fields":["#,
            r#"{"name":"lat_e6","type":"integer","nullable":false,"metadata":{}},"#,
            r#"{"name":"lon_e6","type":"integer","nullable":true,"metadata":{}}]},"#,
            r#""nullable":true,"metadata":{}},"#,
            r#"{"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"#,
            r#""nullable":true,"metadata":{}},"#,
            r#"{"name":"attrs","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":false},"#,
            r#""nullable":true,"metadata":{}},"#,
            r#"{"name":"country","type":"string","nullable":true,"metadata":{}},"#,
            r#"{"name":"dt","type":"string","nullable":true,"metadata":{}}"#,
            r#"]}"#,
        );
        assert_eq!(table.schema.to_schema_string(), golden);
        assert_eq!(table.partition_columns, strings(&["country", "dt"]));
        assert!(!table.needs_timestamp_ntz);
        // And it reads back as the same schema.
        let parsed = StructType::parse(golden, "golden").unwrap();
        assert_eq!(parsed, table.schema);
    }

    #[test]
    fn protocol_example_schema_parses_and_renders_compactly() {
        // The example of §Schema Serialization Format, pretty-printed as Spark does.
        let example = r#"{
          "type" : "struct",
          "fields" : [
            {"name" : "a", "type" : "integer", "nullable" : false, "metadata" : { }},
            {"name" : "b", "type" : {"type" : "struct", "fields" : [
                {"name" : "d", "type" : "integer", "nullable" : false, "metadata" : { }}]},
             "nullable" : true, "metadata" : { }},
            {"name" : "c", "type" : {"type" : "array", "elementType" : "integer", "containsNull" : false},
             "nullable" : true, "metadata" : { }},
            {"name" : "e", "type" : {"type" : "array", "elementType" : {"type" : "struct", "fields" : [
                {"name" : "d", "type" : "integer", "nullable" : false, "metadata" : { }}]},
              "containsNull" : true}, "nullable" : true, "metadata" : { }},
            {"name" : "f", "type" : {"type" : "map", "keyType" : "string", "valueType" : "string",
              "valueContainsNull" : true}, "nullable" : true, "metadata" : { }}
          ]
        }"#;
        let parsed = StructType::parse(example, "example").unwrap();
        assert_eq!(parsed.fields.len(), 5);
        let DeltaType::Map(f) = &parsed.field("f").unwrap().data_type else {
            panic!("f is a map")
        };
        assert!(f.value_contains_null);
        let DeltaType::Array(e) = &parsed.field("e").unwrap().data_type else {
            panic!("e is an array")
        };
        assert!(matches!(e.element_type, DeltaType::Struct(_)));
        let again = StructType::parse(&parsed.to_schema_string(), "again").unwrap();
        assert_eq!(again, parsed);
    }

    #[test]
    fn column_metadata_of_other_engines_is_kept() {
        let s = r#"{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":{"delta.invariants":"{\"expression\":{\"expression\":\"x > 3\"}}"}}]}"#;
        let parsed = StructType::parse(s, "t").unwrap();
        assert!(parsed.fields[0].metadata.contains_key("delta.invariants"));
        assert_eq!(parsed.to_schema_string(), s);
    }

    #[test]
    fn malformed_schema_string_is_corrupt_naming_where() {
        for bad in [
            "",
            "[]",
            r#"{"type":"array","fields":[]}"#,
            r#"{"type":"struct","fields":[{"name":"x","type":{"type":"set"},"nullable":true}]}"#,
            r#"{"type":"struct","fields":[{"name":"x","type":"long"}]}"#,
        ] {
            let err = StructType::parse(bad, "schemaString of version 3").unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { what, .. } if what == "schemaString of version 3"),
                "{bad:?} gave {err:?}"
            );
        }
    }

    #[test]
    fn timestamp_without_time_zone_is_timestamp_ntz_and_needs_the_feature() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "events",
                DataType::new_list(DataType::Timestamp(TimeUnit::Microsecond, None), true),
                true,
            ),
        ]);
        let table = from_arrow(&schema, &[], &[]).unwrap();
        assert!(table.needs_timestamp_ntz);
        assert!(table.schema.has_timestamp_ntz());
        assert!(table
            .schema
            .to_schema_string()
            .contains(r#""elementType":"timestamp_ntz""#));
        // With a time zone, it is a plain timestamp.
        let schema = Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+01:00".into())),
            true,
        )]);
        let table = from_arrow(&schema, &[], &[]).unwrap();
        assert!(!table.needs_timestamp_ntz);
        assert_eq!(
            table.schema.fields[0].data_type,
            DeltaType::primitive("timestamp")
        );
    }

    fn refusal(data_type: DataType) -> String {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("col", data_type, true),
        ]);
        match from_arrow(&schema, &[], &[]) {
            Err(Error::NotSupported(msg)) => msg,
            other => panic!("expected NotSupported, got {other:?}"),
        }
    }

    #[test]
    fn unsupported_types_are_refused_naming_column_and_type() {
        assert_eq!(
            refusal(DataType::Timestamp(TimeUnit::Nanosecond, None)),
            "column `col` has arrow type Timestamp(Nanosecond, None), which a Delta table cannot \
             hold; use Timestamp(Microsecond, …)"
        );
        assert!(refusal(DataType::UInt64).ends_with("use Int64"));
        for data_type in [
            DataType::UInt8,
            DataType::UInt16,
            DataType::UInt32,
            DataType::Float16,
            DataType::Null,
            DataType::Date64,
            DataType::Time64(TimeUnit::Microsecond),
            DataType::Duration(TimeUnit::Microsecond),
            DataType::Interval(arrow::datatypes::IntervalUnit::DayTime),
            DataType::FixedSizeBinary(16),
            DataType::new_fixed_size_list(DataType::Int32, 3, true),
            DataType::Decimal256(40, 2),
            DataType::Decimal128(10, -2),
            DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
            DataType::Timestamp(TimeUnit::Millisecond, None),
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Int64)),
        ] {
            let msg = refusal(data_type.clone());
            assert!(
                msg.starts_with(&format!("column `col` has arrow type {data_type:?}")),
                "{msg}"
            );
        }
    }

    #[test]
    fn unsupported_nested_type_names_its_path() {
        let inner = DataType::Struct(vec![Field::new("when", DataType::UInt32, true)].into());
        let msg = refusal(DataType::new_list(inner, true));
        assert!(
            msg.starts_with("column `col.element.when` has arrow type UInt32"),
            "{msg}"
        );
    }

    #[test]
    fn names_delta_cannot_hold_are_refused() {
        for bad in [
            "a b", "a,b", "a;b", "a{b", "a}b", "a(b", "a)b", "a\nb", "a\tb", "a=b",
        ] {
            let schema = Schema::new(vec![Field::new(bad, DataType::Int64, true)]);
            let err = from_arrow(&schema, &[], &[]).unwrap_err();
            assert!(matches!(err, Error::NotSupported(_)), "{bad:?}: {err:?}");
        }
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ID", DataType::Int64, true),
        ]);
        let err = from_arrow(&schema, &[], &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "not supported: columns `id` and `ID` differ only in case, which a Delta table cannot keep apart"
        );
        let nested = DataType::Struct(
            vec![
                Field::new("x", DataType::Int64, true),
                Field::new("X", DataType::Int64, true),
            ]
            .into(),
        );
        let schema = Schema::new(vec![Field::new("s", nested, true)]);
        let err = from_arrow(&schema, &[], &[]).unwrap_err();
        assert!(err.to_string().contains("`s.x` and `s.X`"), "{err}");
    }

    #[test]
    fn partition_columns_move_to_the_end_in_their_order() {
        let schema = Schema::new(vec![
            Field::new("b", DataType::Utf8, true),
            Field::new("id", DataType::Int64, false),
            Field::new("a", DataType::Int32, true),
        ]);
        let table = from_arrow(&schema, &strings(&["a", "b"]), &[]).unwrap();
        let names: Vec<_> = table
            .schema
            .fields
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, ["id", "a", "b"]);
        assert_eq!(table.partition_columns, strings(&["a", "b"]));
    }

    #[test]
    fn partition_columns_of_unfit_types_or_unknown_names_are_refused() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("score", DataType::Float64, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ]);
        let err = from_arrow(&schema, &strings(&["score"]), &[]).unwrap_err();
        assert!(
            matches!(&err, Error::NotSupported(m) if m.starts_with("partition column `score` has arrow type Float64")),
            "{err:?}"
        );
        let err = from_arrow(&schema, &strings(&["ts"]), &[]).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("partition by time directories instead"),
            "{err}"
        );
        let err = from_arrow(&schema, &strings(&["nope"]), &[]).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        let err = from_arrow(&schema, &[], &strings(&["Score"])).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        let err = from_arrow(&schema, &strings(&["id", "score", "ts"]), &[]).unwrap_err();
        assert!(
            matches!(err, Error::Config(_) | Error::NotSupported(_)),
            "{err:?}"
        );
        let only = Schema::new(vec![Field::new("country", DataType::Utf8, true)]);
        let err = from_arrow(&only, &strings(&["country"]), &[]).unwrap_err();
        assert!(
            err.to_string().contains("at least one data column"),
            "{err}"
        );
    }

    fn field<'a>(t: &'a mut StructType, name: &str) -> &'a mut StructField {
        t.fields.iter_mut().find(|f| f.name == name).unwrap()
    }

    fn job() -> TableSchema {
        from_arrow(&representative(), &strings(&["country"]), &strings(&["dt"])).unwrap()
    }

    fn check(table: &StructType, partitions: &[&str], ours: &TableSchema) -> Result<()> {
        check_compatible("./lake", table, &strings(partitions), ours)
    }

    fn conflict_reason(result: Result<()>) -> String {
        match result {
            Err(Error::Conflict { path, reason }) => {
                assert_eq!(path, std::path::Path::new("./lake"));
                reason
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn equal_schema_is_compatible() {
        let ours = job();
        check(&ours.schema, &["country", "dt"], &ours).unwrap();
        // Also after a round trip through the log, pretty or compact.
        let read = StructType::parse(&ours.schema.to_schema_string(), "t").unwrap();
        check(&read, &["country", "dt"], &ours).unwrap();
    }

    #[test]
    fn table_with_extra_nullable_columns_and_other_order_is_compatible() {
        let ours = job();
        let mut table = ours.schema.clone();
        table.fields.reverse();
        table.fields.push(StructField::new(
            "added_later",
            DeltaType::primitive("string"),
            true,
        ));
        // The table may allow nulls where the job has none.
        table.fields.iter_mut().for_each(|f| f.nullable = true);
        check(&table, &["country", "dt"], &ours).unwrap();
    }

    #[test]
    fn incompatible_schemas_name_the_first_difference() {
        let ours = job();
        let with = |edit: &dyn Fn(&mut StructType)| {
            let mut t = ours.schema.clone();
            edit(&mut t);
            t
        };
        let cases: Vec<(StructType, &str)> = vec![
            (
                with(&|t| field(t, "id").data_type = DeltaType::primitive("integer")),
                "column `id` is `integer` in the table, `long` in the job",
            ),
            (
                with(&|t| t.fields.retain(|f| f.name != "score")),
                "column `score` is not in the table",
            ),
            (
                with(&|t| field(t, "name").name = "Name".into()),
                "column `name` is called `Name` in the table",
            ),
            (
                with(&|t| field(t, "name").nullable = false),
                "column `name` may be null in the job but not in the table",
            ),
            (
                with(&|t| {
                    t.fields.push(StructField::new(
                        "required",
                        DeltaType::primitive("long"),
                        false,
                    ))
                }),
                "the table's column `required` is not nullable, and the job does not write it",
            ),
            (
                with(&|t| {
                    let DeltaType::Struct(s) = &mut field(t, "geo").data_type else {
                        unreachable!()
                    };
                    s.fields[1].data_type = DeltaType::primitive("long");
                }),
                "column `geo.lon_e6` is `long` in the table, `integer` in the job",
            ),
            (
                with(&|t| {
                    let DeltaType::Array(a) = &mut field(t, "tags").data_type else {
                        unreachable!()
                    };
                    a.contains_null = false;
                }),
                "column `tags.element` may be null in the job but not in the table",
            ),
            (
                with(&|t| field(t, "attrs").data_type = DeltaType::primitive("string")),
                "column `attrs` is `string` in the table, `map` in the job",
            ),
        ];
        for (table, expected) in cases {
            let reason = conflict_reason(check(&table, &["country", "dt"], &ours));
            assert_eq!(
                reason,
                format!("the job's schema does not fit the table's: {expected}")
            );
        }
        let reason = conflict_reason(check(&ours.schema, &["country"], &ours));
        assert_eq!(
            reason,
            r#"the job's schema does not fit the table's: the table is partitioned by ["country"], the job by ["country", "dt"]"#
        );
    }

    #[test]
    fn decimal_names_compare_without_spaces_or_case() {
        let ours = from_arrow(
            &Schema::new(vec![Field::new("d", DataType::Decimal128(12, 3), true)]),
            &[],
            &[],
        )
        .unwrap();
        let table = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"d","type":"DECIMAL(12, 3)","nullable":true,"metadata":{}}]}"#,
            "t",
        )
        .unwrap();
        check(&table, &[], &ours).unwrap();
    }
}
