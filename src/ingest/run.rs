//! The writing stage of a run: the loop that takes decoded chunks in input order, hands them
//! to the job's writers (`Coordinator::write_queued`), writes bad records, and checkpoints
//! when the [`Clock`] says so, each checkpoint's commit running behind the writes that
//! follow it. At the end of the inputs it takes the last checkpoint (`Coordinator::finish`);
//! stopped on request it ends as a crash would; on an error it gives the job up
//! (`Coordinator::failed`). Background compaction starts once the table exists.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::job_run::JobRun;
use super::ledger::{self, Claim};
use super::pipeline::{Msg, Pipeline};
use super::schedule::Clock;
use super::source::{
    Chunk, CommitHook, Cursor, CustomReader, CustomReading, Decoder, InputSource, PartOffsets,
    PartsChange, Prefix, SourcePosition, SourceReader,
};
use super::{
    chunk_scale, compaction, partition_check, CustomSource, IngestStatus, IngestSummary, Observer,
    StageTimes, Step,
};
use crate::error::{Error, Result};
use crate::job::Coordinator;
use crate::maintain::CompactOptions;
use crate::storage::Storage;
use crate::table::delta::TableOutcome;

/// How long parts a consumer group assigned wait for a live job that holds one to release it,
/// beyond two lease lifetimes (a dead holder's lease lapses within one).
const TAKE_WAIT_SLACK: Duration = Duration::from_secs(30);

/// How the writing loop ended, short of an error.
enum Ended {
    /// At the end of the inputs: the last checkpoint is taken.
    Finished,
    /// A finished job's stream was read again and brought nothing new.
    NothingNew,
    /// Stopped on request (`Ingest::stop_after_records`), as a crash would.
    Stopped,
    /// Asked to stop (`Ingest::stop_handle`): a checkpoint of what was written is taken and
    /// committed.
    Interrupted,
}

/// Background compaction beside the run: started once the job's table exists.
struct Compacting {
    storage: Arc<dyn Storage>,
    pending: Option<(CompactOptions, Duration)>,
    running: Option<compaction::Background>,
}

impl Compacting {
    fn start_when_ready(&mut self, coordinator: &Coordinator) {
        if self.running.is_none() && coordinator.table_version().is_some() {
            if let Some((options, every)) = self.pending.take() {
                self.running = Some(compaction::Background::start(
                    self.storage.clone(),
                    options,
                    every,
                ));
            }
        }
    }

    fn abort(self) {
        if let Some(c) = self.running {
            c.abort();
        }
    }
}

/// The writing loop's state.
struct Writing {
    job: JobRun,
    summary: IngestSummary,
    clock: Clock,
    /// Row files are held open across checkpoints (`max_visibility_delay`) and hold records
    /// that are not visible yet: checkpoints go on while they do, so that each rolls once it
    /// is due.
    held_open: bool,
    /// The position of the checkpoint whose commit runs in the background.
    committing: Option<SourcePosition>,
    compacting: Compacting,
    /// Told of the source positions whose records are committed (`Source::commit_hook`).
    hook: Option<CommitHook>,
    /// Every record before the last checkpoint is visible once its commit is taken in: none
    /// of its files, nor its table log entry, waits for a later checkpoint.
    all_visible: bool,
}

