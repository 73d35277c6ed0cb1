//! Small helpers shared by the commands: argument parsers (durations, sizes, job names) and
//! human formatting of bytes, ages and times.

use std::time::Duration;

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
