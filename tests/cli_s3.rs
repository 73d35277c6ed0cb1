//! The `filesink` binary against a real S3 server, run as a user would: `ingest`, `ls`,
//! `commit`, `abort` and `inspect` on `s3://bucket/prefix` URLs, and what each does after a
//! crash.
//!
//! The server comes from the environment (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`, `FILESINK_S3_BUCKET`); the binary inherits it.
//! `./scripts/test` starts a Garage server and exports them. Without `FILESINK_S3_BUCKET`
//! these tests say loudly that they did not run (and fail under `CI`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;

mod common;

use common::cli::*;

const EXIT_REFUSED: i32 = 5;

const NO_LIFECYCLE_RULE: &str = "bucket has no lifecycle rule that aborts incomplete multipart \
                                 uploads; see README \"Lifecycle rule\"";

/// The bucket of the S3 server in the environment, or `None` (after saying so) if there is
/// none.
fn bucket() -> Option<String> {
    match std::env::var("FILESINK_S3_BUCKET") {
        Ok(b) if !b.is_empty() => Some(b),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI must run the S3 CLI tests: FILESINK_S3_BUCKET is not set (./scripts/test starts \
             Garage and exports it)"
        ),
        _ => {
            eprintln!(
                "\n*** S3 CLI TESTS NOT RUN: no S3 server configured (FILESINK_S3_BUCKET is not \
                 set); run ./scripts/test (starts Garage on 127.0.0.1 and exports AWS_*), or set \
                 AWS_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, \
                 AWS_ALLOW_HTTP and FILESINK_S3_BUCKET ***\n"
            );
            None
        }
    }
}

/// A fresh prefix for one test: `(bucket, "cli/<uuid>")`.
fn fresh(bucket: &str) -> (String, String) {
    (
        bucket.to_string(),
        format!("cli/{}", uuid::Uuid::now_v7().simple()),
    )
}

fn url(bucket: &str, prefix: &str) -> String {
    format!("s3://{bucket}/{prefix}")
}

#[track_caller]
fn ls_json(url: &str) -> Value {
    json_of(&run_ok(&["ls", url, "--json"]))
}

/// The `path` of every element of the array `key`.
fn paths(v: &Value, key: &str) -> BTreeSet<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array `{key}` in {v}"))
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect()
}

/// `n` JSON lines like the fixture's, ids `0..n`.
fn write_jsonl(path: &Path, n: usize) {
    let mut out = String::with_capacity(n * 64);
    for i in 0..n {
        out.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"user\":\"user_{}\",\"amount\":{}.25}}\n",
            25 + i % 6,
            i % 97,
            i % 1000
        ));
    }
    std::fs::write(path, out).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every visible object under `prefix` (no component below it starts with `.` or `_`), read
/// back with `object_store`: (path relative to the prefix, bytes).
fn visible_objects(bucket: &str, prefix: &str) -> Vec<(String, bytes::Bytes)> {
    use futures_util::TryStreamExt;
    let store = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()
        .unwrap();
    runtime().block_on(async {
        let listed: Vec<object_store::ObjectMeta> = store
            .list(Some(&object_store::path::Path::from(prefix)))
            .try_collect()
            .await
            .unwrap();
        let mut out = Vec::new();
        for meta in listed {
            let Some(rel) = meta
                .location
                .as_ref()
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('/'))
            else {
                continue;
            };
            if rel.split('/').any(|c| c.starts_with(['.', '_'])) {
                continue;
            }
            let bytes = store
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            out.push((rel.to_string(), bytes));
        }
        out.sort();
        out
    })
}

/// The `id` of every record in the visible Parquet objects under `prefix`, sorted.
fn visible_ids(bucket: &str, prefix: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    for (rel, bytes) in visible_objects(bucket, prefix) {
        assert!(rel.ends_with(".parquet"), "{rel}");
        ids.extend(common::ids_in_bytes(
            bytes.to_vec(),
            &filesink::FileFormat::parquet(),
        ));
    }
    ids.sort_unstable();
    ids
}

/// The latest checkpoint of the only job at `url`, if `ls` can tell now.
fn latest_checkpoint(url: &str) -> Option<u64> {
    let o = filesink(&["ls", url, "--json"]);
    if !o.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&o.stdout).ok()?;
    v["jobs"].get(0)?["latest"].as_u64()
}

