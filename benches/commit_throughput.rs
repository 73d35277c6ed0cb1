//! Roll and commit throughput of many small part files, against the
//! syscall floor measured in the same run.
//!
//! One iteration is one checkpoint of N files of one size (4 KiB, 64 KiB, 1 MiB) in one
//! directory; throughput is in files. Per file size (group `commit_throughput_<size>`):
//!
//! - `sink/<N>`: JSON lines through the sink, rolling after every write
//!   (`part_size_bytes_max` = 1 byte), so N writes make N files; then `prepare_commit` (seal:
//!   one fdatasync per file, one fsync per directory) and `commit_all` (one rename per file,
//!   one fsync per directory). The bytes written are the same pre-sized JSON lines each time.
//! - `floor_per_file/1`: the sequential syscall floor the issue names, one file at a time:
//!   create, write, fdatasync, close, `renameat2(RENAME_NOREPLACE)`, open + fsync + close the
//!   directory. Two flushes per file, no group commit.
//! - `floor_grouped/<N>`: the sink's protocol with nothing else: N × (create, write,
//!   fdatasync, close), fsync the directory, N renames, fsync the directory. The best the
//!   sink's syscall sequence can do.
//! - `floor_grouped_parallel/<N>`: the same with the N fdatasyncs issued from up to 16
//!   threads at once, which the file system's journal batches into fewer commits. This is
//!   what the sink could do, not what it does.
//!
//! Files committed in an iteration are deleted after it, outside the timing. Files go to
//! `$FILESINK_BENCH_DIR` (default: the system temp dir).

mod common;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{bench_root, encode_json_lines, payload_batch, test_mode, Scratch};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use filesink::storage::local::fs::{rename_noreplace, sync_dir};
use filesink::{FileFormat, RollingPolicy, Sink};

/// Threads for `floor_grouped_parallel`.
const SYNC_THREADS_MAX: usize = 16;

fn bench(c: &mut Criterion) {
    let test = test_mode();
    let sizes: &[(usize, &str)] = if test {
        &[(4 << 10, "4KiB")]
    } else {
        &[(4 << 10, "4KiB"), (64 << 10, "64KiB"), (1 << 20, "1MiB")]
    };
    let files_per_checkpoint: &[usize] = if test { &[1, 10] } else { &[1, 10, 100] };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let root = bench_root("commit_throughput");

    for &(size, label) in sizes {
        let batch = payload_batch(size);
        let bytes = encode_json_lines(&batch);
        assert_eq!(
            bytes.len(),
            size,
            "the payload encodes to exactly one file size"
        );
        let mut group = c.benchmark_group(format!("commit_throughput_{label}"));
        group.sampling_mode(SamplingMode::Flat);

        for &n in files_per_checkpoint {
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(BenchmarkId::new("sink", n), |b| {
                let dir = Scratch::new(&root.0);
                let sink = Sink::local(&dir.0)
                    .expect("sink")
                    .format(FileFormat::json_lines())
                    .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(1))
                    .build()
                    .expect("build");
                let mut writer = sink.create_writer();
                let committer = sink.committer();
                let mut checkpoint = 0u64;
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        checkpoint += 1;
                        let start = Instant::now();
                        let committables = rt.block_on(async {
                            for _ in 0..n {
                                writer.write(&batch).await.expect("write");
                            }
                            let cs = writer
                                .prepare_commit(checkpoint)
                                .await
                                .expect("prepare")
                                .committables;
                            committer.commit_all(&cs).await.expect("commit");
                            cs
                        });
                        timed += start.elapsed();
                        assert_eq!(committables.len(), n);
                        for c in &committables {
                            assert_eq!(c.size_bytes, size as u64);
                            std::fs::remove_file(dir.0.join(&c.final_path)).expect("remove");
                        }
                    }
                    timed
                })
            });
        }

        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("floor_per_file", 1), |b| {
            let dir = Scratch::new(&root.0);
            let mut next = 0usize;
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let (hidden, name) = names(&dir.0, next);
                    next += 1;
                    let start = Instant::now();
                    let mut f = create(&hidden);
                    f.write_all(&bytes).expect("write");
                    f.sync_data().expect("fdatasync");
                    drop(f);
                    rename_noreplace(&hidden, &name).expect("rename");
                    fsync_dir(&dir.0);
                    timed += start.elapsed();
                    std::fs::remove_file(&name).expect("remove");
                }
                timed
            })
        });

        for &n in files_per_checkpoint.iter().filter(|&&n| n > 1) {
            group.throughput(Throughput::Elements(n as u64));
            for parallel in [false, true] {
                let id = if parallel {
                    "floor_grouped_parallel"
                } else {
                    "floor_grouped"
                };
                group.bench_function(BenchmarkId::new(id, n), |b| {
                    let dir = Scratch::new(&root.0);
                    let mut next = 0usize;
                    b.iter_custom(|iters| {
                        let mut timed = Duration::ZERO;
                        for _ in 0..iters {
                            let paths: Vec<(PathBuf, PathBuf)> =
                                (next..next + n).map(|i| names(&dir.0, i)).collect();
                            next += n;
                            let start = Instant::now();
                            let files: Vec<File> = paths
                                .iter()
                                .map(|(hidden, _)| {
                                    let mut f = create(hidden);
                                    f.write_all(&bytes).expect("write");
                                    f
                                })
                                .collect();
                            if parallel {
                                let per_thread = n.div_ceil(SYNC_THREADS_MAX);
                                std::thread::scope(|s| {
                                    for chunk in files.chunks(per_thread) {
                                        s.spawn(move || {
                                            for f in chunk {
                                                f.sync_data().expect("fdatasync");
                                            }
                                        });
                                    }
                                });
                            } else {
                                for f in &files {
                                    f.sync_data().expect("fdatasync");
                                }
                            }
                            drop(files);
                            fsync_dir(&dir.0);
                            for (hidden, name) in &paths {
                                rename_noreplace(hidden, name).expect("rename");
                            }
                            fsync_dir(&dir.0);
                            timed += start.elapsed();
                            for (_, name) in &paths {
                                std::fs::remove_file(name).expect("remove");
                            }
                        }
                        timed
                    })
                });
            }
        }
        group.finish();
    }
}

fn names(dir: &Path, i: usize) -> (PathBuf, PathBuf) {
    (
        dir.join(format!(".part-{i}.jsonl.tmp")),
        dir.join(format!("part-{i}.jsonl")),
    )
}

fn create(path: &Path) -> File {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .expect("create")
}

/// Opens, fsyncs and closes a directory, as the sink's commit does.
fn fsync_dir(dir: &Path) {
    sync_dir(dir).expect("fsync directory");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
