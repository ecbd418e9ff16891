//! A stand-in for Cluster API core, for the sandbox of `hack/run.sh` (binary `capi-stand-in`,
//! never shipped): against a management API whose manager already runs, it creates a demo cluster
//! the way `clusterctl generate cluster` and core's controllers would (the suite's [`crate::core`]:
//! Cluster, DockerCluster, Machines and DockerMachines with owner references, bootstrap data
//! secrets of cloud-init the test node image runs, infrastructure provisioned, control plane
//! initialized, Nodes in a workload test API server), shows a live view of it ([`view`]), scales
//! its workers on request, and deletes it in core's order at the end. With `--real-node-image`
//! ([`real`]) the Machines are real Kubernetes nodes, bootstrapped by real kubeadm with data from
//! the suite's CABPK and KCP stand-in.

pub mod real;
pub mod view;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use clap::Parser;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;

use crate::core::{MachineSpec, capi, cloud_config, cloud_config_running, infra};
use crate::docker::{
    CLUSTER_LABEL, cluster_containers, cluster_containers_table, container_volumes, published_port,
};
use crate::tls::https_get_until;
use crate::{Env, eventually};
use real::Built;
use view::{Objects, Screen, render};

/// The annotation of the Cluster whose value is the number of workers the stand-in keeps (it
/// plays a MachineDeployment's controller for them).
pub const WORKERS_ANNOTATION: &str = "capi-stand-in/workers";

/// Flags of `capi-stand-in`.
#[derive(Debug, Parser, PartialEq)]
#[command(
    name = "capi-stand-in",
    about = "A stand-in for Cluster API core (sandbox only): creates a demo cluster for the running capd-rs manager, shows it live, deletes it on Ctrl-C"
)]
pub struct Args {
    /// The management API, where the manager runs.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: PathBuf,
    /// The Docker network the manager puts clusters on (its `--docker-network`).
    #[arg(long, env = "CAPD_DOCKER_NETWORK", default_value = "capd-sandbox")]
    pub network: String,
    /// The name of the demo cluster.
    #[arg(long, default_value = "demo")]
    pub cluster_name: String,
    /// Control plane Machines.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub control_plane_machines: u32,
    /// Worker Machines (scale later with the Cluster's `capi-stand-in/workers` annotation).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub worker_machines: u32,
    /// Create the cluster, check it, delete it and exit (no terminal needed).
    #[arg(long)]
    pub once: bool,
    /// Where the workload cluster's kubeconfig is written.
    #[arg(long, default_value = "out/sandbox")]
    pub out_dir: PathBuf,
    /// How long each step (provisioning, deletion) may take, in seconds (real nodes: their
    /// bootstrap may take 10 minutes, their Node 5 more).
    #[arg(long, default_value_t = 180)]
    pub timeout: u64,
    /// Build a real Kubernetes cluster from this node image (`e2e/images/real`), its Machines
    /// bootstrapped by real kubeadm with data from the suite's CABPK and KCP stand-in, instead of
    /// test node containers. The engine must accept privileged containers.
    #[arg(long, value_name = "IMAGE")]
    pub real_node_image: Option<String>,
}

/// The Machine names of a cluster: `control-plane-<i>` and `worker-<i>`.
pub fn machine_name(control_plane: bool, index: u32) -> String {
    let role = if control_plane {
        "control-plane"
    } else {
        "worker"
    };
    format!("{role}-{index}")
}

/// The stand-in at work: the environment, its flags and its screen.
pub struct StandIn {
    env: Env,
    args: Args,
    screen: Mutex<Screen>,
    /// The real cluster, once built (real nodes only).
    real: OnceLock<Built>,
}

impl StandIn {
    /// Attaches to the management API of `args`.
    pub async fn attach(args: Args) -> StandIn {
        let mut env = Env::attach(args.kubeconfig.clone(), &args.network).await;
        env.adopt_cluster(&args.cluster_name);
        StandIn {
            env,
            args,
            screen: Mutex::new(Screen::default()),
            real: OnceLock::new(),
        }
    }

    fn say(&self, text: &str) {
        if let Ok(mut screen) = self.screen.lock() {
            screen.say(text);
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.args.timeout)
    }

