//! Measurement 2: the file system's syscall floor for the same files.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use filesink::storage::local::fs::{rename_noreplace, sync_dir as fsync_dir};

use super::payload::payload_bytes;
use super::report::{Floor, Percentiles};
use super::work::Progress;
use super::{BenchArgs, BoxError};

/// Measurement 2: the same number of files of `file_bytes` with nothing but system calls,
/// `group` files at a time (1: one file at a time, each with its own directory fsync).
pub(super) fn floor(
    args: &BenchArgs,
    dir: &Path,
    group: u64,
    file_bytes: u64,
) -> Result<Floor, BoxError> {
    let partition_dirs: Vec<PathBuf> = (0..args.partitions)
        .map(|p| dir.join(format!("part={p}")))
        .collect();
    for d in &partition_dirs {
        std::fs::create_dir_all(d)?;
    }
    fsync_dir(dir)?;
    let data = payload_bytes(file_bytes as usize);
    let label = if group == 1 {
        "syscall floor, one file at a time".to_string()
    } else {
        format!("syscall floor, {group} files per group")
    };
    let progress = Progress::start(&label, args.files);
    let mut latencies = Vec::new();
    let mut files = 0u64;
    let start = Instant::now();
    while files < args.files {
        let n = group.min(args.files - files);
        let paths: Vec<(PathBuf, PathBuf, usize)> = (files..files + n)
            .map(|i| {
                let p = (i % args.partitions) as usize;
                let d = &partition_dirs[p];
                (
                    d.join(format!(".part-{i}.tmp")),
                    d.join(format!("part-{i}")),
                    p,
                )
            })
            .collect();
        let t0 = Instant::now();
        if group == 1 {
            let (hidden, name, p) = &paths[0];
            let mut f = create_new(hidden)?;
            f.write_all(&data)?;
            f.sync_data()?;
            drop(f);
            rename_noreplace(hidden, name)?;
            fsync_dir(&partition_dirs[*p])?;
        } else {
            // As the sink does: write every file, then fdatasync them.
            let mut open = Vec::with_capacity(paths.len());
            for (hidden, _, _) in &paths {
                let mut f = create_new(hidden)?;
                f.write_all(&data)?;
                open.push(f);
            }
            for f in &open {
                f.sync_data()?;
            }
            drop(open);
            let mut touched: Vec<usize> = paths.iter().map(|(_, _, p)| *p).collect();
            touched.sort_unstable();
            touched.dedup();
            for &p in &touched {
                fsync_dir(&partition_dirs[p])?;
            }
            for (hidden, name, _) in &paths {
                rename_noreplace(hidden, name)?;
            }
            for &p in &touched {
                fsync_dir(&partition_dirs[p])?;
            }
        }
        latencies.push(t0.elapsed());
        files += n;
        progress.advance(n);
    }
    let seconds = start.elapsed().as_secs_f64();
    progress.finish(&format!("{:.0} files/s", files as f64 / seconds));
    Ok(Floor {
        files,
        files_per_group: group,
        seconds,
        files_per_sec: files as f64 / seconds,
        mb_per_sec: (files * file_bytes) as f64 / seconds / 1e6,
        latency_ms: Percentiles::of(latencies),
    })
}

pub(super) fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// The file system type of `path`, from `statfs` (Linux), for the report.
pub(super) fn file_system_name(path: &Path) -> String {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        if let Ok(p) = CString::new(path.as_os_str().as_bytes()) {
            // SAFETY: `p` is a valid NUL-terminated string and `st` a valid out-pointer.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            if unsafe { libc::statfs(p.as_ptr(), &mut st) } == 0 {
                #[allow(clippy::unnecessary_cast)]
                let magic = st.f_type as u64;
                return match magic {
                    0xEF53 => "ext4".to_string(),
                    0x5846_5342 => "xfs".to_string(),
                    0x9123_683E => "btrfs".to_string(),
                    0x0102_1994 => "tmpfs".to_string(),
                    0x794C_7630 => "overlayfs".to_string(),
                    0x2FC1_2FC1 => "zfs".to_string(),
                    0x6969 => "nfs".to_string(),
                    0xFF53_4D42 => "cifs".to_string(),
                    0x6573_5546 => "fuse".to_string(),
                    0xF2F5_2010 => "f2fs".to_string(),
                    other => format!("file system 0x{other:x}"),
                };
            }
        }
    }
    let _ = path;
    "unknown file system".to_string()
}
