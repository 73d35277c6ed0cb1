//! `filesink bench`: how fast part files roll and commit on a directory you name, next to the
//! file system's own floor, so that checkpoint interval and part size can be sized from
//! numbers of this machine and this disk.
//!
//! Three measurements, in one run, in a fresh directory that is removed afterwards:
//!
//! 1. **Roll and commit.** `--files` part files of `--file-size` bytes, `--files-per-checkpoint`
//!    at a time, spread over `--partitions` Hive partitions, through the sink: files/s, MB/s
//!    and the latency of each checkpoint (`prepare_commit` + `commit`, p50 and p99).
//! 2. **The syscall floor**, the same files with nothing but the system calls: one file at a
//!    time (create, write, fdatasync, close, rename without replace, directory fsync), and in
//!    groups of `--files-per-checkpoint` (the sink's sequence: every file fdatasynced, each
//!    directory fsynced, every file renamed, each directory fsynced again). The ratios say how
//!    close the sink gets to the disk and how much group commit buys.
//! 3. **Ingest**, a short version of the crate's benchmarks: the same generated rows through
//!    the sink (one checkpoint) and through the format's plain writer into one file plus one
//!    fdatasync; rows/s, the time ratio, and the peak resident memory of the sink's run against
//!    its memory budget (`SinkBuilder::buffer_bytes_max`).
//!
//! Only the library's public API is used. The benchmarks behind the published numbers are
//! the criterion benches in `benches/` (see `docs/BENCHMARKS.md`).

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use filesink::bucket::HivePartitioner;
use filesink::storage::local::fs::{rename_noreplace, sync_dir as fsync_dir};
use filesink::{FileFormat, RollingPolicy, Sink, SinkBuilder};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::util::{human_bytes, parse_size};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Longest generated payload value; smaller files get shorter values (a file has about 32
/// rows), so that calibration can hit the asked size within a few percent.
const PAYLOAD_VALUE_BYTES_MAX: usize = 1000;
/// Rows of the ingest measurement.
const INGEST_ROWS: usize = 32 * INGEST_BATCH_ROWS;
/// Rows per batch of the ingest measurement.
const INGEST_BATCH_ROWS: usize = 8192;

/// Measure roll and commit throughput, and the file system's syscall floor, in a directory
/// (removed afterwards), to size checkpoint interval and part size.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Directory whose file system is measured, or `s3://bucket/prefix`; a fresh
    /// `filesink-bench-<uuid>` is made there and removed afterwards [default: the current
    /// directory]
    #[arg(long, value_name = "DIR|URL")]
    pub to: Option<String>,
    /// Part file format
    #[arg(long, value_enum, default_value_t = BenchFormat::Parquet)]
    pub format: BenchFormat,
    /// Size of each part file (`4KiB`, `64KiB`, `1MiB`, ...)
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_file_size)]
    pub file_size: u64,
    /// Part files to write in the roll-and-commit measurement
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub files: u64,
    /// Files per checkpoint (one group commit)
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub files_per_checkpoint: u64,
    /// Hive partitions (directories) that the files and the ingested rows are spread over
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub partitions: u64,
    /// Print the results as JSON
    #[arg(long)]
    pub json: bool,
}

/// The part file format of `filesink bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchFormat {
    /// Parquet, Snappy
    Parquet,
    /// JSON lines
    Jsonl,
    /// CSV with a header line
    Csv,
}

impl BenchFormat {
    fn file_format(self) -> FileFormat {
        match self {
            BenchFormat::Parquet => FileFormat::parquet(),
            BenchFormat::Jsonl => FileFormat::json_lines(),
            BenchFormat::Csv => FileFormat::csv(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            BenchFormat::Parquet => "parquet",
            BenchFormat::Jsonl => "jsonl",
            BenchFormat::Csv => "csv",
        }
    }
}

fn parse_file_size(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("the file size must be positive".to_string()),
        n if n > 1 << 30 => Err(format!(
            "`{s}` is more than the 1 GiB this benchmark writes"
        )),
        n => Ok(n),
    }
}