/// Waits (bounded) until no live run holds the first job of `url`: a killed run's claim
/// expires after its `--lease-ttl`.
fn wait_until_no_run_holds_the_job(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let o = filesink(&["ls", url, "--json"]);
        let live = o.status.success()
            && serde_json::from_slice::<Value>(&o.stdout)
                .ok()
                .and_then(|v| v["jobs"].get(0).map(|j| j["live"] == true))
                .unwrap_or(false);
        if !live {
            return;
        }
        assert!(Instant::now() < deadline, "the job stayed held for 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `args` (an ingest), waits (polling `ls --json`) until it completes a checkpoint later
/// than any before it, lets it run on for `extra`, and kills it (SIGKILL). Returns when it
/// killed it.
fn kill_after_a_checkpoint(args: &[&str], url: &str, extra: Duration) -> Instant {
    // The run killed before holds the job until its claim expires.
    wait_until_no_run_holds_the_job(url);
    let before = latest_checkpoint(url).unwrap_or(0);
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while latest_checkpoint(url).unwrap_or(0) <= before {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("ingest ended ({status}) before its first checkpoint");
        }
        assert!(Instant::now() < deadline, "no checkpoint within 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(extra);
    child.kill().unwrap(); // SIGKILL
    let killed_at = Instant::now();
    let status = child.wait().unwrap();
    assert!(!status.success(), "ingest finished before it was killed");
    killed_at
}

/// Kills runs of `ingest` until one leaves orphan multipart uploads behind (a kill between a
/// commit and the next write leaves none; a test must not depend on luck). Returns `ls
/// --json` after that kill, and when the kill was.
fn crash_until_orphan_uploads(ingest: &[&str], url: &str) -> (Value, Instant) {
    // Bounded: 20 kills at delays spread over 0 to 190 ms after a checkpoint.
    for attempt in 0..20u64 {
        let killed_at =
            kill_after_a_checkpoint(ingest, url, Duration::from_millis((attempt * 37) % 200));
        let ls = ls_json(url);
        if !ls["orphan_uploads"].as_array().unwrap().is_empty() {
            return (ls, killed_at);
        }
    }
    panic!("no kill left an orphan multipart upload behind");
}

#[test]
fn ingest_into_s3_writes_every_record_once_and_ls_commit_inspect_report_it() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let o = run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        &url,
        "--partition-by",
        "day",
        "--checkpoint-every",
        "1000rows",
        "--json",
    ]);
    let summary = json_of(&o);
    assert_eq!(summary["records"], 5000, "{summary}");
    assert_eq!(summary["location"], url.as_str(), "{summary}");
    let job = summary["job"].as_str().unwrap().to_string();
    let last = summary["last_checkpoint"].as_u64().unwrap();

    // Every visible object, read back with object_store: each id exactly once.
    let objects = visible_objects(&bucket, &prefix);
    assert_exactly_once(&visible_ids(&bucket, &prefix), 0..5000);
    for (rel, _) in &objects {
        assert!(rel.starts_with("day=2026-11-"), "{rel}");
    }

    let ls = ls_json(&url);
    assert_eq!(ls["location"], url.as_str(), "{ls}");
    assert_eq!(ls["base"], url.as_str(), "{ls}");
    assert!(ls["sink"]["sink_id"].is_string(), "{ls}");
    assert_eq!(
        ls["committed"]["files"].as_u64().unwrap() as usize,
        objects.len(),
        "{ls}"
    );
    let bytes: usize = objects.iter().map(|(_, b)| b.len()).sum();
    assert_eq!(ls["committed"]["bytes"].as_u64().unwrap() as usize, bytes);
    assert_eq!(ls["committed"]["partitions"].as_array().unwrap().len(), 6);
    assert_eq!(ls["jobs"].as_array().unwrap().len(), 1, "{ls}");
    assert_eq!(ls["jobs"][0]["job"], job.as_str());
    assert_eq!(ls["jobs"][0]["finished"], true);
    assert_eq!(ls["jobs"][0]["records"], 5000);
    assert!(ls["pending"].as_array().unwrap().is_empty(), "{ls}");
    assert!(ls["leftovers"].as_array().unwrap().is_empty(), "{ls}");
    assert!(ls["orphan_uploads"].as_array().unwrap().is_empty(), "{ls}");
    // The lifecycle warning, if the bucket has no rule, is in the JSON and on stderr alike.
    let warnings = ls["warnings"].as_array().expect("a warnings array");
    for w in warnings {
        assert_eq!(w, NO_LIFECYCLE_RULE);
    }
    let text = run_ok(&["ls", &url]);
    assert!(
        stdout(&text).contains("orphan multipart uploads (incomplete, needed by no manifest): 0"),
        "{}",
        stdout(&text)
    );
    assert!(
        stdout(&text).contains("day=2026-11-25"),
        "{}",
        stdout(&text)
    );
    assert_eq!(
        stderr(&text).contains(&format!("warning: {NO_LIFECYCLE_RULE}")),
        !warnings.is_empty(),
        "{}",
        stderr(&text)
    );

    // commit of a checkpoint whose files are all committed, twice: already committed.
    for _ in 0..2 {
        let c = json_of(&run_ok(&[
            "commit",
            &url,
            "--job",
            &job,
            "--checkpoint",
            &(last - 1).to_string(),
            "--json",
        ]));
        assert_eq!(c["committed"], 0, "{c}");
        assert_eq!(c["failed"], 0, "{c}");
        assert!(c["already_committed"].as_u64().unwrap() >= 1, "{c}");
    }
    let dry = stdout(&run_ok(&[
        "commit",
        &url,
        "--job",
        &job,
        "--checkpoint",
        &(last - 1).to_string(),
        "--dry-run",
    ]));
    assert!(dry.contains("total: would commit 0"), "{dry}");
    assert!(!dry.contains("already committed 0"), "{dry}");

    // inspect reads manifests through the storage.
    let v = json_of(&run_ok(&["inspect", &url, "--json"]));
    assert_eq!(v["manifest"]["finished"], true, "{v}");
    assert_eq!(v["manifest"]["source_position"]["records"], 5000);
    assert!(
        v["file"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{url}/_filesink/jobs/{job}/checkpoints/")),
        "{v}"
    );
    let text = stdout(&run_ok(&[
        "inspect",
        &url,
        "--job",
        &job,
        "--checkpoint",
        &(last - 1).to_string(),
    ]));
    assert!(text.contains("finished: no"), "{text}");
    assert!(text.contains("[visible]"), "{text}");
    assert!(!text.contains("[pending]"), "{text}");

    // The same command again is a no-op.
    let o = run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        &url,
        "--partition-by",
        "day",
        "--checkpoint-every",
        "1000rows",
    ]);
    assert!(stdout(&o).contains("already finished"), "{}", stdout(&o));
    assert_exactly_once(&visible_ids(&bucket, &prefix), 0..5000);
}

