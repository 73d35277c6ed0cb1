//! Small helpers shared by the commands: argument parsers (durations, sizes, job names, row
//! counts, Parquet codecs) and human formatting of bytes, ages and times.

use std::time::Duration;

use parquet::basic::{Compression, GzipLevel, ZstdLevel};

/// Parses a duration: a number and a unit, `ms`, `s`, `m`, `h` or `d` (`200ms`, `10s`,
/// `1.5h`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .ok_or_else(|| format!("`{s}` has no unit: write e.g. 200ms, 10s, 5m, 1h or 2d"))?;
    let (num, unit) = s.split_at(split);
    let num: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: write e.g. 200ms, 10s, 5m, 1h or 2d"))?;
    let secs = match unit.trim() {
        "ms" => num / 1000.0,
        "s" | "sec" | "secs" => num,
        "m" | "min" | "mins" => num * 60.0,
        "h" => num * 3600.0,
        "d" => num * 86400.0,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{s}`: use ms, s, m, h or d"
            ))
        }
    };
    if !(0.0..=1e12).contains(&secs) {
        return Err(format!("duration `{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a size in bytes: a number with an optional unit, `B`, `KB`, `MB`, `GB` (powers of
/// 1000) or `KiB`, `MiB`, `GiB` (powers of 1024): `64MiB`, `1GB`, `4096`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}` is not a size: write e.g. 64MiB, 1GB or 4096"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        "tib" | "t" => 1024.0f64.powi(4),
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{s}`: use B, KB, MB, GB, KiB, MiB or GiB"
            ))
        }
    };
    let bytes = (num * mult).round();
    if !(1.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("size `{s}` must be at least 1 byte"));
    }
    Ok(bytes as u64)
}

pub use filesink::ingest::CheckpointEvery;

/// Parses `--checkpoint-every`: `100000rows` or a duration (`200ms`, `10s`).
pub fn parse_checkpoint_every(s: &str) -> Result<CheckpointEvery, String> {
    let t = s.trim();
    if let Some(n) = t.strip_suffix("rows").or_else(|| t.strip_suffix("row")) {
        let n: u64 = n
            .trim()
            .replace('_', "")
            .parse()
            .map_err(|_| format!("`{s}` is not a row count: write e.g. 100000rows"))?;
        if n == 0 {
            return Err("the checkpoint interval must be at least 1 row".into());
        }
        return Ok(CheckpointEvery::Rows(n));
    }
    let d = parse_duration(t).map_err(|e| format!("{e} (or a row count like 100000rows)"))?;
    if d.is_zero() {
        return Err("the checkpoint interval must be positive".into());
    }
    Ok(CheckpointEvery::Interval(d))
}

/// Parses a positive row count (`100000`, `100_000`).
pub fn parse_rows(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}` is not a row count: write a whole number, e.g. 100000"))?;
    if n == 0 {
        return Err("the row count must be at least 1".into());
    }
    Ok(n)
}

/// The zstd levels `--compression zstd=LEVEL` takes.
const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;
/// The gzip levels `--compression gzip=LEVEL` takes.
const GZIP_LEVELS: std::ops::RangeInclusive<u32> = 0..=9;

/// Parses a Parquet codec: `snappy`, `zstd[=LEVEL]` (1 to 22, default 3), `gzip[=LEVEL]` (0 to
/// 9, default 6), `lz4` (Parquet's `LZ4_RAW`) or `none`.
pub fn parse_compression(s: &str) -> Result<Compression, String> {
    const CODECS: &str = "snappy, zstd[=1..22], gzip[=0..9], lz4 or none";
    let t = s.trim().to_ascii_lowercase();
    let (name, level) = match t.split_once('=') {
        Some((n, l)) => (n.trim(), Some(l.trim())),
        None => (t.as_str(), None),
    };
    let bad_level =
        |range: String| format!("`{s}`: the {name} level must be a whole number from {range}",);
    let c = match name {
        "snappy" | "none" | "uncompressed" | "lz4" if level.is_some() => {
            return Err(format!("`{s}`: {name} takes no level"));
        }
        "snappy" => Compression::SNAPPY,
        "none" | "uncompressed" => Compression::UNCOMPRESSED,
        "lz4" => Compression::LZ4_RAW,
        "zstd" => {
            let range = || format!("{} to {}", ZSTD_LEVELS.start(), ZSTD_LEVELS.end());
            let level = match level {
                None => 3,
                Some(l) => l
                    .parse::<i32>()
                    .ok()
                    .filter(|l| ZSTD_LEVELS.contains(l))
                    .ok_or_else(|| bad_level(range()))?,
            };
            Compression::ZSTD(ZstdLevel::try_new(level).map_err(|_| bad_level(range()))?)
        }
        "gzip" => {
            let range = || format!("{} to {}", GZIP_LEVELS.start(), GZIP_LEVELS.end());
            let level = match level {
                None => 6,
                Some(l) => l
                    .parse::<u32>()
                    .ok()
                    .filter(|l| GZIP_LEVELS.contains(l))
                    .ok_or_else(|| bad_level(range()))?,
            };
            Compression::GZIP(GzipLevel::try_new(level).map_err(|_| bad_level(range()))?)
        }
        _ => return Err(format!("unknown codec `{s}`: use {CODECS}")),
    };
    Ok(c)
}

/// A Parquet codec as `--compression` spells it: `snappy`, `zstd=3`, `gzip=6`, `lz4`, `none`.
pub fn compression_name(c: Compression) -> String {
    match c {
        Compression::UNCOMPRESSED => "none".into(),
        Compression::SNAPPY => "snappy".into(),
        Compression::ZSTD(l) => format!("zstd={}", l.compression_level()),
        Compression::GZIP(l) => format!("gzip={}", l.compression_level()),
        Compression::LZ4_RAW => "lz4".into(),
        other => other.to_string().to_ascii_lowercase(),
    }
}

/// Checks a job name: 1 to 48 ASCII letters, digits or `_` (what the coordinator accepts).
pub fn parse_job(s: &str) -> Result<String, String> {
    match filesink::protocol::validate_job_name(s) {
        Ok(()) => Ok(s.to_string()),
        Err(filesink::Error::Config(msg)) => Err(msg),
        Err(e) => Err(e.to_string()),
    }
}

/// `1.5 MiB`, `12 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = "B";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// An age in milliseconds as `850ms`, `42s`, `5m`, `3h`, `2d`.
pub fn human_age(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else if ms < 3_600_000 {
        format!("{}m", ms / 60_000)
    } else if ms < 86_400_000 {
        format!("{}h", ms / 3_600_000)
    } else {
        format!("{}d", ms / 86_400_000)
    }
}

/// A time in milliseconds since the Unix epoch as `2026-11-30 02:40:12 UTC`.
pub fn human_time(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        None => format!("{ms} ms since the epoch"),
    }
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172800));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("10 parsecs").is_err());
    }

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 furlongs").is_err());
    }

    #[test]
    fn checkpoint_every_takes_rows_or_durations() {
        assert_eq!(
            parse_checkpoint_every("100000rows").unwrap(),
            CheckpointEvery::Rows(100000)
        );
        assert_eq!(
            parse_checkpoint_every("500 rows").unwrap(),
            CheckpointEvery::Rows(500)
        );
        assert_eq!(
            parse_checkpoint_every("200ms").unwrap(),
            CheckpointEvery::Interval(Duration::from_millis(200))
        );
        assert!(parse_checkpoint_every("0rows").is_err());
        assert!(parse_checkpoint_every("often").is_err());
    }

    #[test]
    fn codecs_parse_with_levels() {
        assert_eq!(parse_compression("snappy").unwrap(), Compression::SNAPPY);
        assert_eq!(
            parse_compression("none").unwrap(),
            Compression::UNCOMPRESSED
        );
        assert_eq!(parse_compression("LZ4").unwrap(), Compression::LZ4_RAW);
        assert_eq!(
            parse_compression("zstd").unwrap(),
            Compression::ZSTD(ZstdLevel::try_new(3).unwrap())
        );
        assert_eq!(
            parse_compression("zstd=19").unwrap(),
            Compression::ZSTD(ZstdLevel::try_new(19).unwrap())
        );
        assert_eq!(
            parse_compression("gzip=9").unwrap(),
            Compression::GZIP(GzipLevel::try_new(9).unwrap())
        );
        for bad in [
            "brotli", "zstd=0", "zstd=23", "zstd=x", "gzip=10", "snappy=1", "",
        ] {
            assert!(parse_compression(bad).is_err(), "{bad}");
        }
        for name in ["snappy", "none", "lz4", "zstd=3", "gzip=6"] {
            assert_eq!(compression_name(parse_compression(name).unwrap()), name);
        }
    }

    #[test]
    fn row_counts_are_positive() {
        assert_eq!(parse_rows("100_000").unwrap(), 100_000);
        assert!(parse_rows("0").is_err());
        assert!(parse_rows("-5").is_err());
        assert!(parse_rows("1k").is_err());
    }

    #[test]
    fn job_names_are_checked() {
        assert!(parse_job("events_1a2b3c4d").is_ok());
        assert!(parse_job("").is_err());
        assert!(parse_job("a-b").is_err());
        assert!(parse_job(&"x".repeat(49)).is_err());
    }

    #[test]
    fn human_formats() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_age(42_000), "42s");
        assert_eq!(human_age(7_200_000), "2h");
    }
}
