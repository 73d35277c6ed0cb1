//! Compact indexes in the metadata namespace: a directory of *segments*, each written once,
//! each a sorted run of fixed-width records, merged size-tiered so that a directory keeps a few
//! of them whatever the number of records. The ledger's index of finished inputs and the
//! record of retired jobs are kept this way.
//!
//! # Layout
//!
//! ```text
//! <dir>/<records, 12 digits>-<uuid>.bin   one segment, written once
//! ```
//!
//! A segment is its kind's magic line, then its records in ascending byte order, `width`
//! bytes each, then the CRC-32C of all that (4 bytes, big-endian). Its name gives the number
//! of records, so that choosing what to merge reads no segment. A segment that does not check
//! (a torn or foreign file, another count than its name's) is skipped, never trusted.
//!
//! # Staying small
//!
//! A writer that finds more than [`MAX_SEGMENTS`] segments after writing one merges them, as a
//! log-structured merge tree does: the segments smaller than the largest into one, or all of
//! them once those add up to the largest; it writes the merged segment, then deletes the ones
//! it merged. So each record is rewritten O(log n) times and a reader reads a bounded number
//! of segments (`MAX_SEGMENTS + 1`, one listing and one read each). Two writers that merge at
//! once write two merged segments holding the same records, and a reader that lists a segment
//! which a merge then deletes finds it gone and goes on: a merge never loses a record.

use crate::storage::MetadataStore;
use crate::Result;

/// A directory with more segments than this has them merged by the next writer.
pub const MAX_SEGMENTS: usize = 8;

/// One kind of segment: where its segments live, how they begin, how wide a record is.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// The directory of the segments (in the metadata namespace).
    pub dir: &'static str,
    /// The first bytes of each segment: its layout and version.
    pub magic: &'static [u8],
    /// Bytes per record.
    pub width: usize,
}

impl Kind {
    /// Every record of every segment that checks, sorted, duplicates removed (one listing and
    /// one read per segment).
    pub async fn load(&self, storage: &dyn MetadataStore) -> Result<Vec<Vec<u8>>> {
        let mut records = Vec::new();
        for name in self.segments(storage).await? {
            if let Some(mut r) = self.read(storage, &name).await? {
                records.append(&mut r);
            }
        }
        records.sort_unstable();
        records.dedup();
        Ok(records)
    }

