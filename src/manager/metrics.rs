//! Prometheus metrics in the text exposition format (version 0.0.4), hand-rolled: a handful of
//! counters, gauges and one histogram do not justify a metrics library.
//!
//! Metric names follow controller-runtime's so CAPD dashboards keep working; reconcile errors
//! carry an extra `category` label (the `&'static str` from the failing error's `category()`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// The leader election Lease name, as the `name` label of the leader gauge.
const LEASE_LABEL: &str = super::leader::LEASE_NAME;

/// Upper bounds (seconds) of the reconcile duration histogram buckets.
pub const RECONCILE_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; RECONCILE_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bucket, bound) in self.buckets.iter_mut().zip(RECONCILE_BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Debug, Default)]
struct Registry {
    reconcile_total: BTreeMap<(&'static str, &'static str), u64>,
    reconcile_errors: BTreeMap<(&'static str, &'static str), u64>,
    reconcile_time: BTreeMap<&'static str, Histogram>,
    active_workers: BTreeMap<&'static str, u64>,
    max_concurrent: BTreeMap<&'static str, u16>,
    queue_depth: BTreeMap<&'static str, u64>,
    leader: Option<bool>,
}

/// The process's metrics registry. Cheap to clone; every clone updates the same values.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Declares a controller so its series exist (at zero) before its first reconcile, and
    /// publishes its worker limit.
    pub fn register_controller(&self, controller: &'static str, max_concurrent_reconciles: u16) {
        let mut registry = self.lock();
        for result in ["success", "error"] {
            registry
                .reconcile_total
                .entry((controller, result))
                .or_default();
        }
        registry.reconcile_time.entry(controller).or_default();
        registry.active_workers.entry(controller).or_default();
        registry.queue_depth.entry(controller).or_default();
        registry
            .max_concurrent
            .insert(controller, max_concurrent_reconciles);
    }

    /// Starts timing one reconcile of `controller`. Call [`ReconcileTimer::finish`] with its
    /// outcome; a timer dropped unfinished (the reconcile was cancelled) only releases its worker.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        *self.lock().active_workers.entry(controller).or_default() += 1;
        ReconcileTimer {
            metrics: self.clone(),
            controller,
            started: Instant::now(),
        }
    }

    fn record(&self, controller: &'static str, seconds: f64, outcome: Result<(), &'static str>) {
        let mut registry = self.lock();
        let result = match outcome {
            Ok(()) => "success",
            Err(category) => {
                *registry
                    .reconcile_errors
                    .entry((controller, category))
                    .or_default() += 1;
                "error"
            }
        };
        *registry
            .reconcile_total
            .entry((controller, result))
            .or_default() += 1;
        registry
            .reconcile_time
            .entry(controller)
            .or_default()
            .observe(seconds);
    }

    /// Publishes how many objects wait in `controller`'s queue.
    pub fn set_queue_depth(&self, controller: &'static str, depth: u64) {
        self.lock().queue_depth.insert(controller, depth);
    }

    /// Publishes whether this process holds the leader election Lease.
    pub fn set_leader(&self, leading: bool) {
        self.lock().leader = Some(leading);
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let registry = self.lock();
        let mut out = String::new();

        family(
            &mut out,
            "controller_runtime_reconcile_total",
            "counter",
            "Total number of reconciliations per controller and result.",
        );
        for ((controller, result), value) in &registry.reconcile_total {
            sample(
                &mut out,
                "controller_runtime_reconcile_total",
                &[("controller", controller), ("result", result)],
                *value as f64,
            );
        }

        family(
            &mut out,
            "controller_runtime_reconcile_errors_total",
            "counter",
            "Total number of reconciliation errors per controller and error category.",
        );
        for ((controller, category), value) in &registry.reconcile_errors {
            sample(
                &mut out,
                "controller_runtime_reconcile_errors_total",
                &[("controller", controller), ("category", category)],
                *value as f64,
            );
        }

        let histogram_name = "controller_runtime_reconcile_time_seconds";
        family(
            &mut out,
            histogram_name,
            "histogram",
            "Length of time per reconciliation per controller.",
        );
        for (controller, histogram) in &registry.reconcile_time {
            for (bound, count) in RECONCILE_BUCKETS.iter().zip(histogram.buckets) {
                let le = bound.to_string();
                sample(
                    &mut out,
                    &format!("{histogram_name}_bucket"),
                    &[("controller", controller), ("le", &le)],
                    count as f64,
                );
            }
            sample(
                &mut out,
                &format!("{histogram_name}_bucket"),
                &[("controller", controller), ("le", "+Inf")],
                histogram.count as f64,
            );
            sample(
                &mut out,
                &format!("{histogram_name}_sum"),
                &[("controller", controller)],
                histogram.sum,
            );
            sample(
                &mut out,
                &format!("{histogram_name}_count"),
                &[("controller", controller)],
                histogram.count as f64,
            );
        }

        family(
            &mut out,
            "controller_runtime_active_workers",
            "gauge",
            "Number of currently used workers per controller.",
        );
        for (controller, value) in &registry.active_workers {
            sample(
                &mut out,
                "controller_runtime_active_workers",
                &[("controller", controller)],
                *value as f64,
            );
        }

        family(
            &mut out,
            "controller_runtime_max_concurrent_reconciles",
            "gauge",
            "Maximum number of concurrent reconciles per controller.",
        );
        for (controller, value) in &registry.max_concurrent {
            sample(
                &mut out,
                "controller_runtime_max_concurrent_reconciles",
                &[("controller", controller)],
                f64::from(*value),
            );
        }

        family(
            &mut out,
            "workqueue_depth",
            "gauge",
            "Current depth of the work queue.",
        );
        for (controller, value) in &registry.queue_depth {
            sample(
                &mut out,
                "workqueue_depth",
                &[("controller", controller), ("name", controller)],
                *value as f64,
            );
        }

        if let Some(leading) = registry.leader {
            family(
                &mut out,
                "leader_election_master_status",
                "gauge",
                "Whether this process is the leader (1) or a standby (0).",
            );
            sample(
                &mut out,
                "leader_election_master_status",
                &[("name", LEASE_LABEL)],
                if leading { 1.0 } else { 0.0 },
            );
        }
        out
    }
}

/// Times one reconcile; see [`Metrics::reconcile_started`].
#[derive(Debug)]
#[must_use = "call finish() with the reconcile's outcome"]
pub struct ReconcileTimer {
    metrics: Metrics,
    controller: &'static str,
    started: Instant,
}

impl ReconcileTimer {
    /// Records the reconcile: `Ok(())`, or `Err(category)` with the error's `category()`.
    pub fn finish(self, outcome: Result<(), &'static str>) {
        let seconds = self.started.elapsed().as_secs_f64();
        self.metrics.record(self.controller, seconds, outcome);
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        let mut registry = self.metrics.lock();
        if let Some(workers) = registry.active_workers.get_mut(self.controller) {
            *workers = workers.saturating_sub(1);
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"{}\"", escape_label_value(value));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Escapes `\`, `"` and newlines as the exposition format requires.
fn escape_label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
