//! # filesink
//!
//! End-to-end exactly-once file output for data pipelines: a transactional file sink with
//! rename-based commit, in the shape of Apache Flink's `FileSink`.
//!
//! Records (Arrow [`RecordBatch`](arrow::record_batch::RecordBatch)es, or serde values) go
//! into hidden *in-progress* part files, bucketed into Hive-style partition directories. At a
//! checkpoint the writer makes them *pending* (durable, invisible) and hands out
//! [`Committable`]s; once the checkpoint is complete the [`Committer`] makes them visible under
//! their final names. The whole protocol, its crash cases and invariants are on one page:
//! [`sink`].
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, StringArray};
//! use arrow::datatypes::{DataType, Field, Schema};
//! use arrow::record_batch::RecordBatch;
//! use filesink::bucket::HivePartitioner;
//! use filesink::{FileFormat, Sink};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> filesink::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let sink = Sink::local(dir.path())?
//!     .format(FileFormat::parquet())
//!     .bucket_assigner(HivePartitioner::new(["day"])?)
//!     .build()?;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     Field::new("day", DataType::Utf8, false),
//! ]));
//! let batch = RecordBatch::try_new(schema, vec![
//!     Arc::new(Int64Array::from(vec![1, 2, 3])),
//!     Arc::new(StringArray::from(vec!["2026-11-29", "2026-11-30", "2026-11-30"])),
//! ])?;
//!
//! // Phase one: write, then vote at checkpoint 1.
//! let mut writer = sink.create_writer();
//! writer.write(&batch).await?;
//! let prepared = writer.prepare_commit(1).await?;
//! // ... store `prepared.committables` and `prepared.state` durably: checkpoint 1 is now
//! // complete ...
//! let committables = prepared.committables;
//!
//! // Phase two: make the files visible. Safe to repeat, from any process.
//! let summary = sink.committer().commit_all(&committables).await?;
//! assert_eq!(summary.committed, 2); // one file per day
//! let again = sink.committer().commit_all(&committables).await?;
//! assert_eq!(again.already_committed, 2);
//! assert!(dir.path().join("day=2026-11-30").is_dir());
//! # let _ = prepared.state;
//! # Ok(())
//! # }
//! ```
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

pub mod bucket;
#[cfg(feature = "test-util")]
pub mod conformance;
mod error;
pub mod format;
pub mod ingest;
pub mod job;
pub mod lake;
pub mod maintain;
pub mod protocol;
pub mod sink;
pub mod storage;
pub mod table;

pub use error::{Error, Result, Setting};
pub use format::FileFormat;
pub use job::{CheckpointReport, Coordinator, CoordinatorBuilder, JobWriter, Ownership};
pub use protocol::{CommitOutcome, Committable, PendingHandle, PreparedCheckpoint, WriterState};
pub use sink::{
    CommitSummary, Committer, MergePolicy, OutputFileConfig, Restored, RollingPolicy, Sink,
    SinkBuilder, SinkWriter,
};
