//! Compressed inputs: gzip (one member or several) and zstd, told by extension or by the
//! first bytes ([`InputCompression`]). Positions count decompressed bytes.

use std::io::{self, BufRead, BufReader, Cursor as IoCursor, Read};
use std::path::Path;

use super::{GZIP_MAGIC, ZSTD_MAGIC};

/// How an input is compressed. Positions in a compressed input count decompressed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputCompression {
    /// gzip (`.gz`), one member or several one after the other (as `cat a.gz b.gz` makes).
    Gzip,
    /// Zstandard (`.zst`), one frame or several.
    Zstd,
}

impl InputCompression {
    /// The compression a file name's last extension says (`.gz`, `.gzip`, `.zst`, `.zstd`),
    /// if it says one.
    pub fn from_path(path: &str) -> Option<InputCompression> {
        let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "gz" | "gzip" => Some(InputCompression::Gzip),
            "zst" | "zstd" => Some(InputCompression::Zstd),
            _ => None,
        }
    }

    /// The compression the first bytes of an input say: gzip's `1f 8b`, zstd's `28 b5 2f fd`
    /// (neither can begin a JSON or CSV text).
    pub fn from_magic(first: &[u8]) -> Option<InputCompression> {
        if first.starts_with(GZIP_MAGIC) {
            Some(InputCompression::Gzip)
        } else if first.starts_with(ZSTD_MAGIC) {
            Some(InputCompression::Zstd)
        } else {
            None
        }
    }

    /// `gzip` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            InputCompression::Gzip => "gzip",
            InputCompression::Zstd => "zstd",
        }
    }

    /// The decompressed bytes of `r`.
    pub(super) fn decoder(self, r: impl Read + Send + 'static) -> io::Result<Box<dyn Read + Send>> {
        let inner: Box<dyn Read + Send> = match self {
            InputCompression::Gzip => Box::new(GzipMembers::new(BufReader::new(r))),
            InputCompression::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
        };
        Ok(Box::new(Decompressed {
            inner,
            compression: self,
        }))
    }
}

/// Every member of a gzip stream, one after the other, as `gzip -d` reads them: zero bytes
/// after the last member (the padding some writers and tape tools add) end the stream, as
/// `gzip -t` accepts them; anything else after a member must be another member.
pub(super) struct GzipMembers<R: BufRead> {
    member: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: BufRead> GzipMembers<R> {
    pub(super) fn new(r: R) -> Self {
        GzipMembers {
            member: Some(flate2::bufread::GzDecoder::new(r)),
        }
    }
}

impl<R: BufRead> Read for GzipMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(member) = self.member.as_mut() else {
                return Ok(0);
            };
            if buf.is_empty() {
                return Ok(0);
            }
            let n = member.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // The member ended: another member, zero padding to the end, or the end.
            let mut r = self.member.take().expect("a member").into_inner();
            let mut zeros = 0u64;
            loop {
                let avail = r.fill_buf()?;
                if avail.is_empty() {
                    return Ok(0);
                }
                let z = avail.iter().take_while(|b| **b == 0).count();
                if z == 0 {
                    break;
                }
                zeros += z as u64;
                r.consume(z);
            }
            if zeros > 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{zeros} zero bytes after a member, then more data"),
                ));
            }
            self.member = Some(flate2::bufread::GzDecoder::new(r));
        }
    }
}

/// A decoder whose own errors say that the compressed stream is corrupt or cut short
/// ([`io::ErrorKind::InvalidData`]); errors of the system pass through as they are.
pub(super) struct Decompressed {
    inner: Box<dyn Read + Send>,
    compression: InputCompression,
}

impl Read for Decompressed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted || e.raw_os_error().is_some() {
                return e;
            }
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the {} stream is corrupt or cut short ({e})",
                    self.compression.name()
                ),
            )
        })
    }
}

/// `r`, decompressed if its first bytes are those of a compressed stream. Reads at most the
/// bytes that can still begin one (a plain text is told by its first byte), and hands them on.
pub(super) fn sniffed(mut r: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
    let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
    let mut byte = [0u8; 1];
    let open = |h: &[u8]| {
        [GZIP_MAGIC, ZSTD_MAGIC]
            .iter()
            .any(|m| m.starts_with(h) && h.len() < m.len())
    };
    while open(&head) {
        match r.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => head.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let compression = InputCompression::from_magic(&head);
    let r: Box<dyn Read + Send> = Box::new(IoCursor::new(head).chain(r));
    match compression {
        Some(c) => c.decoder(r),
        None => Ok(r),
    }
}
