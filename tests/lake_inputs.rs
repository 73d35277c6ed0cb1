//! Exactly once per lake, not per job: the lake's ledger of inputs (`filesink::ingest::ledger`).
//! The same command over a glob that grows, shrinks or changes is a new job each time its
//! list changes; every input is still taken once, a grown one read on from where the lake
//! stopped, a replaced one refused (exit 7), whichever job names it. Runs that overlap never
//! read one input twice; a run killed anywhere hands its place to the next one.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::cli::*;
use common::visible_parquet_ids;
use filesink::ingest::{CheckpointEvery, Ingest, IngestStatus, Input};

const EXIT_REFUSED: i32 = 5;
const EXIT_INPUT_CHANGED: i32 = 7;
const EXIT_INPUTS_REFUSED: i32 = 8;

fn recs(ids: std::ops::Range<i64>) -> String {
    ids.map(|i| format!("{{\"id\":{i},\"day\":\"2026-12-0{}\"}}\n", 1 + i % 3))
        .collect()
}

fn append(path: &Path, text: &str) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// `filesink ingest <inputs> --to <lake>` with the usual options, from `dir`.
fn ingest_in(dir: &Path, inputs: &[&str], lake: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .current_dir(dir)
        .arg("ingest")
        .args(inputs)
        .args([
            "--to",
            lake,
            "--partition-by",
            "day",
            "--checkpoint-every",
            "300rows",
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[track_caller]
fn ok(o: std::process::Output) -> std::process::Output {
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
    o
}

/// The cron case: the same command over a glob that grows, in every path form a shell or
/// a crontab hands over (relative, `./`, absolute, through a symbolic link).
#[test]
fn a_rerun_over_a_grown_input_list_takes_each_input_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("logs")).unwrap();
    std::os::unix::fs::symlink(d.join("logs"), d.join("link")).unwrap();
    fs::write(d.join("logs/a.jsonl"), recs(0..1000)).unwrap();
    fs::write(d.join("logs/b.jsonl"), recs(1000..2000)).unwrap();
    ok(ingest_in(d, &["logs/a.jsonl", "logs/b.jsonl"], "lake", &[]));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..2000);

    // A third file arrives; the glob now names three.
    fs::write(d.join("logs/c.jsonl"), recs(2000..3000)).unwrap();
    let o = ok(ingest_in(
        d,
        &["./logs/a.jsonl", "./logs/b.jsonl", "./logs/c.jsonl"],
        "./lake",
        &["--json"],
    ));
    assert_eq!(json_of(&o)["records"], 1000, "{}", stdout(&o));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..3000);

    // The first file grew; a list without it leaves it alone, one with it reads on.
    append(&d.join("logs/a.jsonl"), &recs(3000..3100));
    let abs_b = d.join("logs/b.jsonl");
    ok(ingest_in(d, &[s(&abs_b), "logs/c.jsonl"], "lake", &[]));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..3000);
    let o = ok(ingest_in(
        d,
        &["link/c.jsonl", "link/a.jsonl"],
        "lake",
        &["--json"],
    ));
    assert_eq!(json_of(&o)["records"], 100, "{}", stdout(&o));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..3100);

    // A list that shrank, the same list again, an explicit job over all of them: nothing new.
    ok(ingest_in(d, &["logs/b.jsonl"], "lake", &[]));
    ok(ingest_in(d, &["logs/c.jsonl", "logs/a.jsonl"], "lake", &[]));
    let o = ok(ingest_in(
        d,
        &["logs/a.jsonl", "logs/b.jsonl", "logs/c.jsonl"],
        "lake",
        &["--job", "everything", "--json"],
    ));
    assert_eq!(json_of(&o)["records"], 0, "{}", stdout(&o));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..3100);
    // Each input is in the ledger once, under the lake's metadata.
    let keys = fs::read_dir(d.join("lake/_filesink/inputs"))
        .unwrap()
        .count();
    assert_eq!(keys, 3);
}

