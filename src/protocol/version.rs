//! The format version of everything filesink serializes, and the one decoder that checks it.
//!
//! Every durable record (committables, writer states, manifests, the sink identity) carries a
//! `version` field. [`decode_versioned`] reads the version first and refuses a missing one, `0`
//! and any newer than [`FORMAT_VERSION`] before it decodes the rest, so a record written by a
//! newer build is reported as [`Error::UnsupportedVersion`], never misread as corrupt or
//! half-understood. [`check_version`] is the same check for a value already decoded.

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::{Error, Result};

/// The newest serialization format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Refuses `found` unless it is a version this build reads (`1..=`[`FORMAT_VERSION`]).
/// `what` names the record in the error.
pub fn check_version(what: impl FnOnce() -> String, found: u32) -> Result<()> {
    if found == 0 || found > FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            what: what(),
            found,
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

#[derive(Deserialize)]
struct VersionProbe {
    version: Option<u32>,
}

/// Decodes the JSON record `bytes` after checking its `version` field ([`check_version`]).
/// Errors name the record as `what`: [`Error::Corrupt`] for bytes that are not such a record,
/// [`Error::UnsupportedVersion`] for a version this build does not read.
pub fn decode_versioned<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T> {
    let probe: VersionProbe = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(what, format!("not a JSON object: {e}")))?;
    let found = probe
        .version
        .ok_or_else(|| Error::corrupt(what, "no `version` field"))?;
    check_version(|| what.to_string(), found)?;
    serde_json::from_slice(bytes).map_err(|e| Error::corrupt(what, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Record {
        #[allow(dead_code)]
        version: u32,
        x: u32,
    }

    #[test]
    fn only_known_versions_decode() {
        let ok: Record = decode_versioned("record", br#"{"version":1,"x":7}"#).unwrap();
        assert_eq!(ok.x, 7);
        for (bytes, unsupported) in [
            (&br#"{"version":0,"x":7}"#[..], true),
            (br#"{"version":2,"x":7}"#, true),
            (br#"{"x":7}"#, false),
            (br#"[1]"#, false),
            (br#"{"version":1"#, false),
        ] {
            let err = decode_versioned::<Record>("record", bytes).unwrap_err();
            assert_eq!(
                matches!(err, Error::UnsupportedVersion { .. }),
                unsupported,
                "{err}"
            );
            assert!(err.to_string().contains("record"), "{err}");
        }
    }
}