/// Runs `filesink bench`.
pub async fn run(args: &BenchArgs) -> Result<(), BoxError> {
    if let Some(url) = args.to.as_deref().filter(|t| t.starts_with("s3://")) {
        return s3::run(args, url).await;
    }
    let parent = match &args.to {
        // Every local form `ingest --to` takes: `dir`, `./dir`, `/abs/dir`, `file:///abs/dir`.
        Some(dir) => match filesink::storage::Location::parse(dir).map_err(|e| e.to_string())? {
            filesink::storage::Location::Local(path) => path,
            other => return Err(format!("`{other}` is not a directory").into()),
        },
        None => std::env::current_dir()?,
    };
    if parent.exists() && !parent.is_dir() {
        return Err(format!("`{}` is not a directory", parent.display()).into());
    }
    let work = WorkDir::create(&parent)?;
    let file_system = file_system_name(&work.0);
    note(&format!(
        "measuring in `{}` ({file_system}); it is removed at the end",
        work.0.display()
    ));

    let roll = roll_and_commit(args, &work.0).await?;
    let floor_per_file = floor(args, &work.0.join("floor-per-file"), 1, roll.file_bytes)?;
    let floor_grouped = floor(
        args,
        &work.0.join("floor-grouped"),
        args.files_per_checkpoint,
        roll.file_bytes,
    )?;
    let ingest = ingest(args, &work.0).await?;

    let report = Report {
        directory: work.0.display().to_string(),
        file_system,
        format: args.format,
        file_size_bytes: args.file_size,
        files: args.files,
        files_per_checkpoint: args.files_per_checkpoint,
        partitions: args.partitions,
        sink_vs_floor: roll.files_per_sec / floor_per_file.files_per_sec,
        sink_vs_grouped_floor: roll.files_per_sec / floor_grouped.files_per_sec,
        roll,
        floor_per_file,
        floor_grouped,
        ingest,
    };
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&report)?;
        s.push('\n');
        s
    } else {
        render(&report)
    };
    drop(work);
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[derive(Debug, Serialize)]
struct Report {
    directory: String,
    file_system: String,
    format: BenchFormat,
    file_size_bytes: u64,
    files: u64,
    files_per_checkpoint: u64,
    partitions: u64,
    roll: Roll,
    floor_per_file: Floor,
    floor_grouped: Floor,
    /// Sink files/s over the one-file-at-a-time floor.
    sink_vs_floor: f64,
    /// Sink files/s over the grouped floor.
    sink_vs_grouped_floor: f64,
    ingest: Ingest,
}

#[derive(Debug, Serialize)]
struct Roll {
    files: u64,
    checkpoints: u64,
    /// Average size of a committed file (the payload is sized to `--file-size`).
    file_bytes: u64,
    bytes: u64,
    seconds: f64,
    files_per_sec: f64,
    mb_per_sec: f64,
    /// `prepare_commit` + `commit` of one checkpoint.
    checkpoint_latency_ms: Percentiles,
    prepare_commit_latency_ms: Percentiles,
    commit_latency_ms: Percentiles,
}

#[derive(Debug, Serialize)]
struct Floor {
    files: u64,
    files_per_group: u64,
    seconds: f64,
    files_per_sec: f64,
    mb_per_sec: f64,
    /// Per file (one at a time) or per group.
    latency_ms: Percentiles,
}

#[derive(Debug, Serialize)]
struct Ingest {
    rows: u64,
    partitions: u64,
    files: usize,
    sink_seconds: f64,
    sink_rows_per_sec: f64,
    plain_seconds: f64,
    plain_rows_per_sec: f64,
    /// Sink time over plain-writer time.
    time_ratio: f64,
    /// Peak resident set of the process during the sink's run (`VmHWM`), if the kernel tells.
    sink_peak_rss_bytes: Option<u64>,
    /// The resident set before the sink's run.
    rss_before_bytes: Option<u64>,
    /// The sink's memory budget, `SinkBuilder::buffer_bytes_max`.
    buffer_bytes_max: u64,
}

#[derive(Debug, Serialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
    max: f64,
    count: usize,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Percentiles {
        samples.sort();
        let at = |q: f64| -> f64 {
            if samples.is_empty() {
                return 0.0;
            }
            // Nearest rank.
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[rank - 1].as_secs_f64() * 1e3
        };
        Percentiles {
            p50: at(0.50),
            p99: at(0.99),
            max: at(1.0),
            count: samples.len(),
        }
    }
}

