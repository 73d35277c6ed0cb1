//! Partitions beyond the open-files cap: their records are *gathered* (kept as Arrow batches,
//! spilled to a scratch file when memory runs short) and written at the vote, one file each.
//!
//! # Why
//!
//! A writer keeps one in-progress file open per partition it writes: a file descriptor, an
//! encoder, on an object store an upload. With tens of thousands of partitions between two
//! checkpoints that is more than the memory budget or the process's limit of open files
//! allows, and rolling files early to make room makes many small files of every partition.
//! So a writer keeps at most [`SinkBuilder::open_files_max`](crate::SinkBuilder::open_files_max)
//! files open (fewer when the budget is small: each open file counts [`OPEN_FILE_BYTES`]
//! against it), and gathers the records of any other partition until the vote, where the
//! partition is written into a file of its own in one go: still one file per partition per
//! checkpoint, at any partition count, in bounded memory.
//!
//! # Lifecycle
//!
//! ```text
//!  write(): bucket with an open file ───────────▶ written to it, as always
//!           bucket without one, the cap reached ─▶ GATHERED: the call's gathered rows copied
//!           (or gathered already this checkpoint)   into one batch, with a range per bucket,
//!                                                   counted in the budget
//!  over the budget, gathered rows the most ─────▶ SPILLED: every gathered row, sorted by
//!                                                  bucket (stable), appended to the scratch
//!                                                  file as one run (an Arrow IPC stream),
//!                                                  freed from memory
//!  prepare_commit(n) ───────────────────────────▶ buckets in order, each in turn: a new file,
//!                                                  its rows from every run (read on in
//!                                                  step, a merge) and from memory, in the
//!                                                  order they came; rolled: a pending file
//!                                                  of n like any other
//! ```
//!
//! # Crash points
//!
//! None of this is durable, and none of it needs to be: gathered records came after the last
//! checkpoint, whose source position precedes them, so a restore from it replays them (case 1
//! of [`crate::sink`]). The scratch file is removed from its directory as soon as it is
//! created (an open file without a name), so a crash leaves nothing behind, anywhere, and
//! nothing is ever written under the lake but part files. From the moment the vote opens a
//! gathered bucket's file, that file is an ordinary in-progress file.
//!
//! # Invariants
//!
//! - Within a checkpoint a bucket is open or gathered, never both: a gathered bucket stays
//!   gathered until the vote, which writes it into one file (more only past the part size),
//!   so no partition gets more files per checkpoint than with its file open all along.
//! - A bucket's records keep their order: a run holds each bucket's rows in the order they
//!   came, runs are older than the rows in memory, and the vote reads runs in the order they
//!   were written.
//! - What the gathered rows hold in memory is counted in the writer's budget
//!   ([`crate::SinkWriter::buffered_bytes`]), until the vote has written them: one batch per
//!   write, not one per bucket (at 100,000 partitions a write brings most buckets a row or
//!   two, and a batch per bucket would cost more in arrays than in rows).
//! - Runs are few and large: the writer spills once the gathered rows hold a quarter of its
//!   budget (or when nothing else can be freed without rolling a file), so a checkpoint that
//!   gathers G bytes makes about 4G / budget runs. The vote holds one batch of about 256 KiB
//!   of each run at a time, and a run's index costs 12 bytes per bucket in it.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::bucket::BucketId;
use crate::{Error, Result};

/// What an open file costs in memory beyond the buffers the budget counts (the file's
/// bookkeeping, its encoder's fixed state and the backend's handle), counted against the
/// budget for every open file. A writer keeps at most a quarter of its budget's worth of open
/// files: 8,192 under 512 MiB.
pub(crate) const OPEN_FILE_BYTES: u64 = 16 * 1024;

/// About the size of a batch of a run in the scratch file: the vote holds one of each run.
const RUN_BATCH_BYTES: u64 = 256 * 1024;

/// The most rows in a batch of a run, however small the rows.
const RUN_BATCH_ROWS: usize = 8192;

/// Encoded batches are written to the scratch file in pieces of about this size, so a spill
/// holds at most this much beyond the rows it frees.
const SPILL_WRITE_BYTES: usize = 8 << 20;

/// A bucket's gathered rows in memory: its id, and its rows as (write, row) pairs in the
/// order they came.
type BucketRows = (u32, Vec<(usize, usize)>);

