//! What the criterion benches share: test mode, deterministic data, scratch directories.
// Each bench binary uses a different part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

/// `cargo test --benches` runs the binary without `--bench`: criterion then runs every
/// routine once, and the data is kept small so that this takes a second.
pub fn test_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--test")
}

/// Deterministic data: id int64, day string (24 values), user string, amount double.
pub fn generate(n_batches: usize, rows_per_batch: usize) -> Vec<RecordBatch> {
    generate_with_users(n_batches, rows_per_batch, Users::Random)
}

/// How [`generate_with_users`] fills the `user` column.
#[derive(Debug, Clone, Copy)]
pub enum Users {
    /// One of 100,000 users at random (`user-00042`).
    Random,
    /// The first rows name each of this many users once, so that every partition by user is
    /// opened; the rest are random among them (`user-0042`).
    EachFirst(usize),
}

/// [`generate`], with the `user` column filled as `users` says.
pub fn generate_with_users(
    n_batches: usize,
    rows_per_batch: usize,
    users: Users,
) -> Vec<RecordBatch> {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let mut rng = 0x5eed_u64;
    let mut row = 0usize;
    (0..n_batches)
        .map(|b| {
            let start = (b * rows_per_batch) as i64;
            let ids = Int64Array::from_iter_values(start..start + rows_per_batch as i64);
            let mut days = Vec::with_capacity(rows_per_batch);
            let mut user_values = Vec::with_capacity(rows_per_batch);
            let mut amounts = Vec::with_capacity(rows_per_batch);
            for _ in 0..rows_per_batch {
                let r = splitmix64(&mut rng);
                days.push(format!("2026-01-{:02}", 1 + r % 24));
                user_values.push(match users {
                    Users::Random => format!("user-{:05}", (r >> 8) % 100_000),
                    Users::EachFirst(n) => {
                        let user = if row < n {
                            row
                        } else {
                            ((r >> 8) % n as u64) as usize
                        };
                        format!("user-{user:04}")
                    }
                });
                row += 1;
                amounts.push(((r >> 32) % 1_000_000) as f64 / 100.0);
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(ids),
                Arc::new(StringArray::from(days)),
                Arc::new(StringArray::from(user_values)),
                Arc::new(Float64Array::from(amounts)),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("batch")
        })
        .collect()
}

pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A directory removed when dropped (criterion drops routine outputs outside the timing).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(root: &Path) -> Scratch {
        Scratch::named(root, "")
    }

    pub fn named(root: &Path, prefix: &str) -> Scratch {
        let dir = root.join(format!("{prefix}{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The root of a bench's scratch directories: `$FILESINK_BENCH_DIR`, or the temp directory.
pub fn bench_root(name: &str) -> Scratch {
    let base = std::env::var_os("FILESINK_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    Scratch::named(&base, &format!("filesink-bench-{name}-"))
}

/// Bytes of one JSON line of [`payload_batch`].
pub const LINE_BYTES: usize = 1024;

/// One string column, `size / LINE_BYTES` rows, each encoding to exactly [`LINE_BYTES`] of
/// JSON (`{"payload":"…"}` and a newline).
pub fn payload_batch(size: usize) -> RecordBatch {
    let value_len = LINE_BYTES - r#"{"payload":""}"#.len() - 1;
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = 0x5eed_u64;
    let values: Vec<String> = (0..size / LINE_BYTES)
        .map(|_| {
            (0..value_len)
                .map(|_| alphabet[(splitmix64(&mut rng) % alphabet.len() as u64) as usize] as char)
                .collect()
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "payload",
        DataType::Utf8,
        false,
    )]));
    let column: ArrayRef = Arc::new(StringArray::from(values));
    RecordBatch::try_new(schema, vec![column]).expect("batch")
}

/// `batch` as JSON lines, the bytes the sink's JSON-lines files hold.
pub fn encode_json_lines(batch: &RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = arrow::json::LineDelimitedWriter::new(&mut out);
    w.write(batch).expect("encode");
    w.finish().expect("finish");
    out
}

/// Writes `batches` through a fresh writer of `sink`, with a checkpoint (prepare_commit +
/// commit_all) after every `k` batches; the last checkpoint ends the input, so every file is
/// committed.
pub async fn write_with_checkpoints(sink: &filesink::Sink, batches: &[RecordBatch], k: usize) {
    let mut writer = sink.create_writer();
    let committer = sink.committer();
    let checkpoints = batches.len().div_ceil(k);
    for (i, chunk) in batches.chunks(k).enumerate() {
        for batch in chunk {
            writer.write(batch).await.expect("write");
        }
        if i + 1 == checkpoints {
            writer.end_of_input().await.expect("end of input");
        }
        let committables = writer
            .prepare_commit(i as u64 + 1)
            .await
            .expect("prepare")
            .committables;
        committer.commit_all(&committables).await.expect("commit");
    }
}
