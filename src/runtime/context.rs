//! The state shared by every controller as `Arc<Context>`, the [`ControllerTask`] each controller
//! runs as, and the namespace the process's Leases live in.
//!
//! The container runtime is not here: the Cluster API controllers and the Gardener extension
//! keep it in contexts of their own, built from this one.

use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use super::feature_gates::FeatureGates;
use super::health::Readiness;
use super::metrics::Metrics;

/// `reportingController` of our Kubernetes Events.
pub const EVENT_REPORTER: &str = "capd-rs-controller-manager";

/// The label that `--watch-filter` selects on.
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";

/// Namespace of the process's Leases when `POD_NAMESPACE` is not set.
pub const DEFAULT_LEASE_NAMESPACE: &str = "capd-system";

/// The namespace of the Leases this process holds (leader election, Gardener's heartbeat):
/// `POD_NAMESPACE` if set and not empty, else `capd-system`.
pub fn lease_namespace(pod_namespace: Option<String>) -> String {
    pod_namespace
        .filter(|ns| !ns.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_LEASE_NAMESPACE.to_owned())
}

/// One controller's run future, named for logs and errors. The future must return once the
/// cancellation token it was started with is cancelled; returning earlier stops the manager with
/// an error.
pub struct ControllerTask {
    /// Controller name, as in metrics labels (`dockermachine`).
    pub name: &'static str,
    /// Runs the controller.
    pub future: BoxFuture<'static, ()>,
}

/// Worker limits per controller (`--*-concurrency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// `--dockermachine-concurrency`.
    pub docker_machine: u16,
    /// `--dockercluster-concurrency`.
    pub docker_cluster: u16,
    /// `--dockermachinetemplate-concurrency`.
    pub docker_machine_template: u16,
    /// `--dockermachinepool-concurrency`.
    pub docker_machine_pool: u16,
    /// `--devmachine-concurrency`.
    pub dev_machine: u16,
    /// `--devcluster-concurrency`.
    pub dev_cluster: u16,
    /// `--devmachinetemplate-concurrency`.
    pub dev_machine_template: u16,
    /// `--devmachinepool-concurrency`.
    pub dev_machine_pool: u16,
}

/// The flags the controllers act on.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    /// Only this namespace is watched (`--namespace`); `None` for all.
    pub namespace: Option<String>,
    /// Only objects labelled `cluster.x-k8s.io/watch-filter=<value>` are watched
    /// (`--watch-filter`); `None` for all.
    pub watch_filter: Option<String>,
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// Whether the DockerMachinePool controller runs: the `MachinePool` feature gate is on and the
    /// machine pool CRDs are served.
    pub machine_pools: bool,
    /// Whether the DevCluster, DevMachine and DevMachineTemplate controllers run: their CRDs are
    /// served.
    pub dev_kinds: bool,
    /// `--docker-network`: the network cluster containers join.
    pub docker_network: String,
    /// `--publish-address`: host address published container ports are bound to.
    pub publish_address: std::net::IpAddr,
    /// `--sync-period`: every object is reconciled at least this often.
    pub sync_period: Duration,
    /// Worker limits.
    pub concurrency: Concurrency,
    /// `--clustercache-client-qps`: rate limit of clients to workload clusters.
    pub workload_client_qps: f32,
    /// `--clustercache-client-burst`.
    pub workload_client_burst: u32,
}

impl ControllerConfig {
    /// The label selector every watch must use, if `--watch-filter` is set.
    pub fn label_selector(&self) -> Option<String> {
        self.watch_filter
            .as_ref()
            .map(|value| format!("{WATCH_FILTER_LABEL}={value}"))
    }
}

/// Everything a reconcile needs besides the object itself.
#[derive(Clone)]
pub struct Context {
    /// Client of the management cluster (rate-limited, our user agent).
    pub client: Client,
    /// Publishes Kubernetes Events (`events.k8s.io/v1`) as `capd-rs-controller-manager`; one
    /// recorder serves every object (kube 5 takes the object reference per event).
    pub recorder: Recorder,
    /// Reconcile metrics.
    pub metrics: Metrics,
    /// `/readyz` checks: `require(name)` when a controller is built, `mark_ready(name)` once its
    /// watches have synced.
    pub readiness: Readiness,
    /// Flag values.
    pub config: ControllerConfig,
}

impl Context {
    /// Builds the context; `instance` is the Events' `reportingInstance` (pod name or host name).
    pub fn new(
        client: Client,
        metrics: Metrics,
        readiness: Readiness,
        config: ControllerConfig,
        instance: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: EVENT_REPORTER.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            readiness,
            config,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(watch_filter: Option<&str>) -> ControllerConfig {
        ControllerConfig {
            namespace: None,
            watch_filter: watch_filter.map(str::to_owned),
            feature_gates: FeatureGates::default(),
            machine_pools: true,
            dev_kinds: true,
            docker_network: "kind".to_owned(),
            publish_address: std::net::Ipv4Addr::LOCALHOST.into(),
            sync_period: Duration::from_secs(600),
            concurrency: Concurrency {
                docker_machine: 100,
                docker_cluster: 50,
                docker_machine_template: 50,
                docker_machine_pool: 50,
                dev_machine: 50,
                dev_cluster: 50,
                dev_machine_template: 50,
                dev_machine_pool: 100,
            },
            workload_client_qps: 20.0,
            workload_client_burst: 30,
        }
    }

    #[test]
    fn leases_live_in_the_pod_namespace_else_in_capd_system() {
        assert_eq!(lease_namespace(None), "capd-system");
        assert_eq!(lease_namespace(Some(String::new())), "capd-system");
        assert_eq!(lease_namespace(Some("capd-rs".into())), "capd-rs");
    }

    #[test]
    fn the_watch_filter_becomes_a_label_selector() {
        assert_eq!(config(None).label_selector(), None);
        assert_eq!(
            config(Some("mgmt-a")).label_selector().as_deref(),
            Some("cluster.x-k8s.io/watch-filter=mgmt-a")
        );
    }
}