/// Measurement 1: files through the sink, `--files-per-checkpoint` per checkpoint.
async fn roll_and_commit(args: &BenchArgs, work: &Path) -> Result<Roll, BoxError> {
    let base = sink_builder(&work.join("roll"), args.format, args.partitions)?;
    roll_with(args, work, base).await
}

/// Measurement 1 on any sink: `work` is a local scratch directory for the calibration.
async fn roll_with(args: &BenchArgs, work: &Path, base: SinkBuilder) -> Result<Roll, BoxError> {
    let value_len = payload_value_len(args.file_size);
    let rows_per_file = calibrate(
        args.format,
        args.file_size,
        value_len,
        &work.join("calibrate"),
    )
    .await?;
    let batches = payload_batches(rows_per_file, value_len, args.partitions);
    let sink = base
        .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(1))
        .build()?;
    let mut writer = sink.create_writer();
    let committer = sink.committer();

    let progress = Progress::start("roll and commit", args.files);
    let (mut checkpoint_ms, mut prepare_ms, mut commit_ms) = (Vec::new(), Vec::new(), Vec::new());
    let (mut files, mut bytes, mut checkpoint) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    while files < args.files {
        let n = args.files_per_checkpoint.min(args.files - files);
        for i in 0..n {
            writer
                .write(&batches[((files + i) % args.partitions) as usize])
                .await?;
        }
        checkpoint += 1;
        let t0 = Instant::now();
        let committables = writer.prepare_commit(checkpoint).await?.committables;
        let t1 = Instant::now();
        let summary = committer.commit_all(&committables).await?;
        let t2 = Instant::now();
        if committables.len() as u64 != n || summary.committed as u64 != n {
            return Err(format!(
                "checkpoint {checkpoint} committed {} of {n} files",
                summary.committed
            )
            .into());
        }
        prepare_ms.push(t1 - t0);
        commit_ms.push(t2 - t1);
        checkpoint_ms.push(t2 - t0);
        bytes += committables.iter().map(|c| c.size_bytes).sum::<u64>();
        files += n;
        progress.advance(n);
    }
    let seconds = start.elapsed().as_secs_f64();
    progress.finish(&format!("{:.0} files/s", files as f64 / seconds));
    Ok(Roll {
        files,
        checkpoints: checkpoint,
        file_bytes: bytes / files.max(1),
        bytes,
        seconds,
        files_per_sec: files as f64 / seconds,
        mb_per_sec: bytes as f64 / seconds / 1e6,
        checkpoint_latency_ms: Percentiles::of(checkpoint_ms),
        prepare_commit_latency_ms: Percentiles::of(prepare_ms),
        commit_latency_ms: Percentiles::of(commit_ms),
    })
}

/// Measurement 2: the same number of files of `file_bytes` with nothing but system calls,
/// `group` files at a time (1: one file at a time, each with its own directory fsync).
fn floor(args: &BenchArgs, dir: &Path, group: u64, file_bytes: u64) -> Result<Floor, BoxError> {
    let partition_dirs: Vec<PathBuf> = (0..args.partitions)
        .map(|p| dir.join(format!("part={p}")))
        .collect();
    for d in &partition_dirs {
        std::fs::create_dir_all(d)?;
    }
    fsync_dir(dir)?;
    let data = payload_bytes(file_bytes as usize);
    let label = if group == 1 {
        "syscall floor, one file at a time".to_string()
    } else {
        format!("syscall floor, {group} files per group")
    };
    let progress = Progress::start(&label, args.files);
    let mut latencies = Vec::new();
    let mut files = 0u64;
    let start = Instant::now();
    while files < args.files {
        let n = group.min(args.files - files);
        let paths: Vec<(PathBuf, PathBuf, usize)> = (files..files + n)
            .map(|i| {
                let p = (i % args.partitions) as usize;
                let d = &partition_dirs[p];
                (
                    d.join(format!(".part-{i}.tmp")),
                    d.join(format!("part-{i}")),
                    p,
                )
            })
            .collect();
        let t0 = Instant::now();
        if group == 1 {
            let (hidden, name, p) = &paths[0];
            let mut f = create_new(hidden)?;
            f.write_all(&data)?;
            f.sync_data()?;
            drop(f);
            rename_noreplace(hidden, name)?;
            fsync_dir(&partition_dirs[*p])?;
        } else {
            // As the sink does: write every file, then fdatasync them.
            let mut open = Vec::with_capacity(paths.len());
            for (hidden, _, _) in &paths {
                let mut f = create_new(hidden)?;
                f.write_all(&data)?;
                open.push(f);
            }
            for f in &open {
                f.sync_data()?;
            }
            drop(open);
            let mut touched: Vec<usize> = paths.iter().map(|(_, _, p)| *p).collect();
            touched.sort_unstable();
            touched.dedup();
            for &p in &touched {
                fsync_dir(&partition_dirs[p])?;
            }
            for (hidden, name, _) in &paths {
                rename_noreplace(hidden, name)?;
            }
            for &p in &touched {
                fsync_dir(&partition_dirs[p])?;
            }
        }
        latencies.push(t0.elapsed());
        files += n;
        progress.advance(n);
    }
    let seconds = start.elapsed().as_secs_f64();
    progress.finish(&format!("{:.0} files/s", files as f64 / seconds));
    Ok(Floor {
        files,
        files_per_group: group,
        seconds,
        files_per_sec: files as f64 / seconds,
        mb_per_sec: (files * file_bytes) as f64 / seconds / 1e6,
        latency_ms: Percentiles::of(latencies),
    })
}

