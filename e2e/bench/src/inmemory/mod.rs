//! The in-memory scale run (issue 40): C clusters of M machines (one control plane, M − 1
//! workers) of DevCluster and DevMachine with `spec.backend.inMemory`, on one manager and one
//! test API server, with the benchmark playing Cluster API core as the suite does: the Cluster
//! marked infrastructure-provisioned once its DevCluster is, the `<cluster>-kubeconfig` Secret
//! written for the fake API server, and (playing KCP and CABPK) the control plane initialized
//! and the workers given their bootstrap data once the control plane's DevMachine is Ready.
//!
//! It reports the time to every DevMachine Ready against the configured delays, the manager's
//! memory per cluster and machine, its CPU, writes and file descriptors at rest, and the
//! deletion (every listener closed, descriptors back down).

pub mod cli;
pub mod figures;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use capd_e2e::MachineOwner;
use capd_e2e::kubeadm::{Authority, Purpose, admin_kubeconfig, cluster_secret, secret_name};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use self::figures::{Measured, StageDelays};
use crate::procfs;
use crate::stack::{ManagerSettings, NAMESPACE, Seen, Stack, capi, infra};

/// What to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Clusters.
    pub clusters: usize,
    /// Machines per cluster: one control plane, the rest workers.
    pub machines_per_cluster: usize,
    /// The stage durations of every DevMachine.
    pub delays: StageDelays,
    /// The rest window measured after provisioning.
    pub rest: Duration,
}

const VERSION: &str = "v1.31.0";
const TIMEOUT: Duration = Duration::from_secs(1800);
const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// How long the descriptors may take to come back to the baseline after the deletion.
const FD_SETTLE: Duration = Duration::from_secs(120);
/// How many clusters are created at once (each one's objects in order).
const CREATE_CONCURRENCY: usize = 8;

/// One cluster as the run made it.
struct Made {
    name: String,
    /// Seconds from the start of the run to this cluster's first create.
    started: f64,
    control_plane_uid: String,
    worker_uids: Vec<String>,
}

/// The clusters' CAs, by cluster: written as each cluster is made, read by core as each
/// DevCluster is provisioned (to write the kubeconfig).
type Authorities = Arc<std::sync::Mutex<BTreeMap<String, Arc<Authority>>>>;

fn control_plane_name(cluster: &str) -> String {
    format!("{cluster}-cp")
}

fn worker_name(cluster: &str, index: usize) -> String {
    format!("{cluster}-w{index}")
}

fn uid(object: &DynamicObject) -> String {
    object.metadata.uid.clone().unwrap_or_default()
}

/// Creates one cluster's objects as core, KCP, CABPK and a MachineDeployment would: its CA,
/// the Cluster and DevCluster, the bootstrap data, and every Machine with its DevMachine (the
/// control plane's with bootstrap data, the workers' waiting for it).
async fn create_cluster(
    stack: &Stack,
    index: usize,
    s: &Settings,
    run_started: Instant,
    authorities: &Authorities,
) -> Result<Made> {
    let name = format!("c{index}");
    let started = run_started.elapsed().as_secs_f64();
    let secrets: Api<Secret> = Api::namespaced(stack.client.clone(), NAMESPACE);
    let ca = Authority::generate();
    let ca_secret = cluster_secret(
        &secret_name(&name, Purpose::ClusterCa),
        NAMESPACE,
        &name,
        [("tls.crt", ca.cert_pem()), ("tls.key", ca.key_pem())],
    );
    secrets.create(&PostParams::default(), &ca_secret).await?;
    // The etcd CA, which the fake etcd of each control plane serves with.
    let etcd_ca = Authority::generate();
    let etcd_secret = cluster_secret(
        &secret_name(&name, Purpose::EtcdCa),
        NAMESPACE,
        &name,
        [
            ("tls.crt", etcd_ca.cert_pem()),
            ("tls.key", etcd_ca.key_pem()),
        ],
    );
    secrets.create(&PostParams::default(), &etcd_secret).await?;
    authorities
        .lock()
        .map_err(|_| anyhow::anyhow!("the authorities' lock is poisoned"))?
        .insert(name.clone(), Arc::new(ca));
    let labels = json!({CLUSTER_NAME_LABEL: name});
    let cluster = stack
        .create(
            &capi("Cluster"),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
                "spec": {
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": name},
                    "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": name}
                }
            }),
        )
        .await?;
    stack
        .create(
            &infra("DevCluster"),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DevCluster",
                "metadata": {
                    "name": name, "namespace": NAMESPACE, "labels": labels,
                    "ownerReferences": [capd_e2e::owner("Cluster", &cluster)]
                },
                "spec": {"backend": {"inMemory": {}}}
            }),
        )
        .await?;
    let bootstrap = cluster_secret(
        &format!("{name}-bootstrap"),
        NAMESPACE,
        &name,
        [
            ("value", capd_e2e::cloud_config(0)),
            ("format", "cloud-config".to_string()),
        ],
    );
    secrets.create(&PostParams::default(), &bootstrap).await?;

    let mut control_plane_uid = String::new();
    let mut worker_uids = Vec::new();
    for m in 0..s.machines_per_cluster {
        let control_plane = m == 0;
        let machine_name = if control_plane {
            control_plane_name(&name)
        } else {
            worker_name(&name, m)
        };
        let machine_labels = MachineOwner::new(&name, control_plane).machine_labels(&labels);
        let bootstrap = if control_plane {
            json!({"dataSecretName": format!("{name}-bootstrap")})
        } else {
            json!({"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": machine_name}})
        };
        let machine = stack
            .create(
                &capi("Machine"),
                json!({
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "Machine",
                    "metadata": {"name": machine_name, "namespace": NAMESPACE, "labels": machine_labels},
                    "spec": {
                        "clusterName": name,
                        "version": VERSION,
                        "bootstrap": bootstrap,
                        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachine", "name": machine_name}
                    }
                }),
            )
            .await?;
        let dev_machine = stack
            .create(
                &infra("DevMachine"),
                json!({
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                    "kind": "DevMachine",
                    "metadata": {
                        "name": machine_name, "namespace": NAMESPACE, "labels": machine_labels,
                        "ownerReferences": [capd_e2e::owner("Machine", &machine)]
                    },
                    "spec": {"backend": {"inMemory": s.delays.spec()}}
                }),
            )
            .await?;
        if control_plane {
            control_plane_uid = uid(&dev_machine);
        } else {
            worker_uids.push(uid(&dev_machine));
        }
    }
    Ok(Made {
        name,
        started,
        control_plane_uid,
        worker_uids,
    })
}

