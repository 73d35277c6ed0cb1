//! Helpers of the Kafka tests: the broker `./scripts/test` starts (tansu), topics, and a
//! producer of records with ids.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use arrow::datatypes::{DataType, Field, Schema};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use super::cli::s;

/// Partitions of a test's topic ([`Case`]).
pub const PARTITIONS: i32 = 4;

/// How long a call to the broker may take in a test.
pub const WAIT: Duration = Duration::from_secs(60);

/// The broker's address (`FILESINK_KAFKA`, which `./scripts/test` exports); in CI a missing
/// broker fails the test, elsewhere it says loudly that the Kafka checks did not run.
pub fn broker_or_explain() -> Option<String> {
    match std::env::var("FILESINK_KAFKA") {
        Ok(b) => Some(b),
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("CI must run the Kafka checks: FILESINK_KAFKA is not set (./scripts/test starts tansu)")
        }
        Err(_) => {
            eprintln!(
                "\n*** KAFKA CHECKS NOT RUN: no broker configured. Run `./scripts/test` (starts \
                 tansu on 127.0.0.1 and exports FILESINK_KAFKA), or set FILESINK_KAFKA and \
                 FILESINK_TANSU_BIN. ***\n"
            );
            None
        }
    }
}

/// A new topic of `partitions` partitions, named after `what` and the process.
pub fn create_topic(broker: &str, what: &str, partitions: i32) -> String {
    let name = format!("{what}-{}", std::process::id());
    let bin = std::env::var("FILESINK_TANSU_BIN").expect("FILESINK_TANSU_BIN (scripts/tansu)");
    let out = Command::new(bin)
        .args(["topic", "create", "--broker", &format!("tcp://{broker}")])
        .args(["--partitions", &partitions.to_string(), &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "creating topic {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}

/// An idempotent producer, with `extra` settings.
pub fn producer(broker: &str, extra: &[(&str, &str)]) -> BaseProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create().unwrap()
}

/// Sends `{"id": id}` for each of `ids`, keyed by id, into partition `id % partitions` (so
/// each partition holds a known share), and waits until the broker has them all.
pub fn produce(p: &BaseProducer, topic: &str, partitions: i32, ids: std::ops::Range<i64>) {
    for id in ids {
        let (key, value) = (id.to_string(), format!("{{\"id\":{id}}}"));
        let partition = i32::try_from(id % i64::from(partitions)).unwrap();
        let mut record = BaseRecord::to(topic)
            .key(&key)
            .payload(&value)
            .partition(partition);
        loop {
            match p.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    p.poll(Duration::from_millis(20));
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
    }
    p.flush(WAIT).unwrap();
}

/// A broker of a test's own (tansu, its log in SQLite under a directory), for tests that stop
/// and start it; killed when dropped.
pub struct OwnBroker {
    dir: std::path::PathBuf,
    port: u16,
    child: Option<std::process::Child>,
}

impl OwnBroker {
    /// Starts one on a free port, its log in `dir`.
    pub fn start(dir: &std::path::Path) -> OwnBroker {
        std::fs::create_dir_all(dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut broker = OwnBroker {
            dir: dir.to_owned(),
            port,
            child: None,
        };
        broker.restart();
        broker
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills it (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port with the same log, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let bin = std::env::var("FILESINK_TANSU_BIN").expect("FILESINK_TANSU_BIN (scripts/tansu)");
        let url = format!("tcp://{}", self.address());
        let log = std::fs::File::create(self.dir.join("broker.log")).unwrap();
        let child = Command::new(bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            // tansu reads the path of a `sqlite://` URL relative to its working directory.
            .args(["--storage-engine", "sqlite://tansu.db"])
            .current_dir(&self.dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = std::time::Instant::now() + WAIT;
        while std::net::TcpStream::connect(self.address()).is_err() {
            assert!(std::time::Instant::now() < deadline, "tansu did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Deletes `topic`.
pub fn delete_topic(broker: &str, topic: &str) {
    let bin = std::env::var("FILESINK_TANSU_BIN").expect("FILESINK_TANSU_BIN (scripts/tansu)");
    let out = Command::new(bin)
        .args([
            "topic",
            "delete",
            "--broker",
            &format!("tcp://{broker}"),
            topic,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "deleting topic {topic}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The schema file of records `{"id": …}`.
pub fn schema_file(dir: &Path) -> String {
    let path = dir.join("schema.json");
    let schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
    std::fs::write(&path, serde_json::to_vec(&schema).unwrap()).unwrap();
    s(&path).to_owned()
}

pub fn url(broker: &str, topic: &str, query: &str) -> String {
    format!("kafka://{broker}/{topic}{query}")
}

/// Starts `filesink args`, its standard output and error in `log` (read with [`log_of`]).
pub fn spawn(args: &[&str], log: &Path) -> Child {
    let file = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_filesink"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap()
}

pub fn log_of(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// One test's topic (a new one of `PARTITIONS` partitions), and its lake and schema file in
/// a directory of its own.
pub struct Case {
    pub dir: tempfile::TempDir,
    pub lake: PathBuf,
    pub schema: String,
    pub topic: String,
    pub source: String,
}

impl Case {
    pub fn new(broker: &str, what: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let (lake, schema) = (dir.path().join("lake"), schema_file(dir.path()));
        let topic = create_topic(broker, what, PARTITIONS);
        let source = url(broker, &topic, "");
        Case {
            dir,
            lake,
            schema,
            topic,
            source,
        }
    }

    /// `ingest <topic> --to <lake> --schema <schema>`, then `extra`.
    pub fn args<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["ingest", &self.source, "--to", s(&self.lake)];
        args.extend(["--schema", &self.schema]);
        args.extend_from_slice(extra);
        args
    }

    /// A file for a run's output, in the test's directory.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

pub fn sigterm(child: &Child) {
    let pid = i32::try_from(child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
}

/// Asserts that no id of `ids` (sorted) is there twice.
pub fn assert_no_duplicate(ids: &[i64], when: &str) {
    let twice = ids.windows(2).find(|w| w[0] == w[1]);
    assert!(
        twice.is_none(),
        "{when}: id {:?} visible twice",
        twice.map(|w| w[0])
    );
}
