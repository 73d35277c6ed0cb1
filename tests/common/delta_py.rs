//! The independent reader of the Delta tests: delta-rs, through the `deltalake` Python package
//! (`tests/delta/read_table.py`), run with the Python of `FILESINK_DELTA_PYTHON`
//! (`./scripts/test` installs `deltalake` into `target/delta-py` and sets it).

use std::path::PathBuf;
use std::process::Command;

use object_store::aws::AmazonS3ConfigKey;
use serde_json::Value;

use super::backend::{Backend, Kind};

/// The Python with `deltalake`, or `None` (with a loud notice) where none is set up; in CI a
/// missing reader fails the test.
pub fn reader_or_explain() -> Option<DeltaReader> {
    match std::env::var_os("FILESINK_DELTA_PYTHON") {
        Some(python) => Some(DeltaReader {
            python: PathBuf::from(python),
        }),
        None if std::env::var_os("CI").is_some() => panic!(
            "CI must read the Delta tables with delta-rs: FILESINK_DELTA_PYTHON is not set \
             (./scripts/test installs deltalake into target/delta-py)"
        ),
        None => {
            eprintln!(
                "\n*** DELTA READ-BACK NOT RUN: FILESINK_DELTA_PYTHON is not set. Run \
                 `./scripts/test`, or `python3 -m venv target/delta-py && target/delta-py/bin/pip \
                 install deltalake==1.6.6 pyarrow==26.0.1` and export \
                 FILESINK_DELTA_PYTHON=$PWD/target/delta-py/bin/python ***\n"
            );
            None
        }
    }
}

/// Where delta-rs finds a backend's table: its URI and the environment it needs.
pub fn table_location(b: &Backend) -> (String, Vec<(String, String)>) {
    match &b.kind {
        Kind::Local(dir) => (dir.path().display().to_string(), Vec::new()),
        Kind::Memory(_) => panic!("delta-rs cannot read the in-memory store"),
        Kind::S3 {
            bucket,
            prefix,
            options,
            ..
        } => {
            let get = |key: AmazonS3ConfigKey, env: &str| match options {
                Some(o) => o
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default(),
                None => std::env::var(env).unwrap_or_default(),
            };
            let env = vec![
                (
                    "FILESINK_DELTA_S3_ENDPOINT".to_owned(),
                    get(AmazonS3ConfigKey::Endpoint, "AWS_ENDPOINT"),
                ),
                (
                    "AWS_ACCESS_KEY_ID".to_owned(),
                    get(AmazonS3ConfigKey::AccessKeyId, "AWS_ACCESS_KEY_ID"),
                ),
                (
                    "AWS_SECRET_ACCESS_KEY".to_owned(),
                    get(AmazonS3ConfigKey::SecretAccessKey, "AWS_SECRET_ACCESS_KEY"),
                ),
                (
                    "AWS_REGION".to_owned(),
                    get(AmazonS3ConfigKey::Region, "AWS_REGION"),
                ),
            ];
            (format!("s3://{bucket}/{prefix}"), env)
        }
    }
}

/// delta-rs, reading one table.
pub struct DeltaReader {
    python: PathBuf,
}

impl DeltaReader {
    /// Runs `read_table.py URI ARGS…` and returns its JSON.
    pub fn run(&self, location: &(String, Vec<(String, String)>), args: &[&str]) -> Value {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/delta/read_table.py");
        let out = Command::new(&self.python)
            .arg(script)
            .arg(&location.0)
            .args(args)
            .envs(location.1.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run the Python of FILESINK_DELTA_PYTHON");
        assert!(
            out.status.success(),
            "delta-rs could not read `{}` ({args:?}): {}",
            location.0,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("read_table.py prints JSON")
    }

    /// The `id` column of the table (at `version`).
    pub fn ids(
        &self,
        location: &(String, Vec<(String, String)>),
        version: Option<i64>,
    ) -> Vec<i64> {
        let v = version.map(|v| v.to_string());
        let mut args = vec!["ids"];
        if let Some(v) = &v {
            args.extend(["--version", v]);
        }
        let mut ids: Vec<i64> = self.run(location, &args)["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// `history()`, newest first, as delta-rs reports it.
    pub fn history(&self, location: &(String, Vec<(String, String)>)) -> Vec<Value> {
        self.run(location, &["history"])["history"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// `transaction_version(app_id)` (at `version`).
    pub fn txn(
        &self,
        location: &(String, Vec<(String, String)>),
        app_id: &str,
        version: Option<i64>,
    ) -> Option<i64> {
        let v = version.map(|v| v.to_string());
        let mut args = vec!["txn", app_id];
        if let Some(v) = &v {
            args.extend(["--version", v]);
        }
        self.run(location, &args)["txn"].as_i64()
    }

    /// The live files, as `get_add_actions(flatten=True)` rows.
    pub fn files(&self, location: &(String, Vec<(String, String)>)) -> Vec<Value> {
        self.run(location, &["files"])["files"]
            .as_array()
            .unwrap()
            .clone()
    }
}