/// An input replaced, edited or cut short under the lake is refused, whichever job names
/// it, with nothing written; the original back, the lake reads on.
#[test]
fn an_input_replaced_under_the_lake_is_refused_whatever_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = d.join("a.jsonl");
    fs::write(&a, recs(0..500)).unwrap();
    ok(ingest_in(d, &["a.jsonl"], "lake", &[]));
    let before = visible_parquet_ids(&d.join("lake"));
    fs::write(d.join("b.jsonl"), recs(500..600)).unwrap();

    let original = fs::read(&a).unwrap();
    let mut edited = original.clone();
    edited[10] = b'9';
    for (how, bytes) in [
        ("edited", edited),
        ("cut short", original[..original.len() / 2].to_vec()),
        ("replaced", recs(7000..7600).into_bytes()),
    ] {
        fs::write(&a, &bytes).unwrap();
        for extra in [&["--job", "other"][..], &[][..]] {
            let o = ingest_in(d, &["a.jsonl", "b.jsonl"], "lake", extra);
            // A job named after its inputs takes `b.jsonl` beside the refused input (exit 8),
            // once; after that it has nothing else to read (exit 7).
            let took_b = extra.is_empty() && how == "edited";
            let code = if took_b {
                EXIT_INPUTS_REFUSED
            } else {
                EXIT_INPUT_CHANGED
            };
            assert_eq!(
                o.status.code(),
                Some(code),
                "{how} {extra:?}: {}",
                stderr(&o)
            );
            assert!(stderr(&o).contains("a.jsonl"), "{}", stderr(&o));
            let mut want = before.clone();
            if extra.is_empty() || how != "edited" {
                want.extend(500..600);
            }
            assert_eq!(visible_parquet_ids(&d.join("lake")), want, "{how}");
        }
    }
    // The original back, with more records: read on.
    fs::write(&a, [original, recs(600..650).into_bytes()].concat()).unwrap();
    ok(ingest_in(d, &["a.jsonl", "b.jsonl"], "lake", &[]));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..650);
}

/// A run whose input another live run holds is refused before it reads or writes anything;
/// once that run is gone the input is taken where it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_held_by_a_live_run_is_refused_until_that_run_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a.jsonl"), recs(0..300)).unwrap();
    ok(ingest_in(d, &["a.jsonl"], "lake", &["--job", "first"]));
    append(&d.join("a.jsonl"), &recs(300..400));
    fs::write(d.join("b.jsonl"), recs(400..500)).unwrap();

    // A live run of job `first`: it holds its job, and takes its input (grown since the job
    // finished), as its process would before reading it.
    let lease = common::live_run_holding(&d.join("lake"), "first", &d.join("a.jsonl")).await;
    let o = ingest_in(d, &["a.jsonl", "b.jsonl"], "lake", &["--job", "second"]);
    assert_eq!(o.status.code(), Some(EXIT_REFUSED), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("job `first`") && stderr(&o).contains("a.jsonl"),
        "{}",
        stderr(&o)
    );
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..300);
    lease.release().await.unwrap();
    ok(ingest_in(
        d,
        &["a.jsonl", "b.jsonl"],
        "lake",
        &["--job", "second"],
    ));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..500);
}

/// A job stopped mid-input (as a killed run stops: what it wrote after its last checkpoint
/// stays hidden) hands the input to the next job at that checkpoint, whatever that job's list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_stopped_mid_input_hands_its_place_to_the_next_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b, c) = (d.join("a.jsonl"), d.join("b.jsonl"), d.join("c.jsonl"));
    fs::write(&a, recs(0..1000)).unwrap();
    fs::write(&b, recs(1000..2000)).unwrap();
    fs::write(&c, recs(2000..2500)).unwrap();
    let lake = d.join("lake");
    let job = |inputs: &[&std::path::PathBuf], name: &str| -> Ingest {
        Ingest::new(inputs.iter().map(|p| Input::file(p).unwrap()))
            .to_local(&lake)
            .partition_by(["day"])
            .checkpoint_every(CheckpointEvery::Rows(100))
            .job(name)
    };
    for (stop, inputs, name) in [
        (250, &[&a, &b][..], "one"),
        (1330, &[&b, &a, &c][..], "two"),
        (10, &[&c][..], "three"),
    ] {
        let s = job(inputs, name)
            .stop_after_records(stop)
            .run()
            .await
            .unwrap();
        assert_eq!(s.status, IngestStatus::Stopped, "{name}");
    }
    // A fourth job with yet another list finishes every input.
    let s = job(&[&a, &c, &b], "four").run().await.unwrap();
    assert_eq!(s.status, IngestStatus::Finished);
    assert_exactly_once(&visible_parquet_ids(&lake), 0..2500);
    // And the stopped ones, rerun, find nothing left to take.
    for (inputs, name) in [(&[&a, &b][..], "one"), (&[&b, &a, &c][..], "two")] {
        job(inputs, name).run().await.unwrap();
    }
    assert_exactly_once(&visible_parquet_ids(&lake), 0..2500);
}

