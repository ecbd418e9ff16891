//! `capd-bench`: the provider against the raw Docker floor on the same machine, in one run.
//!
//! For each N, each repetition creates the floor's nodes, stops them, creates the provider's,
//! deletes the provider's and then removes the floor's, back to back, so their ratio is paired
//! and meaningful on a noisy machine, and neither phase creates its nodes beside the other's
//! running. Prints a Markdown table (median [min–max]) and writes the same figures as JSON.
//! Run it through `hack/bench.sh`, which builds what it needs.
//!
//! With `--in-memory`, it runs the in-memory scale benchmark instead ([`inmemory`]): no Docker
//! floor, C clusters of M DevMachines of the `inMemory` backend on one manager.

mod floor;
mod inmemory;
mod load;
mod procfs;
mod provider;
mod stack;
mod stats;
mod storage;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use capd::docker::{ContainerRuntime, DockerEngine};
use clap::Parser;

use crate::floor::Floor;
use crate::load::{Guard, Sample};
use crate::provider::{LifecycleRun, Workload};
use crate::stack::ManagerSettings;
use crate::stats::{Report, Row, Summary, scale_curve};
use crate::storage::HoldBack;

/// Benchmark of the provider against the raw Docker floor, and of the manager's footprint.
#[derive(Parser, Debug)]
struct Args {
    /// The manager binary to measure (a release build).
    #[arg(long)]
    manager: PathBuf,
    /// Node image (default: CAPD_TEST_NODE_IMAGE of e2e/images/.build/images.env).
    #[arg(long)]
    node_image: Option<String>,
    /// Load balancer image, `<repository>/haproxy:<tag>` (default: CAPD_TEST_HAPROXY_IMAGE).
    #[arg(long)]
    haproxy_image: Option<String>,
    /// The manager image whose size is reported.
    #[arg(long)]
    image: Option<String>,
    /// Short run: one repetition, N = 1 and 10, 20 machines for 20 s at rest, and no wait for
    /// the engine's file system after deletions (see --deletion-wait).
    #[arg(long)]
    quick: bool,
    /// Repetitions of every figure (default 3, 1 with --quick).
    #[arg(long)]
    repetitions: Option<usize>,
    /// Machine counts (default 1,10,30,100; 1,10 with --quick).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Machines kept provisioned for the rest measurement (default 100, 20 with --quick).
    #[arg(long)]
    rest_machines: Option<usize>,
    /// Seconds of rest measured (default 60, 20 with --quick).
    #[arg(long)]
    rest_seconds: Option<u64>,
    /// Machines of the MachinePool scale-up (0 skips it).
    #[arg(long, default_value_t = 10)]
    pool_size: usize,
    /// The manager's --dockermachine-concurrency (the floor uses the same parallelism).
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Before each repetition, wait up to this many seconds for the 1-minute load average to fall
    /// to half the core count (0: start at once).
    #[arg(long, default_value_t = 240)]
    settle: u64,
    /// Before each repetition, wait until the last deletion of nodes is this many seconds old
    /// (default: 365 when the engine's data root is an ext4 without a journal, whose inode
    /// allocator holds freed inodes back for up to 360 s; 0 elsewhere, and 0 with --quick).
    #[arg(long)]
    deletion_wait: Option<u64>,
    /// Where the managers' log goes, appended (default: a temporary file removed at the end).
    #[arg(long)]
    manager_log: Option<PathBuf>,
    /// Where the JSON goes (default: out/bench.json, out/bench-inmemory.json with --in-memory).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run the in-memory scale benchmark instead: DevClusters and DevMachines with
    /// `spec.backend.inMemory`, no container (--clusters, --machines-per-cluster, the stage
    /// delays, and --rest-seconds apply).
    #[arg(long)]
    in_memory: bool,
    /// In-memory: clusters.
    #[arg(long, default_value_t = 10)]
    clusters: usize,
    /// In-memory: machines per cluster (one control plane, the rest workers).
    #[arg(long, default_value_t = 10)]
    machines_per_cluster: usize,
    /// In-memory: seconds of every DevMachine's VM stage (CAPD's templates: 10).
    #[arg(long, default_value_t = 10.0)]
    vm_seconds: f64,
    /// In-memory: seconds of the Node stage (CAPD's templates: 2).
    #[arg(long, default_value_t = 2.0)]
    node_seconds: f64,
    /// In-memory: seconds of a control plane's etcd stage (CAPD's templates: 2).
    #[arg(long, default_value_t = 2.0)]
    etcd_seconds: f64,
    /// In-memory: seconds of a control plane's API server stage (CAPD's templates: 2).
    #[arg(long, default_value_t = 2.0)]
    api_server_seconds: f64,
    /// In-memory: the share of its duration every stage may add at random (CAPD's templates:
    /// 0.2).
    #[arg(long, default_value_t = 0.2)]
    jitter: f64,
}

