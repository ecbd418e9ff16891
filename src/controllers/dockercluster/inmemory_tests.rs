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
