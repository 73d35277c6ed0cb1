//! The `filesink` command line. This file only tunes the allocator, parses arguments, starts a
//! runtime and maps the outcome to an exit code; the commands live in `cli/`.

use std::process::ExitCode;

use clap::Parser;

mod bench;
mod cli;

fn main() -> ExitCode {
    keep_freed_memory();
    filesink::storage::local::raise_open_files_limit();
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // Help and version go to stdout with exit code 0, usage errors to stderr with 2.
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    cli::log::init(args.verbose, args.log_format);
    let (metrics, log_format) = match args.metrics {
        true => (cli::metrics::Collector::install(), args.log_format),
        false => (None, args.log_format),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            cli::exit::CliError::context("cannot start the async runtime", e).report();
            return ExitCode::from(cli::exit::ERROR);
        }
    };
    let result = runtime.block_on(cli::run(args));
    if let Some(m) = metrics {
        m.print(log_format);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.report();
            ExitCode::from(e.code())
        }
    }
}

/// Lets glibc's allocator keep up to 4 MiB free at the top of each heap instead of giving
/// everything above 128 KiB back to the kernel at once. An ingest frees and allocates a
/// round's columns on the runtime's threads all the time, each in its thread's arena; given
/// back and taken again, every page was a fault and every trim a TLB shootdown across the
/// cores (measured by `scripts/bench-parallel`). The fixed mmap threshold (32 MiB, the top of
/// glibc's own moving one) keeps chunk buffers out of `mmap`, which a fixed trim threshold
/// would otherwise send there. A user's own `GLIBC_TUNABLES` or `MALLOC_*_` settings win.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let users_own = std::env::vars_os().any(|(k, v)| {
            let k = k.to_string_lossy();
            k.starts_with("MALLOC_")
                || (k == "GLIBC_TUNABLES" && v.to_string_lossy().contains("malloc"))
        });
        if !users_own {
            // SAFETY: mallopt only sets the allocator's parameters; called before any thread.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
            }
        }
    }
}
