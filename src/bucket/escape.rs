//! Percent-escaping of partition column names and values into directory-name-safe strings.
//!
//! [`escape_path_component`] follows Hive's `FileUtils.escapePathName` and is stricter: it also
//! escapes `<`, `>` and `|`, which Windows does not allow in file names. Every escaped byte becomes
//! `%XX` with two uppercase hex digits. Non-ASCII UTF-8 text is kept as it is.
//!
//! The escaping is injective: [`unescape_path_component`] undoes it exactly, so two different
//! inputs never give the same output. Because `%` itself is escaped, an output can only contain
//! `%` as the start of an escape sequence. Because `/`, `\`, NUL and `=` are escaped, an output is
//! never more than one path component and never splits a `col=value` pair in the wrong place.
//!
//! The one string that is not escaped in the plain way is [`HIVE_DEFAULT_PARTITION`] itself: it is
//! the marker readers use for a null value, so a real string with that text has its first `_`
//! escaped as `%5F`. An output of [`escape_path_component`] is therefore never equal to the null
//! marker.

/// The directory value Hive, Spark, pyarrow and DuckDB read as a null partition value.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The length in bytes of [`escape_path_component`]`(s)`, without making it.
pub(crate) fn escaped_len(s: &[u8]) -> usize {
    if s == HIVE_DEFAULT_PARTITION.as_bytes() {
        return s.len() + 2;
    }
    s.len() + 2 * s.iter().filter(|&&b| needs_escape(b)).count()
}

