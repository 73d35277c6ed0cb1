//! Operability: the protocol steps show as `tracing` spans with the fields an operator filters
//! by, and the committed-files counter of the `metrics` facade counts the files committed.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use filesink::protocol::metric;
use filesink::{Coordinator, FileFormat, RollingPolicy, Sink};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as recorded: its name and its fields (values as text).
#[derive(Debug, Clone)]
struct SeenSpan {
    name: &'static str,
    metadata: &'static Metadata<'static>,
    fields: HashMap<String, String>,
}

/// Records every span's name and fields, and keeps the stack of entered spans (the library
/// records some fields on `Span::current()`); ignores events.
#[derive(Default, Clone)]
struct Spans(Arc<Mutex<Vec<SeenSpan>>>, Arc<Mutex<Vec<Id>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut spans = self.0.lock().unwrap();
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        spans.push(SeenSpan {
            name: attrs.metadata().name(),
            metadata: attrs.metadata(),
            fields,
        });
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.0.lock().unwrap();
        let seen = &mut spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(&mut seen.fields));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, span: &Id) {
        self.1.lock().unwrap().push(span.clone());
    }
    fn exit(&self, span: &Id) {
        let mut stack = self.1.lock().unwrap();
        if let Some(i) = stack.iter().rposition(|s| s == span) {
            stack.remove(i);
        }
    }
    fn current_span(&self) -> tracing_core::span::Current {
        match self.1.lock().unwrap().last() {
            Some(id) => {
                let metadata = self.0.lock().unwrap()[id.into_u64() as usize - 1].metadata;
                tracing_core::span::Current::new(id.clone(), metadata)
            }
            None => tracing_core::span::Current::none(),
        }
    }
}

/// Counts every counter by name; gauges and histograms are dropped.
#[derive(Default)]
struct Counters(Mutex<HashMap<String, Arc<AtomicU64>>>);

impl Counters {
    fn get(&self, name: &str) -> u64 {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }
}

impl metrics::Recorder for Counters {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let counter = self
            .0
            .lock()
            .unwrap()
            .entry(key.name().to_string())
            .or_default()
            .clone();
        metrics::Counter::from_arc(counter)
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

// A current-thread runtime: the thread-local subscriber and recorder see every step the
// coordinator runs on this thread.
#[tokio::test(flavor = "current_thread")]
async fn protocol_steps_are_spans_and_committed_files_are_counted() {
    let spans = Spans::default();
    let _subscriber = tracing::subscriber::set_default(spans.clone());
    let counters = Counters::default();
    let _recorder = metrics::set_default_local_recorder(&counters);

    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::local(dir.path())
        .unwrap()
        .format(FileFormat::parquet())
        .bucket_assigner(filesink::bucket::HivePartitioner::new(["day"]).unwrap())
        .rolling_policy(RollingPolicy::default())
        .build()
        .unwrap();
    let mut c = Coordinator::open(&sink, "obs", 1).await.unwrap();
    let mut committed = 0;
    for i in 0..3 {
        c.writer().write(&batch(i * 10, 10)).await.unwrap();
        let report = c.checkpoint(&(i * 10 + 10)).await.unwrap();
        committed += report.committed_files as u64;
    }
    c.close().await.unwrap();
    assert!(committed > 0);

    let seen = spans.0.lock().unwrap().clone();
    let named = |name: &str| -> Vec<&SeenSpan> { seen.iter().filter(|s| s.name == name).collect() };
    let field = |s: &SeenSpan, f: &str| s.fields.get(f).cloned().unwrap_or_default();

    let open = named("open");
    assert_eq!(open.len(), 1, "{seen:#?}");
    assert_eq!(field(open[0], "job"), "obs");

    let checkpoints = named("checkpoint");
    assert_eq!(checkpoints.len(), 3, "{seen:#?}");
    for (i, s) in checkpoints.iter().enumerate() {
        assert_eq!(field(s, "job"), "obs");
        assert_eq!(field(s, "checkpoint"), (i + 1).to_string());
        assert!(s.fields.contains_key("duration_ms"), "{s:?}");
    }
    for (i, s) in named("prepare_commit").iter().enumerate() {
        assert_eq!(field(s, "writer"), "obs_0");
        assert_eq!(field(s, "checkpoint"), (i + 1).to_string());
    }
    assert_eq!(named("prepare_commit").len(), 3);
    let manifests = named("manifest_write");
    assert_eq!(manifests.len(), 3, "{seen:#?}");
    assert!(
        field(manifests[2], "file").ends_with("3.json"),
        "{:?}",
        manifests[2]
    );
    // The restore's commit call had nothing to commit; the checkpoints' calls had files.
    let commits: Vec<&SeenSpan> = named("commit")
        .into_iter()
        .filter(|s| field(s, "files") != "0")
        .collect();
    assert!(!commits.is_empty(), "{seen:#?}");
    let committed_in_spans: u64 = commits
        .iter()
        .map(|s| field(s, "committed").parse::<u64>().unwrap_or(0))
        .sum();
    assert_eq!(committed_in_spans, committed);
    assert!(commits.iter().all(|s| field(s, "writer") == "obs_0"));

    assert_eq!(counters.get(metric::FILES_COMMITTED), committed);
    assert!(counters.get(metric::BYTES_COMMITTED) > 0);
    assert_eq!(counters.get(metric::RECORDS_COMMITTED), 30);
}

/// `--metrics` prints the library's metrics when the command ends: as JSON with
/// `--log-format json` (the committed files and records equal what the lake holds), as a table
/// otherwise; and `abort` counts the leftovers it removes.
#[test]
fn the_cli_prints_a_metrics_summary_of_the_run() {
    use common::cli::*;
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let o = run_ok(&[
        "--metrics",
        "--log-format",
        "json",
        "ingest",
        s(&fixture("events.jsonl")),
        "--to",
        s(&lake),
        "--partition-by",
        "day",
        "--checkpoint-every",
        "1000rows",
    ]);
    let last = stderr(&o).lines().last().unwrap_or_default().to_string();
    let v: serde_json::Value =
        serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    let m = &v["metrics"];
    assert_eq!(
        m[metric::FILES_COMMITTED].as_u64(),
        Some(visible_files(&lake).len() as u64),
        "{v}"
    );
    assert_eq!(m[metric::RECORDS_COMMITTED], 5000, "{v}");
    assert!(
        m[metric::CHECKPOINT_DURATION]["count"].as_u64() >= Some(5),
        "{v}"
    );

    // A run that crashed before its first checkpoint leaves an in-progress file; abort
    // removes it and counts it.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let sink = Sink::local(&lake)
            .unwrap()
            .format(FileFormat::parquet())
            .build()
            .unwrap();
        let mut c = Coordinator::open(&sink, "crashed", 1).await.unwrap();
        c.writer().write(&batch(0, 10)).await.unwrap();
        drop(c);
        filesink::storage::ownership::settle_releases().await;
    });
    let o = run_ok(&["--metrics", "--log-format", "json", "abort", s(&lake)]);
    let last = stderr(&o).lines().last().unwrap_or_default().to_string();
    let v: serde_json::Value =
        serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(v["metrics"][metric::LEFTOVERS_REMOVED], 1, "{v}");

    let o = run_ok(&["--metrics", "ls", s(&lake)]);
    assert!(stderr(&o).starts_with("metrics:"), "{}", stderr(&o));
}
