//! Command-line flags: CAPD's names and defaults (`test/infrastructure/docker/main.go` and the
//! Cluster API manager flag helpers), plus `--docker-network`.
//!
//! Values are parsed the way the Go binary parses them: durations such as `15s` or `1h30m`,
//! booleans as `--flag`, `--flag=true` or `--flag=false`, listen addresses as `:9440`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use super::wiring::ControllerSet;
use crate::api::duration::parse_go_duration;
use crate::runtime::feature_gates::{FeatureGates, parse_go_bool};
use crate::serving::{ListenAddr, TlsMinVersion};

/// Why a flag value was rejected (beyond what clap itself checks).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgsError {
    /// A boolean flag got something other than Go's `true`/`false` spellings.
    #[error("invalid boolean {0:?}: expected true or false")]
    Bool(String),
    /// A rate is not a positive number.
    #[error("invalid rate {0:?}: expected a positive number of requests per second")]
    Rate(String),
    /// A namespace is not a valid Kubernetes namespace name.
    #[error(
        "invalid namespace {0:?}: expected a lowercase RFC 1123 label (a-z, 0-9, '-', at most 63 characters)"
    )]
    Namespace(String),
    /// A label value is not valid.
    #[error(
        "invalid label value {0:?}: expected at most 63 characters of a-z, A-Z, 0-9, '-', '_', '.', starting and ending alphanumeric"
    )]
    LabelValue(String),
    /// A required text value was empty.
    #[error("must not be empty")]
    Empty,
    /// `--controllers` named no controller.
    #[error("no controller named: expected one or more of cluster-api, gardener-infrastructure")]
    NoControllers,
    /// `--controllers` named a controller this manager does not have.
    #[error("unknown controller {0:?}: expected cluster-api or gardener-infrastructure")]
    UnknownController(String),
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The manager's flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "manager",
    version,
    // Go flags: a repeated flag overrides the earlier value (manifests patched by kustomize).
    args_override_self = true,
    about = "Cluster API infrastructure provider for Docker (capd-rs controller manager)",
    long_about = "Cluster API infrastructure provider for Docker (capd-rs controller manager).\n\n\
                  Reconciles DockerCluster, DockerMachine, DockerMachinePool and their template \
                  objects (infrastructure.cluster.x-k8s.io) into containers on the local Docker engine."
)]
pub struct Args {
    /// Namespace that the controller watches to reconcile objects. If unspecified, the
    /// controller watches for objects in all namespaces.
    #[arg(long, value_name = "NAME", default_value = "", value_parser = parse_namespace)]
    pub namespace: String,

    /// Label value that the controller watches to reconcile objects (label key
    /// cluster.x-k8s.io/watch-filter). If unspecified, the controller watches for all objects.
    #[arg(long, value_name = "VALUE", default_value = "", value_parser = parse_label_value)]
    pub watch_filter: String,

    /// Enable leader election for the controller manager. Enabling this ensures there is only
    /// one active controller manager (Lease controller-leader-election-capd in the namespace from
    /// the POD_NAMESPACE environment variable, default capd-system).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = parse_bool)]
    pub leader_elect: bool,

    /// Interval at which non-leader candidates wait to force acquire leadership (duration
    /// string).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_go_duration)]
    pub leader_elect_lease_duration: Duration,

    /// Duration that the leading controller manager retries refreshing leadership before giving
    /// up; the process exits when it does (duration string).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_go_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Duration the leader election clients wait between tries of actions (duration string).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_go_duration)]
    pub leader_elect_retry_period: Duration,

    /// The address the health endpoint binds to: /healthz (alive) and /readyz (ready once the
    /// watches are synced). 0 disables it.
    #[arg(long, value_name = "ADDRESS", default_value = ":9440")]
    pub health_addr: ListenAddr,

    /// The address the diagnostics endpoint binds to; it serves Prometheus metrics on /metrics.
    /// Over HTTPS with a self-signed certificate, authenticated and authorized through the
    /// Kubernetes TokenReview and SubjectAccessReview APIs (GET /metrics), unless
    /// --insecure-diagnostics is set. 0 disables it.
    #[arg(long, value_name = "ADDRESS", default_value = ":8443")]
    pub diagnostics_address: ListenAddr,

