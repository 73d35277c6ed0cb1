//! The durability order, observed in the real system calls: the test runs a small job in a
//! child process under `strace` and checks, for every committed file, that
//!
//! 1. its data was fsynced, and the directory entry that reaches it too, before
//!    `prepare_commit` returned (the handle left the writer);
//! 2. it was renamed with `RENAME_NOREPLACE` only after that;
//! 3. its directory was fsynced after the rename, once per directory per commit call.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

const MARKER: &str = "/filesink-durability-marker-prepare-commit-returned";
const CHILD_ENV: &str = "FILESINK_DURABILITY_CHILD";

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
    writer.write(&batch()).await.unwrap();
    let committables = writer.prepare_commit(1).await.unwrap().committables;
    // A system call that marks the moment the handles left the writer.
    let _ = std::fs::metadata(MARKER);
    sink.committer().commit_all(&committables).await.unwrap();
}

fn batch() -> arrow::record_batch::RecordBatch {
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("day", arrow::datatypes::DataType::Utf8, false),
    ]));
    let ids: Vec<i64> = (0..300).collect();
    let days: Vec<String> = ids
        .iter()
        .map(|i| format!("2026-11-{:02}", 28 + i % 3))
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
    let strace = Command::new("strace").arg("-V").output();
    assert!(
        strace.is_ok_and(|o| o.status.success()),
        "this test needs strace (`apt-get install strace`; ./scripts/test installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let trace = dir
        .path()
        .parent()
        .unwrap()
        .join(format!("filesink-strace-{}.txt", std::process::id()));
    let status = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,fdatasync,renameat2,rename,link,statx,newfstatat,stat",
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
    assert_eq!(renames.len(), 3, "one rename per day partition:\n{text}");
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
            synced_before_marker.contains(src),
            "{src} was not fsynced before prepare_commit returned"
        );
        assert!(
            synced_before_marker.contains(parent),
            "{parent} (holding the new in-progress file) was not fsynced before prepare_commit returned"
        );
        // 2 + 3. Renamed after the marker, and the directory fsynced after the rename.
        let syncs = dir_syncs_after
            .get(parent)
            .map(Vec::as_slice)
            .unwrap_or_default();
        assert!(
            syncs.iter().any(|s| s > at),
            "{parent} was not fsynced after renaming {dst}"
        );
    }
    // The new partition directories' own entries are durable too (the base was fsynced).
    assert!(
        synced_before_marker.contains(base),
        "the base directory was not fsynced"
    );
    // Group commit: exactly one directory fsync per directory in the commit call.
    for d in &dirs {
        assert_eq!(
            dir_syncs_after[d].len(),
            1,
            "{d} fsynced {} times in one commit",
            dir_syncs_after[d].len()
        );
    }
}
