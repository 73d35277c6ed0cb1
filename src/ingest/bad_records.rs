//! The bad-records file: malformed records set aside as JSON lines, tagged with the job that
//! set them aside, so that the file is only ever appended to and a resumed run still lists
//! each bad record once.
//!
//! A line is `{"source":"file:line","line":…,"error":…,"input":…,"job":…,"sink_id":…,
//! "seq":…}`, `input` being the input's canonical path (`source` names it as given) and `seq`
//! the record's number among the job's bad records (from 1). Several jobs may share the
//! file and nothing in it is ever removed: a run killed after it wrote bad records but before
//! its next checkpoint leaves them there, and the resumed run, which reads the same records
//! again, finds them by their tags (`job`, `sink_id`) and their place and text (`input`, the
//! line number of `source`, and `line`), and does not write them twice: under whatever name
//! each run was given the input. Not by number: the numbers within a chunk follow its kinds
//! of error (malformed records first), so another cut of the chunks numbers the same records
//! otherwise; line numbers count from the start of the input, whatever the cut. A record of the resumed run that the killed run did not write at that
//! place (the job read other bytes after its checkpoint: another stream, or inputs read from
//! their start by a job that had taken no record) is written; the killed run's line stays,
//! naming bytes no checkpoint took.
//!
//! Every checkpoint makes the file durable first and records in the [`SourcePosition`] where
//! a resumed run looks for such lines: the file's length, or, while lines of a killed run are
//! still ahead of the position (a resumed run checkpointed before it read them all again),
//! where the last run began to look, so that the next run finds them too. A line the
//! position has passed is covered (its place is before the position of its input) and no
//! longer looked for (but a job that took no record at all reads its inputs from their start
//! again, so every line of its is looked for). A run without `--bad-records` keeps the file
//! and the place its checkpoint was restored with (it writes no line); a position that
//! names no bad-records file, or another one (a killed run may have written to this one all
//! the same), makes a run look through the whole file; so does a file whose bytes before that
//! place are not those the checkpoint saw (`bad_records_tail`: truncated or replaced by an
//! operator, and grown again). A line another writer of the file left cut short (killed, out
//! of space) is ended before a run appends; a file a run creates has its directory made
//! durable, as its lines are at every checkpoint.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::source::{BadRecord, SourcePosition};
use crate::error::{Error, Result};

/// A line of the bad-records file: the record, its input's canonical path, the job that set
/// it aside, and its number among the job's bad records (`seq`, from 1).
#[derive(serde::Serialize)]
struct BadRecordLine<'a> {
    #[serde(flatten)]
    record: &'a BadRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a str>,
    job: &'a str,
    sink_id: &'a str,
    seq: u64,
}

/// The tags of a line of the bad-records file, and the record's place and text.
#[derive(serde::Deserialize)]
struct BadRecordTag {
    job: Option<String>,
    sink_id: Option<String>,
    input: Option<String>,
    source: Option<String>,
    line: Option<String>,
}

/// One of a job's inputs: as the run was given it (bad records name it so) and its canonical
/// path (the job's identity, and the position's, name it so).
#[derive(Debug, Clone)]
pub(crate) struct InputName {
    pub(crate) display: String,
    pub(crate) canonical: String,
}

/// A bad record's place: its input (an index into the position's `read`) and line.
type Place = (usize, u64);

/// The place of the bad record at `source` (`input:line`, the input as this run names it).
/// With `canonical`, the input is the one of that canonical path instead.
fn place_of(source: &str, canonical: Option<&str>, inputs: &[InputName]) -> Option<Place> {
    let (display, line) = source.rsplit_once(':')?;
    let i = match canonical {
        Some(c) => inputs.iter().position(|n| n.canonical == c)?,
        None => inputs.iter().position(|n| n.display == display)?,
    };
    Some((i, line.parse().ok()?))
}

/// The place of a line of the file, by its input's canonical path (a line of an older
/// filesink has none: by the name this run gives the input); `None` for a line of none of
/// this run's inputs.
fn place_of_line(tag: &BadRecordTag, inputs: &[InputName]) -> Option<Place> {
    place_of(tag.source.as_deref()?, tag.input.as_deref(), inputs)
}

