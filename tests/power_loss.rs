//! Power loss, not just process death: the local backend runs on
//! [`PowerLossDisk`](filesink::storage::power_loss::PowerLossDisk), which forgets whatever was
//! not flushed when the power goes (file bytes past the last fdatasync; directory entries
//! created, renamed or removed since the directory's last fsync), and the seeded job of the
//! fault campaign runs on it:
//!
//! - **power loss at call N**, for every N the job makes (every file create, write, flush,
//!   rename, directory flush, removal), with the call applied or not, and the disk recovered
//!   with everything unflushed dropped or with a seeded part of it kept;
//! - **process crash at call N, restart, power loss at call M of the restarted run**: the
//!   restarted process must flush what its dead predecessor left unflushed before relying on
//!   it.
//!
//! After every power loss: the latest surviving manifest covers every checkpoint that returned
//! `Ok`, so no acknowledged record is replayed, and nothing is visible that it does not cover,
//! each record at most once. Then the job restarts on the recovered disk and
//! runs to the end: every record exactly once, no in-progress or pending file left, and no
//! temporary file of a manifest write that died between writing it and renaming it (the
//! campaigns count the crashes that left one, and fail if none did).
//!
//! `FILESINK_POWER_SEEDS=N` sets the number of seeds (default 6: every call of six jobs, two
//! of each format); `FILESINK_POWER_SEED=S` reruns one seed. A failure prints the case.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::delta::{read_log, run_table, table_id_counts};
use common::job::{commits_in_background, format_of, run, run_merge, Rng, JOB, RECORDS};
use filesink::job::manifest::{latest_manifest, list_temps};
use filesink::protocol::checkpoints_dir;
use filesink::storage::local::Fs;
use filesink::storage::power_loss::{PowerLoss, PowerLossDisk};
use filesink::storage::{Listing, LocalStorage, MetadataStore, Storage};
use filesink::FileFormat;

const BASE: &str = "/lake";

fn storage_on(disk: &PowerLossDisk) -> filesink::Result<Arc<dyn Storage>> {
    Ok(Arc::new(LocalStorage::on(Arc::new(disk.clone()), BASE)?))
}

/// The plain job, or the job writing into a Delta table (`common::delta::run_table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Delta,
    /// The plain job as Parquet with a pre-commit merge (`common::job::run_merge`).
    Merge,
}

/// Runs the job on `disk` from its latest manifest; `acked` as in [`run`].
async fn run_on(
    variant: Variant,
    disk: &PowerLossDisk,
    seed: u64,
    acked: &mut i64,
) -> filesink::Result<()> {
    match variant {
        Variant::Plain => run(storage_on(disk)?, seed, acked).await,
        Variant::Delta => run_table(storage_on(disk)?, seed, acked).await,
        Variant::Merge => run_merge(storage_on(disk)?, seed, acked).await,
    }
}

fn format_in(variant: Variant, seed: u64) -> FileFormat {
    match variant {
        Variant::Plain => format_of(seed),
        Variant::Delta | Variant::Merge => FileFormat::parquet(),
    }
}

/// How often each id is visible on `disk`, read back with the real readers.
async fn visible_ids(variant: Variant, disk: &PowerLossDisk, seed: u64) -> BTreeMap<i64, usize> {
    let storage = storage_on(disk).unwrap();
    let mut counts = BTreeMap::new();
    for file in storage.list_visible().await.unwrap() {
        let bytes = disk.read(&Path::new(BASE).join(&file.path)).unwrap();
        for id in common::ids_in_bytes(bytes, &format_in(variant, seed)) {
            *counts.entry(id).or_insert(0) += 1;
        }
    }
    counts
}

