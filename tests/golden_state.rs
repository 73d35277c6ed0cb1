//! Committables and writer states as committed under `fixtures/state/v1/`,
//! `fixtures/state/v2/` and `fixtures/state/v3/` keep deserializing in every later build, and
//! write back byte for byte; foreign, damaged or future state is refused clearly.

use filesink::protocol::FileStats;
use filesink::{Committable, Error, PendingHandle, WriterState};
use serde_json::json;

fn fixture_of(version: &str, name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/state")
        .join(version)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(name: &str) -> Vec<u8> {
    fixture_of("v1", name)
}

/// `json` without the whitespace between tokens, members in the order written: the bytes
/// `to_json` must produce for the fixture to write back unchanged.
fn compact(json: &[u8]) -> Vec<u8> {
    let (mut out, mut in_string, mut escaped) = (Vec::new(), false, false);
    for &b in json {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !b.is_ascii_whitespace() {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

#[test]
fn golden_v1_committable_deserializes() {
    let c = Committable::from_json(&fixture("committable.json")).unwrap();
    assert_eq!(c.version, 1);
    assert_eq!(c.writer_id, "0");
    assert_eq!(c.checkpoint_id, 7);
    assert_eq!(c.bucket.as_str(), "day=2026-11-30");
    assert_eq!(
        c.final_path,
        "day=2026-11-30/part-0-019ad2f1c0c87b2a9d6f3b8e5a1c2d3e-3.parquet"
    );
    assert_eq!(c.size_bytes, 1234);
    assert_eq!(c.crc32c, 3735928559);
    assert_eq!(c.record_count, 100);
    assert_eq!(
        c.pending,
        PendingHandle::LocalFile {
            in_progress_path: "day=2026-11-30/.part-0-019ad2f1c0c87b2a9d6f3b8e5a1c2d3e-3.parquet.inprogress.5f2b9a0c4d1e4f7a8b6c3d2e1f0a9b8c".into()
        }
    );
    assert!(c.supersedes.is_empty());
    assert_eq!(c.stats, None);
    assert_eq!(c.format_version(), 1);
    // And it writes back byte for byte: no `stats`, no `supersedes`, members in order.
    assert_eq!(
        String::from_utf8(c.to_json()).unwrap(),
        String::from_utf8(compact(&fixture("committable.json"))).unwrap()
    );
}

#[test]
fn golden_v2_committable_with_stats_deserializes() {
    let golden = fixture_of("v2", "committable.json");
    let c = Committable::from_json(&golden).unwrap();
    assert_eq!(c.version, 2);
    assert_eq!(c.format_version(), 2);
    assert_eq!(c.checkpoint_id, 8);
    assert_eq!(c.record_count, 100);
    let s: &FileStats = c.stats.as_ref().expect("the fixture has statistics");
    assert_eq!(s.num_records, 100);
    let p = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(s.columns().len(), 9);
    assert_eq!(s.min_values[&p("amount")], json!("-12.50"));
    assert_eq!(s.max_values[&p("day")], json!("2026-11-30"));
    assert_eq!(s.min_values[&p("flag")], json!(false));
    assert_eq!(s.min_values[&p("geo.lat_e6")], json!(-3));
    assert_eq!(s.null_count[&p("geo.lat_e6")], 2);
    assert_eq!(s.max_values.get(&p("name")), None);
    assert_eq!(s.null_count[&p("payload")], 4);
    assert_eq!(s.min_values.get(&p("payload")), None);
    assert_eq!(s.max_values[&p("score")], json!(99.25));
    assert_eq!(s.max_values[&p("ts")], json!(1_796_047_199_999_001_i64));
    assert_eq!(
        String::from_utf8(c.to_json()).unwrap(),
        String::from_utf8(compact(&golden)).unwrap()
    );
}

#[test]
fn statistics_need_version_2_and_the_committables_record_count() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture_of("v2", "committable.json")).unwrap();
    v["version"] = 1.into();
    let err = Committable::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("version 2")),
        "{err:?}"
    );
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture_of("v2", "committable.json")).unwrap();
    v["stats"]["num_records"] = 99.into();
    let err = Committable::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("99")),
        "{err:?}"
    );
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture_of("v2", "committable.json")).unwrap();
    v["stats"]["columns"][0]["path"] = json!([]);
    let err = Committable::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    // A version-2 committable without statistics is valid (written by no build, read by all).
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture_of("v2", "committable.json")).unwrap();
    v.as_object_mut().unwrap().remove("stats");
    let c = Committable::from_json(v.to_string().as_bytes()).unwrap();
    assert_eq!((c.version, c.format_version()), (2, 1));
}

