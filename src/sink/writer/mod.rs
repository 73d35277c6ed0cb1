//! Phase one: writing records into in-progress files and voting at each checkpoint.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::Serialize;

use crate::format::Encoder;
use crate::protocol::{
    BucketId, CarriedFile, CommitOutcome, Committable, FileStats, PartName, PendingHandle,
    PreparedCheckpoint, ResumableFile, WriterState, FORMAT_VERSION,
};
use crate::sink::config::SinkConfig;
use crate::sink::spill::{Gather, OPEN_FILE_BYTES};
use crate::sink::{Committer, MergePolicy, RollingPolicy};
use crate::storage::{PartLocation, PartWriter};
use crate::{Error, Result};

mod merge;
mod restore;

/// Rolled files kept open, waiting for the next checkpoint, before they are sealed early (one
/// group of fsyncs) to bound open file handles. Large enough that a checkpoint of a few
/// hundred files is sealed as one group, in `prepare_commit`.
const ROLLED_OPEN_MAX: usize = 256;

/// The most that batches which encoders keep by reference (slices of them:
/// [`Encoder::compact`]) may hold alive outside the budget's count before the encoders copy
/// their slices: this, or a sixteenth of the budget if that is smaller.
const LOOSE_BYTES_MAX: u64 = 16 << 20;

/// Under memory pressure, an encoder buffer at least this large is flushed as a row group of
/// its own and its file stays open. A smaller buffer would make a poor row group: its file
/// rolls instead (see [`SinkWriter::write`]). Small, because the alternative is worse: with
/// a thousand partitions and a budget of tens of MiB, every file's buffer is small, and
/// rolling makes a file per flush where flushing makes a row group.
const ROW_GROUP_FLUSH_BYTES_MIN: u64 = 64 * 1024;

/// Writes records into in-progress part files and, at each checkpoint, turns them into
/// committables (Flink's `CommittingSinkWriter`).
///
/// Get one from [`crate::Sink::create_writer`] or [`crate::Sink::restore_writer`]. Call
/// [`SinkWriter::write`] for data, and at each checkpoint [`SinkWriter::prepare_commit`];
/// store what it returns (committables and state) in the checkpoint, and once it is complete
/// hand the committables to a [`Committer`].
///
/// After any error from `write`, `prepare_commit` or `flush_idle`, other than a rejected input
/// that changed nothing, the writer is *poisoned*: every further call fails, and the job
/// restores from its last complete checkpoint (invariant 8 of [`crate::sink`]).
#[derive(Debug)]
pub struct SinkWriter {
    config: Arc<SinkConfig>,
    /// Drawn per incarnation; part of every final name this writer creates.
    incarnation: String,
    next_counter: u64,
    open: BTreeMap<BucketId, OpenPart>,
    /// Closed files not yet sealed (no fsync yet).
    rolled: Vec<ClosedPart>,
    /// Sealed files waiting for the next `prepare_commit` to hand them out.
    sealed: Vec<(ClosedPart, PendingHandle)>,
    state: WriterState,
    poisoned: Option<String>,
    scratch: Vec<u8>,
    /// What `open` and `rolled` keep in memory (`OpenPart::memory_bytes` over `open`, plus
    /// `rolled_held_bytes`), kept as parts change.
    buffered_bytes_total: u64,
    /// What the backend holds in memory for the files in `rolled`, freed when they are sealed.
    rolled_held_bytes: u64,
    /// Small sealed files a pre-commit merge carries, as of the last vote (or restore).
    carried: Vec<CarriedFile>,
    /// [`SinkWriter::end_of_input`] was called: the next vote merges every carried file.
    input_ended: bool,
    /// The size of the batches written since the encoders last copied the slices they keep
    /// ([`SinkWriter::compact_encoders`]): what those slices may keep alive.
    loose_bytes: u64,
    /// Buckets beyond the open-files cap, written at the vote ([`crate::sink::spill`]); what
    /// their batches hold in memory is part of `buffered_bytes_total`.
    gather: Gather,
    /// What the gathered rows the vote is writing held in memory when it took them: counted
    /// in `buffered_bytes_total` until it has written them.
    vote_tail_bytes: u64,
    /// What the files rolled since the last vote will cost as committables
    /// ([`SinkWriter::file_cost_bytes`]), reserved out of the budget
    /// ([`SinkWriter::buffer_limit`]).
    closed_cost_bytes: u64,
    /// What the committables handed out cost, reserved until their commit has settled:
    /// released by their [`Reservation`] where the caller took charge of it (the
    /// coordinator), else at the next vote ([`SinkWriter::last_vote_cost_bytes`]).
    handed_cost_bytes: Arc<AtomicU64>,
    /// The part of `handed_cost_bytes` that the last vote added and that no [`Reservation`]
    /// took: the next vote releases it.
    last_vote_cost_bytes: u64,
}

/// The memory a writer keeps reserved for the committables of one vote
/// ([`SinkWriter::take_reservation`]), released when this is dropped: once their commit has
/// settled.
#[derive(Debug)]
pub(crate) struct Reservation {
    handed: Arc<AtomicU64>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.handed.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct OpenPart {
    bucket: BucketId,
    file: Box<dyn PartWriter>,
    encoder: Option<Box<dyn Encoder>>,
    schema: Option<SchemaRef>,
    crc32c: u32,
    record_count: u64,
    created_at: SystemTime,
    last_write: SystemTime,
    supersedes: Vec<String>,
    /// What the encoder held in memory after the last call that changed it.
    buffered_bytes: u64,
    /// What the backend held in memory for the file then ([`PartWriter::memory_bytes`]).
    held_bytes: u64,
}

impl OpenPart {
    /// A new, empty file of `bucket`, opened at `now`, that supersedes `supersedes` once
    /// committed.
    fn new(
        bucket: BucketId,
        file: Box<dyn PartWriter>,
        now: SystemTime,
        supersedes: Vec<String>,
    ) -> OpenPart {
        OpenPart {
            bucket,
            file,
            encoder: None,
            schema: None,
            crc32c: 0,
            record_count: 0,
            created_at: now,
            last_write: now,
            supersedes,
            buffered_bytes: 0,
            held_bytes: 0,
        }
    }