#[test]
fn a_crashed_ingest_leaves_orphan_uploads_that_abort_removes_and_a_rerun_completes_exactly_once() {
    const N: usize = 60_000;
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.jsonl");
    write_jsonl(&input, N);
    let ingest = [
        "ingest",
        s(&input),
        "--to",
        &url,
        "--checkpoint-every",
        "500rows",
        "--lease-ttl",
        "10s",
    ];

    let (ls, _killed_at) = crash_until_orphan_uploads(&ingest, &url);
    assert_eq!(ls["jobs"][0]["finished"], false, "{ls}");
    // The killed run's process is gone (this machine, this boot, its pid free): its claim,
    // unexpired as it is, holds nothing (`a_killed_runs_claim_is_taken_over_at_once...`).
    assert_eq!(ls["jobs"][0]["live"], false, "{ls}");
    wait_until_no_run_holds_the_job(&url);
    let ls = ls_json(&url);
    let leftovers = paths(&ls, "leftovers");
    let orphans = paths(&ls, "orphan_uploads");
    assert_eq!(orphans, leftovers, "{ls}");
    let mut upload_ids = Vec::new();
    for u in ls["orphan_uploads"].as_array().unwrap() {
        let path = u["path"].as_str().unwrap();
        let id = u["upload_id"].as_str().expect("an upload id");
        assert_eq!(path, format!("{}#{id}", u["final_path"].as_str().unwrap()));
        assert!(u["age_ms"].as_i64().unwrap() >= 0, "{u}");
        upload_ids.push(id.to_string());
    }
    // ls in text lists each orphan upload with its id and age.
    let text = stdout(&run_ok(&["ls", &url]));
    assert!(
        text.contains(&format!(
            "orphan multipart uploads (incomplete, needed by no manifest): {}",
            orphans.len()
        )),
        "{text}"
    );
    for id in &upload_ids {
        assert!(text.contains(&format!("upload {id}  started ")), "{text}");
    }
    // Nothing visible twice, even now.
    let ids = visible_ids(&bucket, &prefix);
    assert_exactly_once(&ids, 0..ids.len() as i64);

    // A dry run lists exactly those uploads, with their ids, and changes nothing.
    let dry = json_of(&run_ok(&["abort", &url, "--dry-run", "--force", "--json"]));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(paths(&dry, "remove"), leftovers, "{dry}");
    let would_commit: BTreeSet<&str> = dry["commit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["final_path"].as_str().unwrap())
        .collect();
    let pending: BTreeSet<&str> = ls["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["final_path"].as_str().unwrap())
        .collect();
    assert_eq!(would_commit, pending, "{dry}\n{ls}");
    let dry_text = stdout(&run_ok(&["abort", &url, "--dry-run", "--force"]));
    for id in &upload_ids {
        assert!(
            dry_text.contains(&format!("multipart upload {id}")),
            "{dry_text}"
        );
    }
    let after = ls_json(&url);
    assert_eq!(
        paths(&after, "leftovers"),
        leftovers,
        "a dry run changed the uploads"
    );
    assert_eq!(after["pending"], ls["pending"], "a dry run committed");

    // commit makes pending files visible; a second commit finds them committed.
    let c = json_of(&run_ok(&["commit", &url, "--json"]));
    assert_eq!(c["failed"], 0, "{c}");
    let c2 = json_of(&run_ok(&["commit", &url, "--json"]));
    assert_eq!(c2["committed"], 0, "{c2}");
    assert_eq!(c2["failed"], 0, "{c2}");
    assert_eq!(
        c2["already_committed"],
        c2["jobs"][0]["files"].as_array().unwrap().len(),
        "{c2}"
    );
    assert!(ls_json(&url)["pending"].as_array().unwrap().is_empty());

    // The job is known dead (its claim expired): abort needs no --force, however young
    // the uploads, and removes exactly the orphan uploads.
    let a = json_of(&run_ok(&["abort", &url, "--json"]));
    assert_eq!(paths(&a, "remove"), leftovers, "{a}");
    let ls = ls_json(&url);
    assert!(ls["leftovers"].as_array().unwrap().is_empty(), "{ls}");
    assert!(ls["orphan_uploads"].as_array().unwrap().is_empty(), "{ls}");
    assert!(ls["pending"].as_array().unwrap().is_empty(), "{ls}");
    let ids = visible_ids(&bucket, &prefix);
    assert_exactly_once(&ids, 0..ids.len() as i64);

    // The same command resumes and completes: every id once, nothing left over.
    let o = run_ok(&ingest);
    assert!(stderr(&o).contains("resuming job"), "{}", stderr(&o));
    assert_exactly_once(&visible_ids(&bucket, &prefix), 0..N as i64);
    let ls = ls_json(&url);
    assert_eq!(ls["jobs"][0]["finished"], true, "{ls}");
    assert!(ls["leftovers"].as_array().unwrap().is_empty(), "{ls}");
}

#[test]
fn an_empty_prefix_is_not_a_filesink_output() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let o = run_expect(&["abort", &url, "--force"], EXIT_REFUSED);
    assert!(
        stderr(&o).contains("not a filesink output"),
        "{}",
        stderr(&o)
    );
    run_expect(&["commit", &url], EXIT_REFUSED);
    run_expect(&["inspect", &url], EXIT_REFUSED);
    let ls = ls_json(&url);
    assert!(ls["sink"].is_null(), "{ls}");
    assert_eq!(ls["committed"]["files"], 0, "{ls}");
    assert!(visible_objects(&bucket, &prefix).is_empty());
}

#[test]
fn abort_never_touches_the_uploads_of_a_sibling_prefix() {
    let Some(bucket) = bucket() else { return };
    let (bucket, base) = fresh(&bucket);
    let out = url(&bucket, &format!("{base}/out"));
    let out2 = url(&bucket, &format!("{base}/out2"));
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.jsonl");
    write_jsonl(&input, 60_000);

    // `out` is a finished sink; `out2` has a crashed run's uploads.
    run_ok(&["ingest", s(&fixture("events.jsonl")), "--to", &out]);
    let ingest2 = [
        "ingest",
        s(&input),
        "--to",
        &out2,
        "--checkpoint-every",
        "500rows",
        "--lease-ttl",
        "2s",
    ];
    let (ls2, _) = crash_until_orphan_uploads(&ingest2, &out2);
    let uploads2 = paths(&ls2, "orphan_uploads");
    assert!(ls_json(&out)["leftovers"].as_array().unwrap().is_empty());

    let a = json_of(&run_ok(&["abort", &out, "--force", "--json"]));
    assert!(a["remove"].as_array().unwrap().is_empty(), "{a}");
    let after = ls_json(&out2);
    assert_eq!(paths(&after, "orphan_uploads"), uploads2, "{after}");

    // Clean up after ourselves, once the killed run's claim has expired.
    wait_until_no_run_holds_the_job(&out2);
    run_ok(&["abort", &out2, "--force"]);
    assert!(ls_json(&out2)["leftovers"].as_array().unwrap().is_empty());
}

#[test]
fn bench_measures_on_s3_against_the_put_floor_and_cleans_up() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let o = run_ok(&[
        "bench",
        "--to",
        &url,
        "--files",
        "12",
        "--files-per-checkpoint",
        "6",
        "--file-size",
        "16KiB",
        "--json",
    ]);
    let report = json_of(&o);
    assert_eq!(report["roll"]["files"], 12, "{report}");
    assert_eq!(report["roll"]["checkpoints"], 2, "{report}");
    assert!(
        report["put_floor_files_per_sec"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    // Nothing is left behind: no objects, no uploads.
    assert!(visible_objects(&bucket, &prefix).is_empty());
    let ls = filesink(&["ls", &url, "--json"]);
    if ls.status.success() {
        let v = json_of(&ls);
        assert!(
            v["orphan_uploads"].as_array().is_none_or(|a| a.is_empty()),
            "{v}"
        );
    }
}

#[test]
fn abort_leaves_foreign_and_nested_sink_uploads_on_s3_and_no_lake_nests_in_another() {
    use object_store::multipart::MultipartStore;
    const INC: &str = "019ad2f1c0c87b2a9d6f3b8e5a1c2d3e";
    let Some(bucket) = bucket() else { return };
    let (bucket, base) = fresh(&bucket);
    let out = url(&bucket, &base);
    run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        &out,
        "--job",
        "events",
    ]);
    let store = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(&bucket)
        .build()
        .unwrap();
    let key = |rel: &str| object_store::path::Path::from(format!("{base}/{rel}"));
    // Ours: the shape filesink writes, by a writer of the lake's job.
    let ours = format!("day=2026-11-25/part-events_0-{INC}-0.parquet");
    // Not ours: another tool's upload, an unknown writer, and a nested sink's upload of a
    // writer whose job name is the same as ours.
    let foreign = [
        "backups/dump.tar".to_string(),
        format!("day=2026-11-25/part-ghost_0-{INC}-0.parquet"),
        format!("day=2026-11-25/part-events_0-{INC}-5.parquet.bak"),
    ];
    let nested = format!("archive/part-events_0-{INC}-1.parquet");
    let identity =
        r#"{"version":1,"sink_id":"0190aaaa-0000-7000-8000-000000000000","created_at_ms":0}"#;
    let uploads: Vec<(String, String)> = runtime().block_on(async {
        store
            .put(
                &key("archive/_filesink/sink.json"),
                identity.as_bytes().to_vec().into(),
            )
            .await
            .unwrap();
        let mut uploads = Vec::new();
        for rel in [&ours].into_iter().chain(&foreign).chain([&nested]) {
            let id = store.create_multipart(&key(rel)).await.unwrap();
            uploads.push((rel.clone(), id));
        }
        uploads
    });
    let finals = |v: &Value, key: &str| -> BTreeSet<String> {
        paths(v, key)
            .into_iter()
            .map(|p| p.split('#').next().unwrap().to_string())
            .collect()
    };

    let ls = ls_json(&out);
    assert_eq!(
        finals(&ls, "leftovers"),
        BTreeSet::from([ours.clone()]),
        "{ls}"
    );
    assert_eq!(
        finals(&ls, "foreign"),
        foreign.iter().cloned().collect(),
        "{ls}"
    );
    let a = json_of(&run_ok(&["abort", &out, "--force", "--json"]));
    assert_eq!(finals(&a, "remove"), BTreeSet::from([ours.clone()]), "{a}");
    // The foreign uploads are still there, and so is the nested sink's.
    let after = ls_json(&out);
    assert!(finals(&after, "leftovers").is_empty(), "{after}");
    assert_eq!(
        finals(&after, "foreign"),
        foreign.iter().cloned().collect(),
        "{after}"
    );
    let inner = ls_json(&url(&bucket, &format!("{base}/archive")));
    assert_eq!(
        finals(&inner, "foreign"),
        BTreeSet::from(["part-events_0-019ad2f1c0c87b2a9d6f3b8e5a1c2d3e-1.parquet".to_string()]),
        "{inner}"
    );

    // No lake is created inside another's tree, nor around one: refused, nothing written.
    let o = run_expect(
        &[
            "ingest",
            s(&fixture("events.jsonl")),
            "--to",
            &format!("{out}/archive/deeper"),
        ],
        EXIT_REFUSED,
    );
    assert!(
        stderr(&o).contains("it is inside the sink `s3://"),
        "{}",
        stderr(&o)
    );
    let (_, base2) = fresh(&bucket);
    run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        &url(&bucket, &format!("{base2}/wrap/inner")),
    ]);
    let wrap = url(&bucket, &format!("{base2}/wrap"));
    let o = run_expect(
        &["ingest", s(&fixture("events.jsonl")), "--to", &wrap],
        EXIT_REFUSED,
    );
    assert!(
        stderr(&o).contains("it holds the sink `s3://"),
        "{}",
        stderr(&o)
    );
    assert!(
        ls_json(&wrap)["sink"].is_null(),
        "a lake was created around another"
    );
    assert!(ls_json(&format!("{out}/archive/deeper"))["sink"].is_null());

    // Clean up after ourselves.
    runtime().block_on(async {
        for (rel, id) in &uploads[1..] {
            let _ = store.abort_multipart(&key(rel), id).await;
        }
    });
}

