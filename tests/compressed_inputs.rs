//! gzip and zstd inputs: every record once, across a crash and a resume, when the input grew
//! by another member or frame, and refused when it changed; a corrupt or cut stream is an
//! error naming the input, and the job resumes once the input is fixed. Positions count
//! decompressed bytes. Inputs are compressed here, by the test.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use filesink::ingest::{
    CheckpointEvery, Ingest, IngestStatus, Input, InputCompression, InputFormat,
};
use filesink::Error;

mod common;

use common::cli::*;

const EXIT_ERROR: i32 = 1;
const EXIT_INPUT_CHANGED: i32 = 7;

#[derive(Debug, Clone, Copy)]
enum Codec {
    Gzip,
    Zstd,
}

const CODECS: [Codec; 2] = [Codec::Gzip, Codec::Zstd];

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }

    fn ext(self) -> &'static str {
        match self {
            Codec::Gzip => "gz",
            Codec::Zstd => "zst",
        }
    }

    /// `text` as one gzip member or one zstd frame.
    fn compress(self, text: &str) -> Vec<u8> {
        match self {
            Codec::Gzip => {
                let mut e =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(text.as_bytes()).unwrap();
                e.finish().unwrap()
            }
            Codec::Zstd => zstd::stream::encode_all(text.as_bytes(), 3).unwrap(),
        }
    }
}

fn jsonl(ids: std::ops::Range<i64>) -> String {
    ids.map(|i| {
        format!(
            "{{\"id\":{i},\"day\":\"2026-12-0{}\",\"note\":\"n{}\"}}\n",
            1 + i % 3,
            i % 10
        )
    })
    .collect()
}

fn csv_rows(ids: std::ops::Range<i64>) -> String {
    ids.map(|i| format!("{i},2026-12-0{},n{}\n", 1 + i % 3, i % 10))
        .collect()
}

fn csv(ids: std::ops::Range<i64>) -> String {
    format!("id,day,note\n{}", csv_rows(ids))
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

use common::visible_parquet_ids as ids;

fn ingest(input: &Path, lake: &Path) -> Ingest {
    Ingest::new([Input::file(input).unwrap()])
        .to_local(lake)
        .partition_by(["day"])
        .checkpoint_every(CheckpointEvery::Rows(100))
}

#[test]
fn format_detection_looks_through_the_compression_extension() {
    assert_eq!(
        InputFormat::from_path("a.jsonl.gz"),
        Some(InputFormat::Jsonl)
    );
    assert_eq!(
        InputFormat::from_path("/d/a.ndjson.zst"),
        Some(InputFormat::Jsonl)
    );
    assert_eq!(InputFormat::from_path("x.csv.zst"), Some(InputFormat::Csv));
    assert_eq!(InputFormat::from_path("x.CSV.GZ"), Some(InputFormat::Csv));
    assert_eq!(InputFormat::from_path("x.gz"), None);
    assert_eq!(InputFormat::from_path("x.txt.gz"), None);
    assert_eq!(
        InputCompression::from_path("a.jsonl.gz"),
        Some(InputCompression::Gzip)
    );
    assert_eq!(
        InputCompression::from_path("a.csv.zst"),
        Some(InputCompression::Zstd)
    );
    assert_eq!(InputCompression::from_path("a.jsonl"), None);
    assert_eq!(
        InputCompression::from_magic(&[0x1f, 0x8b, 8, 0]),
        Some(InputCompression::Gzip)
    );
    assert_eq!(
        InputCompression::from_magic(&[0x28, 0xb5, 0x2f, 0xfd]),
        Some(InputCompression::Zstd)
    );
    assert_eq!(InputCompression::from_magic(b"{\"id\""), None);

    // A file is compressed as its extension says, else as its first bytes say.
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("events.jsonl.gz");
    fs::write(&named, Codec::Gzip.compress(&jsonl(0..3))).unwrap();
    assert_eq!(
        Input::file(&named).unwrap().compression,
        Some(InputCompression::Gzip)
    );
    let unnamed = dir.path().join("events.jsonl");
    fs::write(&unnamed, Codec::Zstd.compress(&jsonl(0..3))).unwrap();
    assert_eq!(
        Input::file(&unnamed).unwrap().compression,
        Some(InputCompression::Zstd)
    );
    let plain = dir.path().join("plain.jsonl");
    fs::write(&plain, jsonl(0..3)).unwrap();
    assert_eq!(Input::file(&plain).unwrap().compression, None);
    let tiny = dir.path().join("tiny.jsonl");
    fs::write(&tiny, "\n").unwrap();
    assert_eq!(Input::file(&tiny).unwrap().compression, None);
}

#[tokio::test]
async fn gzip_and_zstd_inputs_ingest_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        for (format, text) in [("jsonl", jsonl(0..2000)), ("csv", csv(0..2000))] {
            let input = dir.path().join(format!("events.{format}.{}", codec.ext()));
            fs::write(&input, codec.compress(&text)).unwrap();
            let lake = dir.path().join(format!("lake_{format}_{}", codec.ext()));
            let summary = ingest(&input, &lake).run().await.unwrap();
            assert_eq!(summary.status, IngestStatus::Finished, "{input:?}");
            assert_eq!(summary.records_total, 2000);
            // Bytes read count the decompressed stream.
            assert_eq!(summary.input_bytes, text.len() as u64, "{input:?}");
            assert_eq!(ids(&lake), (0..2000).collect::<Vec<_>>(), "{input:?}");
        }
    }
}

