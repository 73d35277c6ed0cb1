//! Configuring a sink: [`SinkBuilder`], [`RollingPolicy`], [`OutputFileConfig`].
//!
//! The words are Flink's (`RollingPolicy`, `OutputFileConfig`, `BucketAssigner`), and every
//! knob has a named default.

use std::sync::Arc;
use std::time::Duration;

use crate::bucket::{BasePathBucketAssigner, BucketAssigner};
use crate::format::FileFormat;
use crate::protocol::names::{
    validate_writer_id, PartName, IN_PROGRESS_MARKER, WRITER_ID_BYTES_MAX,
};
use crate::sink::spill::OPEN_FILE_BYTES;
use crate::sink::Sink;
use crate::storage::Storage;
use crate::{Error, Result};

/// When an in-progress part file rolls (is closed and becomes pending).
///
/// Parquet files roll at every checkpoint whatever this says. Row-format files roll at a
/// checkpoint only when [`RollingPolicy::roll_on_checkpoint`] is set or one of the limits is
/// reached; otherwise they stay open and are resumed after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingPolicy {
    /// Roll when a part reaches this size. Checked after each batch's rows for the part are
    /// written, so a part can end larger by up to that one batch's share: keep batches small
    /// against it.
    pub part_size_bytes_max: u64,
    /// Roll when a part has been open this long.
    pub rollover_interval: Duration,
    /// Roll when nothing was written to a part for this long.
    pub inactivity_interval: Duration,
    /// Roll every part at every checkpoint.
    pub roll_on_checkpoint: bool,
}

impl RollingPolicy {
    /// Default [`RollingPolicy::part_size_bytes_max`]: 128 MiB (Flink's default).
    pub const DEFAULT_PART_SIZE_BYTES_MAX: u64 = 128 * 1024 * 1024;
    /// Default [`RollingPolicy::rollover_interval`]: 60 s (Flink's default).
    pub const DEFAULT_ROLLOVER_INTERVAL: Duration = Duration::from_secs(60);
    /// Default [`RollingPolicy::inactivity_interval`]: 60 s (Flink's default).
    pub const DEFAULT_INACTIVITY_INTERVAL: Duration = Duration::from_secs(60);

    /// Rolls at every checkpoint, and on the default size and time limits in between.
    pub fn on_checkpoint() -> Self {
        RollingPolicy {
            roll_on_checkpoint: true,
            ..Self::default()
        }
    }

    /// Sets [`RollingPolicy::part_size_bytes_max`]; [`SinkBuilder::build`] refuses 0.
    pub fn with_part_size_bytes_max(mut self, bytes: u64) -> Self {
        self.part_size_bytes_max = bytes;
        self
    }

    /// Sets [`RollingPolicy::rollover_interval`].
    pub fn with_rollover_interval(mut self, interval: Duration) -> Self {
        self.rollover_interval = interval;
        self
    }

    /// Sets [`RollingPolicy::inactivity_interval`].
    pub fn with_inactivity_interval(mut self, interval: Duration) -> Self {
        self.inactivity_interval = interval;
        self
    }

    /// Sets [`RollingPolicy::roll_on_checkpoint`].
    pub fn with_roll_on_checkpoint(mut self, roll: bool) -> Self {
        self.roll_on_checkpoint = roll;
        self
    }
}

impl Default for RollingPolicy {
    /// Flink's `DefaultRollingPolicy`: 128 MiB, 60 s open, 60 s idle, files kept open across
    /// checkpoints.
    fn default() -> Self {
        RollingPolicy {
            part_size_bytes_max: Self::DEFAULT_PART_SIZE_BYTES_MAX,
            rollover_interval: Self::DEFAULT_ROLLOVER_INTERVAL,
            inactivity_interval: Self::DEFAULT_INACTIVITY_INTERVAL,
            roll_on_checkpoint: false,
        }
    }
}

