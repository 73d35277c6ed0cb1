//! A log directory as a cron job sees it, through the real binary: globs that filesink expands
//! itself, files whose last line is still being written, and inputs that are complete. Each
//! test walks a class of inputs, not one example.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::Value;

mod common;

use common::cli::*;
use common::delta_py::reader_or_explain;
use common::{tree, visible_files, visible_parquet_ids};

/// `filesink ingest <inputs> --to <lake> --format jsonl <extra>`, run in `dir`.
fn ingest_in(dir: &Path, inputs: &[&str], lake: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .current_dir(dir)
        .arg("ingest")
        .args(inputs)
        .args(["--to", lake, "--format", "jsonl"])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[track_caller]
fn ok(o: Output) -> Output {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&o),
        stderr(&o)
    );
    o
}

fn append(path: &Path, bytes: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// Every visible record of a JSON-lines lake, as JSON values, sorted by their text.
fn records(lake: &Path) -> Vec<Value> {
    let mut out: Vec<Value> = common::visible_files(lake)
        .iter()
        .flat_map(|f| {
            fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort_by_key(|v| v.to_string());
    out
}

fn values(texts: &[&str]) -> Vec<Value> {
    let mut out: Vec<Value> = texts
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    out.sort_by_key(|v| v.to_string());
    out
}

/// One case of a file caught while its writer is inside a line: what it holds when the first
/// run reads it, what its writer adds, and the records each run leaves visible.
struct Unended {
    name: &'static str,
    first: &'static [u8],
    then: &'static [u8],
    after_first: &'static [&'static str],
    after_both: &'static [&'static str],
}

const UNENDED: &[Unended] = &[
    Unended {
        name: "cut.csv",
        first: b"id,name,v\n1,a,1\n2,bb,2",
        then: b"5\n3,c,3\n",
        after_first: &[r#"{"id":1,"name":"a","v":1}"#],
        after_both: &[
            r#"{"id":1,"name":"a","v":1}"#,
            r#"{"id":2,"name":"bb","v":25}"#,
            r#"{"id":3,"name":"c","v":3}"#,
        ],
    },
    Unended {
        name: "cut.jsonl",
        first: b"{\"id\":1,\"s\":\"x\"}\n{\"id\":2,\"s\":\"ab",
        then: b"c\"}\n{\"id\":3,\"s\":\"z\"}\n",
        after_first: &[r#"{"id":1,"s":"x"}"#],
        after_both: &[
            r#"{"id":1,"s":"x"}"#,
            r#"{"id":2,"s":"abc"}"#,
            r#"{"id":3,"s":"z"}"#,
        ],
    },
    Unended {
        // A number cut where it still parses: the cut value would be wrong, not refused.
        name: "number.jsonl",
        first: b"{\"id\":1,\"n\":7}\n{\"id\":2,\"n\":12",
        then: b"34}\n",
        after_first: &[r#"{"id":1,"n":7}"#],
        after_both: &[r#"{"id":1,"n":7}"#, r#"{"id":2,"n":1234}"#],
    },
    Unended {
        name: "spaces.jsonl",
        first: b"{\"id\":1}\n   ",
        then: b"{\"id\":2}\n",
        after_first: &[r#"{"id":1}"#],
        after_both: &[r#"{"id":1}"#, r#"{"id":2}"#],
    },
    Unended {
        name: "crlf.jsonl",
        first: b"{\"id\":1}\r\n{\"id\":2}\r",
        then: b"\n{\"id\":3}\r\n",
        after_first: &[r#"{"id":1}"#],
        after_both: &[r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":3}"#],
    },
    Unended {
        // Cut just after a line end inside a quoted field: the record is still open.
        name: "quoted.csv",
        first: b"id,name\n1,a\n2,\"two\n",
        then: b"lines\"\n3,c\n",
        after_first: &[r#"{"id":1,"name":"a"}"#],
        after_both: &[
            r#"{"id":1,"name":"a"}"#,
            r#"{"id":2,"name":"two\nlines"}"#,
            r#"{"id":3,"name":"c"}"#,
        ],
    },
    Unended {
        // Nothing but a header so far, itself unended.
        name: "header.csv",
        first: b"id,na",
        then: b"me\n1,a\n",
        after_first: &[],
        after_both: &[r#"{"id":1,"name":"a"}"#],
    },
];

/// A file whose last line has no line end yet is read up to that line: the line waits for the
/// run that finds it whole, and is never committed shorter than it is. The same command then
/// reads on, every record once, with its whole value. Every schedule (records, or time, where
/// plain JSON-lines files are read in ranges by the decoding threads) and both formats.
#[test]
fn a_record_is_taken_only_with_its_line_end() {
    for schedule in ["2rows", "50ms"] {
        for case in UNENDED {
            let dir = tempfile::tempdir().unwrap();
            let input = dir.path().join(case.name);
            fs::write(&input, case.first).unwrap();
            let lake = dir.path().join("lake");
            let args = ["--checkpoint-every", schedule];
            let o = ok(ingest_in(dir.path(), &[case.name], "lake", &args));
            assert_eq!(
                records(&lake),
                values(case.after_first),
                "{} ({schedule}), first run:\n{}",
                case.name,
                stderr(&o)
            );
            let text = stdout(&o);
            assert!(
                text.contains("no line end yet"),
                "{} ({schedule}): the summary names the line left:\n{text}",
                case.name
            );
            append(&input, case.then);
            ok(ingest_in(dir.path(), &[case.name], "lake", &args));
            assert_eq!(
                records(&lake),
                values(case.after_both),
                "{} ({schedule}), after the writer finished the line",
                case.name
            );
            // And the run after that has nothing to do.
            let o = ok(ingest_in(dir.path(), &[case.name], "lake", &args));
            assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
        }
    }
}

/// An input known to be complete gives its last record without a line end: a file unchanged
/// for the settle time (`--settle`, one hour by default), any file with `--settle 0s`, a
/// compressed file (its stream ends), standard input at its end.
#[test]
fn a_complete_input_gives_its_last_record_without_a_line_end() {
    let want = values(&[r#"{"id":1}"#, r#"{"id":2}"#]);
    let body = b"{\"id\":1}\n{\"id\":2}";

    // Unchanged for longer than the default settle time.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.jsonl");
    fs::write(&old, body).unwrap();
    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    ok(ingest_in(dir.path(), &["old.jsonl"], "lake", &[]));
    assert_eq!(records(&dir.path().join("lake")), want, "settled file");

    // Changed a minute ago, but settled for `--settle 30s`; and not for `--settle 2m`.
    let dir = tempfile::tempdir().unwrap();
    let recent = dir.path().join("recent.jsonl");
    fs::write(&recent, body).unwrap();
    fs::File::options()
        .write(true)
        .open(&recent)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    ok(ingest_in(
        dir.path(),
        &["recent.jsonl"],
        "lake-2m",
        &["--settle", "2m"],
    ));
    assert_eq!(
        records(&dir.path().join("lake-2m")),
        values(&[r#"{"id":1}"#])
    );
    ok(ingest_in(
        dir.path(),
        &["recent.jsonl"],
        "lake-30s",
        &["--settle", "30s"],
    ));
    assert_eq!(records(&dir.path().join("lake-30s")), want);

    // Just written, with `--settle 0s`.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("now.jsonl"), body).unwrap();
    ok(ingest_in(
        dir.path(),
        &["now.jsonl"],
        "lake",
        &["--settle", "0s"],
    ));
    assert_eq!(records(&dir.path().join("lake")), want, "--settle 0s");

    // Compressed: the end of the stream ends the record.
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(body).unwrap();
    fs::write(dir.path().join("z.jsonl.gz"), gz.finish().unwrap()).unwrap();
    ok(ingest_in(dir.path(), &["z.jsonl.gz"], "lake", &[]));
    assert_eq!(records(&dir.path().join("lake")), want, "gzip");

    // Standard input at its end.
    let dir = tempfile::tempdir().unwrap();
    let piped = dir.path().join("piped");
    fs::write(&piped, body).unwrap();
    let lake = dir.path().join("lake");
    let o = filesink_with_stdin(
        &[
            "ingest",
            "-",
            "--to",
            s(&lake),
            "--format",
            "jsonl",
            "--job",
            "piped",
        ],
        &piped,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(records(&lake), want, "stdin");
}

/// A quoted glob is expanded by filesink, with the rules of object globs, relative to the
/// working directory or absolute: `*`, `?`, `[..]` within a component, `**` across them,
/// hidden names (`.x`, `_x`) only where named, directories and names that do not match left
/// out, a link to a file taken as the file.
#[test]
fn globs_are_expanded_by_filesink_as_object_globs_are() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir_all(logs.join("2026/12")).unwrap();
    fs::create_dir_all(logs.join("dir.jsonl")).unwrap();
    fs::create_dir_all(logs.join("_staging")).unwrap();
    let file = |rel: &str, id: i64| {
        fs::write(logs.join(rel), format!("{{\"id\":{id}}}\n")).unwrap();
    };
    file("app-1.jsonl", 1);
    file("app-2.jsonl", 2);
    file("app-10.jsonl", 10);
    file("other.csv", 99);
    file(".hidden.jsonl", 98);
    file("_tmp.jsonl", 97);
    file("2026/12/deep.jsonl", 3);
    file("_staging/staged.jsonl", 96);
    fs::write(dir.path().join("elsewhere.jsonl"), "{\"id\":4}\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere.jsonl"), logs.join("link.jsonl"))
        .unwrap();
    let abs = format!("{}/*.jsonl", logs.display());
    let cases: &[(&str, &[i64])] = &[
        ("logs/*.jsonl", &[1, 2, 4, 10]),
        ("./logs/*.jsonl", &[1, 2, 4, 10]),
        (abs.as_str(), &[1, 2, 4, 10]),
        ("logs/app-?.jsonl", &[1, 2]),
        ("logs/app-[2-9].jsonl", &[2]),
        ("logs/app-[!1]*.jsonl", &[2]),
        ("logs/**/*.jsonl", &[1, 2, 3, 4, 10]),
        ("logs/_staging/*.jsonl", &[96]),
        ("logs/.hidden.jsonl", &[98]),
    ];
    for (k, (pattern, want)) in cases.iter().enumerate() {
        let lake = format!("lake-{k}");
        let o = ok(ingest_in(dir.path(), &[pattern], &lake, &["--json"]));
        let mut ids: Vec<i64> = records(&dir.path().join(&lake))
            .iter()
            .map(|v| v["id"].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, *want, "{pattern}: {}", stderr(&o));
    }
}

/// The matches of a glob are read in byte order of their names, as `ls` sorts them in the C
/// locale: the order the job's checkpoint lists them in.
#[test]
fn a_glob_is_read_in_byte_order_of_its_names() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("logs")).unwrap();
    for name in ["b.jsonl", "a.jsonl", "a.jsonl.10", "a.jsonl.2", "B.jsonl"] {
        fs::write(dir.path().join("logs").join(name), "{\"id\":1}\n").unwrap();
    }
    ok(ingest_in(dir.path(), &["logs/*"], "lake", &["--job", "j"]));
    let o = run_ok(&[
        "inspect",
        s(&dir.path().join("lake")),
        "--job",
        "j",
        "--json",
    ]);
    let v = json_of(&o);
    let inputs: Vec<String> = v["manifest"]["source_position"]["inputs"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|i| {
            let i = i.as_str().unwrap();
            i.rsplit('/').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        inputs,
        ["B.jsonl", "a.jsonl", "a.jsonl.10", "a.jsonl.2", "b.jsonl"]
    );
}

/// A glob that matches nothing is an empty set of inputs, not an error: a cron run before the
/// first file exits 0 and creates nothing, in text and JSON. A glob beside it that matches
/// goes on alone; a name without glob characters that does not exist is still an error.
#[test]
fn a_glob_that_matches_nothing_is_an_empty_input_set() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("logs")).unwrap();
    let o = ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));
    assert!(
        stdout(&o).contains("no input matches `logs/*.jsonl`; nothing to do"),
        "{}",
        stdout(&o)
    );
    let o = ok(ingest_in(
        dir.path(),
        &["none/**/*.jsonl"],
        "lake",
        &["--json"],
    ));
    let v = json_of(&o);
    assert_eq!(
        (v["status"].as_str(), v["records"].as_i64()),
        (Some("no_input"), Some(0))
    );
    assert!(!dir.path().join("lake").exists(), "nothing is created");

    fs::write(dir.path().join("logs/a.jsonl"), "{\"id\":1}\n").unwrap();
    let o = ok(ingest_in(
        dir.path(),
        &["logs/*.csv", "logs/*.jsonl"],
        "lake",
        &[],
    ));
    assert!(
        stderr(&o).contains("`logs/*.csv` matches no input"),
        "{}",
        stderr(&o)
    );
    assert_eq!(records(&dir.path().join("lake")).len(), 1);

    let o = ingest_in(dir.path(), &["logs/missing.jsonl"], "lake2", &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!dir.path().join("lake2").exists());

    // A file whose name holds glob characters is itself, where it exists.
    fs::write(dir.path().join("logs/[x].jsonl"), "{\"id\":5}\n").unwrap();
    ok(ingest_in(dir.path(), &["logs/[x].jsonl"], "lake3", &[]));
    assert_eq!(records(&dir.path().join("lake3")), values(&[r#"{"id":5}"#]));
}

/// The cron command of the README, quoted as it is written there, over a directory that
/// grows between runs: every record once, and a run that finds nothing new does nothing.
#[test]
fn the_cron_command_takes_each_file_of_a_growing_directory_once() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("logs")).unwrap();
    let mut next = 0;
    for round in 0..4 {
        for _ in 0..3 {
            let path = dir.path().join(format!("logs/{next:04}.jsonl"));
            fs::write(&path, format!("{{\"id\":{next}}}\n")).unwrap();
            next += 1;
        }
        // A file that grew since the last run, too.
        if round > 0 {
            append(
                &dir.path().join("logs/0000.jsonl"),
                format!("{{\"id\":{}}}\n", 1000 + round).as_bytes(),
            );
        }
        ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));
    }
    let o = ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    let mut ids: Vec<i64> = records(&dir.path().join("lake"))
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    let mut want: Vec<i64> = (0..12).chain(1001..1004).collect();
    want.sort_unstable();
    assert_eq!(ids, want);
}

fn lines(ids: std::ops::Range<i64>) -> String {
    ids.map(|i| format!("{{\"id\":{i}}}\n")).collect()
}

/// The ids of a JSON-lines lake, sorted, each as often as it is visible.
fn ids(lake: &Path) -> Vec<i64> {
    let mut ids: Vec<i64> = records(lake)
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// The identity rule: a file is the same input under every name (renamed, rotated with any
/// suffix, hard-linked), read on from where the lake stopped in it, whichever run over
/// whichever glob names it; a copy is another file, taken whole. Through the cron command
/// over a log directory as logrotate leaves it.
#[test]
fn a_file_under_another_name_is_the_same_input() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let lake = dir.path().join("lake");
    let cron = || ok(ingest_in(dir.path(), &["logs/*"], "lake", &[]));
    fs::write(logs.join("app.jsonl"), lines(0..100)).unwrap();
    cron();
    assert_eq!(ids(&lake), (0..100).collect::<Vec<_>>());

    // A hard link beside it, and the file grown through it.
    fs::hard_link(logs.join("app.jsonl"), logs.join("app-link.jsonl")).unwrap();
    append(&logs.join("app-link.jsonl"), lines(100..110).as_bytes());
    cron();
    assert_eq!(ids(&lake), (0..110).collect::<Vec<_>>(), "hard link");
    fs::remove_file(logs.join("app-link.jsonl")).unwrap();

    // logrotate: renamed to `.1`, still written by its writer, a new file under the old name.
    fs::rename(logs.join("app.jsonl"), logs.join("app.jsonl.1")).unwrap();
    append(&logs.join("app.jsonl.1"), lines(110..115).as_bytes());
    fs::write(logs.join("app.jsonl"), lines(200..220)).unwrap();
    cron();
    let want: Vec<i64> = (0..115).chain(200..220).collect();
    assert_eq!(ids(&lake), want, "rotated to .1");

    // Rotated on, to a dated name and to `.2`: nothing new, nothing written.
    fs::rename(logs.join("app.jsonl.1"), logs.join("app.jsonl-20261205")).unwrap();
    fs::rename(logs.join("app.jsonl"), logs.join("app.jsonl.2")).unwrap();
    let before = tree(&lake);
    let o = cron();
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(tree(&lake), before, "a run with nothing new writes nothing");
    assert_eq!(ids(&lake), want, "rotated on");

    // A copy is another file: taken whole (see the guide's identity rule).
    fs::copy(logs.join("app.jsonl.2"), logs.join("copy.jsonl")).unwrap();
    cron();
    let mut with_copy: Vec<i64> = want.iter().copied().chain(200..220).collect();
    with_copy.sort_unstable();
    assert_eq!(ids(&lake), with_copy, "a copy");
}

/// An input changed within what the lake took of it (rewritten in place, cut short) is
/// refused, named in the summary and in `--json`, with exit 8, while the run takes the other
/// inputs of its glob; the refused one stays refused, the others go on being taken.
#[test]
fn a_refused_input_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let lake = dir.path().join("lake");
    fs::write(logs.join("a.jsonl"), lines(0..10)).unwrap();
    fs::write(logs.join("b.jsonl"), lines(10..20)).unwrap();
    ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));

    // Rewritten in place (same inode, other bytes), and cut short.
    let rewrite = |name: &str, text: String| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(logs.join(name))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    rewrite("a.jsonl", lines(50..60));
    rewrite("b.jsonl", lines(10..15));
    fs::write(logs.join("c.jsonl"), lines(20..30)).unwrap();
    for round in 0..2 {
        let o = ingest_in(dir.path(), &["logs/*.jsonl", "--json"], "lake", &[]);
        assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
        let v: Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
        let refused = v["refused"].as_array().unwrap();
        assert_eq!(refused.len(), 2, "round {round}: {v}");
        assert!(refused[0].as_str().unwrap().contains("a.jsonl"), "{v}");
        assert!(refused[1].as_str().unwrap().contains("b.jsonl"), "{v}");
        assert!(
            stderr(&o).contains("the other inputs were taken"),
            "{}",
            stderr(&o)
        );
        append(
            &logs.join("c.jsonl"),
            lines(30 + round..31 + round).as_bytes(),
        );
    }
    assert_eq!(ids(&lake), (0..31).collect::<Vec<_>>());
}

/// Every refusal decides before it writes: the lake is byte for byte as it was (every path,
/// size and time of last change), whether the run is refused for an input another live run
/// holds (exit 5), an input changed under a named job (exit 7) or under a job named after its
/// inputs with nothing else to read (exit 7), or options its job was not started with (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_run_leaves_the_lake_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a.jsonl"), lines(0..10)).unwrap();
    fs::write(d.join("b.jsonl"), lines(10..20)).unwrap();
    ok(ingest_in(d, &["a.jsonl"], "lake", &["--job", "first"]));
    ok(ingest_in(d, &["b.jsonl"], "lake", &[]));
    let lake = d.join("lake");

    // A live run of job `first` that took `a.jsonl` again (it grew).
    append(&d.join("a.jsonl"), lines(100..101).as_bytes());
    let lease = common::live_run_holding(&lake, "first", &d.join("a.jsonl")).await;
    let before = tree(&lake);
    for extra in [&[][..], &["--job", "second"][..]] {
        let o = ingest_in(d, &["a.jsonl", "b.jsonl"], "lake", extra);
        assert_eq!(o.status.code(), Some(5), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("job `first`"), "{}", stderr(&o));
        assert_eq!(tree(&lake), before, "exit 5 {extra:?}");
    }
    lease.release().await.unwrap();

    // `b.jsonl` changed in place under the lake.
    fs::write(d.join("b.jsonl"), lines(50..60)).unwrap();
    let before = tree(&lake);
    for extra in [&[][..], &["--job", "third"][..]] {
        let o = ingest_in(d, &["b.jsonl"], "lake", extra);
        assert_eq!(o.status.code(), Some(7), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("b.jsonl"), "{}", stderr(&o));
        assert_eq!(tree(&lake), before, "exit 7 {extra:?}");
    }

    // Job `first` rerun with another output format, or another partitioning.
    for extra in [
        &["--job", "first", "--format", "parquet"][..],
        &[
            "--job",
            "first",
            "--format",
            "jsonl",
            "--partition-by",
            "id",
        ][..],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .current_dir(d)
            .args(["ingest", "a.jsonl", "--to", "lake"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--job NAME"), "{}", stderr(&o));
        assert_eq!(tree(&lake), before, "exit 1 {extra:?}");
    }
}

/// The number of ledger entries of a lake.
fn ledger_entries(lake: &Path) -> usize {
    let inputs = lake.join("_filesink/inputs");
    fs::read_dir(&inputs)
        .unwrap()
        .map(|key| fs::read_dir(key.unwrap().path()).unwrap().count())
        .sum()
}

/// The ledger stays small over a cron job's months: a run writes entries for what it takes
/// only; the index of files read to their end passes the taken files over without reading
/// their entries, and losing it (deleted, or a segment torn) costs lookups, never a record;
/// `vacuum` leaves one entry per input, and the cron job goes on from there exactly once.
#[test]
fn the_ledger_keeps_one_entry_per_input() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let lake = dir.path().join("lake");
    let cron = || ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));
    for i in 0..20 {
        fs::write(
            logs.join(format!("{i:02}.jsonl")),
            lines(i * 10..i * 10 + 10),
        )
        .unwrap();
    }
    fs::write(logs.join("app.jsonl"), "").unwrap();
    let mut want: Vec<i64> = (0..200).collect();
    for round in 0..5 {
        let new = 1000 + round * 10..1010 + round * 10;
        append(&logs.join("app.jsonl"), lines(new.clone()).as_bytes());
        want.extend(new);
        cron();
    }
    want.sort_unstable();
    assert_eq!(ids(&lake), want);
    let index = lake.join("_filesink/finished");
    assert!(
        fs::read_dir(&index).unwrap().count() >= 1,
        "the index is written"
    );

    // Nothing new: nothing written, with the index, without it, and with a torn segment.
    let rerun_writes_nothing = |why: &str| {
        let before = tree(&lake);
        let o = cron();
        assert!(
            stdout(&o).contains("nothing to do"),
            "{why}: {}",
            stdout(&o)
        );
        assert_eq!(tree(&lake), before, "{why}");
    };
    rerun_writes_nothing("with the index");
    let first = fs::read_dir(&index)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = fs::read(&first).unwrap();
    fs::write(&first, &bytes[..bytes.len() / 2]).unwrap();
    rerun_writes_nothing("a torn segment");
    fs::remove_dir_all(&index).unwrap();
    rerun_writes_nothing("without the index");

    // vacuum: the heads stay, one per input.
    let entries = ledger_entries(&lake);
    assert!(entries > 21, "{entries} entries");
    let o = run_ok(&["vacuum", lake.to_str().unwrap(), "--retain", "0s", "--json"]);
    let report = json_of(&o);
    assert_eq!(report["ledger"]["inputs"], 21, "{report}");
    assert_eq!(
        report["ledger"]["entries_deleted"],
        entries - 21,
        "{report}"
    );
    assert_eq!(ledger_entries(&lake), 21);
    rerun_writes_nothing("after vacuum");

    // The job goes on exactly once: the grown file, a new one.
    append(&logs.join("app.jsonl"), lines(2000..2010).as_bytes());
    fs::write(logs.join("new.jsonl"), lines(3000..3010)).unwrap();
    cron();
    want.extend((2000..2010).chain(3000..3010));
    want.sort_unstable();
    assert_eq!(ids(&lake), want);
    rerun_writes_nothing("at the end");
}

/// Each job's highest checkpoint (by its manifests' names) under `jobs`, a lake's
/// `_filesink/jobs` or a copy of it.
fn job_checkpoints(jobs: &Path) -> std::collections::BTreeMap<String, u64> {
    let Ok(dirs) = fs::read_dir(jobs) else {
        return Default::default();
    };
    dirs.map(|d| d.unwrap().path())
        .filter_map(|d| {
            let last = fs::read_dir(d.join("checkpoints"))
                .ok()?
                .filter_map(|m| {
                    let name = m.unwrap().file_name().into_string().unwrap();
                    name.strip_suffix(".json")?.parse::<u64>().ok()
                })
                .max()?;
            Some((d.file_name()?.to_str()?.to_owned(), last))
        })
        .collect()
}

/// The job under `jobs` whose latest manifest names input `file` (a file name), with its last
/// checkpoint.
fn job_of(jobs: &Path, file: &str) -> (String, u64) {
    for (job, last) in job_checkpoints(jobs) {
        let m: Value = serde_json::from_slice(
            &fs::read(jobs.join(&job).join(format!("checkpoints/{last:020}.json"))).unwrap(),
        )
        .unwrap();
        let inputs = m["body"]["source_position"]["inputs"].as_array().unwrap();
        if inputs
            .iter()
            .any(|i| i.as_str().unwrap().ends_with(&format!("/{file}")))
        {
            return (job, last);
        }
    }
    panic!("no job read `{file}`");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A cron job's finished jobs do not pile up: `vacuum` retires each one that finished before
/// the retention and holds no input any more (its directory goes, its name and last checkpoint
/// stay in a few bytes), its files stay the lake's own, and a later run under its name (a file
/// of it grew) numbers its checkpoints after the last one, exactly once. A retirement cut short
/// at each step (the record written, then the older manifests, then the latest one gone) is
/// finished by the next vacuum, and the job goes on exactly once from each.
#[test]
fn finished_jobs_are_retired_and_go_on_after_their_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let lake = dir.path().join("lake");
    let jobs = lake.join("_filesink/jobs");
    let cron = || ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));
    let vacuum = |extra: &[&str]| {
        let mut args = vec!["vacuum", lake.to_str().unwrap(), "--json"];
        args.extend(extra);
        json_of(&run_ok(&args))["ledger"].clone()
    };
    let mut want = Vec::new();
    for r in 0..4 {
        fs::write(logs.join(format!("{r}.jsonl")), lines(r * 10..r * 10 + 10)).unwrap();
        want.extend(r * 10..r * 10 + 10);
        cron();
    }
    let before = job_checkpoints(&jobs);
    assert_eq!(before.len(), 4, "a job per run: {before:?}");
    let files = visible_files(&lake).len();

    // Within the retention, and on a dry run, nothing goes.
    let kept = vacuum(&["--retain", "1h"]);
    assert_eq!(kept["jobs_retired"], 0, "{kept}");
    assert_eq!(kept["finished_jobs_kept_for_retention"], 4, "{kept}");
    let listing = tree(&lake);
    assert_eq!(vacuum(&["--retain", "0s", "--dry-run"])["jobs_retired"], 4);
    assert_eq!(tree(&lake), listing, "a dry run changes nothing");

    let saved = dir.path().join("jobs-before");
    copy_dir(&jobs, &saved);
    let done = vacuum(&["--retain", "0s"]);
    assert_eq!(done["jobs_retired"], 4, "{done}");
    assert_eq!(
        fs::read_dir(&jobs).unwrap().count(),
        0,
        "no job directory is left"
    );
    let ls = json_of(&run_ok(&["ls", lake.to_str().unwrap(), "--json"]));
    assert_eq!(
        ls["other_files"]["files"], 0,
        "their files stay the lake's own: {ls}"
    );
    assert_eq!(ls["committed"]["files"], files, "{ls}");
    let unchanged = tree(&lake);
    assert!(stdout(&cron()).contains("nothing to do"));
    assert_eq!(tree(&lake), unchanged, "nothing new: nothing written");

    // A file of a retired job grows: a job of that name again, numbered after its last
    // checkpoint.
    let (job0, last0) = job_of(&saved, "0.jsonl");
    append(&logs.join("0.jsonl"), lines(100..105).as_bytes());
    want.extend(100..105);
    cron();
    let after = job_checkpoints(&jobs);
    assert!(after[&job0] > last0, "{after:?} after {last0}");
    let first_again = fs::read_dir(jobs.join(&job0).join("checkpoints"))
        .unwrap()
        .filter_map(|m| {
            let name = m.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse::<u64>().ok()
        })
        .min()
        .unwrap();
    assert!(first_again > last0, "{first_again} after {last0}");

    // Cut short: the record written, the directory whole (a normal restore).
    let (job1, _) = job_of(&saved, "1.jsonl");
    copy_dir(&saved.join(&job1), &jobs.join(&job1));
    append(&logs.join("1.jsonl"), lines(110..115).as_bytes());
    want.extend(110..115);
    cron();
    // Cut short: the older manifests gone, the latest there.
    let (job2, last2) = job_of(&saved, "2.jsonl");
    let latest2 = format!("checkpoints/{last2:020}.json");
    fs::create_dir_all(jobs.join(&job2).join("checkpoints")).unwrap();
    fs::copy(
        saved.join(&job2).join(&latest2),
        jobs.join(&job2).join(&latest2),
    )
    .unwrap();
    append(&logs.join("2.jsonl"), lines(120..125).as_bytes());
    want.extend(120..125);
    cron();
    // Cut short: every manifest gone, the lock file left.
    let (job3, last3) = job_of(&saved, "3.jsonl");
    fs::create_dir_all(jobs.join(&job3).join("checkpoints")).unwrap();
    fs::write(jobs.join(&job3).join("owner.lock"), "").unwrap();
    append(&logs.join("3.jsonl"), lines(130..135).as_bytes());
    want.extend(130..135);
    cron();
    assert!(job_checkpoints(&jobs)[&job3] > last3);

    want.sort_unstable();
    assert_eq!(ids(&lake), want, "exactly once");
    let again = vacuum(&["--retain", "0s"]);
    assert_eq!(again["jobs_retired"], 4, "{again}");
    assert_eq!(fs::read_dir(&jobs).unwrap().count(), 0);
    let segments = fs::read_dir(lake.join("_filesink/retired"))
        .unwrap()
        .count();
    assert!((1..=9).contains(&segments), "{segments} segments");
    let unchanged = tree(&lake);
    assert!(stdout(&cron()).contains("nothing to do"));
    assert_eq!(tree(&lake), unchanged);
    assert_eq!(ids(&lake), want);
}

/// A retired Delta table job goes on under its name: the table's `txn` for it holds its last
/// checkpoint, and the next run's checkpoints follow it, exactly once (without the record the
/// run would be refused: a table job's checkpoints must continue).
#[test]
fn a_retired_table_job_goes_on_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let lake = dir.path().join("lake");
    let cron = || {
        ok(Command::new(env!("CARGO_BIN_EXE_filesink"))
            .current_dir(dir.path())
            .args(["ingest", "logs/*.jsonl", "--to", "lake", "--table", "delta"])
            .stdin(Stdio::null())
            .output()
            .unwrap())
    };
    let mut want = Vec::new();
    for r in 0..3 {
        fs::write(logs.join(format!("{r}.jsonl")), lines(r * 10..r * 10 + 10)).unwrap();
        want.extend(r * 10..r * 10 + 10);
        cron();
    }
    let jobs = lake.join("_filesink/jobs");
    let (job0, last0) = job_of(&jobs, "0.jsonl");
    let o = run_ok(&[
        "vacuum",
        lake.to_str().unwrap(),
        "--retain",
        "0s",
        "--allow-short-retention",
        "--json",
    ]);
    assert_eq!(json_of(&o)["ledger"]["jobs_retired"], 3, "{}", stdout(&o));
    assert_eq!(
        fs::read_dir(lake.join("_filesink/jobs")).unwrap().count(),
        0
    );
    for r in 0..3 {
        append(
            &logs.join(format!("{r}.jsonl")),
            lines(100 + r * 10..105 + r * 10).as_bytes(),
        );
        want.extend(100 + r * 10..105 + r * 10);
    }
    // One job over the three grown files (a new name), then one of them grown alone (a
    // retired name).
    cron();
    append(&logs.join("0.jsonl"), lines(200..203).as_bytes());
    want.extend(200..203);
    cron();
    assert!(
        job_checkpoints(&jobs)[&job0] > last0,
        "the retired name goes on"
    );
    want.sort_unstable();
    let mut got = visible_parquet_ids(&lake);
    got.sort_unstable();
    assert_eq!(got, want, "exactly once");
    if let Some(reader) = reader_or_explain() {
        assert_eq!(
            reader.ids(&(lake.display().to_string(), Vec::new()), None),
            want
        );
    }
}