fn ready(object: &DynamicObject) -> bool {
    object.data["status"]["initialization"]["provisioned"] == json!(true)
        && capd_e2e::condition_state(object, "Ready").is_some_and(|(status, _)| status == "True")
}

fn cluster_of(object: &DynamicObject) -> String {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_NAME_LABEL))
        .cloned()
        .unwrap_or_default()
}

/// Core once a DevCluster is provisioned: the Cluster's endpoint and
/// `infrastructureProvisioned`, and the kubeconfig Secret for the fake API server.
async fn infrastructure_provisioned(
    client: kube::Client,
    cluster: String,
    endpoint: Value,
    kubeconfig: String,
) -> Result<()> {
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &capi("Cluster"));
    clusters
        .patch(
            &cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": endpoint}})),
        )
        .await?;
    clusters
        .patch_status(
            &cluster,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"initialization": {"infrastructureProvisioned": true}}}),
            ),
        )
        .await?;
    let secret = cluster_secret(
        &format!("{cluster}-kubeconfig"),
        NAMESPACE,
        &cluster,
        [("value", kubeconfig)],
    );
    Api::<Secret>::namespaced(client, NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// KCP and CABPK once the control plane's DevMachine is Ready: the control plane initialized,
/// then every worker's bootstrap data.
async fn control_plane_initialized(
    client: kube::Client,
    cluster: String,
    workers: usize,
) -> Result<()> {
    Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &capi("Cluster"))
        .patch_status(
            &cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}}})),
        )
        .await?;
    let machines: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE, &capi("Machine"));
    for w in 1..=workers {
        machines
            .patch(
                &worker_name(&cluster, w),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"bootstrap": {"dataSecretName": format!("{cluster}-bootstrap")}}})),
            )
            .await?;
    }
    Ok(())
}

/// What the watch loop found.
struct Provisioned {
    /// Seconds from the start to every DevMachine Ready.
    seconds: f64,
    /// Seconds from the start to each DevMachine Ready, by name.
    ready_at: BTreeMap<String, f64>,
    /// Admin kubeconfigs of the fake clusters, by cluster.
    kubeconfigs: BTreeMap<String, String>,
    /// Listener ports of the fake clusters.
    ports: Vec<u16>,
}

enum Change {
    Cluster(watcher::Event<DynamicObject>),
    Machine(watcher::Event<DynamicObject>),
}

