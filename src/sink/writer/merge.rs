//! The pre-commit merge at the vote: carried small Parquet files, handed out or merged into
//! one file of the writer's incarnation (`docs/design/delta.md` section 11).

use super::*;

impl SinkWriter {
    /// The pre-commit merge at the vote of `checkpoint_id` (`docs/design/delta.md` section
    /// 11): takes the files sealed for this vote and returns those to hand out as committables.
    ///
    /// A file sealed as carried ([`SinkWriter::carries`]: smaller than the policy's
    /// `small_bytes_max`, and on S3 never uploaded as a part) joins its bucket's carried
    /// files. A bucket whose carried files are due (bytes at `target_bytes`, the oldest older
    /// than `max_visibility_delay`, the input ended, or no merge policy any more: a state
    /// restored into a sink without one) hands them out: a lone file as it is where the
    /// backend commits carried files in place (local disk: it is sealed already, and its
    /// final name is its own), otherwise (object stores: a hidden object cannot be renamed)
    /// and for several, as one new merged file of this incarnation that supersedes them all,
    /// so they are removed only once it is committed. The rest stays carried, in
    /// [`SinkWriter::carried`] and so in the state of this vote.
    ///
    /// Until this vote's checkpoint is complete, nothing here is referenced by a checkpoint
    /// except the carried files of the previous one, which are left in place: a merged file
    /// and this vote's newly carried files are removed by a restore from the previous
    /// checkpoint, and the previous carried files kept.
    pub(super) async fn settle_carried(
        &mut self,
        sealed: Vec<(ClosedPart, PendingHandle)>,
        checkpoint_id: u64,
        now: SystemTime,
    ) -> Result<Vec<(ClosedPart, PendingHandle)>> {
        let policy = self.config.merge.clone();
        if policy.is_none() && self.carried.is_empty() {
            return Ok(sealed);
        }
        let now_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut out = Vec::new();
        let mut buckets: BTreeMap<BucketId, Vec<CarriedFile>> = BTreeMap::new();
        for c in std::mem::take(&mut self.carried) {
            buckets.entry(c.bucket.clone()).or_default().push(c);
        }
        for (part, pending) in sealed {
            match (&pending, part.carried) {
                (PendingHandle::LocalFile { in_progress_path }, true)
                | (
                    PendingHandle::Staged {
                        staging_path: in_progress_path,
                    },
                    true,
                ) => {
                    let carried = CarriedFile {
                        bucket: part.bucket.clone(),
                        in_progress_path: in_progress_path.clone(),
                        final_path: part.final_path.clone(),
                        size_bytes: part.size_bytes,
                        crc32c: part.crc32c,
                        record_count: part.record_count,
                        checkpoint_id,
                        carried_at_ms: now_ms,
                    };
                    buckets.entry(part.bucket).or_default().push(carried);
                }
                _ => out.push((part, pending)),
            }
        }
        let mut merged_any = false;
        for (bucket, files) in buckets {
            if !is_merge_due(&files, policy.as_ref(), self.input_ended, now_ms) {
                self.carried.extend(files);
                continue;
            }
            let in_place = self.config.storage.commits_carried_in_place();
            for group in group_carried(self.config.storage.as_ref(), &files).await? {
                match group.as_slice() {
                    [lone] if in_place => out.push(lone_committable(lone)),
                    _ => {
                        self.write_merged(&bucket, &group).await?;
                        merged_any = true;
                        // The merged files hold their descriptors until sealed: within the cap.
                        if self.open.len() + self.rolled.len() >= self.config.open_files_max {
                            self.seal_rolled().await?;
                        }
                    }
                }
            }
        }
        if merged_any {
            self.seal_rolled().await?;
            out.append(&mut self.sealed);
        }
        Ok(out)
    }

