//! The chaos run (`hack/chaos.sh`, binary `capd-chaos`; test-only, not part of the test
//! command): one cluster of 3 control planes and 5 workers is created, scaled by +3 then -4
//! workers, and deleted, one step at a time, while the manager is SIGKILLed and restarted at
//! points drawn from a printed seed (a few seconds into each step, while it provisions, bootstraps
//! or deletes). The suite plays Cluster API core throughout.
//!
//! After every step it checks what a user would notice and counts it, instead of stopping:
//! containers created twice (a machine's container id changed, or a container no object
//! accounts for), bootstrap runs per machine (the kubeadm stand-in's log; exactly 1), and at the
//! end leaked containers, networks and volumes and objects held by our finalizers. It reports
//! how long each step took to converge after its last kill.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;

use crate::{
    Env, MachineSpec, capi, cloud_config, cluster_containers, condition_state, container_id,
    container_volumes, infra, is_control_plane, kubeadm_runs, network_exists, provisioned,
    volume_exists,
};

/// How long one step may take to converge before the run gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(180);

/// The flags of `capd-chaos`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "capd-chaos",
    about = "Chaos run: a cluster's life while the manager is SIGKILLed at random points (test-only)"
)]
pub struct Args {
    /// Seed of the kill points; a random one is drawn (and printed) when unset.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Kills at least (spread over the 24 steps; a step gets more than one when more are asked).
    #[arg(long, default_value_t = 24)]
    pub kills: u32,
    /// Longest wait, in milliseconds, between adding a machine (or the previous kill) and a
    /// kill; the quicker steps (the load balancer, deletions) wait at most a fifth of it, so that
    /// their kills land while they work.
    #[arg(long, default_value_t = 4000)]
    pub max_delay_ms: u64,
    /// Seconds each bootstrap sleeps before running kubeadm, so kills land while it runs.
    #[arg(long, default_value_t = 3)]
    pub bootstrap_seconds: u32,
}

/// One step of the cluster's life.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// The Cluster and its DockerCluster.
    CreateCluster,
    /// A Machine and its DockerMachine.
    AddMachine { name: String, control_plane: bool },
    /// A Machine deleted as core does (DockerMachine first, then the Machine).
    RemoveMachine { name: String },
    /// The DockerCluster and the Cluster, once their Machines are gone.
    DeleteCluster,
}

impl Step {
    /// The longest wait before a kill: the whole window while a machine provisions and
    /// bootstraps, a fifth of it for the steps that take about a second.
    fn kill_window(&self, max_delay_ms: u64) -> u64 {
        match self {
            Step::AddMachine { .. } => max_delay_ms,
            _ => max_delay_ms / 5,
        }
    }

    fn describe(&self) -> String {
        match self {
            Step::CreateCluster => "create the cluster".into(),
            Step::AddMachine {
                name,
                control_plane: true,
            } => format!("add control plane {name}"),
            Step::AddMachine { name, .. } => format!("add worker {name}"),
            Step::RemoveMachine { name } => format!("remove {name}"),
            Step::DeleteCluster => "delete the cluster".into(),
        }
    }
}

/// The cluster's life: create with 3 control planes and 5 workers, +3 workers, -4 workers, then
/// delete (its Machines one by one, workers first, then the cluster).
fn plan() -> Vec<Step> {
    let add = |name: String, control_plane| Step::AddMachine {
        name,
        control_plane,
    };
    let mut steps = vec![Step::CreateCluster];
    steps.extend((0..3).map(|i| add(format!("cp{i}"), true)));
    steps.extend((0..5).map(|i| add(format!("md{i}"), false)));
    steps.extend((5..8).map(|i| add(format!("md{i}"), false)));
    let remove = |name: String| Step::RemoveMachine { name };
    steps.extend((0..4).map(|i| remove(format!("md{i}"))));
    steps.extend((4..8).map(|i| remove(format!("md{i}"))));
    steps.extend((0..3).rev().map(|i| remove(format!("cp{i}"))));
    steps.push(Step::DeleteCluster);
    steps
}