/// One parser of locations: an S3 prefix is a key prefix taken as written (a space stays a
/// space, as with the AWS CLI), the same whether the library or the CLI opens it. A job
/// written through the library and one ingested by the CLI at the same URL land under the
/// same keys, and `ls` of that URL sees both.
#[test]
fn a_prefix_with_a_space_names_the_same_keys_in_the_library_and_the_cli() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let prefix = format!("{prefix}/my lake");
    let url = url(&bucket, &prefix);

    runtime().block_on(async {
        let storage = filesink::storage::ObjectStorage::s3(&url).unwrap();
        let sink = filesink::Sink::builder_shared(std::sync::Arc::new(storage))
            .format(filesink::FileFormat::parquet())
            .build()
            .unwrap();
        let mut job = filesink::Coordinator::open(&sink, "library", 1)
            .await
            .unwrap();
        job.writer()
            .write(&common::batch(10_000, 10))
            .await
            .unwrap();
        job.finish(&10).await.unwrap();
        job.close().await.unwrap();
    });
    run_ok(&[
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        &url,
        "--checkpoint-every",
        "1000rows",
    ]);

    let mut expected: Vec<i64> = (0..5000).chain(10_000..10_010).collect();
    expected.sort_unstable();
    assert_eq!(visible_ids(&bucket, &prefix), expected);
    let ls = ls_json(&url);
    assert_eq!(ls["location"], url.as_str(), "{ls}");
    let jobs: BTreeSet<String> = ls["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no jobs in {ls}"))
        .iter()
        .map(|j| j["job"].as_str().unwrap().to_string())
        .collect();
    assert!(jobs.contains("library"), "{ls}");
    assert_eq!(jobs.len(), 2, "{ls}");
}

