//! The `filesink` binary and where a lake is: every form of a local path works on first use,
//! a lake owns only its own tree (never a lake nested in it, nor one around it), and cleanup
//! removes only names of the exact shape filesink writes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use filesink::FileFormat;

mod common;

use common::cli::*;

const EXIT_REFUSED: i32 = 5;

/// Runs `filesink args` in the working directory `cwd` and asserts its exit code.
#[track_caller]
fn run_in(cwd: &Path, args: &[&str], code: i32) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run filesink");
    assert_eq!(
        o.status.code(),
        Some(code),
        "filesink {args:?} in `{}`\n--- stdout\n{}\n--- stderr\n{}",
        cwd.display(),
        stdout(&o),
        stderr(&o)
    );
    o
}

/// `n` JSON lines with ids `0..n`, two days.
fn write_jsonl(path: &Path, n: usize) {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "{{\"id\":{i},\"day\":\"2026-11-{:02}\",\"user\":\"u{}\"}}\n",
            25 + i % 2,
            i % 7
        ));
    }
    fs::write(path, out).unwrap();
}

/// One local path form: what is passed on the command line (relative to the working
/// directory), and where the lake must end up.
struct Form {
    name: &'static str,
    arg: String,
    dir: PathBuf,
}

/// Every form of a local lake path, none of which exists yet, under the working directory
/// `cwd`.
fn path_forms(cwd: &Path) -> Vec<Form> {
    let real = cwd.join("real");
    fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, cwd.join("link")).unwrap();
    let abs = cwd.join("abs-lake");
    let url = cwd.join("url lake");
    let form = |name, arg: String, dir: PathBuf| Form { name, arg, dir };
    vec![
        form("bare relative", "lake".into(), cwd.join("lake")),
        form(
            "nested relative",
            "sub/deeper/lake".into(),
            cwd.join("sub/deeper/lake"),
        ),
        form("dot relative", "./dot-lake".into(), cwd.join("dot-lake")),
        form("absolute", abs.to_str().unwrap().into(), abs.clone()),
        form(
            "file URL",
            format!("file://{}", url.to_str().unwrap().replace(' ', "%20")),
            url.clone(),
        ),
        form(
            "trailing slash",
            "slash-lake/".into(),
            cwd.join("slash-lake"),
        ),
        form(
            "dot-dot relative",
            "gone/../up-lake".into(),
            cwd.join("up-lake"),
        ),
        form(
            "through a symlink",
            "link/sym-lake".into(),
            real.join("sym-lake"),
        ),
    ]
}

#[test]
fn every_path_form_works_on_first_use() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().canonicalize().unwrap();
    let input = cwd.join("events.jsonl");
    write_jsonl(&input, 40);
    for form in path_forms(&cwd) {
        let arg = form.arg.as_str();
        let what = format!("{} `{arg}`", form.name);
        // ingest: the first use creates the lake.
        run_in(
            &cwd,
            &[
                "ingest",
                "events.jsonl",
                "--to",
                arg,
                "--job",
                "events",
                "--partition-by",
                "day",
            ],
            0,
        );
        assert!(
            form.dir.join("_filesink/sink.json").is_file(),
            "{what}: no lake at `{}`",
            form.dir.display()
        );
        common::assert_exactly_once(&form.dir, &FileFormat::parquet(), 40);
        // ls, inspect, commit, abort: each reads the same lake.
        let ls = json_of(&run_in(&cwd, &["ls", arg, "--json"], 0));
        assert_eq!(ls["committed"]["files"], 2, "{what}: {ls}");
        assert_eq!(ls["leftovers"].as_array().unwrap().len(), 0, "{what}: {ls}");
        run_in(&cwd, &["inspect", arg, "--job", "events"], 0);
        run_in(&cwd, &["commit", arg, "--job", "events"], 0);
        let abort = json_of(&run_in(&cwd, &["abort", arg, "--json"], 0));
        assert_eq!(abort["removed"], 0, "{what}: {abort}");
        // A second job into the same lake, by the same form.
        let more = cwd.join("more.jsonl");
        fs::write(&more, "{\"id\":40,\"day\":\"2026-11-25\",\"user\":\"u\"}\n").unwrap();
        run_in(
            &cwd,
            &[
                "ingest",
                "more.jsonl",
                "--to",
                arg,
                "--job",
                "more",
                "--partition-by",
                "day",
            ],
            0,
        );
        common::assert_exactly_once(&form.dir, &FileFormat::parquet(), 41);
        // bench measures in a fresh directory under the form and removes it.
        run_in(
            &cwd,
            &[
                "bench",
                "--to",
                arg,
                "--files",
                "2",
                "--files-per-checkpoint",
                "1",
                "--file-size",
                "4KiB",
                "--json",
            ],
            0,
        );
        let names: Vec<String> = fs::read_dir(&form.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            !names.iter().any(|n| n.starts_with("filesink-bench-")),
            "{what}: bench left {names:?}"
        );
    }
}

