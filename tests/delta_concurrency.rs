//! Several processes appending to one Delta table at once: four `filesink ingest` runs (jobs
//! `a`…`d`, distinct ids, checkpoints every 1,000 records) race for the log's versions. Every
//! record ends up in the table exactly once, every version holds one checkpoint of one job,
//! no checkpoint has two versions, and delta-rs reads the same.
//!
//! Then the same with `filesink compact` rounds running one after the other during the
//! appends, and two of the appenders compacting in the background too (`ingest --compact`):
//! every record still exactly once, no round failed, and the table compacted at the end.
//!
//! Local disk (`RENAME_NOREPLACE`) and Ceph radosgw (`If-None-Match: *`); Garage, which
//! ignores conditional writes, is refused without `--single-writer` (tests/delta_read_back.rs).

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

use common::backend::{ceph_or_explain, Backend};
use common::delta::{assert_table_exactly_once, read_log};
use common::delta_py::{reader_or_explain, table_location};

const PER_JOB: i64 = 20_000;
const JOBS: [&str; 4] = ["a", "b", "c", "d"];

async fn four_appenders(b: Backend) {
    four_appenders_and_compaction(b, false).await;
}

/// Runs `filesink compact` with `args` against `url`; returns its exit status and stderr.
fn compact_once(url: &str, env: &[(String, String)], args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(["compact", url])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn four_appenders_and_compaction(b: Backend, compacting: bool) {
    let inputs = tempfile::tempdir().unwrap();
    let (url, env) = b.cli_url();
    let mut children = Vec::new();
    for (k, job) in JOBS.iter().enumerate() {
        let path = inputs.path().join(format!("{job}.jsonl"));
        let first = k as i64 * PER_JOB;
        let text: String = (first..first + PER_JOB)
            .map(|i| format!("{{\"id\":{i},\"day\":\"2026-11-{:02}\"}}\n", 25 + i % 3))
            .collect();
        std::fs::write(&path, text).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_filesink"));
        command
            .args(["ingest", path.to_str().unwrap(), "--to", &url])
            .args(["--table", "delta", "--partition-by", "day", "--job", job])
            .args([
                "--checkpoint-every",
                "1000rows",
                "--parallelism",
                "1",
                "--json",
            ]);
        // Two of the appenders also compact in the background (jobs `<job>_compact`),
        // beside the `filesink compact` rounds below: three compactors and four appenders.
        if compacting && k < 2 {
            command.args(["--compact", "--compact-every", "200ms"]);
            command.args(["--compact-target-size", "64KiB"]);
        }
        let child = command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.push((job, child));
    }
    // Compaction rounds, one after the other, for as long as the appenders run.
    let target = "64KiB";
    let mut rounds = 0;
    if compacting {
        // Compaction needs a table: wait for its first version.
        while b
            .storage
            .get_metadata("_delta_log/00000000000000000000.json")
            .await
            .unwrap()
            .is_none()
        {
            assert!(
                children
                    .iter_mut()
                    .any(|(_, c)| c.try_wait().unwrap().is_none()),
                "[{}] every appender ended before the table had a version",
                b.name
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        while children
            .iter_mut()
            .any(|(_, c)| c.try_wait().unwrap().is_none())
        {
            let (code, stderr) = compact_once(&url, &env, &["--target-size", target]);
            assert_eq!(code, 0, "[{}] compact failed: {stderr}", b.name);
            rounds += 1;
        }
    }
    for (k, (job, child)) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "[{}] job {job} failed: {}",
            b.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if compacting && k < 2 {
            // No round failed: the others' entries are appends or rearrangements of other
            // files, or a conflict that abandons the round.
            let c = &summary["compaction"];
            assert_eq!(c["job"], format!("{job}_compact"), "[{}] {summary}", b.name);
            assert_eq!(c["failed"], 0, "[{}] {summary}", b.name);
            eprintln!("[{}] {job}: background compaction {c}", b.name);
        } else {
            assert!(summary["compaction"].is_null(), "[{}] {summary}", b.name);
        }
    }
    let n = PER_JOB * JOBS.len() as i64;
    assert_table_exactly_once(b.storage.as_ref(), n, b.name).await;
    if compacting {
        let (code, stderr) = compact_once(&url, &env, &["--target-size", target]);
        assert_eq!(code, 0, "[{}] the last compact failed: {stderr}", b.name);
        assert_table_exactly_once(b.storage.as_ref(), n, b.name).await;
        eprintln!("[{}] {rounds} compaction rounds during the appends", b.name);
        assert!(rounds > 0);
        // Compacted: per partition no more files than its bytes need at half the target,
        // plus one.
        let mut per: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for path in read_log(b.storage.as_ref()).await.live.keys() {
            let size = b.storage.read_data_file(path).await.unwrap().len() as u64;
            let dir = path.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
            let e = per.entry(dir).or_default();
            e.0 += 1;
            e.1 += size;
        }
        for (dir, (files, bytes)) in &per {
            let bound = bytes.div_ceil(32 * 1024) + 1;
            assert!(
                *files <= bound,
                "[{}] {dir}: {files} files for {bytes} bytes",
                b.name
            );
        }
        if let Some(reader) = reader_or_explain() {
            let location = table_location(&b);
            assert_eq!(
                reader.ids(&location, None),
                (0..n).collect::<Vec<_>>(),
                "[{}]",
                b.name
            );
        }
        return;
    }
    let log = read_log(b.storage.as_ref()).await;
    let listed = b
        .storage
        .list_metadata_from("_delta_log", "")
        .await
        .unwrap()
        .iter()
        .filter(|e| e.name.ends_with(".json"))
        .count();
    assert_eq!(
        listed,
        log.versions.len(),
        "[{}] versions are contiguous from 0",
        b.name
    );
    // Each version is one checkpoint of one job; no checkpoint twice.
    let mut seen = BTreeSet::new();
    for (v, app, cp) in &log.txn_history {
        assert!(
            seen.insert((app.clone(), *cp)),
            "[{}] checkpoint {cp} of {app} twice (version {v})",
            b.name
        );
    }
    assert_eq!(
        log.txn_history.len(),
        log.versions.len(),
        "[{}] one txn per version",
        b.name
    );
    assert_eq!(log.txns.len(), JOBS.len(), "[{}] one appId per job", b.name);
    // 20 checkpoints of 1,000 records each, per job, in the job's order.
    for (app, last) in &log.txns {
        let mine: Vec<i64> = log
            .txn_history
            .iter()
            .filter(|(_, a, _)| a == app)
            .map(|(_, _, cp)| *cp)
            .collect();
        assert_eq!(mine.len(), 20, "[{}] `{app}`: {mine:?}", b.name);
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "[{}] `{app}`: {mine:?}",
            b.name
        );
        assert_eq!(mine.last(), Some(last));
    }

    if let Some(reader) = reader_or_explain() {
        let location = table_location(&b);
        assert_eq!(
            reader.ids(&location, None),
            (0..n).collect::<Vec<_>>(),
            "[{}]",
            b.name
        );
    }
}

#[tokio::test]
async fn four_processes_append_to_one_table_exactly_once_local() {
    four_appenders(Backend::local()).await;
}

#[tokio::test]
async fn four_processes_append_to_one_table_exactly_once_ceph() {
    if let Some(b) = ceph_or_explain() {
        four_appenders(b).await;
    }
}

#[tokio::test]
async fn compaction_during_four_appenders_keeps_rows_exactly_once_local() {
    four_appenders_and_compaction(Backend::local(), true).await;
}

#[tokio::test]
async fn compaction_during_four_appenders_keeps_rows_exactly_once_ceph() {
    if let Some(b) = ceph_or_explain() {
        four_appenders_and_compaction(b, true).await;
    }
}