    /// The whole run: create, report, (interactively: serve scale requests until Ctrl-C), delete.
    /// Returns whether everything succeeded; the cluster is deleted in every case.
    pub async fn run(&self) -> bool {
        let name = self.args.cluster_name.clone();
        let nodes = match &self.args.real_node_image {
            Some(image) => format!(
                " with real nodes ({image}; bootstrap data from the suite's CABPK and KCP stand-in)"
            ),
            None => String::new(),
        };
        self.say(&format!(
            "--- capi-stand-in: creating cluster {name} (control plane machines: {}, workers: {}){nodes} as Cluster API core would",
            self.args.control_plane_machines, self.args.worker_machines
        ));
        let created = tokio::select! {
            result = self.guarded(self.create()) => result,
            _ = self.follow() => Err("the live view stopped".into()),
            _ = tokio::signal::ctrl_c() => Err("interrupted (Ctrl-C)".into()),
        };
        let mut ok = match created {
            Ok(()) => {
                let reported = self.guarded(self.report()).await;
                if let Err(e) = &reported {
                    self.say(&format!("capi-stand-in: the cluster does not answer: {e}"));
                }
                if reported.is_ok() && !self.args.once {
                    self.serve_until_interrupted().await;
                }
                reported.is_ok()
            }
            Err(e) => {
                self.say(&format!(
                    "capi-stand-in: creating cluster {name} failed: {e}"
                ));
                false
            }
        };
        self.say(&format!("--- capi-stand-in: deleting cluster {name} as core would (workers, control planes, infrastructure, Cluster)"));
        let deleted = tokio::select! {
            result = self.guarded(self.delete()) => result,
            _ = self.follow() => Err("the live view stopped".into()),
        };
        match deleted {
            Ok(()) => self.say(&format!(
                "--- capi-stand-in: cluster {name} deleted; no container, volume, network or object left"
            )),
            Err(e) => {
                self.say(&format!("capi-stand-in: deleting cluster {name} failed: {e}"));
                ok = false;
            }
        }
        let _ = std::fs::remove_file(self.workload_kubeconfig());
        ok
    }

