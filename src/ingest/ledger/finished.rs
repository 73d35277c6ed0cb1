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
//! A segment is [`MAGIC`], then its digests in ascending order, 12 bytes each (big-endian),
//! then the CRC-32C of all that (4 bytes, big-endian). Its name gives the number of digests, so
//! that choosing what to merge reads no segment.
//!
//! # Writing, and staying small
//!
//! A run that gives files up at their end writes one segment of their digests, after their
//! release entries: a crash between the two leaves digests out, which costs lookups only. A
//! run that then finds more than [`MAX_SEGMENTS`] segments merges them, size-tiered as a log-
//! structured merge tree does: the segments smaller than the largest into one, or all of them
//! once those add up to the largest; it writes the merged segment, then deletes the ones it
//! merged. So a lake keeps at most a few segments, each digest is rewritten O(log n) times,
//! and a survey reads a bounded number of them (`MAX_SEGMENTS + 1`, one listing and one read
//! each: the requests a start-up makes on an object store whatever the number of inputs).
//! Two runs that merge at once write two merged segments holding the same digests, and a
//! reader that lists a segment which a merge then deletes finds it gone and goes on: neither
//! loses anything the other segments or the entries do not hold. A segment that does not
//! check (a torn or foreign file) is skipped, never trusted.

use crate::storage::Storage;
use crate::Result;

pub use crate::protocol::FINISHED_DIR;

/// The first bytes of a segment: its layout and version.
pub const MAGIC: &[u8] = b"filesink finished inputs 1\n";

/// Bytes per digest in a segment.
const DIGEST_BYTES: usize = 12;

/// A lake with more segments than this has them merged by the next run that writes one.
pub const MAX_SEGMENTS: usize = 8;

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
    let (crc, fnv) = super::hash96(text.as_bytes());
    (u128::from(crc) << 64) | u128::from(fnv)
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
        let mut digests = Vec::new();
        for name in segments(storage).await? {
            if let Some(mut d) = read_segment(storage, &name).await? {
                digests.append(&mut d);
            }
        }
        digests.sort_unstable();
        digests.dedup();
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

/// The names of the segments, in byte order.
async fn segments(storage: &dyn Storage) -> Result<Vec<String>> {
    let mut names: Vec<String> = storage
        .list_metadata(FINISHED_DIR)
        .await?
        .into_iter()
        .filter(|e| !e.is_dir && count_of(&e.name).is_some())
        .map(|e| e.name)
        .collect();
    names.sort();
    Ok(names)
}

/// The number of digests a segment's name gives, if it is a segment's name.
fn count_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".bin")?;
    let (count, id) = stem.split_once('-')?;
    let ok = count.len() == 12
        && count.bytes().all(|b| b.is_ascii_digit())
        && !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| count.parse().ok()).flatten()
}

/// A segment's digests; `None` if it is gone (merged meanwhile) or does not check.
async fn read_segment(storage: &dyn Storage, name: &str) -> Result<Option<Vec<u128>>> {
    let Some(bytes) = storage
        .get_metadata(&format!("{FINISHED_DIR}/{name}"))
        .await?
    else {
        return Ok(None);
    };
    Ok(parse(&bytes, count_of(name)))
}

