use serde_json::json;

use super::*;

fn cluster(value: serde_json::Value) -> Cluster {
    serde_json::from_value(value).unwrap()
}

fn with_networks(pods: &[&str], services: &[&str]) -> Cluster {
    let mut network = serde_json::Map::new();
    if !pods.is_empty() {
        network.insert("pods".into(), json!({"cidrBlocks": pods}));
    }
    if !services.is_empty() {
        network.insert("services".into(), json!({"cidrBlocks": services}));
    }
    cluster(json!({"spec": {"clusterNetwork": network}}))
}

#[test]
fn cluster_view_decodes_a_full_object_and_ignores_unknown_fields() {
    let c = cluster(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "ns"},
        "spec": {
            "paused": true,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "c1"},
            "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "c1-cp"},
            "topology": {"classRef": {"name": "quick-start"}},
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "serviceDomain": "cluster.local"}
        },
        "status": {"phase": "Provisioned", "initialization": {"infrastructureProvisioned": true}}
    }));
    assert!(c.is_paused());
    assert!(c.infrastructure_provisioned());
    assert!(!c.control_plane_initialized());
    let infra = c.spec.infrastructure_ref.clone().unwrap();
    assert_eq!(
        (infra.api_group.as_str(), infra.kind.as_str()),
        ("infrastructure.cluster.x-k8s.io", "DockerCluster")
    );
    assert_eq!(c.spec.control_plane_ref.unwrap().name, "c1-cp");
}

#[test]
fn empty_cluster_decodes_with_defaults() {
    let c = cluster(json!({"metadata": {"name": "c"}}));
    assert!(!c.is_paused());
    assert!(!c.infrastructure_provisioned());
    assert!(!c.control_plane_initialized());
    assert_eq!(c.ip_family(), Ok(IpFamily::IPv4));
}

#[test]
fn control_plane_initialized_falls_back_to_the_condition() {
    let c = cluster(json!({"status": {"conditions": [
        {"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "",
         "lastTransitionTime": "2025-01-01T00:00:00Z"}
    ]}}));
    assert!(c.control_plane_initialized());
    let c = cluster(json!({"status": {
        "initialization": {"controlPlaneInitialized": false},
        "conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]
    }}));
    assert!(
        !c.control_plane_initialized(),
        "the contract field wins over the condition"
    );
}

#[test]
fn ip_family_follows_capd_rules() {
    assert_eq!(
        with_networks(&["10.0.0.0/16"], &[]).ip_family(),
        Ok(IpFamily::IPv4)
    );
    assert_eq!(
        with_networks(&["fd00::/48"], &["fd01::/108"]).ip_family(),
        Ok(IpFamily::IPv6)
    );
    assert_eq!(
        with_networks(&["10.0.0.0/16", "fd00::/48"], &["10.96.0.0/12"]).ip_family(),
        Ok(IpFamily::Dual)
    );
    assert_eq!(
        with_networks(&["10.0.0.0/16", "fd00::/48"], &[]).ip_family(),
        Ok(IpFamily::Dual)
    );
    assert_eq!(
        with_networks(&["10.0.0.0/16"], &["fd01::/108"]).ip_family(),
        Err(CapiError::FamilyMismatch)
    );
    assert_eq!(
        with_networks(&[], &["10.96.0.0/12"]).ip_family(),
        Err(CapiError::FamilyMismatch)
    );
    assert_eq!(
        with_networks(&["10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16"], &[]).ip_family(),
        Err(CapiError::TooManyCidrs { network: "pods" })
    );
    assert_eq!(
        with_networks(&["10.0.0.0/16"], &["nonsense"]).ip_family(),
        Err(CapiError::InvalidCidr {
            network: "services",
            cidr: "nonsense".into()
        })
    );
    assert!(matches!(
        with_networks(&["10.0.0.0/40"], &[]).ip_family(),
        Err(CapiError::InvalidCidr { .. })
    ));
}

