//! The reading and decoding stages of a run, on threads of their own: a reader thread takes
//! chunks of framed records from the source ([`SourceReader`], whatever kind of source it is)
//! and hands them round-robin to the decoding threads; or, for a source that has byte ranges
//! (plain files of JSON lines) on a time schedule, each decoding thread reads its own ranges
//! ([`source::Ranges`]). The writing loop takes the decoded chunks back in the same round
//! ([`Pipeline::next`]), so in input order, whatever order the decoders finish in.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::source::{self, Chunk, Cursor, Decoder, LaneNext, Prefix, RawChunk, SourceReader};
use super::{CHUNKS_QUEUED, CHUNK_RECORDS_MAX};
use crate::error::{Error, Result};

/// A message down the pipeline: from the reader thread to a decoder (`Msg<RawChunk>`), and
/// from a decoder to the writing loop (`Msg<Chunk>`).
pub(super) enum Msg<C> {
    /// Records: framed, or decoded.
    Chunk(C),
    /// Every input is read: the final position, what is read of each input, and the bytes
    /// read.
    End(Cursor, Vec<Prefix>, u64),
    /// Reading failed; nothing after the last chunk may be checkpointed.
    Failed(Error),
}

/// The running reader and decoding threads.
pub(super) struct Pipeline {
    /// Per decoding thread, its decoded chunks.
    decoded: Vec<tokio::sync::mpsc::Receiver<Msg<Chunk>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The decoder whose chunk comes next.
    turn: usize,
    /// How many times the smallest chunk the reader frames now ([`super::chunk_scale`]).
    scale: Arc<AtomicUsize>,
    /// Set once the writing loop takes no more chunks: a reader waiting for a source that
    /// gives none ends then.
    closed: Arc<AtomicBool>,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

impl Pipeline {
    /// Starts `decoders` decoding threads over `source` (and a reader thread, unless they read
    /// ranges themselves). With `rows_every`, chunks end at every multiple of that many
    /// records, so that a checkpoint by record count falls between two chunks.
    pub(super) fn start(
        source: Box<dyn SourceReader>,
        decoders: usize,
        rows_every: Option<u64>,
    ) -> Result<Pipeline> {
        let scale = Arc::new(AtomicUsize::new(1));
        let mut pipeline = Pipeline {
            decoded: Vec::with_capacity(decoders),
            threads: Vec::with_capacity(decoders + 1),
            turn: 0,
            scale,
            closed: Arc::new(AtomicBool::new(false)),
        };
        match source.ranges().filter(|_| rows_every.is_none()) {
            Some(ranges) => {
                for d in 0..decoders {
                    let lane = ranges.lane(d, decoders);
                    pipeline.start_lane(d, lane, source.decoder())?;
                }
            }
            None => pipeline.start_reader(source, decoders, rows_every)?,
        }
        Ok(pipeline)
    }

    /// A decoding thread that reads its own lane of ranges.
    fn start_lane(&mut self, d: usize, mut lane: source::Lane, decoder: Decoder) -> Result<()> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Msg<Chunk>>(CHUNKS_QUEUED);
        let scale = self.scale.clone();
        let thread = std::thread::Builder::new()
            .name(format!("filesink-decode-{d}"))
            .spawn(move || loop {
                let k = scale.load(Ordering::Relaxed);
                let msg = match lane.next(source::CHUNK_BYTES_MAX * k) {
                    None => return,
                    Some(LaneNext::Records(raw)) => Msg::Chunk(raw),
                    Some(LaneNext::End(cursor, read, bytes)) => Msg::End(cursor, read, bytes),
                    Some(LaneNext::Failed(e)) => Msg::Failed(e),
                    // An error of the records before comes first in the input.
                    Some(LaneNext::FailedAfter(before, e)) => {
                        Msg::Failed(decoder.decode(before).err().unwrap_or(e))
                    }
                };
                if !decode_and_send(&decoder, msg, &tx) {
                    return;
                }
            })
            .map_err(|e| Error::io("start a decoding thread for", "the inputs", e))?;
        self.threads.push(thread);
        self.decoded.push(rx);
        Ok(())
    }

