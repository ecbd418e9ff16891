//! The in-memory backend of DevMachines: the stage timings (pure), and a pass of the reconcile
//! against the test API server that provisions a control plane to `Ready` with a Node in its
//! fake cluster, reachable over TLS, and a deletion that removes it.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::inmemory_stages::*;
use crate::api::capi::{Cluster, Machine};
use crate::api::conditions::{Condition, ConditionStatus, READY_CONDITION, find_condition};
use crate::api::v1beta2::{
    InMemoryComponentSpec, InMemoryMachineBackendSpec, InMemoryProvisioningSettings,
};
use crate::controllers::fixtures::*;

fn timed(duration: &str, jitter: &str) -> Option<InMemoryComponentSpec> {
    Some(InMemoryComponentSpec {
        provisioning: Some(InMemoryProvisioningSettings {
            startup_duration: duration.into(),
            startup_jitter: jitter.into(),
        }),
    })
}

/// CAPD's templates: VM 10 s, node, etcd and API server 2 s, no jitter here.
fn capd_timings() -> InMemoryMachineBackendSpec {
    InMemoryMachineBackendSpec {
        vm: timed("10s", ""),
        node: timed("2s", ""),
        api_server: timed("2s", ""),
        etcd: timed("2s", ""),
    }
}

fn status_of<'a>(conditions: &'a [Condition], type_: &str) -> (&'a ConditionStatus, &'a str) {
    let c = find_condition(conditions, type_).unwrap();
    (&c.status, c.reason.as_str())
}

fn at(start: Timestamp, seconds: i64) -> Timestamp {
    start + SignedDuration::from_secs(seconds)
}

#[test]
fn omitted_timings_provision_everything_in_one_pass() {
    let delays = delays(&InMemoryMachineBackendSpec::default(), "uid").unwrap();
    let mut conditions = Vec::new();
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let plan = plan(&mut conditions, now, now, true, &delays, Some(1));
    assert_eq!(
        plan,
        Plan {
            vm: true,
            node: true,
            etcd: true,
            api_server: true,
            requeue: None
        }
    );
    assert!(
        find_condition(&conditions, READY_CONDITION)
            .unwrap()
            .is_true()
    );
}

#[test]
fn each_stage_waits_for_its_startup_duration_after_the_one_before() {
    let delays = delays(&capd_timings(), "uid").unwrap();
    let start = Timestamp::from_second(1_800_000_000).unwrap();
    let mut conditions = Vec::new();

    // 3 s into the VM's 10 s: nothing yet, look again in 7 s.
    let early = plan(&mut conditions, start, at(start, 3), true, &delays, Some(1));
    assert_eq!(early.requeue, Some(Duration::from_secs(7)));
    assert!(!early.vm);
    assert_eq!(
        status_of(&conditions, VM_PROVISIONED_CONDITION),
        (&ConditionStatus::False, WAITING_FOR_STARTUP_TIMEOUT_REASON)
    );
    assert_eq!(
        status_of(&conditions, NODE_PROVISIONED_CONDITION),
        (&ConditionStatus::False, WAITING_FOR_VM_PROVISIONED_REASON)
    );
    assert_eq!(
        status_of(&conditions, READY_CONDITION),
        (&ConditionStatus::False, "NotReady")
    );

    // At 10 s the VM is provisioned; the Node needs 2 s more.
    let vm = plan(
        &mut conditions,
        start,
        at(start, 10),
        true,
        &delays,
        Some(1),
    );
    assert!(vm.vm && !vm.node);
    assert_eq!(vm.requeue, Some(Duration::from_secs(2)));
    assert_eq!(
        status_of(&conditions, ETCD_PROVISIONED_CONDITION),
        (&ConditionStatus::False, WAITING_FOR_NODE_PROVISIONED_REASON)
    );

    // At 12 s the Node; etcd and the API server 2 s after it.
    let node = plan(
        &mut conditions,
        start,
        at(start, 12),
        true,
        &delays,
        Some(1),
    );
    assert!(node.node && !node.etcd && !node.api_server);
    assert_eq!(node.requeue, Some(Duration::from_secs(2)));

    let done = plan(
        &mut conditions,
        start,
        at(start, 14),
        true,
        &delays,
        Some(1),
    );
    assert!(done.etcd && done.api_server && done.requeue.is_none());
    assert_eq!(
        status_of(&conditions, READY_CONDITION),
        (&ConditionStatus::True, "Ready")
    );
    // The times a restart reads again: the VM's transition is the moment it was provisioned.
    assert_eq!(
        find_condition(&conditions, VM_PROVISIONED_CONDITION)
            .unwrap()
            .last_transition_time
            .0,
        at(start, 10)
    );
}

