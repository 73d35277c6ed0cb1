//! Exit codes of the `filesink` binary, and the one error type its commands return.
//!
//! The table [`EXIT_CODES`] is the source of truth; [`AFTER_HELP`] repeats it for `--help`
//! (a test checks that the two agree).

use std::error::Error as StdError;
use std::fmt;
use std::io;

/// Success (also: a rerun of a finished job, a broken pipe on standard output).
pub const OK: u8 = 0;
/// Any error not listed below (I/O, bad input, malformed records...).
pub const ERROR: u8 = 1;
/// Usage error: bad arguments (clap's own exit code).
pub const USAGE: u8 = 2;
/// Conflict ([`filesink::Error::Conflict`]): a visible file or a manifest already holds the
/// name; nothing was overwritten.
pub const CONFLICT: u8 = 3;
/// Data lost ([`filesink::Error::DataLost`]): a file a checkpoint promised to keep is gone.
pub const DATA_LOST: u8 = 4;
/// Refused: the location is not a filesink output, another live run owns the job
/// ([`filesink::Error::JobBusy`]), a writer looks alive, or a new sink would be inside another
/// sink's tree or hold one ([`filesink::Error::NestedSink`]).
pub const REFUSED: u8 = 5;
/// Corrupt state ([`filesink::Error::Corrupt`], [`filesink::Error::UnsupportedVersion`]): a
/// manifest or the sink identity cannot be read.
pub const CORRUPT: u8 = 6;
/// Input changed: an input of a resumed job no longer begins with the bytes the job already
/// read of it (replaced, edited or cut short); nothing was written.
pub const INPUT_CHANGED: u8 = 7;
/// Inputs refused: a run over a glob (a job named after its inputs) took its other inputs, and
/// passed over those that changed within what the lake took of them.
pub const INPUTS_REFUSED: u8 = 8;

/// Every exit code with its name and meaning.
// Only tests read the table at run time: `AFTER_HELP` has to be a literal for clap.
#[cfg_attr(not(test), allow(dead_code))]
pub const EXIT_CODES: &[(u8, &str, &str)] = &[
    (OK, "ok", "success, or nothing to do"),
    (ERROR, "error", "an error not listed below"),
    (USAGE, "usage", "invalid arguments"),
    (
        CONFLICT,
        "conflict",
        "a file or manifest already exists with other content; nothing was overwritten",
    ),
    (
        DATA_LOST,
        "data lost",
        "a file that a checkpoint promised to keep is gone",
    ),
    (
        REFUSED,
        "refused",
        "not a filesink output, the job is owned by a live run, a writer looks alive, or a new \
         lake would be inside another lake's tree or hold one",
    ),
    (
        CORRUPT,
        "corrupt state",
        "a manifest or the sink identity is damaged or of a newer version",
    ),
    (
        INPUT_CHANGED,
        "input changed",
        "an input of a resumed job differs from what the job already read of it",
    ),
    (
        INPUTS_REFUSED,
        "inputs refused",
        "the other inputs were taken; those named changed within what the lake took of them",
    ),
];

/// The exit code table as shown at the end of `filesink --help`.
pub const AFTER_HELP: &str = "\
Exit codes:
  0  ok             success, or nothing to do
  1  error          an error not listed below
  2  usage          invalid arguments
  3  conflict       a file or manifest already exists with other content; nothing was overwritten
  4  data lost      a file that a checkpoint promised to keep is gone
  5  refused        not a filesink output, the job is owned by a live run, a writer looks alive, or a new lake would be inside another lake's tree or hold one
  6  corrupt state  a manifest or the sink identity is damaged or of a newer version
  7  input changed  an input of a resumed job differs from what the job already read of it
  8  inputs refused  the other inputs were taken; those named changed within what the lake took of them";

/// The exit code for a library error.
pub fn code_of(e: &filesink::Error) -> u8 {
    match e {
        filesink::Error::Conflict { .. } => CONFLICT,
        filesink::Error::DataLost { .. } => DATA_LOST,
        filesink::Error::Corrupt { .. } | filesink::Error::UnsupportedVersion { .. } => CORRUPT,
        filesink::Error::JobBusy { .. } | filesink::Error::NestedSink { .. } => REFUSED,
        _ => ERROR,
    }
}

