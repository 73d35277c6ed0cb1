//! Queued writes: while an ingest writes, each writer of a job takes its shares from a queue of
//! its own on a task ([`Coordinator::write_queued`]); every vote first waits for the queues.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use tracing::Instrument;

use super::{Coordinator, JobWriter};
use crate::protocol::BucketId;
use crate::{Error, Result};

/// The writers of a job while they write from queues of their own
/// ([`Coordinator::write_queued`]): each on a task, taking its shares in order.
#[derive(Debug)]
pub(super) struct Queues {
    /// Emptied when the queues are drained or stopped.
    senders: Vec<tokio::sync::mpsc::Sender<Vec<(BucketId, RecordBatch)>>>,
    /// `None` once joined (by a join that was then dropped, its writer lost).
    pub(super) tasks: Vec<Option<WriterTask>>,
    /// Each writer's open files after its last write.
    open_files: Arc<[std::sync::atomic::AtomicUsize]>,
    /// The writer whose write failed first, if one did.
    failed_first: Arc<std::sync::OnceLock<usize>>,
    /// Set by [`Coordinator::stop_writes`]: the writers take no further share.
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// Set while a chunk's shares are handed over: still set if the caller's future was
    /// dropped halfway, some writers having their share and others not.
    sending: bool,
}

/// A writer writing from its queue, which gives the writer back when the queue closes or a
/// write fails.
pub(super) type WriterTask = tokio::task::JoinHandle<(JobWriter, Result<()>)>;

/// What joining a [`WriterTask`] gives back.
pub(super) type Joined = std::result::Result<(JobWriter, Result<()>), tokio::task::JoinError>;

/// The writer tasks of [`Queues`], joined ([`Coordinator::written`]).
pub(super) struct QueuesJoined {
    /// By writer index; a writer joined before by a join that was dropped is missing.
    outcomes: Vec<(usize, Joined)>,
    count: usize,
    failed_first: Option<usize>,
    /// Whether the queued writes were cut short: stopped, or a share was being handed over
    /// when the caller's future was dropped.
    cut: bool,
}

