//! `--metrics`: the library's metrics ([`filesink::protocol::metric`], through the `metrics`
//! facade) gathered over the run and printed to standard error when the command ends, as a
//! table or, with `--log-format json`, one JSON object.
//!
//! Counters are summed, gauges keep their last value, histograms keep count, sum, min and max.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};
use serde_json::{json, Value};

use super::log::LogFormat;

/// What one histogram saw.
#[derive(Debug, Default)]
struct Summary {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

#[derive(Debug, Default)]
struct SummaryCell(Mutex<Summary>);

impl HistogramFn for SummaryCell {
    fn record(&self, value: f64) {
        let mut s = self.0.lock().unwrap();
        if s.count == 0 {
            (s.min, s.max) = (value, value);
        } else {
            s.min = s.min.min(value);
            s.max = s.max.max(value);
        }
        s.count += 1;
        s.sum += value;
    }
}

#[derive(Debug, Default)]
struct Metrics {
    counters: BTreeMap<String, Arc<AtomicU64>>,
    gauges: BTreeMap<String, Arc<AtomicU64>>,
    histograms: BTreeMap<String, Arc<SummaryCell>>,
}

/// The run's metrics: a recorder, and what it recorded.
#[derive(Debug, Clone, Default)]
pub struct Collector(Arc<Mutex<Metrics>>);

/// `name{label="value",…}`.
fn name_of(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}=\"{}\"", l.key(), l.value()))
        .collect();
    if labels.is_empty() {
        key.name().to_string()
    } else {
        format!("{}{{{}}}", key.name(), labels.join(","))
    }
}

impl metrics::Recorder for Collector {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut m = self.0.lock().unwrap();
        Counter::from_arc(m.counters.entry(name_of(key)).or_default().clone())
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut m = self.0.lock().unwrap();
        Gauge::from_arc(m.gauges.entry(name_of(key)).or_default().clone())
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut m = self.0.lock().unwrap();
        Histogram::from_arc(m.histograms.entry(name_of(key)).or_default().clone())
    }
}

impl Collector {
    /// Installs a collector as the process's recorder; `None` if one is installed already.
    pub fn install() -> Option<Collector> {
        let c = Collector::default();
        metrics::set_global_recorder(c.clone()).ok()?;
        filesink::protocol::metric::describe();
        Some(c)
    }

    /// Everything recorded, as JSON: counters and gauges as numbers, histograms as
    /// `{count, sum, min, max}`.
    pub fn to_json(&self) -> Value {
        let m = self.0.lock().unwrap();
        let mut out = serde_json::Map::new();
        for (name, c) in &m.counters {
            out.insert(name.clone(), json!(c.load(Ordering::Relaxed)));
        }
        for (name, g) in &m.gauges {
            out.insert(
                name.clone(),
                json!(f64::from_bits(g.load(Ordering::Relaxed))),
            );
        }
        for (name, h) in &m.histograms {
            let s = h.0.lock().unwrap();
            out.insert(
                name.clone(),
                json!({"count": s.count, "sum": s.sum, "min": s.min, "max": s.max}),
            );
        }
        Value::Object(out)
    }

    /// Writes the summary to standard error.
    pub fn print(&self, format: LogFormat) {
        let v = self.to_json();
        match format {
            LogFormat::Json => eprintln!("{}", json!({ "metrics": v })),
            LogFormat::Text => {
                eprintln!("metrics:");
                for (name, value) in v.as_object().expect("an object") {
                    match value {
                        Value::Object(h) => eprintln!(
                            "  {name}: count {} sum {:.6} min {:.6} max {:.6}",
                            h["count"],
                            h["sum"].as_f64().unwrap_or(0.0),
                            h["min"].as_f64().unwrap_or(0.0),
                            h["max"].as_f64().unwrap_or(0.0)
                        ),
                        other => eprintln!("  {name}: {other}"),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use metrics::Recorder;

    use super::*;

    #[test]
    fn counters_sum_gauges_keep_the_last_value_histograms_summarise() {
        let c = Collector::default();
        let meta = Metadata::new("t", metrics::Level::INFO, None);
        let key = Key::from_static_name("files");
        c.register_counter(&key, &meta).increment(2);
        c.register_counter(&key, &meta).increment(3);
        c.register_gauge(&Key::from_static_name("pending"), &meta)
            .set(4.0);
        let h = c.register_histogram(&Key::from_static_name("secs"), &meta);
        h.record(0.5);
        h.record(1.5);
        let v = c.to_json();
        assert_eq!(v["files"], 5);
        assert_eq!(v["pending"], 4.0);
        assert_eq!(v["secs"]["count"], 2);
        assert_eq!(v["secs"]["sum"], 2.0);
        assert_eq!(v["secs"]["min"], 0.5);
        assert_eq!(v["secs"]["max"], 1.5);
    }
}
