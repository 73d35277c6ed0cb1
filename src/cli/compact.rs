//! `filesink compact`: one compaction round on a Delta table (the library's
//! [`filesink::maintain::compact`]): the small files of each partition rewritten into files
//! of the target size, swapped in by one log entry. It runs as a job of its own (`--job`,
//! default `compact`), so it may run while `ingest` appends to the same table, and a crash
//! anywhere is finished (or the round abandoned) by its next run.

use std::io::Write;

use filesink::maintain::{compact, CompactOptions};
use filesink::storage::Location;

use super::exit::{CliError, CliResult};
use super::lake::open_storage;
use super::util::{human_bytes, parse_job, parse_size};

/// Arguments of `filesink compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// The Delta table: a directory (`./lake`, `/abs/lake`, `file:///abs/lake`) or
    /// `s3://bucket/prefix`.
    #[arg(value_name = "URL")]
    pub url: String,

    /// The size output files aim at; files of at least half of it are left alone.
    #[arg(long, value_parser = parse_size, value_name = "SIZE", default_value = "128MiB")]
    pub target_size: u64,

    /// Only this partition (its directory, `country=DE/dt=2026-11-30`); repeatable.
    #[arg(long, value_name = "DIR")]
    pub partition: Vec<String>,

    /// The compaction job's name: one compactor of a name runs at a time.
    #[arg(long, value_parser = parse_job, value_name = "NAME", default_value = "compact")]
    pub job: String,

    /// The fewest files worth merging into one.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub min_files: usize,

    /// Input bytes after which a round plans no further bins.
    #[arg(long, value_parser = parse_size, value_name = "SIZE", default_value = "4GiB")]
    pub max_bytes: u64,

    /// On a store that ignores conditional writes (Garage): this is the table's only writer.
    #[arg(long)]
    pub single_writer: bool,

    /// Plan only: list the bins, change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `filesink compact`.
pub async fn run(args: CompactArgs, out: &mut dyn Write) -> CliResult {
    let location = Location::parse(&args.url)?;
    let (storage, _) = open_storage(&location)
        .map_err(|e| CliError::context(format!("cannot use `{location}`"), e))?;
    let options = CompactOptions::new()
        .target_size_bytes(args.target_size)
        .partitions(args.partition.clone())
        .job(args.job.clone())
        .min_files(args.min_files)
        .max_bytes(args.max_bytes)
        .single_writer(args.single_writer)
        .location(location.to_string())
        .dry_run(args.dry_run);
    let report = compact(storage, &options)
        .await
        .map_err(|e| CliError::context(format!("cannot compact `{location}`"), e))?;
    if args.json {
        let v = serde_json::json!({
            "dry_run": args.dry_run,
            "report": report,
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(());
    }
    let inputs: usize = report.bins.iter().map(|b| b.inputs.len()).sum();
    let input_bytes: u64 = report.bins.iter().map(|b| b.input_bytes).sum();
    for p in &report.too_long {
        outln!(
            out,
            "  {p:.64}... ({} bytes): left as it is, its path is too long for the store to take \
             a merged file's name under it",
            p.len()
        );
    }
    if report.bins.is_empty() {
        outln!(
            out,
            "nothing to compact in `{location}` (no partition has {} files below {})",
            args.min_files,
            human_bytes(args.target_size / 2)
        );
        return Ok(());
    }
    for b in &report.bins {
        outln!(
            out,
            "  {:<40} {} file(s), {}",
            if b.partition.is_empty() {
                "(table root)"
            } else {
                &b.partition
            },
            b.inputs.len(),
            human_bytes(b.input_bytes)
        );
    }
    if args.dry_run {
        outln!(
            out,
            "would merge {inputs} file(s), {} in {} bin(s)",
            human_bytes(input_bytes),
            report.bins.len()
        );
    } else if report.abandoned {
        outln!(
            out,
            "round abandoned: another writer removed one of its input files; its output was \
             deleted and the table is unchanged (run compact again)"
        );
    } else {
        outln!(
            out,
            "merged {inputs} file(s), {} into {} file(s), {} ({} records) at table version {}",
            human_bytes(input_bytes),
            report.output_files,
            human_bytes(report.output_bytes),
            report.records,
            report.version.map_or("-".to_string(), |v| v.to_string())
        );
    }
    Ok(())
}