    /// Re-reads the encoder's buffered bytes and the backend's held bytes after a call that
    /// changed them, and adjusts the writer's running `total`.
    fn account(&mut self, total: &mut u64) {
        let buffered = self
            .encoder
            .as_ref()
            .map_or(0, |e| e.buffered_bytes() as u64);
        let held = self.file.memory_bytes();
        *total = *total - self.buffered_bytes - self.held_bytes + buffered + held;
        self.buffered_bytes = buffered;
        self.held_bytes = held;
    }

    /// Everything this file keeps in memory.
    fn memory_bytes(&self) -> u64 {
        self.buffered_bytes + self.held_bytes
    }
}

#[derive(Debug)]
struct ClosedPart {
    bucket: BucketId,
    file: Option<Box<dyn PartWriter>>,
    final_path: String,
    size_bytes: u64,
    crc32c: u32,
    record_count: u64,
    supersedes: Vec<String>,
    /// Computed from the footer when the sink asks for statistics.
    stats: Option<FileStats>,
    /// Sealed as a carried file of the pre-commit merge
    /// ([`crate::storage::Parts::seal_carried`]): its vote carries it instead of handing it
    /// out.
    carried: bool,
}

/// A writer restored from a checkpoint, with what committing the checkpoint's committables did.
#[derive(Debug)]
pub struct Restored {
    /// The restored writer.
    pub writer: SinkWriter,
    /// One outcome per committable passed to [`crate::Sink::restore_writer`], in order.
    pub commit_outcomes: Vec<CommitOutcome>,
    /// Hidden files of this writer that the checkpoint did not reference and that were removed.
    pub removed_leftovers: Vec<String>,
}

impl SinkWriter {
    pub(crate) fn new(config: Arc<SinkConfig>) -> Self {
        let state = WriterState {
            version: FORMAT_VERSION,
            writer_id: config.writer_id.clone(),
            format: config.format.name().to_string(),
            checkpoint_id: 0,
            in_progress: Vec::new(),
            carried: Vec::new(),
        };
        SinkWriter {
            config,
            incarnation: uuid::Uuid::now_v7().simple().to_string(),
            next_counter: 0,
            open: BTreeMap::new(),
            rolled: Vec::new(),
            sealed: Vec::new(),
            state,
            poisoned: None,
            scratch: Vec::new(),
            buffered_bytes_total: 0,
            rolled_held_bytes: 0,
            carried: Vec::new(),
            input_ended: false,
            loose_bytes: 0,
            closed_cost_bytes: 0,
            handed_cost_bytes: Arc::new(AtomicU64::new(0)),
            last_vote_cost_bytes: 0,
            gather: Gather::default(),
            vote_tail_bytes: 0,
        }
    }

    /// Writes `batch`, split into buckets by the sink's bucket assigner.
    ///
    /// A batch whose values cannot be bucketed, whose partition path is too long for the
    /// store ([`crate::Sink::partition_path_bytes_max`]) or whose schema does not match the
    /// open file of its bucket is rejected with [`Error::InvalidInput`] before anything is written; the
    /// writer stays usable. Any later error poisons the writer.
    ///
    /// Memory: after each bucket's part of the batch, [`SinkWriter::buffered_bytes`] is brought
    /// back within the sink's `buffer_bytes_max` by flushing the largest buffer as a Parquet
    /// row group if it is at least 64 KiB (or less: see `bound_memory`),
    /// and by rolling its file otherwise. So `buffered_bytes` never exceeds the budget
    /// between calls, and while one bucket is written it exceeds it by at most that bucket's
    /// share of the batch.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check_poisoned()?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let buckets = self.config.assign(batch)?;
        self.write_assigned(buckets).await
    }

    /// Writes a batch already split into buckets by the sink's bucket assigner (the
    /// coordinator assigns once and hands each writer its buckets).
    pub(crate) async fn write_assigned(
        &mut self,
        buckets: Vec<(BucketId, RecordBatch)>,
    ) -> Result<()> {
        self.check_poisoned()?;
        let path_max = self.config.partition_path_bytes_max();
        for (bucket, b) in &buckets {
            crate::protocol::bucket_id::check_partition_path(bucket, path_max)
                .map_err(Error::InvalidInput)?;
            let schema = match self.open.get(bucket) {
                Some(part) => part.schema.as_ref(),
                None => self.gather.schema(bucket),
            };
            if let Some(schema) = schema {
                if schema.fields() != b.schema().fields() {
                    return Err(Error::InvalidInput(format!(
                        "batch schema {} does not match the schema {} of the records bucket \
                         `{bucket}` holds in its open file (or gathered for the next checkpoint)",
                        b.schema(),
                        schema
                    )));
                }
            }
            if let crate::format::FileFormat::Csv(_) = self.config.format {
                if let Some(f) = b
                    .schema()
                    .fields()
                    .iter()
                    .find(|f| f.data_type().is_nested())
                {
                    return Err(Error::InvalidInput(format!(
                        "column `{}` of type {} cannot be written as CSV",
                        f.name(),
                        f.data_type()
                    )));
                }
            }
        }
        let result = self.write_buckets(buckets).await;
        self.poison_on_error(result)
    }