/// On S3 a key takes at most 1,024 bytes: a record whose partition path would make a part
/// file's key longer (with the prefix and the part's name) is a bad record, the others are
/// written, one of exactly the longest path among them.
#[test]
fn a_partition_path_longer_than_a_key_takes_is_a_bad_record() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let max = filesink::Sink::builder_shared(filesink::storage::open_url(&url).unwrap())
        .format(filesink::FileFormat::parquet())
        .build()
        .unwrap()
        .partition_path_bytes_max()
        .unwrap();
    assert_eq!(
        max,
        // `.part-<writer id>-<incarnation>-<counter>.parquet.inprogress.<id>` at its longest,
        // and the `/` before it.
        1024 - prefix.len() - 1 - ".part---.parquet.inprogress.".len() - 64 - 32 - 20 - 32 - 1
    );
    // Columns c0..c3 whose path (`c0=…/c1=…/c2=…/c3=…`) is `len` bytes.
    let record = |id: usize, len: usize| {
        let mut left = len + 1 - 4 * 4;
        let mut r = serde_json::json!({ "id": id });
        for c in 0..4 {
            let n = left.min(252);
            r[format!("c{c}")] = "x".repeat(n).into();
            left -= n;
        }
        assert_eq!(left, 0);
        r.to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let lines = [record(0, 15), record(1, max), record(2, max + 1)];
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let bad = dir.path().join("bad.jsonl");
    run_ok(&[
        "ingest",
        s(&input),
        "--to",
        &url,
        "--partition-by",
        "c0,c1,c2,c3",
        "--bad-records",
        s(&bad),
    ]);
    assert_eq!(visible_ids(&bucket, &prefix), vec![0, 1]);
    let longest = visible_objects(&bucket, &prefix)
        .iter()
        .map(|(rel, _)| rel.rsplit_once('/').unwrap().0.len())
        .max();
    assert_eq!(longest, Some(max));
    let bad = std::fs::read_to_string(&bad).unwrap();
    let bad: Vec<Value> = bad
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0]["source"], format!("{}:3", s(&input)));
    assert!(
        bad[0]["error"]
            .as_str()
            .unwrap()
            .contains(&format!("is longer than the {max} bytes")),
        "{bad:?}"
    );
}