/// The rows of one write, gathered: one batch, and where each bucket's rows are in it.
#[derive(Debug)]
struct Written {
    batch: RecordBatch,
    /// (bucket, first row, rows), one per bucket of the write.
    ranges: Vec<(u32, u32, u32)>,
}

/// A run in the scratch file: every row gathered before a spill, sorted by bucket.
#[derive(Debug)]
struct Run {
    offset: u64,
    len: u64,
    /// (bucket, rows) in the run's order.
    buckets: Vec<(u32, u32)>,
}

/// The gathered buckets of one writer, and its scratch file.
#[derive(Debug, Default)]
pub(crate) struct Gather {
    /// The schema every gathered row has.
    schema: Option<SchemaRef>,
    ids: HashMap<BucketId, u32>,
    names: Vec<BucketId>,
    /// Writes since the last spill, oldest first.
    written: Vec<Written>,
    /// What `written` holds.
    bytes: u64,
    runs: Vec<Run>,
    scratch: Option<Scratch>,
}

impl Gather {
    /// Whether `bucket` is gathered this checkpoint.
    pub(crate) fn contains(&self, bucket: &BucketId) -> bool {
        self.ids.contains_key(bucket)
    }

    /// The schema of `bucket`'s gathered rows.
    pub(crate) fn schema(&self, bucket: &BucketId) -> Option<&SchemaRef> {
        self.schema.as_ref().filter(|_| self.contains(bucket))
    }

    /// Whether rows of `schema` can join the gathered ones (every gathered row has one
    /// schema).
    pub(crate) fn takes(&self, schema: &SchemaRef) -> bool {
        self.schema
            .as_ref()
            .is_none_or(|s| s.fields() == schema.fields())
    }

    /// Buckets gathered this checkpoint.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// What the gathered rows in memory hold (counted in the writer's budget).
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.bytes
    }

    /// Gathers the rows of one write: `parts`, one batch per bucket (slices of the batch
    /// written, of one schema that [`Gather::takes`]), are copied into one batch of their own.
    pub(crate) fn push(&mut self, parts: Vec<(BucketId, RecordBatch)>) -> Result<()> {
        let Some((_, first)) = parts.first() else {
            return Ok(());
        };
        let schema = first.schema();
        debug_assert!(self.takes(&schema));
        self.schema.get_or_insert_with(|| schema.clone());
        let mut ranges = Vec::with_capacity(parts.len());
        let mut start = 0u32;
        for (bucket, batch) in &parts {
            let next = self.names.len() as u32;
            let id = *self.ids.entry(bucket.clone()).or_insert(next);
            if id == next {
                self.names.push(bucket.clone());
            }
            let rows = batch.num_rows() as u32;
            ranges.push((id, start, rows));
            start += rows;
        }
        let batches: Vec<&RecordBatch> = parts.iter().map(|(_, b)| b).collect();
        let batch = arrow::compute::concat_batches(&schema, batches)
            .map_err(|e| Error::InvalidInput(format!("gathered records: {e}")))?;
        self.bytes += batch.get_array_memory_size() as u64 + 12 * ranges.len() as u64;
        self.written.push(Written { batch, ranges });
        Ok(())
    }

    /// The gathered rows in memory, sorted by bucket name and then in the order they came:
    /// for each bucket its id and its rows as (write, row) pairs.
    fn sorted(&self) -> Vec<BucketRows> {
        let mut rows: BTreeMap<&BucketId, BucketRows> = BTreeMap::new();
        for (w, written) in self.written.iter().enumerate() {
            for &(id, start, len) in &written.ranges {
                let entry = rows
                    .entry(&self.names[id as usize])
                    .or_insert_with(|| (id, Vec::new()));
                entry
                    .1
                    .extend((start..start + len).map(|r| (w, r as usize)));
            }
        }
        rows.into_values().collect()
    }

    /// Appends every gathered row in memory to the scratch file as one run, sorted by bucket,
    /// and frees them: afterwards [`Gather::memory_bytes`] is 0.
    pub(crate) async fn spill(&mut self) -> Result<()> {
        if self.written.is_empty() {
            return Ok(());
        }
        let schema = self.schema.clone().expect("rows were gathered");
        if self.scratch.is_none() {
            self.scratch = Some(Scratch::create()?);
        }
        let sorted = self.sorted();
        let batches: Vec<&RecordBatch> = self.written.iter().map(|w| &w.batch).collect();
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let batch_rows = usize::try_from(RUN_BATCH_BYTES * rows.max(1) / self.bytes.max(1))
            .unwrap_or(RUN_BATCH_ROWS)
            .clamp(64, RUN_BATCH_ROWS);
        let scratch = self.scratch.as_mut().expect("created above");
        let offset = scratch.len;
        let ipc = |e: arrow::error::ArrowError| scratch_error("write", std::io::Error::other(e));
        let mut stream =
            arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &schema).map_err(ipc)?;
        let mut buckets = Vec::with_capacity(sorted.len());
        let mut indices: Vec<(usize, usize)> = Vec::with_capacity(batch_rows);
        for (id, rows) in sorted {
            buckets.push((id, rows.len() as u32));
            for row in rows {
                indices.push(row);
                if indices.len() == batch_rows {
                    write_rows(&mut stream, &batches, &mut indices, scratch).await?;
                }
            }
        }
        write_rows(&mut stream, &batches, &mut indices, scratch).await?;
        stream.finish().map_err(ipc)?;
        scratch.append(std::mem::take(stream.get_mut())).await?;
        let freed = std::mem::take(&mut self.bytes);
        self.written.clear();
        tracing::debug!(
            buckets = buckets.len(),
            freed_bytes = freed,
            run_bytes = scratch.len - offset,
            "gathered records spilled"
        );
        self.runs.push(Run {
            offset,
            len: scratch.len - offset,
            buckets,
        });
        Ok(())
    }

    /// Takes the gathered buckets out, with the scratch file, for the vote to write: the
    /// next checkpoint starts without either (the file is closed, and its space freed, once
    /// the vote has read it back).
    pub(crate) fn take(&mut self) -> Result<Drained> {
        let sorted = self.sorted();
        let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
        order.sort_unstable_by(|a, b| self.names[*a as usize].cmp(&self.names[*b as usize]));
        let scratch = self.scratch.take().map(|s| s.file);
        let runs = std::mem::take(&mut self.runs)
            .into_iter()
            .map(|run| RunReader::new(scratch.clone().expect("runs are in it"), run))
            .collect::<Result<Vec<_>>>()?;
        let drained = Drained {
            names: std::mem::take(&mut self.names),
            order: order.into_iter(),
            runs,
            written: std::mem::take(&mut self.written),
            in_memory: sorted.into_iter().peekable(),
        };
        self.ids.clear();
        self.schema = None;
        self.bytes = 0;
        Ok(drained)
    }
}

