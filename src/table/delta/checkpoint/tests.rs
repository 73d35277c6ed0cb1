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
    let mut writer = ArrowWriter::try_new_with_options(&mut out, batch.schema(), options).unwrap();
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
