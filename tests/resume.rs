//! Row formats keep a file open across checkpoints and resume it after a restart; writer
//! incarnations restored from one state never corrupt each other's data.

mod common;

use std::fs::{self, OpenOptions};

use common::*;
use filesink::{CommitOutcome, Error, FileFormat, RollingPolicy, Sink};

fn row_sink(dir: &std::path::Path, format: FileFormat) -> Sink {
    Sink::local(dir)
        .unwrap()
        .format(format)
        .rolling_policy(RollingPolicy::default())
        .build()
        .unwrap()
}

#[tokio::test]
async fn row_format_resume_after_a_checkpoint_that_left_a_file_open() {
    for format in [FileFormat::json_lines(), FileFormat::csv()] {
        let dir = tempfile::tempdir().unwrap();
        let sink = row_sink(dir.path(), format.clone());
        let mut writer = sink.create_writer();
        writer.write(&batch(0, 100)).await.unwrap();
        let committables = writer.prepare_commit(1).await.unwrap().committables;
        assert!(
            committables.is_empty(),
            "the row file stays open across the checkpoint"
        );
        let state = writer.snapshot_state();
        assert_eq!(state.in_progress.len(), 1);
        assert_eq!(state.in_progress[0].record_count, 100);
        // Written after the checkpoint, then the crash: these bytes are not durable and must go.
        writer.write(&batch(100, 40)).await.unwrap();
        drop(writer);

        let restored = sink.restore_writer(Some(&state), &[]).await.unwrap();
        let mut writer = restored.writer;
        assert_eq!(writer.open_files(), 1);
        // Replay from the checkpointed position, then finish.
        writer.write(&batch(100, 100)).await.unwrap();
        let state2 = { writer.prepare_commit(2).await.unwrap().state };
        assert_eq!(state2.in_progress[0].record_count, 200);
        let sink_rolling = Sink::local(dir.path())
            .unwrap()
            .format(format.clone())
            .rolling_policy(RollingPolicy::on_checkpoint())
            .build()
            .unwrap();
        let restored = sink_rolling
            .restore_writer(Some(&state2), &[])
            .await
            .unwrap();
        let mut writer = restored.writer;
        let committables = writer.prepare_commit(3).await.unwrap().committables;
        assert_eq!(committables.len(), 1);
        assert_eq!(committables[0].record_count, 200);
        sink.committer().commit_all(&committables).await.unwrap();

        assert_exactly_once(dir.path(), &format, 200);
        assert!(
            hidden_files(dir.path()).is_empty(),
            "{:?}",
            hidden_files(dir.path())
        );
        if let FileFormat::Csv(_) = format {
            let file = &visible_files(dir.path())[0];
            let headers = fs::read_to_string(file)
                .unwrap()
                .lines()
                .filter(|l| l.starts_with("id,"))
                .count();
            assert_eq!(headers, 1, "a resumed CSV file has exactly one header");
        }
    }
}

#[tokio::test]
async fn a_resumable_file_shorter_than_its_durable_length_is_data_lost() {
    let dir = tempfile::tempdir().unwrap();
    let sink = row_sink(dir.path(), FileFormat::json_lines());
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 100)).await.unwrap();
    let state = writer.prepare_commit(1).await.unwrap().state;
    drop(writer);
    let path = dir.path().join(&state.in_progress[0].in_progress_path);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(state.in_progress[0].durable_len_bytes - 10)
        .unwrap();
    match sink.restore_writer(Some(&state), &[]).await {
        Err(Error::DataLost { path: p, reason }) => {
            assert_eq!(p, path.canonicalize().unwrap());
            assert!(reason.contains("durable"), "{reason}");
        }
        other => panic!("expected data lost, got {other:?}"),
    }
    // Nothing was padded or rewritten.
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        state.in_progress[0].durable_len_bytes - 10
    );
}

#[tokio::test]
async fn a_resumable_file_with_other_bytes_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let sink = row_sink(dir.path(), FileFormat::json_lines());
    let mut writer = sink.create_writer();
    writer.write(&batch(0, 100)).await.unwrap();
    let state = writer.prepare_commit(1).await.unwrap().state;
    drop(writer);
    let path = dir.path().join(&state.in_progress[0].in_progress_path);
    let mut bytes = fs::read(&path).unwrap();
    bytes[5] ^= 0x20;
    fs::write(&path, bytes).unwrap();
    let err = sink.restore_writer(Some(&state), &[]).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
}

