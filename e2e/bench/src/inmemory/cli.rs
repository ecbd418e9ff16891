//! `capd-bench --in-memory`: the in-memory scale run from the command line, its table and JSON.

use std::time::Duration;

use anyhow::{Context, Result};

use super::figures;
use crate::stack::ManagerSettings;
use crate::stats::Report;
use crate::{Args, load, machine_description, out_path, write_report};

/// The in-memory scale benchmark: one run of `--clusters` × `--machines-per-cluster`.
pub async fn run(args: &Args) -> Result<()> {
    let seconds = |s: f64| Duration::try_from_secs_f64(s).context("a stage duration in seconds");
    let delays = figures::StageDelays {
        vm: seconds(args.vm_seconds)?,
        node: seconds(args.node_seconds)?,
        etcd: seconds(args.etcd_seconds)?,
        api_server: seconds(args.api_server_seconds)?,
        jitter: args.jitter,
    };
    let settings = super::Settings {
        clusters: args.clusters,
        machines_per_cluster: args.machines_per_cluster,
        delays,
        rest: Duration::from_secs(
            args.rest_seconds
                .unwrap_or(if args.quick { 20 } else { 60 }),
        ),
    };
    let dir = tempfile::tempdir()?;
    let manager = ManagerSettings {
        binary: args.manager.clone(),
        network: format!("b{:x}im", std::process::id() & 0xfff),
        unprivileged: false,
        count_file: dir.path().join("calls.json"),
        log: args
            .manager_log
            .clone()
            .unwrap_or_else(|| dir.path().join("manager.log")),
    };
    let load_before = load::load_averages()?;
    eprintln!("in-memory: load average before {load_before}");
    let measured = super::run(manager, &settings).await?;
    let load_after = load::load_averages()?;
    let load = format!("{load_before} before, {load_after} after (1, 5, 15 min; a shared machine)");
    let report = Report {
        machine: machine_description(&"in-memory backend"),
        repetitions: 1,
        quick: args.quick,
        rows: figures::rows(&measured, &delays, &load),
    };
    println!("Machine: {}; load average {load}\n", report.machine);
    println!("{}", report.table());
    write_report(&report, &out_path(args))
}