/// A run killed with SIGKILL leaves an unexpired claim on S3. Its process is provably gone
/// (this machine, this boot, this PID namespace, its pid free): `ls` says nobody holds the
/// job, and a rerun, `commit` and `abort` take the job over at once instead of waiting for
/// the lease to expire. A claim whose process lives is not taken, and the refusal says what
/// is known: whose claim, when it expires.
#[test]
fn a_killed_runs_claim_is_taken_over_at_once_and_a_live_ones_is_not() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let args = [
        "ingest",
        "-",
        "--job",
        "held",
        "--to",
        &url,
        "--checkpoint-every",
        "1s",
        "--lease-ttl",
        "300s",
    ];
    // A live run: its claim refuses a second run, which names it and its expiry.
    let mut live = spawn_with_piped_stdin(&args);
    let mut stdin = live.stdin.take().unwrap();
    use std::io::Write as _;
    writeln!(stdin, "{{\"id\":1}}").unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest_checkpoint(&url).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = run_expect(&args, EXIT_REFUSED);
    let pid = live.id().to_string();
    assert!(
        stderr(&o).contains("unexpired claim")
            && stderr(&o).contains(&format!("pid {pid} "))
            && stderr(&o).contains("expires in"),
        "{}",
        stderr(&o)
    );
    assert_eq!(ls_json(&url)["jobs"][0]["live"], true);

    // Killed: its claim stays for 300 s, but nobody holds the job.
    live.kill().unwrap();
    live.wait().unwrap();
    drop(stdin);
    assert_eq!(ls_json(&url)["jobs"][0]["live"], false);
    run_ok(&["commit", &url, "--job", "held"]);
    run_ok(&["abort", &url]);
    let same = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(same.path(), "{\"id\":1}\n").unwrap();
    let o = filesink_with_stdin(&args, same.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(visible_ids(&bucket, &prefix), vec![1]);

    // A claim of a process on another machine (another boot) cannot be proven dead: it holds
    // the job until it expires, and the refusal says whose it is and when it expires.
    let key = format!(
        "{prefix}/_filesink/jobs/held/owners/{}.300000",
        uuid::Uuid::now_v7().simple()
    );
    let body = "pid 4242 on `elsewhere`, since 2026-12-04 10:00:00 UTC\n\
                {\"boot_id\":\"00000000-0000-0000-0000-000000000000\",\"pid_ns\":\"pid:[1]\",\
                \"pid\":4242,\"start_ticks\":1}";
    runtime().block_on(async {
        object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(&bucket)
            .build()
            .unwrap()
            .put(
                &object_store::path::Path::from(key.as_str()),
                object_store::PutPayload::from(body.as_bytes().to_vec()),
            )
            .await
            .unwrap();
    });
    let o = filesink_with_stdin(&args, same.path());
    assert_eq!(o.status.code(), Some(EXIT_REFUSED), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("unexpired claim")
            && e.contains("pid 4242 on `elsewhere`")
            && e.contains("expires in"),
        "{e}"
    );
    assert_eq!(ls_json(&url)["jobs"][0]["live"], true);
}