/// Bytes before a checkpoint's place in the file that identify what it looked at.
const TAIL_BYTES: u64 = 4096;

/// CRC-32C of the (up to [`TAIL_BYTES`]) bytes of `file` before `at`.
fn tail_crc(file: &File, at: u64) -> std::io::Result<u32> {
    let start = at.saturating_sub(TAIL_BYTES);
    let mut buf = vec![0u8; (at - start) as usize];
    file.read_exact_at(&mut buf, start)?;
    Ok(crc32c::crc32c(&buf))
}

/// Whether the bytes of `file` before `at` are those a checkpoint saw (`tail`, none
/// recorded by an older filesink: taken as the same).
fn tail_is(file: &File, at: u64, tail: Option<u32>) -> bool {
    tail.is_none_or(|want| tail_crc(file, at).is_ok_and(|crc| crc == want))
}

/// Whether `a` and `b` name the same existing file (`x/../bad.jsonl`, a symbolic link).
fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The bad-records file of one run, open for appending.
struct BadRecordsFile {
    file: File,
    path: PathBuf,
    job: String,
    sink_id: String,
    /// The job's bad records after the restored checkpoint that are in the file already
    /// (written by a run that did not get to the next checkpoint): their places and texts,
    /// each with the number of lines that hold it not yet met again.
    written: HashMap<(Place, String), usize>,
    /// Where this run began to look for them.
    looked_from: u64,
    /// The job's inputs, in the order of the position's `read`.
    inputs: Vec<InputName>,
}

/// Whether the bad record at `place` is one `position` took: at a line it read past. A job
/// that took no record reads its inputs from their start again ([`super::Ingest`]): none.
fn covered((i, line): Place, position: &SourcePosition) -> bool {
    if position.records == 0 && position.bad_records == 0 {
        return false;
    }
    position.read.get(i).is_some_and(|r| line < r.line)
}

impl BadRecordsFile {
    /// Opens `path` for appending; it is never cut back. When resuming a job (`restored`),
    /// notes the bad records after the restored checkpoint that are in the file already, so
    /// that the replayed interval does not list them twice (`legacy`: `restored` was written
    /// by a filesink that did not tag its lines). `inputs` are the job's inputs. Returns with
    /// the file what an operator should know, if anything.
    fn open(
        path: &Path,
        restored: Option<&SourcePosition>,
        legacy: bool,
        job: &str,
        sink_id: &str,
        inputs: &[InputName],
    ) -> Result<(BadRecordsFile, Option<String>)> {
        let err = |e| Error::io("open", path, e);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        // The file's name must outlive a power cut as its lines do (each checkpoint counts
        // them): its directory is made durable too, once a run (a run that created it may
        // have been killed before).
        let real = std::fs::canonicalize(path).map_err(err)?;
        let dir = real.parent().unwrap_or(Path::new("/"));
        crate::storage::local::fs::sync_dir(dir).map_err(|e| Error::fsync(dir, e))?;
        let len = file.metadata().map_err(err)?.len();
        let mut out = BadRecordsFile {
            file,
            path: path.to_path_buf(),
            job: job.to_string(),
            sink_id: sink_id.to_string(),
            written: HashMap::new(),
            looked_from: len,
            inputs: inputs.to_vec(),
        };
        let Some(p) = restored else {
            return Ok((out, None));
        };
        // Where the checkpoint said to look, if it names this file (under any spelling) and
        // the file did not get shorter (then it is another file by the same name); otherwise
        // the whole file: another file was named (a killed run may have written this one),
        // or none (no run of the job had one). The tags decide what is the job's.
        let same_file = p
            .bad_records_file
            .as_deref()
            .is_some_and(|f| Some(f) == path.to_str() || same_path(Path::new(f), path));
        let from = match p.bad_records_len {
            Some(n) if same_file && n <= len && tail_is(&out.file, n, p.bad_records_tail) => n,
            _ => 0,
        };
        if legacy {
            // Version 1 positions come with untagged lines.
            let note = (len > from).then(|| {
                format!(
                    "`{}` may list bad records after byte {from} twice: job `{job}` was \
                     checkpointed by an older filesink",
                    path.display(),
                )
            });
            return Ok((out, note));
        }
        let mut reader = BufReader::new(&out.file);
        reader.seek(SeekFrom::Start(from)).map_err(err)?;
        let job_key = format!("\"job\":{}", serde_json::Value::from(job));
        for line in reader.split(b'\n') {
            let line = line.map_err(err)?;
            if !line.windows(job_key.len()).any(|w| w == job_key.as_bytes()) {
                continue;
            }
            let Ok(tag) = serde_json::from_slice::<BadRecordTag>(&line) else {
                continue;
            };
            if tag.job.as_deref() != Some(job) || tag.sink_id.as_deref() != Some(sink_id) {
                continue;
            }
            // A line of another input than this run's can stand for no record of this run.
            if let Some(place) = place_of_line(&tag, inputs).filter(|&at| !covered(at, p)) {
                let key = (place, tag.line.unwrap_or_default());
                *out.written.entry(key).or_default() += 1;
            }
        }
        out.looked_from = from;
        out.file.seek(SeekFrom::End(0)).map_err(err)?;
        Ok((out, None))
    }

