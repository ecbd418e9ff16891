//! A real workload cluster built through the provider as the user, core, CABPK and KCP build it,
//! with the real node image of `e2e/images/real`: the steps the real-node scenario
//! (`tests/scenarios/real_cluster.rs`) and the sandbox's stand-in (`hack/run.sh --real`) share.
//! Every check goes through the load balancer with the admin kubeconfig core would write.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::certs::ClusterCertificates;
use super::cloud_init::{init_control_plane, join_control_plane, join_worker};
use super::config::{ClusterSettings, Discovery, KUBEADM_API_VERSION, KubeadmConfigSpec};
use super::env::{Workload, node_ready};
use crate::docker::{docker, published_port};
use crate::tls::{Answer, https_get_until};
use crate::{Env, MachineSpec, PROVIDER_FIELD_MANAGER, capi, eventually, field_owners, infra};

/// From a Machine's creation to kubeadm done (image start, kubeadm init or join).
pub const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(600);
/// From bootstrap done to a Ready Node.
pub const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// The Cluster's `spec.clusterNetwork` (CAPD's templates): pods, services, service domain.
pub const CLUSTER_NETWORK: (&str, &str, &str) = ("10.244.0.0/16", "10.96.0.0/12", "cluster.local");

/// The variable that names the real node image: any kind node image the engine holds
/// (`kindest/node:vX.Y.Z`), or one `e2e/images/real/build.sh` made from Kubernetes binaries the
/// user brought.
pub const REAL_NODE_IMAGE_VARIABLE: &str = "CAPD_REAL_NODE_IMAGE";

/// Why there is no real node image, and the two ways to get one: what a skip prints.
pub const NO_REAL_NODE_IMAGE: &str = "CAPD_REAL_NODE_IMAGE is not set: set it to a kind node \
     image the engine holds (kindest/node:vX.Y.Z, on a machine with a registry), or build one \
     from Kubernetes server binaries you bring (bash e2e/images/real/build.sh \
     --kubernetes-server DIR-or-kubernetes-server-linux-amd64.tar.gz, which prints the value)";

/// The real node image of `CAPD_REAL_NODE_IMAGE`; `None` when it is unset or empty.
pub fn real_node_image_setting() -> Option<String> {
    std::env::var(REAL_NODE_IMAGE_VARIABLE)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The Kubernetes version a node image runs: its `/kind/version`, as kind's node images carry it
/// (`e2e/images/real/build.sh` writes it too). An error says why the suite cannot use the image:
/// no such file, or a version outside what the suite's CABPK stand-in writes (kubeadm `v1beta3`,
/// Kubernetes 1.23 to 1.30).
pub fn node_image_version(image: &str) -> Result<String, String> {
    let (ok, out) = docker(&["run", "--rm", "--entrypoint", "cat", image, "/kind/version"]);
    if !ok {
        return Err(format!(
            "{image} has no /kind/version (is it a kind node image?)"
        ));
    }
    supported_version(out.trim())
}

/// `version` when the suite's CABPK stand-in can bootstrap it (kubeadm `v1beta3`: 1.23 to 1.30).
pub fn supported_version(version: &str) -> Result<String, String> {
    let minor = version
        .strip_prefix("v1.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|minor| minor.parse::<u32>().ok())
        .ok_or_else(|| format!("'{version}' is not a Kubernetes version"))?;
    if (23..=30).contains(&minor) {
        Ok(version.to_string())
    } else {
        Err(format!(
            "Kubernetes {version}: the suite's CABPK stand-in writes kubeadm {KUBEADM_API_VERSION}, \
             which it uses for Kubernetes 1.23 to 1.30 only"
        ))
    }
}

/// How long a Machine took, from its creation.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Until kubeadm init or join was done (the DockerMachine provisioned).
    pub bootstrapped: Duration,
    /// Until its Node was Ready.
    pub ready: Duration,
}

/// A cluster whose infrastructure is provisioned and whose certificates and admin kubeconfig KCP
/// stored: what its Machines need to bootstrap.
pub struct RealCluster {
    /// What CABPK takes from the Cluster.
    pub settings: ClusterSettings,
    /// The KubeadmControlPlane's (and KubeadmConfigTemplate's) spec.
    pub spec: KubeadmConfigSpec,
    /// The cluster's CAs and service-account key, as in its Secrets.
    pub certificates: ClusterCertificates,
    /// The admin kubeconfig of the `<cluster>-kubeconfig` Secret (the load balancer's endpoint).
    pub kubeconfig: String,
    /// The node image of every Machine.
    pub image: String,
    /// The images every worker preloads into its containerd (`spec.preLoadImages` of the
    /// MachineDeployment's DockerMachineTemplate); none unless a caller sets them.
    pub worker_preload_images: Vec<String>,
}

impl Env {
    /// The user applies a Cluster (with the network CABPK copies into kubeadm's configuration)
    /// and its DockerCluster (the test load balancer image plus `docker_cluster_spec`); once the
    /// provider provisioned it, core marks the infrastructure provisioned and KCP generates the
    /// cluster's certificates and stores them with the admin kubeconfig.
    pub async fn create_real_cluster(
        &self,
        name: &str,
        image: &str,
        docker_cluster_spec: Value,
        timeout: Duration,
    ) -> RealCluster {
        let (pods, services, domain) = CLUSTER_NETWORK;
        let cluster = self
            .create(
                &capi("Cluster"),
                json!({
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "Cluster",
                    "metadata": {"name": name, "labels": self.labels(name)},
                    "spec": {
                        "clusterNetwork": {
                            "pods": {"cidrBlocks": [pods]},
                            "services": {"cidrBlocks": [services]},
                            "serviceDomain": domain
                        },
                        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": self.kinds.cluster(), "name": name},
                        "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": name}
                    }
                }),
            )
            .await;
        self.create_docker_cluster_with(&cluster, json!({}), docker_cluster_spec)
            .await;
        let dc = self.wait_docker_cluster_provisioned(name, timeout).await;
        self.mark_infrastructure_provisioned(name).await;
        let endpoint = &dc.data["spec"]["controlPlaneEndpoint"];
        let endpoint = format!(
            "{}:{}",
            endpoint["host"].as_str().unwrap(),
            endpoint["port"]
        );
        let certificates = ClusterCertificates::generate();
        self.create_cluster_certificates(name, &certificates).await;
        let kubeconfig = self
            .create_admin_kubeconfig_secret(name, &endpoint, &certificates.ca)
            .await;
        RealCluster {
            settings: ClusterSettings {
                name: name.to_string(),
                endpoint,
                version: node_image_version(image).expect("the real node image's version"),
                pod_subnet: pods.into(),
                service_subnet: services.into(),
                service_domain: domain.into(),
            },
            spec: KubeadmConfigSpec::real_node(),
            certificates,
            kubeconfig,
            image: image.to_string(),
            worker_preload_images: Vec::new(),
        }
    }
}

