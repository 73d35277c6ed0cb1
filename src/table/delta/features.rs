//! Which Delta tables filesink writes, accepts and refuses (design section 12, D7).
//!
//! A writer that half-understands a table corrupts it, and exactly-once depends on `txn`
//! surviving. So before anything is written (at open and on every refresh that reads a
//! `protocol` or `metaData`), [`check_table`] accepts a table only when filesink implements
//! everything its protocol asks of a writer (§Table Features: writers "must implement and
//! respect all reader features as well"), and refuses it with [`Error::NotSupported`] naming
//! the first offending version, feature or property otherwise:
//!
//! | protocol | accepted when |
//! |---|---|
//! | reader 1 | always |
//! | reader 2 (column mapping) | `delta.columnMapping.mode` absent or `none` |
//! | reader 3 | every reader feature is `timestampNtz`, `vacuumProtocolCheck`, or `columnMapping` in mode `none` |
//! | writer 2 (appendOnly, invariants) | no column has `delta.invariants` |
//! | writer 3 (CHECK constraints, checkpoint stats settings) | no `delta.constraints.*` property; the stats settings only turn our log checkpoints off |
//! | writer 4 (change data feed, generated columns) | no column has `delta.generationExpression` |
//! | writer 5 (column mapping) | mode `none` |
//! | writer 6 (identity columns) | no column has `delta.identity.*` |
//! | writer 7 | every writer feature is in [`WRITER_FEATURES`], with the conditions above |
//! | properties | no `delta.setTransactionRetentionDuration` |
//!
//! The checks of column metadata and properties apply whatever the protocol says: a table
//! that names an invariant is refused even where the protocol would let a writer ignore it.
//! Refusing too much is safe; writing what we do not understand is not.
//!
//! New tables get [`new_table_protocol`]: `(1, 2)` without features, or `(3, 7)` with
//! `timestampNtz` when the schema has a timestamp without time zone.

use super::actions::{Metadata, Protocol};
use super::schema::{DeltaType, StructField, StructType};
use crate::{Error, Result};

/// Highest reader version filesink implements.
pub(crate) const READER_VERSION_MAX: i32 = 3;
/// Highest writer version filesink implements.
pub(crate) const WRITER_VERSION_MAX: i32 = 7;

/// Reader features filesink implements (`columnMapping` only in mode `none`).
pub(crate) const READER_FEATURES: &[&str] =
    &["timestampNtz", "vacuumProtocolCheck", "columnMapping"];

/// Writer features filesink implements, each with the condition of the module table.
pub(crate) const WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "columnMapping",
    "identityColumns",
    "timestampNtz",
    "domainMetadata",
    "inCommitTimestamp",
    "vacuumProtocolCheck",
];

/// The feature a timestamp without time zone needs.
pub(crate) const TIMESTAMP_NTZ: &str = "timestampNtz";

/// What an accepted table asks of filesink's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// `delta.appendOnly = true`: only appends and `dataChange=false` rearrangements
    /// (§Append-only Tables), which is all filesink writes anyway.
    pub(crate) append_only: bool,
    /// `delta.enableInCommitTimestamps = true`: every `commitInfo` carries
    /// `inCommitTimestamp` (§In-Commit Timestamps).
    pub(crate) in_commit_timestamps: bool,
    /// Whether filesink may write log checkpoints: not when the table asks for
    /// `delta.checkpoint.writeStatsAsStruct = true` or `delta.checkpoint.writeStatsAsJson =
    /// false`, which our checkpoints do not honour (design section 8).
    pub(crate) log_checkpoints: bool,
}

/// The protocol of a table filesink creates.
pub(crate) fn new_table_protocol(needs_timestamp_ntz: bool) -> Protocol {
    if needs_timestamp_ntz {
        Protocol {
            min_reader_version: 3,
            min_writer_version: 7,
            reader_features: Some(vec![TIMESTAMP_NTZ.to_owned()]),
            writer_features: Some(vec![TIMESTAMP_NTZ.to_owned()]),
            extra: Default::default(),
        }
    } else {
        Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
            extra: Default::default(),
        }
    }
}