/// Every file under `base` (hidden ones and metadata included) with its content.
/// Every file under `base` with its bytes, except the job locks: a command that takes a job
/// writes there who holds it.
fn snapshot(base: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else if entry.file_name() != "owner.lock" {
                out.insert(entry.path(), fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// A lake at `base` whose job `job` stopped after a checkpoint (as if killed): its latest
/// manifest promises a resumable JSON-lines file and a pending file, and an unreferenced
/// in-progress file of the same writer lies beside them (what a crash after the checkpoint
/// leaves).
fn crashed_library_lake(base: &Path, job: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sink = filesink::Sink::local(base)
            .unwrap()
            .format(FileFormat::json_lines())
            .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
            .build()
            .unwrap();
        let mut coordinator = filesink::Coordinator::open(&sink, job, 1).await.unwrap();
        let batch = common::batch(0, 20);
        coordinator.writer().write(&batch).await.unwrap();
        coordinator.checkpoint(&20).await.unwrap();
        coordinator
            .writer()
            .write(&common::batch(20, 10))
            .await
            .unwrap();
        // Dropped without a checkpoint: the open files are what a killed run leaves.
    });
    let hidden = common::hidden_files(base);
    assert!(!hidden.is_empty(), "the crashed job left no hidden file");
}

#[test]
fn a_lake_inside_a_lake_is_never_touched_by_the_outer_one() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let input = root.join("nightly.jsonl");
    write_jsonl(&input, 30);
    let ingest = |to: &Path, code| {
        run_in(
            &root,
            &[
                "ingest",
                "nightly.jsonl",
                "--to",
                s(to),
                "--job",
                "nightly",
                "--format",
                "jsonl",
                "--partition-by",
                "day",
            ],
            code,
        )
    };

    // Creating a lake inside another's tree, or around one, is refused and writes nothing,
    // not even the directories on the way (they were created, empty, before the check),
    // whichever came first.
    let outer = root.join("outer");
    ingest(&outer, 0);
    let outer_before = snapshot(&outer);
    for nested in ["archive", "2026/staging"] {
        let o = ingest(&outer.join(nested), EXIT_REFUSED);
        let inside = format!("would be inside the sink `{}`", outer.display());
        assert!(stderr(&o).contains(&inside), "{}", stderr(&o));
        assert_eq!(snapshot(&outer), outer_before, "{nested}");
        assert!(
            !outer.join(nested.split('/').next().unwrap()).exists(),
            "{nested}"
        );
    }
    // An existing directory inside it, made by hand: refused by the sink's identity check.
    fs::create_dir(outer.join("made")).unwrap();
    let o = ingest(&outer.join("made"), EXIT_REFUSED);
    let inside = format!("it is inside the sink `{}`", outer.display());
    assert!(stderr(&o).contains(&inside), "{}", stderr(&o));
    assert!(!outer.join("made/_filesink").exists());
    fs::remove_dir(outer.join("made")).unwrap();
    assert_eq!(snapshot(&outer), outer_before);
    let wrap = root.join("wrap");
    crashed_library_lake(&wrap.join("archive"), "nightly");
    let inner_before = snapshot(&wrap.join("archive"));
    let o = ingest(&wrap, EXIT_REFUSED);
    let holds = format!("it holds the sink `{}`", wrap.join("archive").display());
    assert!(stderr(&o).contains(&holds), "{}", stderr(&o));
    assert!(!wrap.join("_filesink").exists());
    assert_eq!(snapshot(&wrap.join("archive")), inner_before);

    // A lake moved into another's tree (or a tree moved around a lake) stays its own: every
    // command on the outer lake leaves it alone, byte for byte, and the same job name in both
    // lakes changes nothing.
    let inner = outer.join("archive");
    fs::rename(wrap.join("archive"), &inner).unwrap();
    let inner_before = snapshot(&inner);
    let outer_visible = common::visible_files(&outer)
        .into_iter()
        .filter(|p| !p.starts_with(&inner))
        .count();
    let check = |what: &str| {
        assert_eq!(
            snapshot(&inner),
            inner_before,
            "{what} touched the inner lake"
        );
    };
    let ls = json_of(&run_in(&root, &["ls", s(&outer), "--json"], 0));
    assert_eq!(ls["committed"]["files"], outer_visible, "{ls}");
    assert_eq!(ls["leftovers"].as_array().unwrap().len(), 0, "{ls}");
    assert_eq!(ls["foreign"].as_array().unwrap().len(), 0, "{ls}");
    check("ls");
    // A rerun of the outer job restores it (its cleanup runs), then has nothing to do.
    ingest(&outer, 0);
    check("ingest (restore of the same job name)");
    // Another job in the outer lake.
    fs::write(
        root.join("other.jsonl"),
        "{\"id\":99,\"day\":\"2026-11-25\"}\n",
    )
    .unwrap();
    run_in(
        &root,
        &[
            "ingest",
            "other.jsonl",
            "--to",
            s(&outer),
            "--job",
            "other",
            "--format",
            "jsonl",
        ],
        0,
    );
    check("ingest (another job)");
    run_in(&root, &["commit", s(&outer)], 0);
    check("commit");
    let abort = json_of(&run_in(
        &root,
        &["abort", s(&outer), "--force", "--json"],
        0,
    ));
    assert_eq!(abort["removed"], 0, "{abort}");
    check("abort --force");

    // The inner lake still restores: its resumable file and its pending file are there.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sink = filesink::Sink::local(&inner)
            .unwrap()
            .format(FileFormat::json_lines())
            .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
            .build()
            .unwrap();
        let mut coordinator = filesink::Coordinator::open(&sink, "nightly", 1)
            .await
            .unwrap();
        coordinator.finish(&20).await.unwrap();
    });
    common::assert_exactly_once(&inner, &FileFormat::json_lines(), 20);
}

