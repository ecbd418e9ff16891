//! The in-memory backend of DevClusters: a port reserved in order, the endpoint set to the
//! manager's address and that port, the status provisioned; deletion frees the port.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, PostParams};

use super::inmemory;
use crate::api::CLUSTER_NAME_LABEL;
use crate::api::conditions::{READY_CONDITION, find_condition};
use crate::api::v1beta2::{
    DevCluster, DevClusterBackendSpec, DevClusterSpec, InMemoryClusterBackendSpec,
};
use crate::controllers::fixtures::*;
use crate::controllers::kinds::{Backend, ServedKind};
use crate::docker::FakeRuntime;
use crate::inmemory::Clusters;

async fn api() -> (testapiserver::Handle, kube::Client) {
    test_api_server_serving::<DevCluster>(crate::api::crd::dev_cluster().unwrap()).await
}

fn dev_cluster(name: &str) -> DevCluster {
    let mut object = DevCluster::new(
        name,
        DevClusterSpec {
            control_plane_endpoint: Default::default(),
            backend: DevClusterBackendSpec {
                docker: None,
                in_memory: Some(InMemoryClusterBackendSpec {}),
            },
        },
    );
    object.metadata.namespace = Some(NAMESPACE.into());
    object.metadata.labels = Some(BTreeMap::from([(CLUSTER_NAME_LABEL.into(), name.into())]));
    object
}

#[tokio::test]
async fn an_in_memory_cluster_gets_the_next_port_as_its_endpoint_and_frees_it_when_deleted() {
    let (_server, client) = api().await;
    let mut ctx = test_context_on(FakeRuntime::new(), client.clone());
    let ports = crate::inmemory::free_ports(2);
    let (first, second) = (*ports.start(), *ports.end());
    ctx.in_memory = Arc::new(Clusters::new("10.1.2.3".into(), ports));
    let api: Api<DevCluster> = Api::namespaced(client.clone(), NAMESPACE);
    for name in ["c1", "c2"] {
        let created = api
            .create(&PostParams::default(), &dev_cluster(name))
            .await
            .unwrap();
        let view = created.view().unwrap();
        assert!(matches!(view.backend(), Backend::InMemory(_)));
        inmemory::reconcile_normal(&ctx, &view, name).await.unwrap();
    }
    let c2 = api.get("c2").await.unwrap();
    assert_eq!(c2.spec.control_plane_endpoint.host, "10.1.2.3");
    assert_eq!(
        c2.spec.control_plane_endpoint.port,
        i32::from(second),
        "handed out in order"
    );
    let status = c2.status.clone().unwrap();
    assert_eq!(status.initialization.provisioned, Some(true));
    assert!(find_condition(&status.conditions, READY_CONDITION).is_some_and(|c| c.is_true()));

    // A pass over an unchanged cluster writes nothing.
    let version = c2.metadata.resource_version.clone();
    inmemory::reconcile_normal(&ctx, &c2.view().unwrap(), "c2")
        .await
        .unwrap();
    assert_eq!(
        api.get("c2").await.unwrap().metadata.resource_version,
        version
    );

    let c1 = api.get("c1").await.unwrap();
    inmemory::reconcile_delete(&ctx, &c1.view().unwrap(), "c1")
        .await
        .unwrap();
    assert!(ctx.in_memory.get("default/c1").is_none());
    assert_eq!(
        ctx.in_memory.ensure("default/c3", None).unwrap().port,
        first,
        "the port is free again"
    );
}

/// After a restart on another address (a new pod IP), the endpoint follows the manager, and the
/// `<cluster>-kubeconfig` Secret core wrote from the old one is rewritten to it, as CAPD 1.14
/// does; its other clusters, users and contexts stay as they were.
#[tokio::test]
async fn a_new_manager_address_moves_the_endpoint_and_the_kubeconfig_server() {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    let (_server, client) = api().await;
    let mut ctx = test_context_on(FakeRuntime::new(), client.clone());
    let ports = crate::inmemory::free_ports(1);
    let port = *ports.start();
    ctx.in_memory = Arc::new(Clusters::new("10.0.0.9".into(), ports));
    let mut before = dev_cluster("c1");
    before.spec.control_plane_endpoint.host = "10.0.0.1".into();
    before.spec.control_plane_endpoint.port = i32::from(port);
    let api: Api<DevCluster> = Api::namespaced(client.clone(), NAMESPACE);
    let created = api.create(&PostParams::default(), &before).await.unwrap();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n    certificate-authority-data: Q0E=\n    server: https://10.0.0.1:{port}\n- name: other\n  cluster:\n    server: https://other:6443\ncontexts:\n- name: c1-admin@c1\n  context:\n    cluster: c1\n    user: c1-admin\ncurrent-context: c1-admin@c1\nusers:\n- name: c1-admin\n  user:\n    token: t\n"
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret = Secret {
        metadata: kube::core::ObjectMeta {
            name: Some("c1-kubeconfig".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "value".into(),
            ByteString(kubeconfig.into_bytes()),
        )])),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    inmemory::reconcile_normal(&ctx, &created.view().unwrap(), "c1")
        .await
        .unwrap();

    let after = api.get("c1").await.unwrap();
    assert_eq!(after.spec.control_plane_endpoint.host, "10.0.0.9");
    assert_eq!(after.spec.control_plane_endpoint.port, i32::from(port));
    let data = secrets.get("c1-kubeconfig").await.unwrap().data.unwrap();
    let config: serde_json::Value =
        serde_saphyr::from_str(std::str::from_utf8(&data["value"].0).unwrap()).unwrap();
    assert_eq!(
        config["clusters"][0]["cluster"]["server"],
        format!("https://10.0.0.9:{port}")
    );
    assert_eq!(
        config["clusters"][0]["cluster"]["certificate-authority-data"],
        "Q0E="
    );
    assert_eq!(
        config["clusters"][1]["cluster"]["server"],
        "https://other:6443"
    );
    assert_eq!(config["users"][0]["user"]["token"], "t");
    assert_eq!(config["current-context"], "c1-admin@c1");
}

#[test]
fn a_kubeconfig_without_the_clusters_entry_is_an_error_and_a_current_one_is_left_alone() {
    let yaml = "clusters:\n- name: c1\n  cluster:\n    server: https://h:1\n";
    assert_eq!(inmemory::with_server(yaml, "c1", "https://h:1"), Ok(None));
    assert!(
        inmemory::with_server(yaml, "c2", "https://h:1")
            .unwrap_err()
            .contains("no cluster entry \"c2\"")
    );
}
