//! Pure parts of the in-memory scale run: the delays it configures, the floor they set (how long
//! the run cannot beat), and the report rows of its figures.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, anyhow};
use capd::api::v1beta2::InMemoryMachineBackendSpec;
use capd::controllers::dockermachine::inmemory_stages;
use serde_json::{Value, json};

use crate::stats::Row;

/// The stage durations every DevMachine of the run is given (CAPD's templates: VM 10 s, node,
/// etcd and API server 2 s, jitter 0.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageDelays {
    /// `vm.provisioning.startupDuration`.
    pub vm: Duration,
    /// `node.provisioning.startupDuration`.
    pub node: Duration,
    /// `etcd.provisioning.startupDuration`.
    pub etcd: Duration,
    /// `apiServer.provisioning.startupDuration`.
    pub api_server: Duration,
    /// `startupJitter` of every stage: each lasts its duration plus up to this share of it.
    pub jitter: f64,
}

impl StageDelays {
    /// The DevMachine's `spec.backend.inMemory` block.
    pub fn spec(&self) -> Value {
        let stage = |d: Duration| {
            json!({"provisioning": {
                "startupDuration": format!("{}ms", d.as_millis()),
                "startupJitter": self.jitter.to_string()
            }})
        };
        json!({
            "vm": stage(self.vm),
            "node": stage(self.node),
            "etcd": stage(self.etcd),
            "apiServer": stage(self.api_server)
        })
    }

    /// The floor without jitter: a control plane waits for its VM, its Node, then its etcd
    /// member and API server (both timed from the Node); a worker waits for its control plane
    /// to be initialized (the API server up), then for its VM and Node.
    pub fn nominal_floor(&self, workers: bool) -> Duration {
        let control_plane = self.vm + self.node + self.etcd.max(self.api_server);
        if workers {
            control_plane + self.vm + self.node
        } else {
            control_plane
        }
    }

    /// The floor of a cluster with this run's jitter, drawn as the provider draws it (from
    /// each DevMachine's uid): its control plane's stages, then its slowest worker's.
    pub fn cluster_floor(
        &self,
        control_plane_uid: &str,
        worker_uids: &[String],
    ) -> Result<Duration> {
        let spec: InMemoryMachineBackendSpec = serde_json::from_value(self.spec())?;
        let delays = |uid: &str| inmemory_stages::delays(&spec, uid).map_err(|e| anyhow!(e));
        let cp = delays(control_plane_uid)?;
        let initialized = cp.vm + cp.node + cp.etcd.max(cp.api_server);
        let mut slowest_worker = Duration::ZERO;
        for uid in worker_uids {
            let w = delays(uid)?;
            slowest_worker = slowest_worker.max(w.vm + w.node);
        }
        Ok(initialized + slowest_worker)
    }
}

/// What one in-memory run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// Clusters.
    pub clusters: usize,
    /// Machines per cluster (one control plane, the rest workers).
    pub machines_per_cluster: usize,
    /// Seconds from the first create to the last object created.
    pub created: f64,
    /// Seconds from the first create to every DevMachine provisioned and Ready.
    pub provisioned: f64,
    /// Seconds from the first create until every Node was found through its cluster's fake
    /// API server (checked once every DevMachine was Ready).
    pub nodes_seen: f64,
    /// Nodes found with their `in-memory://` provider ID.
    pub nodes: usize,
    /// The floor with this run's jitter, seconds (the slowest cluster's).
    pub floor: f64,
    /// The largest ratio of a cluster's time (from its first create to its last DevMachine
    /// Ready) to its own floor.
    pub slowest_cluster: f64,
    /// The floor without jitter, seconds.
    pub nominal_floor: f64,
    /// The manager's API writes from the first create to every DevMachine Ready.
    pub writes_provisioning: u64,
    /// The manager's resident memory before anything was created, MiB.
    pub rss_baseline: f64,
    /// Its resident memory once everything was provisioned, MiB.
    pub rss_provisioned: f64,
    /// Its peak resident memory (VmHWM) by then, MiB.
    pub rss_peak: f64,
    /// The manager's CPU seconds per second over the rest window.
    pub cpu_at_rest: f64,
    /// Length of the rest window, seconds.
    pub rest_seconds: f64,
    /// Management API writes of the manager during the rest window.
    pub writes_at_rest: u64,
    /// Open file descriptors of the manager before anything was created.
    pub fds_baseline: usize,
    /// At the end of the rest window.
    pub fds_at_rest: usize,
    /// 2 s after everything was deleted.
    pub fds_after_delete: usize,
    /// At the end of the wait for them to come back to the baseline (at most 120 s).
    pub fds_settled: usize,
    /// Seconds that wait took.
    pub fds_settled_after: f64,
    /// Seconds from the first delete to every DevMachine and DevCluster gone.
    pub deleted: f64,
    /// Listener ports of the fake clusters that still accepted connections after the deletion.
    pub ports_still_open: usize,
    /// The manager's resident memory once everything was deleted, MiB.
    pub rss_after_delete: f64,
}

