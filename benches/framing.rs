//! What one thread frames of a file of JSON lines, the serial stage of the ingest
//! pipeline when a reader thread frames for every decoding thread.
//!
//! - `reader_thread`: `InputSource::next_raw` over the whole file, as the reader thread runs it
//!   (read, frame, line numbers, CRC-32C of the prefix).
//! - `ranges_one_lane`: the same file read in ranges by one lane (`Ranges::lane`): what each
//!   decoding thread does itself when it reads its own ranges (pread, frame, hand the position
//!   on).
//!
//! Framing only, no decoding. The reader thread's rate caps the pipeline, however many cores
//! decode and encode behind it; ranges spread the same work over the decoding threads.
//! Throughput is in bytes of input. The file goes to `$FILESINK_BENCH_DIR` (default: the
//! system temp dir).

mod common;

use arrow::datatypes::{DataType, Field, Schema};
use common::{bench_root, test_mode};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use filesink::ingest::{Input, InputFormat, InputSource, LaneNext, Prefix};

fn source(input: &Input) -> InputSource {
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("key", DataType::Utf8, true),
        Field::new("v", DataType::Utf8, true),
    ]);
    InputSource::new(
        vec![input.clone()],
        InputFormat::Jsonl,
        std::sync::Arc::new(schema),
        vec![Prefix::START],
    )
}

fn bench(c: &mut Criterion) {
    let lines = if test_mode() { 2_000 } else { 400_000 };
    let root = bench_root("framing");
    let path = root.0.join("in.jsonl");
    let text: String = (0..lines)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"key\":\"k{:02}\",\"v\":\"{}\"}}\n",
                i % 24,
                "x".repeat(40 + i % 90)
            )
        })
        .collect();
    std::fs::write(&path, &text).expect("write input");
    let input = Input::file(&path).expect("input");

    let mut group = c.benchmark_group("framing");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("reader_thread", |b| {
        b.iter(|| {
            let mut s = source(&input);
            let mut n = 0;
            while let Some(raw) = s.next_raw(8192).expect("read") {
                n += raw.records();
            }
            assert_eq!(n, lines);
        })
    });
    group.bench_function("ranges_one_lane", |b| {
        b.iter(|| {
            let ranges = source(&input).ranges().expect("a plain file");
            let mut lane = ranges.lane(0, 1);
            let mut n = 0;
            loop {
                match lane.next(1 << 20) {
                    Some(LaneNext::Records(raw)) => n += raw.records(),
                    Some(LaneNext::End(..)) => break,
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(n, lines);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
