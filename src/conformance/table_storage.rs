//! Checks of the storage calls a table writer, a compactor and vacuum make
//! (`docs/design/delta.md` section 14, step 4): [`Storage::refuses_replace`](crate::storage::MetadataStore::refuses_replace),
//! [`Storage::replace_metadata`](crate::storage::MetadataStore::replace_metadata), [`Storage::list_metadata_from`](crate::storage::MetadataStore::list_metadata_from),
//! [`Storage::read_data_file`](crate::storage::Listing::read_data_file), [`Storage::remove_data_file`](crate::storage::Listing::remove_data_file) and [`Storage::read_hidden`](crate::storage::Listing::read_hidden),
//! and the refusals of every path outside what each call may touch.

use crate::format::FileFormat;
use crate::protocol::{Committable, PendingHandle};
use crate::sink::Sink;
#[cfg(doc)]
use crate::storage::Storage;
use crate::Error;

use super::harness::batch;
use super::{sink, Location};

const LOG: &str = crate::protocol::DELTA_LOG_DIR;

fn version(v: u64) -> String {
    format!("{v:020}.json")
}

fn log_path(name: &str) -> String {
    format!("{LOG}/{name}")
}

fn is_invalid_input<T: std::fmt::Debug>(r: &crate::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidInput(_)))
}

/// Committed part files of a small Parquet job: each a file of its own day, committed.
async fn committed_files(b: &dyn Location) -> Vec<Committable> {
    let s = sink(b, FileFormat::parquet());
    let mut w = s.create_writer();
    w.write(&batch(0, 100)).await.unwrap();
    let cs = w.prepare_commit(1).await.unwrap().committables;
    assert!(cs.len() >= 2, "[{}] {} files", b.name(), cs.len());
    s.committer().commit_all(&cs).await.unwrap();
    cs
}

/// Whether `bytes` are the file `c` describes (size and CRC-32C, the commit's own proof).
fn is_the_file(bytes: &[u8], c: &Committable) -> bool {
    bytes.len() as u64 == c.size_bytes && crc32c::crc32c(bytes) == c.crc32c
}