#[test]
fn a_late_pass_provisions_every_stage_due_at_once_on_the_stages_timeline() {
    let delays = delays(&capd_timings(), "uid").unwrap();
    let start = Timestamp::from_second(1_800_000_000).unwrap();
    let mut conditions = Vec::new();
    let _ = plan(&mut conditions, start, at(start, 1), true, &delays, Some(1));

    // The pass comes 13 s late (the VM was due at 10 s, the Node at 12 s): one pass, and so
    // one status write, provisions both, each at the moment it fell due; etcd and the API
    // server are due 2 s after the Node, at 14 s, not 2 s after this pass.
    let late = plan(
        &mut conditions,
        start,
        at(start, 13),
        true,
        &delays,
        Some(1),
    );
    assert!(late.vm && late.node && !late.etcd && !late.api_server);
    assert_eq!(late.requeue, Some(Duration::from_secs(1)));
    let time = |conditions: &[Condition], type_: &str| {
        find_condition(conditions, type_)
            .unwrap()
            .last_transition_time
            .0
    };
    assert_eq!(time(&conditions, VM_PROVISIONED_CONDITION), at(start, 10));
    assert_eq!(time(&conditions, NODE_PROVISIONED_CONDITION), at(start, 12));

    // Much later: the rest in one pass too, on the same timeline.
    let done = plan(
        &mut conditions,
        start,
        at(start, 60),
        true,
        &delays,
        Some(1),
    );
    assert!(done.etcd && done.api_server && done.requeue.is_none());
    assert_eq!(time(&conditions, ETCD_PROVISIONED_CONDITION), at(start, 14));
    assert_eq!(
        time(&conditions, API_SERVER_PROVISIONED_CONDITION),
        at(start, 14)
    );
    assert_eq!(
        time(&conditions, VM_PROVISIONED_CONDITION),
        at(start, 10),
        "kept"
    );
}

#[test]
fn fractional_delays_end_each_stage_on_time_whatever_the_seconds_recorded() {
    // `lastTransitionTime` keeps whole seconds; a stage timed from its predecessor's recorded
    // end would come early (or late, rounded up), and a chain of them (VM, Node, etcd) more so.
    let timings = InMemoryMachineBackendSpec {
        vm: timed("10.4s", ""),
        node: timed("2.4s", ""),
        api_server: timed("2.4s", ""),
        etcd: timed("2.4s", ""),
    };
    let delays = delays(&timings, "uid").unwrap();
    let start = Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_millis(700);
    let exact = |seconds: f64| start + SignedDuration::from_secs_f64(seconds);
    let mut conditions = Vec::new();
    let ended = |plan: &Plan| {
        [plan.vm, plan.node, plan.etcd]
            .iter()
            .filter(|d| **d)
            .count()
    };
    for (stage_end, stages) in [(10.4, 1), (12.8, 2), (15.2, 3)] {
        let before = plan(
            &mut conditions,
            start,
            exact(stage_end - 0.05),
            true,
            &delays,
            Some(1),
        );
        assert_eq!(
            ended(&before),
            stages - 1,
            "nothing ends before {stage_end} s"
        );
        let after = plan(
            &mut conditions,
            start,
            exact(stage_end + 0.05),
            true,
            &delays,
            Some(1),
        );
        assert_eq!(
            ended(&after),
            stages,
            "stage {stages} ends at {stage_end} s"
        );
    }
    for (condition, end) in [
        (VM_PROVISIONED_CONDITION, 10.4),
        (NODE_PROVISIONED_CONDITION, 12.8),
        (ETCD_PROVISIONED_CONDITION, 15.2),
    ] {
        let recorded = find_condition(&conditions, condition)
            .unwrap()
            .last_transition_time
            .0;
        assert_eq!(
            recorded,
            Timestamp::from_second(exact(end).as_second()).unwrap(),
            "{condition}: the second it ended in"
        );
    }
}

