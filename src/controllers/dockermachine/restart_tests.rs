//! Tests of starting stopped node containers again: the order across a cluster, bootstrap
//! state, and the Docker side with the fake runtime.

use super::decide::provisioned;
use super::restart::*;
use crate::api::capi::Machine;
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, CONTAINER_PROVISIONED_CONDITION, ConditionStatus,
};
use crate::api::v1beta2::DockerMachine;
use crate::controllers::fixtures::*;
use crate::controllers::kinds::View;
use crate::controllers::tasks::TaskState;
use crate::docker::FakeRuntime;
use crate::docker::fake::Call;
use crate::docker::loadbalancer::{LoadBalancerSpec, create_load_balancer};
use crate::docker::node::{NodeRole, NodeSpec, create_node};

fn running(load_balancer: Option<bool>, control_planes: usize, up: usize) -> ClusterRunning {
    ClusterRunning {
        load_balancer,
        control_planes,
        control_planes_running: up,
    }
}

#[test]
fn the_load_balancer_comes_first_then_control_planes_then_workers() {
    let cp = Machine::test("cp1").control_plane();
    let worker = Machine::test("w1");
    let reason = |machine: &Machine, state| {
        restart_wait(machine, "c1-x", state, Some(1)).map(|c| (c.reason, c.message))
    };
    let (why, message) = reason(&cp, running(Some(false), 1, 0)).unwrap();
    assert_eq!(why, "WaitingForLoadBalancer");
    assert_eq!(
        message,
        "Container c1-x is stopped; waiting for the load balancer to run again before starting it"
    );
    assert_eq!(reason(&cp, running(Some(true), 1, 0)), None);
    assert_eq!(
        reason(&worker, running(Some(false), 1, 1)).unwrap().0,
        "WaitingForLoadBalancer"
    );
    assert_eq!(
        reason(&worker, running(Some(true), 2, 0)).unwrap().0,
        "WaitingForControlPlane"
    );
    assert_eq!(reason(&worker, running(Some(true), 2, 1)), None);
    assert_eq!(
        reason(&worker, running(None, 0, 0)),
        None,
        "nothing to wait for without a load balancer or control plane container"
    );
}

#[test]
fn a_bootstrap_under_way_when_the_node_stopped_is_never_run_again() {
    let fresh = DockerMachine::test("m1");
    assert_eq!(
        interrupted_bootstrap(&fresh, "c1-m1", None),
        None,
        "bootstrap had not started"
    );
    let waiting = DockerMachine::test("m1").with_condition(
        BOOTSTRAP_COMPLETED_CONDITION,
        ConditionStatus::False,
        "WaitingForCGroups",
    );
    assert_eq!(interrupted_bootstrap(&waiting, "c1-m1", None), None);
    let done = DockerMachine::test("m1").with_condition(
        BOOTSTRAP_COMPLETED_CONDITION,
        ConditionStatus::True,
        "Completed",
    );
    assert_eq!(
        interrupted_bootstrap(&done, "c1-m1", None),
        None,
        "a completed bootstrap stays completed"
    );
    let finished = TaskState::Succeeded("ran 3 bootstrap commands".into());
    assert_eq!(
        interrupted_bootstrap(&fresh, "c1-m1", Some(&finished)),
        None
    );

    let running_task = TaskState::Running("Running bootstrap command [kubeadm] (2 of 3)".into());
    let after_manager_restart = DockerMachine::test("m1").with_condition(
        BOOTSTRAP_COMPLETED_CONDITION,
        ConditionStatus::False,
        "NotReady",
    );
    let overdue_task =
        TaskState::Overdue("Bootstrap command [kubeadm] (2 of 3) still running".into());
    let timed_out_before_manager_restart = DockerMachine::test("m1").with_condition(
        BOOTSTRAP_COMPLETED_CONDITION,
        ConditionStatus::False,
        "BootstrapTimedOut",
    );
    for (dm, task) in [
        (&fresh, Some(&running_task)),
        (&after_manager_restart, None),
        (&fresh, Some(&overdue_task)),
        (&timed_out_before_manager_restart, None),
    ] {
        let failed = interrupted_bootstrap(dm, "c1-m1", task).unwrap();
        assert_eq!(failed.type_, BOOTSTRAP_COMPLETED_CONDITION);
        assert_eq!(failed.status, ConditionStatus::False);
        assert_eq!(
            failed.reason, "Failed",
            "final: bootstrap never starts again"
        );
        assert!(
            failed
                .message
                .starts_with("Container c1-m1 stopped while bootstrap was running"),
            "{}",
            failed.message
        );
    }
}

