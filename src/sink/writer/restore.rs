//! Restoring a writer from a checkpoint: commit its committables, remove what it does not
//! reference, resume its row files.

use super::*;

impl SinkWriter {
    #[tracing::instrument(
        name = "restore",
        skip_all,
        fields(
            writer = %config.writer_id,
            checkpoint = state.map(|s| s.checkpoint_id),
            committables = committables.len(),
        )
    )]
    pub(crate) async fn restore(
        config: Arc<SinkConfig>,
        state: Option<&WriterState>,
        committables: &[Committable],
    ) -> Result<Restored> {
        if let Some(state) = state {
            state.validate()?;
            if state.writer_id != config.writer_id {
                return Err(Error::Config(format!(
                    "the state belongs to writer `{}`, this sink is writer `{}`",
                    state.writer_id, config.writer_id
                )));
            }
            if state.format != config.format.name() {
                return Err(Error::Config(format!(
                    "the state was written by a {} sink, this sink writes {}",
                    state.format,
                    config.format.name()
                )));
            }
        }
        for c in committables {
            c.validate()?;
        }

        // 1. The checkpoint is complete: its committables become visible before anything is
        //    removed (case 2 of the crash walk).
        let mut commit_outcomes = Vec::with_capacity(committables.len());
        for result in Committer::new(config.storage.clone())
            .commit(committables)
            .await
        {
            commit_outcomes.push(result?);
        }

        // 2. Remove what the checkpoint does not reference (invariant 7).
        let mut referenced: HashSet<&str> = HashSet::new();
        let pending_ids: Vec<String> = committables
            .iter()
            .map(|c| c.pending.leftover_id(&c.final_path))
            .collect();
        referenced.extend(pending_ids.iter().map(String::as_str));
        for c in committables {
            referenced.extend(c.supersedes.iter().map(String::as_str));
        }
        if let Some(state) = state {
            for f in &state.in_progress {
                referenced.insert(&f.in_progress_path);
                referenced.extend(f.supersedes.iter().map(String::as_str));
            }
            // Carried files hold records before the checkpoint's source position: they are
            // kept, and carried on, until a committed merged file supersedes them.
            for f in &state.carried {
                referenced.insert(&f.in_progress_path);
            }
        }
        // Only names of the exact shape this writer writes are its own: same prefix, same
        // writer id. Foreign names (no parse) and other writers' files are never touched.
        let own =
            |name: &PartName| name.writer_id == config.writer_id && name.prefix == config.prefix;
        let mut removed_leftovers = Vec::new();
        // Carried files are hidden objects that S3 lists only at the cost of a listing of
        // every object: only a writer that may have carried files asks for them.
        let may_have_carried =
            config.merge.is_some() || state.is_some_and(|s| !s.carried.is_empty());
        let leftovers = if may_have_carried {
            config.storage.list_leftovers().await?
        } else {
            config.storage.list_leftovers_uncarried().await?
        };
        for leftover in leftovers {
            if leftover.name.as_ref().is_some_and(own)
                && !referenced.contains(leftover.path.as_str())
            {
                config.storage.remove_leftover(&leftover.path).await?;
                tracing::info!(file = %leftover.path, "leftover removed");
                removed_leftovers.push(leftover.path);
            }
        }
        metrics::counter!(crate::protocol::metric::LEFTOVERS_REMOVED)
            .increment(removed_leftovers.len() as u64);

        // 3. Resume row files from their durable prefix, into files of the new incarnation
        //    (invariant 6).
        let mut writer = SinkWriter::new(config.clone());
        if let Some(state) = state {
            writer.state.checkpoint_id = state.checkpoint_id;
            if !state.carried.is_empty()
                && !matches!(config.format, crate::format::FileFormat::Parquet(_))
            {
                return Err(Error::corrupt(
                    format!("writer state of writer `{}`", state.writer_id),
                    "it carries files, but the format is not Parquet",
                ));
            }
            writer.carried = state.carried.clone();
            writer.state.carried = state.carried.clone();
            writer.state.version = writer.state.format_version();
            for f in &state.in_progress {
                if !config.format.is_resumable() {
                    return Err(Error::corrupt(
                        format!("writer state of writer `{}`", state.writer_id),
                        "it lists in-progress files, but the format cannot resume files",
                    ));
                }
                let location = writer.next_location(&f.bucket);
                let file = config
                    .storage
                    .resume(
                        &f.in_progress_path,
                        f.durable_len_bytes,
                        f.crc32c,
                        &location,
                    )
                    .await?;
                tracing::debug!(
                    file = %f.in_progress_path,
                    bytes = f.durable_len_bytes,
                    "resumed in-progress file"
                );
                let mut supersedes = f.supersedes.clone();
                supersedes.push(f.in_progress_path.clone());
                let created_at = UNIX_EPOCH + Duration::from_millis(f.created_at_ms.max(0) as u64);
                writer.open.insert(
                    f.bucket.clone(),
                    OpenPart {
                        bucket: f.bucket.clone(),
                        file,
                        encoder: None,
                        schema: None,
                        crc32c: f.crc32c,
                        record_count: f.record_count,
                        created_at,
                        last_write: SystemTime::now(),
                        supersedes,
                        buffered_bytes: 0,
                        held_bytes: 0,
                    },
                );
            }
        }
        Ok(Restored {
            writer,
            commit_outcomes,
            removed_leftovers,
        })
    }
}
