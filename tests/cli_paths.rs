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
