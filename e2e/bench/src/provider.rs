//! The provider runs: N machines through the whole stack, and the manager at rest.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use capd::docker::ContainerRuntime;
use capd::docker::node::{NodeRole, role_selector};
use futures::{StreamExt, TryStreamExt};
use serde_json::json;

use crate::procfs;
use crate::stack::{ManagerSettings, Seen, Stack, infra, is_bootstrapped, poll};

/// What the objects need besides the stack.
pub struct Workload {
    /// Node image (`spec.customImage`).
    pub node_image: String,
    /// Load balancer image.
    pub haproxy_image: String,
    /// Machine version.
    pub version: String,
    /// The bootstrap data.
    pub cloud_config: String,
}

/// The figures of one provider run of N machines.
#[derive(Debug, Clone, Default)]
pub struct LifecycleRun {
    /// DockerCluster created → provisioned, seconds.
    pub load_balancer: f64,
    /// DockerMachines created → all provisioned with bootstrap completed, seconds.
    pub provision: f64,
    /// DockerMachines deleted → every container and object gone, seconds.
    pub delete: f64,
    /// The manager's peak resident memory (VmHWM), MiB.
    pub peak_rss_mib: f64,
    /// CPU seconds the manager used from machine creation to the end of the delete.
    pub cpu_seconds: f64,
    /// CPU seconds this process used over the same time: the test API servers that stand in
    /// for kube-apiserver, and the benchmark's own watches and requests.
    pub api_server_cpu_seconds: f64,
    /// Manager API writes per machine lifecycle, Events included.
    pub writes_per_machine: f64,
    /// Of which Events.
    pub event_writes_per_machine: f64,
    /// Manager Docker calls per machine lifecycle.
    pub docker_calls_per_machine: f64,
    /// Docker calls by operation over the whole lifecycle (all machines).
    pub docker_calls: BTreeMap<String, u64>,
    /// API writes by kind over the whole lifecycle (all machines).
    pub writes: BTreeMap<String, u64>,
}

/// The figures of the manager at rest.
#[derive(Debug, Clone, Default)]
pub struct RestRun {
    /// Resident memory at the end of the window, MiB.
    pub rss_mib: f64,
    /// Peak resident memory since start, MiB.
    pub peak_rss_mib: f64,
    /// CPU seconds used during the window.
    pub cpu_seconds: f64,
    /// API writes during the window.
    pub writes: u64,
    /// Docker calls during the window.
    pub docker_calls: u64,
}

const PROVISION_TIMEOUT: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_millis(100);

fn total(calls: &BTreeMap<String, u64>) -> u64 {
    calls.values().sum()
}