/// Cron runs that overlap, over lists that overlap, each killed at a random moment or not:
/// every run either takes its inputs or is refused (exit 5), and at the end every record is
/// visible once.
#[test]
fn overlapping_and_killed_runs_over_changing_lists_ingest_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let files: Vec<String> = (0..6).map(|i| format!("f{i}.jsonl")).collect();
    for (i, f) in files.iter().enumerate() {
        let base = i as i64 * 20_000;
        fs::write(d.join(f), recs(base..base + 20_000)).unwrap();
    }
    let lists: [&[usize]; 4] = [&[0, 1, 2], &[1, 2, 3, 4], &[0, 3, 5], &[2, 4, 5]];
    let spawn = |list: &[usize]| {
        Command::new(env!("CARGO_BIN_EXE_filesink"))
            .current_dir(d)
            .arg("ingest")
            .args(list.iter().map(|i| &files[*i]))
            .args([
                "--to",
                "lake",
                "--partition-by",
                "day",
                "--checkpoint-every",
                "5000rows",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut seed = 0x9e37_79b9_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..6 {
        let x = lists[round % lists.len()];
        let y = lists[(round + 1) % lists.len()];
        let (mut p, mut q) = (spawn(x), spawn(y));
        let kill_after = Duration::from_millis(next() % 400);
        let started = Instant::now();
        while started.elapsed() < kill_after {
            std::thread::sleep(Duration::from_millis(5));
        }
        if round % 2 == 0 {
            let _ = p.kill();
        }
        for (name, child) in [("first", &mut p), ("second", &mut q)] {
            let o = child.wait_with_output_ref();
            let code = o.0.code();
            assert!(
                matches!(code, None | Some(0) | Some(EXIT_REFUSED)),
                "round {round} {name}: {code:?}\n{}",
                o.1
            );
        }
    }
    // Every input, once more, alone.
    ok(ingest_in(
        d,
        &files.iter().map(String::as_str).collect::<Vec<_>>(),
        "lake",
        &[],
    ));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..120_000);
}

trait WaitRef {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String);
}

impl WaitRef for std::process::Child {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String) {
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            use std::io::Read;
            e.read_to_string(&mut err).unwrap();
        }
        (self.wait().unwrap(), err)
    }
}

/// A holder stopped with records in files it keeps open (row files kept open up to a delay,
/// small Parquet files a pre-commit merge carries) is finished by the job that takes its input
/// over, so those records become visible once and the input is read on after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stopped_with_open_files_is_finished_by_the_next_job() {
    use common::visible_id_counts;
    use filesink::sink::MergePolicy;
    use filesink::FileFormat;
    for (format, kind) in [
        (FileFormat::json_lines(), "row files kept open"),
        (FileFormat::parquet(), "small files carried"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (a, b) = (d.join("a.jsonl"), d.join("b.jsonl"));
        fs::write(&a, recs(0..1000)).unwrap();
        fs::write(&b, recs(1000..1200)).unwrap();
        let lake = d.join("lake");
        let job = |inputs: &[&std::path::PathBuf], name: &str| -> Ingest {
            let ingest = Ingest::new(inputs.iter().map(|p| Input::file(p).unwrap()))
                .to_local(&lake)
                .format(format.clone())
                .partition_by(["day"])
                .checkpoint_every(CheckpointEvery::Rows(100))
                .job(name);
            match format {
                FileFormat::Parquet(_) => {
                    ingest.merge_small_files(MergePolicy::new(16 * 1024 * 1024))
                }
                _ => ingest.max_visibility_delay(Duration::from_secs(3600)),
            }
        };
        let s = job(&[&a], "first")
            .stop_after_records(450)
            .run()
            .await
            .unwrap();
        assert_eq!(s.status, IngestStatus::Stopped, "{kind}");
        assert!(
            visible_id_counts(&lake, &format).len() < 400,
            "{kind}: the first job's records are held back"
        );
        let s = job(&[&a, &b], "second").run().await.unwrap();
        assert_eq!(s.status, IngestStatus::Finished, "{kind}");
        let counts = visible_id_counts(&lake, &format);
        let ids: Vec<i64> = counts
            .iter()
            .flat_map(|(id, n)| std::iter::repeat_n(*id, *n))
            .collect();
        assert_exactly_once(&ids, 0..1200);
    }
}