/// The pre-commit merge of small Parquet files in plain directories (Flink's
/// `FileSink.enableCompact`; `docs/design/delta.md` section 11), set with
/// [`SinkBuilder::merge_small_files`].
///
/// At the vote of a checkpoint, a rolled Parquet file smaller than `small_bytes_max` is
/// *carried*: sealed (durable, hidden) and recorded in the writer state instead of being
/// committed. When a bucket's carried bytes reach `target_bytes`, or its oldest carried file
/// has waited `max_visibility_delay`, or the input ends, the vote merges them into one part
/// file (decoded one row group at a time, re-encoded) whose commit removes them. A lone
/// carried file that is due is committed as it is on local disk, and rewritten the same way
/// on an object store (which cannot rename a hidden object).
///
/// On an object store a carried file is one hidden object written by a plain PUT (an S3
/// multipart upload in progress cannot be read back), so on S3 only a file none of whose
/// bytes went out as a part can be carried: the effective threshold is the smaller of
/// `small_bytes_max` and the part size; a larger file is committed as usual.
///
/// The trade-off: a record carried at checkpoint n is visible at most `max_visibility_delay`
/// plus one checkpoint interval after n, instead of at n; carried bytes are written twice and
/// read twice (once to group the files by schema, once to merge); readers of the directory
/// never see the small files. A merge holds one carried file (below `small_bytes_max`), one
/// decoded row group and the new file's encoder (flushed as a row group at a quarter of the
/// sink's `buffer_bytes_max`) in memory. A merged file may exceed the rolling policy's part
/// size: it is at most `target_bytes` plus one small file, re-encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergePolicy {
    /// A rolled file smaller than this is carried instead of committed.
    pub small_bytes_max: u64,
    /// A bucket's carried files are merged once they hold this many bytes together.
    pub target_bytes: u64,
    /// A bucket's carried files are merged (or its lone carried file committed) at the first
    /// vote after the oldest of them has been carried this long.
    pub max_visibility_delay: Duration,
}

impl MergePolicy {
    /// The default `small_bytes_max`: 16 MiB.
    pub const DEFAULT_SMALL_BYTES_MAX: u64 = 16 * 1024 * 1024;
    /// The default `target_bytes` as a multiple of `small_bytes_max`: 8.
    pub const DEFAULT_TARGET_FACTOR: u64 = 8;
    /// The default `max_visibility_delay`: 60 s.
    pub const DEFAULT_MAX_VISIBILITY_DELAY: Duration = Duration::from_secs(60);

    /// Carries files smaller than `small_bytes_max`, merges at 8 times that or after 60 s.
    pub fn new(small_bytes_max: u64) -> Self {
        MergePolicy {
            small_bytes_max,
            target_bytes: small_bytes_max.saturating_mul(Self::DEFAULT_TARGET_FACTOR),
            max_visibility_delay: Self::DEFAULT_MAX_VISIBILITY_DELAY,
        }
    }

    /// Sets `target_bytes`.
    pub fn with_target_bytes(mut self, bytes: u64) -> Self {
        self.target_bytes = bytes;
        self
    }

    /// Sets `max_visibility_delay`.
    pub fn with_max_visibility_delay(mut self, delay: Duration) -> Self {
        self.max_visibility_delay = delay;
        self
    }
}

impl Default for MergePolicy {
    /// 16 MiB small, 128 MiB target, 60 s delay.
    fn default() -> Self {
        Self::new(Self::DEFAULT_SMALL_BYTES_MAX)
    }
}

/// How part files are named: `<prefix>-<writer id>-<incarnation>-<counter><suffix>`.
///
/// The incarnation is a UUIDv7 drawn each time a writer is created or restored, so no two
/// writer incarnations can produce the same name and no counter has to be recovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFileConfig {
    /// File name prefix. Default `part`.
    pub prefix: String,
    /// File name suffix; `None` means the format's (`.parquet`, `.jsonl`, `.csv`).
    pub suffix: Option<String>,
}