    /// Appends `bad`, the job's bad records number `first_seq` on, except those already
    /// written (a line of the same place and text, each line taken once).
    fn write(&mut self, bad: &[BadRecord], first_seq: u64) -> Result<()> {
        let mut buf = Vec::new();
        // A line another writer left cut short (killed, or out of space): end it, so that
        // this run's first line is whole.
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io("read the length of", &self.path, e))?
            .len();
        if len > 0 {
            let mut last = [0u8];
            self.file
                .read_exact_at(&mut last, len - 1)
                .map_err(|e| Error::io("read", &self.path, e))?;
            if last[0] != b'\n' {
                buf.push(b'\n');
            }
        }
        for (seq, b) in (first_seq..).zip(bad) {
            let place = place_of(&b.source, None, &self.inputs);
            if let Some(n) = place
                .and_then(|at| self.written.get_mut(&(at, b.line.clone())))
                .filter(|n| **n > 0)
            {
                *n -= 1;
                continue;
            }
            let line = BadRecordLine {
                record: b,
                input: place.map(|(i, _)| self.inputs[i].canonical.as_str()),
                job: &self.job,
                sink_id: &self.sink_id,
                seq,
            };
            serde_json::to_writer(&mut buf, &line).expect("bad records serialize");
            buf.push(b'\n');
        }
        self.file
            .write_all(&buf)
            .map_err(|e| Error::io("write to", &self.path, e))
    }

    /// Makes the file durable, and records in `position` (the checkpoint about to be taken)
    /// the file and where a run resumed from it looks for lines it must not write again: the
    /// file's end, or where this run looked from while lines it has not met again are ahead
    /// of `position`.
    fn sync(&mut self, position: &mut SourcePosition) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::fsync(&self.path, e))?;
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io("read the length of", &self.path, e))?
            .len();
        self.written
            .retain(|&(at, _), n| *n > 0 && !covered(at, position));
        let at = match self.written.is_empty() {
            true => len,
            false => self.looked_from,
        };
        // Cut short under the run (an operator truncated it): the next run looks through it all.
        let (at, tail) = match tail_crc(&self.file, at) {
            Ok(crc) => (at, crc),
            Err(_) => (0, crc32c::crc32c(&[])),
        };
        position.bad_records_len = Some(at);
        position.bad_records_file = self.path.to_str().map(str::to_string);
        position.bad_records_tail = Some(tail);
        Ok(())
    }
}

/// Runs `f` on a thread of the blocking pool, so that the file's system calls never block the
/// async runtime; a panic there is resumed here.
async fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(t) => Ok(t),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Error::io("run", "the bad-records file's task", e.into())),
    }
}

/// The bad-records file of a run, if it has one, used from async code: every call runs on the
/// blocking pool.
pub(crate) struct BadRecords(Option<BadRecordsFile>);