/// `--lease-ttl` reaches the Delta table's single-writer claim (on Garage, which ignores
/// conditional writes), and a second writer's refusal names the table and its own job.
#[test]
fn the_single_writer_claim_takes_the_lease_ttl_and_names_the_table() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let schema = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        schema.path(),
        r#"{"fields":[{"name":"id","data_type":"Int64","nullable":true,"dict_id":0,"dict_is_ordered":false,"metadata":{}}],"metadata":{}}"#,
    )
    .unwrap();
    let args = |job: &'static str| {
        vec![
            "ingest".to_owned(),
            "-".into(),
            "--job".into(),
            job.into(),
            "--to".into(),
            url.clone(),
            "--table".into(),
            "delta".into(),
            "--single-writer".into(),
            "--schema".into(),
            schema.path().to_str().unwrap().into(),
            "--checkpoint-every".into(),
            "1s".into(),
            "--lease-ttl".into(),
            "300s".into(),
        ]
    };
    let first = args("first");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut live = spawn_with_piped_stdin(&first);
    let mut stdin = live.stdin.take().unwrap();
    use std::io::Write as _;
    writeln!(stdin, "{{\"id\":1}}").unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest_checkpoint(&url).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = args("second");
    let second: Vec<&str> = second.iter().map(String::as_str).collect();
    let same = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(same.path(), "{\"id\":2}\n").unwrap();
    let o = filesink_with_stdin(&second, same.path());
    assert_eq!(o.status.code(), Some(EXIT_REFUSED), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("job `second`") && e.contains(&url), "{e}");
    assert!(!e.contains("(the Delta table's single writer)"), "{e}");
    let expires: u64 = e
        .split("expires in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no expiry in: {e}"));
    assert!(
        expires > 60,
        "the claim took the default lease, not --lease-ttl: {e}"
    );
    drop(stdin);
    assert!(live.wait().unwrap().success());
}