#[test]
fn the_last_restart_stays_in_the_condition_while_the_container_runs() {
    let dm = DockerMachine::test("m1");
    let note = "Container c1-m1 was stopped; started it again".to_string();
    let after_restart = provisioned(&dm, Some(note.clone()));
    assert_eq!(after_restart.type_, CONTAINER_PROVISIONED_CONDITION);
    assert_eq!(after_restart.message, note);
    let dm = DockerMachine::test("m1").with_condition(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::True,
        "Provisioned",
    );
    assert_eq!(provisioned(&dm, None).message, "");
}

// ---- the Docker side, with the fake runtime ----------------------------------------------

async fn cluster_in(fake: &FakeRuntime) {
    fake.add_image("haproxy:test").add_image("node:test");
    let lb = LoadBalancerSpec::new("c1", "haproxy:test", "kind");
    crate::docker::network::ensure_network(fake, "kind", &Default::default())
        .await
        .unwrap();
    create_load_balancer(fake, &lb, None).await.unwrap();
    for (name, role) in [
        ("c1-cp1", NodeRole::ControlPlane),
        ("c1-w1", NodeRole::Worker),
    ] {
        let spec = NodeSpec::new("c1", name, role, "node:test", "kind");
        create_node(fake, &spec, None).await.unwrap();
    }
}

#[tokio::test]
async fn what_runs_of_a_cluster_is_read_from_the_engine() {
    let fake = FakeRuntime::new();
    let ctx = test_context(fake.clone());
    assert_eq!(
        cluster_running(&ctx, "c1").await.unwrap(),
        running(None, 0, 0)
    );
    cluster_in(&fake).await;
    assert_eq!(
        cluster_running(&ctx, "c1").await.unwrap(),
        running(Some(true), 1, 1)
    );
    for name in ["c1-lb", "c1-cp1", "c1-w1"] {
        fake.stop_container(name);
    }
    assert_eq!(
        cluster_running(&ctx, "c1").await.unwrap(),
        running(Some(false), 1, 0)
    );
}

#[tokio::test]
async fn a_stopped_node_is_started_again_keeping_its_container_and_address() {
    let fake = FakeRuntime::new();
    let ctx = test_context(fake.clone());
    cluster_in(&fake).await;
    let before = fake
        .containers()
        .into_iter()
        .find(|c| c.name == "c1-cp1")
        .unwrap();
    fake.stop_container("c1-cp1");
    let dm = DockerMachine::test("cp1");
    assert!(
        start_node(&ctx, &View::docker(dm.clone()), "c1-cp1")
            .await
            .unwrap()
            .is_some()
    );
    let after = fake
        .containers()
        .into_iter()
        .find(|c| c.name == "c1-cp1")
        .unwrap();
    assert!(after.running);
    assert_eq!(after.id, before.id);
    assert_eq!(after.networks, before.networks);
    assert!(
        fake.calls()
            .contains(&Call::StartContainer("c1-cp1".into()))
    );
    assert!(
        start_node(&ctx, &View::docker(dm.clone()), "c1-cp1")
            .await
            .unwrap()
            .is_some(),
        "starting a running container succeeds"
    );
    let err = start_node(&ctx, &View::docker(dm.clone()), "c1-gone")
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("start container c1-gone"),
        "{err}"
    );
}
