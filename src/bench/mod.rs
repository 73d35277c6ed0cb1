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

use std::io::Write;

use filesink::FileFormat;
use serde::Serialize;

use crate::cli::util::parse_size;

mod floor;
mod ingest;
mod payload;
mod report;
mod roll;
mod s3;
mod work;
use floor::{file_system_name, floor};
use ingest::ingest;
use report::{render, Report};
use roll::roll_and_commit;
use work::{note, WorkDir};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
    if let Some(url) = args
        .to
        .as_deref()
        .filter(|t| filesink::storage::Location::s3_rest(t).is_some())
    {
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
