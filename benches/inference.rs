//! Schema inference over wide records: 200 JSON lines of 100, 1,000 and 10,000 fields. The
//! time per field should stay flat as records widen (inference is linear in the fields it
//! sees); it was quadratic once (a list searched for every key of every record).

mod common;

use std::io::Write;

use common::bench_root;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use filesink::ingest::{infer_schema, Input, InputFormat};

fn wide(c: &mut Criterion) {
    let root = bench_root("inference");
    let mut group = c.benchmark_group("infer_wide_records");
    group.sample_size(10);
    for fields in [100usize, 1_000, 10_000] {
        let path = root.0.join(format!("wide-{fields}.jsonl"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for r in 0..200usize {
            let body: Vec<String> = (0..fields).map(|i| format!("\"f{i}\":{}", r * i)).collect();
            writeln!(f, "{{{}}}", body.join(",")).unwrap();
        }
        f.flush().unwrap();
        drop(f);
        let input = Input::file(&path).unwrap();
        group.throughput(Throughput::Elements((200 * fields) as u64));
        group.bench_with_input(BenchmarkId::from_parameter(fields), &input, |b, input| {
            b.iter(|| infer_schema(input, InputFormat::Jsonl, true, None, 1000).unwrap());
        });
    }
    group.finish();
}

criterion_group!(benches, wide);
criterion_main!(benches);