impl BadRecords {
    /// Opens the file at `path` (see [`BadRecordsFile::open`]); `None`: no bad-records file.
    pub(crate) async fn open(
        path: Option<&Path>,
        restored: Option<&SourcePosition>,
        legacy: bool,
        job: &str,
        sink_id: &str,
        inputs: Vec<InputName>,
    ) -> Result<(BadRecords, Option<String>)> {
        let Some(path) = path else {
            return Ok((BadRecords(None), None));
        };
        let (path, job, sink_id) = (path.to_path_buf(), job.to_string(), sink_id.to_string());
        let restored = restored.cloned();
        let (file, note) = on_thread(move || {
            BadRecordsFile::open(&path, restored.as_ref(), legacy, &job, &sink_id, &inputs)
        })
        .await??;
        Ok((BadRecords(Some(file)), note))
    }

    /// Appends `bad`, the job's bad records number `first_seq` on (see
    /// [`BadRecordsFile::write`]).
    pub(crate) async fn write(&mut self, bad: Vec<BadRecord>, first_seq: u64) -> Result<()> {
        let mut file = self
            .0
            .take()
            .expect("bad records only come with a bad-records file");
        let (file, result) = on_thread(move || {
            let r = file.write(&bad, first_seq);
            (file, r)
        })
        .await?;
        self.0 = Some(file);
        result
    }

    /// Makes the file durable and records it in `position` (see [`BadRecordsFile::sync`]);
    /// nothing without a file.
    pub(crate) async fn sync(&mut self, position: &mut SourcePosition) -> Result<()> {
        let Some(mut file) = self.0.take() else {
            return Ok(());
        };
        let mut p = position.clone();
        let (file, result, p) = on_thread(move || {
            let r = file.sync(&mut p);
            (file, r, p)
        })
        .await?;
        self.0 = Some(file);
        result?;
        *position = p;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::source::{Cursor, InputFormat, Prefix};

    /// A bad record at line `at` of `in.jsonl`.
    fn bad(at: u64, line: &str) -> BadRecord {
        BadRecord {
            source: format!("in.jsonl:{at}"),
            line: line.into(),
            error: "not JSON".into(),
        }
    }

    /// The job's one input, named as its bad records name it.
    fn inputs() -> Vec<InputName> {
        named("in.jsonl")
    }

    /// The job's one input, named `display`.
    fn named(display: &str) -> Vec<InputName> {
        vec![InputName {
            display: display.into(),
            canonical: "/in.jsonl".into(),
        }]
    }

    /// A checkpoint of a job that read `in.jsonl` up to line `line` and set `bad` records
    /// aside, with the bad-records file `file` looked through from `len`.
    fn position(line: u64, bad: u64, file: Option<&Path>, len: u64) -> SourcePosition {
        SourcePosition {
            version: SourcePosition::VERSION,
            inputs: vec!["/in.jsonl".into()],
            input_format: InputFormat::Jsonl,
            partition_by: Vec::new(),
            partition_by_time: None,
            cursor: Cursor::START,
            read: vec![Prefix {
                offset: line - 1,
                line,
                crc32c: None,
            }],
            records: line,
            bad_records: bad,
            bad_records_len: file.map(|_| len),
            bad_records_file: file.and_then(Path::to_str).map(str::to_string),
            bad_records_tail: None,
            schema: arrow::datatypes::Schema::empty(),
            source: None,
        }
    }

    /// The record texts of the file's lines, in order.
    fn texts(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["line"].to_string())
            .collect()
    }

    /// A killed run wrote bad records 1 and 2 (`{a` at line 3, `{b` at line 7) after the
    /// checkpoint. A resumed run that reads them again, in whatever order its chunks number
    /// them, skips them; other records (other bytes after the checkpoint), even of the same
    /// text at another line, are written: listed, not lost.
    #[test]
    fn a_bad_record_is_skipped_only_when_the_same_one_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        // A job that took no record yet.
        let restored = SourcePosition {
            records: 0,
            ..position(1, 0, Some(&path), 0)
        };
        let run = |records: &[(u64, &str)]| {
            let (mut f, _) =
                BadRecordsFile::open(&path, Some(&restored), false, "j", "s", &inputs()).unwrap();
            let bad: Vec<BadRecord> = records.iter().map(|(at, r)| bad(*at, r)).collect();
            f.write(&bad, 1).unwrap();
        };
        let (mut killed, _) =
            BadRecordsFile::open(&path, None, false, "j", "s", &inputs()).unwrap();
        killed.write(&[bad(3, "{a"), bad(7, "{b")], 1).unwrap();
        drop(killed);

