//! A plain file input, opened past what the job read of it by a seek, once its identity
//! (device and inode) and its length still hold: the bytes before were checked against their
//! CRC-32C before the run ([`check_read`](super::check_read)).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use std::sync::Arc;
use std::time::Duration;

use super::check::{crc_of_prefix, is_blank, BlankScan};
use super::framing::LastLine;
use super::input::Input;
use super::position::Prefix;
use super::READ_BUFFER_BYTES;
use crate::error::{Error, Result};

/// An input opened past what the job read of it.
pub(super) struct Opened {
    /// Its bytes from the end of `read` on.
    pub(super) reader: Box<dyn BufRead + Send>,
    /// What is read of it, with its CRC-32C (computed here if the position had none).
    pub(super) read: Prefix,
    /// The last byte of `read`, if it has one: a record continued since is refused.
    pub(super) last: Option<u8>,
    /// Whether `read` holds nothing, or white space only (a CSV header is still to come).
    /// Computed only for CSV and for a prefix read again.
    pub(super) blank: bool,
    /// Whether a last record without a line end is taken.
    pub(super) last_line: LastLine,
}

/// The plain file `input` past `read`; with `csv`, also whether its header is still to come.
/// Its last record is taken without a line end once the file was unchanged for `settle`.
pub(super) fn open_past(
    input: &Input,
    mut read: Prefix,
    csv: bool,
    settle: Duration,
) -> Result<Opened> {
    let open_err = |e: io::Error| Error::io("open input", &input.display, e);
    let path = input.path.as_ref().expect("a plain file");
    let mut file = File::open(path).map_err(open_err)?;
    let meta = file.metadata().map_err(open_err)?;
    if input.file_id != Some((meta.dev(), meta.ino())) || meta.len() < read.offset {
        return Err(Error::InputChanged(format!(
            "input `{}` changed while the job ran: it was replaced or cut short",
            input.display
        )));
    }
    let mut blank = read.offset == 0;
    let last = match read.crc32c {
        Some(_) if read.offset == 0 => None,
        Some(_) => {
            if csv {
                // Whether the header is still to come.
                blank = is_blank(&mut (&mut file).take(read.offset)).map_err(open_err)?;
            }
            // Checked against the file by `check_read` before the run; the last byte
            // again, for a line continued since (`continues_last_record`).
            file.seek(SeekFrom::Start(read.offset - 1))
                .map_err(open_err)?;
            let mut last = [0u8; 1];
            file.read_exact(&mut last).map_err(open_err)?;
            Some(last[0])
        }
        None => {
            // A position that did not record a checksum: read the bytes to compute it.
            let mut at = 0;
            blank = true;
            let mut scan = BlankScan {
                inner: &mut file,
                blank: &mut blank,
                at: &mut at,
            };
            let (crc, newlines, n, last) =
                crc_of_prefix(&mut scan, read.offset).map_err(open_err)?;
            if n < read.offset {
                return Err(Error::InputChanged(format!(
                    "input `{}` changed while the job ran: it was cut short",
                    input.display
                )));
            }
            read = Prefix {
                offset: read.offset,
                line: 1 + newlines,
                crc32c: Some(crc),
            };
            last
        }
    };
    let last_line = LastLine::Settled {
        file: Arc::new(file.try_clone().map_err(open_err)?),
        settle,
    };
    Ok(Opened {
        reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, file)),
        read,
        last,
        blank,
        last_line,
    })
}

/// The plain files among `inputs` whose bytes past what is read of them (`read`) are one
/// record without its end (a line without a line end; in CSV, with `csv`, also one inside a
/// quoted field): a last record the line-end rule left for a later run ([`LastLine`]).
/// Named as given.
pub(crate) fn unended(inputs: &[Input], read: &[Prefix], csv: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (input, p) in inputs.iter().zip(read) {
        let (Some(path), None, false) = (&input.path, input.compression, input.is_object()) else {
            continue;
        };
        let Ok(mut file) = File::open(path) else {
            continue;
        };
        let len = file.metadata().map_or(0, |m| m.len());
        if len <= p.offset || file.seek(SeekFrom::Start(p.offset)).is_err() {
            continue;
        }
        let mut rest = Vec::new();
        let limit = super::RECORD_BYTES_MAX + 1;
        if (&mut file).take(limit).read_to_end(&mut rest).is_err() {
            continue;
        }
        let open_quote = csv && rest.iter().filter(|&&b| b == b'"').count() % 2 == 1;
        if !rest.contains(&b'\n') || open_quote {
            out.push(input.display.clone());
        }
    }
    out
}