/// The checks after a power loss, then the restart to the end.
/// Checks the recovered disk `after`, restarts the job on it and runs it to the end; returns
/// whether the recovered disk held a temporary file of a manifest write that died before its
/// rename (the restart must remove it).
async fn recover_and_finish(
    variant: Variant,
    after: &PowerLossDisk,
    seed: u64,
    acked: i64,
    ctx: &str,
) -> bool {
    let storage = storage_on(after).unwrap();
    let temps_found = !list_temps(storage.as_ref(), &checkpoints_dir(JOB))
        .await
        .unwrap()
        .is_empty();
    let latest = latest_manifest(storage.as_ref(), JOB, None)
        .await
        .unwrap_or_else(|e| panic!("{ctx}: the latest manifest is unreadable: {e}"));
    let covered = latest
        .as_ref()
        .map_or(0, |m| m.source_position.as_i64().unwrap());
    if variant == Variant::Delta {
        // The table: nothing the surviving manifests do not cover, nothing twice, every live
        // file present; a checkpoint that returned Ok after its log step (not a background
        // commit) is in the surviving log.
        let in_table = table_id_counts(storage.as_ref()).await;
        for (id, count) in &in_table {
            assert!(*id < covered, "{ctx}: id {id} is in the table beyond the surviving manifests (covered: {covered})");
            assert_eq!(*count, 1, "{ctx}: id {id} in the table {count} times");
        }
        if !commits_in_background(seed) {
            for id in 0..acked {
                assert!(in_table.contains_key(&id), "{ctx}: id {id} was acknowledged with its log entry but is not in the surviving table");
            }
        }
        let last = latest.as_ref().map_or(0, |m| m.checkpoint_id as i64);
        for (app, n) in read_log(storage.as_ref()).await.txns {
            assert!(n <= last, "{ctx}: the log holds checkpoint {n} of `{app}` beyond the surviving manifest {last}");
        }
    }
    assert!(
        covered >= acked,
        "{ctx}: the checkpoint at {acked} returned Ok, the latest surviving manifest covers {covered}"
    );
    // Records below `covered` are not replayed: from here on they exist only on the disk, in
    // committed files or in the row files the manifest resumes, and the end check below
    // finds every one of them.
    let counts = visible_ids(variant, after, seed).await;
    for (id, count) in &counts {
        assert!(
            *id < covered,
            "{ctx}: id {id} is visible but no surviving checkpoint covers it (covered: {covered})"
        );
        assert_eq!(*count, 1, "{ctx}: id {id} visible {count} times");
    }
    let mut end = 0;
    run_on(variant, after, seed, &mut end)
        .await
        .unwrap_or_else(|e| panic!("{ctx}: the restart after the power loss failed: {e}"));
    if variant == Variant::Delta {
        common::delta::assert_table_exactly_once(storage.as_ref(), RECORDS, ctx).await;
    }
    let counts = visible_ids(variant, after, seed).await;
    let wrong: Vec<_> = (0..RECORDS)
        .filter(|id| counts.get(id) != Some(&1))
        .take(5)
        .collect();
    assert!(
        wrong.is_empty() && counts.len() == RECORDS as usize,
        "{ctx}: after the restart not exactly once (first wrong ids {wrong:?})"
    );
    let left = storage.list_leftovers().await.unwrap();
    assert!(left.is_empty(), "{ctx}: leftovers after the end: {left:?}");
    let temps = list_temps(storage.as_ref(), &checkpoints_dir(JOB))
        .await
        .unwrap();
    assert!(
        temps.is_empty(),
        "{ctx}: temporary files of dead manifest writes after the end: {temps:?}"
    );
    temps_found
}

/// Whether the seeds are chosen by `FILESINK_POWER_SEED(S)`: one seed need not reach every
/// window the default ones do.
fn seeds_chosen() -> bool {
    std::env::var_os("FILESINK_POWER_SEED").is_some()
        || std::env::var_os("FILESINK_POWER_SEEDS").is_some()
}

fn power_loss_of(rng: &mut Rng) -> PowerLoss {
    if rng.next() % 2 == 0 {
        PowerLoss::DropUnflushed
    } else {
        PowerLoss::Partial { seed: rng.next() }
    }
}

