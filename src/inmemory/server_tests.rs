//! The fake API server over TLS, as a kube client sees it: its certificate is signed by the
//! cluster's CA (an RSA key in PKCS#1, as Cluster API makes them), discovery works, Nodes list
//! and read, pods are watched, and conflicts come back as 409.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use super::Clusters;
use super::resources;

const CA_CRT: &str = include_str!("testdata/ca.crt");
const CA_KEY: &str = include_str!("testdata/ca.key");

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn client(port: u16) -> kube::Client {
    let pem = CA_CRT
        .split("-----BEGIN CERTIFICATE-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END CERTIFICATE-----").next())
        .unwrap();
    use base64::Engine;
    let der = base64::engine::general_purpose::STANDARD
        .decode(
            pem.chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>(),
        )
        .unwrap();
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.root_cert = Some(vec![der]);
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn a_kube_client_trusting_the_cluster_ca_lists_nodes_and_watches_pods() {
    let port = free_port();
    let clusters = Clusters::new("127.0.0.1".into(), port..=port);
    let cluster = clusters.ensure("ns/c1", None).unwrap();
    let nodes = resources::find("", "v1", "nodes").unwrap();
    let pods = resources::find("", "v1", "pods").unwrap();
    cluster
        .store
        .create(
            nodes,
            "",
            super::objects::node("m1", true, "v1.35.1", "2026-01-01T00:00:00Z"),
        )
        .unwrap();
    clusters
        .start_api_server(&cluster, CA_CRT, CA_KEY)
        .await
        .unwrap();
    assert!(cluster.listening());

    let client = client(port);
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, super::server::KUBERNETES_VERSION);
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    assert!(discovery.has_group("apps"));
    assert!(discovery.has_group("rbac.authorization.k8s.io"));
    // What CAPD 1.14's fake API server added: CSIDrivers, CRDs and PodDisruptionBudgets.
    for (group, kind) in [
        ("storage.k8s.io", "CSIDriver"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("policy", "PodDisruptionBudget"),
        ("", "ServiceAccount"),
    ] {
        let found = discovery.get(group).is_some_and(|g| {
            g.recommended_resources()
                .iter()
                .any(|(r, _)| r.kind == kind)
        });
        assert!(found, "{group}/{kind} is discovered");
    }
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), "kube-system");
    budgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "coredns"}, "spec": {"minAvailable": 1}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        budgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // Core lists VolumeAttachments while a Machine's deletion waits for volumes to detach.
    let attachments: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("storage.k8s.io", "v1", "VolumeAttachment"),
            "volumeattachments",
        ),
    );
    assert!(
        attachments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let node_api: Api<Node> = Api::all(client.clone());
    let listed = node_api
        .list(&ListParams::default().labels("node-role.kubernetes.io/control-plane"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let node = node_api.get("m1").await.unwrap();
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("in-memory://m1")
    );

    // Cluster API core patches labels and taints on Nodes.
    let patched = node_api
        .patch(
            "m1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"x": "y"}},
                                     "spec": {"taints": [{"key": "t", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["x"], "y");

    // An update carrying an old resourceVersion is refused.
    let mut stale = node_api.get("m1").await.unwrap();
    stale.metadata.resource_version = Some("1".into());
    let refused = node_api
        .replace("m1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 409),
        "{refused:?}"
    );

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let version = pod_api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = pod_api
        .watch(&WatchParams::default().labels("component=etcd"), &version)
        .await
        .unwrap()
        .boxed();
    cluster
        .store
        .create(
            pods,
            "kube-system",
            super::objects::static_pod("kube-apiserver", "m1", json!({})),
        )
        .unwrap();
    cluster
        .store
        .create(
            pods,
            "kube-system",
            super::objects::static_pod("etcd", "m1", json!({})),
        )
        .unwrap();
    let event = tokio::time::timeout(std::time::Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Added(pod) => assert_eq!(pod.metadata.name.as_deref(), Some("etcd-m1")),
        other => panic!("unexpected event {other:?}"),
    }

    // Dropping the cluster closes the server: the open watch ends, new requests fail.
    clusters.remove("ns/c1");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), events.try_next())
        .await
        .expect("the watch ends when the server closes");
    assert!(matches!(ended, Ok(None) | Err(_)), "{ended:?}");
    assert!(!cluster.listening());
    let refused = tokio::time::timeout(std::time::Duration::from_secs(5), node_api.get("m1"))
        .await
        .expect("an answer, not a hang");
    assert!(refused.is_err(), "{refused:?}");
}

/// CABPK creates a joining machine's bootstrap token Secret in the workload cluster in protobuf,
/// as controller-runtime sends built-in kinds: it must be stored and read back as JSON. A kind
/// the server does not read in protobuf gets 415 naming it, and a broken body 400.
#[tokio::test]
async fn a_bootstrap_token_secret_created_in_protobuf_reads_back_as_json() {
    use kubeproto::encode::{bytes_field, entry, envelope};

    let port = free_port();
    let clusters = Clusters::new("127.0.0.1".into(), port..=port);
    let cluster = clusters.ensure("ns/c1", None).unwrap();
    clusters
        .start_api_server(&cluster, CA_CRT, CA_KEY)
        .await
        .unwrap();
    let client = client(port);

    let mut meta = Vec::new();
    bytes_field(1, b"bootstrap-token-abcdef", &mut meta);
    bytes_field(3, b"kube-system", &mut meta);
    let mut secret = Vec::new();
    bytes_field(1, &meta, &mut secret);
    bytes_field(2, &entry("token-id", b"abcdef"), &mut secret);
    bytes_field(3, b"bootstrap.kubernetes.io/token", &mut secret);
    let post = |body: Vec<u8>| {
        http::Request::post("/api/v1/namespaces/kube-system/secrets")
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .body(body)
            .unwrap()
    };
    let created: serde_json::Value = client
        .request(post(envelope("v1", "Secret", &secret)))
        .await
        .unwrap();
    assert_eq!(created["type"], "bootstrap.kubernetes.io/token");

    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), "kube-system");
    let read = secrets.get("bootstrap-token-abcdef").await.unwrap();
    assert_eq!(
        read.data.unwrap()["token-id"].0,
        b"abcdef".to_vec(),
        "the data read back is what the protobuf body held"
    );

    let refused = |e: kube::Error| match e {
        kube::Error::Api(status) => (status.code, status.reason),
        other => panic!("not an API error: {other}"),
    };
    let mut node = Vec::new();
    bytes_field(1, &meta, &mut node);
    let unsupported = client
        .request::<serde_json::Value>(post(envelope("v1", "Node", &node)))
        .await
        .unwrap_err();
    assert_eq!(refused(unsupported), (415, "UnsupportedMediaType".into()));
    let broken = client
        .request::<serde_json::Value>(post(b"k8s".to_vec()))
        .await
        .unwrap_err();
    assert_eq!(refused(broken), (400, "BadRequest".into()));
}