/// One kill of the manager.
#[derive(Debug, Clone)]
pub struct Kill {
    /// The step it interrupted.
    pub step: String,
    /// How long after the step's action (or the previous kill) it came.
    pub after: Duration,
    /// Whether the step was still working (not converged) when the kill came.
    pub mid_step: bool,
}

/// A step's outcome.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// What the step did.
    pub step: String,
    /// From the step's last kill until it converged.
    pub converged_in: Duration,
}

/// What the run found.
#[derive(Debug, Default)]
pub struct Report {
    /// The seed of the kill points.
    pub seed: u64,
    /// Every kill, in order.
    pub kills: Vec<Kill>,
    /// Every step that ran, in order.
    pub steps: Vec<StepReport>,
    /// Containers made twice: a machine's or the load balancer's container replaced by another,
    /// or a container of the cluster that no object accounts for.
    pub duplicates: Vec<String>,
    /// Bootstrap runs per machine, read before the machine is removed.
    pub bootstrap_runs: BTreeMap<String, usize>,
    /// Containers of the cluster left at the end.
    pub leaked_containers: Vec<String>,
    /// Whether the network the provider made is left.
    pub leaked_network: bool,
    /// Volumes of the cluster's containers left at the end.
    pub leaked_volumes: Vec<String>,
    /// Objects left in the namespace at the end (held by a finalizer).
    pub objects_left: Vec<String>,
    /// The step that did not converge, when one did not.
    pub stuck: Option<String>,
}

impl Report {
    /// Whether the run proved what it should: every step converged, nothing duplicated or
    /// leaked, one bootstrap per machine, at least the kills asked for.
    pub fn passed(&self, kills_asked: u32) -> bool {
        self.stuck.is_none()
            && self.duplicates.is_empty()
            && self.leaked_containers.is_empty()
            && !self.leaked_network
            && self.leaked_volumes.is_empty()
            && self.objects_left.is_empty()
            && !self.bootstrap_runs.is_empty()
            && self.bootstrap_runs.values().all(|runs| *runs == 1)
            && self.kills.len() >= kills_asked as usize
    }

    /// The report as Markdown: a summary table, then each step.
    pub fn markdown(&self) -> String {
        let mut converge: Vec<Duration> = self.steps.iter().map(|s| s.converged_in).collect();
        converge.sort();
        let median = converge
            .get(converge.len() / 2)
            .copied()
            .unwrap_or_default();
        let max = converge.last().copied().unwrap_or_default();
        let once = self.bootstrap_runs.values().filter(|r| **r == 1).count();
        let mut out = String::new();
        let _ = writeln!(out, "| measure | value |\n|---|---|");
        let _ = writeln!(
            out,
            "| manager SIGKILLs | {} (seed {}) |",
            self.kills.len(),
            self.seed
        );
        let _ = writeln!(
            out,
            "| kills that landed while a step was still working | {} |",
            self.kills.iter().filter(|k| k.mid_step).count()
        );
        let _ = writeln!(out, "| steps converged | {} of 24 |", self.steps.len());
        let _ = writeln!(out, "| duplicate containers | {} |", self.duplicates.len());
        let _ = writeln!(
            out,
            "| leaked containers / networks / volumes | {} / {} / {} |",
            self.leaked_containers.len(),
            u8::from(self.leaked_network),
            self.leaked_volumes.len()
        );
        let _ = writeln!(
            out,
            "| objects left with finalizers | {} |",
            self.objects_left.len()
        );
        let _ = writeln!(
            out,
            "| machines bootstrapped exactly once | {once} of {} |",
            self.bootstrap_runs.len()
        );
        let _ = writeln!(
            out,
            "| converged after a step's last kill: median / max | {:.1} s / {:.1} s |",
            median.as_secs_f64(),
            max.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "\n| step | kills, each after (* while the step worked) | converged after the last kill |"
        );
        let _ = writeln!(out, "|---|---|---|");
        for step in &self.steps {
            let kills: Vec<String> = self
                .kills
                .iter()
                .filter(|k| k.step == step.step)
                .map(|k| {
                    let mark = if k.mid_step { "*" } else { "" };
                    format!("{:.1} s{mark}", k.after.as_secs_f64())
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} s |",
                step.step,
                kills.join(", "),
                step.converged_in.as_secs_f64()
            );
        }
        for (what, list) in [
            ("duplicates", &self.duplicates),
            ("leaked containers", &self.leaked_containers),
            ("leaked volumes", &self.leaked_volumes),
            ("objects left", &self.objects_left),
        ] {
            if !list.is_empty() {
                let _ = writeln!(out, "\n{what}: {}", list.join(", "));
            }
        }
        if let Some(step) = &self.stuck {
            let _ = writeln!(
                out,
                "\nstuck: {step} did not converge within {STEP_TIMEOUT:?}"
            );
        }
        out
    }
}