    /// Serve the diagnostics endpoint over plain HTTP without authentication or authorization.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = parse_bool)]
    pub insecure_diagnostics: bool,

    /// Minimum TLS version supported by the diagnostics endpoint.
    #[arg(
        long,
        value_name = "VERSION",
        value_enum,
        default_value = "VersionTLS12"
    )]
    pub tls_min_version: TlsMinVersion,

    /// The minimum interval at which watched resources are reconciled (duration string).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_go_duration)]
    pub sync_period: Duration,

    /// Number of DockerMachines to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..))]
    pub dockermachine_concurrency: u16,

    /// Number of DockerClusters to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub dockercluster_concurrency: u16,

    /// Number of DockerMachineTemplates to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub dockermachinetemplate_concurrency: u16,

    /// Number of DockerMachinePools to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub dockermachinepool_concurrency: u16,

    /// Number of DevMachines to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub devmachine_concurrency: u16,

    /// Number of DevClusters to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub devcluster_concurrency: u16,

    /// Number of DevMachineTemplates to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub devmachinetemplate_concurrency: u16,

    /// Number of DevMachinePools to process simultaneously.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..))]
    pub devmachinepool_concurrency: u16,

    /// Maximum queries per second from the controller client to the Kubernetes API server.
    #[arg(long, value_name = "QPS", default_value = "100", value_parser = parse_rate)]
    pub kube_api_qps: f32,

    /// Maximum number of queries that should be allowed in one burst from the controller client
    /// to the Kubernetes API server.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,

    /// Maximum queries per second from the cluster cache clients to the Kubernetes API server
    /// of workload clusters.
    #[arg(long, value_name = "QPS", default_value = "20", value_parser = parse_rate)]
    pub clustercache_client_qps: f32,

    /// Maximum number of queries that should be allowed in one burst from the cluster cache
    /// clients to the Kubernetes API server of workload clusters.
    #[arg(long, value_name = "N", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub clustercache_client_burst: u32,

    /// List of CRD migration phases to skip, comma-separated or repeated. Valid values are:
    /// StorageVersionMigration, CleanupManagedFields.
    #[arg(long, value_name = "PHASE,...", action = ArgAction::Append,
          value_parser = str::parse::<crate::crdmigrator::PhaseList>)]
    pub skip_crd_migration_phases: Vec<crate::crdmigrator::PhaseList>,

    /// A set of key=value pairs that describe feature gates for alpha/experimental features.
    /// Options are: MachinePool=true|false (default true), ClusterTopology=true|false (default
    /// false), PriorityQueue=true|false (default true), ReconcilerRateLimiting=true|false
    /// (default true), KubeadmBootstrapFormatIgnition=true|false (default false),
    /// RuntimeSDK, InPlaceUpdates, MachineTaintPropagation (default false) and
    /// MachineSetPreflightChecks (default true).
    #[arg(long, value_name = "NAME=BOOL,...", default_value = "")]
    pub feature_gates: FeatureGates,

    /// Webhook server port.
    #[arg(long, value_name = "PORT", default_value_t = 9443, value_parser = clap::value_parser!(u16).range(1..))]
    pub webhook_port: u16,

    /// Webhook cert dir.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/tmp/k8s-webhook-server/serving-certs/"
    )]
    pub webhook_cert_dir: PathBuf,

    /// Webhook cert name (a file in --webhook-cert-dir).
    #[arg(long, value_name = "FILE", default_value = "tls.crt", value_parser = parse_non_empty)]
    pub webhook_cert_name: String,

    /// Webhook key name (a file in --webhook-cert-dir).
    #[arg(long, value_name = "FILE", default_value = "tls.key", value_parser = parse_non_empty)]
    pub webhook_key_name: String,

    /// Number for the log level verbosity: our logs are info at 0-2, debug at 3-4 and trace from
    /// 5; library logs rise from warn to info at 5 and debug at 6. RUST_LOG, when set, overrides
    /// it.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value_t = 2)]
    pub v: u8,

    /// Sets the log format.
    #[arg(long, value_name = "FORMAT", value_enum, default_value = "text")]
    pub logging_format: LogFormat,

    /// Name of the Docker network that cluster containers are attached to.
    #[arg(long, value_name = "NAME", env = "CAPD_DOCKER_NETWORK", default_value = "kind",
          value_parser = parse_non_empty)]
    pub docker_network: String,

    /// Host address the load balancers' and control-plane nodes' ports are published on. The
    /// default keeps workload API servers off the host's network interfaces; `0.0.0.0` (or
    /// `::`) publishes them on every interface, as CAPD does.
    #[arg(
        long,
        value_name = "IP",
        env = "CAPD_PUBLISH_ADDRESS",
        default_value = "127.0.0.1"
    )]
    pub publish_address: std::net::IpAddr,

    /// Which controllers run, comma-separated: cluster-api (the Cluster API controllers and
    /// webhooks; needs the CAPD and Cluster API CRDs) and gardener-infrastructure (the Gardener
    /// Infrastructure extension controller; needs only Gardener's Infrastructure CRD, no webhook
    /// server). Empty or unknown names are refused.
    #[arg(long, value_name = "NAME,...", default_value = "cluster-api",
          value_parser = parse_controllers)]
    pub controllers: ControllerSet,

    /// Also run the Gardener Infrastructure extension controller for type docker
    /// (extensions.gardener.cloud/v1alpha1): one Docker network per Infrastructure. Adds
    /// gardener-infrastructure to --controllers. Needs the RBAC of config/gardener.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = parse_bool)]
    pub gardener_infrastructure: bool,

    /// Gardener's ignore-operation-annotation mode for the Gardener Infrastructure controller:
    /// act on every new generation (and check for drift every --sync-period) instead of only
    /// when Gardener asks with the gardener.cloud/operation annotation.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = parse_bool)]
    pub gardener_ignore_operation_annotation: bool,

    /// Path to a kubeconfig. Only required if out-of-cluster; otherwise KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account are used.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
}