        run(&[(7, "{b"), (3, "{a")]);
        assert_eq!(texts(&path), ["\"{a\"", "\"{b\""]);
        run(&[(5, "{a"), (9, "{c")]);
        assert_eq!(texts(&path), ["\"{a\"", "\"{b\"", "\"{a\"", "\"{c\""]);
        // All four are in the file now: each read again is skipped.
        run(&[(3, "{a"), (5, "{a"), (7, "{b"), (9, "{c")]);
        assert_eq!(texts(&path).len(), 4);
    }

    /// A killed run wrote `{a`, `{b`, `{c` (lines 3, 7, 9) after a checkpoint that covered
    /// `{z` (line 1). A resumed run met `{a` again, checkpointed at line 5 and was killed too:
    /// the next run still finds `{b` and `{c`, whatever numbers the killed run gave them, and
    /// lists each once. So does a run resumed from a checkpoint that a run without a
    /// bad-records file took.
    #[test]
    fn a_killed_runs_bad_records_are_found_after_any_number_of_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        let open = |p: Option<&SourcePosition>| {
            BadRecordsFile::open(&path, p, false, "j", "s", &inputs())
                .unwrap()
                .0
        };
        let mut first = open(None);
        first.write(&[bad(1, "{z")], 1).unwrap();
        let mut c0 = position(2, 1, None, 0);
        first.sync(&mut c0).unwrap();
        assert_eq!(c0.bad_records_len, Some(file_len(&path)));
        // The killed run numbered them its way: `{c` first.
        first
            .write(&[bad(9, "{c"), bad(3, "{a"), bad(7, "{b")], 2)
            .unwrap();
        drop(first);

        let mut second = open(Some(&c0));
        second.write(&[bad(3, "{a")], 2).unwrap();
        let mut c1 = position(5, 2, None, 0);
        second.sync(&mut c1).unwrap();
        assert_eq!(
            c1.bad_records_len, c0.bad_records_len,
            "`{{b` and `{{c` ahead"
        );
        drop(second);

        let mut third = open(Some(&c1));
        third.write(&[bad(7, "{b"), bad(9, "{c")], 3).unwrap();
        assert_eq!(texts(&path), ["\"{z\"", "\"{c\"", "\"{a\"", "\"{b\""]);
        // Past them all: the next checkpoint looks from the end.
        let mut c2 = position(12, 4, None, 0);
        third.sync(&mut c2).unwrap();
        assert_eq!(c2.bad_records_len, Some(file_len(&path)));
        drop(third);

        // A checkpoint without a bad-records file (a run without `--bad-records`, stopped by
        // `{d` at line 15 after its checkpoint at line 14), after a killed run wrote `{d` and
        // `{e`: the next run with the file finds both.
        let mut fourth = open(Some(&c2));
        fourth.write(&[bad(15, "{d"), bad(20, "{e")], 5).unwrap();
        drop(fourth);
        let c3 = position(14, 4, None, 0);
        let mut fifth = open(Some(&c3));
        fifth.write(&[bad(15, "{d"), bad(20, "{e")], 5).unwrap();
        assert_eq!(texts(&path).len(), 6);
        // A line this job's checkpoints covered, met at its place again (a job reading from
        // its start), is no line of this interval: written.
        fifth.write(&[bad(1, "{z")], 7).unwrap();
        assert_eq!(texts(&path).len(), 7);
    }

    /// The length of the file at `path`.
    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    /// A killed run that was given the input under another name (`./in.jsonl`): its lines
    /// are found by the input's canonical path. A killed run's line the resumed run does not
    /// meet again (it read other bytes there) is passed, and no longer looked for.
    #[test]
    fn a_killed_runs_bad_records_are_found_under_any_name_and_passed_ones_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        let c0 = position(10, 1, Some(&path), 0);
        let (mut killed, _) =
            BadRecordsFile::open(&path, Some(&c0), false, "j", "s", &named("./in.jsonl")).unwrap();
        let (a, b) = (bad(12, "{a"), bad(30, "{b"));
        killed
            .write(
                &[bad_named("./in.jsonl", &a), bad_named("./in.jsonl", &b)],
                2,
            )
            .unwrap();
        drop(killed);

        let (mut resumed, _) =
            BadRecordsFile::open(&path, Some(&c0), false, "j", "s", &inputs()).unwrap();
        // `{a` again; at line 30 other bytes this time, with no bad record.
        resumed.write(&[a], 2).unwrap();
        assert_eq!(texts(&path).len(), 2, "`{{a` found by its canonical path");
        let mut c1 = position(20, 2, None, 0);
        resumed.sync(&mut c1).unwrap();
        assert_eq!(c1.bad_records_len, Some(0), "`{{b` still ahead");
        let mut c2 = position(40, 2, None, 0);
        resumed.sync(&mut c2).unwrap();
        assert_eq!(c2.bad_records_len, Some(file_len(&path)), "`{{b` passed");
    }

    /// `b` as a run that names its input `display` sets it aside.
    fn bad_named(display: &str, b: &BadRecord) -> BadRecord {
        let (_, line) = b.source.rsplit_once(':').unwrap();
        BadRecord {
            source: format!("{display}:{line}"),
            ..b.clone()
        }
    }

    /// Killed runs that wrote to this file while the checkpoint named another one, or the
    /// same one under another spelling: their lines are found all the same.
    #[test]
    fn a_killed_runs_bad_records_are_found_whatever_file_the_checkpoint_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let path = dir.path().join("bad.jsonl");
        let other = dir.path().join("other.jsonl");
        let spelled = dir.path().join("sub/../bad.jsonl");
        let (mut killed, _) =
            BadRecordsFile::open(&path, None, false, "j", "s", &inputs()).unwrap();
        killed.write(&[bad(12, "{a")], 1).unwrap();
        drop(killed);
        for (named, what) in [(&other, "another file"), (&spelled, "another spelling")] {
            let c0 = position(10, 0, Some(named), 0);
            let (mut resumed, _) =
                BadRecordsFile::open(&path, Some(&c0), false, "j", "s", &inputs()).unwrap();
            resumed.write(&[bad(12, "{a")], 1).unwrap();
            assert_eq!(texts(&path).len(), 1, "{what}");
        }
    }

    /// The file truncated by an operator after a checkpoint, then grown past the checkpoint's
    /// place by a killed run: the resumed run looks through all of it. A line another writer
    /// left cut short does not swallow the next one.
    #[test]
    fn a_truncated_file_is_looked_through_and_a_cut_line_is_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        let (mut first, _) = BadRecordsFile::open(&path, None, false, "j", "s", &inputs()).unwrap();
        first.write(&[bad(3, "{z")], 1).unwrap();
        let mut c0 = position(5, 1, None, 0);
        first.sync(&mut c0).unwrap();
        drop(first);
        std::fs::write(&path, "").unwrap();
        let (mut killed, _) =
            BadRecordsFile::open(&path, Some(&c0), false, "j", "s", &inputs()).unwrap();
        let long = "{".repeat(300);
        killed.write(&[bad(8, &long), bad(9, "{b")], 2).unwrap();
        drop(killed);
        assert!(file_len(&path) > c0.bad_records_len.unwrap());
        let (mut resumed, _) =
            BadRecordsFile::open(&path, Some(&c0), false, "j", "s", &inputs()).unwrap();
        resumed.write(&[bad(8, &long), bad(9, "{b")], 2).unwrap();
        assert_eq!(texts(&path).len(), 2, "found from the start");

        // Another job's line, cut short.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"source\":\"x:1\",\"li").unwrap();
        drop(f);
        resumed.write(&[bad(11, "{c")], 4).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let last = text.lines().last().unwrap();
        let v: serde_json::Value = serde_json::from_str(last).unwrap();
        assert_eq!(v["line"], "{c");
    }
}