#[test]
fn a_worker_has_no_etcd_nor_api_server() {
    let delays = delays(&capd_timings(), "uid").unwrap();
    let start = Timestamp::from_second(1_800_000_000).unwrap();
    let mut conditions = Vec::new();
    let _ = plan(&mut conditions, start, at(start, 10), false, &delays, None);
    let done = plan(&mut conditions, start, at(start, 12), false, &delays, None);
    assert!(done.node && !done.etcd && !done.api_server);
    assert!(find_condition(&conditions, ETCD_PROVISIONED_CONDITION).is_none());
    assert!(
        find_condition(&conditions, READY_CONDITION)
            .unwrap()
            .is_true()
    );
}

#[test]
fn jitter_stays_within_its_fraction_and_holds_still_for_a_machine() {
    let spec = timed("10s", "0.2");
    let mut seen = Vec::new();
    for seed in ["a", "b", "c", "d", "e", "f"] {
        let delay = delay(spec.as_ref(), seed, Stage::Vm).unwrap();
        assert!(
            delay >= Duration::from_secs(10) && delay < Duration::from_secs(12),
            "{delay:?}"
        );
        assert_eq!(
            delay,
            super::inmemory_stages::delay(spec.as_ref(), seed, Stage::Vm).unwrap()
        );
        seen.push(delay);
    }
    seen.dedup();
    assert!(seen.len() > 1, "machines draw different delays");
}

#[test]
fn settings_that_do_not_parse_name_their_field() {
    let error = delay(timed("10s", "lots").as_ref(), "uid", Stage::Etcd).unwrap_err();
    assert!(error.contains("etcd.provisioning.startupJitter"), "{error}");
    let error = delay(timed("10 parsecs", "").as_ref(), "uid", Stage::Vm).unwrap_err();
    assert!(error.contains("vm.provisioning.startupDuration"), "{error}");
}

#[test]
fn a_machine_waits_with_the_docker_backends_reasons() {
    use super::inmemory::wait;
    let cluster = Cluster::test("c1");
    let worker = Machine::test("w1");
    assert_eq!(
        wait(&worker, &cluster, None).unwrap().reason,
        "WaitingForClusterInfrastructureReady"
    );
    let cluster = cluster.with_infrastructure_provisioned();
    assert_eq!(
        wait(&worker, &cluster, None).unwrap().reason,
        "WaitingForControlPlaneInitialized"
    );
    let control_plane = Machine::test("cp1").control_plane();
    assert_eq!(
        wait(&control_plane, &cluster, None).unwrap().reason,
        "WaitingForBootstrapData"
    );
    assert!(
        wait(
            &control_plane.with_bootstrap_secret("cp1-bootstrap"),
            &cluster,
            None
        )
        .is_none()
    );
}

mod reconcile {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{Node, Secret};
    use kube::api::{Api, PostParams};
    use kube::core::ObjectMeta;
    use kube::runtime::controller::Action;

    use super::*;
    use crate::api::v1beta2::{DevMachine, DevMachineBackendSpec, DevMachineSpec, DockerCluster};
    use crate::api::{CLUSTER_NAME_LABEL, DOCKER_MACHINE_FINALIZER};
    use crate::controllers::dockermachine::{Fetched, inmemory};
    use crate::controllers::kinds::{ServedKind, View};
    use crate::docker::FakeRuntime;
    use crate::inmemory::Clusters;

