//! Scenario 2: three control planes and two workers spread over the DockerCluster's failure
//! domains, three weighted backends in the load balancer, and a control plane scaled down:
//! drained (weight 0) while its Machine is deleting, then removed.

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

use crate::PROVISION;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_planes_and_workers_spread_over_failure_domains_and_scale_down() {
    if !capd_e2e::installed::runs_with_stand_in(
        "control_planes_and_workers_spread_over_failure_domains_and_scale_down",
    ) {
        return;
    }
    let mut env = Env::scenario("scale", &[]).await;
    let name = env.cluster_name();
    env.create_kubeconfig_secret(&name).await;
    let dc = env
        .provisioned_cluster(
            &name,
            json!({"failureDomains": [
                {"name": "fd1", "controlPlane": true},
                {"name": "fd2", "controlPlane": true},
                {"name": "fd3", "controlPlane": true},
                {"name": "fd4"}
            ]}),
        )
        .await;
    // Core spreads Machines over the failure domains the DockerCluster reports.
    let domains: Vec<(String, bool)> = dc.data["status"]["failureDomains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_string(),
                d["controlPlane"] == json!(true),
            )
        })
        .collect();
    let cp_domains: Vec<&String> = domains.iter().filter(|d| d.1).map(|d| &d.0).collect();
    assert_eq!(cp_domains, ["fd1", "fd2", "fd3"]);

    let mut placed = Vec::new();
    for (i, fd) in cp_domains.iter().enumerate() {
        let machine = format!("cp{i}");
        let fd = fd.to_string();
        env.create_secret(&format!("{machine}-bootstrap"), &cloud_config(0))
            .await;
        let spec = MachineSpec {
            control_plane: true,
            bootstrap_secret: Some(format!("{machine}-bootstrap")),
            failure_domain: Some(fd.clone()),
            ..MachineSpec::default()
        };
        env.create_machine_with(&name, &machine, &spec).await;
        if i == 0 {
            env.wait_machine_provisioned(&machine, PROVISION).await;
            env.mark_control_plane_initialized(&name).await;
        }
        placed.push((machine, fd));
    }
    for i in 0..2 {
        let machine = format!("md{i}");
        let fd = domains[(i + 2) % domains.len()].0.clone();
        env.create_secret(&format!("{machine}-bootstrap"), &cloud_config(0))
            .await;
        let spec = MachineSpec {
            control_plane: false,
            bootstrap_secret: Some(format!("{machine}-bootstrap")),
            failure_domain: Some(fd.clone()),
            ..MachineSpec::default()
        };
        env.create_machine_with(&name, &machine, &spec).await;
        placed.push((machine, fd));
    }
    for (machine, fd) in &placed {
        env.wait_machine_provisioned(machine, PROVISION).await;
        let container = format!("{name}-{machine}");
        assert_eq!(&container_label(&container, FAILURE_DOMAIN_LABEL), fd);
        assert_eq!(kubeadm_runs(&container), 1);
    }

    // The load balancer has the three control planes, weight 100 each, and no worker.
    let lb = format!("{name}-lb");
    let expected: Vec<(String, String, u32)> = (0..3)
        .map(|i| {
            let c = format!("{name}-cp{i}");
            let address = format!("{}:6443", ip_on(&c, &env.network));
            (c, address, 100)
        })
        .collect();
    eventually(Duration::from_secs(30), "three backends", || async {
        let mut backends = haproxy_backends(&haproxy_config(&lb));
        backends.sort();
        (backends == expected).then_some(())
    })
    .await;

    // Scale the control plane down: core marks cp2's Machine deleting (drain), then deletes its
    // DockerMachine (removal).
    let victim = format!("{name}-cp2");
    env.begin_machine_deletion("cp2").await;
    // Drained: weight 0 in the load balancer and on the DockerMachine's annotation.
    eventually(Duration::from_secs(30), "cp2 to be drained", || async {
        let drained = haproxy_backends(&haproxy_config(&lb))
            .iter()
            .any(|(n, _, w)| *n == victim && *w == 0);
        let dm = env.get(&infra("DockerMachine"), "cp2").await?;
        let weight = dm
            .metadata
            .annotations?
            .get("devmachine.infrastructure.cluster.x-k8s.io/weight")
            .cloned();
        (drained && weight.as_deref() == Some("0")).then_some(())
    })
    .await;
    let volumes = container_volumes(&victim);
    env.finish_machine_deletion("cp2", Duration::from_secs(60))
        .await;
    let mut backends = haproxy_backends(&haproxy_config(&lb));
    backends.sort();
    assert_eq!(backends, expected[..2].to_vec(), "cp2's backend is removed");
    assert!(!cluster_containers(&name).contains(&victim));
    assert!(volumes.iter().all(|v| !volume_exists(v)));
    let events = env.events_about("DockerMachine", "cp2").await;
    assert!(
        events
            .iter()
            .any(|(_, r, m)| r == "LoadBalancerUpdated" && m.contains("to 0")),
        "{events:?}"
    );
}