/// Whether `b` must be written as `%XX` in a path component.
fn needs_escape(b: u8) -> bool {
    matches!(
        b,
        0x00..=0x1F
            | 0x7F
            | b'"'
            | b'#'
            | b'%'
            | b'\''
            | b'*'
            | b'/'
            | b':'
            | b'='
            | b'?'
            | b'\\'
            | b'{'
            | b'['
            | b']'
            | b'^'
            | b'<'
            | b'>'
            | b'|'
    )
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_escaped(out: &mut String, b: u8) {
    out.push('%');
    out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
    out.push(char::from(HEX_UPPER[usize::from(b & 0x0F)]));
}

/// Escapes `s` so it can be used inside one path component, Hive style.
///
/// Control characters (0x00-0x1F, 0x7F) and each of `"#%'*/:=?\{[]^<>|` become `%XX` (uppercase
/// hex). Everything else, including non-ASCII UTF-8, is kept. A string equal to
/// [`HIVE_DEFAULT_PARTITION`] gets its first character escaped (`%5F_HIVE_DEFAULT_PARTITION__`) so
/// it cannot be mistaken for a null. The empty string stays empty.
///
/// [`unescape_path_component`] is the exact inverse.
///
/// ```
/// use filesink::bucket::escape::{escape_path_component, unescape_path_component};
///
/// assert_eq!(escape_path_component("a/b=c"), "a%2Fb%3Dc");
/// assert_eq!(escape_path_component(".."), "..");
/// assert_eq!(unescape_path_component("a%2Fb%3Dc").unwrap(), "a/b=c");
/// ```
pub fn escape_path_component(s: &str) -> String {
    if s == HIVE_DEFAULT_PARTITION {
        let mut out = String::with_capacity(s.len() + 2);
        push_escaped(&mut out, b'_');
        out.push_str(&s[1..]);
        return out;
    }
    let extra = s.bytes().filter(|&b| needs_escape(b)).count();
    if extra == 0 {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 2 * extra);
    for c in s.chars() {
        // Every byte that needs escaping is ASCII, so it is a whole `char`.
        match u8::try_from(c) {
            Ok(b) if needs_escape(b) => push_escaped(&mut out, b),
            _ => out.push(c),
        }
    }
    out
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// Undoes [`escape_path_component`]: every `%XX` (hex, either case) becomes the byte `XX`.
///
/// Errors with [`crate::Error::InvalidInput`] when a `%` is not followed by two hex digits or the
/// decoded bytes are not UTF-8. It does not know about nulls: check for
/// [`HIVE_DEFAULT_PARTITION`] before calling it.
pub fn unescape_path_component(s: &str) -> crate::Result<String> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        let hi = bytes.get(i + 1).copied().and_then(hex_value);
        let lo = bytes.get(i + 2).copied().and_then(hex_value);
        match (hi, lo) {
            (Some(hi), Some(lo)) => {
                out.push((hi << 4) | lo);
                i += 3;
            }
            _ => {
                return Err(crate::Error::InvalidInput(format!(
                    "malformed escape sequence at byte {i} of path component {:?}: '%' must be followed by two hex digits",
                    super::truncate_for_message(s)
                )))
            }
        }
    }
    String::from_utf8(out).map_err(|_| {
        crate::Error::InvalidInput(format!(
            "path component {:?} does not unescape to utf-8",
            super::truncate_for_message(s)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(s: &str) {
        let e = escape_path_component(s);
        assert_eq!(escaped_len(s.as_bytes()), e.len(), "{s:?}");
        assert_eq!(unescape_path_component(&e).unwrap(), s, "escaped as {e:?}");
    }

    #[test]
    fn escapes_hive_specials_in_uppercase_hex() {
        assert_eq!(escape_path_component("a/b"), "a%2Fb");
        assert_eq!(escape_path_component("k=v"), "k%3Dv");
        assert_eq!(escape_path_component("%2F"), "%252F");
        assert_eq!(escape_path_component("\0"), "%00");
        assert_eq!(escape_path_component("\x1f\x7f"), "%1F%7F");
        assert_eq!(escape_path_component("\\"), "%5C");
        assert_eq!(
            escape_path_component("\"#%'*/:=?\\{[]^<>|"),
            "%22%23%25%27%2A%2F%3A%3D%3F%5C%7B%5B%5D%5E%3C%3E%7C"
        );
        assert_eq!(escape_path_component("\n\t"), "%0A%09");
    }

    #[test]
    fn keeps_ordinary_text_and_unicode() {
        assert_eq!(escape_path_component("hello world"), "hello world");
        assert_eq!(escape_path_component("grüße/東京"), "grüße%2F東京");
        assert_eq!(escape_path_component("🦀"), "🦀");
        assert_eq!(escape_path_component(""), "");
        assert_eq!(escape_path_component(".."), "..");
        assert_eq!(escape_path_component("}"), "}");
    }

    #[test]
    fn null_marker_never_produced() {
        let e = escape_path_component(HIVE_DEFAULT_PARTITION);
        assert_eq!(e, "%5F_HIVE_DEFAULT_PARTITION__");
        assert_ne!(e, HIVE_DEFAULT_PARTITION);
        round_trip(HIVE_DEFAULT_PARTITION);
        // Near misses are escaped normally.
        assert_eq!(
            escape_path_component("__HIVE_DEFAULT_PARTITION__x"),
            "__HIVE_DEFAULT_PARTITION__x"
        );
    }

    #[test]
    fn round_trips_hostile_values() {
        for s in [
            "",
            ".",
            "..",
            "../",
            "../../etc",
            "/",
            "a/b",
            "\0",
            "=",
            "%",
            "%2F",
            "%%",
            "%5F_HIVE_DEFAULT_PARTITION__",
            HIVE_DEFAULT_PARTITION,
            "C:\\Windows",
            "ünïcödé 東京 🦀",
        ] {
            round_trip(s);
        }
    }

    #[test]
    fn unescape_accepts_lowercase_and_rejects_malformed() {
        assert_eq!(unescape_path_component("a%2fb").unwrap(), "a/b");
        assert_eq!(unescape_path_component("plain").unwrap(), "plain");
        for bad in ["%", "%2", "%zz", "a%g0", "%C3"] {
            let err = unescape_path_component(bad).unwrap_err();
            assert!(
                matches!(err, crate::Error::InvalidInput(_)),
                "{bad:?} gave {err:?}"
            );
        }
        // A multi-byte character split over escapes is fine when complete.
        assert_eq!(unescape_path_component("%C3%BC").unwrap(), "ü");
    }

    #[test]
    fn escaped_output_has_no_separator_or_nul() {
        let mut all = String::new();
        for b in 0u8..=0x7F {
            all.push(char::from(b));
        }
        let e = escape_path_component(&all);
        assert!(!e.contains(['/', '\\', '\0', '=', ':']));
        round_trip(&all);
    }
}
