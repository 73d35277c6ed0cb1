//! `filesink ingest` and its inputs across runs, through the real binary: inputs replaced,
//! edited, truncated or grown between runs, one file given twice under two names, the
//! `--bad-records` file shared by several jobs, and records trickling in on standard input.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::cli::*;

const EXIT_ERROR: i32 = 1;
const EXIT_USAGE: i32 = 2;
const EXIT_INPUT_CHANGED: i32 = 7;

/// One JSON record; its length depends only on the number of digits of `id`.
fn rec(id: i64) -> String {
    format!(
        "{{\"id\":{id},\"day\":\"2026-11-{:02}\",\"note\":\"n{}\"}}\n",
        25 + id % 5,
        id % 10
    )
}

fn recs(ids: impl IntoIterator<Item = i64>) -> String {
    ids.into_iter().map(rec).collect()
}

/// A line that is not JSON: it stops a run without `--bad-records`.
const BAD: &str = "{\"id\": oops}\n";

fn append(path: &Path, text: &str) {
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// `text` gzip-compressed.
fn gzip(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

/// Replaces `path` by a new file (a new inode) holding `text`, as `cp other path` or an editor
/// saving would.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

use common::visible_parquet_ids as ids;

/// Every visible file under `lake` with its content.
fn visible(lake: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::visible_files(lake)
        .into_iter()
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn ingest_args<'a>(inputs: &[&'a str], lake: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["ingest"];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&["--to", lake]);
    args.extend_from_slice(extra);
    args
}

#[track_caller]
fn assert_code(o: &Output, code: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}\n--- stdout\n{}\n--- stderr\n{}",
        stdout(o),
        stderr(o)
    );
}

/// Ids 1000..2200, a bad line, then 2201..2300: a run with a checkpoint every 100 rows stops
/// at the bad line (after the 1,000 lines schema inference reads) with ids 1000..2200
/// visible and a resumable checkpoint at byte `1200 * len(rec)`.
fn stopping_input() -> String {
    format!("{}{BAD}{}", recs(1000..2200), recs(2201..2300))
}

fn fixed_input() -> String {
    recs(1000..2300)
}

#[test]
fn a_replaced_input_is_refused_on_resume() {
    let one_line = rec(1000).len();
    let edited_in_the_middle = {
        let mut text = fixed_input();
        let at = 250 * one_line + one_line - 4; // the digit of line 251's `note`
        assert_eq!(&text[at..at + 1], "0");
        text.replace_range(at..at + 1, "9");
        text
    };
    let cases: Vec<(&str, String, bool)> = vec![
        ("same length, other records", recs(3000..4300), false),
        ("longer, other records", recs(3000..4900), false),
        ("shorter: cut inside what was read", recs(1000..1200), false),
        ("edited inside what was read", edited_in_the_middle, false),
        (
            "other records up to the cut, the same after it",
            format!("{}{}", recs(3000..4200), recs(2200..2300)),
            false,
        ),
        (
            "a copy of the same bytes, fixed after the cut",
            fixed_input(),
            true,
        ),
    ];
    for (what, new_text, accepted) in cases {
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().join("lake");
        let input = dir.path().join("events.jsonl");
        fs::write(&input, stopping_input()).unwrap();
        let args = ingest_args(&[s(&input)], s(&lake), &["--checkpoint-every", "100rows"]);
        assert_code(
            &filesink(&args),
            EXIT_ERROR,
            "the bad line stops the first run",
        );
        assert_eq!(ids(&lake), (1000..2200).collect::<Vec<_>>());
        let before = visible(&lake);

        replace(&input, &new_text);
        let o = filesink(&args);
        if accepted {
            assert_code(&o, 0, what);
            assert_eq!(ids(&lake), (1000..2300).collect::<Vec<_>>(), "{what}");
        } else {
            assert_code(&o, EXIT_INPUT_CHANGED, what);
            let err = stderr(&o);
            assert!(
                err.contains(&format!("`{}`", s(&input))) && err.contains("changed"),
                "{what}: {err}"
            );
            assert_eq!(visible(&lake), before, "{what}: visible output changed");
            // Refused again, not resumed by a second try.
            assert_code(&filesink(&args), EXIT_INPUT_CHANGED, what);
            assert_eq!(visible(&lake), before, "{what}");
        }
    }
}

#[test]
fn a_replaced_input_is_refused_on_resume_also_on_stdin_and_in_a_finished_job() {
    // Standard input: a resumed job skips what it already read of the new stream, and that
    // part must be the same bytes.
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let feed = dir.path().join("feed.jsonl");
    fs::write(&feed, stopping_input()).unwrap();
    let args = ingest_args(
        &["-"],
        s(&lake),
        &["--job", "piped", "--checkpoint-every", "100rows"],
    );
    assert_code(
        &filesink_with_stdin(&args, &feed),
        EXIT_ERROR,
        "stdin stops at the bad line",
    );
    let before = visible(&lake);
    fs::write(&feed, recs(3000..4300)).unwrap();
    let o = filesink_with_stdin(&args, &feed);
    assert_code(&o, EXIT_INPUT_CHANGED, "another stream on stdin");
    assert!(stderr(&o).contains("standard input"), "{}", stderr(&o));
    assert_eq!(visible(&lake), before);
    fs::write(&feed, fixed_input()).unwrap();
    assert_code(
        &filesink_with_stdin(&args, &feed),
        0,
        "the same stream, fixed",
    );
    assert_eq!(ids(&lake), (1000..2300).collect::<Vec<_>>());

    // A finished job whose input was replaced is refused, not "nothing to do" over other data.
    let lake = dir.path().join("lake2");
    let input = dir.path().join("done.jsonl");
    fs::write(&input, recs(0..300)).unwrap();
    let args = ingest_args(&[s(&input)], s(&lake), &[]);
    run_ok(&args);
    let before = visible(&lake);
    replace(&input, &recs(500..900));
    let o = filesink(&args);
    assert_code(&o, EXIT_INPUT_CHANGED, "a finished job's input replaced");
    assert_eq!(visible(&lake), before);
}