impl OutputFileConfig {
    /// Default [`OutputFileConfig::prefix`].
    pub const DEFAULT_PREFIX: &'static str = "part";

    /// A config with the given prefix and suffix.
    pub fn new(prefix: impl Into<String>, suffix: impl Into<String>) -> Self {
        OutputFileConfig {
            prefix: prefix.into(),
            suffix: Some(suffix.into()),
        }
    }
}

impl Default for OutputFileConfig {
    fn default() -> Self {
        OutputFileConfig {
            prefix: Self::DEFAULT_PREFIX.to_string(),
            suffix: None,
        }
    }
}

/// Builds a [`Sink`]. Start with [`Sink::builder`].
#[derive(Debug)]
pub struct SinkBuilder {
    storage: Arc<dyn Storage>,
    format: FileFormat,
    bucket_assigner: Arc<dyn BucketAssigner>,
    rolling_policy: RollingPolicy,
    output_file_config: OutputFileConfig,
    writer_id: String,
    buffer_bytes_max: u64,
    open_files_max: Option<usize>,
    file_stats: bool,
    merge: Option<MergePolicy>,
}

/// The validated configuration a [`Sink`] hands to its writers and committers.
#[derive(Debug, Clone)]
pub(crate) struct SinkConfig {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) format: FileFormat,
    pub(crate) bucket_assigner: Arc<dyn BucketAssigner>,
    pub(crate) rolling_policy: RollingPolicy,
    pub(crate) prefix: String,
    pub(crate) suffix: String,
    pub(crate) writer_id: String,
    pub(crate) buffer_bytes_max: u64,
    /// The most files a writer keeps open ([`SinkBuilder::open_files_max`], within the
    /// budget's share): at least 1.
    pub(crate) open_files_max: usize,
    /// `open_files_max` is the default, not the user's: writers of one job share it
    /// ([`Sink::sharing_open_files`]).
    pub(crate) open_files_default: bool,
    pub(crate) file_stats: bool,
    /// The pre-commit merge, if on.
    pub(crate) merge: Option<MergePolicy>,
}

impl SinkConfig {
    /// `batch` split into its buckets by the sink's assigner, at the current processing time:
    /// the one place the sink's writers and the coordinator assign (the ingest's decoding
    /// threads split with the same assigner, `InputSource::with_assigner`).
    pub(crate) fn assign(
        &self,
        batch: &arrow::record_batch::RecordBatch,
    ) -> Result<Vec<(crate::bucket::BucketId, arrow::record_batch::RecordBatch)>> {
        self.bucket_assigner.assign(batch, chrono::Utc::now())
    }

    /// See [`Sink::partition_path_bytes_max`](super::Sink::partition_path_bytes_max).
    pub(crate) fn partition_path_bytes_max(&self) -> Option<usize> {
        let path_max = self.storage.path_bytes_max()?;
        // The longest name any writer of this sink gives a part file: its in-progress name,
        // with the longest writer id (parallel writers and compaction derive their own) and
        // counter there are.
        let name = PartName::in_progress_name_of(
            &PartName::final_name_of(
                &self.prefix,
                &"w".repeat(WRITER_ID_BYTES_MAX),
                &uuid::Uuid::nil().simple().to_string(),
                u64::MAX,
                &self.suffix,
            ),
            &uuid::Uuid::nil().simple().to_string(),
        );
        Some(path_max.saturating_sub(name.len() + 1))
    }
}

impl SinkBuilder {
    /// Default [`SinkBuilder::buffer_bytes_max`]: 512 MiB.
    pub const DEFAULT_BUFFER_BYTES_MAX: u64 = 512 * 1024 * 1024;
    /// Default writer id.
    pub const DEFAULT_WRITER_ID: &'static str = "0";
    /// Default [`SinkBuilder::file_stats`]: off.
    pub const DEFAULT_FILE_STATS: bool = false;

