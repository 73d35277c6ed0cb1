//! One visibility rule for every output format: with `--checkpoint-every DURATION`, a record
//! is visible once the checkpoint after it commits, however slowly records arrive; row files
//! stay open across checkpoints only up to an explicit `--max-visibility-delay`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use common::cli::*;
use common::{formats, visible_id_counts};
use filesink::FileFormat;

fn ids_visible(lake: &Path, format: &FileFormat) -> Vec<i64> {
    if !lake.exists() {
        return Vec::new();
    }
    visible_id_counts(lake, format)
        .into_iter()
        .flat_map(|(id, n)| std::iter::repeat_n(id, n))
        .collect()
}

/// Waits until exactly `want` is visible; the bound is far above one interval plus a commit
/// (a record not visible then is held back, not late).
#[track_caller]
fn wait_visible(lake: &Path, format: &FileFormat, want: &[i64]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = ids_visible(lake, format);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {got:?} visible after 30 s, {want:?} expected",
            format.name()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn trickle(format: &FileFormat, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let mut args = vec![
        "ingest",
        "-",
        "--job",
        "trickle",
        "--to",
        s(&lake),
        "--format",
        format.name(),
        "--checkpoint-every",
        "1s",
    ];
    args.extend_from_slice(extra);
    let mut child = spawn_with_piped_stdin(&args);
    let mut stdin = child.stdin.take().unwrap();
    let mut sent = Vec::new();
    for round in 0..3i64 {
        for i in round * 5..round * 5 + 5 {
            writeln!(stdin, "{{\"id\":{i},\"note\":\"n{i}\"}}").unwrap();
            sent.push(i);
        }
        stdin.flush().unwrap();
        wait_visible(&lake, format, &sent);
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ids_visible(&lake, format), sent);
}

#[test]
fn records_trickling_in_are_visible_within_a_checkpoint_in_every_format() {
    for format in formats() {
        trickle(&format, &[]);
    }
}

#[test]
fn row_files_stay_open_no_longer_than_the_visibility_delay() {
    for format in [FileFormat::json_lines(), FileFormat::csv()] {
        trickle(&format, &["--max-visibility-delay", "2s"]);
    }
    // Parquet files roll at every checkpoint: the delay is the pre-commit merge's.
    let dir = tempfile::tempdir().unwrap();
    let o = filesink(&[
        "ingest",
        "-",
        "--job",
        "j",
        "--to",
        s(&dir.path().join("lake")),
        "--max-visibility-delay",
        "2s",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!dir.path().join("lake").exists());
}

/// With `--checkpoint-every Nrows` and no `--schema`, a stream that stays open is
/// checkpointed every N records: schema inference waits for no more records than the first
/// checkpoint does (it used to hold the stream until 1,000 records or its end), in JSON lines
/// and in CSV (whose header is not a record).
#[test]
fn a_row_schedule_checkpoints_a_stream_before_the_inference_window_fills() {
    for (input_format, header) in [("jsonl", None), ("csv", Some("id,note"))] {
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().join("lake");
        let format = FileFormat::json_lines();
        let mut child = spawn_with_piped_stdin(&[
            "ingest",
            "-",
            "--job",
            "rows",
            "--to",
            s(&lake),
            "--input-format",
            input_format,
            "--format",
            "jsonl",
            "--checkpoint-every",
            "10rows",
        ]);
        let mut stdin = child.stdin.take().unwrap();
        if let Some(h) = header {
            writeln!(stdin, "{h}").unwrap();
        }
        for i in 0..25i64 {
            match header {
                None => writeln!(stdin, "{{\"id\":{i},\"note\":\"n{i}\"}}").unwrap(),
                Some(_) => writeln!(stdin, "{i},n{i}").unwrap(),
            }
        }
        stdin.flush().unwrap();
        // Two checkpoints' worth while the stream stays open.
        wait_visible(&lake, &format, &(0..20).collect::<Vec<_>>());
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{input_format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(ids_visible(&lake, &format), (0..25).collect::<Vec<_>>());
    }
}