    const CA_CRT: &str = include_str!("../../inmemory/testdata/ca.crt");
    const CA_KEY: &str = include_str!("../../inmemory/testdata/ca.key");

    async fn api() -> (testapiserver::Handle, kube::Client) {
        let (server, client) =
            test_api_server_serving::<DevMachine>(crate::api::crd::dev_machine().unwrap()).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
        // The cluster CA and the etcd CA (one key pair for both, here).
        for name in ["c1-ca", "c1-etcd"] {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([
                    ("tls.crt".into(), ByteString(CA_CRT.as_bytes().to_vec())),
                    ("tls.key".into(), ByteString(CA_KEY.as_bytes().to_vec())),
                ])),
                ..Default::default()
            };
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .unwrap();
        }
        (server, client)
    }

    fn dev_machine(name: &str, backend: InMemoryMachineBackendSpec) -> DevMachine {
        let mut machine = DevMachine::new(
            name,
            DevMachineSpec {
                provider_id: String::new(),
                backend: DevMachineBackendSpec {
                    docker: None,
                    in_memory: Some(backend),
                },
            },
        );
        machine.metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(BTreeMap::from([(CLUSTER_NAME_LABEL.into(), "c1".into())])),
            finalizers: Some(vec![DOCKER_MACHINE_FINALIZER.into()]),
            owner_references: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "cluster.x-k8s.io/v1beta2".into(),
                    kind: "Machine".into(),
                    name: name.into(),
                    uid: format!("uid-{name}"),
                    controller: Some(true),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        machine
    }

    fn fetched(machine: Machine, port: u16) -> Fetched {
        let mut infra = DockerCluster::test("c1");
        infra.spec.control_plane_endpoint.host = "127.0.0.1".into();
        infra.spec.control_plane_endpoint.port = i32::from(port);
        Fetched {
            machine: Some(machine),
            cluster_name: Some("c1".into()),
            cluster: Some(Cluster::test("c1").with_infrastructure_provisioned()),
            docker_cluster: Some(View::docker(infra)),
            machine_pool_missing: false,
        }
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[tokio::test]
    async fn a_control_plane_goes_to_ready_with_its_node_served_then_goes() {
        let (_server, client) = api().await;
        let port = free_port();
        let mut ctx = test_context_on(FakeRuntime::new(), client.clone());
        ctx.in_memory = Arc::new(Clusters::new("127.0.0.1".into(), port..=port));
        let machines: Api<DevMachine> = Api::namespaced(client.clone(), NAMESPACE);
        let created = machines
            .create(
                &PostParams::default(),
                &dev_machine("cp1", InMemoryMachineBackendSpec::default()),
            )
            .await
            .unwrap();
        let fetched = fetched(
            Machine::test("cp1")
                .control_plane()
                .with_bootstrap_secret("cp1-bootstrap"),
            port,
        );
        let view = created.view().unwrap();
        let Backend::InMemory(spec) = view.backend().clone() else {
            panic!("in-memory view expected");
        };

        let action = inmemory::reconcile_normal(&ctx, &view, &spec, &fetched)
            .await
            .unwrap();
        assert_eq!(action, Action::requeue(ctx.manager.config.sync_period));

        let written = machines.get("cp1").await.unwrap();
        assert_eq!(written.spec.provider_id, "in-memory://cp1");
        let status = written.status.clone().unwrap();
        assert_eq!(status.initialization.provisioned, Some(true));
        for type_ in [
            VM_PROVISIONED_CONDITION,
            NODE_PROVISIONED_CONDITION,
            ETCD_PROVISIONED_CONDITION,
            API_SERVER_PROVISIONED_CONDITION,
            READY_CONDITION,
        ] {
            assert!(
                find_condition(&status.conditions, type_).is_some_and(Condition::is_true),
                "{type_}: {:?}",
                status.conditions
            );
        }

        // A second pass over the provisioned machine writes nothing.
        let version = written.metadata.resource_version.clone();
        let again = machines.get("cp1").await.unwrap().view().unwrap();
        inmemory::reconcile_normal(&ctx, &again, &spec, &fetched)
            .await
            .unwrap();
        assert_eq!(
            machines.get("cp1").await.unwrap().metadata.resource_version,
            version
        );

        // The Node is served by the fake cluster's API server, over TLS signed by the CA.
        let fake = ctx.in_memory.get("default/c1").unwrap();
        assert!(fake.listening());
        // The fake etcd serves with a certificate of the cluster's etcd CA (`c1-etcd`).
        assert!(fake.etcd.has_ca());
        assert!(fake.etcd.server_config("etcd-cp1").is_ok());
        let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
        config.accept_invalid_certs = true;
        let workload = kube::Client::try_from(config).unwrap();
        let node = Api::<Node>::all(workload).get("cp1").await.unwrap();
        assert!(
            node.labels()
                .contains_key("node-role.kubernetes.io/control-plane")
        );

        // A manager restart loses the fake clusters: the next pass makes the Node and the API
        // server again, on the endpoint's port, without writing to the DevMachine.
        drop(fake);
        ctx.in_memory = Arc::new(Clusters::new("127.0.0.1".into(), port..=port));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let again = machines.get("cp1").await.unwrap().view().unwrap();
        inmemory::reconcile_normal(&ctx, &again, &spec, &fetched)
            .await
            .unwrap();
        assert_eq!(
            machines.get("cp1").await.unwrap().metadata.resource_version,
            version
        );
        let fake = ctx.in_memory.get("default/c1").unwrap();
        assert!(fake.listening());
        assert!(fake.etcd.has_ca(), "the etcd CA is read again");
        let nodes = crate::inmemory::resources::find("", "v1", "nodes").unwrap();
        assert!(fake.store.get(nodes, "", "cp1").is_ok(), "the Node is back");

        let view = machines.get("cp1").await.unwrap().view().unwrap();
        inmemory::reconcile_delete(&ctx, &view, &fetched)
            .await
            .unwrap();
        assert!(
            fake.store.get(nodes, "", "cp1").is_err(),
            "the Node is gone"
        );
        assert!(!fake.listening(), "the last API server is gone");
    }

    #[tokio::test]
    async fn a_stage_not_yet_due_requeues_for_the_time_left() {
        let (_server, client) = api().await;
        let ctx = test_context_on(FakeRuntime::new(), client.clone());
        let machines: Api<DevMachine> = Api::namespaced(client.clone(), NAMESPACE);
        let created = machines
            .create(&PostParams::default(), &dev_machine("w1", capd_timings()))
            .await
            .unwrap();
        let fetched = fetched(Machine::test("w1").with_bootstrap_secret("w1-bootstrap"), 0);
        let view = created.view().unwrap();
        let Backend::InMemory(spec) = view.backend().clone() else {
            panic!("in-memory view expected");
        };
        let action = inmemory::reconcile_normal(&ctx, &view, &spec, &fetched)
            .await
            .unwrap();
        assert!(
            action != Action::requeue(ctx.manager.config.sync_period)
                && action != Action::await_change(),
            "{action:?}"
        );
        let written = machines.get("w1").await.unwrap();
        assert!(
            written.annotations().contains_key(VM_STARTED_ANNOTATION),
            "the VM's start survives a restart"
        );
        assert_eq!(written.spec.provider_id, "");
        let status = written.status.unwrap();
        let vm = find_condition(&status.conditions, VM_PROVISIONED_CONDITION).unwrap();
        assert_eq!(vm.reason, WAITING_FOR_STARTUP_TIMEOUT_REASON);
    }

    use crate::controllers::kinds::Backend;
    use kube::ResourceExt;
}
