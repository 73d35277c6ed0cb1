//! Taking a checkpoint: every writer votes at once ([`Coordinator::fan_out`]), the manifest
//! is written, then the checkpoint is committed and old manifests are pruned.

use super::*;

impl Coordinator {
    /// Runs `ops[i]` on writer `i`, every writer with work on its own task, and waits for all
    /// of them: when it returns, no writer is busy, whatever the outcome. The first error is
    /// returned (every writer is back in place).
    pub(super) async fn fan_out(&mut self, ops: Vec<Option<Op>>) -> Result<Vec<Option<Done>>> {
        self.written().await?;
        // `open` refuses a job without writers: none here means they are gone.
        if self.writers.is_empty() || self.writers.len() != ops.len() {
            return Err(self.writers_gone());
        }
        let writers = std::mem::take(&mut self.writers);
        let busy = ops.iter().filter(|o| o.is_some()).count();
        let mut slots: Vec<Option<JobWriter>> = Vec::with_capacity(writers.len());
        let mut results: Vec<Option<Done>> = Vec::with_capacity(writers.len());
        let mut tasks = Vec::with_capacity(busy);
        let mut first_error = None;
        for (i, (writer, op)) in writers.into_iter().zip(ops).enumerate() {
            results.push(None);
            match op {
                None => slots.push(Some(writer)),
                // One writer with work: no task to spawn.
                Some(op) if busy == 1 => {
                    let (writer, r) = run_op(writer, op).await;
                    slots.push(Some(writer));
                    match r {
                        Ok(done) => results[i] = Some(done),
                        Err(e) => first_error = Some(e),
                    }
                }
                Some(op) => {
                    slots.push(None);
                    tasks.push((i, AbortOnDrop(tokio::spawn(run_op(writer, op)))));
                }
            }
        }
        for (i, mut task) in tasks {
            match (&mut task.0).await {
                Ok((writer, r)) => {
                    slots[i] = Some(writer);
                    match r {
                        Ok(done) => results[i] = Some(done),
                        Err(e) => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => {
                    first_error.get_or_insert(Error::InvalidInput(format!(
                        "a writer task of job `{}` was cancelled: {e}",
                        self.job
                    )));
                }
            }
        }
        if slots.iter().all(Option::is_some) {
            self.writers = slots.into_iter().flatten().collect();
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }

    /// What a write or checkpoint finds when an earlier one was interrupted (its future
    /// dropped) or stopped ([`Coordinator::stop_writes`]) and took the writers with it.
    pub(super) fn writers_gone(&self) -> Error {
        Error::InvalidInput(format!(
            "a write or checkpoint of job `{}` was interrupted and took its writers with it; \
             reopen the job",
            self.job
        ))
    }

    /// The job's writers; writer `i` has id `<job>_<i>`.
    pub fn writers(&mut self) -> &mut [JobWriter] {
        &mut self.writers
    }

    /// The first writer (for jobs with one).
    pub fn writer(&mut self) -> &mut JobWriter {
        &mut self.writers[0]
    }

    /// The job name.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Takes a checkpoint: votes on every writer, writes the manifest with `source_position`
    /// (the checkpoint is complete once it is written), commits, and prunes old manifests.
    ///
    /// An error before the manifest is written fails the checkpoint: reopen the coordinator to
    /// restore from the previous one. A commit error that cannot be retried ([`Error::Conflict`],
    /// [`Error::DataLost`]) is returned after the manifest is written; retryable commit errors
    /// are deferred to the next checkpoint.
    ///
    /// `source_position` is any serde value (an offset, a struct of offsets per input); a
    /// restored coordinator gives it back through [`Coordinator::source_position`].
    pub async fn checkpoint<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::Due, false).await
    }

    /// As [`Coordinator::checkpoint`], but every open file rolls (as at the end of the input,
    /// carried files of a pre-commit merge merged), and the commit is waited for: once it
    /// returns without [`CheckpointReport::deferred`] files or a deferred log entry, every
    /// record before `source_position` is visible, and the job goes on writing. What a job
    /// hands a part of its source on at ([`crate::ingest::Source`]'s revoked parts).
    pub async fn checkpoint_rolling_all<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::All, false).await
    }

    /// As [`Coordinator::checkpoint`], but returns once the checkpoint is complete (its
    /// manifest written) and commits it on a task of its own (see "Committing in the
    /// background" above). The report says only the checkpoint id; [`Coordinator::committed`]
    /// gives the commit's report, and every later checkpoint, [`Coordinator::finish`] and
    /// [`Coordinator::close`] wait for it first. A commit error that cannot be retried is
    /// returned by whichever of them settles the commit.
    pub async fn checkpoint_then_commit<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::Due, true).await
    }

    /// Waits for the commit running in the background, if any, and returns its report
    /// ([`Coordinator::checkpoint_then_commit`]).
    pub async fn committed(&mut self) -> Result<Option<CheckpointReport>> {
        let Some(task) = self.committing.take() else {
            return Ok(None);
        };
        let run = task.await.map_err(|e| {
            Error::io(
                "commit checkpoint of",
                &self.job,
                std::io::Error::other(e.to_string()),
            )
        })?;
        self.settle(run).map(Some)
    }

    /// The job's last checkpoint: rolls every open file, checkpoints, and marks the manifest
    /// finished, so that a rerun of the job knows there is nothing left to do.
    pub async fn finish<P: Serialize + ?Sized>(
        &mut self,
        source_position: &P,
    ) -> Result<CheckpointReport> {
        let position = encode_position(&self.job, source_position)?;
        self.checkpoint_inner(position, Close::Finished, false)
            .await
    }

    #[tracing::instrument(
        name = "checkpoint",
        skip_all,
        fields(
            job = %self.job,
            checkpoint = self.last_checkpoint + 1,
            finished = matches!(close, Close::Finished),
            files = tracing::field::Empty,
            bytes = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        )
    )]
    async fn checkpoint_inner(
        &mut self,
        source_position: serde_json::Value,
        close: Close,
        background: bool,
    ) -> Result<CheckpointReport> {
        let finished = matches!(close, Close::Finished);
        if self.finished {
            return Err(Error::InvalidInput(format!(
                "job `{}` is finished; start a new job to write more",
                self.job
            )));
        }
        // A run that lost its job learns it here, before its vote touches files the new owner
        // may have removed (and again before the manifest, below).
        if let Some(lease) = &self.lease {
            lease.check().await?;
        }
        let started = Instant::now();
        let id = self.last_checkpoint + 1;
        // The queued writes end first: the vote covers every record handed over.
        self.written().await?;
        // Every writer votes at the same time (its flushes and fsyncs on its own task).
        let votes = (0..self.writers.len())
            .map(|_| {
                Some(Op::Prepare {
                    checkpoint_id: id,
                    end_of_input: !matches!(close, Close::Due),
                })
            })
            .collect();
        let votes = self.fan_out(votes).await?;
        // The previous checkpoint's commit, if it runs in the background, ends before this
        // manifest: the manifest carries what it deferred.
        self.committed().await?;
        let mut committables = std::mem::take(&mut self.uncommitted);
        committables.reserve_exact(
            votes
                .iter()
                .map(|v| match v {
                    Some(Done::Prepared(p, _)) => p.committables.len(),
                    _ => 0,
                })
                .sum(),
        );
        let mut states = Vec::with_capacity(votes.len());
        let mut reservations = Vec::with_capacity(votes.len());
        for vote in votes {
            if let Some(Done::Prepared(prepared, reserved)) = vote {
                committables.extend(prepared.committables);
                states.push(prepared.state);
                reservations.push(reserved);
            }
        }
        let mut manifest = Manifest {
            version: crate::protocol::FORMAT_VERSION,
            sink_id: self.sink_id.clone(),
            job: self.job.clone(),
            checkpoint_id: id,
            created_at_ms: manifest::now_ms(),
            finished,
            source_position: source_position.clone(),
            writers: states,
            committables,
            table: None,
        };
        if self.writes_table {
            let Some(table) = &self.table else {
                return Err(Error::InvalidInput(format!(
                    "the commit of job `{}` into its table was interrupted; reopen the job",
                    self.job
                )));
            };
            let (read_version, removes) = match &self.rearranging {
                Some((v, r)) => (Some(*v), r.clone()),
                None => (None, Vec::new()),
            };
            manifest.table = Some(ManifestTable {
                format: "delta".into(),
                app_id: table.app_id().to_owned(),
                read_version,
                removes,
                abandoned: self.abandoned.clone(),
            });
        }
        manifest.version = manifest.format_version();
        // Only the job's owner may complete a checkpoint: a run that lost the job stops here,
        // before its manifest could promise files the new owner's restore removes.
        if let Some(lease) = &self.lease {
            lease.check().await?;
        }
        // The completion point.
        let manifest_path = manifest::manifest_path(&self.job, id);
        let manifest_bytes = manifest.encode();
        // The committables move on to the commit rather than being copied: at a hundred
        // thousand files a copy is tens of megabytes (as are the manifest's bytes, dropped
        // once written).
        let committables = std::mem::take(&mut manifest.committables);
        let manifest_started = Instant::now();
        self.storage
            .put_metadata(&manifest_path, &manifest_bytes)
            .instrument(tracing::debug_span!(
                "manifest_write",
                job = %self.job,
                checkpoint = id,
                file = %manifest_path,
                bytes = manifest_bytes.len(),
            ))
            .await?;
        drop(manifest_bytes);
        tracing::info!(
            file = %manifest_path,
            files = committables.len(),
            duration_ms = manifest_started.elapsed().as_millis() as u64,
            "checkpoint complete"
        );
        metrics::gauge!(crate::protocol::metric::PENDING_FILES).set(committables.len() as f64);
        self.last_checkpoint = id;
        self.source_position = Some(source_position);
        self.finished = finished;

        let run = Self::commit_checkpoint(
            self.sink.committer(),
            self.storage.clone(),
            self.job.clone(),
            self.retention,
            (id, manifest.created_at_ms),
            committables,
            started,
            self.table.take(),
            self.rearranging.take().map(|(_, r)| r).unwrap_or_default(),
            std::mem::take(&mut self.abandoned),
            reservations,
        );
        if background {
            let span = tracing::info_span!("background_commit", job = %self.job, checkpoint = id);
            self.committing = Some(tokio::spawn(run.instrument(span)));
            return Ok(CheckpointReport {
                checkpoint_id: id,
                ..CheckpointReport::default()
            });
        }
        let mut run = run.await;
        let table_error = run.table_error.take();
        let report = self.settle(run)?;
        // The last checkpoint of a job promises its records to the table's readers: a log
        // entry that had to wait fails it (the manifest holds the files; a rerun writes it).
        if finished && report.table_outcome == Some(TableOutcome::Deferred) {
            return Err(table_error.unwrap_or_else(|| {
                Error::InvalidInput(format!(
                    "the last checkpoint ({id}) of job `{}` is complete but its Delta log entry \
                     could not be written yet; run the job again to write it",
                    self.job
                ))
            }));
        }
        let span = tracing::Span::current();
        span.record("files", report.committed_files);
        span.record("bytes", report.committed_bytes);
        span.record("duration_ms", started.elapsed().as_millis() as u64);
        Ok(report)
    }

    /// Commits the committables of complete checkpoint `id` and prunes old manifests. It
    /// borrows nothing of the coordinator, so it can run on a task of its own.
    #[allow(clippy::too_many_arguments)]
    async fn commit_checkpoint(
        committer: crate::sink::Committer,
        storage: Arc<dyn Storage>,
        job: String,
        retention: usize,
        (id, created_at_ms): (u64, i64),
        committables: Vec<Committable>,
        started: Instant,
        table: Option<DeltaTable>,
        removes: Vec<TableRemove>,
        recorded_abandoned: Vec<String>,
        reservations: Vec<Reservation>,
    ) -> CommitRun {
        // What the committables keep reserved of their writers' budgets is released when the
        // commit has settled, with them.
        let _reserved = reservations;
        let mut run = CommitRun {
            report: CheckpointReport {
                checkpoint_id: id,
                ..CheckpointReport::default()
            },
            deferred: Vec::new(),
            fatal: None,
            started,
            table,
            table_error: None,
            abandoned: Vec::new(),
        };
        // An abandoned round's output, recorded by this manifest: deleted now (the files are
        // the job's, in no log version); one that cannot be is recorded again by the next.
        for path in recorded_abandoned {
            if let Err(e) = storage.remove_data_file(&path).await {
                tracing::warn!(file = %path, error = %e, "output of an abandoned round not removed yet");
                run.abandoned.push(path);
            }
        }
        let commit_started = Instant::now();
        let results = committer.commit(&committables).await;
        // The log step needs every file committed (files before entries); it keeps them all
        // until the log holds them.
        let for_table = run.table.is_some().then(|| committables.clone());
        for (c, r) in committables.into_iter().zip(results) {
            match r {
                Ok(CommitOutcome::Committed) => {
                    run.report.committed_files += 1;
                    run.report.committed_bytes += c.size_bytes;
                    run.report.committed_records += c.record_count;
                }
                Ok(CommitOutcome::AlreadyCommitted) => run.report.already_committed_files += 1,
                Err(e) if e.is_retryable() => {
                    run.report.deferred += 1;
                    run.deferred.push(c);
                }
                Err(e) => {
                    run.fatal.get_or_insert(e);
                }
            }
        }
        if let (Some(table), Some(all)) = (run.table.as_mut(), for_table) {
            if run.fatal.is_none() && run.deferred.is_empty() {
                let outcome = table
                    .commit(id, created_at_ms, &all, &removes)
                    .instrument(tracing::debug_span!("table_commit", job = %job, checkpoint = id))
                    .await;
                let rearranging = !removes.is_empty();
                match outcome {
                    // A rearrangement's output must not ride in a later entry without its
                    // removes (rows twice): its entry is written by the job's next run.
                    Ok(TableOutcome::Deferred) if rearranging => {
                        run.fatal = Some(Error::InvalidInput(format!(
                            "the log entry of compaction round {id} of job `{job}` lost the race \
                             for a table version too often; run the job again to write it"
                        )));
                    }
                    Err(e) if e.is_retryable() && rearranging => run.fatal = Some(e),
                    Ok(TableOutcome::Abandoned) => {
                        run.report.table_outcome = Some(TableOutcome::Abandoned);
                        run.abandoned.extend(abandon_round(&job, id, &all));
                    }
                    Ok(TableOutcome::Deferred) => {
                        run.report.table_outcome = Some(TableOutcome::Deferred);
                        run.deferred = all;
                    }
                    Ok(outcome) => run.report.table_outcome = Some(outcome),
                    Err(e) if e.is_retryable() => {
                        tracing::warn!(error = %e, "log entry deferred to the next checkpoint");
                        run.report.table_outcome = Some(TableOutcome::Deferred);
                        run.deferred = all;
                        run.table_error = Some(e);
                    }
                    Err(e) => run.fatal = Some(e),
                }
            } else if run.fatal.is_none() && removes.is_empty() {
                // A file is not committed yet: the entry waits for the next checkpoint, which
                // carries all of this one's files.
                run.report.table_outcome = Some(TableOutcome::Deferred);
                run.deferred = all;
            } else if run.fatal.is_none() {
                run.fatal = Some(Error::InvalidInput(format!(
                    "a file of compaction round {id} of job `{job}` could not be committed yet; \
                     run the job again to finish the round"
                )));
            }
        }
        if run.fatal.is_some() && run.table.is_some() {
            // After a failed commit the checkpoint's files may be visible without their log
            // entry, and no later manifest of this run would carry them: the job must be
            // reopened, whose restore writes the entry from the manifest.
            run.table = None;
        }
        if run.fatal.is_none() {
            // From the completion point to visible: files committed, and the log entry.
            tracing::info!(
                job = %job,
                checkpoint = id,
                files = run.report.committed_files + run.report.already_committed_files,
                table = ?run.report.table_outcome,
                duration_ms = commit_started.elapsed().as_secs_f64() * 1000.0,
                "checkpoint committed"
            );
            if let Err(e) = Self::prune(storage.as_ref(), &job, retention).await {
                run.fatal = Some(e);
            }
        }
        run
    }

    /// Takes in what a commit did: its deferred committables wait for the next checkpoint.
    fn settle(&mut self, run: CommitRun) -> Result<CheckpointReport> {
        let CommitRun {
            report,
            deferred,
            fatal,
            started,
            table,
            table_error: _,
            abandoned,
        } = run;
        if table.is_some() {
            self.table = table;
        }
        self.abandoned.extend(abandoned);
        self.uncommitted.extend(deferred);
        metrics::gauge!(crate::protocol::metric::PENDING_FILES).set(self.uncommitted.len() as f64);
        metrics::counter!(crate::protocol::metric::COMMIT_RETRIES)
            .increment(report.deferred as u64);
        if report.deferred > 0 {
            tracing::warn!(
                files = report.deferred,
                "commit deferred to the next checkpoint"
            );
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        metrics::histogram!(crate::protocol::metric::CHECKPOINT_DURATION)
            .record(started.elapsed().as_secs_f64());
        Ok(report)
    }

    /// Removes the job's manifests beyond the retention. It borrows only what it needs, not
    /// the coordinator (whose writers are not `Sync`), so that a checkpoint's future is `Send`.
    #[tracing::instrument(name = "prune", skip_all, fields(job = %job))]
    async fn prune(storage: &dyn Storage, job: &str, retention: usize) -> Result<()> {
        let ids = manifest::list_checkpoints(storage, job).await?;
        if ids.len() > retention {
            for (id, _) in &ids[..ids.len() - retention] {
                let path = manifest::manifest_path(job, *id);
                storage.delete_metadata(&path).await?;
                tracing::debug!(checkpoint = *id, file = %path, "manifest pruned");
            }
        }
        Ok(())
    }
}

fn encode_position<P: Serialize + ?Sized>(job: &str, position: &P) -> Result<serde_json::Value> {
    serde_json::to_value(position).map_err(|e| {
        Error::InvalidInput(format!(
            "the source position of job `{job}` does not serialize as JSON: {e}"
        ))
    })
}