#[test]
fn machine_view_reads_what_the_controllers_need() {
    let m: Machine = serde_json::from_value(json!({
        "metadata": {"name": "m1", "labels": {"cluster.x-k8s.io/control-plane": "", "cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {
            "clusterName": "c1",
            "bootstrap": {"dataSecretName": "m1-bootstrap", "configRef": {"kind": "KubeadmConfig"}},
            "version": "v1.34.0",
            "failureDomain": "fd1",
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "m1"}
        },
        "status": {"nodeRef": {"name": "c1-m1"}, "phase": "Running"}
    }))
    .unwrap();
    assert!(m.is_control_plane());
    assert_eq!(m.spec.cluster_name, "c1");
    assert_eq!(m.bootstrap_data_secret_name(), Some("m1-bootstrap"));
    assert_eq!(m.spec.version.as_deref(), Some("v1.34.0"));
    assert_eq!(m.spec.failure_domain.as_deref(), Some("fd1"));
    assert_eq!(m.node_name(), Some("c1-m1"));

    let worker: Machine = serde_json::from_value(json!({"spec": {"bootstrap": {}}})).unwrap();
    assert!(!worker.is_control_plane());
    assert_eq!(worker.bootstrap_data_secret_name(), None);
    assert_eq!(worker.node_name(), None);
}

#[test]
fn paused_annotation_pauses_one_object() {
    let c = cluster(json!({}));
    let mut meta = ObjectMeta::default();
    assert!(!is_paused(&c, &meta));
    meta.annotations = Some([(PAUSED_ANNOTATION.to_string(), String::new())].into());
    assert!(is_paused(&c, &meta));
}

#[test]
fn views_address_the_cluster_api_core_resources() {
    assert_eq!(Cluster::api_version(&()), "cluster.x-k8s.io/v1beta2");
    assert_eq!(
        Cluster::url_path(&(), Some("ns")),
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters"
    );
    assert_eq!(
        Machine::url_path(&(), Some("ns")),
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines"
    );
    let kinds: Vec<String> = crate::api::crd::all()
        .unwrap()
        .into_iter()
        .map(|c| c.spec.names.kind)
        .collect();
    assert!(
        !kinds.iter().any(|k| k == "Cluster" || k == "Machine"),
        "views must not become CRDs: {kinds:?}"
    );
}

#[test]
fn pool_label_values_are_names_or_cores_hash_of_them() {
    assert_eq!(label_value("pool-a"), "pool-a");
    assert_eq!(label_value(""), "");
    let long = "a-machine-pool-whose-name-is-much-longer-than-sixty-three-characters-x";
    // FNV-32a of the name, base64url without padding, as core's MustFormatValue writes it.
    assert_eq!(label_value(long), "hash_2rSJpA_z");
    assert_eq!(label_value(&"a".repeat(63)), "a".repeat(63));
    assert!(label_value(&"a".repeat(64)).starts_with("hash_"));
}

#[test]
fn a_pool_machine_reads_its_bootstrap_data_and_version_from_its_machine_pool() {
    // Core 1.12's shape of a pool Machine: no bootstrap data secret, no version yet.
    let machine: Machine = serde_json::from_value(json!({
        "metadata": {"name": "pool-abc", "labels": {"cluster.x-k8s.io/pool-name": "pool"}},
        "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": ""}}
    }))
    .unwrap();
    assert_eq!(machine.bootstrap_data_secret_name(), None);
    let mut pool: MachinePool = serde_json::from_value(json!({
        "metadata": {"name": "pool"},
        "spec": {"clusterName": "c1", "template": {"spec": {
            "bootstrap": {"dataSecretName": "pool-bootstrap"},
            "version": "v1.28.4"
        }}}
    }))
    .unwrap();
    let in_pool = machine.clone().in_pool(&pool);
    assert_eq!(in_pool.bootstrap_data_secret_name(), Some("pool-bootstrap"));
    assert_eq!(in_pool.spec.version.as_deref(), Some("v1.28.4"));
    // A pool whose bootstrap provider has not written its secret yet: still nothing.
    pool.spec.template.spec.bootstrap.data_secret_name = None;
    assert_eq!(machine.in_pool(&pool).bootstrap_data_secret_name(), None);
}