/// Watches DevClusters and DevMachines, playing core as they progress, until every DevMachine
/// is Ready.
async fn play_core(
    stack: &Stack,
    authorities: &Authorities,
    s: &Settings,
    started: Instant,
) -> Result<Provisioned> {
    let total = s.clusters * s.machines_per_cluster;
    let clusters = watcher::watcher(stack.api(&infra("DevCluster")), Default::default())
        .map(|e| e.map(Change::Cluster));
    let machines = watcher::watcher(stack.api(&infra("DevMachine")), Default::default())
        .map(|e| e.map(Change::Machine));
    let mut changes = std::pin::pin!(futures::stream::select(clusters, machines));
    let mut tasks = tokio::task::JoinSet::new();
    let mut infra_done = BTreeSet::new();
    let mut initialized = BTreeSet::new();
    let mut ready_at: BTreeMap<String, f64> = BTreeMap::new();
    let mut kubeconfigs = BTreeMap::new();
    let mut ports = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while ready_at.len() < total {
        let change = tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                joined.context("a core task panicked")??;
                continue;
            }
            change = changes.next() => change.context("the watches ended")??,
            () = tokio::time::sleep_until(deadline) => {
                bail!("timed out after {TIMEOUT:?}: {} of {total} DevMachines Ready", ready_at.len())
            }
        };
        match change {
            Change::Cluster(watcher::Event::Apply(dc) | watcher::Event::InitApply(dc)) => {
                let name = dc.metadata.name.clone().unwrap_or_default();
                let endpoint = dc.data["spec"]["controlPlaneEndpoint"].clone();
                let port = endpoint["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok());
                let ca = authorities
                    .lock()
                    .map_err(|_| anyhow::anyhow!("the authorities' lock is poisoned"))?
                    .get(&name)
                    .cloned();
                let (Some(port), Some(host), Some(ca)) = (port, endpoint["host"].as_str(), ca)
                else {
                    continue;
                };
                if dc.data["status"]["initialization"]["provisioned"] != json!(true)
                    || !infra_done.insert(name.clone())
                {
                    continue;
                }
                let kubeconfig = admin_kubeconfig(&name, &format!("https://{host}:{port}"), &ca);
                kubeconfigs.insert(name.clone(), kubeconfig.clone());
                ports.push(port);
                tasks.spawn(infrastructure_provisioned(
                    stack.client.clone(),
                    name,
                    endpoint,
                    kubeconfig,
                ));
            }
            Change::Machine(watcher::Event::Apply(dm) | watcher::Event::InitApply(dm)) => {
                if !ready(&dm) {
                    continue;
                }
                let name = dm.metadata.name.clone().unwrap_or_default();
                let cluster = cluster_of(&dm);
                ready_at
                    .entry(name.clone())
                    .or_insert_with(|| started.elapsed().as_secs_f64());
                if name == control_plane_name(&cluster) && initialized.insert(cluster.clone()) {
                    tasks.spawn(control_plane_initialized(
                        stack.client.clone(),
                        cluster,
                        s.machines_per_cluster - 1,
                    ));
                }
            }
            _ => {}
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    while let Some(joined) = tasks.join_next().await {
        joined.context("a core task panicked")??;
    }
    Ok(Provisioned {
        seconds,
        ready_at,
        kubeconfigs,
        ports,
    })
}

/// Nodes with an `in-memory://` provider ID, listed through every fake API server.
async fn count_nodes(kubeconfigs: &BTreeMap<String, String>) -> Result<usize> {
    let counts: Vec<usize> = futures::stream::iter(kubeconfigs.values())
        .map(|kubeconfig| async move {
            let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
            let client = kube::Client::try_from(config)?;
            let nodes = Api::<Node>::all(client)
                .list(&ListParams::default())
                .await?;
            anyhow::Ok(
                nodes
                    .items
                    .iter()
                    .filter(|n| {
                        n.spec
                            .as_ref()
                            .and_then(|s| s.provider_id.as_deref())
                            .is_some_and(|id| id.starts_with("in-memory://"))
                    })
                    .count(),
            )
        })
        .buffer_unordered(8)
        .try_collect()
        .await?;
    Ok(counts.iter().sum())
}

/// Deletes every object of `kind` and waits until they are gone.
async fn delete_all(stack: &Stack, kind: &str) -> Result<()> {
    let resource = infra(kind);
    let api = stack.api(&resource);
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move { api.delete(&name, &Default::default()).await.map(|_| ()) }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    stack
        .watch_until(
            &resource,
            TIMEOUT,
            &format!("every {kind} to be gone"),
            Seen::default(),
            Seen::is_empty,
        )
        .await
}

/// How many of `ports` still accept a connection on the loopback address.
async fn open_ports(ports: &[u16]) -> usize {
    let mut open = 0;
    for &port in ports {
        let attempt = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(("127.0.0.1", port)),
        )
        .await;
        if matches!(attempt, Ok(Ok(_))) {
            open += 1;
        }
    }
    open
}

/// The whole run on a fresh stack.
pub async fn run(manager: ManagerSettings, s: &Settings) -> Result<Measured> {
    let stack = Stack::start(manager).await?;
    let result = run_in(&stack, s).await;
    stack.stop();
    result
}