    /// Writes serde values as records of `schema` (through arrow-json's serializer).
    ///
    /// A value that does not fit the schema is rejected with [`Error::InvalidInput`] before
    /// anything is written.
    pub async fn write_rows<T: Serialize>(&mut self, schema: &SchemaRef, rows: &[T]) -> Result<()> {
        self.check_poisoned()?;
        let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
            .build_decoder()
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        decoder
            .serialize(rows)
            .map_err(|e| Error::InvalidInput(format!("record does not fit the schema: {e}")))?;
        if let Some(batch) = decoder
            .flush()
            .map_err(|e| Error::InvalidInput(format!("record does not fit the schema: {e}")))?
        {
            self.write(&batch).await?;
        }
        Ok(())
    }

    /// Rolls files that are due by the rolling policy's time limits (rollover and inactivity
    /// interval). Call it from a timer when input can be idle (Flink's
    /// `onProcessingTime`); `write` and `prepare_commit` check the limits too.
    pub async fn flush_idle(&mut self) -> Result<()> {
        self.check_poisoned()?;
        let result = self.roll_due(SystemTime::now()).await;
        self.poison_on_error(result)
    }

    /// Rolls every open file: the input has ended, and the next
    /// [`SinkWriter::prepare_commit`] hands every file out (Flink's `flush(endOfInput)`),
    /// carried files of a pre-commit merge included (merged).
    pub async fn end_of_input(&mut self) -> Result<()> {
        self.check_poisoned()?;
        self.input_ended = true;
        let buckets: Vec<BucketId> = self.open.keys().cloned().collect();
        let mut result = Ok(());
        for bucket in buckets {
            result = self.roll(&bucket).await;
            if result.is_err() {
                break;
            }
        }
        self.poison_on_error(result)
    }