/// Measurement 3: generated rows through the sink (one checkpoint) and through the format's
/// plain writer (one file, one fdatasync).
async fn ingest(args: &BenchArgs, work: &Path) -> Result<Ingest, BoxError> {
    let batches = ingest_batches(args.partitions);
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
    let progress = Progress::start("ingest", 2 * batches.len() as u64);

    let plain_dir = work.join("ingest-plain");
    std::fs::create_dir_all(&plain_dir)?;
    let t0 = Instant::now();
    plain_write(
        args.format,
        &plain_dir.join(format!("data.{}", args.format.name())),
        &batches,
        &progress,
    )?;
    let plain_seconds = t0.elapsed().as_secs_f64();

    let sink = sink_builder(&work.join("ingest-sink"), args.format, args.partitions)?.build()?;
    let rss_before_bytes = trim_and_reset_peak_rss();
    let t0 = Instant::now();
    let mut writer = sink.create_writer();
    for batch in &batches {
        writer.write(batch).await?;
        progress.advance(1);
    }
    writer.end_of_input().await?;
    let committables = writer.prepare_commit(1).await?.committables;
    let summary = sink.committer().commit_all(&committables).await?;
    let sink_seconds = t0.elapsed().as_secs_f64();
    let sink_peak_rss_bytes = proc_status_bytes("VmHWM:");
    progress.finish(&format!(
        "{:.0} rows/s through the sink",
        rows as f64 / sink_seconds
    ));

    Ok(Ingest {
        rows,
        partitions: args.partitions,
        files: summary.committed,
        sink_seconds,
        sink_rows_per_sec: rows as f64 / sink_seconds,
        plain_seconds,
        plain_rows_per_sec: rows as f64 / plain_seconds,
        time_ratio: sink_seconds / plain_seconds,
        sink_peak_rss_bytes,
        rss_before_bytes,
        buffer_bytes_max: SinkBuilder::DEFAULT_BUFFER_BYTES_MAX,
    })
}

fn plain_write(
    format: BenchFormat,
    path: &Path,
    batches: &[RecordBatch],
    progress: &Progress,
) -> Result<(), BoxError> {
    let file = create_new(path)?;
    let file = match format {
        BenchFormat::Parquet => {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build();
            let mut w =
                parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(props))?;
            for b in batches {
                w.write(b)?;
                progress.advance(1);
            }
            w.finish()?;
            // The footer is written; the writer only hands out its file by reference now.
            w.inner().try_clone()?
        }
        BenchFormat::Jsonl => {
            let mut w = arrow::json::LineDelimitedWriter::new(BufWriter::new(file));
            for b in batches {
                w.write(b)?;
                progress.advance(1);
            }
            w.finish()?;
            w.into_inner().into_inner().map_err(|e| e.into_error())?
        }
        BenchFormat::Csv => {
            let mut w = arrow::csv::Writer::new(BufWriter::new(file));
            for b in batches {
                w.write(b)?;
                progress.advance(1);
            }
            w.into_inner().into_inner().map_err(|e| e.into_error())?
        }
    };
    file.sync_data()?;
    Ok(())
}