/// Every call refuses, before any I/O and with [`Error::InvalidInput`], the paths it may not
/// touch: the metadata calls anything outside `_filesink/` and `_delta_log/` (`..`, absolute
/// paths, NUL, backslashes, empty components, data files), `replace_metadata` also
/// `_filesink/`, the data-file calls anything hidden, `remove_data_file` anything but a final
/// part name, `read_hidden` anything but an in-progress part name. Nothing is changed.
pub async fn hostile_paths_are_refused_by_every_storage_call(b: &dyn Location) {
    let st = b.storage();
    let files = committed_files(b).await;
    let entry = log_path(&version(0));
    st.put_metadata(&entry, b"{}").await.unwrap();
    let visible = b.visible().await;
    let name = b.name();

    let outside = [
        "",
        "/_delta_log/00000000000000000001.json",
        "_delta_log/../../etc/passwd",
        "_delta_log/./x",
        "_delta_log//x",
        "_delta_log/a\0b",
        "_delta_log/a\\b",
        "../_delta_log/x",
        "x/_delta_log/00000000000000000001.json",
        "_delta_logs/x",
        "_other/x",
        "_delta_log",
        "_filesink",
        files[0].final_path.as_str(),
    ];
    for p in outside {
        assert!(
            is_invalid_input(&st.put_metadata(p, b"x").await),
            "[{name}] put_metadata({p:?})"
        );
        assert!(
            is_invalid_input(&st.replace_metadata(p, b"x").await),
            "[{name}] replace_metadata({p:?})"
        );
        assert!(
            is_invalid_input(&st.get_metadata(p).await),
            "[{name}] get_metadata({p:?})"
        );
        assert!(
            is_invalid_input(&st.delete_metadata(p).await),
            "[{name}] delete_metadata({p:?})"
        );
    }
    for d in [
        "",
        "/_delta_log",
        "_delta_log/..",
        "../_delta_log",
        "day=2026-11-25",
        "_delta_log\0",
    ] {
        assert!(
            is_invalid_input(&st.list_metadata(d).await),
            "[{name}] list_metadata({d:?})"
        );
        assert!(
            is_invalid_input(&st.list_metadata_from(d, "").await),
            "[{name}] list_metadata_from({d:?})"
        );
    }
    for after in ["a/b", "..", "x\0", "/abs"] {
        assert!(
            is_invalid_input(&st.list_metadata_from(LOG, after).await),
            "[{name}] list_metadata_from(_, {after:?})"
        );
    }
    for p in [
        "_filesink/sink.json",
        "_filesink/jobs/j/checkpoints/00000000000000000001.json",
    ] {
        assert!(
            is_invalid_input(&st.replace_metadata(p, b"x").await),
            "[{name}] replace_metadata({p:?}) of filesink's own metadata"
        );
    }

    let final_name = files[0].final_path.as_str();
    let hidden_name = format!(
        ".{}.inprogress.{}",
        crate::protocol::split_rel(final_name).1,
        "5f2b9a0c4d1e4f7a8b6c3d2e1f0a9b8c"
    );
    let not_data = [
        entry.clone(),
        "_filesink/sink.json".to_string(),
        format!("_delta_log/{}", crate::protocol::split_rel(final_name).1),
        hidden_name.clone(),
        format!("../{final_name}"),
        format!("/{final_name}"),
        format!("{final_name}\0"),
        format!("day=2026-11-25/../{final_name}"),
        String::new(),
    ];
    for p in &not_data {
        assert!(
            is_invalid_input(&st.read_data_file(p).await),
            "[{name}] read_data_file({p:?})"
        );
        assert!(
            is_invalid_input(&st.remove_data_file(p).await),
            "[{name}] remove_data_file({p:?})"
        );
    }
    for p in [
        "notes.txt",
        "day=2026-11-25/part-0-1.parquet",
        "day=2026-11-25/part-00000-6a1b.c000.snappy.parquet",
    ] {
        assert!(
            is_invalid_input(&st.remove_data_file(p).await),
            "[{name}] remove_data_file({p:?}) of a name that is no final part name"
        );
    }
    for p in [
        final_name.to_string(),
        entry.clone(),
        ".notes.inprogress.1".to_string(),
        format!("../{hidden_name}"),
        format!("_filesink/{hidden_name}"),
        format!("{hidden_name}\0"),
        format!(".hidden/{hidden_name}"),
    ] {
        assert!(
            is_invalid_input(&st.read_hidden(&p).await),
            "[{name}] read_hidden({p:?})"
        );
    }

    assert_eq!(
        b.visible().await,
        visible,
        "[{name}] a refused call changed the output"
    );
    assert_eq!(
        st.get_metadata(&entry).await.unwrap().as_deref(),
        Some(b"{}".as_slice()),
        "[{name}] a refused call changed `{entry}`"
    );
}

/// [`Storage::refuses_replace`](crate::storage::MetadataStore::refuses_replace) is the store's answer (local disk and stores honouring
/// `If-None-Match: *` refuse; Garage does not), the same from a fresh view of the store. A
/// second put of an existing name is a conflict everywhere; where the store refuses to
/// replace, of two writers racing for one name, round after round, exactly one wins and its
/// bytes are the ones stored.
pub async fn refuses_replace_is_the_stores_answer_and_decides_races(b: &dyn Location) {
    let name = b.name();
    let (one, two) = (b.storage(), b.reopen());
    let refuses = one.refuses_replace().await.unwrap();
    assert_eq!(
        refuses,
        b.capabilities().conditional_put,
        "[{name}] refuses_replace"
    );
    assert_eq!(two.refuses_replace().await.unwrap(), refuses, "[{name}]");

    let first = log_path(&version(0));
    one.put_metadata(&first, b"first").await.unwrap();
    let again = two.put_metadata(&first, b"second").await;
    assert!(
        matches!(again, Err(Error::Conflict { .. })),
        "[{name}] a second put of `{first}`: {again:?}"
    );
    assert_eq!(
        one.get_metadata(&first).await.unwrap().as_deref(),
        Some(b"first".as_slice())
    );
    if !refuses {
        // Two puts at the same moment can both succeed here, the later one replacing: the
        // answer above is what tells a table writer (`docs/design/delta.md` section 6).
        return;
    }
    for v in 1..=10 {
        let path = log_path(&version(v));
        let (r1, r2) = tokio::join!(
            one.put_metadata(&path, b"from one"),
            two.put_metadata(&path, b"from two")
        );
        let stored = one.get_metadata(&path).await.unwrap();
        match (&r1, &r2) {
            (Ok(()), Err(Error::Conflict { .. })) => {
                assert_eq!(stored.as_deref(), Some(b"from one".as_slice()), "[{name}]")
            }
            (Err(Error::Conflict { .. }), Ok(())) => {
                assert_eq!(stored.as_deref(), Some(b"from two".as_slice()), "[{name}]")
            }
            _ => panic!("[{name}] version {v}: exactly one put must win: {r1:?} / {r2:?}"),
        }
    }
}