    /// The vote of checkpoint `checkpoint_id`: rolls every file that must roll (all Parquet
    /// files; row files by the rolling policy), makes them durable, persists the row files that
    /// stay open, and returns what checkpoint `checkpoint_id` must hold of this writer: the
    /// committables of every file that became pending since the last checkpoint and the writer
    /// state (the row files kept open, with their durable lengths), together.
    ///
    /// An error fails the checkpoint and poisons the writer.
    #[tracing::instrument(
        name = "prepare_commit",
        skip_all,
        fields(
            writer = %self.config.writer_id,
            checkpoint = checkpoint_id,
            files = tracing::field::Empty,
            bytes = tracing::field::Empty,
            open_files = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        )
    )]
    pub async fn prepare_commit(&mut self, checkpoint_id: u64) -> Result<PreparedCheckpoint> {
        self.check_poisoned()?;
        let started = std::time::Instant::now();
        let result = self.prepare_commit_inner(checkpoint_id).await;
        let committables = self.poison_on_error(result)?;
        let span = tracing::Span::current();
        span.record("files", committables.len());
        span.record(
            "bytes",
            committables.iter().map(|c| c.size_bytes).sum::<u64>(),
        );
        span.record("open_files", self.state.in_progress.len());
        span.record("duration_ms", started.elapsed().as_millis() as u64);
        tracing::debug!("voted");
        Ok(PreparedCheckpoint {
            checkpoint_id,
            committables,
            state: self.state.clone(),
        })
    }

    /// Takes charge of releasing what the committables of the last vote keep reserved of the
    /// budget: the returned [`Reservation`] releases it when dropped, once their commit has
    /// settled, instead of the next vote.
    pub(crate) fn take_reservation(&mut self) -> Reservation {
        Reservation {
            handed: self.handed_cost_bytes.clone(),
            bytes: std::mem::take(&mut self.last_vote_cost_bytes),
        }
    }

    /// The writer state as of the last [`SinkWriter::prepare_commit`] (the state that vote
    /// returned), or as restored.
    pub fn snapshot_state(&self) -> WriterState {
        self.state.clone()
    }

    /// In-progress files currently open.
    pub fn open_files(&self) -> usize {
        self.open.len()
    }

    /// Partitions whose records wait for the next vote because the open-files cap
    /// ([`crate::SinkBuilder::open_files_max`]) left them without a file of their own.
    pub fn gathered_partitions(&self) -> usize {
        self.gather.len()
    }

    /// Bytes this writer keeps in memory: what its encoders buffer (for Parquet, what the
    /// open row groups hold, `ArrowWriter::memory_size`) and what the backend holds of its
    /// files before handing them on ([`PartWriter::memory_bytes`]: S3 parts not yet uploaded,
    /// staged objects; nothing on local disk). The sink's `buffer_bytes_max` bounds it. Kept
    /// as a running total: O(1).
    pub fn buffered_bytes(&self) -> u64 {
        // After a failed call the parts may have changed unaccounted; the writer is poisoned
        // then and the number no longer matters.
        debug_assert!(
            self.poisoned.is_some()
                || self.buffered_bytes_total
                    == self
                        .open
                        .values()
                        .map(|p| {
                            p.encoder.as_ref().map_or(0, |e| e.buffered_bytes() as u64)
                                + p.file.memory_bytes()
                        })
                        .chain(
                            self.rolled
                                .iter()
                                .map(|p| { p.file.as_ref().map_or(0, |f| f.memory_bytes()) })
                        )
                        .sum::<u64>()
                        + self.gather.memory_bytes()
                        + self.vote_tail_bytes,
            "the running total matches the encoders and the parts"
        );
        self.buffered_bytes_total
    }

    /// Files rolled since the last checkpoint, waiting to be handed out by the next
    /// [`SinkWriter::prepare_commit`].
    pub fn pending_files(&self) -> usize {
        self.rolled.len() + self.sealed.len()
    }

    /// Small files a pre-commit merge carries as of the last vote (see
    /// [`crate::SinkBuilder::merge_small_files`]).
    pub fn carried_files(&self) -> &[CarriedFile] {
        &self.carried
    }

    /// The id drawn for this writer incarnation (part of every final name it creates).
    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(why) => Err(Error::InvalidInput(format!(
                "the writer failed earlier ({why}); restore it from the last complete checkpoint"
            ))),
            None => Ok(()),
        }
    }

    fn poison_on_error<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.poisoned = Some(e.to_string());
        }
        result
    }

    fn next_location(&mut self, bucket: &BucketId) -> PartLocation {
        let counter = self.next_counter;
        self.next_counter += 1;
        let name = PartName::final_name_of(
            &self.config.prefix,
            &self.config.writer_id,
            &self.incarnation,
            counter,
            &self.config.suffix,
        );
        let hidden =
            PartName::in_progress_name_of(&name, &uuid::Uuid::now_v7().simple().to_string());
        let join = |n: &str| {
            if bucket.is_root() {
                n.to_string()
            } else {
                format!("{bucket}/{n}")
            }
        };
        PartLocation {
            in_progress_path: join(&hidden),
            final_path: join(&name),
        }
    }

    /// Opens a part file for each of `buckets` that has none, together
    /// ([`Storage::create_all`](crate::storage::Storage::create_all)): the first batch after a
    /// checkpoint opens a file in every bucket it touches, and on an object store each is a
    /// round trip (CreateMultipartUpload). Every call is awaited before this returns.
    async fn open_files_of(
        &mut self,
        buckets: impl Iterator<Item = &BucketId>,
        now: SystemTime,
    ) -> Result<()> {
        let mut wanted: Vec<(BucketId, PartLocation)> = Vec::new();
        for bucket in buckets {
            if !self.open.contains_key(bucket) && !wanted.iter().any(|(b, _)| b == bucket) {
                let location = self.next_location(bucket);
                wanted.push((bucket.clone(), location));
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let (buckets, locations): (Vec<BucketId>, Vec<PartLocation>) = wanted.into_iter().unzip();
        let files = self.config.storage.create_all(locations).await?;
        for (bucket, file) in buckets.into_iter().zip(files) {
            tracing::debug!(
                writer = %self.config.writer_id,
                file = %file.location().final_path,
                "opened part file"
            );
            self.open
                .insert(bucket.clone(), OpenPart::new(bucket, file, now, Vec::new()));
        }
        Ok(())
    }

    async fn write_buckets(&mut self, buckets: Vec<(BucketId, RecordBatch)>) -> Result<()> {
        let now = SystemTime::now();
        let policy = self.config.rolling_policy.clone();
        for (bucket, _) in &buckets {
            if self
                .open
                .get(bucket)
                .is_some_and(|p| is_due(p, &policy, now))
            {
                self.roll(bucket).await?;
            }
        }
        // New buckets get files together, as many as the open-files cap leaves room for; the
        // others are gathered until the vote.
        let mut new: Vec<&BucketId> = Vec::new();
        for (bucket, _) in &buckets {
            if !self.open.contains_key(bucket) && !self.gather.contains(bucket) {
                new.push(bucket);
            }
        }
        if !new.is_empty() {
            let room = self.room_for_files().await?;
            self.open_files_of(new.into_iter().take(room), now).await?;
        }
        // The buckets' batches are slices of one batch (or the whole of it): any of them
        // reports the size of all its buffers.
        self.loose_bytes += buckets
            .first()
            .map_or(0, |(_, b)| b.get_array_memory_size() as u64);
        let mut gathered = Vec::new();
        for (bucket, batch) in buckets {
            // Without a file: gathered this checkpoint already, or rolled since by the memory
            // bound or its size (a file it had written to in an earlier call) and no room for
            // another. Rows of another schema than the gathered ones get a file regardless.
            let takes = self.gather.takes(&batch.schema())
                && gathered
                    .first()
                    .is_none_or(|(_, b): &(BucketId, RecordBatch)| {
                        b.schema().fields() == batch.schema().fields()
                    });
            if !self.open.contains_key(&bucket)
                && (self.gather.contains(&bucket) || (takes && self.room_for_files().await? == 0))
            {
                gathered.push((bucket, batch));
                continue;
            }
            self.write_to_file(&bucket, &batch, now).await?;
            // After every bucket, not once per batch: a batch that spreads over many buckets
            // must not raise the peak by all of them at once.
            self.bound_memory().await?;
        }
        if !gathered.is_empty() {
            let before = self.gather.memory_bytes();
            self.gather.push(gathered)?;
            self.buffered_bytes_total += self.gather.memory_bytes() - before;
            self.bound_memory().await?;
        }
        if self.loose_bytes >= LOOSE_BYTES_MAX.min(self.config.buffer_bytes_max / 16) {
            self.compact_encoders()?;
        }
        if self.rolled.len() > ROLLED_OPEN_MAX {
            self.seal_rolled().await?;
        }
        Ok(())
    }

    /// How many more files may be opened now under the open-files cap
    /// ([`crate::SinkBuilder::open_files_max`]), which counts the open files and the rolled
    /// ones not sealed yet (they hold their descriptors until then): when the rolled ones are
    /// in the way, they are sealed now.
    async fn room_for_files(&mut self) -> Result<usize> {
        let cap = self.config.open_files_max;
        if self.open.len() + self.rolled.len() >= cap && !self.rolled.is_empty() {
            self.seal_rolled().await?;
        }
        Ok(cap.saturating_sub(self.open.len() + self.rolled.len()))
    }

    /// Writes `batch` into the open file of `bucket` (a new one if it has none), rolling the
    /// file once it reaches the part size.
    async fn write_to_file(
        &mut self,
        bucket: &BucketId,
        batch: &RecordBatch,
        now: SystemTime,
    ) -> Result<()> {
        self.open_files_of(std::iter::once(bucket), now).await?;
        let share =
            usize::try_from(self.config.buffer_bytes_max / (2 * self.open.len().max(1) as u64))
                .unwrap_or(usize::MAX);
        let part = self.open.get_mut(bucket).expect("opened above");
        if part.encoder.is_none() {
            let resumed = part.file.len_bytes() > 0;
            let mut encoder = self.config.format.encoder(batch.schema(), resumed)?;
            // What a file reserves ahead stays within its share of the budget.
            encoder.reserve_at_most(share);
            part.encoder = Some(encoder);
            part.schema = Some(batch.schema());
        }
        self.scratch.clear();
        part.encoder
            .as_mut()
            .expect("set above")
            .write(batch, &mut self.scratch)?;
        write_bytes(part, &self.scratch).await?;
        part.account(&mut self.buffered_bytes_total);
        part.record_count += batch.num_rows() as u64;
        part.last_write = now;
        let size = part.file.len_bytes() + part.buffered_bytes;
        if size >= self.config.rolling_policy.part_size_bytes_max {
            self.roll(bucket).await?;
        }
        Ok(())
    }

    /// The vote's first step for gathered buckets: each gets a file (in groups, opened
    /// together), its records are written in the order they came (spilled ones read back),
    /// and the file rolls. The open-files cap still holds: the rolled files are sealed
    /// whenever the next group would pass it.
    async fn write_gathered(&mut self, now: SystemTime) -> Result<()> {
        if self.gather.len() == 0 {
            return Ok(());
        }
        // The rows still in memory stay counted until they are written.
        self.vote_tail_bytes = self.gather.memory_bytes();
        let mut drained = self.gather.take()?;
        let result = async {
            loop {
                let cap = self.config.open_files_max;
                if self.open.len() + self.rolled.len() >= cap {
                    self.seal_rolled().await?;
                }
                // Row files that stay open may fill the cap: one file at a time then.
                let room = cap.saturating_sub(self.open.len() + self.rolled.len());
                let next = drained.upcoming(ROLLED_OPEN_MAX.min(room).max(1));
                if next.is_empty() {
                    return Ok(());
                }
                self.open_files_of(next.iter(), now).await?;
                for _ in 0..next.len() {
                    let (bucket, batches) = drained.next().await?.expect("listed as upcoming");
                    for batch in batches {
                        self.write_to_file(&bucket, &batch, now).await?;
                        self.bound_memory().await?;
                    }
                    self.roll(&bucket).await?;
                }
            }
        }
        .await;
        drop(drained);
        self.buffered_bytes_total -= std::mem::take(&mut self.vote_tail_bytes);
        result
    }

    /// Has every open file's encoder copy the slices it keeps into buffers of its own
    /// ([`Encoder::compact`]), so that the batches they were cut from can go.
    fn compact_encoders(&mut self) -> Result<()> {
        for part in self.open.values_mut() {
            if let Some(encoder) = part.encoder.as_mut() {
                encoder.compact()?;
                part.account(&mut self.buffered_bytes_total);
            }
        }
        self.loose_bytes = 0;
        Ok(())
    }

    /// What the buffers may hold: the budget less
    ///
    /// - what the open files cost beyond their buffers ([`OPEN_FILE_BYTES`] each, at most a
    ///   quarter of the budget in all: the open-files cap keeps it there unless the budget is
    ///   tiny);
    /// - what the closed files will cost until their checkpoint commits (their committables
    ///   and their lines in the manifest: [`SinkWriter::file_cost_bytes`]), at most half of
    ///   the budget. A checkpoint of a hundred thousand files costs tens of megabytes, and
    ///   the writes that follow it run beside its commit.
    fn buffer_limit(&self) -> u64 {
        let budget = self.config.buffer_bytes_max;
        let files = (self.open.len() as u64).saturating_mul(OPEN_FILE_BYTES);
        let committables = self.closed_cost_bytes + self.handed_cost_bytes.load(Ordering::Relaxed);
        budget - files.min(budget / 4) - committables.min(budget / 2)
    }

    /// About what the closed file `part` costs in memory until its checkpoint commits: its
    /// committable, and about as much again for its entry in the manifest's bytes (and in the
    /// table's log entry, with statistics). An estimate from its names and statistics, within
    /// a small factor of what a checkpoint of 100,000 files was measured to hold.
    fn file_cost_bytes(&self, part: &ClosedPart) -> u64 {
        /// The committable's fields and JSON keys, beyond its strings.
        const FIXED_BYTES: usize = 512;
        /// A column's statistics (its path, bounds and null count, in memory and in JSON).
        const STATS_COLUMN_BYTES: usize = 384;
        // The final path twice: the pending handle names a hidden file or an upload beside it.
        let strings = 2 * part.final_path.len()
            + part.bucket.as_str().len()
            + self.config.writer_id.len()
            + part.supersedes.iter().map(String::len).sum::<usize>();
        let stats = part
            .stats
            .as_ref()
            .map_or(0, |s| s.columns().len() * STATS_COLUMN_BYTES);
        let copies = if stats > 0 { 3 } else { 2 };
        (copies * (FIXED_BYTES + strings + stats)) as u64
    }

    /// Keeps what the writer holds in memory within the budget ([`SinkWriter::buffer_limit`]).
    /// While over it:
    ///
    /// - if the backend holds bytes of rolled files (S3 last parts, staged objects), the rolled
    ///   files are sealed now instead of at the checkpoint, which hands those bytes to the
    ///   store;
    /// - if the gathered buckets hold more than any open file, they are spilled to the scratch
    ///   file ([`crate::sink::spill`]);
    /// - otherwise the open file that holds the most is taken: an encoder buffer of a decent
    ///   row group (at least [`ROW_GROUP_FLUSH_BYTES_MIN`], or a quarter of the limit, or half
    ///   of the limit's share per open file, whichever is smallest) is flushed to its file,
    ///   which stays open, and the backend hands what it holds of the file on where it can
    ///   ([`PartWriter::release_memory`]: local files write their buffer); if that frees
    ///   nothing (an S3 part still below the minimum part size), the file rolls (finished
    ///   now, sealed with the next group, committed at the next checkpoint), which frees its
    ///   encoder and, once sealed, the backend's buffer.
    ///
    /// Rolling, sealing and spilling early are always safe: a rolled file is an ordinary
    /// pending file of the next checkpoint, and spilled records are written at its vote.
    async fn bound_memory(&mut self) -> Result<()> {
        // With many open files the largest may still be small: half of a fair share of what
        // the buffers may hold still makes a row group rather than a file.
        let limit = self.buffer_limit();
        let fair_share = limit / (2 * self.open.len().max(1) as u64);
        let flush_min = ROW_GROUP_FLUSH_BYTES_MIN.min(limit / 4).min(fair_share);
        while self.buffered_bytes_total > self.buffer_limit() {
            if self.rolled_held_bytes > 0 {
                self.seal_rolled().await?;
                continue;
            }
            let largest = self
                .open
                .values()
                .filter(|p| p.memory_bytes() > 0)
                .max_by_key(|p| p.memory_bytes())
                .map(|p| (p.bucket.clone(), p.memory_bytes()));
            // The gathered rows are spilled once they hold a quarter of the limit (or nothing
            // else holds memory): each spill is a run the vote reads a batch of at a time, so
            // runs are few and large.
            let gathered = self.gather.memory_bytes();
            if gathered > 0 && (gathered >= self.buffer_limit() / 4 || largest.is_none()) {
                self.gather.spill().await?;
                self.buffered_bytes_total -= gathered;
                continue;
            }
            let Some((bucket, largest)) = largest else {
                break;
            };
            let part = self.open.get_mut(&bucket).expect("found above");
            if part.buffered_bytes >= flush_min {
                let encoder = part.encoder.as_mut().expect("it buffers bytes");
                self.scratch.clear();
                encoder.flush(&mut self.scratch)?;
                write_bytes(part, &self.scratch).await?;
            }
            part.file.release_memory().await?;
            part.account(&mut self.buffered_bytes_total);
            if part.memory_bytes() < largest {
                continue;
            }
            // Neither the flush nor the backend freed anything: spilling the gathered rows
            // does, if there are any, before rolling makes another file.
            if gathered > 0 {
                self.gather.spill().await?;
                self.buffered_bytes_total -= gathered;
                continue;
            }
            self.roll(&bucket).await?;
        }
        Ok(())
    }

    async fn roll_due(&mut self, now: SystemTime) -> Result<()> {
        let policy = &self.config.rolling_policy;
        let due: Vec<BucketId> = self
            .open
            .values()
            .filter(|p| is_due(p, policy, now))
            .map(|p| p.bucket.clone())
            .collect();
        for bucket in due {
            self.roll(&bucket).await?;
        }
        Ok(())
    }

    /// Ends the open file of `bucket`: finishes the encoder, writes the tail, and moves the file
    /// to `rolled`. Sealing (the fsyncs) happens for all rolled files together.
    async fn roll(&mut self, bucket: &BucketId) -> Result<()> {
        let Some(mut part) = self.open.remove(bucket) else {
            return Ok(());
        };
        self.buffered_bytes_total -= part.memory_bytes();
        let mut stats = None;
        if let Some(encoder) = part.encoder.take() {
            self.scratch.clear();
            let footer = encoder.finish(&mut self.scratch)?;
            write_bytes(&mut part, &self.scratch).await?;
            if let (true, Some(footer), Some(schema)) =
                (self.config.file_stats, footer, &part.schema)
            {
                let computed = crate::format::stats::file_stats(schema, &footer);
                // Assert in pairs: the footer counts the records the writer counted.
                if computed.num_records != part.record_count {
                    return Err(Error::corrupt(
                        format!("part file `{}`", part.file.location().final_path),
                        format!(
                            "its Parquet footer counts {} records, the writer wrote {}",
                            computed.num_records, part.record_count
                        ),
                    ));
                }
                stats = Some(computed);
            }
        }
        tracing::debug!(
            writer = %self.config.writer_id,
            file = %part.file.location().final_path,
            bytes = part.file.len_bytes(),
            records = part.record_count,
            "rolled"
        );
        let held = part.file.memory_bytes();
        self.buffered_bytes_total += held;
        self.rolled_held_bytes += held;
        let closed = ClosedPart {
            bucket: part.bucket,
            final_path: part.file.location().final_path.clone(),
            size_bytes: part.file.len_bytes(),
            file: Some(part.file),
            crc32c: part.crc32c,
            record_count: part.record_count,
            supersedes: part.supersedes,
            stats,
            carried: false,
        };
        self.closed_cost_bytes += self.file_cost_bytes(&closed);
        self.rolled.push(closed);
        Ok(())
    }

    async fn seal_rolled(&mut self) -> Result<()> {
        if self.rolled.is_empty() {
            return Ok(());
        }
        let rolled = std::mem::take(&mut self.rolled);
        // The small files a pre-commit merge carries are sealed so that they can be read back
        // (on an object store: one hidden object each, not a multipart upload).
        let (mut carried, mut rest): (Vec<ClosedPart>, Vec<ClosedPart>) =
            rolled.into_iter().partition(|p| self.carries(p));
        let take = |parts: &mut Vec<ClosedPart>| -> Vec<Box<dyn PartWriter>> {
            parts
                .iter_mut()
                .map(|p| p.file.take().expect("rolled parts hold their file"))
                .collect()
        };
        let (carried_files, files) = (take(&mut carried), take(&mut rest));
        // Sealing hands the files to the store (or fails the writer): they hold nothing now.
        self.buffered_bytes_total -= std::mem::take(&mut self.rolled_held_bytes);
        if !files.is_empty() {
            let handles = self.config.storage.seal(files).await?;
            self.sealed.extend(rest.into_iter().zip(handles));
        }
        if !carried_files.is_empty() {
            let handles = self.config.storage.seal_carried(carried_files).await?;
            for p in &mut carried {
                p.carried = true;
            }
            self.sealed.extend(carried.into_iter().zip(handles));
        }
        Ok(())
    }

    /// Whether the pre-commit merge carries the rolled file `part`: a Parquet file of its own
    /// (no statistics, superseding nothing) smaller than the policy's `small_bytes_max`, that
    /// the backend can seal to be read back ([`PartWriter::can_carry`]: on S3, none of its
    /// bytes uploaded as a part yet, so the effective threshold there is the smaller of
    /// `small_bytes_max` and the part size).
    fn carries(&self, part: &ClosedPart) -> bool {
        self.config.merge.as_ref().is_some_and(|policy| {
            part.size_bytes < policy.small_bytes_max
                && part.supersedes.is_empty()
                && part.stats.is_none()
                && part.file.as_ref().is_some_and(|f| f.can_carry())
        })
    }

    async fn prepare_commit_inner(&mut self, checkpoint_id: u64) -> Result<Vec<Committable>> {
        let now = SystemTime::now();
        let policy = self.config.rolling_policy.clone();
        let roll_all = !self.config.format.is_resumable()
            || policy.roll_on_checkpoint
            || !self.config.storage.can_resume();
        let to_roll: Vec<BucketId> = self
            .open
            .values()
            .filter(|p| roll_all || is_due(p, &policy, now))
            .map(|p| p.bucket.clone())
            .collect();
        for bucket in to_roll {
            self.roll(&bucket).await?;
        }
        self.write_gathered(now).await?;
        self.seal_rolled().await?;

        // Row files that stay open: durable up to their current length.
        let mut open: Vec<&mut Box<dyn PartWriter>> =
            self.open.values_mut().map(|p| &mut p.file).collect();
        if !open.is_empty() {
            self.config.storage.persist(&mut open).await?;
        }
        let in_progress = self
            .open
            .values()
            .map(|p| {
                debug_assert_eq!(p.encoder.as_ref().map_or(0, |e| e.buffered_bytes()), 0);
                ResumableFile {
                    bucket: p.bucket.clone(),
                    in_progress_path: p.file.location().in_progress_path.clone(),
                    final_path: p.file.location().final_path.clone(),
                    durable_len_bytes: p.file.len_bytes(),
                    crc32c: p.crc32c,
                    record_count: p.record_count,
                    created_at_ms: p
                        .created_at
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64),
                    supersedes: p.supersedes.clone(),
                }
            })
            .collect();

        let sealed = std::mem::take(&mut self.sealed);
        let sealed = self.settle_carried(sealed, checkpoint_id, now).await?;
        let committables = sealed
            .into_iter()
            .map(|(part, pending)| {
                let mut c = Committable {
                    version: FORMAT_VERSION,
                    writer_id: self.config.writer_id.clone(),
                    checkpoint_id,
                    bucket: part.bucket,
                    final_path: part.final_path,
                    size_bytes: part.size_bytes,
                    crc32c: part.crc32c,
                    record_count: part.record_count,
                    pending,
                    supersedes: part.supersedes,
                    stats: part.stats,
                };
                // Version 2 only when it carries statistics.
                c.version = c.format_version();
                c
            })
            .collect();
        let mut state = WriterState {
            version: FORMAT_VERSION,
            writer_id: self.config.writer_id.clone(),
            format: self.config.format.name().to_string(),
            checkpoint_id,
            in_progress,
            carried: self.carried.clone(),
        };
        // Version 3 only when it carries files.
        state.version = state.format_version();
        self.state = state;
        self.input_ended = false;
        // The last vote's committables, if nobody took their reservation, are released: a
        // caller commits a checkpoint before it takes the next (the coordinator waits for a
        // background commit before this vote's manifest, and no write comes in between). This
        // vote's are reserved until their commit settles.
        let cost = std::mem::take(&mut self.closed_cost_bytes);
        let last = std::mem::replace(&mut self.last_vote_cost_bytes, cost);
        self.handed_cost_bytes.fetch_sub(last, Ordering::Relaxed);
        self.handed_cost_bytes.fetch_add(cost, Ordering::Relaxed);
        Ok(committables)
    }
}