/// The run's world: the environment, the cluster, and what has been seen of it.
struct Chaos {
    env: Env,
    args: Args,
    rng: fastrand::Rng,
    cluster: String,
    /// Container ids by container name, from first sight.
    ids: BTreeMap<String, String>,
    /// Volumes seen on the cluster's containers.
    volumes: BTreeSet<String>,
    /// Machines that exist (created, not yet removed).
    machines: BTreeMap<String, bool>,
    report: Report,
}

/// Runs the chaos and returns its report.
pub async fn run(args: Args) -> Report {
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    println!("capd-chaos: seed {seed} (replay with --seed {seed})");
    let mut env = Env::start("chaos").await;
    env.wait_ready().await;
    let cluster = env.cluster_name();
    env.create_kubeconfig_secret(&cluster).await;
    let mut chaos = Chaos {
        env,
        rng: fastrand::Rng::with_seed(seed),
        cluster,
        ids: BTreeMap::new(),
        volumes: BTreeSet::new(),
        machines: BTreeMap::new(),
        report: Report {
            seed,
            ..Report::default()
        },
        args,
    };
    let steps = plan();
    let per_step = chaos.args.kills.div_ceil(steps.len() as u32).max(1);
    for step in steps {
        if !chaos.step(&step, per_step).await {
            chaos.report.stuck = Some(step.describe());
            break;
        }
    }
    chaos.finish().await;
    chaos.report
}

impl Chaos {
    /// Runs one step: its action, `kills` kills at random points, then waits for convergence
    /// (playing core) and checks the world. False when it did not converge.
    async fn step(&mut self, step: &Step, kills: u32) -> bool {
        println!("capd-chaos: {}", step.describe());
        self.act(step).await;
        let mut last_kill = Instant::now();
        let window = step.kill_window(self.args.max_delay_ms);
        for _ in 0..kills {
            let after = Duration::from_millis(self.rng.u64(0..=window));
            self.play_core_for(after).await;
            let mid_step = !self.converged(step).await;
            self.env.stop_manager(true);
            self.env.start_manager();
            last_kill = Instant::now();
            self.report.kills.push(Kill {
                step: step.describe(),
                after,
                mid_step,
            });
        }
        let deadline = Instant::now() + STEP_TIMEOUT;
        while !self.converged(step).await {
            if Instant::now() > deadline {
                return false;
            }
            self.play_core_for(Duration::from_millis(250)).await;
        }
        let converged_in = last_kill.elapsed();
        self.after(step).await;
        self.check_containers();
        self.report.steps.push(StepReport {
            step: step.describe(),
            converged_in,
        });
        true
    }