impl RealCluster {
    /// The Node (and container) name of a Machine: `<cluster>-<machine>`.
    pub fn node(&self, machine: &str) -> String {
        format!("{}-{machine}", self.settings.name)
    }

    /// The load balancer container.
    pub fn load_balancer(&self) -> String {
        format!("{}-lb", self.settings.name)
    }

    /// The host port the load balancer publishes the API servers on.
    pub fn load_balancer_port(&self) -> u16 {
        published_port(&self.load_balancer(), 6443).expect("the load balancer publishes 6443/tcp")
    }

    /// Waits until `/healthz` answers `ok` through haproxy (the load balancer's published port).
    pub async fn wait_healthz(&self, timeout: Duration) -> Answer {
        let answer = https_get_until(self.load_balancer_port(), "/healthz", timeout, |a| {
            a.status == 200
        })
        .await
        .expect("/healthz through the load balancer");
        assert_eq!(
            answer.body.trim(),
            "ok",
            "/healthz through the load balancer"
        );
        answer
    }

    /// Creates a Machine of this cluster with its bootstrap data Secret (named after it).
    async fn create_machine(
        &self,
        env: &Env,
        machine: &str,
        control_plane: bool,
        bootstrap_data: &str,
    ) -> Instant {
        env.create_bootstrap_data(&self.settings.name, machine, bootstrap_data)
            .await;
        let created = Instant::now();
        let spec = MachineSpec {
            control_plane,
            bootstrap_secret: Some(machine.to_string()),
            image: Some(self.image.clone()),
            version: Some(self.settings.version.clone()),
            preload_images: if control_plane {
                Vec::new()
            } else {
                self.worker_preload_images.clone()
            },
            ..MachineSpec::default()
        };
        env.create_machine_with(&self.settings.name, machine, &spec)
            .await;
        created
    }

