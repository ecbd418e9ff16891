//! Issue 43: a cluster of three control planes, deleted as core deletes it (the three Machines
//! marked deleting, then their DockerMachines deleted together), several times in a row. Every
//! deletion ends: each drained control plane is deleted, nothing is left, and the manager's
//! debug log says why each reconcile ran.

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

use crate::PROVISION;

/// How many clusters are made and deleted, one after the other.
const ROUNDS: usize = 4;

/// How long a cluster's deletion may take: a few seconds of work, generous for a loaded machine.
const DELETION: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_control_planes_deleted_at_once_go_every_time() {
    if !capd_e2e::installed::runs_with_stand_in(
        "three_control_planes_deleted_at_once_go_every_time",
    ) {
        return;
    }
    let mut env = Env::scenario("cpdelete", &["--v=4"]).await;
    for round in 0..ROUNDS {
        let name = env.cluster_name();
        env.create_kubeconfig_secret(&name).await;
        env.provisioned_cluster(&name, json!({})).await;
        let machines: Vec<String> = (0..3).map(|i| format!("r{round}-cp{i}")).collect();
        for (i, machine) in machines.iter().enumerate() {
            let secret = format!("{machine}-bootstrap");
            env.create_secret(&secret, &cloud_config(0)).await;
            let spec = MachineSpec {
                control_plane: true,
                bootstrap_secret: Some(secret),
                ..MachineSpec::default()
            };
            env.create_machine_with(&name, machine, &spec).await;
            if i == 0 {
                env.wait_machine_provisioned(machine, PROVISION).await;
                env.mark_control_plane_initialized(&name).await;
            }
        }
        let mut volumes = container_volumes(&format!("{name}-lb"));
        for machine in &machines {
            env.wait_machine_provisioned(machine, PROVISION).await;
            volumes.extend(container_volumes(&format!("{name}-{machine}")));
        }

        env.delete_cluster_as_core(&name, DELETION).await;
        env.assert_nothing_left(&name, &volumes).await;
    }

    // At debug level, each reconcile of a DockerMachine starts and ends with what triggered it.
    let log = env.manager_log();
    let last = format!("r{}-cp2", ROUNDS - 1);
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("dockermachine") && l.contains(&last))
        .collect();
    for message in ["Reconcile started", "Reconcile ended"] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(message) && l.contains("reason")),
            "no {message:?} line with a reason for {last}:\n{}",
            lines.join("\n")
        );
    }
}