#[test]
fn golden_v1_writer_state_deserializes() {
    let s = WriterState::from_json(&fixture("writer_state.json")).unwrap();
    assert_eq!(s.version, 1);
    assert_eq!(s.writer_id, "3");
    assert_eq!(s.format, "jsonl");
    assert_eq!(s.checkpoint_id, 12);
    assert_eq!(s.in_progress.len(), 1);
    let f = &s.in_progress[0];
    assert_eq!(f.bucket.as_str(), "");
    assert_eq!(f.durable_len_bytes, 4096);
    assert_eq!(f.record_count, 50);
    assert_eq!(f.crc32c, 12345);
    assert_eq!(f.created_at_ms, 1764460800000);
    assert_eq!(f.supersedes, vec![".part-3-019ad2f1c0c87b2a9d6f3b8e5a1c2d30-0.jsonl.inprogress.00112233445566778899aabbccddeeff".to_string()]);
    assert_eq!(
        String::from_utf8(s.to_json()).unwrap(),
        String::from_utf8(compact(&fixture("writer_state.json"))).unwrap()
    );
    assert!(s.carried.is_empty());
    assert_eq!(s.format_version(), 1);
}

#[test]
fn golden_v3_writer_state_with_carried_files_deserializes() {
    let golden = fixture_of("v3", "writer_state.json");
    let s = WriterState::from_json(&golden).unwrap();
    assert_eq!((s.version, s.format_version()), (3, 3));
    assert_eq!(s.format, "parquet");
    assert_eq!(s.checkpoint_id, 9);
    assert!(s.in_progress.is_empty());
    assert_eq!(s.carried.len(), 2);
    let f = &s.carried[0];
    assert_eq!(f.bucket.as_str(), "day=2026-11-30");
    assert_eq!(
        f.final_path,
        "day=2026-11-30/part-0-019ad2f1c0c87b2a9d6f3b8e5a1c2d3e-4.parquet"
    );
    assert!(f.in_progress_path.starts_with("day=2026-11-30/.part-0-"));
    assert_eq!(
        (f.size_bytes, f.crc32c, f.record_count),
        (2048, 305419896, 40)
    );
    assert_eq!((f.checkpoint_id, f.carried_at_ms), (8, 1764460800000));
    assert_eq!(s.carried[1].checkpoint_id, 9);
    assert_eq!(
        String::from_utf8(s.to_json()).unwrap(),
        String::from_utf8(compact(&golden)).unwrap()
    );
}

#[test]
fn carried_files_need_version_3_and_safe_paths() {
    // A build that reads version 2 but not `carried` would drop the carried files: a state
    // that has them must say version 3, which such a build refuses.
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture_of("v3", "writer_state.json")).unwrap();
    v["version"] = 2.into();
    let err = WriterState::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("version 3")),
        "{err:?}"
    );
    for (field, bad) in [
        ("in_progress_path", "day=2026-11-30/../../etc/passwd"),
        ("in_progress_path", "day=2026-11-30/part-0-x-4.parquet"),
        (
            "final_path",
            "day=2026-11-29/part-0-019ad2f1c0c87b2a9d6f3b8e5a1c2d3e-4.parquet",
        ),
    ] {
        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture_of("v3", "writer_state.json")).unwrap();
        v["carried"][0][field] = bad.into();
        let err = WriterState::from_json(v.to_string().as_bytes()).unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { .. }),
            "{field} = {bad}: {err:?}"
        );
    }
}

#[test]
fn future_versions_are_refused_with_the_version_in_the_message() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture_of("v2", "committable.json")).unwrap();
    v["version"] = 4.into();
    let err = Committable::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{err:?}"
    );
    let mut s: serde_json::Value = serde_json::from_slice(&fixture("writer_state.json")).unwrap();
    s["version"] = 99.into();
    let err = WriterState::from_json(s.to_string().as_bytes()).unwrap_err();
    assert!(err.to_string().contains("99"), "{err}");
}

#[test]
fn corrupt_and_foreign_state_is_refused() {
    let golden = fixture("committable.json");
    let bad_inputs: [&[u8]; 5] = [
        &golden[..golden.len() / 2],
        b"",
        b"[]",
        b"{\"hello\": 1}",
        b"{\"version\": 1}",
    ];
    for bad in bad_inputs {
        let err = Committable::from_json(bad).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    }
    let mut v: serde_json::Value = serde_json::from_slice(&golden).unwrap();
    v["pending"]["in_progress_path"] = "day=2026-11-30/../../../etc/passwd".into();
    assert!(matches!(
        Committable::from_json(v.to_string().as_bytes()),
        Err(Error::Corrupt { .. })
    ));
    let mut v: serde_json::Value = serde_json::from_slice(&golden).unwrap();
    v["bucket"] = "../x".into();
    assert!(matches!(
        Committable::from_json(v.to_string().as_bytes()),
        Err(Error::Corrupt { .. })
    ));
    let mut v: serde_json::Value = serde_json::from_slice(&golden).unwrap();
    v["writer_id"] = "a-b".into();
    assert!(matches!(
        Committable::from_json(v.to_string().as_bytes()),
        Err(Error::Corrupt { .. })
    ));
}
