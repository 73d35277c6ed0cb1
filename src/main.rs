//! The `filesink` command line (coming with the CLI issue).

fn main() -> std::process::ExitCode {
    eprintln!("error: the filesink CLI is not built yet");
    std::process::ExitCode::from(2)
}
