//! Prometheus metrics in the text exposition format (version 0.0.4), through the Prometheus
//! project's own Rust client, `prometheus-client`.
//!
//! Metric names follow controller-runtime's so CAPD dashboards keep working; reconcile errors
//! carry an extra `category` label (the `&'static str` from the failing error's `category()`).
//! The provider's own metrics are prefixed `capd_`: whether the Docker engine answers, and how
//! often it stopped answering.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::docker::Engine;

/// Upper bounds (seconds) of the reconcile duration histogram buckets.
pub const RECONCILE_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// A label set: `(name, value)` pairs, all known at compile time.
type Labels<const N: usize> = [(&'static str, &'static str); N];

/// Makes the reconcile histograms with controller-runtime's buckets.
#[derive(Debug, Clone, Copy)]
struct ReconcileHistogram;

impl MetricConstructor<Histogram> for ReconcileHistogram {
    fn new_metric(&self) -> Histogram {
        Histogram::new(RECONCILE_BUCKETS)
    }
}

/// The metric families, each registered once in [`Metrics::new`].
#[derive(Debug)]
struct Families {
    reconcile_total: Family<Labels<2>, Counter>,
    reconcile_errors: Family<Labels<2>, Counter>,
    reconcile_time: Family<Labels<1>, Histogram, ReconcileHistogram>,
    active_workers: Family<Labels<1>, Gauge>,
    max_concurrent: Family<Labels<1>, Gauge>,
    queue_depth: Family<Labels<2>, Gauge>,
    leader: Family<[(&'static str, String); 1], Gauge>,
    docker_engine_up: Family<Labels<0>, Gauge>,
    docker_engine_outages: Family<Labels<0>, Counter>,
    docker_engine_info: Family<[(&'static str, String); 2], Gauge>,
    crd_migrations: Family<[(&'static str, String); 2], Counter>,
    crd_migration_objects: Family<[(&'static str, String); 2], Counter>,
    crd_stored_versions: Family<[(&'static str, String); 1], Gauge>,
}

/// The process's metrics registry. Cheap to clone; every clone updates the same values.
///
/// A family is exposed once it has a series: the errors family after the first error, the leader
/// gauge only when leader election runs, as with controller-runtime, and the Docker engine's once
/// the controllers use it (a standby replica does not).
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    families: Arc<Families>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family declared and no series yet.
    pub fn new() -> Self {
        let families = Families {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(ReconcileHistogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            queue_depth: Family::default(),
            leader: Family::default(),
            docker_engine_up: Family::default(),
            docker_engine_outages: Family::default(),
            docker_engine_info: Family::default(),
            crd_migrations: Family::default(),
            crd_migration_objects: Family::default(),
            crd_stored_versions: Family::default(),
        };
        let mut registry = Registry::default();
        // Counters are registered without their `_total`, which the encoder appends.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller and result",
            families.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller and error category",
            families.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            families.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            families.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            families.max_concurrent.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of the work queue",
            families.queue_depth.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Whether this process is the leader (1) or a standby (0)",
            families.leader.clone(),
        );
        registry.register(
            "capd_docker_engine_up",
            "Whether the Docker engine answers (1) or cannot be reached (0)",
            families.docker_engine_up.clone(),
        );
        registry.register(
            "capd_docker_engine_outages",
            "Number of times the Docker engine stopped answering",
            families.docker_engine_outages.clone(),
        );
        registry.register(
            "capd_docker_engine_info",
            "The engine serving the Docker API (engine docker or podman, and its version); always 1",
            families.docker_engine_info.clone(),
        );
        registry.register(
            "capd_crd_migrations",
            "Passes of the CRD migrator per CRD, by result (success, or the error category)",
            families.crd_migrations.clone(),
        );
        registry.register(
            "capd_crd_migration_objects",
            "Objects the CRD migrator rewrote (phase StorageVersionMigration) or cleaned up (CleanupManagedFields)",
            families.crd_migration_objects.clone(),
        );
        registry.register(
            "capd_crd_stored_versions",
            "Number of versions in the CRD's status.storedVersions as the migrator last saw it (1 once migrated)",
            families.crd_stored_versions.clone(),
        );
        Self {
            registry: Arc::new(registry),
            families: Arc::new(families),
        }
    }

    /// Declares a controller so its series exist (at zero) before its first reconcile, and
    /// publishes its worker limit.
    pub fn register_controller(&self, controller: &'static str, max_concurrent_reconciles: u16) {
        let families = &self.families;
        for result in ["success", "error"] {
            let _ = families
                .reconcile_total
                .get_or_create(&[("controller", controller), ("result", result)]);
        }
        // A series appears once it is first touched; the read guards are not needed.
        let _ = families
            .reconcile_time
            .get_or_create(&[("controller", controller)]);
        let _ = families
            .active_workers
            .get_or_create(&[("controller", controller)]);
        let _ = families
            .queue_depth
            .get_or_create(&[("controller", controller), ("name", controller)]);
        families
            .max_concurrent
            .get_or_create(&[("controller", controller)])
            .set(i64::from(max_concurrent_reconciles));
    }

    /// Starts timing one reconcile of `controller`. Call [`ReconcileTimer::finish`] with its
    /// outcome; a timer dropped unfinished (the reconcile was cancelled) only releases its worker.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        self.families
            .active_workers
            .get_or_create(&[("controller", controller)])
            .inc();
        ReconcileTimer {
            metrics: self.clone(),
            controller,
            started: Instant::now(),
        }
    }

    fn record(&self, controller: &'static str, seconds: f64, outcome: Result<(), &'static str>) {
        let families = &self.families;
        let result = match outcome {
            Ok(()) => "success",
            Err(category) => {
                families
                    .reconcile_errors
                    .get_or_create(&[("controller", controller), ("category", category)])
                    .inc();
                "error"
            }
        };
        families
            .reconcile_total
            .get_or_create(&[("controller", controller), ("result", result)])
            .inc();
        families
            .reconcile_time
            .get_or_create(&[("controller", controller)])
            .observe(seconds);
    }

    /// Publishes how many objects wait in `controller`'s queue.
    pub fn set_queue_depth(&self, controller: &'static str, depth: u64) {
        self.families
            .queue_depth
            .get_or_create(&[("controller", controller), ("name", controller)])
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Publishes whether this process holds the leader election Lease named `lease` (its `name`
    /// label).
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.families
            .leader
            .get_or_create(&[("name", lease.to_owned())])
            .set(i64::from(leading));
    }

    /// Publishes whether the Docker engine answers; each change to `false` counts one outage.
    /// The first call (with `true` when the engine answered at start-up) declares both series.
    pub fn set_docker_engine_up(&self, up: bool) {
        let families = &self.families;
        let gauge = families.docker_engine_up.get_or_create(&[]);
        let outages = families.docker_engine_outages.get_or_create(&[]);
        if !up && gauge.get() != 0 {
            outages.inc();
        }
        gauge.set(i64::from(up));
    }

    /// Publishes which engine serves the Docker API.
    pub fn set_docker_engine(&self, engine: &Engine) {
        self.families
            .docker_engine_info
            .get_or_create(&[
                ("engine", engine.name().to_string()),
                ("version", engine.version.clone()),
            ])
            .set(1);
    }

    /// Counts one pass of the CRD migrator over `crd`: `Ok(())` or `Err(category)`.
    pub fn crd_migration_finished(&self, crd: &str, outcome: Result<(), &'static str>) {
        let result = outcome.err().unwrap_or("success");
        self.families
            .crd_migrations
            .get_or_create(&[("crd", crd.to_owned()), ("result", result.to_owned())])
            .inc();
    }

    /// Counts one object the CRD migrator wrote in `phase` (its name).
    pub fn crd_migration_object(&self, crd: &str, phase: &'static str) {
        self.families
            .crd_migration_objects
            .get_or_create(&[("crd", crd.to_owned()), ("phase", phase.to_owned())])
            .inc();
    }

    /// Publishes how many versions `crd` lists in `status.storedVersions`.
    pub fn set_crd_stored_versions(&self, crd: &str, count: usize) {
        self.families
            .crd_stored_versions
            .get_or_create(&[("crd", crd.to_owned())])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
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
        let workers = self
            .metrics
            .families
            .active_workers
            .get_or_create(&[("controller", self.controller)]);
        if workers.get() > 0 {
            workers.dec();
        }
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