/// Encodes the rows at `indices` as one batch of `stream`, and hands what the stream has
/// encoded to the scratch file once it is large.
async fn write_rows(
    stream: &mut arrow_ipc::writer::StreamWriter<Vec<u8>>,
    batches: &[&RecordBatch],
    indices: &mut Vec<(usize, usize)>,
    scratch: &mut Scratch,
) -> Result<()> {
    if indices.is_empty() {
        return Ok(());
    }
    let ipc = |e: arrow::error::ArrowError| scratch_error("write", std::io::Error::other(e));
    let batch = arrow::compute::interleave_record_batch(batches, indices).map_err(ipc)?;
    indices.clear();
    stream.write(&batch).map_err(ipc)?;
    if stream.get_ref().len() >= SPILL_WRITE_BYTES {
        scratch.append(std::mem::take(stream.get_mut())).await?;
    }
    Ok(())
}

/// The gathered buckets taken by the vote, in order of their names: each bucket's rows from
/// every run and from memory, in the order they came.
pub(crate) struct Drained {
    names: Vec<BucketId>,
    /// Bucket ids in order of their names.
    order: std::vec::IntoIter<u32>,
    runs: Vec<RunReader>,
    written: Vec<Written>,
    /// The rows in memory, by bucket, in the same order.
    in_memory: std::iter::Peekable<std::vec::IntoIter<BucketRows>>,
}

impl Drained {
    /// The next `n` buckets (or fewer, at the end) that [`Drained::next`] gives.
    pub(crate) fn upcoming(&self, n: usize) -> Vec<BucketId> {
        self.order
            .as_slice()
            .iter()
            .take(n)
            .map(|&id| self.names[id as usize].clone())
            .collect()
    }