/// Counts the calls a run from `disk`'s state to the end makes.
async fn calls_to_finish(variant: Variant, disk: &PowerLossDisk, seed: u64) -> usize {
    let probe = disk.restart_process();
    run_on(variant, &probe, seed, &mut 0).await.unwrap();
    probe.ops()
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("FILESINK_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("FILESINK_POWER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    (0..n).collect()
}

#[tokio::test]
async fn power_loss_at_every_call_keeps_every_acknowledged_record() {
    power_loss_at_every_call(Variant::Plain, seeds()).await;
}

#[tokio::test]
async fn power_loss_at_every_call_keeps_every_acknowledged_record_in_a_delta_table() {
    power_loss_at_every_call(Variant::Delta, delta_seeds()).await;
}

#[tokio::test]
async fn power_loss_at_every_call_keeps_every_acknowledged_record_with_carried_files() {
    power_loss_at_every_call(Variant::Merge, merge_seeds()).await;
}

#[tokio::test]
async fn a_process_crash_then_a_power_loss_keeps_every_acknowledged_record_with_carried_files() {
    crash_then_power_loss(Variant::Merge, merge_seeds()).await;
}

/// Seeds of the Merge variants (`common::job::merge_policy_of`): no visibility delay with one
/// writer (0); merges by target size with one writer (1), with two (4), and with a commit in
/// the background and a larger target (7).
fn merge_seeds() -> Vec<u64> {
    match std::env::var("FILESINK_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => vec![0, 1, 4, 7],
    }
}

/// Seeds of the Delta variants: fewer (its runs make more calls), one of each writer count
/// and commit mode (`writers_of`, `commits_in_background`).
fn delta_seeds() -> Vec<u64> {
    match std::env::var("FILESINK_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => vec![0, 3, 6, 9],
    }
}

async fn power_loss_at_every_call(variant: Variant, seeds: Vec<u64>) {
    let (mut cases, mut partial, mut temps) = (0, 0, 0);
    for seed in seeds {
        let calls = calls_to_finish(variant, &PowerLossDisk::new(), seed).await;
        for at in 1..=calls {
            let mut rng = Rng::new(seed ^ (at as u64).wrapping_mul(0x51_7CC1_B727_220A));
            let applied = rng.next() % 2 == 0;
            let how = power_loss_of(&mut rng);
            let ctx = format!(
                "[power loss {variant:?}] seed {seed}, call {at} of {calls} (applied: {applied}), {how:?} \
                 (rerun: FILESINK_POWER_SEED={seed} cargo test --test power_loss)"
            );
            let disk = PowerLossDisk::new();
            disk.crash_at(at, applied);
            let mut acked = 0;
            let result = run_on(variant, &disk, seed, &mut acked).await;
            assert!(
                result.is_err() && disk.is_off(),
                "{ctx}: the run did not stop at the crash: {result:?}"
            );
            temps += recover_and_finish(variant, &disk.power_loss(how), seed, acked, &ctx).await
                as usize;
            cases += 1;
            partial += matches!(how, PowerLoss::Partial { .. }) as usize;
        }
    }
    eprintln!(
        "power loss {variant:?}: {cases} cases ({partial} keeping part of the unflushed state, \
         {temps} with a dead manifest write's temporary file)"
    );
    assert!(
        temps > 0 || seeds_chosen(),
        "no power loss kept a manifest's temporary file that its write did not rename"
    );
}

#[tokio::test]
async fn a_process_crash_then_a_power_loss_keeps_every_acknowledged_record() {
    crash_then_power_loss(Variant::Plain, seeds()).await;
}

#[tokio::test]
async fn a_process_crash_then_a_power_loss_keeps_every_acknowledged_record_in_a_delta_table() {
    crash_then_power_loss(Variant::Delta, delta_seeds()).await;
}

async fn crash_then_power_loss(variant: Variant, seeds: Vec<u64>) {
    let (mut cases, mut temps_after_crash, mut temps) = (0, 0, 0);
    for seed in seeds {
        let calls = calls_to_finish(variant, &PowerLossDisk::new(), seed).await;
        for first in 1..=calls {
            let mut rng = Rng::new(seed ^ (first as u64).wrapping_mul(0x2F_6B2A_97A3_5D5B));
            // The process dies at call `first`; the disk keeps everything.
            let disk = PowerLossDisk::new();
            disk.crash_at(first, rng.next() % 2 == 0);
            let mut acked = 0;
            assert!(run_on(variant, &disk, seed, &mut acked).await.is_err());
            // Looked at on a copy of the disk, so that the restart below counts its own calls.
            let copy = storage_on(&disk.restart_process()).unwrap();
            temps_after_crash += !list_temps(copy.as_ref(), &checkpoints_dir(JOB))
                .await
                .unwrap()
                .is_empty() as usize;
            // The restarted process loses power at a seeded call of its own run.
            let second_calls = calls_to_finish(variant, &disk, seed).await;
            let second = 1 + rng.below(second_calls);
            let applied = rng.next() % 2 == 0;
            let how = power_loss_of(&mut rng);
            let ctx = format!(
                "[process crash, then power loss, {variant:?}] seed {seed}, process crash at call {first} of \
                 {calls}, power loss at call {second} of {second_calls} of the restarted run \
                 (applied: {applied}), {how:?} (rerun: FILESINK_POWER_SEED={seed} cargo test \
                 --test power_loss)"
            );
            let restarted = disk.restart_process();
            restarted.crash_at(second, applied);
            let result = run_on(variant, &restarted, seed, &mut acked).await;
            assert!(
                result.is_err() && restarted.is_off(),
                "{ctx}: the run did not stop at the crash: {result:?}"
            );
            temps += recover_and_finish(variant, &restarted.power_loss(how), seed, acked, &ctx)
                .await as usize;
            cases += 1;
        }
    }
    eprintln!(
        "process crash then power loss {variant:?}: {cases} cases ({temps_after_crash} left a \
         dead manifest write's temporary file, {temps} still after the power loss)"
    );
    // The window between a manifest's temporary file and its rename is one of the crash
    // points walked (and `recover_and_finish` checks that the restart removes what it left).
    assert!(
        temps_after_crash > 0 || seeds_chosen(),
        "no process crash fell between a manifest's temporary file and its rename"
    );
}

#[tokio::test]
async fn every_path_form_of_the_base_is_durable_after_the_first_checkpoint() {
    // The simulated disk's working directory is `/`: each form names `/<dir>`.
    for (form, dir) in [
        ("lake", "/lake"),
        ("sub/deeper/lake", "/sub/deeper/lake"),
        ("./lake", "/lake"),
        ("/abs/lake", "/abs/lake"),
        ("lake/", "/lake"),
        ("gone/../lake", "/lake"),
    ] {
        let disk = PowerLossDisk::new();
        let storage: Arc<dyn Storage> =
            Arc::new(LocalStorage::on(Arc::new(disk.clone()), form).unwrap());
        let ctx = format!("base `{form}`");
        run(storage, 0, &mut 0)
            .await
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        // Everything a finished job made visible must survive the power going.
        let after = disk.power_loss(PowerLoss::DropUnflushed);
        let storage = LocalStorage::on(Arc::new(after.clone()), dir).unwrap();
        let mut ids = Vec::new();
        for file in storage.list_visible().await.unwrap() {
            let bytes = after.read(&Path::new(dir).join(&file.path)).unwrap();
            ids.extend(common::ids_in_bytes(bytes, &format_of(0)));
        }
        ids.sort_unstable();
        assert_eq!(ids, (0..RECORDS).collect::<Vec<_>>(), "{ctx}");
    }
}

/// A disk holding `_delta_log/_last_checkpoint` = `old`, made durable by
/// [`Storage::replace_metadata`] returning, and the number of calls that took.
async fn disk_with_pointer(old: &[u8]) -> (PowerLossDisk, usize) {
    let disk = PowerLossDisk::new();
    storage_on(&disk)
        .unwrap()
        .replace_metadata(POINTER, old)
        .await
        .unwrap();
    let ops = disk.ops();
    (disk, ops)
}

const POINTER: &str = "_delta_log/_last_checkpoint";

/// Power loss at every call of a [`Storage::replace_metadata`] (applied or not, everything
/// unflushed dropped or a seeded part kept): the pointer is the old bytes or the new ones,
/// never missing, never a mix; once the call returned, the new ones.
#[tokio::test]
async fn power_loss_during_replace_metadata_leaves_the_old_pointer_or_the_new() {
    let (old, new) = (
        b"{\"version\":10}".as_slice(),
        b"{\"version\":20,\"size\":7}".as_slice(),
    );
    let (probe, base) = disk_with_pointer(old).await;
    storage_on(&probe)
        .unwrap()
        .replace_metadata(POINTER, new)
        .await
        .unwrap();
    let calls = probe.ops() - base;
    assert!(
        calls >= 4,
        "temp file, write, flush, rename, directory flush: {calls} calls"
    );
    let after = probe.power_loss(PowerLoss::DropUnflushed);
    assert_eq!(after.read(&Path::new(BASE).join(POINTER)).unwrap(), new);
    let mut cases = 0;
    for at in 1..=calls {
        for applied in [false, true] {
            for how in [
                PowerLoss::DropUnflushed,
                PowerLoss::Partial { seed: at as u64 },
                PowerLoss::Partial {
                    seed: 1000 + at as u64,
                },
            ] {
                let (disk, base) = disk_with_pointer(old).await;
                let storage = storage_on(&disk).unwrap();
                disk.crash_at(base + at, applied);
                let returned = storage.replace_metadata(POINTER, new).await;
                let ctx = format!("crash at call {at} of {calls} (applied: {applied}), {how:?}");
                assert!(
                    returned.is_err(),
                    "{ctx}: the call returned Ok through the crash"
                );
                let after = disk.power_loss(how);
                let pointer = after
                    .read(&Path::new(BASE).join(POINTER))
                    .unwrap_or_else(|e| panic!("{ctx}: the pointer is gone: {e}"));
                assert!(
                    pointer == old || pointer == new,
                    "{ctx}: the pointer holds {:?}",
                    String::from_utf8_lossy(&pointer)
                );
                // The recovered disk takes the next replace as usual.
                storage_on(&after)
                    .unwrap()
                    .replace_metadata(POINTER, new)
                    .await
                    .unwrap_or_else(|e| panic!("{ctx}: the next replace: {e}"));
                cases += 1;
            }
        }
    }
    eprintln!("replace_metadata: {cases} power losses over {calls} calls");
}

/// A data file removed by [`Storage::remove_data_file`] stays removed after a power loss
/// once the call returned: an abandoned compaction round's output must not come back after
/// the manifest that abandons it.
#[tokio::test]
async fn a_removed_data_file_stays_removed_after_power_loss() {
    let disk = PowerLossDisk::new();
    let storage = storage_on(&disk).unwrap();
    let rel = "day=1/part-compact_0-019ad2f1c0c87b2a9d6f3b8e5a1c2d3e-0.parquet";
    let path = Path::new(BASE).join(rel);
    disk.create_dir(&Path::new(BASE).join("day=1")).unwrap();
    let file = disk.create_new(&path).unwrap();
    file.write_all(b"PAR1").unwrap();
    for r in disk.sync_files(&[file]) {
        r.unwrap();
    }
    for r in disk.sync_dirs(&[Path::new(BASE).to_path_buf(), Path::new(BASE).join("day=1")]) {
        r.unwrap();
    }
    assert_eq!(storage.read_data_file(rel).await.unwrap().as_ref(), b"PAR1");
    storage.remove_data_file(rel).await.unwrap();
    let after = disk.power_loss(PowerLoss::DropUnflushed);
    assert!(
        after.stat(&path).is_err(),
        "the removed file came back after the power loss"
    );
}

/// A read of a metadata file makes its name durable first: a process that wrote a manifest
/// and died before flushing its directory left a name a power loss could still take back,
/// and nothing may act on it until it is flushed. A listing (`filesink ls`,
/// `LocalStorage::for_listing`) acts on nothing, and reads without flushing.
#[test]
fn a_read_makes_a_metadata_name_durable_and_a_listing_does_not() {
    let manifest = "_filesink/jobs/j/checkpoints/00000000000000000001.json";
    for listing in [false, true] {
        let disk = PowerLossDisk::new();
        let path = Path::new(BASE).join(manifest);
        disk.create_dir_all(path.parent().unwrap()).unwrap();
        disk.sync_dirs(&[PathBuf::from("/"), PathBuf::from(BASE)]);
        for dir in path.parent().unwrap().ancestors().skip(1) {
            if dir.starts_with(BASE) {
                disk.sync_dirs(&[dir.to_path_buf()]);
            }
        }
        let file = disk.create_new(&path).unwrap();
        file.write_all(b"{}").unwrap();
        file.sync_data().unwrap();
        // The writer dies here: the file's bytes are flushed, its name is not.
        let disk = disk.restart_process();
        let storage = LocalStorage::on(Arc::new(disk.clone()), BASE).unwrap();
        let storage = if listing {
            storage.for_listing()
        } else {
            storage
        };
        let read = tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(storage.get_metadata(manifest))
            .unwrap();
        assert_eq!(read.as_deref(), Some(&b"{}"[..]));
        let after = disk.power_loss(PowerLoss::DropUnflushed);
        assert_eq!(
            after.stat(&path).is_ok(),
            !listing,
            "listing {listing}: the name survives a power loss only where the read flushed it"
        );
    }
}
