//! Plain HTTP, dry runs, raw paths (legacy watch prefix, discovery documents) and method errors.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;
use testapiserver::Options;

use crate::common::{cm, start, start_with, status};

fn get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).unwrap()
}

#[tokio::test]
async fn plain_http_serves_the_same_api() {
    let (h, client) = start_with(Options {
        https: false,
        ..Options::default()
    })
    .await;
    assert!(h.url().starts_with("http://127.0.0.1:"));
    assert!(h.ca_pem().is_none());
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("plain"))
        .await
        .unwrap();
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let (h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let before = h.resource_version().await;
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let answered = cms.create(&pp, &cm("dry")).await.unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("dry"));
    assert!(answered.metadata.uid.is_some());
    assert!(cms.get_opt("dry").await.unwrap().is_none());
    assert_eq!(h.resource_version().await, before);
}

#[tokio::test]
async fn legacy_watch_paths_and_discovery_documents_work() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("w")).await.unwrap();
    let text = client
        .request_text(get(
            "/api/v1/watch/namespaces/default/configmaps?timeoutSeconds=1",
        ))
        .await
        .unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "ConfigMap");
    assert_eq!(first["object"]["metadata"]["name"], "w");

    let version: Value = client.request(get("/version")).await.unwrap();
    assert_eq!(version["major"], "1");
    let core: Value = client.request(get("/api/v1")).await.unwrap();
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for expected in [
        "configmaps",
        "secrets",
        "namespaces",
        "namespaces/status",
        "events",
        "nodes",
        "nodes/status",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let groups: Value = client.request(get("/apis")).await.unwrap();
    let group_names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for expected in [
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
    ] {
        assert!(
            group_names.contains(&expected),
            "{expected} missing from {group_names:?}"
        );
    }
}

#[tokio::test]
async fn unsupported_methods_and_media_types_are_refused() {
    let (_h, client) = start().await;
    let put_collection = http::Request::put("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(b"{}".to_vec())
        .unwrap();
    let err = status(client.request::<Value>(put_collection).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (405, "MethodNotAllowed"));
    let protobuf = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(vec![0x6b, 0x38, 0x73, 0x00])
        .unwrap();
    let err = status(client.request::<Value>(protobuf).await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    let unknown = status(
        client
            .request::<Value>(get("/apis/nope.example.com/v1/things"))
            .await
            .unwrap_err(),
    );
    assert_eq!(unknown.code, 404);
}

#[tokio::test]
async fn tables_follow_kube_printers() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut one = cm("t");
    one.data = Some(
        [
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]
        .into(),
    );
    cms.create(&PostParams::default(), &one).await.unwrap();
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    assert_eq!(table["kind"], "Table");
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, vec!["Name", "Data", "Age"]);
    let row = &table["rows"][0];
    assert_eq!(row["cells"][0], "t");
    assert_eq!(row["cells"][1], 2);
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
}