    pub(crate) fn new(storage: Arc<dyn Storage>) -> Self {
        SinkBuilder {
            storage,
            format: FileFormat::parquet(),
            bucket_assigner: Arc::new(BasePathBucketAssigner),
            rolling_policy: RollingPolicy::default(),
            output_file_config: OutputFileConfig::default(),
            writer_id: Self::DEFAULT_WRITER_ID.to_string(),
            buffer_bytes_max: Self::DEFAULT_BUFFER_BYTES_MAX,
            open_files_max: None,
            file_stats: Self::DEFAULT_FILE_STATS,
            merge: None,
        }
    }

    /// The file format. Default: [`FileFormat::parquet`].
    pub fn format(mut self, format: FileFormat) -> Self {
        self.format = format;
        self
    }

    /// Which directory each record goes to. Default: [`BasePathBucketAssigner`].
    pub fn bucket_assigner(mut self, assigner: impl BucketAssigner + 'static) -> Self {
        self.bucket_assigner = Arc::new(assigner);
        self
    }

    /// When part files roll. Default: [`RollingPolicy::default`].
    pub fn rolling_policy(mut self, policy: RollingPolicy) -> Self {
        self.rolling_policy = policy;
        self
    }

    /// How part files are named. Default: [`OutputFileConfig::default`].
    pub fn output_file_config(mut self, config: OutputFileConfig) -> Self {
        self.output_file_config = config;
        self
    }

    /// The writer's identity: ASCII letters, digits and `_`, at most 64 characters. Writers
    /// that run in parallel on one sink need distinct ids; a restored writer keeps its id.
    /// Default `0`.
    pub fn writer_id(mut self, id: impl Into<String>) -> Self {
        self.writer_id = id.into();
        self
    }

    /// The writer id of parallel subtask `index` (Flink's subtask index).
    pub fn subtask(self, index: usize) -> Self {
        self.writer_id(index.to_string())
    }

    /// The most bytes the writer may keep in memory across all its files
    /// ([`crate::SinkWriter::buffered_bytes`]): its encoders' buffers, and what the backend
    /// holds before handing bytes on (S3 parts not yet uploaded, staged objects). Above it the
    /// writer seals rolled files early, flushes the largest buffer to its file as a Parquet
    /// row group, or, when that frees nothing or the buffer is too small for a decent row
    /// group (many partitions), rolls that file. Default 512 MiB. On S3 each open file can
    /// hold up to one part (`ObjectStorage::with_part_size_bytes`, 8 MiB by default) before
    /// uploading it, so a writer keeps at most the budget over two parts open there, and
    /// gathers the other partitions' records.
    ///
    /// Each open file also counts 16 KiB against it, and a writer keeps at most a quarter of
    /// the budget's worth of files open ([`SinkBuilder::open_files_max`]); the records of
    /// other partitions are gathered within the budget (spilled beyond it) and written at the
    /// vote, one file each. The files a vote hands out count too, until their commit settles
    /// (a [`crate::Coordinator`]'s) or the next vote: about 1.4 KB each for their committables
    /// and manifest lines, at most half the budget. [`SinkBuilder::build`] refuses 0.
    pub fn buffer_bytes_max(mut self, bytes: u64) -> Self {
        self.buffer_bytes_max = bytes;
        self
    }

