//! Test fixtures that read as sentences:
//! `DockerMachine::test("m1").owned_by("m1").deleting()`,
//! `Cluster::test("c1").infrastructure_provisioned().paused()`.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::core::ObjectMeta;

use crate::api::capi::{
    Bootstrap, Cluster, ClusterInitializationStatus, ClusterNetwork, ClusterSpec, ClusterStatus,
    ContractVersionedObjectReference, Machine, MachineNodeReference, MachineSpec, MachineStatus,
    NetworkRanges,
};
use crate::api::conditions::{Condition, ConditionStatus, set_condition};
use crate::api::v1beta2::{
    DockerCluster, DockerClusterSpec, DockerMachine, DockerMachineSpec, FailureDomain,
};
use crate::api::{
    CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, DOCKER_CLUSTER_FINALIZER, DOCKER_MACHINE_FINALIZER,
    GROUP, MANAGED_BY_ANNOTATION, PAUSED_ANNOTATION,
};

/// Namespace of every fixture.
pub const NAMESPACE: &str = "default";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NAMESPACE.to_string()),
        uid: Some(format!("uid-{name}")),
        generation: Some(1),
        ..Default::default()
    }
}

fn owner_ref(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "cluster.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        ..Default::default()
    }
}

fn add_owner(meta: &mut ObjectMeta, kind: &str, name: &str) {
    meta.owner_references
        .get_or_insert_with(Vec::new)
        .push(owner_ref(kind, name));
}

fn add_label(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}

fn add_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}

fn delete(meta: &mut ObjectMeta) {
    meta.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
}

fn initialization_mut(cluster: &mut Cluster) -> &mut ClusterInitializationStatus {
    cluster
        .status
        .get_or_insert_with(ClusterStatus::default)
        .initialization
        .get_or_insert_with(Default::default)
}

/// Fixture builders of `Cluster`.
pub trait ClusterFixture: Sized {
    /// A Cluster referring to the DockerCluster of the same name.
    fn test(name: &str) -> Self;
    /// `spec.paused: true`.
    fn paused(self) -> Self;
    /// `status.initialization.infrastructureProvisioned: true`.
    fn with_infrastructure_provisioned(self) -> Self;
    /// `status.initialization.controlPlaneInitialized: true`.
    fn with_control_plane_initialized(self) -> Self;
    /// Pod CIDR blocks.
    fn pods(self, cidrs: &[&str]) -> Self;
    /// Service CIDR blocks.
    fn services(self, cidrs: &[&str]) -> Self;
}

impl ClusterFixture for Cluster {
    /// A Cluster referring to the DockerCluster of the same name.
    fn test(name: &str) -> Self {
        Cluster {
            metadata: meta(name),
            spec: ClusterSpec {
                infrastructure_ref: Some(ContractVersionedObjectReference {
                    api_group: GROUP.into(),
                    kind: "DockerCluster".into(),
                    name: name.into(),
                }),
                ..Default::default()
            },
            status: None,
        }
    }

    /// `spec.paused: true`.
    fn paused(mut self) -> Self {
        self.spec.paused = Some(true);
        self
    }

    /// `status.initialization.infrastructureProvisioned: true`.
    fn with_infrastructure_provisioned(mut self) -> Self {
        initialization_mut(&mut self).infrastructure_provisioned = Some(true);
        self
    }

    /// `status.initialization.controlPlaneInitialized: true`.
    fn with_control_plane_initialized(mut self) -> Self {
        initialization_mut(&mut self).control_plane_initialized = Some(true);
        self
    }

    /// Pod CIDR blocks.
    fn pods(mut self, cidrs: &[&str]) -> Self {
        self.spec
            .cluster_network
            .get_or_insert_with(ClusterNetwork::default)
            .pods = Some(NetworkRanges {
            cidr_blocks: cidrs.iter().map(|c| c.to_string()).collect(),
        });
        self
    }