impl Measured {
    /// Every machine.
    pub fn machines(&self) -> usize {
        self.clusters * self.machines_per_cluster
    }
}

/// The manager's writes among the API server's counts (`<verb> <resource>[/<subresource>]`):
/// every write to DevMachines and DevClusters but their creation (the benchmark's), and Events.
pub fn manager_writes(counts: &BTreeMap<String, u64>) -> u64 {
    counts
        .iter()
        .filter(|(key, _)| {
            let ours = key.contains(" devmachines.") || key.contains(" devclusters.");
            (ours && !key.starts_with("create ")) || key.contains(" events.")
        })
        .map(|(_, count)| count)
        .sum()
}

/// `seconds / floor`, not a number when there is no floor.
pub fn ratio(seconds: f64, floor: f64) -> f64 {
    if floor > 0.0 {
        seconds / floor
    } else {
        f64::NAN
    }
}

/// `after - before` MiB spread over `count`, in KiB.
pub fn kib_each(after_mib: f64, before_mib: f64, count: usize) -> f64 {
    if count == 0 {
        return 0.0;
    }
    (after_mib - before_mib) * 1024.0 / count as f64
}

/// The report rows of a run; `load` describes the load averages around it.
pub fn rows(m: &Measured, delays: &StageDelays, load: &str) -> Vec<Row> {
    let size = format!(
        "{} clusters × {} machines",
        m.clusters, m.machines_per_cluster
    );
    let ratio = |seconds: f64| ratio(seconds, m.floor);
    let delays_note = format!(
        "VM {} s, node {} s, etcd {} s, API server {} s, jitter {}",
        delays.vm.as_secs_f64(),
        delays.node.as_secs_f64(),
        delays.etcd.as_secs_f64(),
        delays.api_server.as_secs_f64(),
        delays.jitter
    );
    vec![
        Row::single("in-memory: machines", "machines", &[m.machines() as f64])
            .note(format!("{size}; load average {load}")),
        Row::single("in-memory: objects created", "s", &[m.created])
            .note("Clusters, DevClusters, CA, etcd CA and bootstrap Secrets, Machines, DevMachines"),
        Row::single("in-memory: floor", "s", &[m.floor]).note(format!(
            "{delays_note}; this run's jitter, slowest cluster; {:.2} s without jitter",
            m.nominal_floor
        )),
        Row::single("in-memory: provisioned", "s", &[m.provisioned])
            .note("first create → every DevMachine provisioned and Ready"),
        Row::single("in-memory: provisioned / floor", "x", &[ratio(m.provisioned)])
            .note(format!(
                "goal at 1 000 machines: ≤ 1.2; the slowest cluster, timed from its own first create against its own floor: {:.2}×",
                m.slowest_cluster
            )),
        Row::single(
            "in-memory: API writes / machine",
            "writes",
            &[m.writes_provisioning as f64 / m.machines().max(1) as f64],
        )
        .note(format!(
            "the manager's, first create → every DevMachine Ready ({} in all, DevClusters' and Events included)",
            m.writes_provisioning
        )),
        Row::single("in-memory: Nodes seen", "s", &[m.nodes_seen]).note(format!(
            "{} of {} Nodes with their provider ID, listed through each fake API server once every DevMachine was Ready ({:.2}× the floor)",
            m.nodes,
            m.machines(),
            ratio(m.nodes_seen)
        )),
        Row::single("in-memory: RSS before", "MiB", &[m.rss_baseline])
            .note("manager ready, nothing created"),
        Row::single("in-memory: RSS provisioned", "MiB", &[m.rss_provisioned])
            .note(format!("peak {:.2} MiB; goal at 1 000 machines: ≤ 256", m.rss_peak)),
        Row::single(
            "in-memory: RSS per cluster",
            "KiB",
            &[kib_each(m.rss_provisioned, m.rss_baseline, m.clusters)],
        )
        .note("(provisioned − before) ÷ clusters"),
        Row::single(
            "in-memory: RSS per machine",
            "KiB",
            &[kib_each(m.rss_provisioned, m.rss_baseline, m.machines())],
        )
        .note("(provisioned − before) ÷ machines"),
        Row::single("in-memory: CPU at rest", "cpu-s/s", &[m.cpu_at_rest]).note(format!(
            "{} s after provisioning; {} API writes meanwhile",
            m.rest_seconds, m.writes_at_rest
        )),
        Row::single(
            "in-memory: open fds at rest",
            "fds",
            &[m.fds_at_rest as f64],
        )
        .note(format!(
            "before {}, at rest {}, after deletion {}, then {} after {:.0} s more",
            m.fds_baseline, m.fds_at_rest, m.fds_after_delete, m.fds_settled, m.fds_settled_after
        )),
        Row::single("in-memory: deleted", "s", &[m.deleted]).note(format!(
            "DevMachines then DevClusters, until gone; listeners still open: {} of {}; RSS after {:.2} MiB",
            m.ports_still_open, m.clusters, m.rss_after_delete
        )),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capd_templates() -> StageDelays {
        StageDelays {
            vm: Duration::from_secs(10),
            node: Duration::from_secs(2),
            etcd: Duration::from_secs(2),
            api_server: Duration::from_secs(2),
            jitter: 0.2,
        }
    }

    #[test]
    fn the_floor_is_the_control_plane_then_a_worker() {
        let d = StageDelays {
            etcd: Duration::from_secs(3),
            ..capd_templates()
        };
        // VM 10 + Node 2 + the slower of etcd 3 and API server 2, then a worker's VM and Node.
        assert_eq!(d.nominal_floor(false), Duration::from_secs(15));
        assert_eq!(d.nominal_floor(true), Duration::from_secs(27));
    }

    #[test]
    fn the_jittered_floor_lies_between_the_nominal_one_and_its_bound() {
        let d = capd_templates();
        let workers: Vec<String> = (0..9).map(|i| format!("uid-w{i}")).collect();
        let floor = d.cluster_floor("uid-cp", &workers).unwrap();
        assert!(floor >= d.nominal_floor(true), "{floor:?}");
        assert!(floor <= d.nominal_floor(true).mul_f64(1.2), "{floor:?}");
        // The provider's draw: the same uids give the same floor.
        assert_eq!(d.cluster_floor("uid-cp", &workers).unwrap(), floor);
        let no_jitter = StageDelays { jitter: 0.0, ..d };
        assert_eq!(
            no_jitter.cluster_floor("uid-cp", &workers).unwrap(),
            Duration::from_secs(26)
        );
        assert_eq!(
            no_jitter.cluster_floor("uid-cp", &[]).unwrap(),
            Duration::from_secs(14)
        );
    }

    #[test]
    fn the_spec_is_what_the_provider_reads() {
        let spec: InMemoryMachineBackendSpec =
            serde_json::from_value(capd_templates().spec()).unwrap();
        let delays = inmemory_stages::delays(&spec, "seed").unwrap();
        assert!(delays.vm >= Duration::from_secs(10) && delays.vm <= Duration::from_secs(12));
        assert!(delays.api_server >= Duration::from_secs(2));
    }

    #[test]
    fn the_report_divides_memory_per_cluster_and_machine_and_rates_the_time() {
        let m = Measured {
            clusters: 10,
            machines_per_cluster: 10,
            provisioned: 30.0,
            nodes_seen: 31.0,
            nodes: 100,
            floor: 25.0,
            nominal_floor: 24.0,
            rss_baseline: 20.0,
            rss_provisioned: 30.0,
            ..Measured::default()
        };
        let rows = rows(&m, &capd_templates(), "0.50 0.40 0.30");
        let figure = |measure: &str| {
            rows.iter()
                .find(|r| r.measure == measure)
                .and_then(|r| r.provider)
                .map(|s| s.median)
        };
        assert_eq!(figure("in-memory: provisioned / floor"), Some(1.2));
        assert_eq!(figure("in-memory: RSS per cluster"), Some(1024.0));
        assert_eq!(figure("in-memory: RSS per machine"), Some(102.4));
        assert!(rows[0].note.contains("load average 0.50 0.40 0.30"));
        assert_eq!(kib_each(1.0, 0.0, 0), 0.0);
    }

    #[test]
    fn the_benchmark_s_creates_are_not_the_manager_s_writes() {
        let counts: BTreeMap<String, u64> = [
            ("create devmachines.infrastructure.cluster.x-k8s.io", 100),
            ("create devclusters.infrastructure.cluster.x-k8s.io", 10),
            ("patch devmachines.infrastructure.cluster.x-k8s.io", 200),
            (
                "patch devmachines.infrastructure.cluster.x-k8s.io/status",
                500,
            ),
            (
                "patch devclusters.infrastructure.cluster.x-k8s.io/status",
                20,
            ),
            ("create events.events.k8s.io", 30),
            ("patch clusters.cluster.x-k8s.io/status", 20),
            ("create secrets", 20),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(manager_writes(&counts), 750);
    }
}
