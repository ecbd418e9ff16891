use super::decide::*;
use crate::api::capi::Cluster;
use crate::api::conditions::{
    ConditionStatus, LOAD_BALANCER_AVAILABLE_CONDITION, PAUSED_CONDITION, READY_CONDITION,
    find_condition,
};
use crate::api::v1beta2::{APIEndpoint, DockerCluster, DockerClusterStatus};
use crate::controllers::fixtures::*;

/// Whether `status` differs from what the object carries (only then is it written).
fn status_changed(docker_cluster: &DockerCluster, status: &DockerClusterStatus) -> bool {
    docker_cluster.status.as_ref() != Some(status)
}

#[test]
fn an_externally_managed_cluster_is_left_alone() {
    let dc = DockerCluster::test("c1")
        .owned_by("c1")
        .externally_managed();
    assert!(matches!(
        gate(&dc.metadata, Some(&Cluster::test("c1"))),
        Gate::Skip(_)
    ));
}

#[test]
fn a_cluster_without_owner_waits_for_the_cluster_controller() {
    let dc = DockerCluster::test("c1");
    assert_eq!(
        gate(&dc.metadata, None),
        Gate::Skip("Waiting for Cluster Controller to set OwnerRef on DockerCluster")
    );
}

#[test]
fn a_deleting_cluster_without_owner_only_releases_its_finalizer() {
    let dc = DockerCluster::test("c1").with_finalizer().deleting();
    assert_eq!(gate(&dc.metadata, None), Gate::ReleaseFinalizer);
}

#[test]
fn a_paused_cluster_or_annotation_pauses() {
    let dc = DockerCluster::test("c1").owned_by("c1");
    assert_eq!(
        gate(&dc.metadata, Some(&Cluster::test("c1").paused())),
        Gate::Paused
    );
    let annotated = DockerCluster::test("c1").owned_by("c1").paused();
    assert_eq!(
        gate(&annotated.metadata, Some(&Cluster::test("c1"))),
        Gate::Paused
    );
    assert_eq!(
        gate(&dc.metadata, Some(&Cluster::test("c1"))),
        Gate::Proceed
    );
}

#[test]
fn a_deleting_cluster_whose_owner_is_gone_is_still_cleaned_up() {
    let dc = DockerCluster::test("c1")
        .owned_by("c1")
        .with_finalizer()
        .deleting();
    assert_eq!(gate(&dc.metadata, None), Gate::Proceed);
    let waiting = DockerCluster::test("c1").owned_by("c1");
    assert!(matches!(gate(&waiting.metadata, None), Gate::Skip(_)));
}

#[test]
fn the_endpoint_gets_the_load_balancer_address_and_the_default_port() {
    assert_eq!(
        endpoint_update(&APIEndpoint::default(), "172.18.0.2"),
        Some(APIEndpoint {
            host: "172.18.0.2".into(),
            port: 6443
        })
    );
    let user_set = APIEndpoint {
        host: "lb.example".into(),
        port: 7777,
    };
    assert_eq!(
        endpoint_update(&user_set, "172.18.0.2"),
        None,
        "a user-set endpoint is kept"
    );
    assert_eq!(
        endpoint_update(
            &APIEndpoint {
                host: String::new(),
                port: 7777
            },
            "fc00::2"
        ),
        Some(APIEndpoint {
            host: "fc00::2".into(),
            port: 7777
        })
    );
}

#[test]
fn an_available_load_balancer_provisions_and_copies_failure_domains() {
    let dc = DockerCluster::test("c1")
        .owned_by("c1")
        .failure_domains(&["fd1", "fd2"]);
    let status = normal_status(&dc, &LoadBalancerOutcome::Available);
    assert_eq!(status.initialization.provisioned, Some(true));
    assert_eq!(status.failure_domains, dc.spec.failure_domains);
    let ready = find_condition(&status.conditions, READY_CONDITION).unwrap();
    assert!(ready.is_true());
    assert_eq!(ready.observed_generation, Some(1));
    assert_eq!(
        find_condition(&status.conditions, PAUSED_CONDITION)
            .unwrap()
            .status,
        ConditionStatus::False
    );
    let legacy_ready = status
        .deprecated
        .v1beta1
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(legacy_ready.status, "True");
}

