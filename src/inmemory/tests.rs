//! The store, selectors and patches of the fake clusters, without I/O.

use serde_json::{Value, json};

use super::objects;
use super::patch;
use super::resources::{self, ResourceType};
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{EventType, Filter, Store, StoreError};
use super::{Clusters, InMemoryError};
use watchlist::Start;

fn nodes() -> &'static ResourceType {
    resources::find("", "v1", "nodes").unwrap()
}

fn pods() -> &'static ResourceType {
    resources::find("", "v1", "pods").unwrap()
}

fn pod(name: &str, node: &str, component: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"component": component, "tier": "control-plane"}},
           "spec": {"nodeName": node}})
}

fn version(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn an_update_with_a_stale_resource_version_is_a_conflict() {
    let store = Store::new();
    let created = store
        .create(nodes(), "", json!({"metadata": {"name": "n1"}}))
        .unwrap();
    let mut first = created.clone();
    first["metadata"]["labels"] = json!({"a": "1"});
    let updated = store.update(nodes(), "", "n1", first).unwrap();
    assert_ne!(version(&updated), version(&created));

    let mut stale = created;
    stale["metadata"]["labels"] = json!({"b": "2"});
    let refused = store.update(nodes(), "", "n1", stale).unwrap_err();
    assert!(matches!(refused, StoreError::Conflict(_)));
    assert_eq!(refused.code(), 409);
    assert_eq!(
        store
            .create(nodes(), "", json!({"metadata": {"name": "n1"}}))
            .unwrap_err()
            .code(),
        409
    );
}

#[test]
fn an_update_that_changes_nothing_keeps_the_resource_version() {
    let store = Store::new();
    let created = store
        .create(nodes(), "", json!({"metadata": {"name": "n1"}}))
        .unwrap();
    let again = store.update(nodes(), "", "n1", created.clone()).unwrap();
    assert_eq!(version(&again), version(&created));
}

#[test]
fn lists_filter_by_namespace_labels_and_node_name() {
    let store = Store::new();
    store
        .create(pods(), "kube-system", pod("etcd-m1", "m1", "etcd"))
        .unwrap();
    store
        .create(
            pods(),
            "kube-system",
            pod("kube-apiserver-m1", "m1", "kube-apiserver"),
        )
        .unwrap();
    store
        .create(pods(), "kube-system", pod("etcd-m2", "m2", "etcd"))
        .unwrap();
    store
        .create(pods(), "default", pod("etcd-x", "m1", "etcd"))
        .unwrap();
    let filter = Filter {
        namespace: Some("kube-system".into()),
        labels: LabelSelector::parse("component=etcd,tier in (control-plane)").unwrap(),
        fields: FieldSelector::parse("spec.nodeName=m1").unwrap(),
    };
    let (items, _) = store.list(pods(), &filter);
    let names: Vec<&str> = items
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["etcd-m1"]);
    let all = store.list(pods(), &Filter::default()).0;
    assert_eq!(all.len(), 4);
    let not_etcd = Filter {
        labels: LabelSelector::parse("component!=etcd,!missing").unwrap(),
        ..Default::default()
    };
    assert_eq!(store.list(pods(), &not_etcd).0.len(), 1);
    assert!(LabelSelector::parse("a in b").is_err());
}

