//! The seeded job the fault and power-loss campaigns crash: a source of records with ids →
//! one writer → the coordinator, checkpointing where the seed says, run from the job's latest
//! manifest to the end.

use std::sync::Arc;

use filesink::storage::Storage;
use filesink::{Coordinator, FileFormat, MergePolicy, RollingPolicy, Sink};

pub const BATCHES: i64 = 6;
pub const BATCH_LEN: i64 = 25;
/// Records in the whole input; ids run from 0.
pub const RECORDS: i64 = BATCHES * BATCH_LEN;
/// The job's name under `_filesink/jobs`.
pub const JOB: &str = "campaign";

/// xorshift64: small, seeded, the same everywhere.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Parquet, JSON lines or CSV, by seed.
pub fn format_of(seed: u64) -> FileFormat {
    match seed % 3 {
        0 => FileFormat::parquet(),
        1 => FileFormat::json_lines(),
        _ => FileFormat::csv(),
    }
}

/// Writers of the job: 1 or 2 by seed, so that the campaigns crash both the single writer
/// and writers that encode and vote at the same time on their own tasks.
pub fn writers_of(seed: u64) -> usize {
    1 + (seed / 3 % 2) as usize
}

/// Whether the job commits its checkpoints in the background (`checkpoint_then_commit`), by
/// seed: then a crash also lands while a complete checkpoint's commit runs behind the writes.
pub fn commits_in_background(seed: u64) -> bool {
    seed / 6 % 2 == 1
}

/// Runs the job from its latest manifest to the end; checkpoints where the seed says.
/// `acked` is raised to the source position of every checkpoint that returned `Ok`: from then
/// on its records must stay visible, whatever happens.
pub async fn run(storage: Arc<dyn Storage>, seed: u64, acked: &mut i64) -> filesink::Result<()> {
    let sink = Sink::builder_shared(storage)
        .format(format_of(seed))
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::default())
        .build()?;
    run_sink(&sink, seed, acked).await
}

/// The merge policy of the seeded job with a pre-commit merge: every file is small; the
/// target is reached after one to four checkpoints' files of a bucket, and a third of the
/// seeds have no visibility delay (every carried file is due at the next vote: lone files
/// committed as they are on local disk and re-uploaded on object stores, several merged).
pub fn merge_policy_of(seed: u64) -> MergePolicy {
    let delay = if seed % 3 == 0 {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::from_secs(3600)
    };
    MergePolicy::new(1024 * 1024)
        .with_target_bytes(1200 * (1 + seed / 3 % 4))
        .with_max_visibility_delay(delay)
}

/// [`run`] with a pre-commit merge ([`merge_policy_of`]): Parquet, on any backend.
pub async fn run_merge(
    storage: Arc<dyn Storage>,
    seed: u64,
    acked: &mut i64,
) -> filesink::Result<()> {
    let sink = Sink::builder_shared(storage)
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .merge_small_files(merge_policy_of(seed))
        .build()?;
    run_sink(&sink, seed, acked).await
}

async fn run_sink(sink: &Sink, seed: u64, acked: &mut i64) -> filesink::Result<()> {
    let mut rng = Rng::new(seed);
    let mut job = Coordinator::open(sink, JOB, writers_of(seed)).await?;
    if job.is_finished() {
        return Ok(());
    }
    let mut next = job.source_position::<i64>().unwrap().unwrap_or(0);
    *acked = (*acked).max(next);
    while next < RECORDS {
        job.write(&super::batch(next, BATCH_LEN)).await?;
        next += BATCH_LEN;
        if rng.next() % 2 == 0 {
            if commits_in_background(seed) {
                job.checkpoint_then_commit(&next).await?;
            } else {
                job.checkpoint(&next).await?;
            }
            *acked = (*acked).max(next);
        }
    }
    job.finish(&next).await?;
    *acked = next;
    Ok(())
}

#[allow(unused_imports)]
pub use filesink::conformance::harness::run_two_writers;
