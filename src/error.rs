//! The one public error type.
//!
//! Every fallible call in the crate returns [`Result`]. Variants are chosen so a caller can act on
//! them: retry a [`Error::Io`] that [`Error::is_retryable`] allows, stop and page a human on
//! [`Error::Conflict`] or [`Error::DataLost`], fix the input on [`Error::InvalidInput`].
//! "Already committed" is not an error: it is [`crate::CommitOutcome::AlreadyCommitted`].

use std::io;
use std::path::PathBuf;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in filesink.
///
/// Messages are lowercase, name the path in backticks and do not repeat the cause that
/// [`std::error::Error::source`] carries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation failed. Retrying may help (a full disk freed, a store back up).
    #[error("failed to {op} `{}`", path.display())]
    Io {
        /// What was being done, e.g. `"create"` or `"rename"`.
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// A call to an object store failed. [`Error::is_retryable`] says whether a retry can help,
    /// decided by the HTTP status the store answered: a missing object, a refused permission
    /// (401, 403), a failed precondition (412, 409) or a bad request is not retryable; a
    /// server error, a throttled request or a lost connection (after the client's own retries)
    /// is.
    #[error("failed to {op} `{path}`")]
    Store {
        /// What was being done, e.g. `"complete the upload of"`.
        op: &'static str,
        /// The object or prefix it was done to, as a URL.
        path: String,
        /// Whether retrying the same call later can succeed.
        retryable: bool,
        /// The store client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// A message broker (a Kafka cluster) refused or failed a call: it is down or unreachable,
    /// a topic or partition named is not there, or it answered an error. [`Error::is_retryable`]
    /// says whether running again later can help (a broker that was down). Nothing was
    /// written past the last checkpoint.
    #[error("failed to {op} `{at}`: {message}")]
    Broker {
        /// What was being done, e.g. `"read the partitions of"`.
        op: &'static str,
        /// The broker, topic or partition, as a `kafka://` URL.
        at: String,
        /// Whether retrying later can succeed.
        retryable: bool,
        /// What the broker or its client said.
        message: String,
    },

    /// An fsync failed. The data it covered may be gone even though the writes succeeded, so
    /// the checkpoint it belongs to must fail; retrying the fsync proves nothing.
    #[error("fsync of `{}` failed; the checkpoint that needed it must fail", path.display())]
    Fsync {
        /// The file or directory whose fsync failed.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// Committing would overwrite or contradict data that is already there: a final file with
    /// other content, or a part file that another writer incarnation has taken over. Nothing was
    /// overwritten. A human has to look.
    #[error("conflict at `{}`: {reason}", path.display())]
    Conflict {
        /// The path where the conflict is.
        path: PathBuf,
        /// What was found.
        reason: String,
    },

    /// Data the protocol promised to keep is gone: a pending file whose final file does not
    /// exist either, or a resumable file shorter than its recorded durable length.
    #[error("data lost at `{}`: {reason}", path.display())]
    DataLost {
        /// Where the data should have been.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },

    /// Serialized state, a committable or a file is damaged or was not written by this sink.
    #[error("corrupt {what}: {reason}")]
    Corrupt {
        /// What was being read, with its path when there is one.
        what: String,
        /// What is wrong with it.
        reason: String,
    },

    /// Serialized state written by a format version this build cannot read.
    #[error("{what} has format version {found}, this build reads versions up to {supported}")]
    UnsupportedVersion {
        /// What was being read.
        what: String,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },

    /// Another live run owns the job ([`crate::storage::ownership`]): a second run of a job
    /// is refused before it touches anything, and a run that lost its ownership cannot complete
    /// another checkpoint. Nothing was changed; wait for the owner to finish, or stop it.
    #[error("job `{job}` is owned by another run: {reason}")]
    JobBusy {
        /// The job.
        job: String,
        /// Who owns it, as far as the store tells.
        reason: String,
    },

    /// An option of an ingestion ([`crate::ingest::Ingest`]) is refused, alone or beside
    /// another: nothing was read or created. The message names options by their builder
    /// methods; [`Error::setting_message`] names them otherwise (the CLI: by their flags).
    #[error("{}", render(message, &|s: Setting| format!("`{}`", s.method())))]
    Setting {
        /// The option refused.
        setting: Setting,
        /// What is wrong, naming options as `{method}` ([`Setting::method`]); a `{` of a
        /// value is doubled.
        message: String,
    },

    /// The backend or format cannot do what was asked, and filesink will not fall back to
    /// something weaker.
    #[error("not supported: {0}")]
    NotSupported(String),

    /// Records that cannot be written as they are: schema mismatch, a malformed record, a
    /// partition value that cannot become a directory name. Nothing of the call was written.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The sink's configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The base would be inside another sink's tree, or hold another sink in its own: each
    /// sink owns its whole tree, so a sink is never created there. Nothing was written.
    #[error("no sink is created here: {reason}")]
    NestedSink {
        /// Which other sinks are in the way.
        reason: String,
    },

    /// Arrow failed to encode or convert a batch.
    #[error("arrow")]
    Arrow(#[from] arrow::error::ArrowError),

    /// The Parquet writer failed.
    #[error("parquet")]
    Parquet(#[from] parquet::errors::ParquetError),

    /// An input the lake took ([`crate::ingest`], by any of its jobs) no longer begins with
    /// the bytes already read of it: it was replaced, edited or cut short, so reading on from
    /// where the lake stopped would skip or repeat records. Nothing was written. Put the
    /// original back to read on, or give the new content a name of its own.
    #[error("{0}")]
    InputChanged(String),
}

/// An option of [`crate::ingest::Ingest`], as an [`Error::Setting`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setting {
    /// The inputs read ([`crate::ingest::Ingest::new`]).
    Inputs,
    /// [`crate::ingest::Ingest::input_format`].
    InputFormat,
    /// [`crate::ingest::Ingest::format`].
    Format,
    /// [`crate::ingest::Ingest::partition_by`].
    PartitionBy,
    /// [`crate::ingest::Ingest::partition_by_time`].
    PartitionByTime,
    /// [`crate::ingest::Ingest::time_zone`].
    TimeZone,
    /// [`crate::ingest::Ingest::schema`].
    Schema,
    /// [`crate::ingest::Ingest::bad_records`].
    BadRecords,
    /// [`crate::ingest::Ingest::job`].
    Job,
    /// [`crate::ingest::Ingest::lease_ttl`].
    LeaseTtl,
    /// [`crate::ingest::Ingest::parallelism`].
    Parallelism,
    /// [`crate::ingest::Ingest::delta_table`].
    DeltaTable,
    /// [`crate::ingest::Ingest::merge_small_files`].
    MergeSmallFiles,
    /// [`crate::ingest::Ingest::max_visibility_delay`].
    MaxVisibilityDelay,
    /// [`crate::ingest::Ingest::compact_in_background`].
    CompactInBackground,
}

impl Setting {
    /// Every option, in the order of [`Setting`].
    pub const ALL: [Setting; 15] = [
        Setting::Inputs,
        Setting::InputFormat,
        Setting::Format,
        Setting::PartitionBy,
        Setting::PartitionByTime,
        Setting::TimeZone,
        Setting::Schema,
        Setting::BadRecords,
        Setting::Job,
        Setting::LeaseTtl,
        Setting::Parallelism,
        Setting::DeltaTable,
        Setting::MergeSmallFiles,
        Setting::MaxVisibilityDelay,
        Setting::CompactInBackground,
    ];

    /// The name of the builder method that sets it (`partition_by`).
    pub fn method(self) -> &'static str {
        match self {
            Setting::Inputs => "inputs",
            Setting::InputFormat => "input_format",
            Setting::Format => "format",
            Setting::PartitionBy => "partition_by",
            Setting::PartitionByTime => "partition_by_time",
            Setting::TimeZone => "time_zone",
            Setting::Schema => "schema",
            Setting::BadRecords => "bad_records",
            Setting::Job => "job",
            Setting::LeaseTtl => "lease_ttl",
            Setting::Parallelism => "parallelism",
            Setting::DeltaTable => "delta_table",
            Setting::MergeSmallFiles => "merge_small_files",
            Setting::MaxVisibilityDelay => "max_visibility_delay",
            Setting::CompactInBackground => "compact_in_background",
        }
    }

    /// A refusal of this option: `message` names options as `{method}`, and holds values
    /// through [`Setting::value`].
    pub(crate) fn refused(self, message: impl Into<String>) -> Error {
        Error::Setting {
            setting: self,
            message: message.into(),
        }
    }

    /// A refusal of this option's value for `cause` (what the value's own check said):
    /// "invalid `{method}`: cause".
    pub(crate) fn invalid(self, cause: impl std::fmt::Display) -> Error {
        self.refused(format!(
            "invalid {{{}}}: {}",
            self.method(),
            Setting::value(cause)
        ))
    }

    /// `value` (a path, a column, a cause's message) as it may stand in a message of
    /// [`Setting::refused`]: its braces doubled, so that nothing in it reads as an option.
    pub(crate) fn value(value: impl std::fmt::Display) -> String {
        value.to_string().replace('{', "{{")
    }
}

/// `message` with each `{method}` replaced by `name` of that option and each `{{` by `{`.
fn render(message: &str, name: &dyn Fn(Setting) -> String) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("{{") {
            out.push('{');
            rest = after;
            continue;
        }
        let named = rest.find('}').and_then(|end| {
            let s = Setting::ALL
                .into_iter()
                .find(|s| s.method() == &rest[1..end])?;
            Some((s, end))
        });
        match named {
            Some((s, end)) => {
                out.push_str(&name(s));
                rest = &rest[end + 1..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl Error {
    /// The message of an [`Error::Setting`] with each option named by `name` (the CLI names
    /// them by their flags); `None` for any other error.
    pub fn setting_message(&self, name: &dyn Fn(Setting) -> String) -> Option<String> {
        match self {
            Error::Setting { message, .. } => Some(render(message, name)),
            _ => None,
        }
    }

    /// Whether retrying the same call later can succeed.
    ///
    /// True for plain I/O errors (a disk that was full) and for store errors whose status says
    /// a retry can help ([`Error::Store`]). False for everything that says the data or the
    /// input is wrong, for a store's refusal (403), and for failed fsyncs: after a failed fsync
    /// the kernel may have dropped the dirty pages, so the only safe retry is to replay from
    /// the last complete checkpoint.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Io { .. } => true,
            Error::Store { retryable, .. } | Error::Broker { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// An [`Error::Store`] from an `object_store` error, retryable by the status the store
    /// answered: `object_store` turns 404 into `NotFound`, 401 into `Unauthenticated`, 403 into
    /// `PermissionDenied`, 409 into `AlreadyExists`, 412 into `Precondition` and 304 into
    /// `NotModified`, none of which a retry changes; what stays `Generic` (server errors,
    /// throttling, lost connections) has already been retried by its client and may pass
    /// later.
    pub(crate) fn object_store(
        op: &'static str,
        path: impl Into<String>,
        source: object_store::Error,
    ) -> Self {
        let retryable = matches!(source, object_store::Error::Generic { .. });
        Error::Store {
            op,
            path: path.into(),
            retryable,
            source: Box::new(source),
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn fsync(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Fsync {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn conflict(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Conflict {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn data_lost(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::DataLost {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn job_busy(job: &str, reason: impl Into<String>) -> Self {
        Error::JobBusy {
            job: job.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn corrupt(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options are named as the caller names them; a value's braces are its own, never an
    /// option's name.
    #[test]
    fn a_setting_message_names_options_as_asked_and_keeps_values_as_given() {
        let e = Setting::TimeZone.refused(format!(
            "{{time_zone}} needs {{partition_by_time}}; `{}` {{nope}}",
            Setting::value("{job}")
        ));
        assert_eq!(
            e.to_string(),
            "`time_zone` needs `partition_by_time`; `{job}` {nope}"
        );
        let flags = |s: Setting| format!("--{}", s.method().replace('_', "-"));
        assert_eq!(
            e.setting_message(&flags).unwrap(),
            "--time-zone needs --partition-by-time; `{job}` {nope}"
        );
        assert_eq!(Error::Config("x".into()).setting_message(&flags), None);
    }
}