    async fn act(&mut self, step: &Step) {
        let env = &self.env;
        match step {
            Step::CreateCluster => {
                let cluster = env.create_cluster(&self.cluster, false).await;
                env.create_docker_cluster(&cluster, json!({})).await;
            }
            Step::AddMachine {
                name,
                control_plane,
            } => {
                let secret = format!("{name}-bootstrap");
                env.create_secret(&secret, &cloud_config(self.args.bootstrap_seconds))
                    .await;
                let spec = MachineSpec {
                    control_plane: *control_plane,
                    bootstrap_secret: Some(secret),
                    ..MachineSpec::default()
                };
                env.create_machine_with(&self.cluster, name, &spec).await;
                self.machines.insert(name.clone(), *control_plane);
            }
            Step::RemoveMachine { name } => {
                // The last look at the machine's bootstrap before it goes.
                let container = format!("{}-{name}", self.cluster);
                self.report
                    .bootstrap_runs
                    .insert(container.clone(), kubeadm_runs(&container));
                self.volumes.extend(container_volumes(&container));
                env.begin_machine_deletion(name).await;
                env.delete(&infra("DockerMachine"), name).await;
            }
            Step::DeleteCluster => {
                let lb = format!("{}-lb", self.cluster);
                self.volumes.extend(container_volumes(&lb));
                env.delete(&infra("DockerCluster"), &self.cluster).await;
            }
        }
    }

    /// Whether the step reached its goal.
    async fn converged(&self, step: &Step) -> bool {
        let env = &self.env;
        match step {
            Step::CreateCluster => env
                .get(&infra("DockerCluster"), &self.cluster)
                .await
                .is_some_and(|dc| {
                    dc.data["status"]["initialization"]["provisioned"] == json!(true)
                        && condition_state(&dc, "Ready").is_some_and(|(s, _)| s == "True")
                }),
            Step::AddMachine { name, .. } => env
                .get(&infra("DockerMachine"), name)
                .await
                .is_some_and(|dm| provisioned(&dm)),
            Step::RemoveMachine { name } => env.get(&infra("DockerMachine"), name).await.is_none(),
            Step::DeleteCluster => env
                .get(&infra("DockerCluster"), &self.cluster)
                .await
                .is_none(),
        }
    }

    /// Core's part once a step converged: release a removed Machine, delete the Cluster.
    async fn after(&mut self, step: &Step) {
        let env = &self.env;
        match step {
            Step::RemoveMachine { name } => {
                env.release_machine(name, STEP_TIMEOUT).await;
                self.machines.remove(name);
            }
            Step::DeleteCluster => {
                env.delete(&capi("Cluster"), &self.cluster).await;
                env.wait_gone(&capi("Cluster"), &self.cluster, STEP_TIMEOUT)
                    .await;
            }
            Step::AddMachine { name, .. } => {
                let container = format!("{}-{name}", self.cluster);
                self.volumes.extend(container_volumes(&container));
            }
            Step::CreateCluster => {}
        }
    }