/// A Delta table job that stopped after a checkpoint whose log entry it never wrote (here:
/// the table's first, so there is no table yet) is restored by the job that takes its input
/// over: the entry is written, the table created, and every record is in it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_holder_whose_log_entry_is_missing_is_restored_by_the_next_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = (d.join("a.jsonl"), d.join("b.jsonl"));
    fs::write(&a, recs(0..1000)).unwrap();
    fs::write(&b, recs(1000..1100)).unwrap();
    let lake = d.join("lake");
    let job = |inputs: &[&std::path::PathBuf], name: &str| -> Ingest {
        Ingest::new(inputs.iter().map(|p| Input::file(p).unwrap()))
            .to_local(&lake)
            .partition_by(["day"])
            .checkpoint_every(CheckpointEvery::Rows(100))
            .delta_table(filesink::table::delta::DeltaOptions::new())
            .job(name)
    };
    // One checkpoint with records, then stopped; its log entry (the table's first) is lost.
    let s = job(&[&a], "first")
        .stop_after_records(150)
        .run()
        .await
        .unwrap();
    assert_eq!(s.status, IngestStatus::Stopped);
    fs::remove_dir_all(lake.join("_delta_log")).unwrap();
    let s = job(&[&a, &b], "second").run().await.unwrap();
    assert_eq!(s.status, IngestStatus::Finished);
    assert!(lake.join("_delta_log/00000000000000000000.json").exists());
    assert_exactly_once(&visible_parquet_ids(&lake), 0..1100);
    let o = run_ok(&["ls", s_(&lake), "--json"]);
    let v = json_of(&o);
    assert!(v["hidden"].as_array().is_none_or(|h| h.is_empty()), "{v}");
}

fn s_(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A lake whose jobs ran before it had a ledger (an older filesink): the first job with a new
/// input list imports what they took from their checkpoints, and reads none of it again.
#[test]
fn a_lake_from_before_the_ledger_is_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a.jsonl"), recs(0..1000)).unwrap();
    fs::write(d.join("b.jsonl"), recs(1000..2000)).unwrap();
    ok(ingest_in(d, &["a.jsonl"], "lake", &[]));
    ok(ingest_in(d, &["b.jsonl"], "lake", &["--job", "bee"]));
    append(&d.join("b.jsonl"), &recs(2000..2100));
    // As an older build left it: no ledger.
    fs::remove_dir_all(d.join("lake/_filesink/inputs")).unwrap();
    fs::remove_file(d.join("lake/_filesink/ledger.json")).unwrap();
    fs::write(d.join("c.jsonl"), recs(2100..2200)).unwrap();
    let o = ok(ingest_in(
        d,
        &["a.jsonl", "b.jsonl", "c.jsonl"],
        "lake",
        &["--json"],
    ));
    assert_eq!(json_of(&o)["records"], 200, "{}", stdout(&o));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..2200);
}

/// A CSV file handed on past its header is read on only by a job whose columns its header
/// names, in its order: another job's values would land in other columns.
#[test]
fn a_csv_input_handed_on_past_its_header_is_checked_against_the_new_job() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = |ids: std::ops::Range<i64>| -> String {
        ids.map(|i| format!("{i},2026-12-0{},n{i}\n", 1 + i % 3))
            .collect()
    };
    fs::write(d.join("x.csv"), format!("id,day,note\n{}", csv(0..100))).unwrap();
    ok(ingest_in(d, &["x.csv"], "lake", &[]));
    append(&d.join("x.csv"), &csv(100..150));
    // Another job whose columns come from a file with another order.
    let y: String = (200..210)
        .map(|i| format!("2026-12-0{},{i},n{i}\n", 1 + i % 3))
        .collect();
    fs::write(d.join("y.csv"), format!("day,id,note\n{y}")).unwrap();
    let before = visible_parquet_ids(&d.join("lake"));
    let o = ingest_in(d, &["y.csv", "x.csv"], "lake", &[]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("header of"), "{}", stderr(&o));
    assert_eq!(visible_parquet_ids(&d.join("lake")), before);
    // A job with the same columns reads on.
    ok(ingest_in(d, &["x.csv"], "lake", &["--job", "again"]));
    assert_exactly_once(&visible_parquet_ids(&d.join("lake")), 0..150);
}
