//! A real full disk: a small tmpfs fills up mid-ingest. The error is clear and retryable,
//! nothing partial becomes visible, and once space is freed a resumed run loses nothing.

mod common;

use std::process::Command;

use common::*;
use filesink::{Coordinator, Error, FileFormat, RollingPolicy, Sink};

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount_tmpfs(dir: &std::path::Path, size: &str) -> Result<Mount, String> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(Mount(dir.to_path_buf()))
}

async fn run(sink: &Sink, total: i64) -> filesink::Result<()> {
    let mut job = Coordinator::open(sink, "fill", 1).await?;
    let mut next = job.source_position::<i64>().unwrap().unwrap_or(0);
    while next < total {
        job.writer().write(&batch(next, 1000)).await?;
        next += 1000;
        job.checkpoint(&next).await?;
    }
    job.finish(&next).await?;
    Ok(())
}

#[tokio::test]
async fn a_full_disk_is_a_clear_error_and_a_resumed_run_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mount = match mount_tmpfs(dir.path(), "1m") {
        Ok(m) => m,
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("\n*** DISK-FULL TEST NOT RUN: mounting a tmpfs is not permitted here ({why}); it runs in CI as root ***\n");
            return;
        }
        Err(why) => panic!("CI must run the disk-full test, but mounting a tmpfs failed: {why}"),
    };
    let format = FileFormat::json_lines();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(format.clone())
        .rolling_policy(RollingPolicy::on_checkpoint())
        .build()
        .unwrap();
    let total = 40_000; // about 2.5 MB of JSON lines: does not fit in 1 MiB
    let err = run(&sink, total)
        .await
        .expect_err("1 MiB cannot hold the output");
    let enospc = match &err {
        Error::Io { source, .. } | Error::Fsync { source, .. } => {
            source.raw_os_error() == Some(libc::ENOSPC)
        }
        _ => false,
    };
    assert!(enospc, "expected a no-space error, got {err:?}");
    assert!(
        err.to_string()
            .contains(dir.path().canonicalize().unwrap().to_str().unwrap()),
        "the error names the path: {err}"
    );
    // Nothing visible beyond complete checkpoints, nothing twice.
    let visible = visible_id_counts(dir.path(), &format);
    assert!(visible.values().all(|c| *c == 1));
    let covered = filesink::job::manifest::latest_manifest(sink.storage().as_ref(), "fill", None)
        .await
        .unwrap()
        .map_or(0, |m| m.source_position.as_i64().unwrap());
    assert!(
        visible.keys().all(|id| *id < covered),
        "an id beyond the last checkpoint ({covered}) is visible"
    );

    // Free space (grow the file system) and resume.
    let status = Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    run(&sink, total).await.unwrap();
    assert_exactly_once(dir.path(), &format, total);
    assert!(hidden_files(dir.path()).is_empty());
    drop(mount);
}
