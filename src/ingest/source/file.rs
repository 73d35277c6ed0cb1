//! A plain file input, opened past what the job read of it by a seek, once its identity
//! (device and inode) and its length still hold: the bytes before were checked against their
//! CRC-32C before the run ([`check_read`](super::check_read)).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use super::check::{crc_of_prefix, is_blank, BlankScan};
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
}

/// The plain file `input` past `read`; with `csv`, also whether its header is still to come.
pub(super) fn open_past(input: &Input, mut read: Prefix, csv: bool) -> Result<Opened> {
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
    Ok(Opened {
        reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, file)),
        read,
        last,
        blank,
    })
}