/// Cloud-config of every machine: a file, then `kubeadm join` (the stand-in starts a TLS
/// listener like an API server would), then the sentinel file.
const CLOUD_CONFIG: &str = "#cloud-config\nwrite_files:\n- path: /etc/capd-test/config.yaml\n  owner: root:root\n  permissions: '0600'\n  content: |\n    token: abcdef.0123456789abcdef\nruncmd:\n- kubeadm join --config /etc/capd-test/config.yaml\n- mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n";

const VERSION: &str = "v1.31.0";

fn image_setting(key: &str) -> Option<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../images/.build/images.env");
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim().to_string())
}

fn docker_cli(args: &[&str]) -> (bool, String) {
    match Command::new("docker").args(args).output() {
        Ok(out) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        ),
        Err(_) => (false, String::new()),
    }
}

/// Removes what a run left in the engine (by cluster label and network), also on failure.
struct Cleanup {
    clusters: Vec<String>,
    networks: Vec<String>,
}

/// Removes the containers of a cluster, with their volumes.
fn remove_cluster(cluster: &str) {
    let filter = format!("label=io.x-k8s.kind.cluster={cluster}");
    let (_, ids) = docker_cli(&["ps", "-aq", "--filter", &filter]);
    for id in ids.lines().filter(|l| !l.is_empty()) {
        let _ = docker_cli(&["rm", "-fv", id]);
    }
}

impl Cleanup {
    /// Removes what the runs so far left: after every repetition, since the engine has address
    /// space for about thirty networks and the full run places more than that.
    fn sweep(&mut self) {
        for cluster in self.clusters.drain(..) {
            remove_cluster(&cluster);
        }
        for network in self.networks.drain(..) {
            // Docker 20.10 sometimes keeps endpoints of removed containers after hundreds of
            // removals, and then refuses to remove their network: say so, since every network
            // left takes one of the engine's address pools.
            let (removed, _) = docker_cli(&["network", "rm", &network]);
            if !removed && docker_cli(&["network", "inspect", &network]).0 {
                eprintln!(
                    "warning: the engine kept network {network} (`docker network rm {network}` failed); remove it by hand"
                );
            }
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.sweep();
    }
}

/// The machine and the engine measured (`Docker 20.10.24`, `Podman 4.3.1`: each against its own
/// floor), or what else ran (`in-memory backend`).
pub(crate) fn machine_description(engine: &dyn std::fmt::Display) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("{cpus} cores, {engine}, {date}")
}

struct Run {
    prefix: String,
    counter: usize,
    dir: tempfile::TempDir,
    manager: PathBuf,
    log: PathBuf,
    unprivileged: bool,
}

impl Run {
    fn name(&mut self, what: &str) -> String {
        self.counter += 1;
        format!("{}{what}{}", self.prefix, self.counter)
    }

    /// A fresh network and cluster name (`what`: f floor, p provider, r rest), both removed by
    /// the next [`Cleanup::sweep`].
    fn place(&mut self, cleanup: &mut Cleanup, what: &str) -> (String, String) {
        let network = self.name("n");
        let cluster = self.name(what);
        cleanup.networks.push(network.clone());
        cleanup.clusters.push(cluster.clone());
        (network, cluster)
    }