fn sink_builder(
    base: &Path,
    format: BenchFormat,
    partitions: u64,
) -> Result<SinkBuilder, BoxError> {
    let builder = Sink::local(base)?.format(format.file_format());
    Ok(if partitions > 1 {
        builder.bucket_assigner(HivePartitioner::new(["part"])?)
    } else {
        builder
    })
}

/// Rows of `value_len`-byte values per part file so that a file is about `file_size` bytes:
/// two probe files through the sink give the per-row and fixed bytes of the format.
async fn calibrate(
    format: BenchFormat,
    file_size: u64,
    value_len: usize,
    dir: &Path,
) -> Result<usize, BoxError> {
    let sink = Sink::local(dir)?
        .format(format.file_format())
        .rolling_policy(RollingPolicy::default().with_part_size_bytes_max(1))
        .build()?;
    let mut writer = sink.create_writer();
    let (r1, r2) = (4usize, 8usize);
    writer.write(&payload_batch(r1, value_len, None)).await?;
    writer.write(&payload_batch(r2, value_len, None)).await?;
    let committables = writer.prepare_commit(1).await?.committables;
    sink.committer().commit_all(&committables).await?;
    let (s1, s2) = match committables.as_slice() {
        [a, b] => (a.size_bytes as f64, b.size_bytes as f64),
        _ => return Err("calibration did not produce two files".into()),
    };
    let per_row = ((s2 - s1) / (r2 - r1) as f64).max(1.0);
    let fixed = (s1 - per_row * r1 as f64).max(0.0);
    let rows = ((file_size as f64 - fixed) / per_row).round();
    std::fs::remove_dir_all(dir)?;
    Ok(rows.max(1.0) as usize)
}

fn payload_value_len(file_size: u64) -> usize {
    ((file_size / 32) as usize).clamp(16, PAYLOAD_VALUE_BYTES_MAX)
}

/// One batch per partition, each a part file's worth of payload rows.
fn payload_batches(rows: usize, value_len: usize, partitions: u64) -> Vec<RecordBatch> {
    if partitions == 1 {
        return vec![payload_batch(rows, value_len, None)];
    }
    (0..partitions)
        .map(|p| payload_batch(rows, value_len, Some(&p.to_string())))
        .collect()
}

