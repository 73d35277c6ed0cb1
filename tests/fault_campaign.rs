//! The seeded fault campaign: for every fault point × seed × backend, run a pipeline (a source
//! of records with ids → sink, checkpoints at seeded moments, manifests by the coordinator),
//! crash at the fault, restart from the latest manifest on the healthy store, replay, and run
//! to the end. After the crash nothing is visible that no complete checkpoint covers; after
//! the end every record is visible exactly once and no in-progress file, pending file or
//! upload is left.
//!
//! The Delta variant runs the same job into a Delta table (`common::delta::run_table`) and also
//! checks the table through its log: after the crash no id the latest manifest does not cover,
//! every live file present, no file added twice, the job's `txn` not beyond the latest
//! manifest; after the end every id exactly once in the table.
//!
//! The Merge variant runs the plain job as Parquet with a pre-commit merge
//! (`common::job::run_merge`): files are carried across checkpoints and merged, so faults land
//! while carried files are read back, merged files sealed, and superseded files removed.
//!
//! `FILESINK_FAULT_SEEDS=N` sets the number of seeds (default 50); `FILESINK_FAULT_SEED=S`
//! together with `FILESINK_FAULT_POINT=Name` reruns one case. A failure prints both.

mod common;

use std::sync::Arc;

use common::backend::Backend;
use common::delta::{assert_table_exactly_once, read_log, run_table, table_id_counts};
use common::job::{format_of, run, run_merge, Rng, JOB, RECORDS};
use filesink::job::manifest::latest_manifest;
use filesink::storage::fault::{FaultMode, FaultPlan, FaultPoint, FaultyStorage};
use filesink::storage::Storage;
use filesink::FileFormat;

/// The plain job, or the job writing into a Delta table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Delta,
    /// The plain job with a pre-commit merge (Parquet, carried files).
    Merge,
}

async fn run_variant(
    variant: Variant,
    storage: Arc<dyn Storage>,
    seed: u64,
) -> filesink::Result<()> {
    match variant {
        Variant::Plain => run(storage, seed, &mut 0).await,
        Variant::Delta => run_table(storage, seed, &mut 0).await,
        Variant::Merge => run_merge(storage, seed, &mut 0).await,
    }
}

fn format_in(variant: Variant, seed: u64) -> FileFormat {
    match variant {
        Variant::Plain => format_of(seed),
        Variant::Delta | Variant::Merge => FileFormat::parquet(),
    }
}

async fn campaign(make: fn() -> Option<Backend>, default_seeds: u64) {
    campaign_of(Variant::Plain, make, default_seeds).await;
}