/// A file taken as complete (`--settle 0s`) while its last line had no line end: the run
/// wrote that record as it was, and the rest of the line came later. Reading on would make a
/// second record of the rest (`1234` became `12` and `34`); the run is refused instead
/// (exit 7), nothing written. A line end first only ends the record: read on.
#[test]
fn a_last_line_continued_after_a_run_read_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, first, continued) in [
        ("g.csv", "id\n1\n12", "34\n56\n"),
        (
            "g.jsonl",
            "{\"id\":1}\n{\"id\":12}",
            "{\"id\":34}\n{\"id\":56}\n",
        ),
    ] {
        let input = dir.path().join(name);
        let lake = dir.path().join(format!("lake-{name}"));
        fs::write(&input, first).unwrap();
        let args = ingest_args(
            &[s(&input)],
            s(&lake),
            &["--format", "jsonl", "--settle", "0s"],
        );
        run_ok(&args);
        let before = visible(&lake);
        append(&input, continued);
        let o = filesink(&args);
        assert_code(&o, EXIT_INPUT_CHANGED, name);
        assert!(stderr(&o).contains("had no line end"), "{}", stderr(&o));
        assert_eq!(visible(&lake), before, "{name}: nothing written");
        // The same job on an input whose line was ended first reads on.
        fs::write(&input, first).unwrap();
        let lake = dir.path().join(format!("lake-ended-{name}"));
        let args = ingest_args(
            &[s(&input)],
            s(&lake),
            &["--format", "jsonl", "--settle", "0s"],
        );
        run_ok(&args);
        append(&input, &format!("\n{continued}"));
        run_ok(&args);
        let text: String = visible(&lake)
            .into_values()
            .map(|b| String::from_utf8(b).unwrap())
            .collect();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines.len(), 4, "{name}: {text}");
    }
}

/// A finished job fed standard input again (a cron job's pipe): the same stream does
/// nothing, the same stream with more records ingests the rest once, another stream is
/// refused (exit 7). Until it was read again, the new records were dropped with exit 0.
#[test]
fn a_finished_stdin_job_reads_its_stream_again() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let feed = dir.path().join("feed.jsonl");
    let args = ingest_args(&["-"], s(&lake), &["--job", "piped"]);
    let run = |text: String, code: i32, what: &str| {
        fs::write(&feed, text).unwrap();
        let o = filesink_with_stdin(&args, &feed);
        assert_code(&o, code, what);
        o
    };
    run(recs(0..100), 0, "first");
    let o = run(recs(0..100), 0, "the same stream");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    let checkpoints = || {
        fs::read_dir(lake.join("_filesink/jobs/piped/checkpoints"))
            .unwrap()
            .count()
    };
    let before = checkpoints();
    let o = run(recs(0..100), 0, "the same stream again");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(checkpoints(), before, "nothing new: no checkpoint");
    run(recs(0..250), 0, "the same stream, longer");
    assert_eq!(ids(&lake), (0..250).collect::<Vec<_>>());
    let before = visible(&lake);
    let o = run(recs(500..600), EXIT_INPUT_CHANGED, "another stream");
    assert!(stderr(&o).contains("standard input"), "{}", stderr(&o));
    assert_eq!(visible(&lake), before);
    let o = run(recs(0..250), 0, "the whole stream once more");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    // A rerun without a pipe (an empty stream) brings nothing either.
    let before = checkpoints();
    let o = run(String::new(), 0, "an empty stream");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(checkpoints(), before);
    assert_eq!(ids(&lake), (0..250).collect::<Vec<_>>());

    // A file and the stream: the file grew, the rerun has no pipe; what the job read of the
    // stream stays recorded, so the original stream later is nothing new again.
    let lake = dir.path().join("lake2");
    let file = dir.path().join("a.jsonl");
    fs::write(&file, recs(1000..1100)).unwrap();
    let args = ingest_args(&[s(&file), "-"], s(&lake), &["--job", "both"]);
    let run = |text: String, code: i32, what: &str| {
        fs::write(&feed, text).unwrap();
        let o = filesink_with_stdin(&args, &feed);
        assert_code(&o, code, what);
        o
    };
    run(recs(0..100), 0, "first");
    append(&file, &recs(1100..1150));
    run(String::new(), 0, "the file grew, no pipe");
    let o = run(recs(0..100), 0, "the original stream");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    run(recs(0..120), 0, "the stream, longer");
    let mut want: Vec<i64> = (0..120).chain(1000..1150).collect();
    want.sort_unstable();
    assert_eq!(ids(&lake), want);
}

