//! Scenario 4: a provisioned cluster at rest: no object's resourceVersion moves for 30 s, the
//! management API receives no write, and the manager uses next to no CPU.

use std::time::Duration;

use capd_e2e::*;

use crate::PROVISION;

const REST: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_cluster_at_rest_costs_nothing() {
    if !capd_e2e::installed::runs_with_stand_in("a_provisioned_cluster_at_rest_costs_nothing") {
        return;
    }
    let mut env = Env::scenario("rest", &[]).await;
    let name = env.cluster_name();
    env.create_kubeconfig_secret(&name).await;
    env.provisioned_cluster(&name, serde_json::json!({})).await;
    for (machine, control_plane) in [("cp1", true), ("md1", false)] {
        env.create_secret(&format!("{machine}-bootstrap"), &cloud_config(0))
            .await;
        env.create_machine(
            &name,
            machine,
            control_plane,
            Some(&format!("{machine}-bootstrap")),
        )
        .await;
        env.register_node(&format!("{name}-{machine}"), true).await;
    }
    env.wait_machine_provisioned("cp1", PROVISION).await;
    env.mark_control_plane_initialized(&name).await;
    env.wait_machine_provisioned("md1", PROVISION).await;
    for machine in ["cp1", "md1"] {
        let node = format!("{name}-{machine}");
        eventually(
            Duration::from_secs(60),
            "the Node's provider ID",
            || async { env.node(&node).await.spec?.provider_id.map(|_| ()) },
        )
        .await;
        // Core records the Node on the Machine: at rest includes Machines with a Node.
        assert_eq!(
            env.wait_node_ref(machine, Duration::from_secs(30)).await,
            node
        );
    }

    // Settled: three quiet seconds in a row (bounded, so a hot loop fails here).
    env.wait_settled(Duration::from_secs(30)).await;

    let before = env.resource_versions().await;
    let cpu_before = env.manager_cpu();
    if let Some(server) = env.test_server() {
        server.reset_write_counts();
    }
    tokio::time::sleep(REST).await;
    let cpu = env.manager_cpu() - cpu_before;
    let after = env.resource_versions().await;
    println!(
        "scenario 4: the manager used {:.3} CPU-seconds over {}s at rest ({} objects watched)",
        cpu.as_secs_f64(),
        REST.as_secs(),
        before.len()
    );
    assert_eq!(after, before, "resourceVersions moved at rest");
    assert!(before.len() >= 5, "{before:?}");
    match env.test_server() {
        Some(server) => assert_eq!(
            server.write_total(),
            0,
            "writes at rest: {:?}",
            server.write_counts()
        ),
        None => println!("note: an existing cluster has no write counter; resourceVersions only"),
    }
    assert!(
        cpu < Duration::from_secs(1),
        "the manager used {cpu:?} of CPU at rest"
    );
}