#[tokio::test]
async fn a_crash_mid_file_resumes_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        for (format, text) in [("jsonl", jsonl(0..2000)), ("csv", csv(0..2000))] {
            let input = dir.path().join(format!("events.{format}.{}", codec.ext()));
            // Two members (frames): the crash falls in the second.
            let (a, b) = text.split_at(text.len() / 3);
            let mut bytes = codec.compress(a);
            bytes.extend(codec.compress(b));
            fs::write(&input, bytes).unwrap();
            let lake = dir.path().join(format!("lake_{format}_{}", codec.ext()));
            let first = ingest(&input, &lake)
                .stop_after_records(1250)
                .run()
                .await
                .unwrap();
            assert_eq!(first.status, IngestStatus::Stopped);
            assert_eq!(ids(&lake), (0..1200).collect::<Vec<_>>(), "{input:?}");
            let second = ingest(&input, &lake).run().await.unwrap();
            assert_eq!(second.status, IngestStatus::Finished);
            assert!(second.resumed);
            assert_eq!((second.records, second.records_total), (800, 2000));
            assert_eq!(ids(&lake), (0..2000).collect::<Vec<_>>(), "{input:?}");
            let third = ingest(&input, &lake).run().await.unwrap();
            assert_eq!(third.status, IngestStatus::AlreadyFinished);
        }
    }
}

#[tokio::test]
async fn an_input_grown_by_another_member_is_ingested_further_once() {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        // A finished job.
        let input = dir.path().join(format!("app.jsonl.{}", codec.ext()));
        fs::write(&input, codec.compress(&jsonl(0..500))).unwrap();
        let lake = dir.path().join(format!("lake_{}", codec.ext()));
        ingest(&input, &lake).run().await.unwrap();
        append(&input, &codec.compress(&jsonl(500..800)));
        let grown = ingest(&input, &lake).run().await.unwrap();
        assert_eq!(grown.status, IngestStatus::Finished, "{codec:?}");
        assert_eq!((grown.records, grown.records_total), (300, 800));
        assert_eq!(ids(&lake), (0..800).collect::<Vec<_>>(), "{codec:?}");
        // A job stopped mid-way whose input grew: read on to the new end.
        append(&input, &codec.compress(&jsonl(800..1000)));
        let lake = dir.path().join(format!("lake_stopped_{}", codec.ext()));
        fs::write(&input, codec.compress(&jsonl(0..500))).unwrap();
        ingest(&input, &lake)
            .stop_after_records(250)
            .run()
            .await
            .unwrap();
        append(&input, &codec.compress(&jsonl(500..900)));
        let resumed = ingest(&input, &lake).run().await.unwrap();
        assert_eq!(resumed.records_total, 900);
        assert_eq!(ids(&lake), (0..900).collect::<Vec<_>>(), "{codec:?}");
    }
    // CSV: the header once, the appended rows (a member without a header) once.
    let input = dir.path().join("rows.csv.gz");
    fs::write(&input, Codec::Gzip.compress(&csv(0..200))).unwrap();
    let lake = dir.path().join("lake_csv");
    ingest(&input, &lake).run().await.unwrap();
    append(&input, &Codec::Gzip.compress(&csv_rows(200..260)));
    ingest(&input, &lake).run().await.unwrap();
    assert_eq!(ids(&lake), (0..260).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_changed_compressed_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        let input = dir.path().join(format!("events.jsonl.{}", codec.ext()));
        fs::write(&input, codec.compress(&jsonl(0..1000))).unwrap();
        let lake = dir.path().join(format!("lake_{}", codec.ext()));
        ingest(&input, &lake)
            .stop_after_records(450)
            .run()
            .await
            .unwrap();
        let before = ids(&lake);
        // Record 10 edited, within what the job read; the compressed file is otherwise alike.
        let edited = jsonl(0..1000).replacen("\"id\":10,", "\"id\":99,", 1);
        fs::write(&input, codec.compress(&edited)).unwrap();
        let e = ingest(&input, &lake).run().await.unwrap_err();
        assert!(matches!(e, Error::InputChanged(_)), "{codec:?}: {e}");
        assert!(e.to_string().contains("events.jsonl."), "{e}");
        // The compressed file cut short within what the job read: it cannot give those bytes.
        let whole = codec.compress(&jsonl(0..1000));
        fs::write(&input, &whole[..whole.len() / 10]).unwrap();
        let e = ingest(&input, &lake).run().await.unwrap_err();
        assert!(matches!(e, Error::InputChanged(_)), "{codec:?}: {e}");
        assert!(e.to_string().contains("cannot be read again"), "{e}");
        // Cut short within what the job read (a whole stream, just shorter).
        fs::write(&input, codec.compress(&jsonl(0..300))).unwrap();
        let e = ingest(&input, &lake).run().await.unwrap_err();
        assert!(matches!(e, Error::InputChanged(_)), "{codec:?}: {e}");
        assert_eq!(ids(&lake), before, "a refused run wrote");
        // The same bytes compressed another way are the same input.
        let other_level = match codec {
            Codec::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                e.write_all(jsonl(0..1000).as_bytes()).unwrap();
                e.finish().unwrap()
            }
            Codec::Zstd => zstd::stream::encode_all(jsonl(0..1000).as_bytes(), 19).unwrap(),
        };
        fs::write(&input, other_level).unwrap();
        ingest(&input, &lake).run().await.unwrap();
        assert_eq!(ids(&lake), (0..1000).collect::<Vec<_>>());
    }

    // Through the binary: exit 7, and a finished job's input that changed is refused too.
    let input = dir.path().join("cli.jsonl.gz");
    let lake = dir.path().join("lake_cli");
    fs::write(&input, Codec::Gzip.compress(&jsonl(0..500))).unwrap();
    let args = ["ingest", s(&input), "--to", s(&lake)];
    run_ok(&args);
    fs::write(
        &input,
        Codec::Gzip.compress(&jsonl(0..500).replacen("n3", "n4", 1)),
    )
    .unwrap();
    let o = run_expect(&args, EXIT_INPUT_CHANGED);
    assert!(stderr(&o).contains("cli.jsonl.gz"), "{}", stderr(&o));
}