    /// Service CIDR blocks.
    fn services(mut self, cidrs: &[&str]) -> Self {
        self.spec
            .cluster_network
            .get_or_insert_with(ClusterNetwork::default)
            .services = Some(NetworkRanges {
            cidr_blocks: cidrs.iter().map(|c| c.to_string()).collect(),
        });
        self
    }
}

/// Fixture builders of `Machine`.
pub trait MachineFixture: Sized {
    /// A worker Machine of cluster `c1` pointing at the DockerMachine of the same name.
    fn test(name: &str) -> Self;
    /// Labelled as a control plane Machine.
    fn control_plane(self) -> Self;
    /// Being deleted.
    fn deleting(self) -> Self;
    /// With bootstrap data in Secret `secret`.
    fn with_bootstrap_secret(self, secret: &str) -> Self;
    /// Placed in failure domain `fd`.
    fn in_failure_domain(self, fd: &str) -> Self;
    /// Joined as Node `node`.
    fn with_node(self, node: &str) -> Self;
}

impl MachineFixture for Machine {
    /// A worker Machine of cluster `c1` pointing at the DockerMachine of the same name.
    fn test(name: &str) -> Self {
        let mut metadata = meta(name);
        add_label(&mut metadata, CLUSTER_NAME_LABEL, "c1");
        Machine {
            metadata,
            spec: MachineSpec {
                cluster_name: "c1".into(),
                bootstrap: Bootstrap::default(),
                version: Some("v1.31.2".into()),
                failure_domain: None,
                infrastructure_ref: Some(ContractVersionedObjectReference {
                    api_group: GROUP.into(),
                    kind: "DockerMachine".into(),
                    name: name.into(),
                }),
            },
            status: None,
        }
    }

    /// Labelled as a control plane Machine.
    fn control_plane(mut self) -> Self {
        add_label(&mut self.metadata, CONTROL_PLANE_LABEL, "");
        self
    }

    /// Being deleted.
    fn deleting(mut self) -> Self {
        delete(&mut self.metadata);
        self
    }

    /// With bootstrap data in Secret `secret`.
    fn with_bootstrap_secret(mut self, secret: &str) -> Self {
        self.spec.bootstrap.data_secret_name = Some(secret.into());
        self
    }

    /// Placed in failure domain `fd`.
    fn in_failure_domain(mut self, fd: &str) -> Self {
        self.spec.failure_domain = Some(fd.into());
        self
    }

    /// Joined as Node `node`.
    fn with_node(mut self, node: &str) -> Self {
        self.status = Some(MachineStatus {
            node_ref: Some(MachineNodeReference { name: node.into() }),
        });
        self
    }
}

/// Fixture builders of `DockerCluster`.
pub trait DockerClusterFixture: Sized {
    /// A DockerCluster `name` with no owner yet.
    fn test(name: &str) -> Self;
    /// Owned by Cluster `cluster`.
    fn owned_by(self, cluster: &str) -> Self;
    /// Carrying our finalizer.
    fn with_finalizer(self) -> Self;
    /// Being deleted.
    fn deleting(self) -> Self;
    /// Annotated as paused.
    fn paused(self) -> Self;
    /// Annotated as managed by another system.
    fn externally_managed(self) -> Self;
    /// With failure domains named `names`.
    fn failure_domains(self, names: &[&str]) -> Self;
}

impl DockerClusterFixture for DockerCluster {
    /// A DockerCluster `name` with no owner yet.
    fn test(name: &str) -> Self {
        DockerCluster {
            metadata: meta(name),
            spec: DockerClusterSpec::default(),
            status: None,
        }
    }

    /// Owned by Cluster `cluster`.
    fn owned_by(mut self, cluster: &str) -> Self {
        add_owner(&mut self.metadata, "Cluster", cluster);
        add_label(&mut self.metadata, CLUSTER_NAME_LABEL, cluster);
        self
    }

    /// Carrying our finalizer.
    fn with_finalizer(mut self) -> Self {
        self.metadata.finalizers = Some(vec![DOCKER_CLUSTER_FINALIZER.into()]);
        self
    }

