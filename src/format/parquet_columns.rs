//! One Parquet file whose columns are encoded in parallel: what `ArrowWriter` does, with the
//! column writers of a row group fed on several threads at once.
//!
//! Writers of a job split the work by bucket, so one hot partition would keep one core busy
//! and leave the others idle. Within one file the columns are independent until the row group
//! is assembled: each [`ArrowColumnWriter`] encodes (and, when its row group closes,
//! compresses) its own leaf column, and the chunks are appended to the row group in schema
//! order. A batch of at least [`PARALLEL_ROWS_MIN`] rows spreads its columns over up to
//! [`std::thread::available_parallelism`] scoped threads, as many as the other helper threads
//! of the process leave free ([`Helpers`]); smaller batches are encoded on the calling thread,
//! where a thread's start would cost more than it saves, and so are batches that find fewer
//! than two helpers free.
//!
//! The file is the one `ArrowWriter` would write: it starts as an `ArrowWriter` (which puts
//! the Arrow schema into the key-value metadata) and is taken apart with
//! `ArrowWriter::into_serialized_writer`; row groups end at the same row and byte limits of
//! the writer properties.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
    ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

use crate::Result;

/// Batches with fewer rows are encoded on the calling thread.
pub(crate) const PARALLEL_ROWS_MIN: usize = 4096;

pub(crate) struct ColumnsWriter {
    file: SerializedFileWriter<Vec<u8>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The column writers of the open row group, one per leaf column.
    group: Option<Vec<ArrowColumnWriter>>,
    group_rows: usize,
    max_rows: Option<usize>,
    max_bytes: Option<usize>,
    threads: usize,
    /// Tests: `threads` threads whatever the count of [`HELPERS`] and the cores, so that the
    /// parallel path runs on any machine.
    #[cfg(test)]
    uncounted: bool,
}

/// [`std::thread::available_parallelism`], asked once: it reads the cgroup's CPU quota
/// from files, which cost 2% of an ingest that opened a writer per file for 1,000 files.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Column threads running at once in this process, counted so that together they never exceed
/// [`cores`]. The writers of a job encode on the caller's runtime threads (the CLI's: 2), each
/// busy already: without the count, every writer closing a large row group at once started
/// `min(cores, columns)` threads of its own (on a runtime of 64 workers, with 64+ columns,
/// 4,096 threads at a vote), where a thread that finds the cores taken only adds switching.
/// The writers themselves are not counted: a writer that finds no helper free encodes on its
/// own thread, so runnable threads stay at most `cores` plus the writers busy.
static HELPERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Helper threads taken from the count of [`HELPERS`] (given back when dropped), or, in tests,
/// outside it.
struct Helpers {
    n: usize,
    counted: bool,
}

impl Helpers {
    /// Up to `wanted` helpers: as many as the other helpers running leave of [`cores`], and
    /// none where that is one (the caller waits for its helpers: one would only do what the
    /// caller does, and keep it from another caller that could use it).
    fn take(wanted: usize) -> Helpers {
        use std::sync::atomic::Ordering;
        let mut running = HELPERS.load(Ordering::Relaxed);
        loop {
            let n = wanted.min(cores().saturating_sub(running));
            if n < 2 {
                return Helpers::NONE;
            }
            match HELPERS.compare_exchange_weak(
                running,
                running + n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Helpers { n, counted: true },
                Err(now) => running = now,
            }
        }
    }

    const NONE: Helpers = Helpers {
        n: 0,
        counted: false,
    };

    /// The helpers a batch or row group of `rows` rows and `columns` leaf columns gets from
    /// `writer`: none under [`PARALLEL_ROWS_MIN`] rows, else up to `writer.threads`.
    fn for_rows(writer: &ColumnsWriter, rows: usize, columns: usize) -> Helpers {
        if rows < PARALLEL_ROWS_MIN || writer.threads <= 1 {
            return Helpers::NONE;
        }
        #[cfg(test)]
        if writer.uncounted {
            return Helpers {
                n: writer.threads.min(columns),
                counted: false,
            };
        }
        Helpers::take(writer.threads.min(columns))
    }