/// `rows` rows of distinct, incompressible `value_len`-character values, and a `part` column
/// when `partition` is given.
fn payload_batch(rows: usize, value_len: usize, partition: Option<&str>) -> RecordBatch {
    let mut rng = 0x5eed_u64 ^ rows as u64;
    let values: Vec<String> = (0..rows)
        .map(|_| random_text(&mut rng, value_len))
        .collect();
    let mut fields = vec![Field::new("payload", DataType::Utf8, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from(values))];
    if let Some(p) = partition {
        fields.push(Field::new("part", DataType::Utf8, false));
        columns.push(Arc::new(StringArray::from(vec![p; rows])));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("columns match the schema")
}

/// The bytes one floor file holds.
fn payload_bytes(len: usize) -> Vec<u8> {
    let mut rng = 0x5eed_u64;
    random_text(&mut rng, len).into_bytes()
}

fn random_text(rng: &mut u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..len)
        .map(|_| ALPHABET[(splitmix64(rng) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

/// Ingest rows: id int64, part string (`partitions` values), user string, amount double.
fn ingest_batches(partitions: u64) -> Vec<RecordBatch> {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]));
    let mut rng = 0x5eed_u64;
    (0..INGEST_ROWS / INGEST_BATCH_ROWS)
        .map(|b| {
            let start = (b * INGEST_BATCH_ROWS) as i64;
            let mut parts = Vec::with_capacity(INGEST_BATCH_ROWS);
            let mut users = Vec::with_capacity(INGEST_BATCH_ROWS);
            let mut amounts = Vec::with_capacity(INGEST_BATCH_ROWS);
            for i in 0..INGEST_BATCH_ROWS {
                let r = splitmix64(&mut rng);
                let row = b * INGEST_BATCH_ROWS + i;
                // The first rows name every partition once, the rest are random.
                let p = if (row as u64) < partitions {
                    row as u64
                } else {
                    r % partitions
                };
                parts.push(p.to_string());
                users.push(format!("user-{:05}", (r >> 8) % 100_000));
                amounts.push(((r >> 32) % 1_000_000) as f64 / 100.0);
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(
                    start..start + INGEST_BATCH_ROWS as i64,
                )),
                Arc::new(StringArray::from(parts)),
                Arc::new(StringArray::from(users)),
                Arc::new(Float64Array::from(amounts)),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("columns match the schema")
        })
        .collect()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Frees what the allocator holds, resets the kernel's peak-RSS mark to the current resident
/// set, and returns that resident set. `None` where `/proc` does not tell.
fn trim_and_reset_peak_rss() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    // "5" resets VmHWM (Linux 4.0 and later).
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    proc_status_bytes("VmRSS:")
}

fn proc_status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The file system type of `path`, from `statfs` (Linux), for the report.
fn file_system_name(path: &Path) -> String {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        if let Ok(p) = CString::new(path.as_os_str().as_bytes()) {
            // SAFETY: `p` is a valid NUL-terminated string and `st` a valid out-pointer.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            if unsafe { libc::statfs(p.as_ptr(), &mut st) } == 0 {
                #[allow(clippy::unnecessary_cast)]
                let magic = st.f_type as u64;
                return match magic {
                    0xEF53 => "ext4".to_string(),
                    0x5846_5342 => "xfs".to_string(),
                    0x9123_683E => "btrfs".to_string(),
                    0x0102_1994 => "tmpfs".to_string(),
                    0x794C_7630 => "overlayfs".to_string(),
                    0x2FC1_2FC1 => "zfs".to_string(),
                    0x6969 => "nfs".to_string(),
                    0xFF53_4D42 => "cifs".to_string(),
                    0x6573_5546 => "fuse".to_string(),
                    0xF2F5_2010 => "f2fs".to_string(),
                    other => format!("file system 0x{other:x}"),
                };
            }
        }
    }
    let _ = path;
    "unknown file system".to_string()
}

/// The fresh working directory, removed when dropped (also on errors).
/// The fresh directory the benchmark works in, and the directories above it that the
/// benchmark had to create (deepest first); all are removed at the end, nothing else.
struct WorkDir(PathBuf, Vec<PathBuf>);

impl WorkDir {
    fn create(parent: &Path) -> Result<WorkDir, BoxError> {
        let mut made = Vec::new();
        let mut missing = Some(parent);
        while let Some(p) = missing.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
            made.push(p.to_path_buf());
            missing = p.parent();
        }
        // Created outermost first, so that a failure leaves only what is listed to remove.
        let mut work = WorkDir(PathBuf::new(), Vec::new());
        for p in made.iter().rev() {
            std::fs::create_dir(p).map_err(|e| format!("cannot create `{}`: {e}", p.display()))?;
            work.1.insert(0, p.clone());
        }
        let dir = parent.join(format!("filesink-bench-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        work.0 = dir;
        Ok(work)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            if let Err(e) = std::fs::remove_dir_all(&self.0) {
                note(&format!("could not remove `{}`: {e}", self.0.display()));
                return;
            }
        }
        // Only if still empty: anything another process put there stays.
        for dir in &self.1 {
            if let Err(e) = std::fs::remove_dir(dir) {
                note(&format!("could not remove `{}`: {e}", dir.display()));
                return;
            }
        }
    }
}

/// A message on standard error (errors writing it are ignored).
fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "filesink bench: {msg}");
}

/// Progress on standard error: a bar on a terminal, a line per phase otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    label: String,
}

impl Progress {
    fn start(label: &str, total: u64) -> Progress {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix:>36} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(label.to_string());
            Some(bar)
        } else {
            note(&format!("{label}..."));
            None
        };
        Progress {
            bar,
            label: label.to_string(),
        }
    }

    fn advance(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    fn finish(&self, summary: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        note(&format!("{}: {summary}", self.label));
    }
}