/// [`Storage::replace_metadata`](crate::storage::MetadataStore::replace_metadata) creates an object, then replaces it whole (the new bytes,
/// read back from this and from a fresh view of the store, and no temporary file left in the
/// directory); `put_metadata` still refuses the name; deleting it works as for any metadata
/// object.
pub async fn replace_metadata_swaps_the_whole_object(b: &dyn Location) {
    let name = b.name();
    let st = b.storage();
    let path = log_path("_last_checkpoint");
    assert_eq!(st.get_metadata(&path).await.unwrap(), None);
    let v1 = br#"{"version":10,"size":12}"#.as_slice();
    let v2 = br#"{"version":20,"size":24,"sizeInBytes":98211}"#.as_slice();
    st.replace_metadata(&path, v1).await.unwrap();
    assert_eq!(st.get_metadata(&path).await.unwrap().as_deref(), Some(v1));
    st.replace_metadata(&path, v2).await.unwrap();
    assert_eq!(
        st.get_metadata(&path).await.unwrap().as_deref(),
        Some(v2),
        "[{name}] after the replace"
    );
    assert_eq!(
        b.reopen().get_metadata(&path).await.unwrap().as_deref(),
        Some(v2),
        "[{name}] from a fresh view of the store"
    );
    st.replace_metadata(&path, v1).await.unwrap();
    assert_eq!(st.get_metadata(&path).await.unwrap().as_deref(), Some(v1));
    let put = st.put_metadata(&path, v2).await;
    assert!(
        matches!(put, Err(Error::Conflict { .. })),
        "[{name}] put_metadata over a replaced object: {put:?}"
    );
    assert_eq!(st.get_metadata(&path).await.unwrap().as_deref(), Some(v1));
    let names: Vec<String> = st
        .list_metadata(LOG)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        names,
        ["_last_checkpoint"],
        "[{name}] what the replaces left in `{LOG}`"
    );
    st.delete_metadata(&path).await.unwrap();
    assert_eq!(st.get_metadata(&path).await.unwrap(), None);
    assert!(
        b.visible().await.is_empty(),
        "[{name}] metadata became visible"
    );
}

/// [`Storage::list_metadata_from`](crate::storage::MetadataStore::list_metadata_from) lists the objects directly in a directory whose names sort
/// after a given name, in byte order (`…10.checkpoint.parquet` before `…10.json`,
/// `_last_checkpoint` after every version), strictly after it, whether or not an object has
/// that name; objects in a directory below are not listed, a missing directory is empty.
pub async fn list_metadata_from_lists_the_names_after_one_in_order(b: &dyn Location) {
    let name = b.name();
    let st = b.storage();
    let checkpoint = "00000000000000000010.checkpoint.parquet".to_string();
    let mut names: Vec<String> = (0..=12).map(version).collect();
    names.push(checkpoint.clone());
    // Written out of order, so that the listing's order is its own.
    for (i, n) in names.iter().enumerate().rev() {
        st.put_metadata(&log_path(n), format!("{i}").as_bytes())
            .await
            .unwrap();
    }
    st.replace_metadata(&log_path("_last_checkpoint"), b"{\"version\":10}")
        .await
        .unwrap();
    let nested = format!("{LOG}/_commits/{}", version(13));
    st.put_metadata(&nested, b"13").await.unwrap();
    names.push("_last_checkpoint".to_string());
    names.sort();

    let listed = |after: &'static str| {
        let st = st.clone();
        async move {
            let entries = st.list_metadata_from(LOG, after).await.unwrap();
            assert!(entries.iter().all(|e| !e.is_dir), "[{name}] {entries:?}");
            entries.into_iter().map(|e| e.name).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed("").await, names, "[{name}] from the start");
    assert_eq!(
        listed("00000000000000000009.json").await,
        [
            checkpoint.as_str(),
            "00000000000000000010.json",
            "00000000000000000011.json",
            "00000000000000000012.json",
            "_last_checkpoint",
        ],
        "[{name}] after version 9"
    );
    assert_eq!(
        listed("00000000000000000010.json").await,
        [
            "00000000000000000011.json",
            "00000000000000000012.json",
            "_last_checkpoint"
        ],
        "[{name}] after version 10"
    );
    assert_eq!(
        listed("00000000000000000010.a").await,
        [
            checkpoint.as_str(),
            "00000000000000000010.json",
            "00000000000000000011.json",
            "00000000000000000012.json",
            "_last_checkpoint",
        ],
        "[{name}] after a name no object has"
    );
    assert!(listed("_last_checkpoint").await.is_empty(), "[{name}]");
    let below: Vec<String> = st
        .list_metadata_from(&format!("{LOG}/_commits"), "")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(below, [version(13)], "[{name}] the directory below");
    assert!(
        st.list_metadata_from("_delta_log/missing", "")
            .await
            .unwrap()
            .is_empty(),
        "[{name}] a missing directory"
    );
}