    /// Writes the records of `group` (carried files of `bucket`, one schema) into one new part
    /// file of this incarnation, reading one carried file at a time and decoding one row group
    /// at a time, and rolls it: it is sealed with the vote's next group, and supersedes every
    /// file of `group`.
    async fn write_merged(&mut self, bucket: &BucketId, group: &[CarriedFile]) -> Result<()> {
        debug_assert!(
            !self.open.contains_key(bucket),
            "Parquet files all roll at the vote"
        );
        let location = self.next_location(bucket);
        let file = self.config.storage.create(&location).await?;
        let now = SystemTime::now();
        let supersedes = group.iter().map(|f| f.in_progress_path.clone()).collect();
        self.open.insert(
            bucket.clone(),
            OpenPart::new(bucket.clone(), file, now, supersedes),
        );
        let flush_at = (self.config.buffer_bytes_max / 4).max(ROW_GROUP_FLUSH_BYTES_MIN) as usize;
        let mut expected = 0u64;
        for f in group {
            expected += f.record_count;
            let bytes = read_carried_file(self.config.storage.as_ref(), f).await?;
            let what = || format!("carried file `{}`", f.in_progress_path);
            let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
                .map_err(|e| Error::corrupt(what(), e.to_string()))?;
            let row_groups = builder.metadata().num_row_groups();
            let mut read = 0u64;
            for rg in 0..row_groups {
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
                    .and_then(|b| b.with_row_groups(vec![rg]).build())
                    .map_err(|e| Error::corrupt(what(), e.to_string()))?;
                for batch in reader {
                    let batch = batch.map_err(|e| Error::corrupt(what(), e.to_string()))?;
                    read += batch.num_rows() as u64;
                    let part = self.open.get_mut(bucket).expect("inserted above");
                    if part.encoder.is_none() {
                        part.encoder = Some(self.config.format.encoder(batch.schema(), false)?);
                        part.schema = Some(batch.schema());
                    }
                    let encoder = part.encoder.as_mut().expect("set above");
                    self.scratch.clear();
                    encoder.write(&batch, &mut self.scratch)?;
                    if encoder.buffered_bytes() >= flush_at {
                        encoder.flush(&mut self.scratch)?;
                    }
                    write_bytes(part, &self.scratch).await?;
                    part.record_count += batch.num_rows() as u64;
                    part.account(&mut self.buffered_bytes_total);
                }
            }
            // Assert in pairs: the file holds the records the state says it holds.
            if read != f.record_count {
                return Err(Error::corrupt(
                    what(),
                    format!(
                        "it holds {read} records, the writer state says {}",
                        f.record_count
                    ),
                ));
            }
        }
        let part = self.open.get(bucket).expect("inserted above");
        debug_assert_eq!(part.record_count, expected);
        tracing::debug!(
            writer = %self.config.writer_id,
            file = %location.final_path,
            merged = group.len(),
            records = expected,
            "merged carried files"
        );
        self.roll(bucket).await
    }
}

/// Reads the carried file `f` back whole and checks it is the file the state recorded: its
/// size and CRC-32C.
async fn read_carried_file(
    storage: &dyn crate::storage::Storage,
    f: &CarriedFile,
) -> Result<bytes::Bytes> {
    let bytes = storage.read_hidden(&f.in_progress_path).await?;
    if bytes.len() as u64 != f.size_bytes || crc32c::crc32c(&bytes) != f.crc32c {
        return Err(Error::data_lost(
            &f.in_progress_path,
            format!(
                "the carried file holds {} bytes with CRC-32C {:#010x}; the writer state \
                 recorded {} bytes with {:#010x}",
                bytes.len(),
                crc32c::crc32c(&bytes),
                f.size_bytes,
                f.crc32c
            ),
        ));
    }
    Ok(bytes)
}

/// Groups `files` by Arrow schema, in order (files of one schema can be merged into one
/// file), reading each back and checking it ([`read_carried_file`]). Only one file is in
/// memory at a time: the merge reads each again.
async fn group_carried(
    storage: &dyn crate::storage::Storage,
    files: &[CarriedFile],
) -> Result<Vec<Vec<CarriedFile>>> {
    let mut groups: Vec<(SchemaRef, Vec<CarriedFile>)> = Vec::new();
    for f in files {
        let bytes = read_carried_file(storage, f).await?;
        let schema = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| {
                Error::corrupt(
                    format!("carried file `{}`", f.in_progress_path),
                    e.to_string(),
                )
            })?
            .schema()
            .clone();
        match groups
            .iter_mut()
            .find(|(s, _)| s.fields() == schema.fields())
        {
            Some((_, group)) => group.push(f.clone()),
            None => groups.push((schema, vec![f.clone()])),
        }
    }
    Ok(groups.into_iter().map(|(_, g)| g).collect())
}

/// Whether a bucket's carried `files` are handed out at this vote.
fn is_merge_due(
    files: &[CarriedFile],
    policy: Option<&MergePolicy>,
    input_ended: bool,
    now_ms: i64,
) -> bool {
    let Some(policy) = policy else {
        return true;
    };
    let bytes: u64 = files.iter().map(|f| f.size_bytes).sum();
    let oldest = files
        .iter()
        .map(|f| f.carried_at_ms)
        .min()
        .unwrap_or(now_ms);
    input_ended
        || bytes >= policy.target_bytes
        || now_ms.saturating_sub(oldest) >= policy.max_visibility_delay.as_millis() as i64
}

/// A carried file handed out alone: it was sealed when it was carried, so it is committed as
/// it is, under the final name it was given.
fn lone_committable(f: &CarriedFile) -> (ClosedPart, PendingHandle) {
    (
        ClosedPart {
            bucket: f.bucket.clone(),
            file: None,
            final_path: f.final_path.clone(),
            size_bytes: f.size_bytes,
            crc32c: f.crc32c,
            record_count: f.record_count,
            supersedes: Vec::new(),
            stats: None,
            carried: false,
        },
        PendingHandle::LocalFile {
            in_progress_path: f.in_progress_path.clone(),
        },
    )
}