/// The exit code for any error: that of the first [`filesink::Error`] in its chain, else
/// [`ERROR`].
fn code_of_chain(e: &(dyn StdError + 'static)) -> u8 {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(fe) = err.downcast_ref::<filesink::Error>() {
            return code_of(fe);
        }
        cur = err.source();
    }
    ERROR
}

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// What a command failed with: an exit code, an optional message, and the error that caused
/// it. Printed once, by [`CliError::report`].
#[derive(Debug)]
pub struct CliError {
    code: u8,
    message: Option<String>,
    source: Option<BoxError>,
    quiet: bool,
}

impl CliError {
    /// An error with `code` and `message`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: Some(message.into()),
            source: None,
            quiet: false,
        }
    }

    /// A general error (exit code 1).
    pub fn msg(message: impl Into<String>) -> Self {
        Self::new(ERROR, message)
    }

    /// A usage error found after parsing (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// A refusal (exit code 5).
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(REFUSED, message)
    }

    /// `message`, caused by `source`; the exit code is the one `source` implies.
    pub fn context(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        CliError {
            code: code_of_chain(source.as_ref()),
            message: Some(message.into()),
            source: Some(source),
            quiet: false,
        }
    }

    /// Adds the error that caused this one.
    pub fn caused_by(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A failed write to standard output. A broken pipe (`filesink ls | head -1`) is not an
    /// error: it exits 0 without a word.
    pub fn stdout(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError {
                code: OK,
                message: None,
                source: None,
                quiet: true,
            }
        } else {
            CliError::context("failed to write to standard output", e)
        }
    }

    /// The process exit code.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The lines [`CliError::report`] prints: `error: …` then one `  caused by: …` per source.
    pub fn lines(&self) -> Vec<String> {
        if self.quiet {
            return Vec::new();
        }
        let mut lines = Vec::new();
        let mut cur: Option<&(dyn StdError + 'static)> = self.source.as_deref().map(|e| e as _);
        match &self.message {
            Some(m) => lines.push(format!("error: {m}")),
            None => match cur {
                Some(e) => {
                    lines.push(format!("error: {e}"));
                    cur = e.source();
                }
                None => lines.push("error: unknown error".to_string()),
            },
        }
        while let Some(e) = cur {
            lines.push(format!("  caused by: {e}"));
            cur = e.source();
        }
        lines
    }

    /// Prints the error to standard error (nothing for a broken pipe).
    pub fn report(&self) {
        use std::io::Write;
        let mut err = io::stderr().lock();
        for line in self.lines() {
            let _ = writeln!(err, "{line}");
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.lines().join("\n"))
    }
}

impl From<filesink::Error> for CliError {
    fn from(e: filesink::Error) -> Self {
        CliError {
            code: code_of(&e),
            message: None,
            source: Some(Box::new(e)),
            quiet: false,
        }
    }
}

/// `Result` with [`CliError`].
pub type CliResult<T = ()> = Result<T, CliError>;

/// A location argument that does not parse is a usage error (exit code 2).
impl From<filesink::storage::LocationError> for CliError {
    fn from(e: filesink::storage::LocationError) -> Self {
        CliError::usage(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_help_lists_every_exit_code_of_the_table() {
        let lines: Vec<&str> = AFTER_HELP.lines().skip(1).collect();
        assert_eq!(lines.len(), EXIT_CODES.len());
        for ((code, name, meaning), line) in EXIT_CODES.iter().zip(lines) {
            let expected = format!("  {code}  {name:<13}  {meaning}");
            assert_eq!(line, expected);
        }
    }

    #[test]
    fn library_errors_map_to_their_exit_codes() {
        let conflict = filesink::Error::Conflict {
            path: "a".into(),
            reason: "x".into(),
        };
        assert_eq!(CliError::from(conflict).code(), CONFLICT);
        let corrupt = filesink::Error::Corrupt {
            what: "manifest `m`".into(),
            reason: "truncated".into(),
        };
        let e = CliError::context("cannot read job `j`", corrupt);
        assert_eq!(e.code(), CORRUPT);
        assert_eq!(
            e.lines(),
            vec![
                "error: cannot read job `j`".to_string(),
                "  caused by: corrupt manifest `m`: truncated".to_string()
            ]
        );
    }

    #[test]
    fn broken_pipe_is_quiet_success() {
        let e = CliError::stdout(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(e.code(), OK);
        assert!(e.lines().is_empty());
    }
}