/// The digests of a segment's bytes, if they check (and number `count`, where it is known).
fn parse(bytes: &[u8], count: Option<u64>) -> Option<Vec<u128>> {
    let body = bytes.strip_prefix(MAGIC)?;
    if body.len() < 4 || (body.len() - 4) % DIGEST_BYTES != 0 {
        return None;
    }
    let (digests, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(digests) != u32::from_be_bytes(crc.try_into().ok()?) {
        return None;
    }
    let digests = &digests[MAGIC.len()..];
    let n = digests.len() / DIGEST_BYTES;
    if count.is_some_and(|c| c != n as u64) {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for d in digests.chunks_exact(DIGEST_BYTES) {
        let mut b = [0u8; 16];
        b[16 - DIGEST_BYTES..].copy_from_slice(d);
        out.push(u128::from_be_bytes(b));
    }
    Some(out)
}

/// The bytes of a segment of `digests` (sorted, without duplicates).
fn encode(digests: &[u128]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + digests.len() * DIGEST_BYTES + 4);
    bytes.extend_from_slice(MAGIC);
    for d in digests {
        bytes.extend_from_slice(&d.to_be_bytes()[16 - DIGEST_BYTES..]);
    }
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

/// Writes a segment of `digests`, then merges the index if it has more than
/// [`MAX_SEGMENTS`] segments. Nothing is written for no digests.
pub async fn record(storage: &dyn Storage, mut digests: Vec<u128>) -> Result<()> {
    if digests.is_empty() {
        return Ok(());
    }
    digests.sort_unstable();
    digests.dedup();
    write_segment(storage, &digests).await?;
    let names = segments(storage).await?;
    if names.len() > MAX_SEGMENTS {
        merge(storage, &to_merge(&names)).await?;
    }
    Ok(())
}

async fn write_segment(storage: &dyn Storage, digests: &[u128]) -> Result<String> {
    let name = format!(
        "{:012}-{}.bin",
        digests.len(),
        uuid::Uuid::now_v7().simple()
    );
    storage
        .put_metadata(&format!("{FINISHED_DIR}/{name}"), &encode(digests))
        .await?;
    Ok(name)
}

/// The segments a merge takes (size-tiered): those smaller than the largest, or all of them
/// once those add up to at least the largest.
fn to_merge(names: &[String]) -> Vec<String> {
    let mut by_size: Vec<(u64, &String)> = names
        .iter()
        .filter_map(|n| Some((count_of(n)?, n)))
        .collect();
    by_size.sort();
    let Some(&(largest, _)) = by_size.last() else {
        return Vec::new();
    };
    let rest: u64 = by_size[..by_size.len() - 1].iter().map(|(c, _)| c).sum();
    let take = if rest >= largest {
        by_size.len()
    } else {
        by_size.len() - 1
    };
    by_size[..take].iter().map(|(_, n)| (*n).clone()).collect()
}

/// Writes one segment of the digests of `names`, then deletes them.
async fn merge(storage: &dyn Storage, names: &[String]) -> Result<()> {
    let (mut digests, mut read) = (Vec::new(), Vec::new());
    for name in names {
        if let Some(mut d) = read_segment(storage, name).await? {
            digests.append(&mut d);
            read.push(name);
        }
    }
    if read.len() < 2 {
        return Ok(());
    }
    digests.sort_unstable();
    digests.dedup();
    write_segment(storage, &digests).await?;
    for name in read {
        storage
            .delete_metadata(&format!("{FINISHED_DIR}/{name}"))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStorage;

    fn names(counts: &[u64]) -> Vec<String> {
        counts
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:012}-{i:032x}.bin"))
            .collect()
    }

    #[test]
    fn a_segment_that_does_not_check_is_not_trusted() {
        let digests = vec![1u128, 2, 3 << 90];
        let bytes = encode(&digests);
        assert_eq!(parse(&bytes, Some(3)), Some(digests.clone()));
        assert_eq!(
            parse(&bytes, Some(2)),
            None,
            "another count than its name's"
        );
        let mut torn = bytes.clone();
        torn.truncate(bytes.len() - 5);
        assert_eq!(parse(&torn, None), None, "torn");
        let mut flipped = bytes.clone();
        flipped[MAGIC.len() + 3] ^= 1;
        assert_eq!(parse(&flipped, None), None, "a flipped bit");
        assert_eq!(parse(b"{\"json\": 1}", None), None, "foreign");
        assert_eq!(count_of("000000000003-abc.bin"), Some(3));
        assert_eq!(count_of(".000000000003-abc.bin.tmp"), None);
        assert_eq!(count_of("3-abc.bin"), None);
    }

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

    #[test]
    fn merges_are_size_tiered() {
        // A large base and small segments: the small ones merge, the base stays.
        let n = names(&[1000, 1, 2, 1, 1, 3, 1, 1, 1]);
        let m = to_merge(&n);
        assert_eq!(m.len(), 8);
        assert!(!m.contains(&n[0]));
        // Once the small ones add up to the base, everything merges.
        let n = names(&[10, 2, 2, 2, 2, 1, 1, 1, 1]);
        assert_eq!(to_merge(&n).len(), 9);
    }

    #[tokio::test]
    async fn the_index_stays_a_few_segments_and_loses_no_digest() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        let mut all = Vec::new();
        for run in 0..40u128 {
            let d: Vec<u128> = (0..=run).map(|i| run * 1000 + i).collect();
            all.extend(d.iter().copied());
            record(&storage, d).await.unwrap();
            assert!(segments(&storage).await.unwrap().len() <= MAX_SEGMENTS);
        }
        let index = Finished::load(&storage).await.unwrap();
        assert_eq!(index.len(), all.len());
        assert!(all.iter().all(|d| index.holds(*d)));
        assert!(!index.holds(7));
        // A segment gone between listing and reading (merged meanwhile) is passed over.
        let first = segments(&storage).await.unwrap().remove(0);
        assert_eq!(
            read_segment(&storage, &format!("{first}x")).await.unwrap(),
            None
        );
        record(&storage, Vec::new()).await.unwrap();
    }
}