    /// Being deleted.
    fn deleting(mut self) -> Self {
        delete(&mut self.metadata);
        self
    }

    /// Annotated as paused.
    fn paused(mut self) -> Self {
        add_annotation(&mut self.metadata, PAUSED_ANNOTATION, "");
        self
    }

    /// Annotated as managed by another system.
    fn externally_managed(mut self) -> Self {
        add_annotation(&mut self.metadata, MANAGED_BY_ANNOTATION, "other");
        self
    }

    /// With failure domains named `names`.
    fn failure_domains(mut self, names: &[&str]) -> Self {
        self.spec.failure_domains = names
            .iter()
            .map(|n| FailureDomain {
                name: n.to_string(),
                control_plane: Some(true),
                attributes: Default::default(),
            })
            .collect();
        self
    }
}

/// Fixture builders of `DockerMachine`.
pub trait DockerMachineFixture: Sized {
    /// A DockerMachine `name` of cluster `c1` with no owner yet.
    fn test(name: &str) -> Self;
    /// Owned by Machine `machine`.
    fn owned_by(self, machine: &str) -> Self;
    /// Carrying our finalizer.
    fn with_finalizer(self) -> Self;
    /// Being deleted.
    fn deleting(self) -> Self;
    /// Annotated as paused.
    fn paused(self) -> Self;
    /// With `spec.providerID` set.
    fn provisioned_as(self, container: &str) -> Self;
    /// With the load balancer weight annotation.
    fn weighted(self, weight: &str) -> Self;
    /// With the weight annotation of CAPD 1.12 and earlier builds of this provider.
    fn legacy_weighted(self, weight: &str) -> Self;
    /// With images to preload.
    fn preloading(self, images: &[&str]) -> Self;
    /// With a condition already recorded.
    fn with_condition(self, type_: &str, status: ConditionStatus, reason: &str) -> Self;
}

impl DockerMachineFixture for DockerMachine {
    /// A DockerMachine `name` of cluster `c1` with no owner yet.
    fn test(name: &str) -> Self {
        let mut metadata = meta(name);
        add_label(&mut metadata, CLUSTER_NAME_LABEL, "c1");
        DockerMachine {
            metadata,
            spec: DockerMachineSpec::default(),
            status: None,
        }
    }

    /// Owned by Machine `machine`.
    fn owned_by(mut self, machine: &str) -> Self {
        add_owner(&mut self.metadata, "Machine", machine);
        self
    }

    /// Carrying our finalizer.
    fn with_finalizer(mut self) -> Self {
        self.metadata.finalizers = Some(vec![DOCKER_MACHINE_FINALIZER.into()]);
        self
    }

    /// Being deleted.
    fn deleting(mut self) -> Self {
        delete(&mut self.metadata);
        self
    }

    /// Annotated as paused.
    fn paused(mut self) -> Self {
        add_annotation(&mut self.metadata, PAUSED_ANNOTATION, "");
        self
    }

    /// With `spec.providerID` set.
    fn provisioned_as(mut self, container: &str) -> Self {
        self.spec.provider_id = crate::docker::node::provider_id(container);
        self
    }

    /// With the load balancer weight annotation.
    fn weighted(mut self, weight: &str) -> Self {
        add_annotation(&mut self.metadata, crate::api::WEIGHT_ANNOTATION, weight);
        self
    }

    /// With the weight annotation of CAPD 1.12 and earlier builds of this provider.
    fn legacy_weighted(mut self, weight: &str) -> Self {
        add_annotation(
            &mut self.metadata,
            crate::api::LEGACY_WEIGHT_ANNOTATION,
            weight,
        );
        self
    }

    /// With images to preload.
    fn preloading(mut self, images: &[&str]) -> Self {
        self.spec.pre_load_images = images.iter().map(|i| i.to_string()).collect();
        self
    }