    /// KCP's first control plane: the init cloud-config and the Machine; once kubeadm init is
    /// done the API server answers through the load balancer, KCP sees kubeadm's uploaded
    /// configuration and marks the control plane initialized, and the Node becomes Ready.
    /// Returns the workload cluster, reached with the admin kubeconfig.
    pub async fn init(&self, env: &Env, machine: &str) -> (Workload, Progress) {
        let data = init_control_plane(&self.settings, &self.spec, &self.certificates);
        let created = self.create_machine(env, machine, true, &data).await;
        env.wait_bootstrap_completed(machine, BOOTSTRAP_TIMEOUT)
            .await;
        let bootstrapped = created.elapsed();
        self.wait_healthz(Duration::from_secs(120)).await;
        let workload = Workload::connect(&self.kubeconfig).await;
        eventually(
            Duration::from_secs(120),
            "kubeadm-config in the workload cluster",
            || async { workload.kubeadm_config_uploaded().await.then_some(()) },
        )
        .await;
        env.mark_control_plane_initialized(&self.settings.name)
            .await;
        let ready = workload
            .wait_node_ready(&self.node(machine), created, READY_TIMEOUT)
            .await;
        (
            workload,
            Progress {
                bootstrapped,
                ready,
            },
        )
    }

    /// A node joins as CABPK and core make it: a bootstrap token in the workload cluster, the
    /// join cloud-config, the Machine; then it bootstraps, its Node becomes Ready, and (a worker)
    /// loses CABPK's uninitialized taint as core's Machine controller removes it.
    pub async fn join(
        &self,
        env: &Env,
        workload: &Workload,
        machine: &str,
        control_plane: bool,
    ) -> Progress {
        let token = workload.create_bootstrap_token().await;
        let discovery = Discovery {
            api_server_endpoint: self.settings.endpoint.clone(),
            token: token.to_string(),
            ca_cert_hash: self.certificates.ca.spki_hash(),
        };
        let data = if control_plane {
            join_control_plane(&self.spec, &discovery, &self.certificates)
        } else {
            join_worker(&self.spec, &discovery)
        };
        let created = self
            .create_machine(env, machine, control_plane, &data)
            .await;
        env.wait_bootstrap_completed(machine, BOOTSTRAP_TIMEOUT)
            .await;
        let bootstrapped = created.elapsed();
        let node = self.node(machine);
        let ready = workload
            .wait_node_ready(&node, created, READY_TIMEOUT)
            .await;
        if !control_plane {
            workload.remove_uninitialized_taint(&node).await;
        }
        Progress {
            bootstrapped,
            ready,
        }
    }

    /// Core removes a worker Machine: marked deleting, its Node drained, its DockerMachine
    /// deleted (the container and its volumes go), then its Node deleted.
    pub async fn remove_worker(
        &self,
        env: &Env,
        workload: &Workload,
        machine: &str,
        timeout: Duration,
    ) {
        let node = self.node(machine);
        env.begin_machine_deletion(machine).await;
        workload.drain(&node).await;
        env.finish_machine_deletion(machine, timeout).await;
        workload.delete_node(&node, timeout).await;
    }

    /// Waits until the workload cluster's Nodes are exactly those of `machines`, every one Ready
    /// and carrying its DockerMachine's provider ID (`docker:////<container>`, which the provider
    /// set on both); returns the provider IDs, by Node name.
    pub async fn wait_nodes_match_machines(
        &self,
        env: &Env,
        workload: &Workload,
        machines: &[String],
        timeout: Duration,
    ) -> BTreeMap<String, String> {
        let mut expected = BTreeMap::new();
        for machine in machines {
            let dm = env.get(&infra(env.kinds.machine()), machine).await;
            let dm = dm.unwrap_or_else(|| panic!("the DockerMachine {machine} is missing"));
            let node = self.node(machine);
            assert_eq!(
                dm.data["spec"]["providerID"],
                json!(format!("docker:////{node}")),
                "the provider ID of DockerMachine {machine}"
            );
            let id = dm.data["spec"]["providerID"].as_str().unwrap_or_default();
            expected.insert(node, id.to_string());
        }
        eventually(
            timeout,
            &format!(
                "the Nodes {:?}, Ready, with their DockerMachines' provider IDs",
                expected.keys().collect::<Vec<_>>()
            ),
            || async {
                let nodes = workload.nodes().await?;
                let found: BTreeMap<String, String> = nodes
                    .iter()
                    .map(|n| {
                        let name = n.metadata.name.clone().unwrap_or_default();
                        let id = n.spec.as_ref().and_then(|s| s.provider_id.clone());
                        (name, id.unwrap_or_default())
                    })
                    .collect();
                (found == expected && nodes.iter().all(node_ready)).then_some(())
            },
        )
        .await;
        // The provider wrote each provider ID (as a cloud controller manager would), not kubelet.
        let nodes = workload
            .nodes()
            .await
            .expect("the workload cluster's Nodes");
        assert_eq!(nodes.len(), expected.len(), "the workload cluster's Nodes");
        for node in nodes {
            assert_eq!(
                field_owners(&node.metadata, &["spec", "providerID"]),
                [PROVIDER_FIELD_MANAGER],
                "the owner of Node {:?}'s spec.providerID",
                node.metadata.name
            );
        }
        expected
    }
}
