//! Version-1 committables and writer states, as committed under `fixtures/state/v1/`, keep
//! deserializing in every later build; foreign, damaged or future state is refused clearly.

use filesink::{Committable, Error, PendingHandle, WriterState};

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/state/v1")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
    // And it writes back to the same JSON value.
    let reread: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
    let golden: serde_json::Value = serde_json::from_slice(&fixture("committable.json")).unwrap();
    assert_eq!(reread, golden);
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
    let reread: serde_json::Value = serde_json::from_slice(&s.to_json()).unwrap();
    let golden: serde_json::Value = serde_json::from_slice(&fixture("writer_state.json")).unwrap();
    assert_eq!(reread, golden);
}

#[test]
fn future_versions_are_refused_with_the_version_in_the_message() {
    let mut v: serde_json::Value = serde_json::from_slice(&fixture("committable.json")).unwrap();
    v["version"] = 2.into();
    let err = Committable::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found: 2,
                supported: 1,
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