#[test]
fn abort_leaves_names_that_only_look_like_in_progress_files() {
    const INC: &str = "019ad2f1c0c87b2a9d6f3b8e5a1c2d3e";
    const ID: &str = "5f2b9a0c4d1e4f7a8b6c3d2e1f0a9b8c";
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    write_jsonl(&root.join("events.jsonl"), 30);
    let lake = root.join("lake");
    run_in(
        &root,
        &[
            "ingest",
            "events.jsonl",
            "--to",
            s(&lake),
            "--job",
            "events",
            "--partition-by",
            "day",
        ],
        0,
    );
    let day = "day=2026-11-25";
    // Ours: the exact shape, a writer of the lake's job `events`, the prefix ingest writes.
    let ours = [
        format!(".part-events_0-{INC}-7.parquet.inprogress.{ID}"),
        format!("{day}/.part-events_0-{INC}-0.parquet.inprogress.{ID}"),
    ];
    // Look-alikes: each differs from the shape filesink writes in one way.
    let foreign = [
        ".notes.inprogress.1".to_string(),
        format!("{day}/.backup.csv.inprogress.2024"),
        format!("{day}/deeper/.notes.inprogress.abc"),
        format!("{day}/.data-events_0-{INC}-0.parquet.inprogress.{ID}"), // another prefix
        format!("{day}/.part-ghost_0-{INC}-0.parquet.inprogress.{ID}"),  // no such job
        format!("{day}/.part-events-{INC}-0.parquet.inprogress.{ID}"),   // not `<job>_<i>`
        format!("{day}/.part-events_01-{INC}-0.parquet.inprogress.{ID}"), // index `01`
        format!("{day}/.part-other_job_0-{INC}-0.parquet.inprogress.{ID}"), // foreign job
        format!(
            "{day}/.part-events_0-{INC}-0.parquet.inprogress.{}",
            &ID[..31]
        ), // short id
        format!(
            "{day}/.part-events_0-{INC}-0.parquet.inprogress.{}",
            ID.to_uppercase()
        ),
        format!("{day}/.part-events_0-{INC}-0.parquet.inprogress.2024"), // not a UUID
        format!(
            "{day}/.part-events_0-{}-0.parquet.inprogress.{ID}",
            &INC[..30]
        ), // short inc
        format!("{day}/.part-events_0-{INC}-00.parquet.inprogress.{ID}"), // counter `00`
        format!("{day}/.part-events_0-{INC}-x.parquet.inprogress.{ID}"), // no counter
        format!("{day}/..part-events_0-{INC}-0.parquet.inprogress.{ID}"), // extra dot
        format!("{day}/.part-events_0-{INC}-0.parquet.inprogress.{ID}.bak"), // extra dot
        format!("{day}/.part.events_0.{INC}.0.parquet.inprogress.{ID}"), // dots for dashes
        format!("{day}/.part-events_0-{INC}-0.parquet.bak.inprogress.{ID}"), // another suffix
    ];
    for rel in ours.iter().chain(&foreign) {
        let path = lake.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, format!("content of {rel}")).unwrap();
    }
    let files_before = snapshot(&lake);

    // ls: ours are leftovers, the look-alikes foreign.
    let ls = json_of(&run_in(&root, &["ls", s(&lake), "--json"], 0));
    let paths = |v: &serde_json::Value| -> std::collections::BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|l| l["path"].as_str().unwrap().to_string())
            .collect()
    };
    let looks_in_progress: std::collections::BTreeSet<String> = foreign
        .iter()
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap();
            let (_, id) = name.rsplit_once(".inprogress.").unwrap_or(("", ""));
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .cloned()
        .collect();
    assert_eq!(
        paths(&ls["leftovers"]),
        ours.iter().cloned().collect(),
        "{ls}"
    );
    assert_eq!(paths(&ls["foreign"]), looks_in_progress, "{ls}");

    // abort, dry run and real, with --force: only ours go.
    for args in [
        &["abort", s(&lake), "--force", "--dry-run", "--json"][..],
        &["abort", s(&lake), "--force", "--json"][..],
    ] {
        let abort = json_of(&run_in(&root, args, 0));
        let removed: std::collections::BTreeSet<String> = abort["remove"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["path"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(removed, ours.iter().cloned().collect(), "{abort}");
    }
    let mut expected = files_before;
    for rel in &ours {
        expected.remove(&lake.join(rel));
    }
    assert_eq!(
        snapshot(&lake),
        expected,
        "abort touched more than its own leftovers"
    );
}

/// `--to` naming a file is a usage error that says so (it was "File exists", exit 1), and an
/// input inside the lake, where the lake lists it as data, is refused (exit 2): ingesting a
/// lake's own part files wrote every record again (`raw/**/*.jsonl` with the lake under
/// `raw/`). An input under a hidden directory of the lake (`_incoming/`) is no data of it.
#[test]
fn the_lake_is_never_a_file_nor_its_own_input() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let input = root.join("in.jsonl");
    write_jsonl(&input, 10);
    let o = run_in(
        &root,
        &[
            "ingest", "in.jsonl", "--to", "in.jsonl", "--format", "jsonl",
        ],
        2,
    );
    assert!(
        stderr(&o).contains("is a file, not a directory"),
        "{}",
        stderr(&o)
    );

    run_in(
        &root,
        &["ingest", "in.jsonl", "--to", "lake", "--format", "jsonl"],
        0,
    );
    let before = snapshot(&root.join("lake"));
    let parts = common::visible_files(&root.join("lake"));
    let part = parts[0]
        .strip_prefix(&root)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    // Through a relative path, an absolute one, and a symbolic link to the lake.
    std::os::unix::fs::symlink(root.join("lake"), root.join("link")).unwrap();
    let via_link = part.replacen("lake/", "link/", 1);
    let absolute = root.join(&part);
    for given in [part.as_str(), via_link.as_str(), s(&absolute)] {
        let o = run_in(
            &root,
            &[
                "ingest", given, "--to", "lake", "--format", "jsonl", "--job", "again",
            ],
            2,
        );
        assert!(
            stderr(&o).contains("is inside the lake"),
            "{given}: {}",
            stderr(&o)
        );
        assert_eq!(snapshot(&root.join("lake")), before, "{given}");
    }
    // A landing directory the lake hides is fine.
    fs::create_dir(root.join("lake/_incoming")).unwrap();
    fs::copy(&input, root.join("lake/_incoming/more.jsonl")).unwrap();
    run_in(
        &root,
        &[
            "ingest",
            "lake/_incoming/more.jsonl",
            "--to",
            "lake",
            "--format",
            "jsonl",
            "--job",
            "landing",
        ],
        0,
    );
}