async fn run_in(stack: &Stack, s: &Settings) -> Result<Measured> {
    if s.machines_per_cluster == 0 {
        bail!("a cluster needs at least its control plane machine");
    }
    let pid = stack.pid();
    // Let the manager's start-up (first listings, caches) finish before the baseline.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_baseline = procfs::status_mib(pid, "VmRSS")?;
    let fds_baseline = procfs::open_fds(pid)?;

    eprintln!(
        "in-memory: creating {} clusters × {} machines",
        s.clusters, s.machines_per_cluster
    );
    stack.mgmt.reset_write_counts();
    let started = Instant::now();
    let authorities = Authorities::default();
    // Core is played from the start: the first clusters progress while the last are made.
    let creating = async {
        let made = futures::stream::iter(0..s.clusters)
            .map(|i| create_cluster(stack, i, s, started, &authorities))
            .buffer_unordered(CREATE_CONCURRENCY)
            .try_collect::<Vec<Made>>()
            .await?;
        let created = started.elapsed().as_secs_f64();
        eprintln!("in-memory: every object created after {created:.1} s");
        anyhow::Ok((made, created))
    };
    let ((made, created), provisioned) =
        tokio::try_join!(creating, play_core(stack, &authorities, s, started))?;
    let write_counts = stack.mgmt.write_counts();
    eprintln!(
        "in-memory: requests while provisioning: {:?}",
        stack.mgmt.request_counts()
    );
    let writes_provisioning = figures::manager_writes(&write_counts);
    let nodes = count_nodes(&provisioned.kubeconfigs).await?;
    let nodes_seen = started.elapsed().as_secs_f64();
    let mut floor = Duration::ZERO;
    let mut slowest_cluster = 0.0_f64;
    for cluster in &made {
        let cluster_floor = s
            .delays
            .cluster_floor(&cluster.control_plane_uid, &cluster.worker_uids)?;
        floor = floor.max(cluster_floor);
        let prefix = format!("{}-", cluster.name);
        let last_ready = provisioned
            .ready_at
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, at)| *at)
            .fold(0.0, f64::max);
        slowest_cluster = slowest_cluster.max(figures::ratio(
            last_ready - cluster.started,
            cluster_floor.as_secs_f64(),
        ));
    }
    eprintln!(
        "in-memory: every DevMachine Ready after {:.1} s (floor {:.1} s), {nodes} Nodes",
        provisioned.seconds,
        floor.as_secs_f64()
    );

    // Let the last reconciles triggered by the final writes finish, then measure the rest.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_provisioned = procfs::status_mib(pid, "VmRSS")?;
    let rss_peak = procfs::status_mib(pid, "VmHWM")?;
    stack.mgmt.reset_write_counts();
    let cpu_before = procfs::cpu_seconds(pid)?;
    let rest_started = Instant::now();
    tokio::time::sleep(s.rest).await;
    let rest_seconds = rest_started.elapsed().as_secs_f64();
    let cpu_at_rest = (procfs::cpu_seconds(pid)? - cpu_before) / rest_seconds;
    let writes_at_rest = stack.mgmt.write_total();
    let fds_at_rest = procfs::open_fds(pid)?;
    eprintln!(
        "in-memory: at rest {cpu_at_rest:.4} cpu-s/s, {writes_at_rest} writes, {fds_at_rest} fds; deleting"
    );

    let deleting = Instant::now();
    delete_all(stack, "DevMachine").await?;
    delete_all(stack, "DevCluster").await?;
    let deleted = deleting.elapsed().as_secs_f64();
    let ports_still_open = open_ports(&provisioned.ports).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fds_after_delete = procfs::open_fds(pid)?;
    // The kube client keeps idle connections to the management API server for a while
    // (hyper's pool: 90 s): wait for the descriptors to come back to the baseline.
    let settling = Instant::now();
    let mut fds_settled = fds_after_delete;
    while fds_settled > fds_baseline && settling.elapsed() < FD_SETTLE {
        tokio::time::sleep(Duration::from_secs(1)).await;
        fds_settled = procfs::open_fds(pid)?;
    }
    let fds_settled_after = settling.elapsed().as_secs_f64();
    Ok(Measured {
        clusters: s.clusters,
        machines_per_cluster: s.machines_per_cluster,
        created,
        provisioned: provisioned.seconds,
        writes_provisioning,
        nodes_seen,
        nodes,
        floor: floor.as_secs_f64(),
        slowest_cluster,
        nominal_floor: s
            .delays
            .nominal_floor(s.machines_per_cluster > 1)
            .as_secs_f64(),
        rss_baseline,
        rss_provisioned,
        rss_peak,
        cpu_at_rest,
        rest_seconds: s.rest.as_secs_f64(),
        writes_at_rest,
        fds_baseline,
        fds_at_rest,
        fds_after_delete,
        fds_settled,
        fds_settled_after,
        deleted,
        ports_still_open,
        rss_after_delete: procfs::status_mib(pid, "VmRSS")?,
    })
}