async fn next(
    events: &mut futures::stream::BoxStream<'static, kube::Result<WatchEvent<Node>>>,
) -> WatchEvent<Node> {
    tokio::time::timeout(std::time::Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

/// Cluster API core 1.13 (client-go 0.35, `WatchListClient` on) lists with a streaming list and
/// counts its caches synced only at the bookmark annotated `k8s.io/initial-events-end`: the
/// initial objects come as ADDED, then that bookmark at the resourceVersion they were read at,
/// then the changes after it. kube-runtime's watcher in streaming-list mode waits for the same
/// bookmark before it says `InitDone`.
#[tokio::test]
async fn a_streaming_list_sends_the_objects_then_the_initial_events_end_bookmark() {
    use kube::runtime::watcher;

    let port = free_port();
    let clusters = Clusters::new("127.0.0.1".into(), port..=port);
    let cluster = clusters.ensure("ns/c1", None).unwrap();
    let nodes = resources::find("", "v1", "nodes").unwrap();
    for name in ["m1", "m2"] {
        cluster
            .store
            .create(
                nodes,
                "",
                super::objects::node(name, false, "v1.35.1", "2026-01-01T00:00:00Z"),
            )
            .unwrap();
    }
    let read_at = cluster.store.version();
    clusters
        .start_api_server(&cluster, CA_CRT, CA_KEY)
        .await
        .unwrap();
    let client = client(port);
    let node_api: Api<Node> = Api::all(client.clone());

    let mut events = node_api
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    let mut added = Vec::new();
    for _ in 0..2 {
        match next(&mut events).await {
            WatchEvent::Added(node) => added.push(node.metadata.name.unwrap()),
            other => panic!("expected an initial ADDED event, got {other:?}"),
        }
    }
    assert_eq!(added, ["m1", "m2"]);
    match next(&mut events).await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(
                bookmark
                    .metadata
                    .annotations
                    .get("k8s.io/initial-events-end"),
                Some(&"true".to_string())
            );
            assert_eq!(bookmark.metadata.resource_version, read_at.to_string());
            assert_eq!(bookmark.types.kind, "Node");
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
    cluster
        .store
        .create(
            nodes,
            "",
            super::objects::node("m3", false, "v1.35.1", "2026-01-01T00:00:00Z"),
        )
        .unwrap();
    match next(&mut events).await {
        WatchEvent::Added(node) => assert_eq!(node.metadata.name.as_deref(), Some("m3")),
        other => panic!("expected the live ADDED event, got {other:?}"),
    }

    let mut informer = watcher(node_api, watcher::Config::default().streaming_lists()).boxed();
    let synced = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut seen = 0;
        loop {
            match informer.try_next().await.unwrap().unwrap() {
                watcher::Event::InitApply(_) => seen += 1,
                watcher::Event::InitDone => return seen,
                _ => {}
            }
        }
    })
    .await
    .expect("the streaming list ends with InitDone");
    assert_eq!(synced, 3);
}

/// kube-apiserver refuses `sendInitialEvents` on a plain list, and on a watch without
/// `resourceVersionMatch=NotOlderThan`, with 422 Invalid on `ListOptions.meta.k8s.io`.
#[tokio::test]
async fn an_illegal_streaming_list_is_refused_as_kube_apiserver_refuses_it() {
    let port = free_port();
    let clusters = Clusters::new("127.0.0.1".into(), port..=port);
    let cluster = clusters.ensure("ns/c1", None).unwrap();
    clusters
        .start_api_server(&cluster, CA_CRT, CA_KEY)
        .await
        .unwrap();
    let client = client(port);
    let refused = |query: &'static str| {
        let client = client.clone();
        async move {
            let request = http::Request::get(format!("/api/v1/nodes?{query}"))
                .body(Vec::new())
                .unwrap();
            match client.request::<serde_json::Value>(request).await {
                Err(kube::Error::Api(status)) => (status.code, status.reason, status.message),
                other => panic!("{query} was not refused: {other:?}"),
            }
        }
    };
    assert_eq!(
        refused("sendInitialEvents=true").await,
        (
            422,
            "Invalid".into(),
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".into()
        )
    );
    assert_eq!(
        refused("watch=true&sendInitialEvents=true&allowWatchBookmarks=true").await,
        (
            422,
            "Invalid".into(),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into()
        )
    );
}
