//! Stopping a run that does not end by itself (a Kafka topic, a stream) at a checkpoint:
//! [`StopHandle`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Asks a running [`Ingest`](super::Ingest) to stop at a checkpoint
/// ([`Ingest::stop_handle`](super::Ingest::stop_handle)): the run takes a checkpoint of every
/// record it has written, waits for its commit, gives the job up and returns
/// [`IngestStatus::Interrupted`](super::IngestStatus::Interrupted). Records read but not yet
/// written are not in that checkpoint: the next run reads them again. A clone asks the same
/// run; `stop` may be called from any thread, any number of times.
///
/// ```
/// use filesink::ingest::{Ingest, StopHandle};
///
/// let stop = StopHandle::new();
/// let ingest = Ingest::new([]).stop_handle(stop.clone());
/// // On SIGTERM, from another task or thread:
/// stop.stop();
/// assert!(stop.is_stopped());
/// # drop(ingest);
/// ```
#[derive(Debug, Clone, Default)]
pub struct StopHandle {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    stopped: AtomicBool,
    notify: Notify,
}

impl StopHandle {
    /// A handle that has not asked for a stop.
    pub fn new() -> StopHandle {
        StopHandle::default()
    }

    /// Asks the run to stop at a checkpoint.
    pub fn stop(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::SeqCst)
    }

    /// Returns once a stop is asked for.
    pub(crate) async fn stopped(&self) {
        loop {
            // Created before the flag is read: a `notify_waiters` in between still wakes it.
            let notified = self.inner.notify.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}
