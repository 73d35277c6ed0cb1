//! The `filesink` command line: argument definitions and one module per subcommand.
//!
//! The CLI is not part of the library's API: it lives in the binary and uses the library
//! only through its public items. Commands write their results to standard output (text, or
//! JSON with `--json`) and progress and notes to standard error; errors are returned as
//! [`exit::CliError`] and printed once by `main`.

use std::io::Write;

use clap::{Parser, Subcommand};

/// Writes a line to a command's output; a failed write (a broken pipe) ends the command.
/// Defined before the modules so that all of them can use it.
macro_rules! outln {
    ($out:expr) => {
        writeln!($out).map_err($crate::cli::exit::CliError::stdout)?
    };
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, $($arg)*).map_err($crate::cli::exit::CliError::stdout)?
    };
}

pub mod abort;

pub mod commit;
pub mod compact;
pub mod exit;
pub mod ingest;
pub mod inspect;
pub mod lake;
pub mod log;
pub mod ls;
pub mod metrics;
pub mod vacuum;

pub mod util;

use exit::{CliError, CliResult};

/// Exactly-once transactional file sink: write JSON lines or CSV into a Parquet/JSON/CSV lake
/// with checkpoints, resume after a crash, and inspect or clean up what a crash left.
#[derive(Debug, Parser)]
#[command(name = "filesink", version, after_help = exit::AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
    /// Log the protocol steps to standard error: `-v` info, `-vv` debug (`RUST_LOG` applies
    /// without it; the default is warnings only).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// The format of log lines on standard error.
    #[arg(long, global = true, value_enum, default_value_t = log::LogFormat::Text)]
    pub log_format: log::LogFormat,
    /// When the command ends, print the library's metrics (files, bytes and records
    /// committed, checkpoint and commit durations, leftovers removed, retries) to standard
    /// error, in the `--log-format`.
    #[arg(long, global = true)]
    pub metrics: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write JSON lines or CSV files into a sink (a local directory or `s3://bucket/prefix`),
    /// exactly once, with checkpoints; rerun the same command after a crash to resume.
    #[command(after_help = exit::AFTER_HELP)]
    Ingest(Box<ingest::IngestArgs>),
    /// List committed files per partition, pending files, hidden leftovers (on S3: orphan
    /// multipart uploads) and jobs.
    #[command(after_help = exit::AFTER_HELP)]
    Ls(ls::LsArgs),
    /// Commit the pending files of complete checkpoints (safe to repeat).
    #[command(after_help = exit::AFTER_HELP)]
    Commit(commit::CommitArgs),
    /// Clean up after crashed runs: commit pending files, then remove hidden leftovers (on S3:
    /// abort multipart uploads) that no checkpoint needs.
    #[command(after_help = exit::AFTER_HELP)]
    Abort(abort::AbortArgs),
    /// Delete the files of a Delta table that no version within the retention needs, the
    /// expired log entries, and the ledger entries no run reads; retire finished jobs (their
    /// directories go); foreign files are reported, never deleted.
    #[command(after_help = exit::AFTER_HELP)]
    Vacuum(vacuum::VacuumArgs),
    /// Compacts a Delta table: merges each partition's small files into files of a target
    /// size, swapped in by one log entry (readers never see a row twice or miss one).
    #[command(after_help = exit::AFTER_HELP)]
    Compact(compact::CompactArgs),
    /// Show a checkpoint manifest.
    #[command(after_help = exit::AFTER_HELP)]
    Inspect(inspect::InspectArgs),
    /// Measure roll and commit throughput on a directory you name, against the syscall
    /// floor measured in the same run, to size checkpoint interval and part size.
    #[command(after_help = exit::AFTER_HELP)]
    Bench(crate::bench::BenchArgs),
}

/// Runs a parsed command line, writing results to standard output.
pub async fn run(cli: Cli) -> CliResult {
    let mut stdout = std::io::stdout().lock();
    let out: &mut dyn Write = &mut stdout;
    let result = command(cli, out).await;
    // Jobs given back by a drop (an error path) are released in the background: let that
    // finish before the runtime ends, or the next run would find the job held.
    filesink::storage::ownership::settle_releases().await;
    result
}

async fn command(cli: Cli, out: &mut dyn Write) -> CliResult {
    match cli.command {
        Command::Ingest(a) => ingest::run(*a, out).await?,
        Command::Ls(a) => ls::run(a, out).await?,
        Command::Commit(a) => commit::run(a, out).await?,
        Command::Abort(a) => abort::run(a, out).await?,
        Command::Compact(a) => compact::run(a, out).await?,
        Command::Vacuum(a) => vacuum::run(a, out).await?,
        Command::Inspect(a) => inspect::run(a, out).await?,
        Command::Bench(a) => crate::bench::run(&a)
            .await
            .map_err(|e| CliError::context("the benchmark failed", e))?,
    }
    out.flush().map_err(CliError::stdout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_documents_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes:"), "{help}");
        assert!(help.contains("6  corrupt state"), "{help}");
    }
}