    /// The next bucket and its batches, oldest first.
    pub(crate) async fn next(&mut self) -> Result<Option<(BucketId, Vec<RecordBatch>)>> {
        let Some(id) = self.order.next() else {
            return Ok(None);
        };
        let mut batches = Vec::new();
        for run in &mut self.runs {
            batches.extend(run.rows_of(id).await?);
        }
        if self.in_memory.peek().is_some_and(|(next, _)| *next == id) {
            let (_, mut rows) = self.in_memory.next().expect("peeked");
            // Only the writes that hold the bucket's rows (in the order they came).
            let mut sources: Vec<&RecordBatch> = Vec::new();
            let mut last = None;
            for (w, _) in &mut rows {
                if last != Some(*w) {
                    last = Some(*w);
                    sources.push(&self.written[*w].batch);
                }
                *w = sources.len() - 1;
            }
            for piece in rows.chunks(RUN_BATCH_ROWS) {
                batches.push(
                    arrow::compute::interleave_record_batch(&sources, piece)
                        .map_err(|e| Error::InvalidInput(format!("gathered records: {e}")))?,
                );
            }
        }
        Ok(Some((self.names[id as usize].clone(), batches)))
    }
}

/// Reads one run of the scratch file on, bucket by bucket.
struct RunReader {
    /// `None` while a read is under way on a blocking thread.
    stream: Option<arrow_ipc::reader::StreamReader<std::io::BufReader<RangeReader>>>,
    /// The buckets left, in the run's order.
    buckets: std::iter::Peekable<std::vec::IntoIter<(u32, u32)>>,
    /// The batch being read, and the next row of it.
    current: Option<(RecordBatch, usize)>,
}

impl RunReader {
    fn new(file: Arc<std::fs::File>, run: Run) -> Result<RunReader> {
        let range = RangeReader {
            file,
            at: run.offset,
            end: run.offset + run.len,
        };
        let stream = arrow_ipc::reader::StreamReader::try_new_buffered(range, None)
            .map_err(scratch_corrupt)?;
        Ok(RunReader {
            stream: Some(stream),
            buckets: run.buckets.into_iter().peekable(),
            current: None,
        })
    }

    /// The rows of bucket `id` in this run, if it has any (the run is read in order of the
    /// buckets' names, as the vote asks for them).
    async fn rows_of(&mut self, id: u32) -> Result<Vec<RecordBatch>> {
        let mut left = match self.buckets.peek() {
            Some(&(next, rows)) if next == id => rows as usize,
            _ => return Ok(Vec::new()),
        };
        self.buckets.next();
        let mut out = Vec::new();
        while left > 0 {
            if self
                .current
                .as_ref()
                .is_none_or(|(b, at)| *at == b.num_rows())
            {
                let mut stream = self.stream.take().expect("no read under way");
                let (stream, next) = tokio::task::spawn_blocking(move || {
                    let next = stream.next();
                    (stream, next)
                })
                .await
                .map_err(|e| scratch_error("read", std::io::Error::other(e)))?;
                self.stream = Some(stream);
                let batch = next
                    .ok_or_else(|| {
                        Error::corrupt(
                            "the scratch file of gathered records",
                            "a run ended before its rows",
                        )
                    })?
                    .map_err(scratch_corrupt)?;
                self.current = Some((batch, 0));
            }
            let (batch, at) = self.current.as_mut().expect("read above");
            let n = left.min(batch.num_rows() - *at);
            out.push(batch.slice(*at, n));
            *at += n;
            left -= n;
        }
        Ok(out)
    }
}

/// A range of the scratch file, read from its start.
struct RangeReader {
    file: Arc<std::fs::File>,
    at: u64,
    end: u64,
}

impl Read for RangeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min((self.end - self.at) as usize);
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// The writer's scratch file: in the system's temporary directory (`TMPDIR`), without a name
/// from the moment it exists.
#[derive(Debug)]
struct Scratch {
    file: Arc<std::fs::File>,
    /// Bytes written so far.
    len: u64,
}

impl Scratch {
    fn create() -> Result<Scratch> {
        let path = std::env::temp_dir().join(format!(
            ".filesink-gather-{}",
            uuid::Uuid::now_v7().simple()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| scratch_error("create", e))?;
        std::fs::remove_file(&path).map_err(|e| scratch_error("create", e))?;
        Ok(Scratch {
            file: Arc::new(file),
            len: 0,
        })
    }

    async fn append(&mut self, bytes: Vec<u8>) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let (file, offset, len) = (self.file.clone(), self.len, bytes.len() as u64);
        tokio::task::spawn_blocking(move || file.write_all_at(&bytes, offset))
            .await
            .map_err(|e| scratch_error("write", std::io::Error::other(e)))?
            .map_err(|e| scratch_error("write", e))?;
        self.len += len;
        Ok(())
    }
}

