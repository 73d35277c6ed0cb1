//! What an ingest reads: an [`Input`] (a file, an object, standard input or any reader), its
//! [`InputFormat`], and opening a file or object at its start.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::compression::InputCompression;
use super::{READ_BUFFER_BYTES, ZSTD_MAGIC};
use crate::error::{Error, Result};

/// A file's device and inode.
pub(super) type FileId = (u64, u64);

/// The decompressed bytes of the file or object `input` from its start, buffered, and the
/// file's device and inode (`None` for an object).
pub(super) fn open_file(input: &Input) -> io::Result<(Box<dyn BufRead + Send>, Option<FileId>)> {
    let (raw, id): (Box<dyn Read + Send>, _) = match &input.object {
        Some(object) => (object.open(0)?, None),
        None => {
            let file = File::open(input.path.as_ref().expect("a file"))?;
            let meta = file.metadata()?;
            (Box::new(file), Some((meta.dev(), meta.ino())))
        }
    };
    let reader: Box<dyn Read + Send> = match input.compression {
        None => raw,
        Some(c) => c.decoder(raw)?,
    };
    Ok((
        Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, reader)),
        id,
    ))
}

/// The format of the input files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputFormat {
    /// Newline-delimited JSON: one object per line (`.jsonl`, `.json`, `.ndjson`).
    Jsonl,
    /// Comma-separated values with a header line (`.csv`).
    Csv,
}

impl InputFormat {
    /// The format a file name's extension says, if it says one; a compression extension
    /// (`events.jsonl.gz` is JSON lines, [`InputCompression::from_path`]) and the suffixes log
    /// rotation adds (`app.jsonl.1`, `app.jsonl.2.gz`, `app.jsonl-20261205`) are looked
    /// through.
    pub fn from_path(path: &str) -> Option<InputFormat> {
        let mut path = Path::new(path);
        if InputCompression::from_path(path.to_str()?).is_some() {
            path = Path::new(path.file_stem()?);
        }
        let path = Path::new(without_rotation(path.file_name()?.to_str()?));
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jsonl" | "json" | "ndjson" => Some(InputFormat::Jsonl),
            "csv" => Some(InputFormat::Csv),
            _ => None,
        }
    }

    /// The format of `inputs`, from their file extensions (standard input: JSON lines);
    /// an error if an extension says nothing or the inputs mix formats.
    pub fn of_inputs(inputs: &[Input]) -> Result<InputFormat> {
        let mut format = None;
        for input in inputs {
            let f = if input.is_stdin() {
                InputFormat::Jsonl
            } else {
                InputFormat::from_path(&input.display).ok_or_else(|| {
                    Error::Config(format!(
                        "cannot tell the format of `{}` from its name; give the input format \
                         (`--input-format jsonl` or `csv`, `Ingest::input_format` in the library)",
                        input.display
                    ))
                })?
            };
            match format {
                None => format = Some(f),
                Some(g) if g != f => {
                    return Err(Error::Config(
                        "the inputs mix JSON lines and CSV; ingest them as separate jobs".into(),
                    ))
                }
                Some(_) => {}
            }
        }
        format.ok_or_else(|| Error::Config("no inputs".into()))
    }

    /// `jsonl` or `csv`.
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::Jsonl => "jsonl",
            InputFormat::Csv => "csv",
        }
    }
}

/// A time in nanoseconds since the Unix epoch (`None` before it, or past 2262).
pub(crate) fn epoch_ns(t: std::time::SystemTime) -> Option<i64> {
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_nanos()).ok()
}

/// A file name without the suffixes log rotation adds: a number (`.1`, logrotate's and
/// Python's), a date of at least eight digits (`-20261205`, logrotate's `dateext`), or both.
fn without_rotation(name: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut name = name;
    loop {
        if let Some((head, _)) = name
            .rsplit_once('.')
            .filter(|(h, n)| !h.is_empty() && digits(n))
        {
            name = head;
        } else if let Some((head, _)) = name
            .rsplit_once('-')
            .filter(|(h, d)| h.contains('.') && d.len() >= 8 && digits(d))
        {
            name = head;
        } else {
            return name;
        }
    }
}

/// One input: a file, or a stream (standard input, or a reader).
#[derive(Debug, Clone)]
pub struct Input {
    /// As given (used in messages: `events.jsonl:123`).
    pub display: String,
    /// The file; `None` for a stream.
    pub path: Option<PathBuf>,
    /// What identifies the input in a checkpoint: the canonical absolute path of a file, `-`
    /// for standard input, `reader:<name>` for a reader.
    pub canonical: String,
    /// The file's size when the run started; `None` for a stream.
    pub size_bytes: Option<u64>,
    /// Device and inode of the file (for standard input, of the file it is redirected from,
    /// if it is one): two names of one file are one input.
    pub file_id: Option<(u64, u64)>,
    /// When the file was created, in nanoseconds since the Unix epoch, where its file system
    /// keeps it: tells a file that reuses a deleted one's inode from that file.
    pub born_ns: Option<i64>,
    /// When the file was last modified, in nanoseconds since the Unix epoch, when the run
    /// resolved it.
    pub modified_ns: Option<i64>,
    /// The version of an object when the run listed it (its ETag), which every read of it is
    /// pinned to; `None` for files and streams.
    pub version: Option<String>,
    /// How the file is compressed: as its extension says, else as its first bytes say. `None`
    /// for a stream, whose first bytes are looked at when it is read.
    pub compression: Option<InputCompression>,
    /// An object listed by a glob whose compression is still to be found from its first
    /// bytes ([`Input::find_compression`], once the run knows it reads the object).
    pub(crate) compression_pending: bool,
    /// The reader of [`Input::reader`]; `None` for files and standard input.
    pub(crate) stream: Option<Stream>,
    /// The object of an input on an object store ([`Input::object`]).
    pub(crate) object: Option<Arc<dyn OffsetRead>>,
}