impl Args {
    /// The CRD migration phases `--skip-crd-migration-phases` names, every occurrence together.
    pub fn skipped_crd_migration_phases(&self) -> Vec<crate::crdmigrator::Phase> {
        self.skip_crd_migration_phases
            .iter()
            .flat_map(|list| list.0.iter().copied())
            .collect()
    }

    /// The controllers to run: `--controllers`, plus the Gardener controller when
    /// `--gardener-infrastructure` is set (in the mode `--gardener-ignore-operation-annotation`
    /// asks for).
    pub fn controller_set(&self) -> ControllerSet {
        self.controllers
            .with_gardener_infrastructure(self.gardener_infrastructure)
            .with_gardener_ignoring_operation_annotation(self.gardener_ignore_operation_annotation)
    }
}

fn parse_controllers(value: &str) -> Result<ControllerSet, ArgsError> {
    value.parse()
}

/// Go's `strconv.ParseBool` spellings ([`parse_go_bool`], shared with the feature gates).
fn parse_bool(value: &str) -> Result<bool, ArgsError> {
    parse_go_bool(value).ok_or_else(|| ArgsError::Bool(value.to_owned()))
}

fn parse_rate(value: &str) -> Result<f32, ArgsError> {
    match value.trim().parse::<f32>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(ArgsError::Rate(value.to_owned())),
    }
}

fn parse_non_empty(value: &str) -> Result<String, ArgsError> {
    if value.trim().is_empty() {
        return Err(ArgsError::Empty);
    }
    Ok(value.to_owned())
}

/// Empty (all namespaces) or an RFC 1123 label.
fn parse_namespace(value: &str) -> Result<String, ArgsError> {
    let valid = value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if valid {
        Ok(value.to_owned())
    } else {
        Err(ArgsError::Namespace(value.to_owned()))
    }
}

/// Empty (no filter) or a Kubernetes label value.
fn parse_label_value(value: &str) -> Result<String, ArgsError> {
    let inner_ok = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok = value.is_empty()
        || (value
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
            && value
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric()));
    if value.len() <= 63 && inner_ok && ends_ok {
        Ok(value.to_owned())
    } else {
        Err(ArgsError::LabelValue(value.to_owned()))
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
