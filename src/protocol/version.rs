//! The format version of everything filesink serializes, and the one decoder that checks it.
//!
//! Every durable record (committables, writer states, manifests, the sink identity) carries a
//! `version` field. [`decode_versioned`] reads the version first and refuses a missing one, `0`
//! and any newer than [`FORMAT_VERSION_MAX`] before it decodes the rest, so a record written by
//! a newer build is reported as [`Error::UnsupportedVersion`], never misread as corrupt or
//! half-understood. [`check_version`] is the same check for a value already decoded.
//!
//! **A record is written with the lowest version that holds it.** Version 1 is
//! [`FORMAT_VERSION`]; a record written with version 2 ([`FORMAT_VERSION_STATS`]) carries
//! something a version-1 reader would drop: a committable with per-file statistics
//! ([`super::Committable::stats`], written only by sinks built for a table), and a manifest
//! or state that holds such a committable. An older build refuses such a record instead of
//! acting on half of it, and a lake that uses nothing newer stays readable by older builds.
//!
//! | version | adds |
//! |---|---|
//! | 1 | committables, writer states, manifests, the sink identity |
//! | 2 | `Committable::stats` |
//! | 3 | `WriterState::carried` (files a pre-commit merge carries across checkpoints) |
//!
//! The carried files got a version of their own rather than sharing 2: a build that reads
//! version 2 but does not know `carried` would drop the field, find the carried files
//! unreferenced and remove them at restore: records lost. Version 3 makes such a build refuse
//! the state instead.

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::{Error, Result};

/// The version of every record that uses nothing newer: what this build writes unless a
/// record needs more.
pub const FORMAT_VERSION: u32 = 1;

/// The version of a record that carries per-file statistics
/// ([`super::Committable::stats`]), or holds a record that does.
pub const FORMAT_VERSION_STATS: u32 = 2;

/// The version of a writer state that carries files of a pre-commit merge
/// ([`super::WriterState::carried`]), or of a manifest that holds such a state.
pub const FORMAT_VERSION_CARRIED: u32 = 3;

/// The newest version this build reads.
pub const FORMAT_VERSION_MAX: u32 = 3;

/// Refuses `found` unless it is a version this build reads (`1..=`[`FORMAT_VERSION_MAX`]).
/// `what` names the record in the error.
pub fn check_version(what: impl FnOnce() -> String, found: u32) -> Result<()> {
    if found == 0 || found > FORMAT_VERSION_MAX {
        return Err(Error::UnsupportedVersion {
            what: what(),
            found,
            supported: FORMAT_VERSION_MAX,
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
        let ok: Record = decode_versioned("record", br#"{"version":2,"x":8}"#).unwrap();
        assert_eq!(ok.x, 8);
        for (bytes, unsupported) in [
            (&br#"{"version":0,"x":7}"#[..], true),
            (br#"{"version":4,"x":7}"#, true),
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
