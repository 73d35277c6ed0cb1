//! The results of a run, and their text rendering.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::BenchFormat;
use crate::cli::util::human_bytes;

#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) directory: String,
    pub(super) file_system: String,
    pub(super) format: BenchFormat,
    pub(super) file_size_bytes: u64,
    pub(super) files: u64,
    pub(super) files_per_checkpoint: u64,
    pub(super) partitions: u64,
    pub(super) roll: Roll,
    pub(super) floor_per_file: Floor,
    pub(super) floor_grouped: Floor,
    /// Sink files/s over the one-file-at-a-time floor.
    pub(super) sink_vs_floor: f64,
    /// Sink files/s over the grouped floor.
    pub(super) sink_vs_grouped_floor: f64,
    pub(super) ingest: Ingest,
}

#[derive(Debug, Serialize)]
pub(super) struct Roll {
    pub(super) files: u64,
    pub(super) checkpoints: u64,
    /// Average size of a committed file (the payload is sized to `--file-size`).
    pub(super) file_bytes: u64,
    pub(super) bytes: u64,
    pub(super) seconds: f64,
    pub(super) files_per_sec: f64,
    pub(super) mb_per_sec: f64,
    /// `prepare_commit` + `commit` of one checkpoint.
    pub(super) checkpoint_latency_ms: Percentiles,
    pub(super) prepare_commit_latency_ms: Percentiles,
    pub(super) commit_latency_ms: Percentiles,
}

#[derive(Debug, Serialize)]
pub(super) struct Floor {
    pub(super) files: u64,
    pub(super) files_per_group: u64,
    pub(super) seconds: f64,
    pub(super) files_per_sec: f64,
    pub(super) mb_per_sec: f64,
    /// Per file (one at a time) or per group.
    pub(super) latency_ms: Percentiles,
}

#[derive(Debug, Serialize)]
pub(super) struct Ingest {
    pub(super) rows: u64,
    pub(super) partitions: u64,
    pub(super) files: usize,
    pub(super) sink_seconds: f64,
    pub(super) sink_rows_per_sec: f64,
    pub(super) plain_seconds: f64,
    pub(super) plain_rows_per_sec: f64,
    /// Sink time over plain-writer time.
    pub(super) time_ratio: f64,
    /// Peak resident set of the process during the sink's run (`VmHWM`), if the kernel tells.
    pub(super) sink_peak_rss_bytes: Option<u64>,
    /// The resident set before the sink's run.
    pub(super) rss_before_bytes: Option<u64>,
    /// The sink's memory budget, `SinkBuilder::buffer_bytes_max`.
    pub(super) buffer_bytes_max: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct Percentiles {
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) max: f64,
    pub(super) count: usize,
}

impl Percentiles {
    pub(super) fn of(mut samples: Vec<Duration>) -> Percentiles {
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

pub(super) fn render(r: &Report) -> String {
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