#[test]
fn a_failed_load_balancer_is_reported_and_provisioned_is_not_reset() {
    let mut dc = DockerCluster::test("c1").owned_by("c1");
    dc.status = Some(normal_status(&dc, &LoadBalancerOutcome::Available));
    let status = normal_status(
        &dc,
        &LoadBalancerOutcome::NotAvailable("Failed to create load balancer: boom".into()),
    );
    let lb = find_condition(&status.conditions, LOAD_BALANCER_AVAILABLE_CONDITION).unwrap();
    assert_eq!(lb.status, ConditionStatus::False);
    assert_eq!(lb.reason, "NotAvailable");
    assert_eq!(lb.message, "Failed to create load balancer: boom");
    assert_eq!(
        status.initialization.provisioned,
        Some(true),
        "provisioned is never reset (contract)"
    );
    assert!(
        !find_condition(&status.conditions, READY_CONDITION)
            .unwrap()
            .is_true()
    );
}

#[test]
fn reconciling_an_unchanged_cluster_writes_nothing() {
    let mut dc = DockerCluster::test("c1").owned_by("c1");
    dc.status = Some(normal_status(&dc, &LoadBalancerOutcome::Available));
    let again = normal_status(&dc, &LoadBalancerOutcome::Available);
    assert!(!status_changed(&dc, &again));
}

/// A DockerCluster CAPD stored in v1alpha3 (an installation upgraded since then), read through the
/// conversion the API server asks our webhook for, reconciles as one written in v1beta2: it
/// proceeds, stays provisioned, gets its failure domains in order and our conditions once.
#[test]
fn a_cluster_capd_stored_in_v1alpha3_reconciles_after_conversion() {
    let meta = DockerCluster::test("c1")
        .owned_by("c1")
        .with_finalizer()
        .metadata;
    let stored = serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
        "kind": "DockerCluster",
        "metadata": meta,
        "spec": {
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {}}
        },
        "status": {
            "ready": true,
            "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {}},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2021-06-01T00:00:00Z"}]
        }
    });
    let hub =
        crate::api::conversion::convert_object(stored, "infrastructure.cluster.x-k8s.io/v1beta2")
            .unwrap();
    let mut dc: DockerCluster = serde_json::from_value(hub).unwrap();
    assert_eq!(
        gate(&dc.metadata, Some(&Cluster::test("c1"))),
        Gate::Proceed
    );
    let status = normal_status(&dc, &LoadBalancerOutcome::Available);
    assert_eq!(status.initialization.provisioned, Some(true));
    let names: Vec<&str> = status
        .failure_domains
        .iter()
        .map(|fd| fd.name.as_str())
        .collect();
    assert_eq!(names, ["fd1", "fd2"]);
    assert!(
        find_condition(&status.conditions, READY_CONDITION)
            .unwrap()
            .is_true()
    );
    assert!(
        status_changed(&dc, &status),
        "our conditions are written once"
    );
    dc.status = Some(status);
    let again = normal_status(&dc, &LoadBalancerOutcome::Available);
    assert!(!status_changed(&dc, &again), "then nothing more");
}

#[test]
fn a_recovered_load_balancer_says_so_until_the_next_change() {
    let mut dc = DockerCluster::test("c1").owned_by("c1");
    dc.status = Some(normal_status(&dc, &LoadBalancerOutcome::Available));
    let note = "Load balancer container c1-lb was stopped; started it again";
    let recovered = normal_status(&dc, &LoadBalancerOutcome::Recovered(note.into()));
    let lb = find_condition(&recovered.conditions, LOAD_BALANCER_AVAILABLE_CONDITION).unwrap();
    assert_eq!(
        (lb.status, lb.reason.as_str(), lb.message.as_str()),
        (ConditionStatus::True, "Available", note)
    );
    dc.status = Some(recovered);
    let again = normal_status(&dc, &LoadBalancerOutcome::Available);
    assert!(
        !status_changed(&dc, &again),
        "the note stays while the load balancer keeps running"
    );
    let failed = normal_status(&dc, &LoadBalancerOutcome::NotAvailable("boom".into()));
    dc.status = Some(failed);
    let back = normal_status(&dc, &LoadBalancerOutcome::Available);
    assert_eq!(
        find_condition(&back.conditions, LOAD_BALANCER_AVAILABLE_CONDITION)
            .unwrap()
            .message,
        "",
        "a failure in between clears the old note"
    );
}

