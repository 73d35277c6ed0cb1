//! Input identity across runs: each input checked against the [`Prefix`](super::Prefix) a
//! job read of it ([`check_read`]), before a resumed run reads on. A file or object whose first
//! bytes differ, or that is shorter, changed under the job; one that only grew is read on. A
//! stream cannot be checked beforehand: its skipped bytes are compared as they are skipped
//! ([`skip_prefix`]).

use std::fs::File;
use std::io::{self, BufRead, Read};

use super::input::{open_file, Input};
use super::position::Prefix;
use super::{BYTE_ORDER_MARK, READ_BUFFER_BYTES};
use crate::error::{Error, Result};

/// CRC-32C and number of line ends of the first `len` bytes of `r`, how many bytes there
/// were (fewer than `len` if it ends sooner), and the last of them.
pub(super) fn crc_of_prefix(
    r: &mut impl Read,
    len: u64,
) -> io::Result<(u32, u64, u64, Option<u8>)> {
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let (mut crc, mut newlines, mut n) = (0u32, 0u64, 0u64);
    let mut last = None;
    while n < len {
        let want = (len - n).min(buf.len() as u64) as usize;
        let got = match r.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        crc = crc32c::crc32c_append(crc, &buf[..got]);
        newlines += buf[..got].iter().filter(|&&b| b == b'\n').count() as u64;
        n += got as u64;
        last = Some(buf[got - 1]);
    }
    Ok((crc, newlines, n, last))
}

/// The error for a stream (`what`) that does not begin with the `read` bytes a job read.
pub(super) fn stream_differs(what: &str, read: u64) -> Error {
    Error::InputChanged(format!(
        "{what} is not what the job read before: the job already read {read} bytes of it, and \
         the first bytes now differ or end sooner; feed it the same input again, or use \
         another --job for this one"
    ))
}

/// What the first bytes of a stream are, against the prefix a job read of it
/// ([`StdinRecords::start_after`](super::StdinRecords::start_after)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skipped {
    /// The same bytes: records are read on after them; `true` if they hold nothing but
    /// white space (and a byte order mark), so no CSV header either.
    Same(Prefix, bool),
    /// No bytes at all.
    Empty,
    /// Other bytes, or fewer.
    Differs,
    /// The same bytes, the last of them not a line end, and the stream goes on with the same
    /// line ([`continues_last_record`]).
    Continued,
}

