//! The `filesink` command line. This file only parses arguments, starts a runtime and maps
//! the outcome to an exit code; the commands live in `cli/`.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
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