    fn settings(&self, network: &str) -> ManagerSettings {
        ManagerSettings {
            binary: self.manager.clone(),
            network: network.to_string(),
            unprivileged: self.unprivileged,
            count_file: self.dir.path().join(format!("{network}.calls.json")),
            log: self.log.clone(),
        }
    }
}

/// `value` with one decimal, without a trailing `.0` (a call made once per manager at N = 10
/// shows as 0.1, not 0).
fn one_decimal(value: f64) -> String {
    let text = format!("{value:.1}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_string)
}

/// Docker calls per machine by operation, averaged over the repetitions.
fn mean_calls(runs: &[LifecycleRun], n: usize) -> String {
    let mut total = std::collections::BTreeMap::<String, f64>::new();
    let machines = (runs.len() * n) as f64;
    for run in runs {
        for (op, count) in &run.docker_calls {
            *total.entry(op.clone()).or_default() += *count as f64 / machines;
        }
    }
    total
        .iter()
        .map(|(op, c)| format!("{op} {}", one_decimal(*c)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.in_memory {
        return inmemory::cli::run(&args).await;
    }
    let repetitions = args
        .repetitions
        .unwrap_or(if args.quick { 1 } else { 3 })
        .max(1);
    let sizes = args.sizes.clone().unwrap_or_else(|| {
        if args.quick {
            vec![1, 10]
        } else {
            vec![1, 10, 30, 100]
        }
    });
    let rest_machines = args
        .rest_machines
        .unwrap_or(if args.quick { 20 } else { 100 });
    let settle = Duration::from_secs(args.settle);
    let rest_window =
        Duration::from_secs(
            args.rest_seconds
                .unwrap_or(if args.quick { 20 } else { 60 }),
        );
    let node_image = args
        .node_image
        .clone()
        .or_else(|| image_setting("CAPD_TEST_NODE_IMAGE"))
        .context("no node image: run e2e/images/build.sh or pass --node-image")?;
    let haproxy_image = args
        .haproxy_image
        .clone()
        .or_else(|| image_setting("CAPD_TEST_HAPROXY_IMAGE"))
        .context("no haproxy image: run e2e/images/build.sh or pass --haproxy-image")?;

    let privileged = docker_cli(&[
        "run",
        "--rm",
        "--privileged",
        "--entrypoint",
        "true",
        &node_image,
    ])
    .0;
    let mut engine = DockerEngine::connect().await?;
    if !privileged {
        eprintln!(
            "note: this engine refuses privileged containers; floor and manager run them unprivileged"
        );
        engine = engine.without_privileges();
    }
    let runtime: Arc<dyn ContainerRuntime> = Arc::new(engine);
    let floor = Floor {
        runtime: runtime.clone(),
        node_image: node_image.clone(),
        haproxy_image: haproxy_image.clone(),
        version: VERSION.to_string(),
        cloud_config: CLOUD_CONFIG.to_string(),
        concurrency: args.concurrency,
    };
    let workload = Workload {
        node_image,
        haproxy_image,
        version: VERSION.to_string(),
        cloud_config: CLOUD_CONFIG.to_string(),
    };
    let dir = tempfile::tempdir()?;
    let mut run = Run {
        prefix: format!("b{:x}", std::process::id() & 0xfff),
        counter: 0,
        log: args
            .manager_log
            .clone()
            .unwrap_or_else(|| dir.path().join("manager.log")),
        dir,
        manager: args.manager.clone(),
        unprivileged: !privileged,
    };
    let mut cleanup = Cleanup {
        clusters: Vec::new(),
        networks: Vec::new(),
    };
    let mut rows = Vec::new();
    let (mut lb_floor, mut lb_provider) = (Vec::new(), Vec::new());
    let mut all_runs: Vec<LifecycleRun> = Vec::new();
    let hold_back = HoldBack::of_run(args.deletion_wait, args.quick, || {
        let (ok, root) = docker_cli(&["info", "--format", "{{.DockerRootDir}}"]);
        HoldBack::of_engine(ok.then_some(root.as_str()))
    });
    eprintln!(
        "after a deletion, the next repetition waits {} s: {}",
        hold_back.wait.as_secs(),
        hold_back.reason
    );
    let mut guard = Guard::new(
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        hold_back,
    );
    // The privilege probe above removed a node container, and what ran before this benchmark
    // is unknown: the first repetition waits as after any deletion.
    guard.deleted();
    let mut curve = Vec::new();

    for &n in &sizes {
        let (mut floor_up, mut floor_down, mut runs) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..repetitions {
            let label = format!("N={n} repetition {}/{repetitions}", rep + 1);
            let start = guard.settle(&label, settle).await?;
            eprintln!("{label}: floor");
            let (network, cluster) = run.place(&mut cleanup, "f");
            if n == sizes[0] {
                lb_floor.push(floor.load_balancer(&network, &cluster).await?.as_secs_f64());
            }
            let (up, names) = floor.provision(&network, &cluster, n).await?;
            floor_up.push(up.as_secs_f64());

            // The floor's nodes are stopped before the provider creates its own, which then
            // start beside none running, as the floor's did; they are removed once the
            // provider's are gone, so that no deletion comes between the two phases that create
            // nodes (see `storage`). The floor's deletion is the stop and the removal.
            let stopped = floor.set_aside(&names).await?;
            eprintln!("{label}: provider");
            let (network, cluster) = run.place(&mut cleanup, "p");
            let result =
                provider::lifecycle(run.settings(&network), &runtime, &workload, &cluster, n)
                    .await?;
            let removed = floor.delete(&names).await?;
            floor_down.push((stopped + removed).as_secs_f64());
            if n == sizes[0] {
                lb_provider.push(result.load_balancer);
            }
            runs.push(result);
            guard.record(&label, &start, &Sample::read()?);
            cleanup.sweep();
            guard.deleted();
        }
        let pick = |f: fn(&LifecycleRun) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
        curve.push((
            n,
            Summary::of(&floor_up),
            Summary::of(&pick(|r| r.provision)),
        ));
        rows.push(Row::versus(
            format!("provision N={n}"),
            "s",
            &floor_up,
            &pick(|r| r.provision),
        ));
        rows.push(Row::versus(
            format!("delete N={n}"),
            "s",
            &floor_down,
            &pick(|r| r.delete),
        ));
        rows.push(Row::single(
            format!("manager peak RSS N={n}"),
            "MiB",
            &pick(|r| r.peak_rss_mib),
        ));
        rows.push(
            Row::single(
                format!("manager CPU N={n}"),
                "cpu-s",
                &pick(|r| r.cpu_seconds),
            )
            .note("creation to deletion"),
        );
        rows.push(
            Row::single(
                format!("test API server CPU N={n}"),
                "cpu-s",
                &pick(|r| r.api_server_cpu_seconds),
            )
            .note("the benchmark's process (both test API servers, its watches), creation to deletion"),
        );
        rows.push(
            Row::single(
                format!("API writes / machine N={n}"),
                "writes",
                &pick(|r| r.writes_per_machine),
            )
            .note(format!(
                "of which Events {:.1}",
                stats::Summary::of(&pick(|r| r.event_writes_per_machine)).map_or(0.0, |s| s.median)
            )),
        );
        rows.push(
            Row::single(
                format!("Docker calls / machine N={n}"),
                "calls",
                &pick(|r| r.docker_calls_per_machine),
            )
            .note(mean_calls(&runs, n).replace('|', "/")),
        );
        if let Some(last) = runs.last() {
            eprintln!("N={n} writes of the last repetition: {:?}", last.writes);
        }
        all_runs.extend(runs);
    }
    rows.push(scale_curve(&curve));
    rows.insert(
        0,
        Row::versus("load balancer", "s", &lb_floor, &lb_provider)
            .note("DockerCluster created → provisioned"),
    );

    if args.pool_size > 0 {
        let n = args.pool_size;
        let (mut floor_up, mut pool_up) = (Vec::new(), Vec::new());
        for rep in 0..repetitions {
            let label = format!("pool N={n} repetition {}/{repetitions}", rep + 1);
            let start = guard.settle(&label, settle).await?;
            eprintln!("{label}: floor");
            let (network, cluster) = run.place(&mut cleanup, "f");
            let (up, names) = floor.provision(&network, &cluster, n).await?;
            floor_up.push(up.as_secs_f64());
            // As for the machines above.
            floor.set_aside(&names).await?;

            eprintln!("{label}: provider");
            let (network, cluster) = run.place(&mut cleanup, "p");
            pool_up.push(
                provider::pool_scale_up(run.settings(&network), &workload, &cluster, n).await?,
            );
            floor.delete(&names).await?;
            guard.record(&label, &start, &Sample::read()?);
            cleanup.sweep();
            guard.deleted();
        }
        rows.push(
            Row::versus(format!("pool scale-up N={n}"), "s", &floor_up, &pool_up).note(
                "MachinePool replicas 0 → N until every DockerMachine is bootstrapped (the benchmark plays core)",
            ),
        );
    }

    eprintln!("rest: {rest_machines} machines, {}s", rest_window.as_secs());
    let (network, cluster) = run.place(&mut cleanup, "r");
    let rest = provider::at_rest(
        run.settings(&network),
        &workload,
        &cluster,
        rest_machines,
        rest_window,
    )
    .await?;
    let rest_note = format!(
        "{rest_machines} provisioned machines, {} s",
        rest_window.as_secs()
    );
    rows.push(
        Row::single("at rest: RSS", "MiB", &[rest.rss_mib])
            .note(format!("{rest_note}; peak {:.1} MiB", rest.peak_rss_mib)),
    );
    rows.push(Row::single("at rest: CPU", "cpu-s", &[rest.cpu_seconds]).note(rest_note.clone()));
    rows.push(
        Row::single("at rest: API writes", "writes", &[rest.writes as f64]).note(rest_note.clone()),
    );
    rows.push(
        Row::single(
            "at rest: Docker calls",
            "calls",
            &[rest.docker_calls as f64],
        )
        .note(rest_note),
    );

    let binary = std::fs::metadata(&args.manager)?.len() as f64 / (1024.0 * 1024.0);
    rows.push(
        Row::single("manager binary", "MiB", &[binary]).note("static, stripped release build"),
    );
    if let Some(image) = &args.image {
        let (ok, size) = docker_cli(&["image", "inspect", "--format", "{{.Size}}", image]);
        if let (true, Ok(bytes)) = (ok, size.parse::<f64>()) {
            rows.push(
                Row::single("manager image", "MiB", &[bytes / (1024.0 * 1024.0)])
                    .note(image.clone()),
            );
        }
    }
    drop(cleanup);
    rows.insert(0, guard.row());

    let report = Report {
        machine: machine_description(&runtime.engine()),
        repetitions,
        quick: args.quick,
        rows,
    };
    println!(
        "Machine: {}; {} repetition(s){}\n",
        report.machine,
        repetitions,
        if args.quick { ", --quick" } else { "" }
    );
    println!("{}", report.table());
    write_report(&report, &out_path(&args))
}

pub(crate) fn out_path(args: &Args) -> PathBuf {
    args.out.clone().unwrap_or_else(|| {
        PathBuf::from(if args.in_memory {
            "out/bench-inmemory.json"
        } else {
            "out/bench.json"
        })
    })
}

pub(crate) fn write_report(report: &Report, out: &std::path::Path) -> Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(out, report.json())?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_per_machine_show_what_is_made_once_per_manager() {
        let run = LifecycleRun {
            docker_calls: [("exec", 20), ("host_info", 1), ("run_container", 10)]
                .into_iter()
                .map(|(op, c)| (op.to_string(), c))
                .collect(),
            ..LifecycleRun::default()
        };
        assert_eq!(
            mean_calls(&[run], 10),
            "exec 2, host_info 0.1, run_container 1"
        );
    }
}