/// An input read from a byte offset by something other than the file system: an object on an
/// object store, with ranged reads ([`Input::object`]).
pub(crate) trait OffsetRead: Send + Sync + std::fmt::Debug {
    /// A blocking reader from byte `from` on. Called from a thread that is not a runtime
    /// worker (the source's reader thread, a blocking task).
    fn open(&self, from: u64) -> io::Result<Box<dyn Read + Send>>;
    /// The first `n` bytes (fewer if it is shorter). Called as [`OffsetRead::open`] is.
    fn first_bytes(&self, n: u64) -> io::Result<Vec<u8>>;
}

/// The reader of an [`Input::reader`], taken by the first read: a stream is read once.
#[derive(Clone)]
pub(crate) struct Stream(Arc<Mutex<Option<Box<dyn Read + Send>>>>);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stream")
    }
}

impl Input {
    /// Resolves an input as a command line names it: `-` is standard input, anything else a
    /// file that must exist.
    pub fn resolve(arg: &str) -> Result<Input> {
        if arg == "-" {
            return Ok(Input::stdin());
        }
        Input::file(arg)
    }

    /// The process's standard input, read once (a job that reads it needs a name).
    pub fn stdin() -> Input {
        Input {
            display: "<stdin>".to_string(),
            path: None,
            canonical: "-".to_string(),
            size_bytes: None,
            file_id: stdin_file_id(),
            born_ns: None,
            modified_ns: None,
            version: None,
            compression: None,
            compression_pending: false,
            stream: None,
            object: None,
        }
    }

    /// A stream read from `reader`, once, like standard input: a job that reads it needs a
    /// name, and a resumed run skips what the job already read of the stream, checking that
    /// it is the same bytes. `name` identifies the stream in the job's checkpoints: a rerun
    /// must give the same.
    pub fn reader(name: impl Into<String>, reader: impl Read + Send + 'static) -> Input {
        let name = name.into();
        Input {
            canonical: format!("reader:{name}"),
            display: name,
            path: None,
            size_bytes: None,
            file_id: None,
            born_ns: None,
            modified_ns: None,
            version: None,
            compression: None,
            compression_pending: false,
            stream: Some(Stream(Arc::new(Mutex::new(Some(Box::new(reader)))))),
            object: None,
        }
    }

    /// What a stream reads from: the reader of [`Input::reader`] (taken: a stream is read
    /// once), or standard input.
    pub(super) fn take_stream(&self) -> Result<Box<dyn Read + Send>> {
        match &self.stream {
            None => Ok(Box::new(io::stdin())),
            Some(Stream(r)) => r
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "input `{}` is a stream that was read already",
                        self.display
                    ))
                }),
        }
    }

    /// A file, which must exist; it is named in messages as given here, and identified in a
    /// checkpoint by its canonical absolute path.
    pub fn file(path: impl AsRef<Path>) -> Result<Input> {
        let path = path.as_ref();
        let arg = path.display().to_string();
        let canonical = path
            .canonicalize()
            .map_err(|e| Error::io("open input", &arg, e))?;
        Input::file_at(&arg, canonical)
    }

    /// The file named `arg`, whose canonical absolute path is `canonical` (the caller resolved
    /// it: a glob resolves each directory once, not each file).
    pub(crate) fn file_at(arg: &str, canonical: PathBuf) -> Result<Input> {
        let meta = std::fs::metadata(&canonical).map_err(|e| Error::io("open input", arg, e))?;
        if !meta.is_file() {
            return Err(Error::InvalidInput(format!("input `{arg}` is not a file")));
        }
        let canonical_str = canonical
            .to_str()
            .ok_or_else(|| Error::InvalidInput(format!("input path `{arg}` is not UTF-8")))?
            .to_string();
        let compression = match InputCompression::from_path(arg) {
            Some(c) => Some(c),
            None => {
                let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
                File::open(&canonical)
                    .and_then(|f| f.take(ZSTD_MAGIC.len() as u64).read_to_end(&mut head))
                    .map_err(|e| Error::io("read input", arg, e))?;
                InputCompression::from_magic(&head)
            }
        };
        Ok(Input {
            display: arg.to_string(),
            path: Some(canonical),
            canonical: canonical_str,
            size_bytes: Some(meta.len()),
            file_id: Some((meta.dev(), meta.ino())),
            born_ns: meta.created().ok().and_then(epoch_ns),
            modified_ns: meta.modified().ok().and_then(epoch_ns),
            version: None,
            compression,
            compression_pending: false,
            stream: None,
            object: None,
        })
    }

    /// An object input (see [`Input::object`]).
    pub(crate) fn from_object(
        url: String,
        size_bytes: u64,
        version: Option<String>,
        compression: Option<InputCompression>,
        object: Arc<dyn OffsetRead>,
    ) -> Input {
        Input {
            display: url.clone(),
            path: None,
            canonical: url,
            size_bytes: Some(size_bytes),
            file_id: None,
            born_ns: None,
            modified_ns: None,
            version,
            compression,
            compression_pending: false,
            stream: None,
            object: Some(object),
        }
    }

    /// Whether this is a stream (standard input or a reader), read once, not a file or an
    /// object.
    pub fn is_stdin(&self) -> bool {
        self.path.is_none() && self.object.is_none()
    }

    /// Whether this is an object of an object store ([`Input::object`]).
    pub fn is_object(&self) -> bool {
        self.object.is_some()
    }
}

/// Device and inode of the file standard input is redirected from, if it is a file.
fn stdin_file_id() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
    let meta = File::from(fd).metadata().ok()?;
    meta.is_file().then(|| (meta.dev(), meta.ino()))
}