/// A finished job's stream may have ended anywhere: after blank lines, on a last record
/// without its line end, with `\r\n` line ends, in CSV, compressed. Fed again with more, the
/// job compares the bytes it read, whatever they end with, and ingests the rest once; a
/// stream that continues the last line instead is refused (exit 7), nothing written. (The
/// stream was matched record by record, so any such end was refused as another stream.)
#[test]
fn a_finished_stdin_job_goes_on_after_any_end_of_its_stream() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed");
    let crlf = |text: String| text.replace('\n', "\r\n");
    let csv = |ids: std::ops::Range<i64>| -> String {
        ids.map(|i| format!("{i},2026-11-{:02},n{}\n", 25 + i % 5, i % 10))
            .collect()
    };
    // (name, format, first stream, the same stream with more).
    let cases: Vec<(&str, &str, String, String)> = vec![
        (
            "blank lines",
            "jsonl",
            format!("{}\n\n", recs(0..50)),
            format!("{}\n\n{}", recs(0..50), recs(50..80)),
        ),
        (
            "no last line end",
            "jsonl",
            recs(0..50).trim_end().to_string(),
            recs(0..80),
        ),
        (
            "crlf, no last line end",
            "jsonl",
            crlf(recs(0..50)).trim_end().to_string(),
            crlf(recs(0..80)),
        ),
        (
            "csv, blank line",
            "csv",
            format!("id,day,note\n{}\n", csv(0..50)),
            format!("id,day,note\n{}\n{}", csv(0..50), csv(50..80)),
        ),
        (
            "csv, no last line end",
            "csv",
            format!("id,day,note\n{}", csv(0..50))
                .trim_end()
                .to_string(),
            format!("id,day,note\n{}", csv(0..80)),
        ),
    ];
    for (name, format, first, more) in cases {
        for compressed in [false, true] {
            let what = format!("{name}, gzip {compressed}");
            let lake = dir.path().join(format!(
                "lake-{}-{compressed}",
                name.replace([' ', ','], "")
            ));
            let args = ingest_args(
                &["-"],
                s(&lake),
                &["--job", "piped", "--input-format", format],
            );
            let run = |text: &str, code: i32, step: &str| {
                match compressed {
                    true => fs::write(&feed, gzip(text)).unwrap(),
                    false => fs::write(&feed, text).unwrap(),
                }
                let o = filesink_with_stdin(&args, &feed);
                assert_code(&o, code, &format!("{what}: {step}"));
                o
            };
            run(&first, 0, "first");
            assert_eq!(ids(&lake), (0..50).collect::<Vec<_>>(), "{what}");
            let o = run(&first, 0, "the same stream");
            assert!(
                stdout(&o).contains("nothing to do"),
                "{what}: {}",
                stdout(&o)
            );
            // Nothing was pending: no note says a file was committed.
            assert!(
                !stderr(&o).contains("pending file"),
                "{what}: {}",
                stderr(&o)
            );
            run(&more, 0, "the same stream with more");
            assert_eq!(ids(&lake), (0..80).collect::<Vec<_>>(), "{what}");
            let o = run(&more, 0, "the longer stream again");
            assert!(
                stdout(&o).contains("nothing to do"),
                "{what}: {}",
                stdout(&o)
            );
        }
    }

    // The last line continued: refused, nothing written, whatever came after it.
    for (name, format, first, rest) in [
        (
            "jsonl",
            "jsonl",
            "{\"id\":1}\n{\"id\":12}",
            "{\"id\":34}\n{\"id\":56}\n",
        ),
        ("csv", "csv", "id\n1\n12", "34\n56\n"),
    ] {
        let continued = format!("{first}{rest}");
        let lake = dir.path().join(format!("continued-{name}"));
        let args = ingest_args(
            &["-"],
            s(&lake),
            &["--job", "piped", "--input-format", format],
        );
        fs::write(&feed, first).unwrap();
        assert_code(&filesink_with_stdin(&args, &feed), 0, name);
        let before = visible(&lake);
        fs::write(&feed, &continued).unwrap();
        let o = filesink_with_stdin(&args, &feed);
        assert_code(&o, EXIT_INPUT_CHANGED, name);
        assert!(
            stderr(&o).contains("had no line end"),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(visible(&lake), before, "{name}: nothing written");
    }
}

