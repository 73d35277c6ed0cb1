//! Processes of one Kafka consumer group through the real binary, on a broker of the test's
//! own (tansu): partitions handed between live jobs at each rebalance, and from a dead one;
//! every record visible exactly once. A test binary of its own, so that its processes do not
//! share the machine with the other Kafka tests.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::cli::{assert_exactly_once, run_expect};
use common::kafka::{
    assert_no_duplicate, broker_or_explain, log_of, produce, producer, sigterm, spawn, url, Case,
    OwnBroker, PARTITIONS,
};
use common::visible_parquet_ids;

/// Waits until `lake` shows at least `n` visible records; fails the test, with the logs, if
/// that takes too long or a process of `children` ends.
fn wait_for_visible_of(lake: &Path, n: usize, children: &mut [&mut Child], logs: &[PathBuf]) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while visible_parquet_ids(lake).len() < n {
        let ended = children.iter_mut().any(|c| c.try_wait().unwrap().is_some());
        if Instant::now() >= deadline || ended {
            let logs: Vec<String> = logs.iter().map(|l| log_of(l)).collect();
            panic!(
                "{n} records not visible in time ({} are)\n{}",
                visible_parquet_ids(lake).len(),
                logs.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `child`'s `log` holds `text`; fails the test if it ends first or takes a minute.
fn wait_for_line(child: &mut Child, log: &Path, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log_of(log).contains(text) {
        assert!(Instant::now() < deadline, "no `{text}`: {}", log_of(log));
        assert!(child.try_wait().unwrap().is_none(), "{}", log_of(log));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes of one consumer group share a topic's partitions, each a job of its own: two
/// start at once, a third joins, the first is killed holding partitions, a fourth joins and
/// takes the dead one's job back (releasing its partitions at start). No record is visible
/// twice at any step; all stop at a checkpoint on SIGTERM; a last run without the group reads
/// every partition on from where the lake stands, whichever job held it: every record once.
///
/// What the group assigns after a member died is tansu's to get right, and tansu 0.6 does
/// not: it keeps the generation when a member's session expires and hands the others their
/// old assignments (the guide says so). So the test asks nothing of the group's progress
/// after the kill; the lake's ledger keeps two live members from reading one partition
/// whatever the group says. The group runs on a broker of the test's own: its rebalances do
/// not wait on the other tests' load.
#[test]
fn a_consumer_group_of_processes_one_killed_and_one_added_holds_each_record_once() {
    if broker_or_explain().is_none() {
        return;
    }
    let own = tempfile::tempdir().unwrap();
    let own_broker = OwnBroker::start(own.path());
    let broker = own_broker.address();
    let mut c = Case::new(&broker, "group");
    c.source = url(&broker, &c.topic, "?group=lake-g");
    let (lake, topic) = (&c.lake, &c.topic);
    let p = producer(&broker, &[]);
    let args = c.args(&[
        "--checkpoint-every",
        "1s",
        "-v",
        "--kafka-config",
        "session.timeout.ms=6000",
        "--kafka-config",
        "heartbeat.interval.ms=500",
    ]);
    produce(&p, topic, PARTITIONS, 0..20_000);
    let logs: Vec<PathBuf> = (1..=4).map(|i| c.log(&format!("p{i}.log"))).collect();
    let mut first = spawn(&args, &logs[0]);
    let mut second = spawn(&args, &logs[1]);
    wait_for_visible_of(lake, 20_000, &mut [&mut first, &mut second], &logs);
    assert_no_duplicate(&visible_parquet_ids(lake), "two processes");

    // A third process joins: every partition is revoked, checkpointed, released and handed
    // out again, and the third takes its share.
    let mut third = spawn(&args, &logs[2]);
    wait_for_line(&mut third, &logs[2], "parts taken");
    produce(&p, topic, PARTITIONS, 20_000..40_000);
    wait_for_visible_of(
        lake,
        40_000,
        &mut [&mut first, &mut second, &mut third],
        &logs,
    );
    assert_no_duplicate(&visible_parquet_ids(lake), "a third process joined");

    // The first dies holding partitions, with records written since its last checkpoint; a
    // fourth takes its job back (the slot no live run holds).
    produce(&p, topic, PARTITIONS, 40_000..50_000);
    std::thread::sleep(Duration::from_millis(300));
    first.kill().unwrap();
    first.wait().unwrap();
    assert_no_duplicate(&visible_parquet_ids(lake), "the first was killed");
    produce(&p, topic, PARTITIONS, 50_000..60_000);
    let mut fourth = spawn(&args, &logs[3]);
    wait_for_line(&mut fourth, &logs[3], "resuming job");
    std::thread::sleep(Duration::from_secs(2));
    assert_no_duplicate(&visible_parquet_ids(lake), "a fourth process joined");

    for child in [&second, &third, &fourth] {
        sigterm(child);
    }
    for (child, log) in [
        (&mut second, &logs[1]),
        (&mut third, &logs[2]),
        (&mut fourth, &logs[3]),
    ] {
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{}", log_of(log));
    }
    assert_no_duplicate(&visible_parquet_ids(lake), "all stopped");
    let mut jobs: Vec<String> = std::fs::read_dir(lake.join("_filesink/jobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    jobs.sort();
    assert_eq!(jobs.len(), 3, "a job per process running at once: {jobs:?}");

    // Any job reads on any partition from where the lake stands in it.
    let rest = url(&broker, topic, "");
    let mut last = c.args(&["--until", "end"]);
    last[1] = &rest;
    run_expect(&last, 0);
    assert_exactly_once(&visible_parquet_ids(lake), 0..60_000);
}
