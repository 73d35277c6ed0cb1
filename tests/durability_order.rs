//! The durability order, observed in the real system calls: the test runs a small job in a
//! child process under `strace` and checks, for every committed file, that
//!
//! 1. its data was fsynced, and the directory entry that reaches it too, before
//!    `prepare_commit` returned (the handle left the writer);
//! 2. it was renamed with `RENAME_NOREPLACE` only after that;
//! 3. its directory was fsynced after the rename, once per directory per commit call.
//!
//! A job of more partitions than `RealFs::SYNCFS_GROUP_MIN` on a disk whose `syncfs` answers
//! as exactly as `fsync` (ext4, XFS, btrfs on Linux 5.17+) flushes its groups with one
//! `syncfs` instead: there a `syncfs` after the file's last write, followed by the file's own
//! `sync_file_range` check, stands for the file's fsync, and a `syncfs` for a directory's.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

const MARKER: &str = "/filesink-durability-marker-prepare-commit-returned";
const CHILD_ENV: &str = "FILESINK_DURABILITY_CHILD";
const PARTITIONS_ENV: &str = "FILESINK_DURABILITY_PARTITIONS";

/// The traced job. Run only by `durability_order_is_file_fsync_then_rename_then_dir_fsync`.
#[tokio::test]
#[ignore = "the child half of durability_order_is_file_fsync_then_rename_then_dir_fsync, run under strace"]
async fn traced_child_job() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let sink = filesink::Sink::local(&dir)
        .unwrap()
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .build()
        .unwrap();
    let mut writer = sink.create_writer();
    let partitions = std::env::var(PARTITIONS_ENV)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3);
    writer.write(&batch(partitions)).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    // A system call that marks the moment the handles left the writer.
    let _ = std::fs::metadata(MARKER);
    sink.committer().commit_all(&committables).await.unwrap();
}

fn batch(partitions: i64) -> arrow::record_batch::RecordBatch {
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("day", arrow::datatypes::DataType::Utf8, false),
    ]));
    let ids: Vec<i64> = (0..100 * partitions).collect();
    let days: Vec<String> = ids
        .iter()
        .map(|i| format!("2026-11-{:03}", i % partitions))
        .collect();
    arrow::record_batch::RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(days)),
        ],
    )
    .unwrap()
}

/// The path strace prints for an fd argument with `-y`: `fsync(5</a/b>)` → `/a/b`.
fn fd_path(line: &str) -> Option<&str> {
    let start = line.find('<')? + 1;
    let end = start + line[start..].find('>')?;
    Some(&line[start..end])
}

#[test]
fn durability_order_is_file_fsync_then_rename_then_dir_fsync() {
    let dir = tempfile::tempdir().unwrap();
    check_durability_order(dir.path(), 3, false);
}

/// The same order where the groups are flushed with one `syncfs`: 80 partitions, on the disk
/// the project builds on (the system's temporary directory may be a tmpfs, where each member
/// is flushed on its own, and this checks that instead).
#[test]
fn durability_order_holds_where_groups_are_flushed_with_syncfs() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let whole = takes_syncfs(dir.path());
    eprintln!(
        "{}: groups flushed with syncfs: {whole}",
        dir.path().display()
    );
    check_durability_order(dir.path(), 80, whole);
}

/// Whether `RealFs` flushes a large group under `dir` with one `syncfs` (as it decides).
fn takes_syncfs(dir: &std::path::Path) -> bool {
    use std::os::unix::io::AsRawFd;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let file = std::fs::File::open(dir).unwrap();
    // SAFETY: `statfs` is plain old data; the descriptor is open for the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) }, 0);
    // SAFETY: the descriptor is open for the call. A sandbox may refuse it: then each member
    // is flushed on its own.
    let allowed = unsafe { libc::syncfs(file.as_raw_fd()) } == 0;
    (major, minor) >= (5, 17)
        && matches!(st.f_type as u32, 0xEF53 | 0x5846_5342 | 0x9123_683E)
        && allowed
}