#[test]
fn an_input_that_grew_is_ingested_further_exactly_once() {
    // A finished job: what was appended is ingested by the next run, once.
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let log = dir.path().join("app.jsonl");
    fs::write(&log, recs(0..1000)).unwrap();
    let args = ingest_args(&[s(&log)], s(&lake), &["--checkpoint-every", "300rows"]);
    run_ok(&args);
    assert_eq!(ids(&lake), (0..1000).collect::<Vec<_>>());
    append(&log, &recs(1000..1500));
    let o = run_ok(&args);
    assert!(!stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(ids(&lake), (0..1500).collect::<Vec<_>>());
    // Unchanged: nothing to do.
    let o = run_ok(&args);
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(ids(&lake), (0..1500).collect::<Vec<_>>());
    // Grown again, by a last line without its newline, then completed.
    append(&log, recs(1500..1510).trim_end());
    run_ok(&args);
    append(&log, &format!("\n{}", recs(1510..1520)));
    run_ok(&args);
    assert_eq!(ids(&lake), (0..1520).collect::<Vec<_>>());

    // A job stopped in its second input while the first grew: both are read on.
    let lake = dir.path().join("lake2");
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    fs::write(&a, recs(0..500)).unwrap();
    fs::write(&b, format!("{}{BAD}{}", recs(500..800), recs(801..1000))).unwrap();
    let args = ingest_args(
        &[s(&a), s(&b)],
        s(&lake),
        &["--checkpoint-every", "100rows"],
    );
    assert_code(
        &filesink(&args),
        EXIT_ERROR,
        "the bad line in b stops the run",
    );
    assert_eq!(ids(&lake), (0..800).collect::<Vec<_>>());
    append(&a, &recs(1000..1100));
    fs::write(&b, format!("{}{}", recs(500..1000), recs(1100..1200))).unwrap();
    run_ok(&args);
    assert_eq!(ids(&lake), (0..1200).collect::<Vec<_>>());
    run_ok(&args);
    assert_eq!(ids(&lake), (0..1200).collect::<Vec<_>>());

    // CSV: the header is read once, the appended rows are ingested.
    let lake = dir.path().join("lake3");
    let csv = dir.path().join("rows.csv");
    let rows = |r: std::ops::Range<i64>| -> String {
        r.map(|i| format!("{i},2026-11-{:02}\n", 25 + i % 5))
            .collect()
    };
    fs::write(&csv, format!("id,day\n{}", rows(0..200))).unwrap();
    let args = ingest_args(&[s(&csv)], s(&lake), &[]);
    run_ok(&args);
    append(&csv, &rows(200..260));
    run_ok(&args);
    assert_eq!(ids(&lake), (0..260).collect::<Vec<_>>());
}

#[test]
fn the_same_input_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a.jsonl"), recs(0..10)).unwrap();
    fs::create_dir(d.join("sub")).unwrap();
    fs::hard_link(d.join("a.jsonl"), d.join("hard.jsonl")).unwrap();
    std::os::unix::fs::symlink(d.join("a.jsonl"), d.join("soft.jsonl")).unwrap();
    std::os::unix::fs::symlink("a.jsonl", d.join("relsoft.jsonl")).unwrap();
    std::os::unix::fs::symlink(d.join("sub"), d.join("subdir")).unwrap();
    fs::hard_link(d.join("a.jsonl"), d.join("sub/deep.jsonl")).unwrap();
    let pairs = [
        ["a.jsonl", "a.jsonl"],
        ["a.jsonl", "./a.jsonl"],
        ["a.jsonl", "sub/../a.jsonl"],
        ["a.jsonl", "hard.jsonl"],
        ["hard.jsonl", "soft.jsonl"],
        ["relsoft.jsonl", "a.jsonl"],
        ["subdir/deep.jsonl", "a.jsonl"],
    ];
    for (i, pair) in pairs.iter().enumerate() {
        let lake = format!("./lake{i}");
        let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .current_dir(d)
            .args(["ingest", pair[0], pair[1], "--to", &lake])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_code(&o, EXIT_USAGE, &format!("{pair:?}"));
        assert!(
            stderr(&o).contains(&format!("`{}`", pair[1])),
            "{}",
            stderr(&o)
        );
        assert!(!d.join(&lake).exists(), "{pair:?}: the lake was created");
    }
    // Standard input that is the same file as another input.
    let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .current_dir(d)
        .args([
            "ingest",
            "a.jsonl",
            "-",
            "--job",
            "j",
            "--to",
            "./lake-stdin",
        ])
        .stdin(fs::File::open(d.join("hard.jsonl")).unwrap())
        .output()
        .unwrap();
    assert_code(&o, EXIT_USAGE, "stdin is a.jsonl");
    assert!(!d.join("./lake-stdin").exists());
    // Two different files with the same content are two inputs.
    fs::copy(d.join("a.jsonl"), d.join("copy.jsonl")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .current_dir(d)
        .args(["ingest", "a.jsonl", "copy.jsonl", "--to", "./lake-copy"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&o, 0, "a copy is another input");
}

/// The lines of a `--bad-records` file, by their `source`.
fn bad_sources(path: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            v["source"].as_str().unwrap().to_string()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn bad_records_of_one_job_survive_another_jobs_resume() {
    // Job A stops in its second input (a header that does not match) after a bad row that
    // came after its last checkpoint; job B then adds its own bad records to the same file;
    // A is fixed and resumed.
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let bad = dir.path().join("bad.jsonl");
    let a1 = dir.path().join("a1.csv");
    let a2 = dir.path().join("a2.csv");
    let mut text = String::from("id,day\n");
    for i in 0..300 {
        match i {
            48 | 248 => text.push_str("oops\n"), // lines 50 and 250
            _ => text.push_str(&format!("{i},2026-11-25\n")),
        }
    }
    fs::write(&a1, &text).unwrap();
    fs::write(&a2, "x,y\n300,2026-11-26\n").unwrap();
    let args_a = [
        "ingest",
        s(&a1),
        s(&a2),
        "--to",
        s(&lake),
        "--checkpoint-every",
        "100rows",
        "--bad-records",
        s(&bad),
    ];
    assert_code(&filesink(&args_a), EXIT_ERROR, "a2's header stops job A");
    let mut a_bad = vec![format!("{}:50", s(&a1)), format!("{}:250", s(&a1))];
    a_bad.sort();
    assert_eq!(bad_sources(&bad), a_bad);

    let b = dir.path().join("b.jsonl");
    fs::write(
        &b,
        format!("{}{BAD}{}{BAD}", recs(1000..1010), recs(1011..1020)),
    )
    .unwrap();
    run_ok(&ingest_args(
        &[s(&b)],
        s(&lake),
        &["--bad-records", s(&bad)],
    ));
    let b_bad = [format!("{}:11", s(&b)), format!("{}:21", s(&b))];

    fs::write(&a2, "id,day\n300,2026-11-26\n").unwrap();
    run_ok(&args_a);
    let mut expected: Vec<String> = a_bad.iter().chain(&b_bad).cloned().collect();
    expected.sort();
    assert_eq!(bad_sources(&bad), expected, "every bad record once");

    // A finished job whose input grew writes its new bad records after B's.
    let c = dir.path().join("c.jsonl");
    fs::write(&c, format!("{}{BAD}", recs(2000..2005))).unwrap();
    let args_c = ingest_args(&[s(&c)], s(&lake), &["--bad-records", s(&bad)]);
    run_ok(&args_c);
    // Another job's bad records come between: the lake took b already, so a job naming it
    // again takes only d's.
    let d = dir.path().join("d.jsonl");
    fs::write(&d, format!("{}{BAD}", recs(3000..3003))).unwrap();
    run_ok(&ingest_args(
        &[s(&b), s(&d)],
        s(&lake),
        &["--job", "b_again", "--bad-records", s(&bad)],
    ));
    append(&c, &format!("{}{BAD}", recs(2006..2008)));
    run_ok(&args_c);
    expected.extend([
        format!("{}:6", s(&c)),
        format!("{}:9", s(&c)),
        format!("{}:4", s(&d)),
    ]);
    expected.sort();
    assert_eq!(bad_sources(&bad), expected);
}

#[test]
fn a_bad_records_file_inside_the_lake_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("events.jsonl");
    fs::write(&input, format!("{}{BAD}", recs(0..10))).unwrap();
    // An existing lake, and a link to it.
    let lake = d.join("lake");
    let first_bad = d.join("bad.jsonl");
    run_ok(&ingest_args(
        &[s(&input)],
        s(&lake),
        &["--job", "first", "--bad-records", s(&first_bad)],
    ));
    std::os::unix::fs::symlink(d.join("lake"), d.join("link")).unwrap();
    let listed = |lake: &str| -> Value {
        json_of(&run_ok(&["ls", s(&d.join(lake)), "--json"]))["committed"].clone()
    };
    let before = listed("lake");
    for (lake, bad) in [
        ("lake", "lake/bad.jsonl"),
        ("lake", "lake/day=2026-11-25/bad.jsonl"),
        ("lake", "lake/.bad.jsonl"),
        ("lake", "lake/_filesink/bad.jsonl"),
        ("lake", "link/bad.jsonl"),
        ("link", "lake/bad.jsonl"),
        ("./lake/", "./lake/../lake/bad.jsonl"),
        ("new", "new/bad.jsonl"),
        ("new/", "new/sub/bad.jsonl"),
        (".", "other-bad.jsonl"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .current_dir(d)
            .args([
                "ingest",
                s(&input),
                "--to",
                lake,
                "--job",
                "second",
                "--bad-records",
                bad,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_code(&o, EXIT_USAGE, &format!("--to {lake} --bad-records {bad}"));
        assert!(stderr(&o).contains(&format!("`{bad}`")), "{}", stderr(&o));
        assert!(!d.join(bad).exists(), "{bad} was created");
    }
    assert!(!d.join("new").exists());
    assert_eq!(listed("lake"), before);
}

#[test]
fn a_slow_input_becomes_visible_within_an_interval() {
    // Records trickle into standard input, which stays open: each must become visible within
    // about an interval, not at the end of the input.
    for (name, extra, header) in [
        ("inferred", vec![], None),
        ("schema", vec!["--schema"], None),
        ("csv", vec!["--input-format", "csv"], Some("id,day\n")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().join("lake");
        let schema_file = dir.path().join("schema.json");
        fs::write(
            &schema_file,
            r#"{"fields":[{"name":"id","data_type":"Int64","nullable":true,"dict_id":0,"dict_is_ordered":false,"metadata":{}},{"name":"day","data_type":"Utf8","nullable":true,"dict_id":0,"dict_is_ordered":false,"metadata":{}},{"name":"note","data_type":"Utf8","nullable":true,"dict_id":0,"dict_is_ordered":false,"metadata":{}}],"metadata":{}}"#,
        )
        .unwrap();
        let mut args: Vec<&str> = vec![
            "ingest",
            "-",
            "--job",
            "slow",
            "--to",
            s(&lake),
            "--checkpoint-every",
            "1s",
        ];
        for e in &extra {
            args.push(e);
            if *e == "--schema" {
                args.push(s(&schema_file));
            }
        }
        let mut child = spawn_with_piped_stdin(&args);
        let mut stdin = child.stdin.take().unwrap();
        if let Some(h) = header {
            stdin.write_all(h.as_bytes()).unwrap();
        }
        for id in 0..3i64 {
            let line = match header {
                Some(_) => format!("{id},2026-11-25\n"),
                None => rec(id),
            };
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.flush().unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if ids(&lake) == (0..=id).collect::<Vec<_>>() {
                    break;
                }
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("{name}: ingest ended while its input was open: {status}");
                }
                assert!(
                    Instant::now() < deadline,
                    "{name}: record {id} not visible 30 s after it was sent (checkpoint every 1 s); \
                     visible: {:?}",
                    ids(&lake)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(ids(&lake), vec![0, 1, 2], "{name}");
    }
}

/// Rewrites the latest manifest of the only job in `lake` as a build that recorded no
/// checksums (source position version 1) would have written it.
/// The latest manifest of the lake's one job.
fn latest_manifest(lake: &Path) -> PathBuf {
    let jobs = lake.join("_filesink/jobs");
    let job = fs::read_dir(&jobs).unwrap().next().unwrap().unwrap().path();
    fs::read_dir(job.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .max()
        .unwrap()
}

fn rewrite_as_version_1(lake: &Path) {
    let latest = latest_manifest(lake);
    let bytes = fs::read(&latest).unwrap();
    let mut m = filesink::job::Manifest::decode(s(&latest), &bytes, None).unwrap();
    let p = m.source_position.as_object_mut().unwrap();
    assert!(p.remove("read").is_some(), "{p:?}");
    p.insert("version".into(), 1.into());
    fs::write(&latest, m.encode()).unwrap();
}

/// The source position of the latest manifest of the lake's one job.
fn latest_position(lake: &Path) -> Value {
    let latest = latest_manifest(lake);
    let bytes = fs::read(&latest).unwrap();
    filesink::job::Manifest::decode(s(&latest), &bytes, None)
        .unwrap()
        .source_position
}

#[test]
fn a_position_without_checksums_resumes_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    fs::write(&a, recs(0..1100)).unwrap();
    fs::write(&b, format!("{}{BAD}{}", recs(1100..1300), recs(1301..1400))).unwrap();
    let args = ingest_args(
        &[s(&a), s(&b)],
        s(&lake),
        &["--checkpoint-every", "100rows"],
    );
    assert_code(
        &filesink(&args),
        EXIT_ERROR,
        "the bad line in b stops the run",
    );
    assert_eq!(ids(&lake), (0..1300).collect::<Vec<_>>());
    rewrite_as_version_1(&lake);
    fs::write(&b, format!("{}{}", recs(1100..1400), recs(1400..1450))).unwrap();
    // A bad-records file with an untagged line, as an older filesink wrote them: the run
    // says it cannot tell whether it lists a record twice.
    let bad = dir.path().join("bad.jsonl");
    fs::write(
        &bad,
        "{\"source\":\"b.jsonl:201\",\"line\":\"{\",\"error\":\"e\"}\n",
    )
    .unwrap();
    let mut with_bad = args.clone();
    with_bad.extend(["--bad-records", s(&bad)]);
    let o = run_ok(&with_bad);
    assert!(stderr(&o).contains("older filesink"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("may list bad records"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        latest_position(&lake)["version"],
        2,
        "the position written now has read prefixes, and says so"
    );
    assert_eq!(ids(&lake), (0..1450).collect::<Vec<_>>());
    // The position it wrote has checksums: a later change is caught (in place: a file put
    // under its name is another file, a new input).
    fs::write(&b, recs(5000..5400)).unwrap();
    assert_code(
        &filesink(&args),
        EXIT_INPUT_CHANGED,
        "b replaced after the upgrade",
    );
}

#[test]
fn a_bad_records_file_that_is_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = dir.path().join("events.jsonl");
    let text = format!("{}{BAD}", recs(0..10));
    fs::write(&input, &text).unwrap();
    let link = dir.path().join("link.jsonl");
    fs::hard_link(&input, &link).unwrap();
    for bad in [&input, &link] {
        let o = filesink(&ingest_args(
            &[s(&input)],
            s(&lake),
            &["--bad-records", s(bad)],
        ));
        assert_code(&o, EXIT_USAGE, s(bad));
        assert_eq!(
            fs::read_to_string(&input).unwrap(),
            text,
            "the input was written to"
        );
        assert!(!lake.exists());
    }
}

/// A job that has taken no record yet is bound by nothing it read: the bytes before its
/// position held blank lines at most (or a CSV header, which is read again), so another
/// input there is read from its start instead of refused (exit 7), on standard input (a cron
/// job whose first pipe brought only a line end) and in files. Once a record is taken, the
/// input is bound as before.
#[test]
fn a_job_that_took_no_record_is_bound_by_nothing_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.jsonl");

    // Standard input, the job finished on blank lines.
    let lake = dir.path().join("lake-stdin");
    let args = ingest_args(&["-"], s(&lake), &["--job", "piped"]);
    let run = |text: &str, code: i32, what: &str| {
        fs::write(&feed, text).unwrap();
        let o = filesink_with_stdin(&args, &feed);
        assert_code(&o, code, what);
        o
    };
    run("\n\n  \n", 0, "blank lines only");
    assert_eq!(ids(&lake), Vec::<i64>::new());
    let o = run("", 0, "an empty stream");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    run(&recs(0..100), 0, "records, not after the blank lines");
    assert_eq!(ids(&lake), (0..100).collect::<Vec<_>>());
    run(&recs(0..150), 0, "the same stream, longer");
    assert_eq!(ids(&lake), (0..150).collect::<Vec<_>>());
    let before = visible(&lake);
    run(
        &recs(500..510),
        EXIT_INPUT_CHANGED,
        "now bound: another stream",
    );
    assert_eq!(visible(&lake), before);

    // The same blank lines again, then records after them: read once, as before.
    let lake = dir.path().join("lake-stdin-same");
    let args = ingest_args(&["-"], s(&lake), &["--job", "piped"]);
    for (text, what) in [
        ("\n\n".to_string(), "blank lines"),
        (format!("\n\n{}", recs(0..40)), "the same, and records"),
        (format!("\n\n{}", recs(0..40)), "the same again"),
    ] {
        fs::write(&feed, &text).unwrap();
        assert_code(&filesink_with_stdin(&args, &feed), 0, what);
    }
    assert_eq!(ids(&lake), (0..40).collect::<Vec<_>>());

    // Files: JSON lines that were blank lines, a CSV file that was a header, both replaced.
    for (name, first, second, third) in [
        (
            "in.jsonl",
            "\r\n\n".to_string(),
            recs(0..60),
            recs(200..210),
        ),
        (
            "in.csv",
            "id,note\n".to_string(),
            format!(
                "note,id\n{}",
                (0..60).map(|i| format!("n,{i}\n")).collect::<String>()
            ),
            "id\n7\n".to_string(),
        ),
    ] {
        let input = dir.path().join(name);
        let lake = dir.path().join(format!("lake-{name}"));
        fs::write(&input, first).unwrap();
        let args = ingest_args(&[s(&input)], s(&lake), &[]);
        run_ok(&args);
        assert_eq!(ids(&lake), Vec::<i64>::new(), "{name}");
        replace(&input, &second);
        let o = run_ok(&args);
        assert!(stderr(&o).contains("no record"), "{name}: {}", stderr(&o));
        assert_eq!(ids(&lake), (0..60).collect::<Vec<_>>(), "{name}");
        let o = run_ok(&args);
        assert!(
            stdout(&o).contains("nothing to do"),
            "{name}: {}",
            stdout(&o)
        );
        assert_eq!(
            ids(&lake),
            (0..60).collect::<Vec<_>>(),
            "{name}: nothing new"
        );
        let before = visible(&lake);
        replace(&input, &third);
        assert_code(&filesink(&args), EXIT_INPUT_CHANGED, name);
        assert_eq!(visible(&lake), before, "{name}");
    }

    // Compressed: a gzip file of blank lines replaced by one of records.
    let gz = dir.path().join("in.jsonl.gz");
    fs::write(&gz, gzip("\n\n")).unwrap();
    let lake = dir.path().join("lake-gz");
    let args = ingest_args(&[s(&gz)], s(&lake), &[]);
    run_ok(&args);
    let tmp = gz.with_extension("tmp");
    fs::write(&tmp, gzip(&recs(0..30))).unwrap();
    fs::rename(&tmp, &gz).unwrap();
    run_ok(&args);
    assert_eq!(ids(&lake), (0..30).collect::<Vec<_>>());

    // A file and standard input that brought blank lines only: the same again is nothing to
    // do (the file, unchanged, is not read again); records on the stream are read.
    let blank = dir.path().join("blank.jsonl");
    fs::write(&blank, "\n").unwrap();
    let lake = dir.path().join("lake-both");
    let args = ingest_args(&[s(&blank), "-"], s(&lake), &["--job", "both"]);
    fs::write(&feed, "\n").unwrap();
    assert_code(&filesink_with_stdin(&args, &feed), 0, "both blank");
    let o = filesink_with_stdin(&args, &feed);
    assert_code(&o, 0, "both blank again");
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("grew"), "{}", stderr(&o));
    fs::write(&feed, recs(0..20)).unwrap();
    assert_code(
        &filesink_with_stdin(&args, &feed),
        0,
        "records on the stream",
    );
    assert_eq!(ids(&lake), (0..20).collect::<Vec<_>>());

    // Two CSV files of a header alone; one replaced by other columns, the other grown: both
    // are read from their start, so the grown one's header is checked against the columns
    // this run takes (read on after it, its rows would have been taken under other names).
    let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    fs::write(&a, "first,last\n").unwrap();
    fs::write(&b, "first,last\n").unwrap();
    let lake = dir.path().join("lake-two-csv");
    let args = ingest_args(&[s(&a), s(&b)], s(&lake), &[]);
    run_ok(&args);
    replace(&a, "last,first\nDoe,John\n");
    append(&b, "Roe,Jane\n");
    let o = filesink(&args);
    assert_code(&o, EXIT_ERROR, "another header, read from its start");
    assert!(stderr(&o).contains("the header of"), "{}", stderr(&o));
    assert!(common::visible_files(&lake).is_empty());

    // A CSV file of blank lines that grew by a header and rows: the header is read as one,
    // not taken for a row (read on after the blank lines, it was).
    let c = dir.path().join("grown.csv");
    fs::write(&c, "\n\n").unwrap();
    let lake = dir.path().join("lake-grown-csv");
    let args = ingest_args(&[s(&c)], s(&lake), &[]);
    run_ok(&args);
    append(&c, "id,note\n1,a\n2,b\n");
    let o = run_ok(&args);
    assert!(
        stderr(&o).contains("grew: reading its inputs from their start"),
        "{}",
        stderr(&o)
    );
    assert_eq!(ids(&lake), vec![1, 2]);

    // A bad record set aside is a record taken: the input is bound.
    let input = dir.path().join("one-bad.jsonl");
    let lake = dir.path().join("lake-bad");
    let bad_file = dir.path().join("bad.jsonl");
    fs::write(&input, BAD).unwrap();
    let args = ingest_args(&[s(&input)], s(&lake), &["--bad-records", s(&bad_file)]);
    run_ok(&args);
    replace(&input, &recs(0..10));
    assert_code(
        &filesink(&args),
        EXIT_INPUT_CHANGED,
        "a job that set a record aside",
    );
}

#[test]
fn a_csv_input_that_held_blank_lines_only_reads_its_header_when_it_grows() {
    // A job that took records from one input, while another held only blank lines (a file
    // created ahead of its writer): the header that comes later is a header, checked against
    // the job's columns, whichever way the input grew and however it is read.
    let dir = tempfile::tempdir().unwrap();
    let rows =
        |ids: std::ops::Range<i64>| -> String { ids.map(|i| format!("{i},n{i}\n")).collect() };
    let a = dir.path().join("a.csv");
    fs::write(&a, format!("id,note\n{}", rows(0..5))).unwrap();
    for (name, blank, grown) in [
        ("plain.csv", "\n\n".to_string(), None),
        ("crlf.csv", "\r\n \r\n".to_string(), None),
        ("bom.csv", "\u{feff}\n".to_string(), None),
        ("mark-only.csv", "\u{feff}".to_string(), None),
        ("packed.csv.gz", String::new(), Some("\n\n")),
    ] {
        let b = dir.path().join(name);
        let lake = dir.path().join(format!("lake-{name}"));
        let text = grown.unwrap_or(&blank).to_string();
        match name.ends_with(".gz") {
            true => fs::write(&b, gzip(&text)).unwrap(),
            false => fs::write(&b, &text).unwrap(),
        }
        let args = ingest_args(&[s(&a), s(&b)], s(&lake), &[]);
        run_ok(&args);
        assert_eq!(ids(&lake), (0..5).collect::<Vec<_>>(), "{name}");
        let more = format!("{text}id,note\n{}", rows(10..13));
        match name.ends_with(".gz") {
            // The same inode, rewritten: a compressed input grows only so.
            true => fs::write(&b, gzip(&more)).unwrap(),
            false => append(&b, &more[text.len()..]),
        }
        let o = run_ok(&args);
        assert!(stdout(&o).contains(" 0 bad,"), "{name}: {}", stdout(&o));
        assert_eq!(
            ids(&lake),
            (0..5).chain(10..13).collect::<Vec<_>>(),
            "{name}: the header is no row"
        );

        // Grown by a header of other columns: refused by name, nothing more written. (A job
        // named with --job reads its inputs as given, so it is this job that reads on; one
        // named after its inputs would leave the unchanged `a.csv` out, and be another job.)
        let other = dir.path().join(format!("other-{name}"));
        let lake = dir.path().join(format!("lake-other-{name}"));
        match name.ends_with(".gz") {
            true => fs::write(&other, gzip(&text)).unwrap(),
            false => fs::write(&other, &text).unwrap(),
        }
        let args = ingest_args(&[s(&a), s(&other)], s(&lake), &["--job", "other"]);
        run_ok(&args);
        let before = visible(&lake);
        let more = format!("{text}note,id\nx,1\n");
        match name.ends_with(".gz") {
            true => fs::write(&other, gzip(&more)).unwrap(),
            false => append(&other, &more[text.len()..]),
        }
        let o = filesink(&args);
        assert_code(&o, EXIT_ERROR, name);
        assert!(
            stderr(&o).contains("the header of"),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(visible(&lake), before, "{name}");
    }

    // Standard input, blank at the checkpoint, then the same blank lines and a header.
    let feed = dir.path().join("feed.csv");
    let lake = dir.path().join("lake-stdin");
    let extra = ["--job", "piped", "--input-format", "csv"];
    let args = ingest_args(&[s(&a), "-"], s(&lake), &extra);
    fs::write(&feed, "\n\n").unwrap();
    assert_code(&filesink_with_stdin(&args, &feed), 0, "blank stream");
    fs::write(&feed, format!("\n\nid,note\n{}", rows(20..22))).unwrap();
    assert_code(&filesink_with_stdin(&args, &feed), 0, "the header came");
    assert_eq!(ids(&lake), (0..5).chain(20..22).collect::<Vec<_>>());
}

#[test]
fn an_input_that_held_only_a_byte_order_mark_reads_on_when_it_grows() {
    // A file its writer began with the mark alone when a run read it: no record to continue,
    // so the records that follow are read, once (not refused as a continued line).
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    fs::write(&a, recs(0..5)).unwrap();
    for gz in [false, true] {
        let b = dir.path().join(if gz { "b.jsonl.gz" } else { "b.jsonl" });
        let lake = dir.path().join(format!("lake-{gz}"));
        let write = |text: &str| match gz {
            true => fs::write(&b, gzip(text)).unwrap(),
            false => fs::write(&b, text).unwrap(),
        };
        write("\u{feff}");
        let args = ingest_args(&[s(&a), s(&b)], s(&lake), &[]);
        run_ok(&args);
        assert_eq!(ids(&lake), (0..5).collect::<Vec<_>>());
        write(&format!("\u{feff}{}", recs(10..13)));
        run_ok(&args);
        assert_eq!(
            ids(&lake),
            (0..5).chain(10..13).collect::<Vec<_>>(),
            "gz {gz}"
        );
        run_ok(&args);
        assert_eq!(
            ids(&lake),
            (0..5).chain(10..13).collect::<Vec<_>>(),
            "gz {gz}"
        );
    }
    // Standard input the same way.
    let feed = dir.path().join("feed.jsonl");
    let lake = dir.path().join("lake-stdin");
    let args = ingest_args(&[s(&a), "-"], s(&lake), &["--job", "piped"]);
    fs::write(&feed, "\u{feff}").unwrap();
    assert_code(&filesink_with_stdin(&args, &feed), 0, "the mark alone");
    fs::write(&feed, format!("\u{feff}{}", recs(20..22))).unwrap();
    assert_code(&filesink_with_stdin(&args, &feed), 0, "records after it");
    assert_eq!(ids(&lake), (0..5).chain(20..22).collect::<Vec<_>>());
}