    /// `decoders` decoding threads that take framed chunks in turn; returns where to send
    /// them.
    fn start_decoders(
        &mut self,
        decoders: usize,
        decoder: &Decoder,
    ) -> Result<Vec<std::sync::mpsc::SyncSender<Msg<RawChunk>>>> {
        let mut to_decoders = Vec::with_capacity(decoders);
        for d in 0..decoders {
            let (raw_tx, raw_rx) = std::sync::mpsc::sync_channel::<Msg<RawChunk>>(CHUNKS_QUEUED);
            let (tx, rx) = tokio::sync::mpsc::channel::<Msg<Chunk>>(CHUNKS_QUEUED);
            let decoder = decoder.clone();
            let thread = std::thread::Builder::new()
                .name(format!("filesink-decode-{d}"))
                .spawn(move || {
                    for msg in raw_rx {
                        if !decode_and_send(&decoder, msg, &tx) {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::io("start a decoding thread for", "the inputs", e))?;
            self.threads.push(thread);
            to_decoders.push(raw_tx);
            self.decoded.push(rx);
        }
        Ok(to_decoders)
    }

    /// The decoding threads, and the reader thread that frames chunks for them in turn.
    fn start_reader(
        &mut self,
        mut source: Box<dyn SourceReader>,
        decoders: usize,
        rows_every: Option<u64>,
    ) -> Result<()> {
        let to_decoders = self.start_decoders(decoders, &source.decoder())?;
        let (scale, closed) = (self.scale.clone(), self.closed.clone());
        let reader = std::thread::Builder::new()
            .name("filesink-source".into())
            .spawn(move || {
                let mut produced: u64 = 0;
                for turn in (0..to_decoders.len()).cycle() {
                    let k = scale.load(Ordering::Relaxed);
                    let records = CHUNK_RECORDS_MAX * k;
                    let max = match rows_every {
                        Some(n) => (n - produced % n).min(records as u64) as usize,
                        None => records,
                    };
                    let msg = match source.next_chunk(max, source::CHUNK_BYTES_MAX * k, &closed) {
                        None => return,
                        Some(Ok(Some(raw))) => {
                            produced += raw.records() as u64;
                            Msg::Chunk(raw)
                        }
                        Some(Ok(None)) => {
                            let (cursor, read, bytes) = source.end();
                            Msg::End(cursor, read, bytes)
                        }
                        Some(Err(e)) => Msg::Failed(e),
                    };
                    let last = !matches!(msg, Msg::Chunk(_));
                    if to_decoders[turn].send(msg).is_err() || last {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("start a reader thread for", "the inputs", e))?;
        self.threads.push(reader);
        Ok(())
    }

    /// The next decoded chunk, in input order. With `wake`, once that time comes first: an
    /// empty chunk at `cursor` (the current position), so that a checkpoint due by time is
    /// taken whether or not records come. `None`: the threads are gone.
    pub(super) async fn next(
        &mut self,
        wake: Option<Instant>,
        cursor: Cursor,
    ) -> Option<Msg<Chunk>> {
        let decoders = self.decoded.len();
        match wake {
            Some(at) => tokio::select! {
                m = self.decoded[self.turn].recv() => {
                    self.turn = (self.turn + 1) % decoders;
                    m
                }
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                    Some(Msg::Chunk(Chunk {
                        batch: None,
                        buckets: Vec::new(),
                        bad: Vec::new(),
                        cursor,
                        read: Vec::new(),
                        position: None,
                        parts: None,
                    }))
                }
            },
            None => {
                let m = self.decoded[self.turn].recv().await;
                self.turn = (self.turn + 1) % decoders;
                m
            }
        }
    }

    /// Sets the chunk size the reader frames next, as a multiple of the smallest.
    pub(super) fn set_scale(&self, k: usize) {
        self.scale.store(k, Ordering::Relaxed);
    }

    /// Stops taking chunks: the threads end at their next send (a reader waiting for a
    /// source's records, at its next wait).
    pub(super) fn close(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
        self.decoded.clear();
    }

    /// Waits for the threads, which have sent their last messages and are ending.
    pub(super) async fn join(mut self) {
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

/// A decoding thread's step: decodes `msg`'s records (or passes its end or failure on) and
/// sends the outcome to the writing loop. False when the thread is done: it sent its last
/// message (an end or a failure), or the loop is gone.
fn decode_and_send(
    decoder: &Decoder,
    msg: Msg<RawChunk>,
    tx: &tokio::sync::mpsc::Sender<Msg<Chunk>>,
) -> bool {
    let msg = match msg {
        Msg::Chunk(raw) => match decoder.decode(raw) {
            Ok(chunk) => Msg::Chunk(chunk),
            Err(e) => Msg::Failed(e),
        },
        Msg::End(cursor, read, bytes) => Msg::End(cursor, read, bytes),
        Msg::Failed(e) => Msg::Failed(e),
    };
    let last = !matches!(msg, Msg::Chunk(_));
    tx.blocking_send(msg).is_ok() && !last
}