/// `vacuum` beside cron runs, as an operator's two crontabs overlap: whichever retires or
/// runs first, each record is taken once. A run that meets the vacuum on a job it retires is
/// refused with exit 5 and writes nothing; run again, it goes on.
#[test]
fn a_vacuum_beside_cron_runs_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let lake = dir.path().join("lake");
    fs::write(logs.join("0.jsonl"), lines(0..5)).unwrap();
    ok(ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]));
    let mut want: Vec<i64> = (0..5).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let vacuums = {
        let (lake, stop) = (lake.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut retired = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let o = run_ok(&["vacuum", lake.to_str().unwrap(), "--retain", "0s", "--json"]);
                retired += json_of(&o)["ledger"]["jobs_retired"].as_u64().unwrap();
            }
            retired
        })
    };
    let cron = || loop {
        let o = ingest_in(dir.path(), &["logs/*.jsonl"], "lake", &[]);
        match o.status.code() {
            Some(0) => return,
            Some(5) => continue,
            _ => panic!("stdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o)),
        }
    };
    for r in 1..12i64 {
        fs::write(logs.join(format!("{r}.jsonl")), lines(r * 10..r * 10 + 5)).unwrap();
        want.extend(r * 10..r * 10 + 5);
        // An older file grows too: the job named after it alone comes back.
        let old = r / 2;
        let from = 1000 + r * 10;
        append(
            &logs.join(format!("{old}.jsonl")),
            lines(from..from + 3).as_bytes(),
        );
        want.extend(from..from + 3);
        cron();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(vacuums.join().unwrap() > 0, "jobs were retired meanwhile");
    cron();
    want.sort_unstable();
    assert_eq!(ids(&lake), want, "exactly once");
}