    /// How many were taken.
    fn count(&self) -> usize {
        self.n
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        if self.counted {
            HELPERS.fetch_sub(self.n, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

impl ColumnsWriter {
    pub(crate) fn new(schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        let max_rows = props.max_row_group_row_count();
        let max_bytes = props.max_row_group_bytes();
        let (file, factory) = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?
            .into_serialized_writer()?;
        Ok(ColumnsWriter {
            file,
            factory,
            schema,
            group: None,
            group_rows: 0,
            max_rows,
            max_bytes,
            threads: cores(),
            #[cfg(test)]
            uncounted: false,
        })
    }

    /// The bytes written so far, for the caller to take.
    pub(crate) fn output(&mut self) -> &mut Vec<u8> {
        self.file.inner_mut()
    }

    /// What the open row group holds in memory.
    pub(crate) fn memory_size(&self) -> usize {
        self.group
            .as_ref()
            .map_or(0, |g| g.iter().map(|w| w.memory_size()).sum())
    }

    fn group_bytes(&self) -> usize {
        self.group
            .as_ref()
            .map_or(0, |g| g.iter().map(|w| w.get_estimated_total_bytes()).sum())
    }

    /// Encodes `batch`, ending row groups at the row and byte limits.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut remaining = batch.clone();
        while remaining.num_rows() > 0 {
            if self.group.is_none() {
                let index = self.file.flushed_row_groups().len();
                self.group = Some(self.factory.create_column_writers(index)?);
                self.group_rows = 0;
            }
            let mut take = remaining.num_rows();
            if let Some(max) = self.max_rows {
                take = take.min(max.saturating_sub(self.group_rows).max(1));
            }
            if let Some(max_bytes) = self.max_bytes.filter(|_| self.group_rows > 0) {
                let current = self.group_bytes();
                let fit = match (max_bytes.checked_sub(current), current / self.group_rows) {
                    (None | Some(0), _) => 0,
                    (Some(room), 0) => room,
                    (Some(room), avg) => room / avg,
                };
                if fit == 0 {
                    self.flush()?;
                    continue;
                }
                take = take.min(fit);
            }
            let now = remaining.slice(0, take);
            remaining = remaining.slice(take, remaining.num_rows() - take);
            let mut leaves = Vec::new();
            for (field, column) in self.schema.fields().iter().zip(now.columns()) {
                leaves.extend(compute_leaves(field, column)?);
            }
            // Held until the threads are joined, inside `encode`.
            let helpers = Helpers::for_rows(self, now.num_rows(), leaves.len());
            let writers = self.group.as_mut().expect("opened above");
            encode(writers, &leaves, helpers.count())?;
            drop(helpers);
            self.group_rows += now.num_rows();
            let full = self.max_rows.is_some_and(|m| self.group_rows >= m)
                || self.max_bytes.is_some_and(|m| self.group_bytes() >= m);
            if full {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Ends the open row group, if any: its column chunks are closed (in parallel when it is
    /// large) and appended in schema order.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let Some(writers) = self.group.take() else {
            return Ok(());
        };
        let helpers = Helpers::for_rows(self, self.group_rows, writers.len());
        let chunks = close(writers, helpers.count())?;
        drop(helpers);
        let mut row_group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        self.group_rows = 0;
        Ok(())
    }

    /// Ends the file: the last row group and the footer.
    pub(crate) fn finish(&mut self) -> Result<ParquetMetaData> {
        self.flush()?;
        Ok(self.file.finish()?)
    }
}

/// Writes leaf `i` into writer `i`, the columns spread over `threads` threads (round-robin,
/// so that wide string columns next to each other land on different threads).
fn encode(
    writers: &mut [ArrowColumnWriter],
    leaves: &[ArrowLeafColumn],
    threads: usize,
) -> Result<()> {
    let threads = threads.min(writers.len());
    if threads <= 1 {
        for (w, leaf) in writers.iter_mut().zip(leaves) {
            w.write(leaf)?;
        }
        return Ok(());
    }
    let mut shares: Vec<Vec<(&mut ArrowColumnWriter, &ArrowLeafColumn)>> =
        (0..threads).map(|_| Vec::new()).collect();
    for (i, pair) in writers.iter_mut().zip(leaves).enumerate() {
        shares[i % threads].push(pair);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                s.spawn(move || -> Result<()> {
                    for (w, leaf) in share {
                        w.write(leaf)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a column encoding thread panicked")?;
        }
        Ok(())
    })
}

/// Closes every writer (the last pages, compressed), spread over `threads` threads; the chunks
/// come back in the writers' order.
fn close(writers: Vec<ArrowColumnWriter>, threads: usize) -> Result<Vec<ArrowColumnChunk>> {
    let n = writers.len();
    let threads = threads.min(n);
    if threads <= 1 {
        return writers
            .into_iter()
            .map(|w| w.close().map_err(Into::into))
            .collect();
    }
    let mut shares: Vec<Vec<(usize, ArrowColumnWriter)>> =
        (0..threads).map(|_| Vec::new()).collect();
    for (i, w) in writers.into_iter().enumerate() {
        shares[i % threads].push((i, w));
    }
    let mut chunks: Vec<Option<ArrowColumnChunk>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                s.spawn(move || -> Result<Vec<(usize, ArrowColumnChunk)>> {
                    share
                        .into_iter()
                        .map(|(i, w)| Ok((i, w.close()?)))
                        .collect()
                })
            })
            .collect();
        for h in handles {
            for (i, chunk) in h.join().expect("a column closing thread panicked")? {
                chunks[i] = Some(chunk);
            }
        }
        Ok(())
    })?;
    Ok(chunks
        .into_iter()
        .map(|c| c.expect("every column closed"))
        .collect())
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int64Array, ListArray, StringArray, StructArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    /// Flat, nested and repeated columns (every kind of leaf mapping), some nulls.
    pub(in crate::format) fn batch(from: i64, n: i64) -> RecordBatch {
        let ids: Vec<i64> = (from..from + n).collect();
        let id = Arc::new(Int64Array::from(ids.clone())) as ArrayRef;
        let name = Arc::new(StringArray::from_iter(ids.iter().map(|i| {
            (i % 5 != 0).then(|| format!("name-{i}-{}", "x".repeat((i % 9) as usize)))
        }))) as ArrayRef;
        let lat = Arc::new(Float64Array::from_iter_values(
            ids.iter().map(|&i| i as f64 / 7.0),
        ));
        let tag = Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("t{}", i % 3)),
        ));
        let point = Arc::new(StructArray::from(vec![
            (
                Arc::new(Field::new("lat", DataType::Float64, false)),
                lat as ArrayRef,
            ),
            (
                Arc::new(Field::new("tag", DataType::Utf8, false)),
                tag as ArrayRef,
            ),
        ])) as ArrayRef;
        let list = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
            ids.iter()
                .map(|&i| (i % 4 != 0).then(move || (0..i % 3).map(move |k| Some(i * 10 + k)))),
        )) as ArrayRef;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("point", point.data_type().clone(), false),
            Field::new("list", list.data_type().clone(), true),
        ]));
        RecordBatch::try_new(schema, vec![id, name, point, list]).unwrap()
    }

    pub(in crate::format) fn read(bytes: Vec<u8>) -> (Vec<usize>, RecordBatch) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).unwrap();
        let groups = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows() as usize)
            .collect();
        let schema = reader.schema().clone();
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        (
            groups,
            arrow::compute::concat_batches(&schema, &batches).unwrap(),
        )
    }

    /// The same batches through `ArrowWriter` and through the parallel writer give files with
    /// the same row groups and the same records (read back with the Parquet reader).
    #[test]
    fn columns_encoded_in_parallel_make_the_file_arrow_writer_makes() {
        for props in [
            WriterProperties::builder().build(),
            WriterProperties::builder()
                .set_max_row_group_row_count(Some(3000))
                .build(),
            WriterProperties::builder()
                .set_max_row_group_bytes(Some(64 * 1024))
                .build(),
        ] {
            // Large batches (parallel), small ones (on the calling thread), and a flush.
            let batches = [batch(0, 9000), batch(9000, 100), batch(9100, 5000)];
            let schema = batches[0].schema();
            let mut expected =
                ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone())).unwrap();
            let mut ours = ColumnsWriter::new(schema.clone(), props.clone()).unwrap();
            ours.threads = 3;
            ours.uncounted = true;
            for (i, b) in batches.iter().enumerate() {
                expected.write(b).unwrap();
                ours.write(b).unwrap();
                if i == 1 {
                    expected.flush().unwrap();
                    ours.flush().unwrap();
                }
            }
            expected.finish().unwrap();
            let meta = ours.finish().unwrap();
            assert_eq!(meta.file_metadata().num_rows(), 14_100);
            let (want_groups, want) = read(std::mem::take(expected.inner_mut()));
            let (groups, got) = read(std::mem::take(ours.output()));
            assert_eq!(groups, want_groups, "{props:?}");
            assert_eq!(got, want);
            let all = arrow::compute::concat_batches(&schema, &batches).unwrap();
            assert_eq!(got, all);
        }
    }

    /// However many helpers are asked for, at once, they never number more than the cores,
    /// and one is never taken alone (other tests may hold some: only bounds are asserted; that
    /// they are given back is the lease's `Drop`).
    #[test]
    fn helpers_never_outnumber_the_cores() {
        for _ in 0..100 {
            let a = super::Helpers::take(usize::MAX);
            let b = super::Helpers::take(3);
            assert!(a.count() + b.count() <= super::cores());
            assert!(
                a.count() != 1 && b.count() != 1,
                "a lone helper is never taken"
            );
        }
        assert_eq!(super::Helpers::take(0).count(), 0);
        assert_eq!(super::Helpers::take(1).count(), 0);
    }
}