/// A spawned task aborted when dropped: a caller's future dropped halfway takes its tasks
/// with it, at their next await, rather than leaving them to write on.
pub(super) struct AbortOnDrop<T>(pub(super) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Shares a writer's queue holds besides the one it writes ([`Coordinator::write_queued`]).
pub(crate) const SHARES_QUEUED: usize = 2;

impl Coordinator {
    /// The number of writers, whether they are in place or writing from their queues.
    pub(super) fn writer_count(&self) -> usize {
        match &self.queues {
            Some(q) => q.tasks.len(),
            None => self.writers.len(),
        }
    }

    /// Writes `batch` (as [`Coordinator::write`]) and `buckets`, records already split by the
    /// sink's bucket assigner (the ingest splits its chunks on its decoding threads), but a
    /// job with several writers hands each writer its share through a queue of its own and
    /// returns without waiting for the writes: a writer waits only for its own work, and the
    /// caller goes on (decoding the next records) while the writers encode. A queue holds
    /// two shares; a full one makes the caller wait. An error of a queued write
    /// is returned by a later call that hands the same writer a share, by
    /// [`Coordinator::written`], or by the next checkpoint, which waits for every queued write
    /// before its vote.
    pub async fn write_queued(
        &mut self,
        batch: Option<&RecordBatch>,
        buckets: Vec<(BucketId, RecordBatch)>,
    ) -> Result<()> {
        match self.writer_count() {
            0 => return Err(self.writers_gone()),
            1 => {}
            _ => return self.write_queued_shares(batch, buckets).await,
        }
        if let Some(batch) = batch {
            self.writer().write(batch).await?;
        }
        self.writer().inner.write_assigned(buckets).await
    }

    /// [`Coordinator::write_queued`] for a job with several writers.
    pub(super) async fn write_queued_shares(
        &mut self,
        batch: Option<&RecordBatch>,
        buckets: Vec<(BucketId, RecordBatch)>,
    ) -> Result<()> {
        let mut all = Vec::new();
        if let Some(batch) = batch.filter(|b| b.num_rows() > 0) {
            all.push(self.sink.config.assign(batch)?);
        }
        if !buckets.is_empty() {
            all.push(buckets);
        }
        for buckets in all {
            let shares = self.shares(buckets);
            if self.queues.is_none() {
                self.start_queues();
            }
            let queues = self.queues.as_mut().expect("started");
            if queues.senders.is_empty() {
                // A drain was dropped halfway: the queues are closed.
                return Err(self.writers_gone());
            }
            let mut stopped = false;
            queues.sending = true;
            for (sender, share) in queues.senders.iter().zip(shares) {
                if !share.is_empty() && sender.send(share).await.is_err() {
                    stopped = true;
                    break;
                }
            }
            queues.sending = stopped;
            if stopped {
                // A writer stopped on an error: it is the error to return.
                self.written().await?;
                return Err(Error::InvalidInput(format!(
                    "a writer of job `{}` stopped without an error",
                    self.job
                )));
            }
        }
        Ok(())
    }

    /// Starts a task and a queue for every writer ([`Coordinator::write_queued`]).
    pub(super) fn start_queues(&mut self) {
        let writers = std::mem::take(&mut self.writers);
        let open_files: Arc<[std::sync::atomic::AtomicUsize]> = writers
            .iter()
            .map(|w| std::sync::atomic::AtomicUsize::new(w.open_files()))
            .collect();
        let failed_first = Arc::new(std::sync::OnceLock::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut senders = Vec::with_capacity(writers.len());
        let mut tasks = Vec::with_capacity(writers.len());
        for (i, mut writer) in writers.into_iter().enumerate() {
            let (tx, mut rx) =
                tokio::sync::mpsc::channel::<Vec<(BucketId, RecordBatch)>>(SHARES_QUEUED);
            let open = open_files.clone();
            let failed = failed_first.clone();
            let stop = stop.clone();
            let span = tracing::Span::current();
            tasks.push(Some(tokio::spawn(
                async move {
                    while let Some(share) = rx.recv().await {
                        if stop.load(std::sync::atomic::Ordering::Acquire) {
                            break;
                        }
                        if let Err(e) = writer.inner.write_assigned(share).await {
                            let _ = failed.set(i);
                            return (writer, Err(e));
                        }
                        open[i].store(writer.open_files(), std::sync::atomic::Ordering::Relaxed);
                    }
                    (writer, Ok(()))
                }
                .instrument(span),
            )));
            senders.push(tx);
        }
        self.queues = Some(Queues {
            senders,
            tasks,
            open_files,
            failed_first,
            stop,
            sending: false,
        });
    }

    /// Waits until every write queued by [`Coordinator::write_queued`] is done and the
    /// writers are back in place; returns the error of the writer whose write failed first.
    /// After an error the writers are gone and the job takes no checkpoint: reopen it. So
    /// also after queued writes were cut short (a [`Coordinator::stop_writes`] or a
    /// `write_queued` whose future was dropped halfway): their writers may have left records
    /// out that the caller handed over.
    pub async fn written(&mut self) -> Result<()> {
        let Some(joined) = self.join_queues(false).await else {
            return Ok(());
        };
        let mut writers: Vec<Option<JobWriter>> = (0..joined.count).map(|_| None).collect();
        let mut errors: Vec<Option<Error>> = (0..joined.count).map(|_| None).collect();
        for (i, outcome) in joined.outcomes {
            match outcome {
                Ok((writer, r)) => {
                    writers[i] = Some(writer);
                    errors[i] = r.err();
                }
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => {
                    errors[i] = Some(Error::InvalidInput(format!(
                        "a writer task of job `{}` was cancelled: {e}",
                        self.job
                    )))
                }
            }
        }
        let first = joined
            .failed_first
            .and_then(|i| errors[i].take())
            .or_else(|| errors.into_iter().flatten().next());
        match first {
            // The caller cannot tell which of its queued records were written: the writers
            // stay out, so no checkpoint may follow (`writers_gone`).
            Some(e) => Err(e),
            // Cut short, or joined before by a join that was dropped (its writers with it).
            None if joined.cut || writers.iter().any(Option::is_none) => Err(self.writers_gone()),
            None => {
                self.writers = writers.into_iter().flatten().collect();
                Ok(())
            }
        }
    }

    /// Closes the queues (with `stop`, the writers take no further share) and waits for
    /// every writer task; `None` if no queues run. The queues stay in place while it waits,
    /// so that a coordinator dropped meanwhile still stops the tasks not yet joined.
    pub(super) async fn join_queues(&mut self, stop: bool) -> Option<QueuesJoined> {
        let queues = self.queues.as_mut()?;
        if stop {
            queues
                .stop
                .store(true, std::sync::atomic::Ordering::Release);
        }
        queues.senders.clear();
        let mut outcomes = Vec::with_capacity(queues.tasks.len());
        for (i, slot) in queues.tasks.iter_mut().enumerate() {
            if let Some(task) = slot.as_mut() {
                let outcome = task.await;
                *slot = None;
                outcomes.push((i, outcome));
            }
        }
        let queues = self.queues.take().expect("in place while joined");
        Some(QueuesJoined {
            outcomes,
            count: queues.tasks.len(),
            failed_first: queues.failed_first.get().copied(),
            cut: queues.sending || queues.stop.load(std::sync::atomic::Ordering::Acquire),
        })
    }

    /// Stops the writes queued by [`Coordinator::write_queued`]: each writer ends the share
    /// it is writing and takes no other. Returns once none runs, so that nothing of them
    /// reaches the store afterwards (a run that stops, or fails elsewhere, then gives its
    /// job up; on an object store a part upload already sent may still land, in an upload
    /// that is never completed); what they wrote since the last checkpoint is removed by the job's next
    /// restore, and their errors are not reported (as a crash's would not be). The writers
    /// are gone with them: reopen the job to write again.
    pub async fn stop_writes(&mut self) {
        let _ = self.join_queues(true).await;
    }

    /// In-progress files open across the job's writers (as of their last write, while they
    /// write from queues).
    pub fn open_files(&self) -> usize {
        match &self.queues {
            Some(q) => q
                .open_files
                .iter()
                .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
                .sum(),
            None => self.writers.iter().map(|w| w.open_files()).sum(),
        }
    }
}