#[test]
fn a_delete_waits_for_the_finalizers_to_go() {
    let store = Store::new();
    store
        .create(
            nodes(),
            "",
            json!({"metadata": {"name": "n1", "finalizers": ["keep"]}}),
        )
        .unwrap();
    let marked = store.delete(nodes(), "", "n1").unwrap();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert!(store.get(nodes(), "", "n1").is_ok());

    let mut released = store.get(nodes(), "", "n1").unwrap();
    released["metadata"]["finalizers"] = json!([]);
    store.update(nodes(), "", "n1", released).unwrap();
    assert!(matches!(
        store.get(nodes(), "", "n1"),
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_watch_replays_from_its_resource_version_then_follows() {
    let store = Store::new();
    let first = store
        .create(nodes(), "", json!({"metadata": {"name": "n1"}}))
        .unwrap();
    store
        .create(nodes(), "", json!({"metadata": {"name": "n2"}}))
        .unwrap();
    let since: u64 = version(&first).parse().unwrap();
    let mut subscription = store.watch(nodes(), |_| Ok(Start::After(since))).unwrap();
    let replayed: Vec<&str> = subscription
        .backlog
        .iter()
        .map(|c| c.object["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(replayed, ["n2"]);

    store.delete(nodes(), "", "n1").unwrap();
    let change = subscription.live.recv().await.unwrap();
    assert_eq!(change.kind, EventType::Deleted);
    assert_eq!(change.object["metadata"]["name"], "n1");

    let snapshot = store
        .watch(nodes(), |_| Ok(Start::Snapshot { end_bookmark: true }))
        .unwrap();
    assert_eq!(snapshot.backlog.len(), 1, "n2 as ADDED");
    assert_eq!(snapshot.backlog[0].kind, EventType::Added);
    assert_eq!(snapshot.end_bookmark, Some(store.version()));
}

#[test]
fn a_strategic_merge_patch_merges_taints_by_key_and_replaces_other_lists() {
    let mut node = json!({
        "metadata": {"labels": {"a": "1"}, "finalizers": ["f1"]},
        "spec": {
            "taints": [{"key": "t1", "effect": "NoSchedule"}, {"key": "t2", "effect": "NoSchedule"}],
            "podCIDRs": ["10.0.0.0/24"],
        },
    });
    patch::strategic(
        &mut node,
        &json!({
            "metadata": {"labels": {"b": "2", "a": null}, "finalizers": ["f2"]},
            "spec": {
                "providerID": "in-memory://m1",
                "taints": [{"key": "t1", "$patch": "delete"}, {"key": "t3", "effect": "NoExecute"}],
                "podCIDRs": ["10.0.1.0/24"],
            },
            "$setElementOrder/taints": [{"key": "t2"}],
        }),
    );
    assert_eq!(node["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(node["metadata"]["finalizers"], json!(["f1", "f2"]));
    assert_eq!(node["spec"]["providerID"], "in-memory://m1");
    let keys: Vec<&str> = node["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["t2", "t3"]);
    assert_eq!(node["spec"]["podCIDRs"], json!(["10.0.1.0/24"]));
    assert!(node.get("$setElementOrder/taints").is_none());
}

#[test]
fn a_merge_patch_through_the_store_checks_a_resource_version_it_carries() {
    let store = Store::new();
    store
        .create(nodes(), "", json!({"metadata": {"name": "n1"}}))
        .unwrap();
    let patched = store
        .patch(
            nodes(),
            "",
            "n1",
            &json!({"metadata": {"annotations": {"x": "y"}}}),
            patch::merge,
        )
        .unwrap();
    assert_eq!(patched["metadata"]["annotations"]["x"], "y");
    let stale = store.patch(
        nodes(),
        "",
        "n1",
        &json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}),
        patch::merge,
    );
    assert!(matches!(stale, Err(StoreError::Conflict(_))));
}

#[test]
fn ports_are_handed_out_in_order_kept_and_freed() {
    let ports = super::free_ports(2);
    let (first, second) = (*ports.start(), *ports.end());
    let clusters = Clusters::new("127.0.0.1".into(), ports.clone());
    let a = clusters.ensure("ns/a", None).unwrap();
    let b = clusters.ensure("ns/b", None).unwrap();
    assert_eq!((a.port, b.port), (first, second));
    assert_eq!(clusters.ensure("ns/a", None).unwrap().port, first);
    assert!(matches!(
        clusters.ensure("ns/c", None),
        Err(InMemoryError::NoFreePort { .. })
    ));
    clusters.remove("ns/a");
    assert_eq!(clusters.ensure("ns/c", None).unwrap().port, first);
    // After a restart a cluster asks for the port its endpoint names.
    let restarted = Clusters::new("127.0.0.1".into(), ports);
    assert_eq!(restarted.ensure("ns/b", Some(second)).unwrap().port, second);
}

#[test]
fn a_port_another_process_listens_on_is_skipped() {
    // Two neighbouring ports, the first held by a listener this cluster registry does not own.
    let (held, port) = (0..20)
        .find_map(|_| {
            let held = std::net::TcpListener::bind("0.0.0.0:0").ok()?;
            let port = held.local_addr().ok()?.port();
            let next = port.checked_add(1)?;
            std::net::TcpListener::bind(("0.0.0.0", next)).ok()?;
            Some((held, port))
        })
        .expect("two neighbouring free ports");
    let clusters = Clusters::new("127.0.0.1".into(), port..=port + 1);
    assert_eq!(clusters.ensure("ns/a", None).unwrap().port, port + 1);
    assert!(
        matches!(
            clusters.ensure("ns/b", None),
            Err(InMemoryError::NoFreePort { .. })
        ),
        "the held port is not handed out"
    );
    drop(held);
    assert_eq!(clusters.ensure("ns/b", None).unwrap().port, port);
}

#[test]
fn a_new_cluster_has_the_three_namespaces() {
    let clusters = Clusters::new("127.0.0.1".into(), super::free_ports(1));
    let cluster = clusters.ensure("ns/a", None).unwrap();
    let namespaces = resources::find("", "v1", "namespaces").unwrap();
    let (items, _) = cluster.store.list(namespaces, &Filter::default());
    let mut names: Vec<&str> = items
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["default", "kube-public", "kube-system"]);
}

#[test]
fn a_watch_from_a_version_the_history_no_longer_holds_is_expired() {
    let store = Store::new();
    let first = store
        .create(nodes(), "", json!({"metadata": {"name": "n0"}}))
        .unwrap();
    for _ in 0..4096 {
        store
            .patch(
                nodes(),
                "",
                "n0",
                &json!({"metadata": {"labels": {"x": version(&first)}}}),
                patch::merge,
            )
            .ok();
        store
            .patch(
                nodes(),
                "",
                "n0",
                &json!({"metadata": {"labels": {"x": "y"}}}),
                patch::merge,
            )
            .ok();
    }
    let since: u64 = version(&first).parse().unwrap();
    let refused = store
        .watch(nodes(), |_| Ok(Start::After(since)))
        .unwrap_err();
    assert_eq!((refused.code, refused.reason), (410, "Expired"));
    let current = store.version();
    assert!(store.watch(nodes(), |_| Ok(Start::After(current))).is_ok());
}

#[test]
fn a_control_plane_node_is_tainted_and_every_node_runs_the_machines_version() {
    let control_plane = objects::node("cp1", true, "v1.35.1", "2026-01-01T00:00:00Z");
    assert_eq!(
        control_plane["spec"]["taints"],
        json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    );
    assert_eq!(
        control_plane["status"]["nodeInfo"]["kubeletVersion"],
        "v1.35.1"
    );
    let worker = objects::node("w1", false, "v1.34.2", "2026-01-01T00:00:00Z");
    assert!(worker["spec"]["taints"].is_null());
    assert_eq!(worker["status"]["nodeInfo"]["kubeletVersion"], "v1.34.2");
}

#[test]
fn kube_proxys_image_tag_is_the_version_made_a_valid_tag() {
    assert_eq!(objects::oci_tag("v1.35.0+build.1"), "v1.35.0_build.1");
    assert_eq!(objects::oci_tag("v1.34.0-rc.1"), "v1.34.0-rc.1");
    let objects = objects::kubeadm_objects("v1.35.0+build.1");
    let image = objects
        .iter()
        .find(|(plural, _)| *plural == "daemonsets")
        .map(|(_, ds)| ds["spec"]["template"]["spec"]["containers"][0]["image"].clone());
    assert_eq!(
        image,
        Some(json!("registry.k8s.io/kube-proxy:v1.35.0_build.1"))
    );
}