/// A committed part file reads back whole under its final name (its size and CRC-32C are the
/// committable's, its bytes the visible file's); [`Storage::remove_data_file`](crate::storage::Listing::remove_data_file) removes it
/// and nothing else, again without error, after which reading it is
/// [`Error::DataLost`].
pub async fn committed_part_files_are_read_and_removed_by_their_final_names(b: &dyn Location) {
    let name = b.name();
    let st = b.storage();
    let files = committed_files(b).await;
    let visible = b.visible().await;
    for c in &files {
        let bytes = st.read_data_file(&c.final_path).await.unwrap();
        assert!(
            is_the_file(&bytes, c),
            "[{name}] `{}` read back is not the committed file",
            c.final_path
        );
        assert!(
            visible
                .iter()
                .any(|(p, v)| *p == c.final_path && v.as_slice() == bytes.as_ref()),
            "[{name}] `{}` differs from the visible file",
            c.final_path
        );
    }
    let gone = &files[0];
    st.remove_data_file(&gone.final_path).await.unwrap();
    st.remove_data_file(&gone.final_path).await.unwrap();
    let after = b.visible().await;
    let expected: Vec<(String, Vec<u8>)> = visible
        .into_iter()
        .filter(|(p, _)| *p != gone.final_path)
        .collect();
    assert_eq!(after, expected, "[{name}] removing one file changed others");
    let read = st.read_data_file(&gone.final_path).await;
    assert!(
        matches!(read, Err(Error::DataLost { .. })),
        "[{name}] reading a removed file: {read:?}"
    );
    assert!(b.reopen().read_data_file(&gone.final_path).await.is_err());
}

/// A pending part file reads back whole under its hidden name before its commit (local files
/// and staged objects; an S3 multipart upload in progress has no such name), and is the file
/// that the commit then makes visible; once committed, its hidden name is gone
/// ([`Error::DataLost`]).
pub async fn pending_part_files_are_read_back_under_their_hidden_names(b: &dyn Location) {
    let name = b.name();
    let st = b.storage();
    let s: Sink = sink(b, FileFormat::json_lines());
    let mut w = s.create_writer();
    w.write(&batch(0, 60)).await.unwrap();
    let cs = w.prepare_commit(1).await.unwrap().committables;
    let mut read = 0;
    let mut hidden = Vec::new();
    for c in &cs {
        let path = match &c.pending {
            PendingHandle::LocalFile { in_progress_path } => in_progress_path,
            PendingHandle::Staged { staging_path } => staging_path,
            _ => {
                assert!(
                    b.capabilities().multipart,
                    "[{name}] {:?} has no hidden name",
                    c.pending
                );
                continue;
            }
        };
        let bytes = st.read_hidden(path).await.unwrap();
        assert!(
            is_the_file(&bytes, c),
            "[{name}] pending `{path}` read back is not the sealed file"
        );
        hidden.push((path.clone(), bytes));
        read += 1;
    }
    assert!(
        read == cs.len() || b.capabilities().multipart,
        "[{name}] read {read} of {} pending files",
        cs.len()
    );
    s.committer().commit_all(&cs).await.unwrap();
    for (c, (path, bytes)) in cs.iter().zip(&hidden) {
        assert_eq!(
            st.read_data_file(&c.final_path).await.unwrap(),
            bytes,
            "[{name}] the committed file is not the pending one read before"
        );
        let after = st.read_hidden(path).await;
        assert!(
            matches!(after, Err(Error::DataLost { .. })),
            "[{name}] `{path}` after its commit: {after:?}"
        );
    }
}
