//! Delta tables in the tests: the seeded table job of the campaigns, and a reader of the log
//! that does not share filesink's (it parses `_delta_log/<version>.json` with serde_json), so
//! a bug in filesink's log reader cannot hide one in its writer.

use std::collections::BTreeMap;
use std::sync::Arc;

use filesink::storage::Storage;
use filesink::table::delta::DeltaOptions;
use filesink::{Coordinator, FileFormat, RollingPolicy, Sink};

use super::job::{commits_in_background, writers_of, Rng, BATCH_LEN, JOB, RECORDS};

/// The job of [`super::job::run`] writing into a Delta table: Parquet, partitioned by `day`,
/// 1 or 2 writers and background commits by seed.
pub async fn run_table(
    storage: Arc<dyn Storage>,
    seed: u64,
    acked: &mut i64,
) -> filesink::Result<()> {
    let mut rng = Rng::new(seed);
    let sink = Sink::builder_shared(storage)
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::default())
        .build()?;
    let mut job = Coordinator::builder(&sink, JOB)
        .parallelism(writers_of(seed))
        .delta_table(
            DeltaOptions::new()
                .schema(super::schema())
                .partition_by(["day"])
                .single_writer(true),
        )
        .open()
        .await?;
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

/// What the log says, read version by version from 0 (every version must be there).
#[derive(Debug, Default)]
pub struct LogView {
    /// The versions, in order.
    pub versions: Vec<i64>,
    /// Live files: decoded path → number of `add`s of it while it was live (must be 1).
    pub live: BTreeMap<String, usize>,
    /// The latest `txn` version per appId.
    pub txns: BTreeMap<String, i64>,
    /// `(version, appId, txn version)` of every entry's `txn`s, in order.
    pub txn_history: Vec<(i64, String, i64)>,
}

/// Reads `_delta_log/` from version 0 until a version is missing.
pub async fn read_log(storage: &dyn Storage) -> LogView {
    let mut view = LogView::default();
    for v in 0.. {
        let path = format!("_delta_log/{v:020}.json");
        let Some(bytes) = storage.get_metadata(&path).await.unwrap() else {
            break;
        };
        view.versions.push(v);
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let action: serde_json::Value = serde_json::from_slice(line)
                .unwrap_or_else(|e| panic!("{path}: a line is not JSON: {e}"));
            if let Some(add) = action.get("add") {
                let p = decode(add["path"].as_str().expect("add.path"));
                *view.live.entry(p).or_insert(0) += 1;
            }
            if let Some(remove) = action.get("remove") {
                view.live
                    .remove(&decode(remove["path"].as_str().expect("remove.path")));
            }
            if let Some(txn) = action.get("txn") {
                let app = txn["appId"].as_str().expect("txn.appId").to_owned();
                let n = txn["version"].as_i64().expect("txn.version");
                view.txn_history.push((v, app.clone(), n));
                view.txns.insert(app, n);
            }
        }
    }
    view
}

/// Percent-decodes an `add.path`.
pub fn decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// How often each id is in the table: every live file of the log, read from the store (a
/// live file that is missing fails the test).
pub async fn table_id_counts(storage: &dyn Storage) -> BTreeMap<i64, usize> {
    let view = read_log(storage).await;
    let mut counts = BTreeMap::new();
    for (path, adds) in &view.live {
        assert_eq!(*adds, 1, "`{path}` is added {adds} times while live");
        let bytes = storage
            .read_data_file(path)
            .await
            .unwrap_or_else(|e| panic!("a live file of the log cannot be read: {e}"));
        for id in super::ids_in_bytes(bytes.to_vec(), &FileFormat::parquet()) {
            *counts.entry(id).or_insert(0) += 1;
        }
    }
    counts
}

/// Asserts that the table holds ids `0..n`, each once.
pub async fn assert_table_exactly_once(storage: &dyn Storage, n: i64, ctx: &str) {
    let counts = table_id_counts(storage).await;
    let wrong: Vec<(i64, usize)> = (0..n)
        .map(|id| (id, counts.get(&id).copied().unwrap_or(0)))
        .filter(|(_, c)| *c != 1)
        .take(10)
        .collect();
    assert!(
        wrong.is_empty(),
        "{ctx}: ids not exactly once in the table (id, count): {wrong:?}"
    );
    assert_eq!(
        counts.len() as i64,
        n,
        "{ctx}: ids beyond 0..{n} in the table"
    );
}