#[test]
fn deleting_shows_in_the_conditions() {
    let dc = DockerCluster::test("c1").owned_by("c1").deleting();
    let status = deleting_status(&dc);
    let lb = find_condition(&status.conditions, LOAD_BALANCER_AVAILABLE_CONDITION).unwrap();
    assert_eq!(lb.reason, "Deleting");
    assert_eq!(
        find_condition(&status.conditions, READY_CONDITION)
            .unwrap()
            .status,
        ConditionStatus::False
    );
}

#[test]
fn pausing_only_sets_the_paused_condition() {
    let dc = DockerCluster::test("c1").owned_by("c1").paused();
    let status = paused_status(&dc);
    assert_eq!(status.conditions.len(), 1);
    assert!(
        find_condition(&status.conditions, PAUSED_CONDITION)
            .unwrap()
            .is_true()
    );
    assert_eq!(status.initialization.provisioned, None);
}

// ---- scenarios with the fake runtime ------------------------------------------------------

mod scenarios {
    use super::super::infra;
    use crate::api::v1beta2::DockerCluster;
    use crate::controllers::fixtures::test_context;
    use crate::controllers::fixtures::*;
    use crate::controllers::kinds::View;
    use crate::docker::fake::Call;
    use crate::docker::network::CREATED_BY_LABEL;
    use crate::docker::node::{NodeRole, NodeSpec, create_node};
    use crate::docker::{ContainerInfo, ContainerRuntime, FakeRuntime};
    use std::net::Ipv4Addr;

    const LB_IMAGE: &str = "kindest/haproxy:v20230606-42a2262b";

    fn fake() -> FakeRuntime {
        let fake = FakeRuntime::new();
        fake.add_image(LB_IMAGE);
        fake.add_image("node:test");
        fake
    }

    #[tokio::test]
    async fn the_network_and_load_balancer_are_created_and_the_address_returned() {
        let fake = fake();
        let ctx = test_context(fake.clone());
        let dc = View::docker(DockerCluster::test("c1").owned_by("c1"));
        let ensured = infra::ensure(&ctx, &dc, "c1", None).await.unwrap();
        assert_eq!(ensured.note, None, "a first load balancer is no recovery");
        let ip = ensured.ip;
        let network = fake
            .networks()
            .into_iter()
            .find(|n| n.name == "kind")
            .unwrap();
        assert!(
            network.labels.contains_key(CREATED_BY_LABEL),
            "the provider creates its network"
        );
        let lb = fake
            .containers()
            .into_iter()
            .find(|c| c.name == "c1-lb")
            .unwrap();
        assert_eq!(lb.image, LB_IMAGE);
        assert_eq!(ip, lb.networks["kind"].ipv4.unwrap().to_string());
        assert_eq!(
            infra::ensure(&ctx, &dc, "c1", None).await.unwrap(),
            infra::Ensured { ip, note: None },
            "a running load balancer is kept"
        );
        assert_eq!(fake.containers().len(), 1);
    }

    fn lb(fake: &FakeRuntime) -> ContainerInfo {
        fake.containers()
            .into_iter()
            .find(|c| c.name == "c1-lb")
            .unwrap()
    }

    /// A DockerCluster whose load balancer was created and reported available.
    async fn provisioned(ctx: &crate::controllers::context::Context) -> View<DockerCluster> {
        let mut dc = DockerCluster::test("c1").owned_by("c1");
        let ensured = infra::ensure(ctx, &View::docker(dc.clone()), "c1", None)
            .await
            .unwrap();
        // As the reconcile writes it once the load balancer has an address.
        dc.spec.control_plane_endpoint.host = ensured.ip;
        dc.spec.control_plane_endpoint.port = 6443;
        dc.status = Some(super::normal_status(
            &dc,
            &super::LoadBalancerOutcome::Available,
        ));
        View::docker(dc)
    }