/// Reads the first `want.offset` bytes of `r` and compares them with what a job read
/// ([`Skipped`]); `r` then stands after them.
pub(super) fn skip_prefix(r: &mut impl BufRead, want: Prefix) -> io::Result<Skipped> {
    let mut blank = true;
    let mut at = 0u64;
    let mut seen = BlankScan {
        inner: &mut *r,
        blank: &mut blank,
        at: &mut at,
    };
    let (crc, _, n, last) = crc_of_prefix(&mut seen, want.offset)?;
    if n == 0 {
        return Ok(Skipped::Empty);
    }
    if n < want.offset || want.crc32c.is_some_and(|c| c != crc) {
        return Ok(Skipped::Differs);
    }
    let next = loop {
        match r.fill_buf() {
            Ok(b) => break b.first().copied(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    let read = Prefix {
        offset: want.offset,
        line: want.line,
        crc32c: Some(crc),
    };
    if continues_last_record(&read, last, next) {
        return Ok(Skipped::Continued);
    }
    Ok(Skipped::Same(read, blank))
}

/// Whether `r` holds only white space (after a byte order mark at its start): reads up to
/// its first other byte, so a prefix that holds a CSV header is decided at once.
pub(super) fn is_blank(r: &mut impl Read) -> io::Result<bool> {
    let (mut blank, mut at) = (true, 0);
    let mut scan = BlankScan {
        inner: r,
        blank: &mut blank,
        at: &mut at,
    };
    let mut buf = [0u8; 4096];
    while *scan.blank {
        match scan.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(blank)
}

/// A reader that notes whether what was read through it is only white space, after a byte
/// order mark at its start ([`skip_prefix`]).
pub(super) struct BlankScan<'a, R> {
    pub(super) inner: &'a mut R,
    pub(super) blank: &'a mut bool,
    /// Bytes read so far.
    pub(super) at: &'a mut u64,
}

impl<R: Read> Read for BlankScan<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for (k, b) in buf[..n].iter().enumerate() {
            let pos = *self.at + k as u64;
            let in_mark = pos < BYTE_ORDER_MARK.len() as u64 && BYTE_ORDER_MARK[pos as usize] == *b;
            if !b.is_ascii_whitespace() && !in_mark {
                *self.blank = false;
            }
        }
        *self.at += n as u64;
        Ok(n)
    }
}

/// Whether an input whose first bytes a job read, the last of them `last`, continues the
/// record the job read last, when its next byte is `next`: that record then ended the input
/// without a line end (a file still being written), the job wrote it as it was, and the rest
/// of its line has come since. Reading on would make a second record of that rest. A line
/// end first (`\n`, or `\r` of `\r\n`) only ends the record the job read. `read` is what
/// the job read: a byte order mark alone (a file its writer began with the mark) holds no
/// record, so whatever follows is a line of its own.
pub(super) fn continues_last_record(read: &Prefix, last: Option<u8>, next: Option<u8>) -> bool {
    let mark_only = read.offset == BYTE_ORDER_MARK.len() as u64
        && read.crc32c == Some(crc32c::crc32c(BYTE_ORDER_MARK));
    !mark_only
        && matches!((last, next), (Some(l), Some(n)) if l != b'\n' && n != b'\n' && n != b'\r')
}

/// What [`Error::InputChanged`] says of an input that [`continues_last_record`].
pub(super) const CONTINUED: &str =
    "its last line had no line end when it was taken (as the last line of a complete input, \
    or of a file unchanged for --settle), and what was added since continues that line; \
    reading on would split the record in two. Mend that record in the lake by hand, and give \
    the rest a name of its own";

/// Checks that every input file still begins with the bytes `job` read of it (`read`, one
/// prefix per input): at least as long, and the same CRC-32C over those bytes. Returns, per
/// input, whether it grew beyond them (always `false` for standard input, which is checked
/// as it is read again, and for a prefix without a checksum).
///
/// A compressed input is checked over its decompressed bytes: its prefix is decompressed, and
/// one byte more to tell whether it grew.
///
/// An input that changed is refused with [`Error::InputChanged`], naming it.
pub fn check_read(job: &str, inputs: &[Input], read: &[Prefix]) -> Result<Vec<bool>> {
    let mut grew = Vec::with_capacity(inputs.len());
    for (input, p) in inputs.iter().zip(read) {
        if input.is_stdin() {
            grew.push(false);
            continue;
        }
        let open_err = |e: io::Error| Error::io("read input", &input.display, e);
        let changed = |how: String| {
            Error::InputChanged(format!(
                "input `{}` changed since job `{job}` read it: {how}; nothing was written. \
                 Put the original back to read on, or give the new content a name of its \
                 own: the lake keeps what it took of this one",
                input.display
            ))
        };
        if input.compression.is_some() || input.is_object() {
            grew.push(check_compressed(input, p, &changed)?);
            continue;
        }
        let path = input.path.as_ref().expect("a file");
        let mut file = File::open(path).map_err(open_err)?;
        let len = file.metadata().map_err(open_err)?.len();
        if len < p.offset {
            return Err(changed(format!(
                "it has {len} bytes, and the job already read {}",
                p.offset
            )));
        }
        if let Some(want) = p.crc32c {
            let (crc, _, n, last) = crc_of_prefix(&mut file, p.offset).map_err(open_err)?;
            if n < p.offset {
                return Err(changed(format!(
                    "it has {n} bytes, and the job already read {}",
                    p.offset
                )));
            }
            if crc != want {
                return Err(changed(format!(
                    "its first {} bytes, which the job already read, are not the same",
                    p.offset
                )));
            }
            let mut next = [0u8; 1];
            let next = match file.read(&mut next).map_err(open_err)? {
                0 => None,
                _ => Some(next[0]),
            };
            if continues_last_record(p, last, next) {
                return Err(changed(CONTINUED.into()));
            }
        }
        grew.push(len > p.offset && p.crc32c.is_some());
    }
    Ok(grew)
}

/// [`check_read`] of one compressed input: whether it grew beyond `p`.
pub(super) fn check_compressed(
    input: &Input,
    p: &Prefix,
    changed: &dyn Fn(String) -> Error,
) -> Result<bool> {
    let (mut reader, _) =
        open_file(input).map_err(|e| Error::io("open input", &input.display, e))?;
    let read_err = |e: io::Error| Error::io("read input", &input.display, e);
    let (crc, _, n, last) = crc_of_prefix(&mut reader, p.offset).map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidData {
            changed(format!(
                "the first {} bytes once decompressed, which the job already read, cannot be \
                 read again: {e}",
                p.offset
            ))
        } else {
            read_err(e)
        }
    })?;
    if n < p.offset {
        return Err(changed(format!(
            "it has {n} bytes once decompressed, and the job already read {}",
            p.offset
        )));
    }
    match p.crc32c {
        Some(want) if crc != want => Err(changed(format!(
            "its first {} bytes once decompressed, which the job already read, are not the same",
            p.offset
        ))),
        Some(_) => {
            let next = reader.fill_buf().map_err(read_err)?.first().copied();
            if continues_last_record(p, last, next) {
                return Err(changed(CONTINUED.into()));
            }
            Ok(next.is_some())
        }
        None => Ok(false),
    }
}