fn render(r: &Report) -> String {
    let mut s = String::new();
    let partitions = match r.partitions {
        1 => "1 directory".to_string(),
        n => format!("{n} partitions"),
    };
    let _ = writeln!(
        s,
        "filesink bench on {} ({}), format {}",
        r.directory,
        r.file_system,
        r.format.name()
    );
    let _ = writeln!(
        s,
        "{} files of {} (asked {}), {} per checkpoint, {partitions}\n",
        r.roll.files,
        human_bytes(r.roll.file_bytes),
        human_bytes(r.file_size_bytes),
        r.files_per_checkpoint,
    );
    let _ = writeln!(
        s,
        "{:<40} {:>9} {:>8} {:>12} {:>12} {:>9}",
        "roll and commit", "files/s", "MB/s", "p50", "p99", "vs floor"
    );
    let ms = |v: f64| format!("{v:.1} ms");
    let floor = r.floor_per_file.files_per_sec;
    let _ = writeln!(
        s,
        "{:<40} {:>9.1} {:>8.1} {:>12} {:>12} {:>8.2}x",
        format!("sink, {} files per checkpoint", r.files_per_checkpoint),
        r.roll.files_per_sec,
        r.roll.mb_per_sec,
        ms(r.roll.checkpoint_latency_ms.p50),
        ms(r.roll.checkpoint_latency_ms.p99),
        r.roll.files_per_sec / floor,
    );
    for (label, f) in [
        ("syscall floor, one file at a time", &r.floor_per_file),
        ("syscall floor, grouped like the sink", &r.floor_grouped),
    ] {
        let _ = writeln!(
            s,
            "{:<40} {:>9.1} {:>8.1} {:>12} {:>12} {:>8.2}x",
            label,
            f.files_per_sec,
            f.mb_per_sec,
            ms(f.latency_ms.p50),
            ms(f.latency_ms.p99),
            f.files_per_sec / floor,
        );
    }
    let _ = writeln!(
        s,
        "\nLatency: the sink's is per checkpoint (prepare_commit p50 {}, commit p50 {}); the \
         floor's per file, or per group of {}.",
        ms(r.roll.prepare_commit_latency_ms.p50),
        ms(r.roll.commit_latency_ms.p50),
        r.floor_grouped.files_per_group,
    );
    let _ = writeln!(
        s,
        "Sink vs floor: {:.2}x the one-file-at-a-time floor, {:.2}x the grouped floor.",
        r.sink_vs_floor, r.sink_vs_grouped_floor
    );
    let _ = writeln!(
        s,
        "A checkpoint of {} files of {} costs {} (p99) here: keep the checkpoint interval well \
         above it; larger parts raise MB/s, more files per checkpoint raise files/s.\n",
        r.files_per_checkpoint,
        human_bytes(r.roll.file_bytes),
        ms(r.roll.checkpoint_latency_ms.p99),
    );

    let i = &r.ingest;
    let _ = writeln!(
        s,
        "{:<40} {:>12} {:>10}",
        format!("ingest, {} rows, {}", i.rows, partitions),
        "rows/s",
        "seconds"
    );
    let _ = writeln!(
        s,
        "{:<40} {:>12.0} {:>10.3}",
        format!("sink, one checkpoint, {} files", i.files),
        i.sink_rows_per_sec,
        i.sink_seconds
    );
    let _ = writeln!(
        s,
        "{:<40} {:>12.0} {:>10.3}",
        "plain writer, one file + fdatasync", i.plain_rows_per_sec, i.plain_seconds
    );
    let _ = writeln!(s, "Sink time / plain writer time: {:.2}x.", i.time_ratio);
    match (i.sink_peak_rss_bytes, i.rss_before_bytes) {
        (Some(peak), Some(before)) => {
            let _ = writeln!(
                s,
                "Peak resident memory during the sink's run: {} ({} above the {} before); \
                 memory budget (buffer_bytes_max): {}.",
                human_bytes(peak),
                human_bytes(peak.saturating_sub(before)),
                human_bytes(before),
                human_bytes(i.buffer_bytes_max)
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "Peak resident memory: not available here; memory budget (buffer_bytes_max): {}.",
                human_bytes(i.buffer_bytes_max)
            );
        }
    }
    s
}

/// `filesink bench --to s3://…`: roll and commit through the sink on an object store, next to
/// the store's own floor (one PUT of the same bytes per file, one after another).
mod s3 {
    use std::sync::Arc;
    use std::time::Instant;