/// `e`, met doing `op` to the scratch file: named by its directory, as it has no name.
fn scratch_error(op: &'static str, e: std::io::Error) -> Error {
    let op = match op {
        "create" => "create the scratch file of gathered records (TMPDIR) in",
        "write" => "write gathered records to the scratch file (TMPDIR) in",
        _ => "read gathered records back from the scratch file (TMPDIR) in",
    };
    Error::Io {
        op,
        path: std::env::temp_dir(),
        source: e,
    }
}

fn scratch_corrupt(e: arrow::error::ArrowError) -> Error {
    Error::corrupt("the scratch file of gathered records", e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(from: i64, rows: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(from..from + rows)),
                Arc::new(StringArray::from_iter(
                    (from..from + rows).map(|i| (i % 3 != 0).then(|| format!("v{i}"))),
                )),
            ],
        )
        .unwrap()
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    fn bucket(name: &str) -> BucketId {
        BucketId::parse(name).unwrap()
    }

    /// Rows gathered over writes, spilled twice (runs of more than one batch) and gathered
    /// again come back by bucket in order of the names, each bucket's rows in the order they
    /// came; the memory count follows.
    #[tokio::test]
    async fn gathered_records_come_back_in_order_through_spills() {
        let (a, b, c) = (bucket("k=a"), bucket("k=b"), bucket("k=c"));
        let whole = batch(0, 40_000);
        let mut gather = Gather::default();
        gather
            .push(vec![
                (b.clone(), whole.slice(0, 10)),
                (a.clone(), whole.slice(10, 10)),
            ])
            .unwrap();
        gather
            .push(vec![(a.clone(), whole.slice(20, 20_000))])
            .unwrap();
        assert!(gather.memory_bytes() > 0);
        gather.spill().await.unwrap();
        assert_eq!(gather.memory_bytes(), 0);
        gather
            .push(vec![(c.clone(), whole.slice(20_020, 10))])
            .unwrap();
        gather
            .push(vec![
                (b.clone(), whole.slice(20_030, 9_000)),
                (a.clone(), whole.slice(29_030, 5)),
            ])
            .unwrap();
        gather.spill().await.unwrap();
        gather
            .push(vec![(a.clone(), whole.slice(29_035, 965))])
            .unwrap();
        assert_eq!(gather.len(), 3);
        let mut drained = gather.take().unwrap();
        assert_eq!(drained.upcoming(5), vec![a.clone(), b.clone(), c.clone()]);
        let (got, batches) = drained.next().await.unwrap().unwrap();
        assert_eq!(got, a);
        let want: Vec<i64> = (10..20).chain(20..20_020).chain(29_030..30_000).collect();
        assert_eq!(ids(&batches), want);
        let (got, batches) = drained.next().await.unwrap().unwrap();
        assert_eq!(got, b);
        assert_eq!(
            ids(&batches),
            (0..10).chain(20_030..29_030).collect::<Vec<_>>()
        );
        let (got, batches) = drained.next().await.unwrap().unwrap();
        assert_eq!(got, c);
        assert_eq!(ids(&batches), (20_020..20_030).collect::<Vec<_>>());
        assert!(drained.next().await.unwrap().is_none());
        assert_eq!(gather.len(), 0);
        assert_eq!(gather.memory_bytes(), 0);
        // The next checkpoint starts over, with a scratch file of its own.
        gather.push(vec![(b.clone(), whole.slice(0, 5))]).unwrap();
        gather.spill().await.unwrap();
        let (_, batches) = gather.take().unwrap().next().await.unwrap().unwrap();
        assert_eq!(ids(&batches), (0..5).collect::<Vec<_>>());
    }

    /// A write's gathered rows are one batch of their own: the batch they were sliced from
    /// can go, and a row costs about its bytes, not an array per bucket.
    #[test]
    fn a_write_is_gathered_as_one_copy() {
        let whole = batch(0, 10_000);
        let mut gather = Gather::default();
        let parts = (0..1_000)
            .map(|i| (bucket(&format!("k={i}")), whole.slice(i * 2, 2)))
            .collect();
        gather.push(parts).unwrap();
        assert_eq!(gather.written.len(), 1);
        assert!(gather.memory_bytes() < whole.get_array_memory_size() as u64 / 2);
        assert!(!gather.takes(&Arc::new(Schema::empty())));
    }
}