/// Runs the traced job with `partitions` partitions under `dir` and checks the order;
/// `whole`: the groups are expected to be flushed with `syncfs`, otherwise member by member.
fn check_durability_order(dir: &std::path::Path, partitions: usize, whole: bool) {
    let strace = Command::new("strace").arg("-V").output();
    assert!(
        strace.is_ok_and(|o| o.status.success()),
        "this test needs strace (`apt-get install strace`; ./scripts/test installs it)"
    );
    let base = dir.canonicalize().unwrap();
    let trace = dir
        .parent()
        .unwrap()
        .join(format!("filesink-strace-{}.txt", std::process::id()));
    let status = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,fdatasync,syncfs,sync_file_range,write,renameat2,rename,link,statx,newfstatat,stat",
        ])
        .arg("-o")
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "traced_child_job",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &base)
        .env(PARTITIONS_ENV, partitions.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "the traced job failed");
    let text = std::fs::read_to_string(&trace).unwrap();
    let _ = std::fs::remove_file(&trace);
    let base = base.to_str().unwrap();

    // Walk the trace in order.
    let mut synced_before_marker: BTreeSet<String> = BTreeSet::new();
    let mut marker_seen = false;
    let mut renames: Vec<(usize, String, String)> = Vec::new();
    let mut dir_syncs_after: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    // Whole-file-system flushes (`syncfs`), before and after the marker; each file's last
    // write, and its own checks (`sync_file_range`) before the marker.
    let (mut syncfs_before, mut syncfs_after): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let mut last_write: BTreeMap<String, usize> = BTreeMap::new();
    let mut checked_before_marker: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    // Flushes of one group run on several threads: strace splits a call that another thread
    // interrupts into `call(args <unfinished ...>` and `<... call resumed>) = 0`. A call counts
    // at the line where it returned.
    let mut unfinished: BTreeMap<&str, String> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        // Split off the pid, which strace pads to five columns.
        let (pid, line) = line.split_once(' ').unwrap_or(("", line));
        let line = line.trim_start();
        if let Some(head) = line.strip_suffix("<unfinished ...>") {
            unfinished.insert(pid, head.trim_end().to_string());
            continue;
        }
        let joined;
        let line = match line
            .strip_prefix("<... ")
            .and_then(|l| l.split_once(" resumed>"))
        {
            Some((_, tail)) => {
                let head = unfinished.remove(pid).unwrap_or_default();
                joined = format!("{head}{tail}");
                joined.as_str()
            }
            None => line,
        };
        if line.contains(MARKER) {
            marker_seen = true;
        } else if line.starts_with("syncfs(") {
            let Some(path) = fd_path(line) else { continue };
            if !path.starts_with(base) || !line.ends_with("= 0") {
                continue;
            }
            if marker_seen {
                syncfs_after.push(i);
            } else {
                syncfs_before.push(i);
            }
        } else if line.starts_with("write(") {
            if let Some(path) = fd_path(line).filter(|p| p.starts_with(base)) {
                last_write.insert(path.to_string(), i);
            }
        } else if line.starts_with("sync_file_range(") {
            let Some(path) = fd_path(line) else { continue };
            if !marker_seen && line.ends_with("= 0") {
                checked_before_marker
                    .entry(path.to_string())
                    .or_default()
                    .push(i);
            }
        } else if line.starts_with("fsync(") || line.starts_with("fdatasync(") {
            if !line.ends_with("= 0") {
                continue;
            }
            let Some(path) = fd_path(line) else { continue };
            if !path.starts_with(base) {
                continue;
            }
            if marker_seen {
                dir_syncs_after.entry(path.to_string()).or_default().push(i);
            } else {
                synced_before_marker.insert(path.to_string());
            }
        } else if line.starts_with("renameat2(") && line.contains(base) {
            assert!(
                line.contains("RENAME_NOREPLACE"),
                "a rename without RENAME_NOREPLACE: {line}"
            );
            assert!(line.ends_with("= 0"), "a commit rename failed: {line}");
            let quoted: Vec<&str> = line.split('"').collect();
            renames.push((i, quoted[1].to_string(), quoted[3].to_string()));
        }
    }
    assert!(marker_seen, "the marker is missing from the trace");
    assert_eq!(renames.len(), partitions, "one rename per day partition");
    if whole {
        assert!(
            !syncfs_before.is_empty() && !syncfs_after.is_empty(),
            "a large group on this disk is flushed with syncfs, at the vote and the commit"
        );
    } else {
        assert!(
            syncfs_before.is_empty() && syncfs_after.is_empty(),
            "groups are flushed member by member here"
        );
    }
    // A syncfs after the file's last write, and the file's own check after that syncfs,
    // both before the handle left the writer.
    let flushed_whole = |file: &str| {
        let written = last_write.get(file).copied().unwrap_or(0);
        syncfs_before.iter().any(|&s| {
            s > written
                && checked_before_marker
                    .get(file)
                    .is_some_and(|c| c.iter().any(|&c| c > s))
        })
    };
    let dirs: BTreeSet<String> = renames
        .iter()
        .map(|(_, _, dst)| {
            std::path::Path::new(dst)
                .parent()
                .unwrap()
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for (at, src, dst) in &renames {
        let parent = std::path::Path::new(dst)
            .parent()
            .unwrap()
            .to_str()
            .unwrap();
        // 1. Data and directory entry durable before the handle left the writer.
        assert!(
            synced_before_marker.contains(src) || flushed_whole(src),
            "{src} was not fsynced before prepare_commit returned"
        );
        let written = last_write.get(src.as_str()).copied().unwrap_or(0);
        assert!(
            synced_before_marker.contains(parent) || syncfs_before.iter().any(|&s| s > written),
            "{parent} (holding the new in-progress file) was not fsynced before prepare_commit returned"
        );
        // 2 + 3. Renamed after the marker, and the directory fsynced after the rename.
        let syncs = dir_syncs_after
            .get(parent)
            .map(Vec::as_slice)
            .unwrap_or_default();
        assert!(
            syncs.iter().any(|s| s > at) || syncfs_after.iter().any(|s| s > at),
            "{parent} was not fsynced after renaming {dst}"
        );
    }
    // The new partition directories' own entries are durable too (the base was fsynced).
    assert!(
        synced_before_marker.contains(base) || !syncfs_before.is_empty(),
        "the base directory was not fsynced"
    );
    // Group commit: exactly one directory fsync per directory in the commit call, or one
    // syncfs for all of them.
    if whole {
        assert_eq!(
            syncfs_after.len(),
            1,
            "one syncfs for the commit's directories"
        );
        // And one directory's fsync after it, which checks that the file system still writes.
        let after: Vec<usize> = dir_syncs_after.values().flatten().copied().collect();
        assert_eq!(after.len(), 1, "{dir_syncs_after:?}");
        assert!(
            after[0] > syncfs_after[0],
            "the check comes after the syncfs"
        );
    } else {
        for d in &dirs {
            assert_eq!(
                dir_syncs_after[d].len(),
                1,
                "{d} fsynced {} times in one commit",
                dir_syncs_after[d].len()
            );
        }
    }
}