/// A zombie: a run paused (SIGSTOP) past its lease while another run takes its job over, then
/// resumed. It must not leave uploads behind nor claim data was lost: it removes what it had
/// open and says it lost the job (exit 5); the lake holds every record of the run that took
/// over, once.
#[test]
fn a_run_paused_past_its_lease_cleans_up_and_says_it_lost_the_job() {
    use std::io::Write as _;
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let url = url(&bucket, &prefix);
    let args = [
        "ingest",
        "-",
        "--job",
        "z",
        "--to",
        &url,
        "--checkpoint-every",
        "1s",
        "--lease-ttl",
        "1s",
    ];
    let line = |i: i64| format!("{{\"id\":{i}}}\n");
    let mut zombie = spawn_with_piped_stdin(&args);
    let mut zin = zombie.stdin.take().unwrap();
    for i in 0..5 {
        zin.write_all(line(i).as_bytes()).unwrap();
    }
    zin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest_checkpoint(&url).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let signal = |sig: &str, pid: u32| {
        assert!(Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP", zombie.id());
    // Past its lease (1 s, and the stores' second of slack): another run takes the job.
    std::thread::sleep(Duration::from_secs(4));
    let mut taker = spawn_with_piped_stdin(&args);
    let mut tin = taker.stdin.take().unwrap();
    for i in 0..10 {
        tin.write_all(line(i).as_bytes()).unwrap();
    }
    tin.flush().unwrap();
    let taken_at = latest_checkpoint(&url).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest_checkpoint(&url).unwrap_or(0) <= taken_at {
        assert!(Instant::now() < deadline, "the new run took no checkpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The zombie wakes up, writes on, and stops.
    signal("-CONT", zombie.id());
    for i in 5..8 {
        zin.write_all(line(i).as_bytes()).unwrap();
    }
    zin.flush().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    drop(zin);
    let out = zombie.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_REFUSED), "{e}");
    assert!(e.contains("lost the job"), "{e}");
    // The new run finishes; nothing of the zombie is left, every record is visible once.
    drop(tin);
    let out = taker.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ls = ls_json(&url);
    assert!(ls["orphan_uploads"].as_array().unwrap().is_empty(), "{ls}");
    assert!(ls["leftovers"].as_array().unwrap().is_empty(), "{ls}");
    assert_eq!(visible_ids(&bucket, &prefix), (0..10).collect::<Vec<_>>());
}

/// `ingest INPUT --to s3://BUCKET/PREFIX --partition-by key ARGS...`, then every id below
/// `records` is visible exactly once.
fn ingest_by_key_exactly_once(
    input: &std::path::Path,
    (bucket, prefix): (&str, &str),
    args: &[&str],
    records: i64,
) {
    let to = url(bucket, prefix);
    let mut all = vec!["ingest", s(input), "--to", &to, "--partition-by", "key"];
    all.extend_from_slice(args);
    run_ok(&all);
    assert_eq!(
        visible_ids(bucket, prefix),
        (0..records).collect::<Vec<i64>>()
    );
}

/// Many partitions under a small budget on S3: each writer keeps a few uploads open, gathers
/// the other partitions' records, and writes them at the vote, one object each, every record
/// once.
#[test]
fn partitions_beyond_the_open_files_cap_get_one_object_each_on_s3() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let lines: String = (0..2_000)
        .map(|i| format!("{{\"id\":{i},\"key\":\"k{:03}\"}}\n", i % 200))
        .collect();
    std::fs::write(&input, lines).unwrap();
    ingest_by_key_exactly_once(
        &input,
        (&bucket, &prefix),
        &["--memory", "1MiB", "--checkpoint-every", "1000rows"],
        2_000,
    );
    // Two checkpoints of 1,000 records, each touching all 200 partitions.
    assert_eq!(visible_objects(&bucket, &prefix).len(), 400);
}

/// Partitions whose parts being filled would pass the budget on S3: an open upload holds a
/// whole part before it can send any of it, so a writer keeps at most its budget over two
/// parts open and gathers the rest. Every partition gets one object per checkpoint, not a
/// trail of small ones rolled to free memory, and every record lands once.
#[test]
fn parts_being_filled_do_not_make_small_objects_on_s3() {
    let Some(bucket) = bucket() else { return };
    let (bucket, prefix) = fresh(&bucket);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    // 12 partitions of about 1.5 MiB each of values Parquet cannot shrink (hex of a
    // pseudo-random sequence): 18 MiB of parts under a budget of 16 MiB.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lines = String::new();
    for i in 0..150_000 {
        let mut pad = String::with_capacity(96);
        for _ in 0..6 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            pad.push_str(&format!("{x:016x}"));
        }
        lines.push_str(&format!(
            "{{\"id\":{i},\"key\":\"k{:02}\",\"pad\":\"{pad}\"}}\n",
            i % 12
        ));
    }
    std::fs::write(&input, lines).unwrap();
    ingest_by_key_exactly_once(
        &input,
        (&bucket, &prefix),
        &[
            "--memory",
            "16MiB",
            "--parallelism",
            "1",
            "--checkpoint-every",
            "1000000rows",
        ],
        150_000,
    );
    // One checkpoint with records (the last): one object per partition.
    let names: Vec<String> = visible_objects(&bucket, &prefix)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names.len(), 12, "{names:#?}");
}