    /// Plays core's reactions for `duration`: the Cluster's infrastructure is marked provisioned
    /// once the DockerCluster is, and its control plane initialized once a control plane is.
    async fn play_core_for(&self, duration: Duration) {
        let until = Instant::now() + duration;
        loop {
            self.play_core().await;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(Duration::from_millis(250))).await;
        }
    }

    async fn play_core(&self) {
        let env = &self.env;
        let Some(cluster) = env.get(&capi("Cluster"), &self.cluster).await else {
            return;
        };
        if cluster.metadata.deletion_timestamp.is_some() {
            return;
        }
        let status = &cluster.data["status"]["initialization"];
        if status["infrastructureProvisioned"] != json!(true)
            && env
                .get(&infra("DockerCluster"), &self.cluster)
                .await
                .is_some_and(|dc| dc.data["status"]["initialization"]["provisioned"] == json!(true))
        {
            env.mark_infrastructure_provisioned(&self.cluster).await;
        }
        if status["controlPlaneInitialized"] != json!(true) {
            let machines = env
                .cluster_machines(&self.cluster)
                .await
                .unwrap_or_default();
            for machine in machines.iter().filter(|m| is_control_plane(m)) {
                let Some(name) = machine.metadata.name.as_deref() else {
                    continue;
                };
                if env
                    .get(&infra("DockerMachine"), name)
                    .await
                    .is_some_and(|dm| provisioned(&dm))
                {
                    env.mark_control_plane_initialized(&self.cluster).await;
                    break;
                }
            }
        }
    }

    /// Counts containers made twice: an id that changed since first seen, or a container of the
    /// cluster that neither the load balancer nor an existing machine accounts for.
    fn check_containers(&mut self) {
        let lb = format!("{}-lb", self.cluster);
        let expected: BTreeSet<String> = self
            .machines
            .keys()
            .map(|m| format!("{}-{m}", self.cluster))
            .chain(std::iter::once(lb))
            .collect();
        for container in cluster_containers(&self.cluster) {
            if !expected.contains(&container) {
                self.report
                    .duplicates
                    .push(format!("{container} (no object accounts for it)"));
                continue;
            }
            let id = container_id(&container);
            let first = self
                .ids
                .entry(container.clone())
                .or_insert_with(|| id.clone());
            if *first != id {
                self.report
                    .duplicates
                    .push(format!("{container} (replaced: {first} then {id})"));
                *first = id;
            }
        }
    }

    /// The end of the run: what is left.
    async fn finish(&mut self) {
        if self.report.stuck.is_some() {
            return;
        }
        self.report.leaked_containers = cluster_containers(&self.cluster);
        self.report.leaked_network = network_exists(&self.env.network);
        self.report.leaked_volumes = self
            .volumes
            .iter()
            .filter(|v| volume_exists(v))
            .cloned()
            .collect();
        self.report.objects_left = self.env.resource_versions().await.into_keys().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_creates_scales_and_deletes_in_core_order() {
        let steps = plan();
        assert_eq!(steps.len(), 24);
        assert_eq!(steps[0], Step::CreateCluster);
        let added = |cp| {
            steps
                .iter()
                .filter(
                    |s| matches!(s, Step::AddMachine { control_plane, .. } if *control_plane == cp),
                )
                .count()
        };
        assert_eq!(
            (added(true), added(false)),
            (3, 8),
            "3 + 5 workers, then +3"
        );
        // -4 workers first (md0..md3), then the rest of the cluster.
        assert_eq!(steps[12], Step::RemoveMachine { name: "md0".into() });
        assert_eq!(steps.last(), Some(&Step::DeleteCluster));
        let removed = steps
            .iter()
            .filter(|s| matches!(s, Step::RemoveMachine { .. }))
            .count();
        assert_eq!(removed, 11, "every machine is removed before the cluster");
    }

    #[test]
    fn a_clean_run_passes_and_any_finding_fails_it() {
        let clean = Report {
            seed: 1,
            kills: vec![
                Kill {
                    step: "x".into(),
                    after: Duration::ZERO,
                    mid_step: true,
                };
                24
            ],
            bootstrap_runs: BTreeMap::from([("c-md0".into(), 1)]),
            ..Report::default()
        };
        assert!(clean.passed(20));
        assert!(!clean.passed(25), "fewer kills than asked");
        let twice = Report {
            bootstrap_runs: BTreeMap::from([("c-md0".into(), 2)]),
            ..clean_copy(&clean)
        };
        assert!(!twice.passed(20));
        let leaked = Report {
            leaked_network: true,
            ..clean_copy(&clean)
        };
        assert!(!leaked.passed(20));
        let stuck = Report {
            stuck: Some("remove md0".into()),
            ..clean_copy(&clean)
        };
        assert!(!stuck.passed(20));
        assert!(stuck.markdown().contains("stuck: remove md0"));
    }

    fn clean_copy(report: &Report) -> Report {
        Report {
            seed: report.seed,
            kills: report.kills.clone(),
            bootstrap_runs: report.bootstrap_runs.clone(),
            ..Report::default()
        }
    }
}