fn is_due(part: &OpenPart, policy: &RollingPolicy, now: SystemTime) -> bool {
    let age = now.duration_since(part.created_at).unwrap_or_default();
    let idle = now.duration_since(part.last_write).unwrap_or_default();
    part.file.len_bytes() >= policy.part_size_bytes_max
        || age >= policy.rollover_interval
        || idle >= policy.inactivity_interval
}

async fn write_bytes(part: &mut OpenPart, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    part.crc32c = crc32c::crc32c_append(part.crc32c, bytes);
    part.file.write(bytes).await
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use crate::bucket::HivePartitioner;
    use crate::format::FileFormat;
    use crate::sink::Sink;

    const ROWS_PER_BATCH: i64 = 2000;

    /// Rows `b * ROWS_PER_BATCH ..` spread round-robin over `partitions` values of `key`.
    fn batch(b: i64, partitions: i64) -> RecordBatch {
        let ids: Vec<i64> = (b * ROWS_PER_BATCH..(b + 1) * ROWS_PER_BATCH).collect();
        let keys: Vec<String> = ids
            .iter()
            .map(|i| format!("k{:03}", i % partitions))
            .collect();
        let amounts: Vec<f64> = ids.iter().map(|i| *i as f64 * 0.25).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("key", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(keys)),
            Arc::new(Float64Array::from(amounts)),
        ];
        RecordBatch::try_new(schema, columns).unwrap()
    }

    fn visible_parquet_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                visible_parquet_files(&path, out);
            } else if !name.starts_with(['.', '_']) && name.ends_with(".parquet") {
                out.push(path);
            }
        }
    }

    /// A Parquet sink in `dir` partitioned by `key` with `budget`, and a runtime to drive it.
    fn parquet_sink(dir: &Path, budget: u64) -> (Sink, tokio::runtime::Runtime) {
        let sink = Sink::local(dir)
            .unwrap()
            .format(FileFormat::parquet())
            .bucket_assigner(HivePartitioner::new(["key"]).unwrap())
            .buffer_bytes_max(budget)
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (sink, rt)
    }

    /// Writes `batches` batches over `partitions` partitions with `budget`, checking the budget
    /// after every write; commits; returns (committed files, row groups per file) after
    /// checking that every id is visible exactly once.
    fn write_under_budget(partitions: i64, batches: i64, budget: u64) -> (usize, Vec<usize>) {
        let dir = tempfile::tempdir().unwrap();
        let (sink, rt) = parquet_sink(dir.path(), budget);
        let committables = rt.block_on(async {
            let mut writer = sink.create_writer();
            for b in 0..batches {
                writer.write(&batch(b, partitions)).await.unwrap();
                assert!(
                    writer.buffered_bytes() <= budget,
                    "after batch {b}: {} buffered > budget {budget}",
                    writer.buffered_bytes()
                );
            }
            let committables = writer.prepare_commit(1).await.unwrap().committables;
            sink.committer().commit_all(&committables).await.unwrap();
            committables
        });
        let n = batches * ROWS_PER_BATCH;
        let recorded: u64 = committables.iter().map(|c| c.record_count).sum();
        assert_eq!(recorded, n as u64, "committables account for every row");

        let mut files = Vec::new();
        visible_parquet_files(dir.path(), &mut files);
        assert_eq!(files.len(), committables.len());
        let mut ids = Vec::with_capacity(n as usize);
        let mut row_groups = Vec::new();
        for file in &files {
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap())
                    .unwrap();
            row_groups.push(reader.metadata().num_row_groups());
            for read in reader.build().unwrap() {
                let read = read.unwrap();
                let col = read.column_by_name("id").unwrap();
                let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
                ids.extend((0..col.len()).map(|i| col.value(i)));
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every row exactly once");
        (files.len(), row_groups)
    }

    #[test]
    fn many_partitions_under_a_small_budget_keep_one_file_each() {
        // 200 partitions gather about 1.5 MiB of rows in all, over a budget of 512 KiB: 8
        // files are open (a quarter of the budget at 16 KiB each); the other partitions are
        // gathered, spilled whenever they hold the most, and written at the vote. Rolling
        // files to stay in the budget would have made a file per flush.
        let (files, _) = write_under_budget(200, 100, 512 * 1024);
        assert_eq!(files, 200, "one file per partition");
    }

    #[test]
    fn the_files_of_a_checkpoint_are_counted_until_their_commit_settles() {
        // The committables a vote hands out live on through the manifest and the commit,
        // beside the next interval's writes: the budget keeps room for them (at least their
        // manifest lines twice over: the committables themselves and the manifest's bytes)
        // until their commit settles, or else the next vote.
        let dir = tempfile::tempdir().unwrap();
        let budget = 64 << 20;
        let (sink, rt) = parquet_sink(dir.path(), budget);
        rt.block_on(async {
            let mut writer = sink.create_writer();
            writer.write(&batch(0, 300)).await.unwrap();
            let committables = writer.prepare_commit(1).await.unwrap().committables;
            assert_eq!(committables.len(), 300);
            let manifest_lines = serde_json::to_vec(&committables).unwrap().len() as u64;
            let reserved = budget - writer.buffer_limit();
            assert!(
                reserved >= 2 * manifest_lines,
                "{reserved} bytes reserved for committables of {manifest_lines} bytes of JSON"
            );
            sink.committer().commit_all(&committables).await.unwrap();
            assert!(writer
                .prepare_commit(2)
                .await
                .unwrap()
                .committables
                .is_empty());
            assert_eq!(writer.buffer_limit(), budget, "released at the next vote");

            // A caller that takes charge of the reservation (the coordinator) releases it once
            // the commit has settled, not at the next vote.
            writer.write(&batch(1, 300)).await.unwrap();
            let committables = writer.prepare_commit(3).await.unwrap().committables;
            let reserved = writer.take_reservation();
            assert!(writer.buffer_limit() < budget);
            sink.committer().commit_all(&committables).await.unwrap();
            drop(reserved);
            assert_eq!(
                writer.buffer_limit(),
                budget,
                "released with the reservation"
            );
            assert!(writer
                .prepare_commit(4)
                .await
                .unwrap()
                .committables
                .is_empty());
            assert_eq!(
                writer.buffer_limit(),
                budget,
                "and not again at the next vote"
            );
        });
    }

    #[test]
    fn a_tiny_budget_is_kept_with_one_file_per_partition() {
        // 8 KiB for 60 files: row groups of a few rows, but one file per partition still
        // (a file per flush would be worse).
        let (files, _) = write_under_budget(60, 20, 8 * 1024);
        assert_eq!(files, 60);
    }

    #[test]
    fn one_partition_over_the_budget_flushes_row_groups_into_one_file() {
        // One file whose buffer outgrows 1 MiB: a quarter of the budget is a decent row
        // group, so the file stays open and gets several row groups.
        let (files, row_groups) = write_under_budget(1, 60, 1024 * 1024);
        assert_eq!(files, 1);
        assert!(
            row_groups[0] > 1,
            "row groups were flushed early: {row_groups:?}"
        );
    }
}
