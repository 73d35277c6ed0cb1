//! Helpers of the CLI tests: run the real binary, read its output, check ids.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/input")
        .join(name)
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn filesink(args: &[&str]) -> Output {
    filesink_in(args, &[])
}

/// `filesink args` with `env` set over the test's own environment (a backend's
/// `Backend::cli_url`).
pub fn filesink_in(args: &[&str], env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run filesink")
}

/// Runs `filesink args` with standard input read from `stdin_file`.
pub fn filesink_with_stdin(args: &[&str], stdin_file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(std::fs::File::open(stdin_file).unwrap())
        .output()
        .expect("run filesink")
}

/// Starts `filesink args` with standard input a pipe the test writes to (taken from the
/// child's `stdin`), standard output dropped and standard error kept.
pub fn spawn_with_piped_stdin(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start filesink")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
pub fn run_ok(args: &[&str]) -> Output {
    run_expect(args, 0)
}

#[track_caller]
pub fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(o)))
}

#[track_caller]
pub fn assert_exactly_once(ids: &[i64], expected: impl IntoIterator<Item = i64>) {
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for id in ids {
        *counts.entry(*id).or_default() += 1;
    }
    if let Err(wrong) = filesink::conformance::harness::exactly_once(&counts, expected) {
        panic!("{} ids visible: {wrong}", ids.len());
    }
}

/// Runs `filesink args` and asserts its exit code, showing both outputs if it differs.
#[track_caller]
pub fn run_expect(args: &[&str], code: i32) -> Output {
    run_expect_in(args, &[], code)
}

/// [`run_expect`] with `env` set over the test's own environment ([`filesink_in`]).
#[track_caller]
pub fn run_expect_in(args: &[&str], env: &[(String, String)], code: i32) -> Output {
    let o = filesink_in(args, env);
    assert_eq!(
        o.status.code(),
        Some(code),
        "filesink {args:?}\n--- stdout\n{}\n--- stderr\n{}",
        stdout(&o),
        stderr(&o)
    );
    o
}