#[tokio::test]
async fn a_corrupt_or_cut_stream_is_an_error_naming_the_input_and_the_job_resumes_once_fixed() {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        let good = codec.compress(&jsonl(0..3000));
        let cut = good[..good.len() * 2 / 3].to_vec();
        let mut flipped = good.clone();
        let at = flipped.len() * 2 / 3;
        for b in &mut flipped[at..at + 16] {
            *b ^= 0x5a;
        }
        let mut cases = vec![("cut", cut), ("corrupt", flipped)];
        if let Codec::Gzip = codec {
            // The member's CRC-32 in its trailer: the data decodes, the check fails.
            let mut trailer = good.clone();
            let n = trailer.len();
            trailer[n - 6] ^= 0xff;
            cases.push(("trailer", trailer));
        }
        for (how, bad) in cases {
            let input = dir.path().join(format!("{how}.jsonl.{}", codec.ext()));
            fs::write(&input, &bad).unwrap();
            let lake = dir.path().join(format!("lake_{how}_{}", codec.ext()));
            let e = ingest(&input, &lake).run().await.unwrap_err();
            let msg = e.to_string();
            let chain = format!(
                "{msg}: {}",
                std::error::Error::source(&e).map_or(String::new(), |s| s.to_string())
            );
            assert!(
                msg.contains(&format!("{how}.jsonl.{}", codec.ext())),
                "{codec:?} {how}: {chain}"
            );
            // Bytes changed inside a compressed block may decode to other bytes before the
            // stream's check catches them: a malformed record then stops the run first.
            assert!(
                chain.contains(&format!("{} stream is corrupt or cut short", codec.name()))
                    || (how == "corrupt" && chain.contains("malformed record at")),
                "{codec:?} {how}: {chain}"
            );
            // What is visible is a prefix of the records, each once (all of them when only
            // the trailer is bad: its check fails after the last record).
            let visible = ids(&lake);
            assert_eq!(visible, (0..visible.len() as i64).collect::<Vec<_>>());
            assert!(how == "trailer" || visible.len() < 3000, "{codec:?} {how}");
            // The input fixed, the job resumes from its last checkpoint: every record once.
            fs::write(&input, &good).unwrap();
            let fixed = ingest(&input, &lake).run().await.unwrap();
            assert_eq!(fixed.status, IngestStatus::Finished);
            assert_eq!(ids(&lake), (0..3000).collect::<Vec<_>>(), "{codec:?} {how}");
        }
    }

    // Through the binary: exit 1, the input named.
    let good = Codec::Zstd.compress(&jsonl(0..500));
    let input = dir.path().join("cli.jsonl.zst");
    fs::write(&input, &good[..good.len() - 7]).unwrap();
    let lake = dir.path().join("lake_cli");
    let o = run_expect(&["ingest", s(&input), "--to", s(&lake)], EXIT_ERROR);
    let err = stderr(&o);
    assert!(
        err.contains("cli.jsonl.zst") && err.contains("zstd stream is corrupt or cut short"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn compressed_files_and_standard_input_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    // By extension, the format looked up through it.
    let jsonl_gz = dir.path().join("events.jsonl.gz");
    fs::write(&jsonl_gz, Codec::Gzip.compress(&jsonl(0..700))).unwrap();
    let csv_zst = dir.path().join("x.csv.zst");
    fs::write(&csv_zst, Codec::Zstd.compress(&csv(700..1000))).unwrap();
    let lake = dir.path().join("lake");
    run_ok(&[
        "ingest",
        s(&jsonl_gz),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
    ]);
    run_ok(&[
        "ingest",
        s(&csv_zst),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
    ]);
    assert_eq!(ids(&lake), (0..1000).collect::<Vec<_>>());

    // Unknown extension: by the first bytes, the format given.
    let blob = dir.path().join("events.bin");
    fs::write(&blob, Codec::Zstd.compress(&jsonl(0..100))).unwrap();
    let lake = dir.path().join("lake_blob");
    run_ok(&[
        "ingest",
        s(&blob),
        "--to",
        s(&lake),
        "--input-format",
        "jsonl",
    ]);
    assert_eq!(ids(&lake), (0..100).collect::<Vec<_>>());

    // Standard input, gzip then zstd: by the first bytes.
    for (codec, name) in [(Codec::Gzip, "stdin_gz"), (Codec::Zstd, "stdin_zst")] {
        let lake = dir.path().join(name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_filesink"))
            .args(["ingest", "-", "--to", s(&lake), "--job", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let bytes = codec.compress(&jsonl(0..400));
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&bytes).unwrap();
        drop(stdin);
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(ids(&lake), (0..400).collect::<Vec<_>>(), "{codec:?}");
    }
}

#[tokio::test]
async fn a_compressed_stream_resumes_after_what_the_job_read_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    for codec in CODECS {
        let lake = lake.join(codec.ext());
        let bytes = codec.compress(&jsonl(0..1000));
        let run = |bytes: Vec<u8>| {
            Ingest::new([Input::reader("events", std::io::Cursor::new(bytes))])
                .to_local(&lake)
                .checkpoint_every(CheckpointEvery::Rows(100))
                .job("compressed_stream")
        };
        let first = run(bytes.clone())
            .stop_after_records(450)
            .run()
            .await
            .unwrap();
        assert_eq!(first.records_total, 400);
        // Another stream is refused once its decompressed bytes differ from what was read.
        let other = codec.compress(&jsonl(0..1000).replacen("n3", "n4", 1));
        let e = run(other).run().await.unwrap_err();
        assert!(matches!(e, Error::InputChanged(_)), "{codec:?}: {e}");
        let second = run(bytes).run().await.unwrap();
        assert_eq!((second.records, second.records_total), (600, 1000));
        assert_eq!(ids(&lake), (0..1000).collect::<Vec<_>>(), "{codec:?}");
    }
}

/// Zero bytes after the last gzip member (padding that `gzip -t` accepts) end the stream, after
/// one member or several, in a file and on standard input; anything else after a member that
/// is not a member is a corrupt input, named.
#[test]
fn a_gzip_input_padded_with_zeros_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (members, pad) in [(1usize, 1usize), (2, 512), (3, 70_000)] {
        let mut bytes = Vec::new();
        for m in 0..members as i64 {
            bytes.extend(gz(jsonl(m * 100..m * 100 + 100).as_bytes()));
        }
        bytes.extend(vec![0u8; pad]);
        let input = d.join(format!("padded-{members}-{pad}.jsonl.gz"));
        fs::write(&input, &bytes).unwrap();
        let lake = d.join(format!("lake-{members}-{pad}"));
        run_ok(&["ingest", s(&input), "--to", s(&lake)]);
        assert_eq!(ids(&lake), (0..members as i64 * 100).collect::<Vec<_>>());
        let piped = d.join(format!("piped-{members}-{pad}"));
        let o = filesink_with_stdin(&["ingest", "-", "--job", "p", "--to", s(&piped)], &input);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(ids(&piped), (0..members as i64 * 100).collect::<Vec<_>>());
    }
    let mut bytes = gz(jsonl(0..10).as_bytes());
    bytes.extend([0, 0, 0, b'x']);
    let input = d.join("garbage.jsonl.gz");
    fs::write(&input, &bytes).unwrap();
    let o = run_expect(&["ingest", s(&input), "--to", s(&d.join("g"))], 1);
    assert!(
        stderr(&o).contains("garbage.jsonl.gz") && stderr(&o).contains("corrupt"),
        "{}",
        stderr(&o)
    );
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}