    /// Writes one segment of `records` (each `width` bytes), then merges the directory if it
    /// holds more than [`MAX_SEGMENTS`] segments. Nothing is written for no records.
    pub async fn record(
        &self,
        storage: &dyn MetadataStore,
        mut records: Vec<Vec<u8>>,
    ) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        records.sort_unstable();
        records.dedup();
        self.write(storage, &records).await?;
        let names = self.segments(storage).await?;
        if names.len() > MAX_SEGMENTS {
            self.merge(storage, &to_merge(&names)).await?;
        }
        Ok(())
    }

    /// The names of the segments, in byte order.
    pub async fn segments(&self, storage: &dyn MetadataStore) -> Result<Vec<String>> {
        let mut names: Vec<String> = storage
            .list_metadata(self.dir)
            .await?
            .into_iter()
            .filter(|e| !e.is_dir && count_of(&e.name).is_some())
            .map(|e| e.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// A segment's records; `None` if it is gone (merged meanwhile) or does not check.
    pub async fn read(
        &self,
        storage: &dyn MetadataStore,
        name: &str,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let Some(bytes) = storage
            .get_metadata(&format!("{}/{name}", self.dir))
            .await?
        else {
            return Ok(None);
        };
        Ok(self.parse(&bytes, count_of(name)))
    }

    /// The records of a segment's bytes, if they check (and number `count`, where it is
    /// known).
    pub fn parse(&self, bytes: &[u8], count: Option<u64>) -> Option<Vec<Vec<u8>>> {
        let body = bytes.strip_prefix(self.magic)?;
        if body.len() < 4 || (body.len() - 4) % self.width != 0 {
            return None;
        }
        let (checked, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(checked) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let records = &checked[self.magic.len()..];
        let n = records.len() / self.width;
        if count.is_some_and(|c| c != n as u64) {
            return None;
        }
        Some(
            records
                .chunks_exact(self.width)
                .map(<[u8]>::to_vec)
                .collect(),
        )
    }

    /// The bytes of a segment of `records` (sorted, without duplicates).
    pub fn encode(&self, records: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.magic.len() + records.len() * self.width + 4);
        bytes.extend_from_slice(self.magic);
        for r in records {
            debug_assert_eq!(r.len(), self.width);
            bytes.extend_from_slice(r);
        }
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        bytes
    }

    async fn write(&self, storage: &dyn MetadataStore, records: &[Vec<u8>]) -> Result<String> {
        let name = format!(
            "{:012}-{}.bin",
            records.len(),
            uuid::Uuid::now_v7().simple()
        );
        storage
            .put_metadata(&format!("{}/{name}", self.dir), &self.encode(records))
            .await?;
        Ok(name)
    }

    /// Writes one segment of the records of `names`, then deletes them.
    async fn merge(&self, storage: &dyn MetadataStore, names: &[String]) -> Result<()> {
        let (mut records, mut read) = (Vec::new(), Vec::new());
        for name in names {
            if let Some(mut r) = self.read(storage, name).await? {
                records.append(&mut r);
                read.push(name);
            }
        }
        if read.len() < 2 {
            return Ok(());
        }
        records.sort_unstable();
        records.dedup();
        self.write(storage, &records).await?;
        for name in read {
            storage
                .delete_metadata(&format!("{}/{name}", self.dir))
                .await?;
        }
        Ok(())
    }
}

/// CRC-32C and 64-bit FNV-1a of `bytes`: the 96 bits the ledger keys its inputs by, and the
/// digests the compact indexes hold.
pub fn hash96(bytes: &[u8]) -> (u32, u64) {
    let mut fnv: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        fnv ^= u64::from(*b);
        fnv = fnv.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (crc32c::crc32c(bytes), fnv)
}

/// [`hash96`] as one number (in the low 96 bits): the digest a record begins with.
pub fn digest96(bytes: &[u8]) -> u128 {
    let (crc, fnv) = hash96(bytes);
    (u128::from(crc) << 64) | u128::from(fnv)
}

/// The number of records a segment's name gives, if it is a segment's name.
pub fn count_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".bin")?;
    let (count, id) = stem.split_once('-')?;
    let ok = count.len() == 12
        && count.bytes().all(|b| b.is_ascii_digit())
        && !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| count.parse().ok()).flatten()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStorage;

    const KIND: Kind = Kind {
        dir: "_filesink/test-segments",
        magic: b"filesink test segments 1\n",
        width: 3,
    };

    fn names(counts: &[u64]) -> Vec<String> {
        counts
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:012}-{i:032x}.bin"))
            .collect()
    }

    fn rec(n: u32) -> Vec<u8> {
        n.to_be_bytes()[1..].to_vec()
    }

    #[test]
    fn a_segment_that_does_not_check_is_not_trusted() {
        let records = vec![rec(1), rec(2), rec(0xff_0000)];
        let bytes = KIND.encode(&records);
        assert_eq!(KIND.parse(&bytes, Some(3)), Some(records.clone()));
        assert_eq!(
            KIND.parse(&bytes, Some(2)),
            None,
            "another count than its name's"
        );
        let mut torn = bytes.clone();
        torn.truncate(bytes.len() - 5);
        assert_eq!(KIND.parse(&torn, None), None, "torn");
        let mut flipped = bytes.clone();
        flipped[KIND.magic.len() + 3] ^= 1;
        assert_eq!(KIND.parse(&flipped, None), None, "a flipped bit");
        assert_eq!(KIND.parse(b"{\"json\": 1}", None), None, "foreign");
        assert_eq!(count_of("000000000003-abc.bin"), Some(3));
        assert_eq!(count_of(".000000000003-abc.bin.tmp"), None);
        assert_eq!(count_of("3-abc.bin"), None);
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
    async fn a_directory_stays_a_few_segments_and_loses_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(dir.path()).unwrap();
        let mut all = Vec::new();
        for run in 0..40u32 {
            let r: Vec<Vec<u8>> = (0..=run).map(|i| rec(run * 1000 + i)).collect();
            all.extend(r.iter().cloned());
            KIND.record(&storage, r).await.unwrap();
            assert!(KIND.segments(&storage).await.unwrap().len() <= MAX_SEGMENTS);
        }
        all.sort();
        assert_eq!(KIND.load(&storage).await.unwrap(), all);
        // A segment gone between listing and reading (merged meanwhile) is passed over.
        let first = KIND.segments(&storage).await.unwrap().remove(0);
        assert_eq!(
            KIND.read(&storage, &format!("{first}x")).await.unwrap(),
            None
        );
        KIND.record(&storage, Vec::new()).await.unwrap();
    }
}
