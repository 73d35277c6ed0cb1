//! The names of the metrics filesink emits through the [`metrics`] facade.
//!
//! filesink installs no recorder: without one every metric is a no-op. A user wires any
//! exporter (Prometheus, StatsD, OpenTelemetry…) with `metrics::set_global_recorder` or one of
//! the exporter crates, and may call [`describe`] once to register units and help texts.
//!
//! | name | kind | unit | where | what |
//! |---|---|---|---|---|
//! | `filesink_files_committed_total` | counter | files | `Committer::commit` | files made visible (not those already visible) |
//! | `filesink_bytes_committed_total` | counter | bytes | `Committer::commit` | bytes of those files |
//! | `filesink_records_committed_total` | counter | records | `Committer::commit` | records in those files |
//! | `filesink_leftovers_removed_total` | counter | files | writer restore | unreferenced hidden files or uploads of the writer removed |
//! | `filesink_commit_retries_total` | counter | files | `Coordinator::checkpoint` | files whose commit failed with a retryable error, deferred to the next checkpoint |
//! | `filesink_checkpoint_duration_seconds` | histogram | seconds | `Coordinator::checkpoint` | vote, manifest write and commit of one checkpoint |
//! | `filesink_commit_duration_seconds` | histogram | seconds | `Committer::commit` | one commit call (a group of files) |
//! | `filesink_pending_files` | gauge | files | `Coordinator::checkpoint` | files voted in the last checkpoint and not yet committed |

/// Counter: files made visible by a commit.
pub const FILES_COMMITTED: &str = "filesink_files_committed_total";
/// Counter: bytes of the files made visible by a commit.
pub const BYTES_COMMITTED: &str = "filesink_bytes_committed_total";
/// Counter: records in the files made visible by a commit.
pub const RECORDS_COMMITTED: &str = "filesink_records_committed_total";
/// Counter: leftover files (or uploads) removed at a writer's restore.
pub const LEFTOVERS_REMOVED: &str = "filesink_leftovers_removed_total";
/// Counter: files whose commit failed with a retryable error and was deferred to the next
/// checkpoint.
pub const COMMIT_RETRIES: &str = "filesink_commit_retries_total";
/// Histogram: seconds of one checkpoint (vote, manifest, commit).
pub const CHECKPOINT_DURATION: &str = "filesink_checkpoint_duration_seconds";
/// Histogram: seconds of one commit call.
pub const COMMIT_DURATION: &str = "filesink_commit_duration_seconds";
/// Gauge: files voted and not yet committed.
pub const PENDING_FILES: &str = "filesink_pending_files";

/// Registers the unit and help text of every metric with the installed recorder.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        FILES_COMMITTED,
        Unit::Count,
        "files made visible by a commit"
    );
    describe_counter!(
        BYTES_COMMITTED,
        Unit::Bytes,
        "bytes of the files made visible by a commit"
    );
    describe_counter!(
        RECORDS_COMMITTED,
        Unit::Count,
        "records in the files made visible by a commit"
    );
    describe_counter!(
        LEFTOVERS_REMOVED,
        Unit::Count,
        "leftover files removed at a writer's restore"
    );
    describe_counter!(
        COMMIT_RETRIES,
        Unit::Count,
        "files whose commit was deferred to the next checkpoint"
    );
    describe_histogram!(
        CHECKPOINT_DURATION,
        Unit::Seconds,
        "duration of one checkpoint"
    );
    describe_histogram!(
        COMMIT_DURATION,
        Unit::Seconds,
        "duration of one commit call"
    );
    describe_gauge!(
        PENDING_FILES,
        Unit::Count,
        "files voted and not yet committed"
    );
}