    fn haproxy_config(fake: &FakeRuntime) -> String {
        fake.file("c1-lb", "/usr/local/etc/haproxy/haproxy.cfg")
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_stopped_load_balancer_is_started_again_with_its_address_and_configuration() {
        let fake = fake();
        let ctx = test_context(fake.clone());
        let dc = provisioned(&ctx).await;
        let ip = lb(&fake).networks["kind"].ipv4.unwrap().to_string();
        fake.set_file(
            "c1-lb",
            "/usr/local/etc/haproxy/haproxy.cfg",
            b"kept config",
        );
        let before = lb(&fake);
        let calls = fake.calls().len();

        // An engine restart: every container of the cluster is stopped.
        fake.stop_container("c1-lb");
        let ensured = infra::ensure(&ctx, &dc, "c1", None).await.unwrap();
        assert_eq!(ensured.ip, ip, "the endpoint's address is kept");
        assert_eq!(
            ensured.note.as_deref(),
            Some("Load balancer container c1-lb was stopped; started it again")
        );
        let after = lb(&fake);
        assert!(after.running);
        assert_eq!(after.id, before.id, "the same container, not a new one");
        let new_calls = &fake.calls()[calls..];
        assert!(new_calls.contains(&Call::StartContainer("c1-lb".into())));
        assert!(
            !new_calls
                .iter()
                .any(|c| matches!(c, Call::RunContainer(_) | Call::DeleteContainer(_))),
            "{new_calls:?}"
        );
        assert_eq!(
            haproxy_config(&fake),
            "kept config",
            "no control plane runs yet: the configuration is left for them"
        );
    }

    #[tokio::test]
    async fn a_restarted_load_balancer_follows_control_planes_that_run_at_another_address() {
        let fake = fake();
        let ctx = test_context(fake.clone());
        let dc = provisioned(&ctx).await;
        let cp = NodeSpec::new("c1", "c1-cp1", NodeRole::ControlPlane, "node:test", "kind");
        create_node(&fake, &cp, None).await.unwrap();
        fake.set_ipv4("c1-cp1", "kind", Ipv4Addr::new(172, 18, 0, 42));
        fake.stop_container("c1-lb");
        infra::ensure(&ctx, &dc, "c1", None).await.unwrap();
        let config = haproxy_config(&fake);
        assert!(
            config.contains("server c1-cp1 172.18.0.42:6443"),
            "backends re-applied at the current address: {config}"
        );
    }

    #[tokio::test]
    async fn a_vanished_load_balancer_is_created_again() {
        let fake = fake();
        let ctx = test_context(fake.clone());
        let dc = provisioned(&ctx).await;
        let old_id = lb(&fake).id;
        let (old_ip, old_port) = (lb(&fake).networks["kind"], lb(&fake).host_port(6443));
        fake.delete_container("c1-lb").await.unwrap();
        let ensured = infra::ensure(&ctx, &dc, "c1", None).await.unwrap();
        assert_ne!(lb(&fake).id, old_id);
        assert_eq!(
            ensured.note.as_deref(),
            Some("Load balancer container c1-lb was missing; created it again")
        );
        assert_eq!(
            lb(&fake).networks["kind"],
            old_ip,
            "the same pinned address"
        );
        assert_eq!(
            lb(&fake).host_port(6443),
            old_port,
            "the same pinned host port"
        );
    }

    #[tokio::test]
    async fn a_stopped_load_balancer_whose_host_port_was_taken_comes_back_on_the_next_one() {
        use crate::docker::RuntimeError;
        use crate::docker::fake::Op;
        use crate::docker::pinning::{PINNED_PORTS, pinned_host_port};

        let fake = fake();
        let ctx = test_context(fake.clone());
        let dc = provisioned(&ctx).await;
        let before = lb(&fake);
        let old_port = before.host_port(6443).unwrap();
        assert!(PINNED_PORTS.contains(&old_port), "{old_port}");

        // While it was stopped, something else bound its host port: the engine refuses to start
        // it, and to start a new container asking for the same port.
        let taken = || {
            RuntimeError::from_status(
                "start container c1-lb",
                500,
                format!(
                    "driver failed programming external connectivity on endpoint c1-lb: Bind for 127.0.0.1:{old_port} failed: port is already allocated"
                ),
            )
        };
        fake.stop_container("c1-lb");
        fake.fail_next(Op::StartContainer, taken());
        fake.fail_next(Op::RunContainer, taken());
        let ensured = infra::ensure(&ctx, &dc, "c1", None).await.unwrap();

        let after = lb(&fake);
        assert!(after.running);
        assert_ne!(after.id, before.id, "a new container");
        let new_port = pinned_host_port("c1-lb", 6443, 1);
        assert_eq!(after.host_port(6443), Some(new_port));
        assert_eq!(
            after.networks["kind"], before.networks["kind"],
            "the same address"
        );
        assert_eq!(
            ensured.ip,
            before.networks["kind"].ipv4.unwrap().to_string()
        );
        assert_eq!(
            ensured.note,
            Some(format!(
                "Load balancer container c1-lb was stopped and its host port is taken; created it again with host port {new_port}"
            ))
        );
    }

    #[tokio::test]
    async fn deletion_removes_the_load_balancer_and_our_unused_network_only() {
        let fake = fake();
        let ctx = test_context(fake.clone());
        let dc = View::docker(DockerCluster::test("c1").owned_by("c1"));
        infra::ensure(&ctx, &dc, "c1", None).await.unwrap();
        infra::delete(&ctx, &dc, "c1").await.unwrap();
        assert!(fake.containers().is_empty());
        assert!(
            fake.inspect_network("kind").await.unwrap().is_none(),
            "our network, unused, is removed"
        );

        let foreign = FakeRuntime::new();
        foreign.add_image(LB_IMAGE);
        foreign.add_network(crate::docker::NetworkInfo {
            id: "kind-id".into(),
            name: "kind".into(),
            driver: "bridge".into(),
            subnets: vec!["172.30.0.0/16".parse().unwrap()],
            ..Default::default()
        });
        let ctx = test_context(foreign.clone());
        infra::ensure(&ctx, &dc, "c1", None).await.unwrap();
        infra::delete(&ctx, &dc, "c1").await.unwrap();
        assert!(
            foreign.inspect_network("kind").await.unwrap().is_some(),
            "a network created by someone else (kind) is kept"
        );
    }

    #[test]
    fn only_an_ip_endpoint_that_differs_counts_as_moved() {
        assert!(infra::endpoint_moved("172.18.0.2", "172.18.0.3"));
        assert!(!infra::endpoint_moved("172.18.0.2", "172.18.0.2"));
        assert!(!infra::endpoint_moved("lb.example.com", "172.18.0.3"));
    }

    /// A pass may start before the watch delivered the previous pass's status. Computed from
    /// that stale cache, the kept `LoadBalancerAvailable` message was the one before the recovery,
    /// and it was written back over the recovery's note for good (CI saw it once, under load).
    #[tokio::test]
    async fn a_recovery_note_survives_a_pass_over_a_cache_that_has_not_seen_it() {
        use crate::api::conditions::{LOAD_BALANCER_AVAILABLE_CONDITION, find_condition};
        use crate::controllers::fixtures::{NAMESPACE, test_api_server_serving, test_context_on};
        use kube::api::{Api, PostParams};

        let (_server, client) =
            test_api_server_serving::<DockerCluster>(crate::api::crd::docker_cluster().unwrap())
                .await;
        let api: Api<DockerCluster> = Api::namespaced(client.clone(), NAMESPACE);
        let fake = fake();
        let ctx = test_context_on(fake.clone(), client);
        // Without an owner: the test API server's garbage collector removes objects whose owner
        // is missing, and this pass is given the cluster's name.
        api.create(&PostParams::default(), &DockerCluster::test("c1"))
            .await
            .unwrap();
        let message = |dc: &DockerCluster| {
            find_condition(
                &dc.status.as_ref().unwrap().conditions,
                LOAD_BALANCER_AVAILABLE_CONDITION,
            )
            .map(|c| (c.status, c.message.clone()))
        };

        let created = View::docker(api.get("c1").await.unwrap());
        super::super::reconcile_normal(&ctx, &created, "c1", None)
            .await
            .unwrap();
        // The cache from now on: provisioned, its load balancer available, no recovery yet.
        let cached = View::docker(api.get("c1").await.unwrap());
        let recovered = "Load balancer container c1-lb was stopped; started it again".to_string();

        fake.stop_container("c1-lb");
        super::super::reconcile_normal(&ctx, &cached, "c1", None)
            .await
            .unwrap();
        let after_recovery = message(&api.get("c1").await.unwrap());
        assert_eq!(after_recovery.as_ref().map(|(_, m)| m), Some(&recovered));

        // The next pass, still from the cache that has not seen that write.
        super::super::reconcile_normal(&ctx, &cached, "c1", None)
            .await
            .unwrap();
        assert_eq!(
            message(&api.get("c1").await.unwrap()),
            after_recovery,
            "the recovery note stays while the load balancer keeps running"
        );
    }
}
