//! The seeded job the fault and power-loss campaigns crash: a source of records with ids →
//! one writer → the coordinator, checkpointing where the seed says, run from the job's latest
//! manifest to the end.

use std::sync::Arc;

use filesink::storage::Storage;
use filesink::{Coordinator, FileFormat, RollingPolicy, Sink};

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

/// Runs the job from its latest manifest to the end; checkpoints where the seed says.
/// `acked` is raised to the source position of every checkpoint that returned `Ok`: from then
/// on its records must stay visible, whatever happens.
pub async fn run(storage: Arc<dyn Storage>, seed: u64, acked: &mut i64) -> filesink::Result<()> {
    let mut rng = Rng::new(seed);
    let sink = Sink::builder_shared(storage)
        .format(format_of(seed))
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::default())
        .build()?;
    let mut job = Coordinator::open(&sink, JOB, 1).await?;
    if job.is_finished() {
        return Ok(());
    }
    let mut next = job.source_position::<i64>().unwrap().unwrap_or(0);
    *acked = (*acked).max(next);
    while next < RECORDS {
        job.writer().write(&super::batch(next, BATCH_LEN)).await?;
        next += BATCH_LEN;
        if rng.next() % 2 == 0 {
            job.checkpoint(&next).await?;
            *acked = (*acked).max(next);
        }
    }
    job.finish(&next).await?;
    *acked = next;
    Ok(())
}

/// Runs `job` from its latest manifest over ids `offset..offset + total` in batches of 100 on
/// two writers (two parallel subtasks: even and odd batches), checkpointing every `every`
/// batches; stops after `stop_after` batches of this run (a crash) unless it reaches the end.
/// `None` if the job had finished already.
pub async fn run_two_writers(
    s: &Sink,
    job: &str,
    offset: i64,
    total: i64,
    every: i64,
    stop_after: Option<i64>,
) -> Option<Coordinator> {
    let mut c = Coordinator::open(s, job, 2).await.unwrap();
    if c.is_finished() {
        return None;
    }
    let mut next = c.source_position::<i64>().unwrap().unwrap_or(0);
    let mut written = 0;
    while next < total {
        let w = ((next / 100) % 2) as usize;
        c.writers()[w]
            .write(&super::batch(offset + next, 100))
            .await
            .unwrap();
        next += 100;
        written += 1;
        if stop_after == Some(written) {
            return Some(c);
        }
        if written % every == 0 {
            c.checkpoint(&next).await.unwrap();
        }
    }
    c.finish(&next).await.unwrap();
    Some(c)
}