    /// The most part files a writer keeps open at once (open and rolled, until they are
    /// sealed), and so the most file descriptors its files hold. Records of a partition
    /// beyond it are *gathered* until the next vote, in memory within the budget and spilled
    /// to a scratch file in `TMPDIR` beyond it, and written there into one file per partition
    /// (see `src/sink/spill.rs`): many partitions cost neither small files nor descriptors.
    /// Whatever is set here, a writer keeps at most a quarter of its budget's worth of open
    /// files, each counted at 16 KiB (8,192 under 512 MiB), and on a store whose open files
    /// hold a part before uploading it ([`crate::storage::Parts::open_file_held_bytes_max`]:
    /// S3) at most the budget over two parts (32 under 512 MiB with 8 MiB parts), so that the
    /// parts being filled cannot crowd the budget into rolling small files. Default: a
    /// quarter of the process's soft limit of open files (256 under the usual 1,024), which
    /// leaves room for other writers and the rest of the process; the writers of one job
    /// ([`crate::Coordinator`]) share three quarters of it when they are more than three.
    /// [`SinkBuilder::build`] refuses 0.
    pub fn open_files_max(mut self, files: usize) -> Self {
        self.open_files_max = Some(files);
        self
    }

    /// Whether each Parquet file's committable carries the file's statistics
    /// ([`crate::Committable::stats`]: records, and per leaf column nulls, min and max),
    /// computed at the vote from the footer the writer just wrote, at no I/O. A table's log
    /// needs them; a plain directory does not, and without them committables and manifests
    /// keep format version 1, which older builds read. Default
    /// [`SinkBuilder::DEFAULT_FILE_STATS`] (off). [`SinkBuilder::build`] refuses it with a row
    /// format: the statistics come from the Parquet footer.
    pub fn file_stats(mut self, on: bool) -> Self {
        self.file_stats = on;
        self
    }

    /// Turns on the pre-commit merge of small Parquet files ([`MergePolicy`]; off by
    /// default). Parquet only ([`Error::Config`] otherwise), and not for a Delta table, whose
    /// small files are compacted after they are visible. Local disk and object stores; on S3
    /// a file is carried only while none of it went out as a multipart part, so the
    /// effective threshold there is the smaller of `small_bytes_max` and the storage's part
    /// size (`ObjectStorage::with_part_size_bytes`, 8 MiB by default).
    pub fn merge_small_files(mut self, policy: MergePolicy) -> Self {
        self.merge = Some(policy);
        self
    }

    /// Checks the configuration and builds the sink: [`Error::Config`] names the first setting
    /// that cannot work.
    pub fn build(self) -> Result<Sink> {
        validate_writer_id(&self.writer_id).map_err(Error::Config)?;
        if self.rolling_policy.part_size_bytes_max == 0 {
            return Err(Error::Config(
                "the rolling policy's part_size_bytes_max must be positive".into(),
            ));
        }
        if self.buffer_bytes_max == 0 {
            return Err(Error::Config("buffer_bytes_max must be positive".into()));
        }
        if self.open_files_max == Some(0) {
            return Err(Error::Config("open_files_max must be positive".into()));
        }
        // What an open file may keep of the budget: 64 KiB on local disk, two parts on S3.
        let per_open_file = (4 * OPEN_FILE_BYTES).max(2 * self.storage.open_file_held_bytes_max());
        let open_files_max = self
            .open_files_max
            .unwrap_or_else(default_open_files_max)
            .min(usize::try_from(self.buffer_bytes_max / per_open_file).unwrap_or(usize::MAX))
            .max(1);
        if self.file_stats && !matches!(self.format, FileFormat::Parquet(_)) {
            return Err(Error::Config(format!(
                "file statistics come from the Parquet footer; the format is {}",
                self.format.name()
            )));
        }
        if let Some(m) = &self.merge {
            if !matches!(self.format, FileFormat::Parquet(_)) {
                return Err(Error::Config(format!(
                    "the pre-commit merge is for Parquet files; the format is {} (row files \
                     stay open across checkpoints instead)",
                    self.format.name()
                )));
            }
            if m.small_bytes_max == 0 || m.target_bytes == 0 {
                return Err(Error::Config(format!(
                    "the merge policy needs a positive small_bytes_max and target_bytes; it has \
                     {} and {}",
                    m.small_bytes_max, m.target_bytes
                )));
            }
        }
        let prefix = self.output_file_config.prefix;
        let suffix = self
            .output_file_config
            .suffix
            .unwrap_or_else(|| self.format.default_suffix().to_string());
        if prefix.is_empty()
            || prefix.starts_with(['.', '_'])
            || prefix.contains(['/', '\\', '\0'])
            || suffix.contains(['/', '\\', '\0'])
            || suffix.contains(IN_PROGRESS_MARKER)
            || suffix.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(Error::Config(format!(
                "part file prefix `{prefix}` and suffix `{suffix}` must make a visible file name: \
                 a non-empty prefix not starting with `.` or `_`, a suffix not starting with a \
                 digit (it would read as the counter), and no `/`, `\\` or NUL"
            )));
        }
        Ok(Sink {
            config: Arc::new(SinkConfig {
                storage: self.storage,
                format: self.format,
                bucket_assigner: self.bucket_assigner,
                rolling_policy: self.rolling_policy,
                prefix,
                suffix,
                writer_id: self.writer_id,
                buffer_bytes_max: self.buffer_bytes_max,
                open_files_max,
                open_files_default: self.open_files_max.is_none(),
                file_stats: self.file_stats,
                merge: self.merge,
            }),
        })
    }
}