fn difference(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Writes of the manager: every write but the benchmark's own creates and deletes of
/// DockerMachines (the manager never creates or deletes one).
fn manager_writes(counts: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    counts
        .into_iter()
        .filter(|(k, _)| {
            !(k.starts_with("create dockermachines.") || k.starts_with("delete dockermachines."))
        })
        .collect()
}

async fn create_all(
    stack: &Stack,
    w: &Workload,
    cluster: &str,
    n: usize,
) -> Result<Vec<kube::api::DynamicObject>> {
    futures::stream::iter(0..n)
        .map(|i| async move {
            stack
                .create_machine(cluster, &format!("m{i}"), &w.version)
                .await
        })
        .buffer_unordered(16)
        .try_collect()
        .await
}

/// Waits, watching the DockerMachines, until `n` of them are bootstrapped.
async fn wait_bootstrapped(stack: &Stack, n: usize) -> Result<()> {
    stack
        .watch_until(
            &infra("DockerMachine"),
            PROVISION_TIMEOUT,
            "every DockerMachine to be bootstrapped",
            Seen::marking(is_bootstrapped),
            |seen| seen.marked() >= n,
        )
        .await
}

/// Sets up a cluster whose DockerCluster is provisioned; returns the time that took.
async fn cluster(stack: &Stack, w: &Workload, name: &str) -> Result<f64> {
    let started = Instant::now();
    stack.create_cluster(name, &w.haproxy_image).await?;
    stack
        .watch_until(
            &infra("DockerCluster"),
            PROVISION_TIMEOUT,
            "the DockerCluster to be provisioned",
            Seen::default(),
            |seen| {
                seen.objects().any(|dc| {
                    dc.metadata.name.as_deref() == Some(name)
                        && dc.data["status"]["initialization"]["provisioned"] == json!(true)
                })
            },
        )
        .await?;
    let lb = started.elapsed().as_secs_f64();
    stack.prepare_machines(name, &w.cloud_config).await?;
    Ok(lb)
}

/// N machines created, provisioned, bootstrapped, then deleted.
pub async fn lifecycle(
    settings: ManagerSettings,
    runtime: &Arc<dyn ContainerRuntime>,
    w: &Workload,
    cluster_name: &str,
    n: usize,
) -> Result<LifecycleRun> {
    let stack = Stack::start(settings).await?;
    let result = lifecycle_in(&stack, runtime, w, cluster_name, n).await;
    stack.stop();
    result
}

async fn lifecycle_in(
    stack: &Stack,
    runtime: &Arc<dyn ContainerRuntime>,
    w: &Workload,
    cluster_name: &str,
    n: usize,
) -> Result<LifecycleRun> {
    let pid = stack.pid();
    let load_balancer = cluster(stack, w, cluster_name).await?;
    let machines = create_all(stack, w, cluster_name, n).await?;

    stack.mgmt.reset_write_counts();
    let calls_before = stack.docker_calls();
    let cpu_before = procfs::cpu_seconds(pid)?;
    let own_cpu_before = procfs::cpu_seconds(std::process::id())?;
    let started = Instant::now();
    futures::stream::iter(machines.iter())
        .map(|m| stack.create_docker_machine(cluster_name, m, &w.node_image))
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    wait_bootstrapped(stack, n).await?;
    let provision = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let api = stack.api(&infra("DockerMachine"));
    futures::stream::iter(machines.iter())
        .map(|m| {
            let api = api.clone();
            let name = m.metadata.name.clone().unwrap_or_default();
            async move { api.delete(&name, &Default::default()).await.map(|_| ()) }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    // The finalizer goes once the container is gone: the last DockerMachine's disappearance
    // is the end, and the containers are checked right after it.
    stack
        .watch_until(
            &infra("DockerMachine"),
            PROVISION_TIMEOUT,
            "every DockerMachine to be gone",
            Seen::default(),
            Seen::is_empty,
        )
        .await?;
    let delete = started.elapsed().as_secs_f64();
    let left = runtime
        .list_containers(&role_selector(cluster_name, NodeRole::Worker))
        .await?;
    if !left.is_empty() {
        bail!(
            "{} node container(s) left after their DockerMachines were gone",
            left.len()
        );
    }

    let cpu_seconds = procfs::cpu_seconds(pid)? - cpu_before;
    let api_server_cpu_seconds = procfs::cpu_seconds(std::process::id())? - own_cpu_before;
    let peak_rss_mib = procfs::status_mib(pid, "VmHWM")?;
    let docker_calls = difference(&stack.docker_calls(), &calls_before);
    let writes = manager_writes(stack.mgmt.write_counts());
    let events: u64 = writes
        .iter()
        .filter(|(k, _)| k.contains(" events."))
        .map(|(_, v)| v)
        .sum();
    let per = |x: u64| x as f64 / n as f64;
    let run = LifecycleRun {
        load_balancer,
        provision,
        delete,
        peak_rss_mib,
        cpu_seconds,
        api_server_cpu_seconds,
        writes_per_machine: per(writes.values().sum()),
        event_writes_per_machine: per(events),
        docker_calls_per_machine: per(total(&docker_calls)),
        docker_calls,
        writes,
    };
    Ok(run)
}

/// A MachinePool scaled from 0 to `n`, until every DockerMachine of the pool is bootstrapped
/// (the benchmark plays core's MachinePool controller meanwhile); returns the time in seconds.
pub async fn pool_scale_up(
    settings: ManagerSettings,
    w: &Workload,
    cluster_name: &str,
    n: usize,
) -> Result<f64> {
    let stack = Stack::start(settings).await?;
    let result = pool_scale_up_in(&stack, w, cluster_name, n).await;
    stack.stop();
    result
}

async fn pool_scale_up_in(
    stack: &Stack,
    w: &Workload,
    cluster_name: &str,
    n: usize,
) -> Result<f64> {
    const POOL: &str = "pool";
    cluster(stack, w, cluster_name).await?;
    stack
        .create_machine_pool(cluster_name, POOL, &w.version, &w.node_image)
        .await?;
    let started = Instant::now();
    stack.scale_machine_pool(POOL, n).await?;
    poll(
        PROVISION_TIMEOUT,
        POLL,
        "every pool DockerMachine to be bootstrapped",
        || async {
            stack
                .adopt_pool_machines(cluster_name, POOL, &w.version)
                .await?;
            Ok((stack.bootstrapped_machines().await? >= n).then_some(()))
        },
    )
    .await?;
    Ok(started.elapsed().as_secs_f64())
}

/// `n` machines provisioned and their Nodes initialized, then `window` of rest.
pub async fn at_rest(
    settings: ManagerSettings,
    w: &Workload,
    cluster_name: &str,
    n: usize,
    window: Duration,
) -> Result<RestRun> {
    let stack = Stack::start(settings).await?;
    let result = at_rest_in(&stack, w, cluster_name, n, window).await;
    stack.stop();
    result
}

async fn at_rest_in(
    stack: &Stack,
    w: &Workload,
    cluster_name: &str,
    n: usize,
    window: Duration,
) -> Result<RestRun> {
    let pid = stack.pid();
    cluster(stack, w, cluster_name).await?;
    let machines = create_all(stack, w, cluster_name, n).await?;
    futures::stream::iter(machines.iter())
        .map(|m| stack.create_docker_machine(cluster_name, m, &w.node_image))
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    wait_bootstrapped(stack, n).await?;
    poll(
        PROVISION_TIMEOUT,
        POLL,
        "every Node to be initialized",
        || async { Ok((stack.initialized_nodes().await? >= n).then_some(())) },
    )
    .await?;
    // Let the last reconciles triggered by the final status writes finish.
    tokio::time::sleep(Duration::from_secs(5)).await;
    stack.mgmt.reset_write_counts();
    let calls_before = stack.docker_calls();
    let cpu_before = procfs::cpu_seconds(pid)?;
    tokio::time::sleep(window).await;
    Ok(RestRun {
        rss_mib: procfs::status_mib(pid, "VmRSS")?,
        peak_rss_mib: procfs::status_mib(pid, "VmHWM")?,
        cpu_seconds: procfs::cpu_seconds(pid)? - cpu_before,
        writes: stack.mgmt.write_total(),
        docker_calls: total(&difference(&stack.docker_calls(), &calls_before)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmark_s_own_writes_are_not_the_manager_s() {
        let counts = BTreeMap::from([
            (
                "create dockermachines.infrastructure.cluster.x-k8s.io".to_string(),
                10,
            ),
            (
                "delete dockermachines.infrastructure.cluster.x-k8s.io".to_string(),
                10,
            ),
            (
                "patch dockermachines.infrastructure.cluster.x-k8s.io/status".to_string(),
                40,
            ),
            ("create events.events.k8s.io".to_string(), 20),
        ]);
        assert_eq!(manager_writes(counts).values().sum::<u64>(), 60);
    }

    fn machine(name: &str, bootstrapped: bool) -> kube::api::DynamicObject {
        let status = if bootstrapped { "True" } else { "False" };
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DockerMachine",
            "metadata": {"name": name, "namespace": "default"},
            "status": {
                "initialization": {"provisioned": true},
                "conditions": [{"type": "BootstrapCompleted", "status": status}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_bootstrapped_machines_are_counted_as_the_watch_tells_of_them() {
        use kube::runtime::watcher::Event;
        let mut seen = Seen::marking(is_bootstrapped);
        assert!(!seen.apply(Event::Init));
        assert!(!seen.apply(Event::InitApply(machine("m0", true))));
        assert!(!seen.apply(Event::InitApply(machine("m1", false))));
        assert!(seen.apply(Event::InitDone));
        assert_eq!(seen.marked(), 1);
        seen.apply(Event::Apply(machine("m1", true)));
        seen.apply(Event::Apply(machine("m1", true)));
        assert_eq!(seen.marked(), 2);
        // A machine whose bootstrap is reported again as not completed no longer counts.
        seen.apply(Event::Apply(machine("m0", false)));
        assert_eq!(seen.marked(), 1);
        seen.apply(Event::Delete(machine("m1", true)));
        assert_eq!(seen.marked(), 0);
        // A relisting (the watch restarted) counts afresh from what it lists.
        assert!(!seen.apply(Event::Init));
        assert!(!seen.apply(Event::InitApply(machine("m2", true))));
        assert!(seen.apply(Event::InitDone));
        assert_eq!(seen.marked(), 1);
        assert_eq!(seen.objects().count(), 1);
    }

    #[test]
    fn call_differences_drop_unchanged_operations() {
        let before = BTreeMap::from([("exec".to_string(), 3), ("host_info".to_string(), 1)]);
        let after = BTreeMap::from([
            ("exec".to_string(), 10),
            ("host_info".to_string(), 1),
            ("run_container".to_string(), 2),
        ]);
        assert_eq!(
            difference(&after, &before),
            BTreeMap::from([("exec".to_string(), 7), ("run_container".to_string(), 2)])
        );
    }
}