    use futures_util::TryStreamExt;
    use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
    use serde::Serialize;

    use super::*;
    use filesink::storage::{ObjectStorage, Storage};

    #[derive(Debug, Serialize)]
    struct S3Report {
        location: String,
        format: BenchFormat,
        file_size_bytes: u64,
        files_per_checkpoint: u64,
        partitions: u64,
        roll: Roll,
        /// One PUT per file of the same size, sequential: the store's floor.
        put_floor_files_per_sec: f64,
        put_floor_mb_per_sec: f64,
        sink_vs_put_floor: f64,
    }

    pub(super) async fn run(args: &BenchArgs, url: &str) -> Result<(), BoxError> {
        let location = format!(
            "{}/filesink-bench-{}",
            url.trim_end_matches('/'),
            uuid::Uuid::now_v7().simple()
        );
        let storage = ObjectStorage::s3(&location)?;
        let store: Arc<dyn ObjectStore> = Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_url(url)
                .build()?,
        );
        let prefix = object_store::path::Path::parse(
            location
                .trim_start_matches("s3://")
                .split_once('/')
                .map_or("", |(_, p)| p),
        )?;
        note(&format!(
            "measuring at `{location}`; it is removed at the end"
        ));
        let work = WorkDir::create(&std::env::current_dir()?)?;
        let shared: Arc<dyn Storage> = Arc::new(storage.clone());
        let mut base = Sink::builder_shared(shared.clone()).format(args.format.file_format());
        if args.partitions > 1 {
            base = base.bucket_assigner(HivePartitioner::new(["part"])?);
        }
        let result = measure(args, &work.0, base, store.as_ref(), &prefix).await;
        // Clean up whatever happened: uploads first, then objects.
        for leftover in shared.list_leftovers().await.unwrap_or_default() {
            let _ = shared.remove_leftover(&leftover.path).await;
        }
        let listed: Vec<object_store::ObjectMeta> = store
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap_or_default();
        for meta in listed {
            let _ = store.delete(&meta.location).await;
        }
        let (roll, put_secs) = result?;
        let put_floor = roll.files as f64 / put_secs;
        let report = S3Report {
            location,
            format: args.format,
            file_size_bytes: args.file_size,
            files_per_checkpoint: args.files_per_checkpoint,
            partitions: args.partitions,
            put_floor_files_per_sec: put_floor,
            put_floor_mb_per_sec: roll.bytes as f64 / put_secs / 1e6,
            sink_vs_put_floor: roll.files_per_sec / put_floor,
            roll,
        };
        let text = if args.json {
            serde_json::to_string_pretty(&report)? + "\n"
        } else {
            let r = &report;
            format!(
                "filesink bench on {} ({} files of {}, {} per checkpoint, format {})\n\
                 sink (multipart upload + complete):  {:>9.1} files/s {:>8.1} MB/s  checkpoint p50 {:.1} ms, p99 {:.1} ms\n\
                 store floor (one PUT per file):      {:>9.1} files/s {:>8.1} MB/s\n\
                 sink vs floor: {:.2}x\n",
                r.location,
                r.roll.files,
                human_bytes(r.roll.file_bytes),
                r.files_per_checkpoint,
                r.format.name(),
                r.roll.files_per_sec,
                r.roll.mb_per_sec,
                r.roll.checkpoint_latency_ms.p50,
                r.roll.checkpoint_latency_ms.p99,
                r.put_floor_files_per_sec,
                r.put_floor_mb_per_sec,
                r.sink_vs_put_floor,
            )
        };
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(()),
        }
    }

    async fn measure(
        args: &BenchArgs,
        work: &Path,
        base: SinkBuilder,
        store: &dyn ObjectStore,
        prefix: &object_store::path::Path,
    ) -> Result<(Roll, f64), BoxError> {
        let roll = roll_with(args, work, base).await?;
        let bytes = payload_bytes(roll.file_bytes as usize);
        let start = Instant::now();
        for i in 0..roll.files {
            let key = prefix.clone().join("floor").join(format!("f{i}"));
            store.put(&key, PutPayload::from(bytes.clone())).await?;
        }
        Ok((roll, start.elapsed().as_secs_f64()))
    }
}