    /// With a condition already recorded.
    fn with_condition(mut self, type_: &str, status: ConditionStatus, reason: &str) -> Self {
        let conditions = &mut self.status.get_or_insert_with(Default::default).conditions;
        set_condition(conditions, Condition::new(type_, status, reason, ""));
        self
    }
}

/// A test API server of its own, and a client of it.
pub async fn test_api_server() -> (testapiserver::Handle, kube::Client) {
    let server = testapiserver::TestApiServer::start(Default::default())
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(server.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    (server, kube::Client::try_from(config).unwrap())
}

/// A test API server serving `crd`, the CRD of `K`, once `K` can be listed; its client. No
/// conversion webhook runs here: the tests speak the storage version only.
pub async fn test_api_server_serving<K>(
    mut crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> (testapiserver::Handle, kube::Client)
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    use kube::api::{Api, ListParams, PostParams};

    let (server, client) = test_api_server().await;
    if let Some(conversion) = crd.spec.conversion.as_mut() {
        conversion.strategy = "None".into();
        conversion.webhook = None;
    }
    Api::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let objects: Api<K> = Api::namespaced(client.clone(), NAMESPACE);
    for _ in 0..100 {
        if objects.list(&ListParams::default()).await.is_ok() {
            return (server, client);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "the CRD {} is not served",
        crd.metadata.name.unwrap_or_default()
    );
}

/// A controller context on `runtime` whose Kubernetes client points nowhere: for scenario tests
/// of the Docker side (Events fail quietly, caches are empty).
pub fn test_context(runtime: crate::docker::FakeRuntime) -> crate::controllers::context::Context {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    test_context_on(runtime, kube::Client::try_from(config).unwrap())
}

/// [`test_context`] with a Kubernetes client that reaches an API server (a test one).
pub fn test_context_on(
    runtime: crate::docker::FakeRuntime,
    client: kube::Client,
) -> crate::controllers::context::Context {
    use std::sync::Arc;
    use std::time::Duration;

    use kube::runtime::reflector;

    use crate::controllers::backoff::ErrorBackoff;
    use crate::controllers::context::{Context, Stores};
    use crate::controllers::tasks::TaskRegistry;
    use crate::controllers::workload::WorkloadClients;
    use crate::runtime::{Concurrency, ControllerConfig, FeatureGates, Metrics, Readiness};

    let controller_config = ControllerConfig {
        namespace: None,
        watch_filter: None,
        feature_gates: FeatureGates::default(),
        machine_pools: true,
        dev_kinds: true,
        docker_network: "kind".into(),
        publish_address: std::net::Ipv4Addr::LOCALHOST.into(),
        sync_period: Duration::from_secs(600),
        concurrency: Concurrency {
            docker_machine: 10,
            docker_cluster: 10,
            docker_machine_template: 10,
            docker_machine_pool: 10,
            dev_machine: 10,
            dev_cluster: 10,
            dev_machine_template: 10,
            dev_machine_pool: 10,
        },
        workload_client_qps: 20.0,
        workload_client_burst: 30,
    };
    let manager = crate::runtime::Context::new(
        client,
        Metrics::new(),
        Readiness::new(),
        controller_config,
        None,
    );
    let (trigger, _) = tokio::sync::mpsc::unbounded_channel();
    Context {
        manager: Arc::new(manager),
        runtime: Arc::new(runtime),
        stores: Stores {
            clusters: reflector::store().0,
            machines: reflector::store().0,
            docker_clusters: reflector::store().0,
            dev_clusters: reflector::store().0,
            machine_pools: reflector::store().0,
        },
        tasks: TaskRegistry::new(trigger),
        workload: WorkloadClients::new(20.0, 30),
        backoff: ErrorBackoff::new(),
        proxy: Default::default(),
        load_balancer_locks: Default::default(),
        written: Default::default(),
        finalizers: Default::default(),
        in_memory: Arc::new(crate::inmemory::Clusters::new(
            "127.0.0.1".into(),
            crate::inmemory::PORTS,
        )),
    }
}
