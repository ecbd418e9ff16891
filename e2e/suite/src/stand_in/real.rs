//! The stand-in with real nodes (`hack/run.sh --real`, flag `--real-node-image`): the same run as
//! with test node containers, but the Machines boot the real node image of `e2e/images/real` and
//! bootstrap with real kubeadm, their data coming from the suite's CABPK and KCP stand-in
//! ([`crate::kubeadm`]). KCP's part: the first control plane initialised, then one control plane
//! joined at a time; the MachineDeployment's: workers joined, and removed newest first.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::{StandIn, WORKERS_ANNOTATION, machine_name};
use crate::docker::{CLUSTER_LABEL, cluster_containers_table};
use crate::kubeadm::{Progress, RealCluster, Workload};

/// A real cluster whose first control plane is initialised: what scaling and the report need.
pub struct Built {
    /// The cluster, its certificates and admin kubeconfig.
    pub cluster: RealCluster,
    /// Its API, through the load balancer.
    pub workload: Workload,
}

/// One line on a Machine that bootstrapped.
fn progress_line(machine: &str, what: &str, progress: Progress) -> String {
    format!(
        "--- {machine}: {what} done {:.0}s after its creation, Node Ready after {:.0}s",
        progress.bootstrapped.as_secs_f64(),
        progress.ready.as_secs_f64()
    )
}

/// `kubectl --kubeconfig <kubeconfig> <args>`: its output, or why it failed.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .map_err(|e| format!("run kubectl (Debian: apt-get install kubernetes-client): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

impl StandIn {
    fn built(&self) -> &Built {
        self.real
            .get()
            .expect("the real cluster's first control plane is initialised")
    }

    /// [`StandIn::create`] with real nodes: the Cluster and its DockerCluster, KCP's
    /// certificates and admin kubeconfig, the first control plane initialised, the other control
    /// planes joined one at a time, then the workers.
    pub(super) async fn create_real(&self, image: &str) {
        let env = &self.env;
        let cluster = env
            .create_real_cluster(&self.args.cluster_name, image, json!({}), self.timeout())
            .await;
        self.say(&format!(
            "--- infrastructure provisioned (load balancer {}, endpoint https://{}); the cluster's CAs and admin kubeconfig stored as KCP stores them",
            cluster.load_balancer(),
            cluster.settings.endpoint
        ));
        let first = machine_name(true, 0);
        let (workload, progress) = cluster.init(env, &first).await;
        self.say(&progress_line(&first, "kubeadm init", progress));
        for i in 1..self.args.control_plane_machines {
            let machine = machine_name(true, i);
            let progress = cluster.join(env, &workload, &machine, true).await;
            self.say(&progress_line(
                &machine,
                "kubeadm join --control-plane",
                progress,
            ));
        }
        for i in 0..self.args.worker_machines {
            let machine = machine_name(false, i);
            let progress = cluster.join(env, &workload, &machine, false).await;
            self.say(&progress_line(&machine, "kubeadm join", progress));
        }
        let _ = self.real.set(Built { cluster, workload });
    }

    /// [`StandIn::report`] with real nodes: checks that `/healthz` answers through haproxy and
    /// that the Nodes are the Machines', all Ready through the load balancer and with their
    /// DockerMachines' provider IDs; writes the admin kubeconfig and ends with the workload
    /// cluster's own `kubectl get nodes -o wide`.
    pub(super) async fn report_real(&self) {
        let env = &self.env;
        let name = &self.args.cluster_name;
        let Built { cluster, workload } = self.built();
        let answer = cluster.wait_healthz(self.timeout()).await;
        let mut machines: Vec<String> = env
            .cluster_machines(name)
            .await
            .expect("the Machines")
            .into_iter()
            .filter_map(|m| m.metadata.name)
            .collect();
        machines.sort();
        let provider_ids = cluster
            .wait_nodes_match_machines(env, workload, &machines, self.timeout())
            .await;
        std::fs::create_dir_all(&self.args.out_dir).expect("the output directory");
        let path = std::path::absolute(self.workload_kubeconfig())
            .unwrap_or_else(|_| self.workload_kubeconfig());
        std::fs::write(&path, &cluster.kubeconfig).expect("the workload kubeconfig written");
        let nodes = kubectl(&path, &["get", "nodes", "-o", "wide"])
            .unwrap_or_else(|e| panic!("the workload cluster's Nodes: {e}"));
        let management = env.kubeconfig_path();
        let docker = match std::env::var("DOCKER_HOST") {
            Ok(host) if !host.is_empty() => format!("DOCKER_HOST={host} docker"),
            _ => "docker".to_string(),
        };
        let next = if self.args.once {
            "(--once: deleting it after the Nodes below)".to_string()
        } else {
            let kubectl = format!("kubectl --kubeconfig {}", management.display());
            let workers = self.args.worker_machines + 1;
            format!(
                "Try:\n  {kubectl} annotate cluster {name} {WORKERS_ANNOTATION}={workers} --overwrite   # scale the workers (real joins)\n  {kubectl} get clusters,machines,dockerclusters,dockermachines\n  {docker} ps --filter label={CLUSTER_LABEL}={name}\n  Ctrl-C deletes the cluster as core would, then stops the manager and the sandbox"
            )
        };
        let containers = cluster_containers_table(std::slice::from_ref(name));
        let ids = provider_ids
            .values()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let (image, lb, endpoint) = (
            &cluster.image,
            cluster.load_balancer(),
            &cluster.settings.endpoint,
        );
        let port = cluster.load_balancer_port();
        let (management, path) = (management.display(), path.display());
        self.say(&format!(
            "--- cluster {name} is up: Kubernetes {} on real nodes ({image})

Containers:
{}
Load balancer: https://127.0.0.1:{port}/healthz -> {} {} (the API servers behind haproxy in {lb})
Nodes: {} Ready through the load balancer, each with its DockerMachine's provider ID ({ids})
Management kubeconfig: {management}
Workload kubeconfig:   {path} (the admin kubeconfig of the Secret {name}-kubeconfig, as `clusterctl get kubeconfig {name}` prints it: https://{endpoint}, the load balancer)
  use it: export KUBECONFIG={path}; kubectl get pods -A -o wide

{next}

$ kubectl --kubeconfig {path} get nodes -o wide
{nodes}
",
            cluster.settings.version,
            containers.trim_end(),
            answer.status,
            answer.body.trim(),
            provider_ids.len(),
        ));
    }

    /// [`StandIn::scale`] with real nodes: new workers join with a bootstrap token each; the
    /// newest ones go first, as core removes a Machine (drained, its DockerMachine deleted, then
    /// its Node).
    pub(super) async fn scale_real(&self, from: u32, to: u32) {
        let Built { cluster, workload } = self.built();
        for i in from..to {
            let machine = machine_name(false, i);
            let progress = cluster.join(&self.env, workload, &machine, false).await;
            self.say(&progress_line(&machine, "kubeadm join", progress));
        }
        for i in (to..from).rev() {
            let machine = machine_name(false, i);
            cluster
                .remove_worker(&self.env, workload, &machine, self.timeout())
                .await;
            self.say(&format!("--- {machine}: drained, deleted, its Node gone"));
        }
    }
}