#[tokio::test]
async fn two_incarnations_restored_from_one_state_never_corrupt_committed_data() {
    let dir = tempfile::tempdir().unwrap();
    let format = FileFormat::json_lines();
    let sink = row_sink(dir.path(), format.clone());
    let rolling = Sink::local(dir.path())
        .unwrap()
        .format(format.clone())
        .rolling_policy(RollingPolicy::on_checkpoint())
        .build()
        .unwrap();

    // The original writer checkpoints with a file open, then is presumed dead...
    let mut zombie = sink.create_writer();
    zombie.write(&batch(0, 100)).await.unwrap();
    let state = zombie.prepare_commit(1).await.unwrap().state;
    let original = dir.path().join(&state.in_progress[0].in_progress_path);

    // ...two incarnations are restored from the same checkpoint (a failover raced)...
    let mut first = rolling
        .restore_writer(Some(&state), &[])
        .await
        .unwrap()
        .writer;
    let mut second = rolling
        .restore_writer(Some(&state), &[])
        .await
        .unwrap()
        .writer;
    assert_ne!(first.incarnation(), second.incarnation());

    // ...and all three keep writing, the zombie into the original file.
    zombie.write(&batch(100, 100)).await.unwrap();
    first.write(&batch(100, 100)).await.unwrap();
    second.write(&batch(100, 100)).await.unwrap();
    let from_second = second.prepare_commit(2).await.unwrap().committables;
    // The first incarnation's file was removed by the second's restore: its vote refuses to
    // promise a file that is gone.
    let err = first.prepare_commit(2).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert!(err.to_string().contains("another process removed"), "{err}");

    // The checkpoint store takes the second incarnation's checkpoint; it commits.
    let outcomes = rolling.committer().commit(&from_second).await;
    assert!(matches!(outcomes[0], Ok(CommitOutcome::Committed)));
    let committed = visible_files(dir.path());
    let committed_bytes: Vec<Vec<u8>> = committed.iter().map(|p| fs::read(p).unwrap()).collect();
    assert_exactly_once(dir.path(), &format, 200);
    // The original was superseded and removed after the commit, though the zombie still has it open.
    assert!(!original.exists());

    // The zombie's original is gone too (superseded and removed after the commit): its own
    // next vote fails the same way, and nothing visible changes.
    let err = zombie.prepare_commit(2).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(visible_files(dir.path()), committed);
    let after: Vec<Vec<u8>> = committed.iter().map(|p| fs::read(p).unwrap()).collect();
    assert_eq!(after, committed_bytes, "committed data changed");
    assert_exactly_once(dir.path(), &format, 200);
}

#[tokio::test]
async fn restore_removes_only_its_own_writers_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |id: &str| {
        Sink::local(dir.path())
            .unwrap()
            .format(FileFormat::json_lines())
            .writer_id(id)
            .build()
            .unwrap()
    };
    let (w0, w1) = (mk("0"), mk("1"));
    let mut a = w0.create_writer();
    let mut b = w1.create_writer();
    a.write(&batch(0, 10)).await.unwrap();
    b.write(&batch(10, 10)).await.unwrap();
    let b_state = b.prepare_commit(1).await.unwrap().state;
    drop(a);
    let before_b = hidden_files(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/.part-1-"))
        .collect::<Vec<_>>();
    assert_eq!(before_b.len(), 1);
    let restored = w0.restore_writer(None, &[]).await.unwrap();
    assert_eq!(
        restored.removed_leftovers.len(),
        1,
        "{:?}",
        restored.removed_leftovers
    );
    // Writer 1's file (and another writer whose id starts with 1, `10`) is untouched.
    assert!(before_b[0].exists());
    let restored1 = w1.restore_writer(Some(&b_state), &[]).await.unwrap();
    assert!(restored1.removed_leftovers.is_empty());
    let _ = mk("10").restore_writer(None, &[]).await.unwrap();
    assert!(before_b[0].exists());
}