async fn campaign_of(variant: Variant, make: fn() -> Option<Backend>, default_seeds: u64) {
    let seeds: u64 = std::env::var("FILESINK_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_seeds);
    let only_seed: Option<u64> = std::env::var("FILESINK_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let only_point = std::env::var("FILESINK_FAULT_POINT").ok();
    let mut cases = 0;
    let mut fired = 0;
    let mut carried_reads = 0;
    let mut name = "";
    for seed in 0..seeds {
        if only_seed.is_some_and(|s| s != seed) {
            continue;
        }
        // A clean run of this seed counts how often each point is reached.
        let Some(b) = make() else { return };
        name = b.name;
        let counter = FaultyStorage::new(b.storage.clone(), None);
        run_variant(variant, Arc::new(counter.clone()), seed)
            .await
            .unwrap();
        let counts = counter.counts();
        carried_reads += counts.get(&FaultPoint::ReadHidden).copied().unwrap_or(0);
        for &point in FaultPoint::ALL {
            if only_point
                .as_deref()
                .is_some_and(|p| p != point.to_string())
            {
                continue;
            }
            let reached = counts.get(&point).copied().unwrap_or(0);
            if reached == 0 {
                continue;
            }
            let mut rng = Rng::new(seed.wrapping_add(point as u64 * 7919));
            let plan = FaultPlan {
                point,
                occurrence: 1 + (rng.next() % reached as u64) as usize,
                mode: if rng.next() % 2 == 0 {
                    FaultMode::Before
                } else {
                    FaultMode::AfterApplied
                },
            };
            let ctx = format!(
                "[{} {variant:?}] seed {seed}, {plan:?} (rerun: FILESINK_FAULT_SEED={seed} FILESINK_FAULT_POINT={point} cargo test --test fault_campaign)",
                b.name
            );
            let b = make().unwrap();
            let faulty = FaultyStorage::new(b.storage.clone(), Some(plan));
            let result = run_variant(variant, Arc::new(faulty.clone()), seed).await;
            cases += 1;
            if faulty.fired() {
                fired += 1;
                assert!(
                    result.is_err(),
                    "{ctx}: the fault fired but the run succeeded"
                );
                // Nothing visible beyond what the latest complete checkpoint covers.
                let latest = latest_manifest(b.storage.as_ref(), JOB, None)
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let covered = latest
                    .as_ref()
                    .map_or(0, |m| m.source_position.as_i64().unwrap());
                if variant == Variant::Delta {
                    for (id, count) in table_id_counts(b.storage.as_ref()).await {
                        assert!(id < covered, "{ctx}: id {id} is in the table but no complete checkpoint covers it (covered: {covered})");
                        assert_eq!(
                            count, 1,
                            "{ctx}: id {id} in the table {count} times after the crash"
                        );
                    }
                    let log = read_log(b.storage.as_ref()).await;
                    let last = latest.as_ref().map_or(0, |m| m.checkpoint_id as i64);
                    for (app, n) in &log.txns {
                        assert!(*n <= last, "{ctx}: the log holds checkpoint {n} of `{app}` beyond the latest manifest {last}");
                    }
                }
                for (id, count) in b.id_counts(&format_in(variant, seed)).await {
                    assert!(id < covered, "{ctx}: id {id} is visible but no complete checkpoint covers it (covered: {covered})");
                    assert_eq!(
                        count, 1,
                        "{ctx}: id {id} visible {count} times after the crash"
                    );
                }
            } else {
                result.unwrap_or_else(|e| panic!("{ctx}: failed without the fault firing: {e}"));
            }
            // Restart on the healthy store and run to the end.
            run_variant(variant, b.storage.clone(), seed)
                .await
                .unwrap_or_else(|e| panic!("{ctx}: restart failed: {e}"));
            b.assert_exactly_once(&format_in(variant, seed), RECORDS)
                .await;
            if variant == Variant::Delta {
                assert_table_exactly_once(b.storage.as_ref(), RECORDS, &ctx).await;
                let log = read_log(b.storage.as_ref()).await;
                let mut seen = std::collections::BTreeSet::new();
                for (v, app, n) in &log.txn_history {
                    assert!(seen.insert((app.clone(), *n)), "{ctx}: two entries for checkpoint {n} of `{app}` (the second at version {v})");
                }
            }
            let left = b.storage.list_leftovers().await.unwrap();
            assert!(left.is_empty(), "{ctx}: leftovers after the end: {left:?}");
        }
    }
    eprintln!("fault campaign [{name} {variant:?}]: {cases} cases over {seeds} seeds, {fired} faults fired, {carried_reads} carried files read back to merge");
    if variant == Variant::Merge && only_seed.is_none() {
        assert!(carried_reads > 0, "the Merge variant never merged");
    }
}

#[tokio::test]
async fn fault_campaign_local_disk() {
    campaign(|| Some(Backend::local()), 50).await;
}

#[tokio::test]
async fn fault_campaign_in_memory_object_store() {
    campaign(|| Some(Backend::memory()), 50).await;
}

#[tokio::test]
async fn fault_campaign_s3() {
    campaign(
        || match Backend::s3() {
            Some(b) => Some(b),
            None if std::env::var_os("CI").is_some() => panic!("CI must run the S3 fault campaign: FILESINK_S3_BUCKET is not set"),
            None => {
                eprintln!("\n*** S3 FAULT CAMPAIGN NOT RUN: no S3 server configured; run ./scripts/test ***\n");
                None
            }
        },
        // Each S3 case costs about 0.7 s against Garage; 50 seeds (400 cases) take ten minutes.
        8,
    )
    .await;
}

/// The pre-commit merge under every fault: carried files survive every restore until a
/// committed merged file supersedes them, and no record is visible twice or lost.
#[tokio::test]
async fn fault_campaign_merge_local_disk() {
    campaign_of(Variant::Merge, || Some(Backend::local()), 30).await;
}

#[tokio::test]
async fn fault_campaign_merge_in_memory_object_store() {
    campaign_of(Variant::Merge, || Some(Backend::memory()), 50).await;
}

/// On S3 carried files are hidden objects (their uploads aborted) and lone due files are
/// re-uploaded: faults land on those PUTs, aborts and deletes too.
#[tokio::test]
async fn fault_campaign_merge_s3() {
    campaign_of(
        Variant::Merge,
        || match Backend::s3() {
            Some(b) => Some(b),
            None if std::env::var_os("CI").is_some() => panic!("CI must run the S3 fault campaign: FILESINK_S3_BUCKET is not set"),
            None => {
                eprintln!("\n*** S3 MERGE FAULT CAMPAIGN NOT RUN: no S3 server configured; run ./scripts/test ***\n");
                None
            }
        },
        4,
    )
    .await;
}

#[tokio::test]
async fn fault_campaign_delta_local_disk() {
    campaign_of(Variant::Delta, || Some(Backend::local()), 30).await;
}

#[tokio::test]
async fn fault_campaign_delta_in_memory_object_store() {
    campaign_of(Variant::Delta, || Some(Backend::memory()), 30).await;
}

#[tokio::test]
async fn fault_campaign_delta_s3() {
    campaign_of(
        Variant::Delta,
        || match Backend::s3() {
            Some(b) => Some(b),
            None if std::env::var_os("CI").is_some() => panic!("CI must run the S3 fault campaign: FILESINK_S3_BUCKET is not set"),
            None => {
                eprintln!("\n*** S3 DELTA FAULT CAMPAIGN NOT RUN: no S3 server configured; run ./scripts/test ***\n");
                None
            }
        },
        4,
    )
    .await;
}