fn is_true(metadata: &Metadata, key: &str) -> bool {
    metadata
        .configuration
        .get(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn is_false(metadata: &Metadata, key: &str) -> bool {
    metadata
        .configuration
        .get(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

fn refuse(message: String) -> Error {
    Error::NotSupported(message)
}

fn missing_feature(location: &str, kind: &str, feature: &str) -> Error {
    refuse(format!(
        "table `{location}` needs the {kind} feature `{feature}`, which filesink does not \
         implement; filesink writes only tables it fully understands, so nothing was written \
         (write this table with an engine that supports the feature, or choose another table)"
    ))
}

/// Checks an existing table's `protocol` and `metaData` (whose schema is `schema`, parsed from
/// `metaData.schemaString`) before filesink writes to it. `location` names the table in
/// messages.
///
/// Errors: [`Error::NotSupported`] naming the first version, feature, column or property
/// filesink does not implement (exact messages in design section 12); [`Error::Corrupt`] for
/// a protocol that breaks its own rules (versions below 1, reader 3 without `readerFeatures`,
/// writer 7 without `writerFeatures`).
pub(crate) fn check_table(
    location: &str,
    protocol: &Protocol,
    metadata: &Metadata,
    schema: &StructType,
) -> Result<Accepted> {
    let (reader, writer) = (protocol.min_reader_version, protocol.min_writer_version);
    if reader < 1 || writer < 1 {
        return Err(Error::corrupt(
            format!("protocol of table `{location}`"),
            format!("minReaderVersion {reader} / minWriterVersion {writer} (both start at 1)"),
        ));
    }
    if reader > READER_VERSION_MAX {
        return Err(refuse(format!(
            "table `{location}` has minReaderVersion {reader}; filesink writes protocol versions \
             up to reader {READER_VERSION_MAX} / writer {WRITER_VERSION_MAX}"
        )));
    }
    if writer > WRITER_VERSION_MAX {
        return Err(refuse(format!(
            "table `{location}` has minWriterVersion {writer}; filesink writes protocol versions \
             up to reader {READER_VERSION_MAX} / writer {WRITER_VERSION_MAX}"
        )));
    }
    if reader == 3 && protocol.reader_features.is_none() {
        return Err(Error::corrupt(
            format!("protocol of table `{location}`"),
            "minReaderVersion 3 without readerFeatures",
        ));
    }
    if writer == 7 && protocol.writer_features.is_none() {
        return Err(Error::corrupt(
            format!("protocol of table `{location}`"),
            "minWriterVersion 7 without writerFeatures",
        ));
    }
    // Listed features are checked whatever the versions say: a list on a lower version
    // breaks the spec, and assuming it means nothing is the unsafe reading.
    for feature in protocol.reader_features.iter().flatten() {
        if !READER_FEATURES.contains(&feature.as_str()) {
            return Err(missing_feature(location, "reader", feature));
        }
    }
    for feature in protocol.writer_features.iter().flatten() {
        if !WRITER_FEATURES.contains(&feature.as_str()) {
            return Err(missing_feature(location, "writer", feature));
        }
    }

    if metadata.format.provider != "parquet" {
        return Err(refuse(format!(
            "table `{location}` stores its data files as `{}`; filesink writes only Parquet \
             tables, so nothing was written",
            metadata.format.provider
        )));
    }
    if let Some(mode) = metadata.configuration.get("delta.columnMapping.mode") {
        if !mode.trim().eq_ignore_ascii_case("none") {
            return Err(refuse(format!(
                "table `{location}` uses column mapping mode `{mode}`; filesink writes data files \
                 by column name and would corrupt it, so nothing was written"
            )));
        }
    }
    if metadata
        .configuration
        .contains_key("delta.setTransactionRetentionDuration")
    {
        return Err(refuse(format!(
            "table `{location}` sets delta.setTransactionRetentionDuration; filesink's \
             exactly-once commit needs its `txn` actions kept forever, so nothing was written"
        )));
    }
    if let Some(key) = metadata
        .configuration
        .keys()
        .find(|k| k.starts_with("delta.constraints."))
    {
        let name = &key["delta.constraints.".len()..];
        return Err(refuse(format!(
            "table `{location}` has the CHECK constraint `{name}` (`{key}`); filesink cannot \
             evaluate SQL expressions, so nothing was written"
        )));
    }
    check_columns(location, &schema.fields, "")?;

    Ok(Accepted {
        append_only: is_true(metadata, "delta.appendOnly"),
        in_commit_timestamps: is_true(metadata, "delta.enableInCommitTimestamps"),
        log_checkpoints: !is_true(metadata, "delta.checkpoint.writeStatsAsStruct")
            && !is_false(metadata, "delta.checkpoint.writeStatsAsJson"),
    })
}

/// Refuses columns, at any depth, whose metadata asks a writer to evaluate or generate values.
fn check_columns(location: &str, fields: &[StructField], prefix: &str) -> Result<()> {
    for field in fields {
        let path = if prefix.is_empty() {
            field.name.clone()
        } else {
            format!("{prefix}.{}", field.name)
        };
        let keys = &field.metadata;
        if keys.contains_key("delta.invariants") {
            return Err(refuse(format!(
                "table `{location}` has an invariant on column `{path}` (`delta.invariants`); \
                 filesink cannot evaluate SQL expressions, so nothing was written"
            )));
        }
        if keys.contains_key("delta.generationExpression") {
            return Err(refuse(format!(
                "table `{location}` has the generated column `{path}` \
                 (`delta.generationExpression`); filesink cannot evaluate SQL expressions, so \
                 nothing was written"
            )));
        }
        if keys.keys().any(|k| k.starts_with("delta.identity.")) {
            return Err(refuse(format!(
                "table `{location}` has the identity column `{path}` (`delta.identity.*`); \
                 filesink cannot generate its values, so nothing was written"
            )));
        }
        check_nested(location, &field.data_type, &path)?;
    }
    Ok(())
}

fn check_nested(location: &str, data_type: &DeltaType, path: &str) -> Result<()> {
    match data_type {
        DeltaType::Primitive(_) => Ok(()),
        DeltaType::Struct(s) => check_columns(location, &s.fields, path),
        DeltaType::Array(a) => check_nested(location, &a.element_type, &format!("{path}.element")),
        DeltaType::Map(m) => {
            check_nested(location, &m.key_type, &format!("{path}.key"))?;
            check_nested(location, &m.value_type, &format!("{path}.value"))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::actions::Format;
    use super::*;

    const LAKE: &str = "./lake";

    fn protocol(reader: i32, writer: i32, rf: Option<&[&str]>, wf: Option<&[&str]>) -> Protocol {
        let list = |l: Option<&[&str]>| l.map(|l| l.iter().map(|s| s.to_string()).collect());
        Protocol {
            min_reader_version: reader,
            min_writer_version: writer,
            reader_features: list(rf),
            writer_features: list(wf),
            extra: Default::default(),
        }
    }

    fn metadata(configuration: &[(&str, &str)]) -> Metadata {
        Metadata {
            id: "af23c9d7-fff1-4a5a-a2c8-55c59bd782aa".into(),
            name: None,
            description: None,
            format: Format::parquet(),
            schema_string: String::new(),
            partition_columns: vec![],
            configuration: configuration
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            created_time: None,
            extra: Default::default(),
        }
    }

    fn schema() -> StructType {
        StructType::parse(
            r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},
                {"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}"#,
            "schema",
        )
        .unwrap()
    }

    fn accept(p: &Protocol, m: &Metadata) -> Accepted {
        check_table(LAKE, p, m, &schema()).unwrap()
    }

    fn refusal(p: &Protocol, m: &Metadata, s: &StructType) -> String {
        match check_table(LAKE, p, m, s) {
            Err(Error::NotSupported(msg)) => msg,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    const PLAIN: Accepted = Accepted {
        append_only: false,
        in_commit_timestamps: false,
        log_checkpoints: true,
    };

    #[test]
    fn new_tables_get_1_2_or_3_7_with_timestamp_ntz() {
        let p = new_table_protocol(false);
        assert_eq!((p.min_reader_version, p.min_writer_version), (1, 2));
        assert!(p.reader_features.is_none() && p.writer_features.is_none());
        let p = new_table_protocol(true);
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        assert_eq!(p.reader_features.unwrap(), ["timestampNtz"]);
        assert_eq!(p.writer_features.unwrap(), ["timestampNtz"]);
        // Our own protocols are accepted.
        accept(&new_table_protocol(false), &metadata(&[]));
        accept(&new_table_protocol(true), &metadata(&[]));
    }

    #[test]
    fn legacy_versions_up_to_reader_2_writer_6_are_accepted() {
        for reader in 1..=2 {
            for writer in 1..=6 {
                assert_eq!(
                    accept(&protocol(reader, writer, None, None), &metadata(&[])),
                    PLAIN
                );
            }
        }
    }

    #[test]
    fn every_implemented_feature_is_accepted() {
        let p = protocol(3, 7, Some(READER_FEATURES), Some(WRITER_FEATURES));
        assert_eq!(accept(&p, &metadata(&[])), PLAIN);
        let p = protocol(
            3,
            7,
            Some(&["columnMapping"]),
            Some(&["columnMapping", "changeDataFeed"]),
        );
        let m = metadata(&[
            ("delta.columnMapping.mode", "none"),
            ("delta.enableChangeDataFeed", "true"),
        ]);
        assert_eq!(accept(&p, &m), PLAIN);
    }

    #[test]
    fn writer_features_only_on_reader_1_or_2_are_accepted() {
        let p = protocol(1, 7, None, Some(&["appendOnly", "invariants"]));
        accept(&p, &metadata(&[]));
        let p = protocol(2, 7, None, Some(&["columnMapping", "identityColumns"]));
        accept(&p, &metadata(&[]));
    }

    #[test]
    fn append_only_tables_are_accepted_and_reported() {
        let p = protocol(1, 7, None, Some(&["appendOnly"]));
        let a = accept(&p, &metadata(&[("delta.appendOnly", "true")]));
        assert!(a.append_only);
        let a = accept(
            &protocol(1, 2, None, None),
            &metadata(&[("delta.appendOnly", "TRUE")]),
        );
        assert!(a.append_only);
        let a = accept(
            &protocol(1, 2, None, None),
            &metadata(&[("delta.appendOnly", "false")]),
        );
        assert!(!a.append_only);
    }

    #[test]
    fn in_commit_timestamps_are_accepted_and_reported() {
        let p = protocol(1, 7, None, Some(&["inCommitTimestamp"]));
        let m = metadata(&[
            ("delta.enableInCommitTimestamps", "true"),
            ("delta.inCommitTimestampEnablementVersion", "4"),
        ]);
        assert!(accept(&p, &m).in_commit_timestamps);
    }

    #[test]
    fn checkpoint_stats_settings_only_turn_log_checkpoints_off() {
        let p = protocol(1, 3, None, None);
        for (key, value, allowed) in [
            ("delta.checkpoint.writeStatsAsStruct", "true", false),
            ("delta.checkpoint.writeStatsAsStruct", "false", true),
            ("delta.checkpoint.writeStatsAsJson", "false", false),
            ("delta.checkpoint.writeStatsAsJson", "true", true),
        ] {
            let a = accept(&p, &metadata(&[(key, value)]));
            assert_eq!(a.log_checkpoints, allowed, "{key}={value}");
        }
    }

    #[test]
    fn refused_reader_and_writer_features_name_the_first_one() {
        let msg = refusal(
            &protocol(3, 7, Some(&["deletionVectors"]), Some(&["deletionVectors"])),
            &metadata(&[]),
            &schema(),
        );
        assert_eq!(
            msg,
            "table `./lake` needs the reader feature `deletionVectors`, which filesink does not \
             implement; filesink writes only tables it fully understands, so nothing was written \
             (write this table with an engine that supports the feature, or choose another table)"
        );
        for feature in [
            "deletionVectors",
            "v2Checkpoint",
            "catalogManaged",
            "columnMappingX",
            "typeWidening",
            "typeWidening-preview",
            "variantType",
            "variantType-preview",
            "variantShredding",
            "someFeatureFromTheFuture",
        ] {
            let msg = refusal(
                &protocol(
                    3,
                    7,
                    Some(&["timestampNtz", feature]),
                    Some(&["timestampNtz", feature]),
                ),
                &metadata(&[]),
                &schema(),
            );
            assert!(
                msg.starts_with(&format!(
                    "table `./lake` needs the reader feature `{feature}`,"
                )),
                "{msg}"
            );
        }
        for feature in [
            "rowTracking",
            "clustering",
            "icebergCompatV1",
            "icebergCompatV2",
            "allowColumnDefaults",
            "deletionVectors",
            "v2Checkpoint",
            "catalogManaged",
            "someFeatureFromTheFuture",
        ] {
            let msg = refusal(
                &protocol(1, 7, None, Some(&["appendOnly", feature, "rowTracking"])),
                &metadata(&[]),
                &schema(),
            );
            assert!(
                msg.starts_with(&format!(
                    "table `./lake` needs the writer feature `{feature}`,"
                )),
                "{msg}"
            );
        }
    }

    #[test]
    fn versions_beyond_reader_3_or_writer_7_are_refused() {
        assert_eq!(
            refusal(&protocol(1, 8, None, None), &metadata(&[]), &schema()),
            "table `./lake` has minWriterVersion 8; filesink writes protocol versions up to reader 3 / writer 7"
        );
        assert_eq!(
            refusal(&protocol(4, 7, Some(&[]), Some(&[])), &metadata(&[]), &schema()),
            "table `./lake` has minReaderVersion 4; filesink writes protocol versions up to reader 3 / writer 7"
        );
    }

    #[test]
    fn protocols_breaking_their_own_rules_are_corrupt() {
        for p in [
            protocol(0, 2, None, None),
            protocol(1, 0, None, None),
            protocol(3, 7, None, Some(&[])),
            protocol(1, 7, None, None),
        ] {
            let err = check_table(LAKE, &p, &metadata(&[]), &schema()).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{p:?}: {err:?}");
        }
    }

    #[test]
    fn column_mapping_other_than_none_is_refused() {
        for (p, mode) in [
            (protocol(2, 5, None, None), "name"),
            (
                protocol(3, 7, Some(&["columnMapping"]), Some(&["columnMapping"])),
                "id",
            ),
            // Refused even where the protocol would not honour the property.
            (protocol(1, 2, None, None), "name"),
        ] {
            let msg = refusal(
                &p,
                &metadata(&[("delta.columnMapping.mode", mode)]),
                &schema(),
            );
            assert_eq!(
                msg,
                format!(
                    "table `./lake` uses column mapping mode `{mode}`; filesink writes data files \
                     by column name and would corrupt it, so nothing was written"
                )
            );
        }
    }

    #[test]
    fn set_transaction_retention_duration_is_refused() {
        let msg = refusal(
            &protocol(1, 2, None, None),
            &metadata(&[("delta.setTransactionRetentionDuration", "interval 7 days")]),
            &schema(),
        );
        assert_eq!(
            msg,
            "table `./lake` sets delta.setTransactionRetentionDuration; filesink's exactly-once \
             commit needs its `txn` actions kept forever, so nothing was written"
        );
    }

    #[test]
    fn check_constraints_are_refused() {
        let msg = refusal(
            &protocol(1, 3, None, None),
            &metadata(&[(
                "delta.constraints.birthDateCheck",
                "birthDate > '1900-01-01'",
            )]),
            &schema(),
        );
        assert_eq!(
            msg,
            "table `./lake` has the CHECK constraint `birthDateCheck` \
             (`delta.constraints.birthDateCheck`); filesink cannot evaluate SQL expressions, so \
             nothing was written"
        );
    }

    fn with_nested_metadata(key: &str, value: serde_json::Value) -> StructType {
        let mut s = schema();
        let DeltaType::Struct(inner) = &mut s.fields[1].data_type else {
            unreachable!()
        };
        inner.fields[0].metadata.insert(key.to_owned(), value);
        s
    }

    #[test]
    fn invariants_generated_and_identity_columns_are_refused_at_any_depth() {
        let p = protocol(1, 6, None, None);
        let m = metadata(&[]);
        let msg = refusal(
            &p,
            &m,
            &with_nested_metadata(
                "delta.invariants",
                r#"{"expression": { "expression": "x > 3"} }"#.into(),
            ),
        );
        assert_eq!(
            msg,
            "table `./lake` has an invariant on column `s.x` (`delta.invariants`); filesink \
             cannot evaluate SQL expressions, so nothing was written"
        );
        let msg = refusal(
            &p,
            &m,
            &with_nested_metadata("delta.generationExpression", "id + 1".into()),
        );
        assert!(
            msg.starts_with("table `./lake` has the generated column `s.x`"),
            "{msg}"
        );
        let msg = refusal(
            &p,
            &m,
            &with_nested_metadata("delta.identity.start", 1.into()),
        );
        assert!(
            msg.starts_with("table `./lake` has the identity column `s.x`"),
            "{msg}"
        );
        // Other column metadata is fine.
        check_table(
            LAKE,
            &p,
            &m,
            &with_nested_metadata("comment", "a comment".into()),
        )
        .unwrap();
    }

    #[test]
    fn non_parquet_tables_are_refused() {
        let mut m = metadata(&[]);
        m.format.provider = "csv".into();
        let msg = refusal(&protocol(1, 2, None, None), &m, &schema());
        assert_eq!(
            msg,
            "table `./lake` stores its data files as `csv`; filesink writes only Parquet tables, \
             so nothing was written"
        );
    }
}