/// Default [`SinkBuilder::open_files_max`]: a quarter of the process's soft limit of open
/// files (1,024 assumed where it cannot be read).
fn default_open_files_max() -> usize {
    (crate::storage::local::open_files_soft_limit() / 4).max(1)
}

/// The default [`SinkBuilder::open_files_max`] of each of `writers` writers of one job: the
/// default, or their share of three quarters of the soft limit if that is smaller, so that
/// however many writers a job has, a quarter of the limit is left to the rest of the process.
pub(crate) fn default_open_files_max_of(writers: usize) -> usize {
    let shared = crate::storage::local::open_files_soft_limit() / 4 * 3 / writers.max(1);
    default_open_files_max().min(shared).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStorage;

    #[test]
    fn settings_that_cannot_work_are_refused_by_build_not_by_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let builder = || SinkBuilder::new(Arc::new(LocalStorage::new(dir.path()).unwrap()));
        let zero_part =
            builder().rolling_policy(RollingPolicy::default().with_part_size_bytes_max(0));
        assert!(
            matches!(zero_part.build(), Err(Error::Config(m)) if m.contains("part_size_bytes_max"))
        );
        let zero_buffer = builder().buffer_bytes_max(0);
        assert!(
            matches!(zero_buffer.build(), Err(Error::Config(m)) if m.contains("buffer_bytes_max"))
        );
        let bad_writer = builder().writer_id("a-b");
        assert!(matches!(bad_writer.build(), Err(Error::Config(_))));
        let row_stats = builder().format(FileFormat::json_lines()).file_stats(true);
        assert!(matches!(row_stats.build(), Err(Error::Config(m)) if m.contains("Parquet footer")));
        assert!(builder().file_stats(true).build().is_ok());
        assert!(builder().build().is_ok());
    }

    #[test]
    fn the_writers_of_a_job_share_the_default_cap_of_open_files_not_one_they_set() {
        let dir = tempfile::tempdir().unwrap();
        let builder = || SinkBuilder::new(Arc::new(LocalStorage::new(dir.path()).unwrap()));
        let soft = crate::storage::local::open_files_soft_limit();
        let sink = builder().build().unwrap();
        let alone = sink.config.open_files_max;
        assert_eq!(alone, (soft / 4).max(1));
        for writers in [1, 2, 3] {
            assert_eq!(
                sink.sharing_open_files(writers).config.open_files_max,
                alone
            );
        }
        for writers in [4, 8, 64] {
            let each = sink.sharing_open_files(writers).config.open_files_max;
            assert!(
                each * writers <= soft / 4 * 3,
                "{writers} writers of {each}, limit {soft}"
            );
        }
        let set = builder().open_files_max(100).build().unwrap();
        assert_eq!(set.sharing_open_files(64).config.open_files_max, 100);
    }
}
