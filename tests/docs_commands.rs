//! The commands README.md and docs/GUIDE.md show, run as they are written: every fenced `sh`
//! block that runs on local disk is copied out of the documents and run by `sh` in a fresh
//! directory that holds the files the documents name (`events.jsonl`, `logs/`, the fixtures),
//! with `filesink` the binary under test and `cargo run --` standing for it. A block must exit
//! 0. So the documents cannot drift from the binary: a flag renamed, a glob not expanded, a
//! path form refused, and this test fails naming the block.
//!
//! Blocks that need a server (an `s3://` or `kafka://` URL, a `…` to fill in) or a tool that
//! is not the binary (`./scripts/test`) are not run here; `needs_a_server` lists what they
//! are, and the S3 and Kafka suites run the same commands against real servers.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fenced `sh` blocks of a Markdown file, each with the line it starts on.
fn sh_blocks(path: &Path) -> Vec<(usize, String)> {
    let text = fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim_start() == "```sh" => open = Some((n + 1, String::new())),
            None => {}
            Some(_) if line.trim_start() == "```" => out.extend(open.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    out
}

/// Why a block is not run on local disk alone, if it is not.
fn needs_a_server(block: &str) -> Option<&'static str> {
    if block.contains("s3://") {
        Some("an S3 server")
    } else if block.contains("kafka://") {
        Some("a Kafka broker")
    } else if block.contains("./scripts/test") {
        Some("the whole suite")
    } else if block.contains('…') || block.contains("HOST:PORT") {
        Some("values to fill in")
    } else {
        None
    }
}

/// A directory holding what the documents' commands read.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let events = root.join("fixtures/input/events.jsonl");
    fs::create_dir_all(dir.path().join("fixtures/input")).unwrap();
    fs::copy(&events, dir.path().join("fixtures/input/events.jsonl")).unwrap();
    fs::copy(&events, dir.path().join("events.jsonl")).unwrap();
    fs::create_dir(dir.path().join("logs")).unwrap();
    let text = fs::read_to_string(&events).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (k, part) in lines.chunks(lines.len().div_ceil(3)).enumerate() {
        let mut body = part.join("\n");
        body.push('\n');
        fs::write(dir.path().join(format!("logs/app-{k}.jsonl")), body).unwrap();
    }
    dir
}

/// `PATH` with the binary under test first, and a `cargo` that runs it for `cargo run --`.
fn path_with_binary(dir: &Path) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_filesink"));
    let shims = dir.join(".shims");
    fs::create_dir(&shims).unwrap();
    let cargo = shims.join("cargo");
    fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n[ \"$1\" = run ] && [ \"$2\" = -- ] || exit 97\nshift 2\nexec '{}' \"$@\"\n",
            bin.display()
        ),
    )
    .unwrap();
    let filesink = shims.join("filesink");
    std::os::unix::fs::symlink(&bin, &filesink).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&cargo, fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_documented_commands_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    let mut not_run = Vec::new();
    for doc in ["README.md", "docs/GUIDE.md"] {
        for (line, block) in sh_blocks(&root.join(doc)) {
            if let Some(why) = needs_a_server(&block) {
                not_run.push(format!("{doc}:{line} ({why})"));
                continue;
            }
            let python = std::env::var("FILESINK_DELTA_PYTHON").ok();
            if block.contains("python") && python.is_none() {
                not_run.push(format!("{doc}:{line} (deltalake's Python reader)"));
                continue;
            }
            let dir = workspace();
            let path = path_with_binary(dir.path());
            let mut script = String::from("set -e\n");
            if let Some(python) = &python {
                script.push_str(&format!("python() {{ '{python}' \"$@\"; }}\n"));
            }
            script.push_str(&block);
            let o = Command::new("sh")
                .arg("-c")
                .arg(&script)
                .current_dir(dir.path())
                .env("PATH", path)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{doc}:{line} failed ({:?}):\n{block}\n--- stdout\n{}\n--- stderr\n{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            ran += 1;
        }
    }
    eprintln!("ran {ran} blocks; not run here: {}", not_run.join(", "));
    assert!(ran >= 5, "ran only {ran} blocks");
}
