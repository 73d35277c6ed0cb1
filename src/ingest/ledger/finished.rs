//! The ledger's index of files read to their end: what lets a run over a million taken files
//! find the one new file without a lookup per file.
//!
//! # What it holds
//!
//! One *digest* per file that a run read to its end and gave up ([`super::release_inputs`]):
//! 96 bits (CRC-32C and 64-bit FNV-1a, as the ledger's keys) of the file's identity, size,
//! time of last change and birth time, as the run found them unchanged once it had read them
//! (of an object: its URL, size and ETag, which every read of it was pinned to).
//! A file whose digest is in the index now holds nothing the lake has not taken: its bytes
//! were taken to their end when it had that size and time, and what the lake takes stays
//! taken. So [`super::survey`] passes it over without reading its ledger entries. A file not
//! in the index (new, grown, changed, or given up before the index was written) is looked up
//! in its entries as before: the index only ever saves lookups, and a digest missing from it
//! costs one lookup, never a record.
//!
//! # Layout
//!
//! ```text
//! _filesink/finished/<digests, 12 digits>-<uuid>.bin   one segment, written once
//! ```
//!
//! Segments of 12-byte digests (big-endian), kept as every compact index of the lake is
//! ([`crate::storage::segments`]): written once, checked by their CRC-32C, merged size-tiered
//! so that a survey reads a bounded number of them (`MAX_SEGMENTS + 1`, one listing and one
//! read each: the requests a start-up makes on an object store whatever the number of
//! inputs).
//!
//! # Writing
//!
//! A run that gives files up at their end writes one segment of their digests, after their
//! release entries: a crash between the two leaves digests out, which costs lookups only.
//! A torn or foreign segment is skipped, which costs lookups only too.

use crate::storage::segments::Kind;
use crate::storage::Storage;
use crate::Result;

pub use crate::protocol::FINISHED_DIR;

/// The index's segments.
const KIND: Kind = Kind {
    dir: FINISHED_DIR,
    magic: b"filesink finished inputs 1\n",
    width: DIGEST_BYTES,
};

/// Bytes per digest in a segment.
const DIGEST_BYTES: usize = 12;

/// The digest of an input read to its end: its identity and size, a file's time of last
/// change and birth time, an object's version (96 bits, in the low bits).
pub fn digest(
    identity: &str,
    size: u64,
    modified_ns: Option<i64>,
    born_ns: Option<i64>,
    version: Option<&str>,
) -> u128 {
    let text = format!(
        "{identity}\0{size}\0{}\0{}\0{}",
        opt(modified_ns),
        opt(born_ns),
        version.unwrap_or("-")
    );
    crate::storage::segments::digest96(text.as_bytes())
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The index as a survey reads it: every digest of every segment that checks.
#[derive(Debug, Default)]
pub struct Finished {
    digests: Vec<u128>,
}

impl Finished {
    /// Reads every segment (one listing, one read each).
    pub async fn load(storage: &dyn Storage) -> Result<Finished> {
        let digests = KIND
            .load(storage)
            .await?
            .iter()
            .map(|r| from_bytes(r))
            .collect();
        Ok(Finished { digests })
    }

    /// Whether the index holds `digest`.
    pub fn holds(&self, digest: u128) -> bool {
        self.digests.binary_search(&digest).is_ok()
    }

    /// How many digests it holds.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }
}

fn from_bytes(record: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    b[16 - DIGEST_BYTES..].copy_from_slice(record);
    u128::from_be_bytes(b)
}

fn to_bytes(digest: u128) -> Vec<u8> {
    digest.to_be_bytes()[16 - DIGEST_BYTES..].to_vec()
}

/// Writes a segment of `digests`, merging the index if it has grown past
/// [`crate::storage::segments::MAX_SEGMENTS`] segments. Nothing is written for no digests.
pub async fn record(storage: &dyn Storage, digests: Vec<u128>) -> Result<()> {
    KIND.record(storage, digests.into_iter().map(to_bytes).collect())
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStorage;

    #[test]
    fn a_digest_changes_with_each_part_of_what_it_sums() {
        let d = digest("inode:1:2", 10, Some(5), Some(4), None);
        assert_ne!(d, digest("inode:1:3", 10, Some(5), Some(4), None));
        assert_ne!(d, digest("inode:1:2", 11, Some(5), Some(4), None));
        assert_ne!(d, digest("inode:1:2", 10, Some(6), Some(4), None));
        assert_ne!(d, digest("inode:1:2", 10, Some(5), None, None));
        assert_ne!(d, digest("inode:1:2", 10, Some(5), Some(4), Some("e1")));
        let v = |e| digest("s3://b/k", 10, None, None, Some(e));
        assert_ne!(v("\"e1\""), v("\"e2\""));
        assert_eq!(d >> 96, 0, "96 bits");
    }

    #[tokio::test]
    async fn the_index_holds_every_digest_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        let mut all = Vec::new();
        for run in 0..20u128 {
            let d: Vec<u128> = (0..=run).map(|i| (run << 90) + i).collect();
            all.extend(d.iter().copied());
            record(&storage, d).await.unwrap();
        }
        let index = Finished::load(&storage).await.unwrap();
        assert_eq!(index.len(), all.len());
        assert!(all.iter().all(|d| index.holds(*d)));
        assert!(!index.holds(7));
    }
}