impl JobRun {
    /// Writes from the job's position to the end of its inputs (see the module doc).
    pub(super) async fn run(
        mut self,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<IngestSummary> {
        // A run without a bad-records file writes no line: the checkpoints it takes keep
        // where the restored one said to look (`bad_records`).
        let summary = IngestSummary {
            job: self.plan.job.clone(),
            status: IngestStatus::Finished,
            resumed: self.resumed,
            records: 0,
            records_total: self.position.records,
            bad_records: 0,
            files: 0,
            bytes: 0,
            checkpoints: 0,
            input_bytes: 0,
            last_checkpoint: self.coordinator.last_checkpoint(),
            stage_times: StageTimes::default(),
            compaction: None,
            skipped: Vec::new(),
            waiting: Vec::new(),
            unchanged: self.plan.unchanged,
            refused: self.plan.refused.clone(),
        };
        let mut compacting = Compacting {
            storage: self.storage.clone(),
            pending: self.compact.take(),
            running: None,
        };
        compacting.start_when_ready(&self.coordinator);
        let mut summary = summary;
        if !self.resumed {
            // Checkpoint 1 of a new job holds no records, only the start: the schema just
            // inferred (standard input cannot be read twice) and the length of the
            // bad-records file, so that a run killed before its first real checkpoint resumes
            // with both.
            self.bad_file.sync(&mut self.position).await?;
            *step = Step::FirstCheckpoint;
            let report = self.coordinator.checkpoint(&self.position).await?;
            *step = Step::Prepare;
            summary.checkpoints += 1;
            summary.last_checkpoint = report.checkpoint_id;
        }
        let (source, hook) = self.source();
        // A new job's first records are due one interval after inference began, however long
        // it waited for them.
        let last_at = match self.resumed {
            false => self.inference_began,
            true => Instant::now(),
        };
        let clock = self.plan.schedule.clock(last_at, self.position.cursor);
        let held_open = holds_open(&self, &self.coordinator);
        let resumed = self.resumed;
        let mut writing = Writing {
            job: self,
            summary,
            clock,
            held_open,
            committing: None,
            compacting,
            hook,
            all_visible: true,
        };
        if resumed {
            if let Err(e) = writing.release_held(observer, step).await {
                return Err(writing.job.coordinator.failed(e).await);
            }
        }
        let job = &writing.job;
        let mut pipeline =
            Pipeline::start(source, job.plan.writers, job.plan.schedule.rows_every())?;
        observer.started(&job.plan.inputs, &job.position);
        let outcome = writing.write_all(&mut pipeline, observer, step).await;
        writing.end(outcome, pipeline, observer).await
    }

    /// What this run reads, from the job's position, and what to tell of its commits.
    fn source(&mut self) -> (Box<dyn SourceReader>, Option<CommitHook>) {
        let plan = &mut self.plan;
        if let Some(mut source) = plan.custom.take().map(CustomSource::into_inner) {
            let hook = source.commit_hook(&plan.job);
            let schema = Arc::new(self.schema.clone());
            let mut decoder = Decoder::new(plan.input_format, schema, plan.strict);
            if let Some(p) = &plan.partitioner {
                decoder = decoder
                    .with_row_check(partition_check(
                        p.clone(),
                        self.sink.partition_path_bytes_max(),
                    ))
                    .with_assigner(Arc::new(p.clone()));
            }
            let reader = Box::new(CustomReader::new(CustomReading {
                source,
                decoder,
                name: plan.custom_name.clone().unwrap_or_default().into(),
                start: self.position.cursor,
                linger: plan.schedule.linger(),
                format: plan.input_format,
            }));
            return (reader, hook);
        }
        let mut source = InputSource::new(
            plan.inputs.clone(),
            plan.input_format,
            Arc::new(self.schema.clone()),
            self.position.read.clone(),
        )
        .with_linger(plan.schedule.linger())
        .with_settle(plan.settle);
        if !plan.strict {
            source = source.setting_bad_records_aside();
        }
        if let Some(records) = self.stdin_prefix.take() {
            source = source.with_stdin_records(records);
        }
        if self.finished_before && !self.rereads_stream {
            source = source.with_stdin_done();
        }
        if self.rereads_stream {
            source = source.with_stream_reread();
        }
        if let Some(p) = &plan.partitioner {
            // The decoding threads check the partition values and split each chunk by them,
            // with the sink's own assigner.
            source = source
                .with_row_check(partition_check(
                    p.clone(),
                    self.sink.partition_path_bytes_max(),
                ))
                .with_assigner(Arc::new(p.clone()));
        }
        (Box::new(source), None)
    }
}

/// Whether the job holds row files open that hold records not visible yet.
fn holds_open(job: &JobRun, coordinator: &Coordinator) -> bool {
    job.plan.row_visibility_delay.is_some() && coordinator.open_files() > 0
}

impl Writing {
    /// The loop: chunk after chunk until the end of the inputs, a stop, or an error.
    async fn write_all(
        &mut self,
        pipeline: &mut Pipeline,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<Ended> {
        let stop = self.job.plan.stop.clone();
        loop {
            let wake = self.clock.wake_at(self.job.position.cursor, self.held_open);
            let waiting = Instant::now();
            let cursor = self.job.position.cursor;
            let msg = match &stop {
                // A stop is taken between chunks: the position is that of the last one written.
                Some(stop) => tokio::select! {
                    biased;
                    () = stop.stopped() => return self.interrupted(observer, step).await,
                    m = pipeline.next(wake, cursor) => m,
                },
                None => pipeline.next(wake, cursor).await,
            };
            self.summary.stage_times.input += waiting.elapsed();
            match msg {
                Some(Msg::Chunk(chunk)) => {
                    if let Some(ended) = self.chunk(chunk, pipeline, observer, step).await? {
                        return Ok(ended);
                    }
                }
                Some(Msg::End(cursor, read, bytes_read)) => {
                    return self.last(cursor, read, bytes_read, observer, step).await;
                }
                // No checkpoint: what was written since the last one stays hidden, and the
                // next run's restore removes it.
                Some(Msg::Failed(e)) => {
                    *step = Step::Read;
                    return Err(e);
                }
                None => {
                    *step = Step::Read;
                    return Err(Error::io(
                        "read",
                        "the inputs",
                        std::io::Error::other("the input reader stopped unexpectedly"),
                    ));
                }
            }
        }
    }

    /// Writes a decoded chunk, and checkpoints if one is due. `Some`: the run stops here.
    async fn chunk(
        &mut self,
        mut chunk: Chunk,
        pipeline: &Pipeline,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<Option<Ended>> {
        if let Some(change) = chunk.parts.take() {
            // A chunk of no records: every record read before it is written.
            return self.parts_changed(change, observer, step).await;
        }
        let writing = Instant::now();
        let records = chunk.records() as u64;
        let position = &mut self.job.position;
        if !chunk.bad.is_empty() {
            let n = chunk.bad.len() as u64;
            self.job
                .bad_file
                .write(chunk.bad, position.bad_records + 1)
                .await?;
            self.summary.bad_records += n;
            position.bad_records += n;
        }
        if records > 0 {
            *step = Step::Write(chunk.cursor);
            let buckets = chunk.buckets.len();
            self.job
                .coordinator
                .write_queued(chunk.batch.as_ref(), chunk.buckets)
                .await?;
            *step = Step::Prepare;
            pipeline.set_scale(chunk_scale(
                &self.job.coordinator,
                buckets,
                self.job.plan.scale_max,
            ));
            self.summary.records += records;
            position.records += records;
            self.clock.wrote(records);
        }
        position.cursor = chunk.cursor;
        for (i, p) in chunk.read {
            position.read[i] = p;
        }
        if let Some(p) = chunk.position {
            position.source = Some(p);
        }
        self.summary.stage_times.write += writing.elapsed();
        observer.advanced(position);
        observer.stage_times(&self.summary.stage_times);
        if self
            .job
            .plan
            .stop_after_records
            .is_some_and(|n| self.summary.records >= n)
        {
            return Ok(Some(Ended::Stopped));
        }
        if self.clock.due(self.job.position.cursor, self.held_open) {
            self.checkpoint(observer, step).await?;
        }
        Ok(None)
    }

    /// What every checkpoint of the loop does first: the writes queued so far end (an error of
    /// one is a write's), the bad-records file is synced, and the previous checkpoint's
    /// commit, run behind the writes since, is taken in. Returns when the checkpoint proper
    /// began.
    async fn before_checkpoint(
        &mut self,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<Instant> {
        let draining = Instant::now();
        let position = &mut self.job.position;
        *step = Step::Write(position.cursor);
        self.job.coordinator.written().await?;
        self.summary.stage_times.write += draining.elapsed();
        let checkpointing = Instant::now();
        self.job.bad_file.sync(position).await?;
        *step = Step::Checkpoint;
        self.settle(observer).await?;
        self.committing = None;
        self.compacting.start_when_ready(&self.job.coordinator);
        Ok(checkpointing)
    }

    /// Takes a checkpoint at the current position; its commit runs behind the writes that
    /// follow, and the previous checkpoint's commit is taken in first.
    async fn checkpoint(&mut self, observer: &mut dyn Observer, step: &mut Step) -> Result<()> {
        let checkpointing = self.before_checkpoint(observer, step).await?;
        let report = self
            .job
            .coordinator
            .checkpoint_then_commit(&self.job.position)
            .await?;
        *step = Step::Prepare;
        let position = &self.job.position;
        self.committing = Some(position.clone());
        self.summary.checkpoints += 1;
        self.summary.records_total = position.records;
        self.summary.last_checkpoint = report.checkpoint_id;
        self.summary.stage_times.checkpoint += checkpointing.elapsed();
        self.clock.checkpointed(position.cursor);
        self.held_open = holds_open(&self.job, &self.job.coordinator);
        Ok(())
    }

    /// Takes a checkpoint at the current position that rolls every open file, and waits for
    /// its commit: once it returns, every record before the position is visible. A commit
    /// that had to wait (a store that is down, a Delta log entry other writers kept from its
    /// version) fails it: nothing may be handed on that readers cannot see.
    async fn checkpoint_committed(
        &mut self,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<()> {
        let checkpointing = self.before_checkpoint(observer, step).await?;
        let report = self
            .job
            .coordinator
            .checkpoint_rolling_all(&self.job.position)
            .await?;
        if report.deferred > 0 || report.table_outcome == Some(TableOutcome::Deferred) {
            return Err(Error::Store {
                op: "commit checkpoint of",
                path: self.job.plan.job.clone(),
                retryable: true,
                source: format!(
                    "checkpoint {} is complete, and its commit had to wait; the parts it \
                     would hand on are not (the next job to take them settles this one)",
                    report.checkpoint_id
                )
                .into(),
            });
        }
        *step = Step::Prepare;
        let position = &self.job.position;
        let summary = &mut self.summary;
        summary.files += report.committed_files;
        summary.bytes += report.committed_bytes;
        summary.checkpoints += 1;
        summary.records_total = position.records;
        summary.last_checkpoint = report.checkpoint_id;
        summary.stage_times.checkpoint += checkpointing.elapsed();
        observer.checkpointed(&report, position);
        acknowledge(self.hook.as_ref(), Some(position));
        self.clock.checkpointed(position.cursor);
        self.held_open = holds_open(&self.job, &self.job.coordinator);
        Ok(())
    }

    /// The parts the source reads changed ([`PartsChange`]). Revoked: a checkpoint of every
    /// record read, committed, then the parts released in the ledger at the offsets it
    /// recorded. Assigned: the parts taken in the ledger (waiting for a live holder to
    /// release one), and the source told where to read each from; a stop asked for meanwhile
    /// ends the run at a checkpoint (`Some`).
    async fn parts_changed(
        &mut self,
        change: PartsChange,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<Option<Ended>> {
        let storage = self.job.storage.clone();
        let job = self.job.plan.job.clone();
        match change {
            PartsChange::Revoked(parts) => {
                self.checkpoint_committed(observer, step).await?;
                *step = Step::Checkpoint;
                self.release(parts).await?;
                *step = Step::Prepare;
            }
            PartsChange::Assigned { parts, reply } => {
                let claims: Vec<Option<Claim>> =
                    parts.iter().map(|p| Some(Claim::of_part(p))).collect();
                let settle = self.job.plan.settle_options();
                let wait = self.job.plan.lease.ttl * 2 + TAKE_WAIT_SLACK;
                *step = Step::Prepare;
                // An error drops `reply`: the reader stops, and the run fails with it.
                let taking = ledger::take_waiting(&storage, &job, &claims, &settle, wait);
                let taken = match self.job.plan.stop.clone() {
                    Some(stop) => tokio::select! {
                        () = stop.stopped() => return self.interrupted(observer, step).await.map(Some),
                        taken = taking => taken?,
                    },
                    None => taking.await?,
                };
                let own = self.own_offsets();
                let mut offsets = BTreeMap::new();
                for (part, t) in parts.iter().zip(taken) {
                    if let Some(ledger::Taken {
                        read,
                        from: Some(from),
                    }) = &t
                    {
                        if from != &job {
                            observer.note(&format!(
                                "part `{part}` was taken by job `{from}` up to offset {}: \
                                 reading on from there",
                                read.offset
                            ));
                        }
                    }
                    let base = t.map(|t| t.read.offset);
                    if let Some(at) = base.max(own.get(part).copied()) {
                        offsets.insert(part.clone(), at);
                    }
                }
                tracing::info!(job = %job, parts = ?offsets, "parts taken");
                let _ = reply.send(offsets);
            }
            PartsChange::Skipped(skipped) => {
                observer.note(&format!(
                    "possible loss: `{}` offsets {}..{} were passed over ({})",
                    skipped.part, skipped.from, skipped.to, skipped.reason
                ));
                tracing::warn!(job = %job, part = %skipped.part, from = skipped.from, to = skipped.to, reason = %skipped.reason, "records passed over");
                self.summary.skipped.push(skipped);
            }
        }
        Ok(None)
    }

    /// The job's own offsets of the parts of its source (none for inputs).
    fn own_offsets(&self) -> BTreeMap<String, u64> {
        self.job
            .position
            .source
            .as_ref()
            .and_then(PartOffsets::from_json)
            .map(|p| p.parts)
            .unwrap_or_default()
    }

    /// A restarted job whose parts are assigned as it runs may still hold parts its last run
    /// read, which the source may now be handed elsewhere: once every record before its
    /// position is visible (the restore committed its last checkpoint; a checkpoint rolls
    /// what open files held), it releases each part whose head names it.
    async fn release_held(&mut self, observer: &mut dyn Observer, step: &mut Step) -> Result<()> {
        let Some(parts) = self.job.plan.assigned_parts.clone() else {
            return Ok(());
        };
        let storage = self.job.storage.clone();
        let job = self.job.plan.job.clone();
        let mut held = Vec::new();
        for part in parts {
            if let Some(head) = ledger::head(storage.as_ref(), &part).await? {
                if head.job == job && !head.released {
                    held.push(part);
                }
            }
        }
        if held.is_empty() {
            return Ok(());
        }
        self.checkpoint_committed(observer, step).await?;
        self.release(held).await
    }

    /// Releases `parts` in the ledger at the job's own offsets (its base where it read
    /// none). The caller promises every record before the position is visible
    /// ([`Writing::checkpoint_committed`]).
    async fn release(&mut self, parts: Vec<String>) -> Result<()> {
        let own = self.own_offsets();
        let released: Vec<(String, u64)> = parts
            .into_iter()
            .map(|p| {
                let at = own.get(&p).copied().unwrap_or(0);
                (p, at)
            })
            .collect();
        let job = &self.job.plan.job;
        ledger::release(self.job.storage.as_ref(), job, &released).await?;
        tracing::info!(job = %job, parts = ?released, "parts released");
        Ok(())
    }

    /// Asked to stop: takes a checkpoint at the position of the last chunk written, and waits
    /// for its commit (and the one before it).
    async fn interrupted(&mut self, observer: &mut dyn Observer, step: &mut Step) -> Result<Ended> {
        self.checkpoint(observer, step).await?;
        *step = Step::Checkpoint;
        self.settle(observer).await?;
        *step = Step::Prepare;
        self.committing = None;
        Ok(Ended::Interrupted)
    }

    /// Takes in the commit of the checkpoint before (`committing`), and tells the source.
    async fn settle(&mut self, observer: &mut dyn Observer) -> Result<()> {
        settle_commit(
            &mut self.job.coordinator,
            &mut self.summary,
            observer,
            self.committing.as_ref(),
        )
        .await?;
        acknowledge(self.hook.as_ref(), self.committing.as_ref());
        Ok(())
    }

    /// Every input is read: takes the last checkpoint, which finishes the job.
    async fn last(
        &mut self,
        cursor: Cursor,
        read: Vec<Prefix>,
        bytes_read: u64,
        observer: &mut dyn Observer,
        step: &mut Step,
    ) -> Result<Ended> {
        let job = &mut self.job;
        if job.rereads_stream
            && !job.files_grew
            && (job.position.records, job.position.bad_records) == job.counted_before
        {
            // The stream was the one the job read, and brought nothing more.
            return Ok(Ended::NothingNew);
        }
        job.position.cursor = cursor;
        job.position.read = read;
        self.summary.input_bytes = bytes_read;
        let draining = Instant::now();
        *step = Step::Write(job.position.cursor);
        job.coordinator.written().await?;
        self.summary.stage_times.write += draining.elapsed();
        let checkpointing = Instant::now();
        job.bad_file.sync(&mut job.position).await?;
        *step = Step::LastCheckpoint;
        settle_commit(
            &mut job.coordinator,
            &mut self.summary,
            observer,
            self.committing.as_ref(),
        )
        .await?;
        let report = job.coordinator.finish(&job.position).await?;
        self.all_visible =
            report.deferred == 0 && report.table_outcome != Some(TableOutcome::Deferred);
        acknowledge(self.hook.as_ref(), Some(&job.position));
        self.compacting.start_when_ready(&job.coordinator);
        *step = Step::Prepare;
        let summary = &mut self.summary;
        summary.files += report.committed_files;
        summary.bytes += report.committed_bytes;
        summary.checkpoints += 1;
        summary.records_total = job.position.records;
        summary.last_checkpoint = report.checkpoint_id;
        summary.stage_times.checkpoint += checkpointing.elapsed();
        observer.finished();
        Ok(Ended::Finished)
    }

    /// Ends the run however the loop ended. A checkpoint's commit may still run in the
    /// background: the complete checkpoints become visible before the run returns, whatever
    /// its outcome.
    async fn end(
        self,
        outcome: Result<Ended>,
        mut pipeline: Pipeline,
        observer: &mut dyn Observer,
    ) -> Result<IngestSummary> {
        let Writing {
            job,
            mut summary,
            compacting,
            all_visible,
            ..
        } = self;
        let mut coordinator = job.coordinator;
        let ended = match outcome {
            Ok(ended) => ended,
            Err(e) => {
                coordinator.stop_writes().await;
                let _ = coordinator.committed().await;
                compacting.abort();
                return Err(coordinator.failed(e).await);
            }
        };
        if let Ended::Stopped = ended {
            // As a crash would: no checkpoint for what was written since the last one; the
            // next run's restore removes it.
            pipeline.close();
            coordinator.stop_writes().await;
            settle_commit(&mut coordinator, &mut summary, observer, None).await?;
            drop(coordinator);
            compacting.abort();
            crate::storage::ownership::settle_releases().await;
            observer.stopped();
            summary.status = IngestStatus::Stopped;
            return Ok(summary);
        }
        if let Ended::Interrupted = ended {
            // The reader may be waiting for records that will not be written now.
            pipeline.close();
            summary.status = IngestStatus::Interrupted;
        }
        // Gives the job up now, and lets a log checkpoint of a table still being written end.
        coordinator.close().await?;
        if matches!(ended, Ended::Finished | Ended::NothingNew) && all_visible {
            // Every record read is visible: the inputs are given up where the job stopped, so
            // that the next job passes over what did not change without taking this one. (A
            // commit that had to wait leaves them held: the next job to name one settles this
            // job first.)
            let (plan, p) = (&job.plan, &job.position);
            let took_none = p.records == 0 && p.bad_records == 0;
            let storage = job.storage.as_ref();
            ledger::release_inputs(storage, &plan.job, &plan.inputs, &p.read, took_none).await?;
        }
        if let Ended::NothingNew = ended {
            summary.status = IngestStatus::AlreadyFinished;
            summary.input_bytes = 0;
        }
        // The last round compacts what the last checkpoints added; a finished job whose
        // stream brought nothing new runs it too, as a finished job's rerun does (it finishes
        // a round its last run died in).
        if let Some(c) = compacting.running {
            summary.compaction = Some(c.finish(true).await);
        }
        pipeline.join().await;
        let (inputs, read) = (job.plan.inputs.clone(), job.position.read.clone());
        let csv = job.plan.input_format == super::InputFormat::Csv;
        summary.waiting =
            tokio::task::spawn_blocking(move || super::source::unended(&inputs, &read, csv))
                .await
                .unwrap_or_default();
        Ok(summary)
    }
}

/// Tells the source (`hook`) that the records before `at` are committed.
fn acknowledge(hook: Option<&CommitHook>, at: Option<&SourcePosition>) {
    if let (Some(hook), Some(source)) = (hook, at.and_then(|p| p.source.as_ref())) {
        hook(source);
    }
}

/// Takes in the commit that ran behind the writes since the last checkpoint, if any: its files
/// count in the summary, and the observer hears of it with the position it was taken at.
async fn settle_commit(
    coordinator: &mut Coordinator,
    summary: &mut IngestSummary,
    observer: &mut dyn Observer,
    at: Option<&SourcePosition>,
) -> Result<()> {
    if let Some(report) = coordinator.committed().await? {
        summary.files += report.committed_files;
        summary.bytes += report.committed_bytes;
        if let Some(at) = at {
            observer.checkpointed(&report, at);
        }
    }
    Ok(())
}
