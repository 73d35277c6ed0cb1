//! A compressed file, or an object of an object store, opened past what the job read of it:
//! a compressed stream cannot be sought into, so the prefix is decompressed (an object's read)
//! again from the start, and checked against its CRC-32C on the way (the check before the run,
//! [`check_read`](super::check_read), read it too).

use std::io;

use super::check::{crc_of_prefix, BlankScan};
use super::file::Opened;
use super::framing::LastLine;
use super::input::{open_file, Input};
use super::position::Prefix;
use crate::error::{Error, Result};

/// The compressed file or object `input` past `read`.
pub(super) fn open_past(input: &Input, mut read: Prefix) -> Result<Opened> {
    let open_err = |e: io::Error| Error::io("open input", &input.display, e);
    let (mut reader, file_id) = open_file(input).map_err(open_err)?;
    let changed = || {
        Error::InputChanged(format!(
            "input `{}` changed while the job ran: it was replaced, edited or cut short",
            input.display
        ))
    };
    if input.file_id != file_id {
        return Err(changed());
    }
    let (mut blank, mut at) = (true, 0);
    let mut scan = BlankScan {
        inner: &mut reader,
        blank: &mut blank,
        at: &mut at,
    };
    let (crc, newlines, n, last) = crc_of_prefix(&mut scan, read.offset).map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidData {
            changed()
        } else {
            Error::io("read input", &input.display, e)
        }
    })?;
    if n < read.offset || read.crc32c.is_some_and(|want| want != crc) {
        return Err(changed());
    }
    if read.crc32c.is_none() {
        read = Prefix {
            offset: read.offset,
            line: 1 + newlines,
            crc32c: Some(crc),
        };
    }
    // A compressed stream or an object is read to its end: complete.
    Ok(Opened {
        reader,
        read,
        last,
        blank,
        last_line: LastLine::Taken,
    })
}