    /// Runs a step of the suite's harness, whose failures are panics, as a `Result`.
    async fn guarded<F: Future<Output = ()>>(&self, step: F) -> Result<(), String> {
        std::panic::AssertUnwindSafe(step)
            .catch_unwind()
            .await
            .map_err(|panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a step failed".into())
            })
    }

    /// Redraws the live view every half second; never returns.
    async fn follow(&self) {
        loop {
            if let Some(objects) = self.objects().await {
                let lines = render(&self.args.cluster_name, &objects);
                if let Ok(mut screen) = self.screen.lock() {
                    screen.show(lines);
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The cluster's objects, `None` when the API does not answer.
    async fn objects(&self) -> Option<Objects> {
        let env = &self.env;
        let name = &self.args.cluster_name;
        let cluster = env.api(&capi("Cluster")).get_opt(name).await.ok()?;
        let infra_cluster = env
            .api(&infra(env.kinds.cluster()))
            .get_opt(name)
            .await
            .ok()?;
        let machines = env.cluster_machines(name).await.ok()?;
        let docker_machines = env
            .api(&infra(env.kinds.machine()))
            .list(&ListParams::default())
            .await
            .ok()?;
        let mut machines: Vec<(DynamicObject, Option<DynamicObject>)> = machines
            .into_iter()
            .map(|m| {
                let dm = docker_machines
                    .items
                    .iter()
                    .find(|dm| dm.metadata.name == m.metadata.name)
                    .cloned();
                (m, dm)
            })
            .collect();
        machines.sort_by_key(|(m, _)| m.metadata.name.clone());
        Some(Objects {
            cluster,
            infra_cluster,
            machines,
        })
    }

    fn init_secret(&self) -> String {
        format!("{}-init", self.args.cluster_name)
    }

    fn join_secret(&self) -> String {
        format!("{}-join", self.args.cluster_name)
    }

    fn container(&self, machine: &str) -> String {
        format!("{}-{machine}", self.args.cluster_name)
    }

    fn workload_kubeconfig(&self) -> PathBuf {
        self.args
            .out_dir
            .join(format!("{}.kubeconfig", self.args.cluster_name))
    }

    /// What `clusterctl generate cluster | kubectl apply` and core's controllers do, until every
    /// Machine is provisioned and its Node carries its provider ID (real nodes:
    /// [`StandIn::create_real`]).
    async fn create(&self) {
        if let Some(image) = &self.args.real_node_image {
            return self.create_real(image).await;
        }
        let env = &self.env;
        let name = &self.args.cluster_name;
        let cluster = env.create_cluster(name, false).await;
        env.create_docker_cluster(&cluster, json!({})).await;
        // The control plane provider stores the workload kubeconfig before it makes machines.
        env.create_kubeconfig_secret(name).await;
        env.create_secret(&self.init_secret(), &cloud_config(0))
            .await;
        env.create_secret(
            &self.join_secret(),
            &cloud_config_running(0, "kubeadm join --config /etc/capd-test/config.yaml"),
        )
        .await;
        for i in 0..self.args.control_plane_machines {
            let secret = if i == 0 {
                self.init_secret()
            } else {
                self.join_secret()
            };
            self.create_machine(true, i, secret).await;
        }
        for i in 0..self.args.worker_machines {
            self.create_machine(false, i, self.join_secret()).await;
        }
        env.wait_docker_cluster_provisioned(name, self.timeout())
            .await;
        env.mark_infrastructure_provisioned(name).await;
        // The provider sets the Nodes' provider IDs once the control plane is initialized.
        env.wait_machine_provisioned(&machine_name(true, 0), self.timeout())
            .await;
        env.mark_control_plane_initialized(name).await;
        for i in 0..self.args.control_plane_machines {
            self.wait_machine_joined(&machine_name(true, i)).await;
        }
        for i in 0..self.args.worker_machines {
            self.wait_machine_joined(&machine_name(false, i)).await;
        }
    }

    async fn create_machine(&self, control_plane: bool, index: u32, secret: String) {
        let spec = MachineSpec {
            control_plane,
            bootstrap_secret: Some(secret),
            ..MachineSpec::default()
        };
        let machine = machine_name(control_plane, index);
        self.env
            .create_machine_with(&self.args.cluster_name, &machine, &spec)
            .await;
    }

    /// Waits until a Machine is provisioned, then registers its Node as kubelet would and waits
    /// until the provider set the Node's provider ID.
    async fn wait_machine_joined(&self, machine: &str) {
        let env = &self.env;
        env.wait_machine_provisioned(machine, self.timeout()).await;
        let node = self.container(machine);
        env.register_node(&node, true).await;
        eventually(
            self.timeout(),
            &format!("Node {node} to carry its provider ID"),
            || async {
                let spec = env.node(&node).await.spec?;
                (spec.provider_id? == format!("docker:////{node}")).then_some(())
            },
        )
        .await;
    }

    /// Prints the containers, the load balancer answering through haproxy, the kubeconfigs and
    /// what to try next (real nodes: [`StandIn::report_real`]).
    async fn report(&self) {
        if self.args.real_node_image.is_some() {
            return self.report_real().await;
        }
        let env = &self.env;
        let name = &self.args.cluster_name;
        let lb = format!("{name}-lb");
        let port = published_port(&lb, 6443).expect("the load balancer publishes 6443/tcp");
        let answer = https_get_until(port, "/healthz", self.timeout(), |a| a.status == 200)
            .await
            .expect("an answer from /healthz through the load balancer");
        std::fs::create_dir_all(&self.args.out_dir).expect("the output directory");
        let workload = self.workload_kubeconfig();
        std::fs::write(&workload, env.workload.kubeconfig_yaml())
            .expect("the workload kubeconfig written");
        let management = env.kubeconfig_path();
        let kubectl = format!("kubectl --kubeconfig {}", management.display());
        let workers = self.args.worker_machines + 2;
        let next = if self.args.once {
            "(--once: deleting it now)".to_string()
        } else {
            format!(
                "Try:\n  {kubectl} annotate cluster {name} {WORKERS_ANNOTATION}={workers} --overwrite   # scale the workers\n  {kubectl} get clusters,machines,dockerclusters,dockermachines\n  docker ps --filter label={CLUSTER_LABEL}={name}\n  kind get clusters\n  Ctrl-C deletes the cluster as core would, then stops the manager and the sandbox"
            )
        };
        self.say(&format!(
            "--- cluster {name} is up\n\nContainers:\n{}\nLoad balancer: https://127.0.0.1:{port}/healthz -> {} {} (answered by {} through haproxy in {lb})\nManagement kubeconfig: {}\nWorkload kubeconfig:   {} (the stand-in's workload test API server, holding the Nodes; lives while the stand-in runs)\n\n{next}\n",
            cluster_containers_table(std::slice::from_ref(name)).trim_end(),
            answer.status,
            answer.body.trim(),
            answer.header("X-Capd-Node").unwrap_or("?"),
            management.display(),
            workload.display(),
        ));
    }

    /// Keeps the live view and the workers' number (the Cluster's annotation) until Ctrl-C.
    async fn serve_until_interrupted(&self) {
        let mut workers = self.args.worker_machines;
        let serve = async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(wanted) = self.wanted_workers().await else {
                    continue;
                };
                if wanted == workers {
                    continue;
                }
                self.say(&format!("--- scaling the workers {workers} -> {wanted}"));
                let step = self.guarded(self.scale(workers, wanted)).await;
                match step {
                    Ok(()) => workers = wanted,
                    Err(e) => self.say(&format!("capi-stand-in: scaling failed: {e}")),
                }
            }
        };
        tokio::select! {
            _ = serve => {}
            _ = self.follow() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }

    async fn wanted_workers(&self) -> Option<u32> {
        let cluster = self
            .env
            .api(&capi("Cluster"))
            .get_opt(&self.args.cluster_name)
            .await
            .ok()??;
        cluster
            .metadata
            .annotations?
            .get(WORKERS_ANNOTATION)?
            .parse()
            .ok()
    }

    /// Plays a MachineDeployment: new workers join, the newest ones go first (Node, then Machine
    /// in core's order).
    async fn scale(&self, from: u32, to: u32) {
        if self.args.real_node_image.is_some() {
            return self.scale_real(from, to).await;
        }
        for i in from..to {
            self.create_machine(false, i, self.join_secret()).await;
        }
        for i in from..to {
            self.wait_machine_joined(&machine_name(false, i)).await;
        }
        for i in (to..from).rev() {
            let machine = machine_name(false, i);
            let nodes: Api<Node> = Api::all(self.env.workload_client.clone());
            let _ = nodes
                .delete(&self.container(&machine), &Default::default())
                .await;
            self.env.begin_machine_deletion(&machine).await;
            self.env
                .finish_machine_deletion(&machine, self.timeout())
                .await;
        }
    }

    /// Deletes the cluster as core does and checks that nothing is left of it.
    async fn delete(&self) {
        let env = &self.env;
        let name = &self.args.cluster_name;
        let mut volumes = Vec::new();
        for container in cluster_containers(name) {
            volumes.extend(container_volumes(&container));
        }
        if env.get(&capi("Cluster"), name).await.is_some() {
            env.delete_cluster_as_core(name, self.timeout()).await;
        }
        env.assert_nothing_left(name, &volumes).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(["capi-stand-in", "--kubeconfig", "k"].iter().chain(args))
    }

    #[test]
    fn defaults_make_one_control_plane_and_one_worker() {
        let args = parse(&[]).unwrap();
        assert_eq!(
            (
                args.cluster_name.as_str(),
                args.control_plane_machines,
                args.worker_machines
            ),
            ("demo", 1, 1)
        );
        assert!(!args.once);
        assert_eq!(args.out_dir, PathBuf::from("out/sandbox"));
        assert_eq!(
            args.real_node_image, None,
            "test node containers by default"
        );
    }

    #[test]
    fn a_real_node_image_makes_a_real_cluster() {
        let args = parse(&["--real-node-image", "capd-test/realnode:abc", "--once"]).unwrap();
        assert_eq!(
            args.real_node_image.as_deref(),
            Some("capd-test/realnode:abc")
        );
        assert!(args.once);
    }

    #[test]
    fn flags_choose_more_machines_and_the_once_mode() {
        let args = parse(&[
            "--cluster-name=big",
            "--control-plane-machines=3",
            "--worker-machines=0",
            "--once",
        ])
        .unwrap();
        assert_eq!(
            (
                args.cluster_name.as_str(),
                args.control_plane_machines,
                args.worker_machines,
                args.once
            ),
            ("big", 3, 0, true)
        );
    }

    #[test]
    fn a_cluster_needs_a_control_plane() {
        let error = parse(&["--control-plane-machines=0"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
    }

    #[test]
    fn machines_are_named_by_role_and_index() {
        assert_eq!(machine_name(true, 0), "control-plane-0");
        assert_eq!(machine_name(false, 2), "worker-2");
    }
}
