//! Where the library's `tracing` events go: standard error, as text or JSON lines.
//!
//! The level: `-v` shows filesink's info events (the protocol steps: checkpoint complete, job
//! opened, leftovers removed, the run's summary), `-vv` its debug events (every vote, commit,
//! roll and manifest write, with their spans), `-vvv` debug events of every crate. Without
//! `-v`, `RUST_LOG` decides (`RUST_LOG=filesink=debug`, the `EnvFilter` syntax); without
//! either, only warnings, so the normal output on standard error is the commands' own.

use tracing_subscriber::EnvFilter;

/// The format of log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event, with its spans' fields.
    #[default]
    Text,
    /// One JSON object per event, with the current span and the span list.
    Json,
}

/// Installs the global subscriber for `verbose` (the count of `-v`) and `format`.
pub fn init(verbose: u8, format: LogFormat) {
    let filter = match verbose {
        0 => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        1 => EnvFilter::new("warn,filesink=info"),
        2 => EnvFilter::new("warn,filesink=debug"),
        _ => EnvFilter::new("debug"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second subscriber (a test harness that installed one) is not an error.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
