//! Opening a job: restoring it from its latest manifest (committing that checkpoint's
//! committables, removing its writers' leftovers, writing its Delta log entry if the log lacks
//! it), or starting it new, after the last checkpoint of a retired job of its name.

use super::*;

impl Coordinator {
    pub(super) async fn restore(
        sink: &Sink,
        job: &str,
        parallelism: usize,
        adopt_parallelism: bool,
        lease: Box<dyn JobLease>,
        table_options: Option<&DeltaOptions>,
    ) -> Result<Coordinator> {
        let storage = sink.storage().clone();
        let identity = manifest::sink_identity(storage.as_ref(), true)
            .await?
            .expect("created");
        let latest =
            manifest::latest_manifest(storage.as_ref(), job, Some(&identity.sink_id)).await?;
        let mut table = match table_options {
            Some(options) => {
                Some(DeltaTable::open(storage.clone(), options, &identity.sink_id, job).await?)
            }
            None => None,
        };
        // A job without manifests may be a retired one: it goes on after its last checkpoint.
        let retired = match &latest {
            Some(_) => None,
            None => retired::Retired::load(storage.as_ref()).await?.get(job),
        };
        check_table_job(job, latest.as_ref(), retired, table.as_ref())?;
        // A manifest write of an earlier run that died before its rename left its temporary
        // file; this run owns the job and has written nothing yet.
        manifest::remove_temps(storage.as_ref(), job).await?;
        // A compaction round whose entry is not in the log, and one of whose inputs another
        // writer removed meanwhile, is abandoned: its output must never become visible to the
        // table, so its files are not committed (and removed if they already were).
        // The decision is recorded by the job's next manifest, before the output is deleted
        // (`abandoned`): once recorded it is never taken again, even if another engine makes
        // the inputs live again (a RESTORE), and a manifest that records one has its files
        // deleted again here.
        let mut abandoned = false;
        let mut abandoned_outputs = Vec::new();
        if let (Some(t), Some(m)) = (table.as_mut(), &latest) {
            let section = m.table.as_ref();
            for path in section.map_or(&[][..], |s| &s.abandoned[..]) {
                storage.remove_data_file(path).await?;
            }
            let removes = section.map_or(&[][..], |s| &s.removes[..]);
            if !removes.is_empty() {
                let (in_log, inputs_live) = t.round_state(m.checkpoint_id, removes).await?;
                if !in_log && !inputs_live {
                    abandoned_outputs = abandon_round(job, m.checkpoint_id, &m.committables);
                    abandoned = true;
                }
            }
        }
        let parallelism = match &latest {
            Some(m) if adopt_parallelism && !m.writers.is_empty() => m.writers.len(),
            _ => parallelism,
        };
        if let Some(m) = &latest {
            if m.writers.len() != parallelism {
                return Err(Error::Config(format!(
                    "job `{job}` was checkpointed with {} writers, not {parallelism}; rescaling is not supported",
                    m.writers.len()
                )));
            }
        }
        // A table job's checkpoint that the log holds already had every file committed before
        // its entry was written (invariant 3): its files are not committed again (nor proved:
        // compaction may have removed them from the table since, and vacuum deleted them).
        let in_log = match (&table, &latest) {
            (Some(t), Some(m)) => t.txn_version().is_some_and(|v| v >= m.checkpoint_id),
            _ => false,
        };
        let mut writers = Vec::with_capacity(parallelism);
        let mut restored_outcomes = Vec::new();
        let shared = sink.sharing_open_files(parallelism);
        for i in 0..parallelism {
            let writer_sink = shared.with_writer_id(format!("{job}_{i}"))?;
            let writer_id = writer_sink.writer_id().to_string();
            let (state, committables): (Option<&WriterState>, Vec<Committable>) = match &latest {
                Some(m) => (
                    m.writers.iter().find(|w| w.writer_id == writer_id),
                    m.committables
                        .iter()
                        .filter(|c| c.writer_id == writer_id && !in_log)
                        .cloned()
                        .collect(),
                ),
                None => (None, Vec::new()),
            };
            if latest.is_some() && state.is_none() {
                return Err(Error::corrupt(
                    format!("latest manifest of job `{job}`"),
                    format!("it has no state for writer `{writer_id}`"),
                ));
            }
            // An abandoned round's files are committed too: they stay, outside the log, until
            // the manifest that records the abandonment (so that, until then, a round whose
            // inputs came back can still be committed whole).
            let restored = writer_sink.restore_writer(state, &committables).await?;
            restored_outcomes.extend(restored.commit_outcomes);
            writers.push(JobWriter {
                inner: restored.writer,
            });
        }
        // The latest checkpoint's files are committed; its log entry may not be written yet.
        if let (Some(t), Some(m), false) = (table.as_mut(), &latest, abandoned) {
            let removes = m.table.as_ref().map_or(&[][..], |s| &s.removes[..]);
            let outcome = t
                .commit(m.checkpoint_id, m.created_at_ms, &m.committables, removes)
                .await;
            // After `open` the latest checkpoint is in the log, as its files are visible: a log
            // step that cannot be done now fails the open (nothing is lost; a rerun redoes it).
            let outcome = outcome?;
            if outcome == TableOutcome::Abandoned {
                abandoned_outputs = abandon_round(job, m.checkpoint_id, &m.committables);
            }
            if outcome == TableOutcome::Deferred {
                return Err(Error::InvalidInput(format!(
                    "the Delta log entry of checkpoint {} of job `{job}` lost the race for a \
                     table version {} times; run the job again",
                    m.checkpoint_id,
                    crate::table::delta::COMMIT_ATTEMPTS_MAX
                )));
            }
        }
        let incarnations = writers.iter().map(|w| w.incarnation().to_owned()).collect();
        Ok(Coordinator {
            lease: Some(lease),
            storage,
            sink_id: identity.sink_id,
            job: job.to_string(),
            sink: sink.clone(),
            writers,
            incarnations,
            last_checkpoint: latest
                .as_ref()
                .map(|m| m.checkpoint_id)
                .or(retired.map(|r| r.checkpoint))
                .unwrap_or(0),
            uncommitted: Vec::new(),
            source_position: latest.as_ref().map(|m| m.source_position.clone()),
            finished: latest.as_ref().is_some_and(|m| m.finished),
            retention: Self::DEFAULT_RETENTION,
            restored_outcomes,
            rotation: 0,
            queues: None,
            committing: None,
            writes_table: table.is_some(),
            table,
            rearranging: None,
            abandoned: abandoned_outputs,
        })
    }
}
