#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::objects::{MAX_RELISTS, Walk};
use super::*;

const CRD: &str = "widgets.example.com";

async fn test_api_server() -> (testapiserver::Handle, kube::Client) {
    let server = testapiserver::TestApiServer::start(Default::default())
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(server.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    (server, kube::Client::try_from(config).unwrap())
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        ..ObjectMeta::default()
    }
}

fn gone() -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code: 410,
        reason: "Expired".into(),
        ..Default::default()
    }))
}

fn names(items: &[ObjectMeta]) -> Vec<String> {
    items.iter().filter_map(|m| m.name.clone()).collect()
}

#[test]
fn an_expired_continue_token_lists_again_and_skips_what_was_handed_out() {
    let mut walk = Walk::default();
    assert_eq!(walk.next_request(), Some(None));
    let first = walk
        .received(
            Ok((vec![meta("a"), meta("b")], Some("t1".into()))),
            "Widget",
        )
        .unwrap();
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(walk.next_request(), Some(Some("t1".into())));
    assert!(walk.received(Err(gone()), "Widget").unwrap().is_empty());
    assert_eq!(walk.next_request(), Some(None), "from the first page again");
    let again = walk
        .received(
            Ok((vec![meta("a"), meta("b")], Some("t2".into()))),
            "Widget",
        )
        .unwrap();
    assert!(again.is_empty(), "a and b were handed out already");
    let last = walk
        .received(Ok((vec![meta("c")], None)), "Widget")
        .unwrap();
    assert_eq!(names(&last), ["c"]);
    assert_eq!(walk.next_request(), None);
    assert_eq!((walk.pages, walk.relists), (3, 1));
}

#[test]
fn a_list_that_keeps_expiring_or_fails_first_is_an_error() {
    let mut walk = Walk::default();
    assert!(
        walk.received(Err(gone()), "Widget").is_err(),
        "no token: not an expired page"
    );
    let mut walk = Walk::default();
    for _ in 0..MAX_RELISTS {
        walk.received(Ok((vec![meta("a")], Some("t".into()))), "Widget")
            .unwrap();
        walk.received(Err(gone()), "Widget").unwrap();
    }
    walk.received(Ok((vec![meta("a")], Some("t".into()))), "Widget")
        .unwrap();
    assert!(walk.received(Err(gone()), "Widget").is_err());
}

#[test]
fn phases_parse_as_cluster_api_names_them() {
    assert_eq!(
        "StorageVersionMigration".parse::<Phase>(),
        Ok(Phase::StorageVersionMigration)
    );
    assert_eq!(
        "CleanupManagedFields".parse::<Phase>(),
        Ok(Phase::CleanupManagedFields)
    );
    assert!("All".parse::<Phase>().is_err());
    let phases = Phases::without(&[Phase::CleanupManagedFields]);
    assert!(phases.runs(Phase::StorageVersionMigration));
    assert!(!phases.runs(Phase::CleanupManagedFields));
    assert!(Phases::without(&Phase::ALL).is_empty());
}

fn version(name: &str, storage: bool, status: bool) -> CustomResourceDefinitionVersion {
    let mut v = json!({
        "name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }}},
    });
    if status {
        v["subresources"] = json!({"status": {}});
    }
    serde_json::from_value(v).unwrap()
}

fn resource(version: &str) -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: version.into(),
        api_version: format!("example.com/{version}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

fn widgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &resource(version))
}

/// A server with the Widget CRD at v1 alone and `count` widgets stored at v1, applied by
/// `old-client` (managedFields of v1).
async fn server_with_widgets(count: usize, status: bool) -> (testapiserver::Handle, kube::Client) {
    let (server, client) = test_api_server().await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [version("v1", true, status)]},
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let v1 = widgets(&client, "v1");
    for _ in 0..100 {
        if v1.list(&ListParams::default()).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..count {
        let body = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                          "metadata": {"name": format!("w{i}")}, "spec": {"size": i}});
        v1.patch(
            &format!("w{i}"),
            &PatchParams::apply("old-client"),
            &Patch::Apply(body),
        )
        .await
        .unwrap();
    }
    (server, client)
}

/// Edits the CRD's versions and replaces it.
async fn edit_crd(
    client: &kube::Client,
    edit: impl FnOnce(&mut Vec<CustomResourceDefinitionVersion>),
) -> Result<CustomResourceDefinition, kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crds.get(CRD).await.unwrap();
    edit(&mut crd.spec.versions);
    crds.replace(CRD, &PostParams::default(), &crd).await
}

/// v2 added as the storage version, v1 still served (as a release that adds a version).
async fn store_v2(client: &kube::Client, status: bool) {
    edit_crd(client, |versions| {
        versions[0].storage = false;
        versions.push(version("v2", true, status));
    })
    .await
    .unwrap();
}

async fn drop_v1(client: &kube::Client) -> Result<CustomResourceDefinition, kube::Error> {
    edit_crd(client, |versions| versions.retain(|v| v.name != "v1")).await
}

async fn crd(client: &kube::Client) -> CustomResourceDefinition {
    Api::<CustomResourceDefinition>::all(client.clone())
        .get(CRD)
        .await
        .unwrap()
}

fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default()
}

fn observed(crd: &CustomResourceDefinition) -> Option<String> {
    crd.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OBSERVED_GENERATION_ANNOTATION).cloned())
}

fn migrator(client: &kube::Client, skipped: &[Phase]) -> Migrator {
    Migrator::new(
        client.clone(),
        vec![CRD.into()],
        Phases::without(skipped),
        Metrics::new(),
    )
    .with_page_size(2)
}

async fn uids(client: &kube::Client, version: &str) -> Vec<(String, String)> {
    let mut uids: Vec<(String, String)> = widgets(client, version)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|w| (w.metadata.name.unwrap(), w.metadata.uid.unwrap()))
        .collect();
    uids.sort();
    uids
}

fn managed_versions(object: &DynamicObject) -> Vec<String> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|e| e.api_version.clone())
        .collect()
}

/// The life of a version, as in Cluster API's test of its migrator: v1 stored, v2 added as the
/// storage version, the migrator run, v1 unserved then removed.
async fn lifecycle(status: bool) {
    let (server, client) = server_with_widgets(5, status).await;
    let before = uids(&client, "v1").await;
    store_v2(&client, status).await;
    assert_eq!(stored_versions(&crd(&client).await), ["v1", "v2"]);

    let metrics = Metrics::new();
    let migrator = Migrator::new(
        client.clone(),
        vec![CRD.into(), "absent.example.com".into()],
        Phases::without(&[]),
        metrics.clone(),
    )
    .with_page_size(2);
    let results = migrator.migrate_all().await;
    let outcome = results[0].1.as_ref().unwrap();
    assert_eq!(outcome.rewritten, 5, "every object, in three pages");
    assert_eq!(outcome.cleaned, 0, "v1 is still served: its entries stay");
    assert!(results[1].1.as_ref().unwrap().absent);
    let live = crd(&client).await;
    assert_eq!(stored_versions(&live), ["v2"]);
    assert_eq!(observed(&live), Some("2".into()));
    assert_eq!(uids(&client, "v2").await, before, "the same objects");
    let text = metrics.render();
    assert!(
        text.contains(r#"capd_crd_stored_versions{crd="widgets.example.com"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"capd_crd_migration_objects_total{crd="widgets.example.com",phase="StorageVersionMigration"} 5"#),
        "{text}"
    );

    // Nothing changed: the annotation says so, nothing is read or written.
    server.reset_write_counts();
    assert!(migrator.migrate(CRD).await.unwrap().up_to_date);
    assert_eq!(server.write_total(), 0);

    // v1 removed: accepted now, and the objects' v1 managedFields go.
    drop_v1(&client).await.unwrap();
    let outcome = migrator.migrate(CRD).await.unwrap();
    assert_eq!((outcome.rewritten, outcome.cleaned), (0, 5));
    let w0 = widgets(&client, "v2").get("w0").await.unwrap();
    assert_eq!(managed_versions(&w0), ["example.com/v2"]);
    assert_eq!(w0.data["spec"]["size"], 0);
    // The entry left for old-client lets it apply at v2 and keep its fields.
    let body = json!({"apiVersion": "example.com/v2", "kind": "Widget",
                      "metadata": {"name": "w0"}, "spec": {"size": 10}});
    let applied = widgets(&client, "v2")
        .patch("w0", &PatchParams::apply("old-client"), &Patch::Apply(body))
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["size"], 10);
    assert_eq!(observed(&crd(&client).await), Some("3".into()));
}

#[tokio::test]
async fn migrates_through_the_status_subresource() {
    lifecycle(true).await;
}

#[tokio::test]
async fn migrates_kinds_without_status() {
    lifecycle(false).await;
}

#[tokio::test]
async fn without_the_storage_version_phase_the_old_version_cannot_be_dropped() {
    let (_server, client) = server_with_widgets(3, true).await;
    store_v2(&client, true).await;
    let outcome = migrator(&client, &[Phase::StorageVersionMigration])
        .migrate(CRD)
        .await
        .unwrap();
    assert_eq!(outcome.rewritten, 0);
    let live = crd(&client).await;
    assert_eq!(stored_versions(&live), ["v1", "v2"]);
    assert_eq!(observed(&live), Some("2".into()));
    let kube::Error::Api(status) = drop_v1(&client).await.unwrap_err() else {
        panic!("not an API error")
    };
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains(r#"status.storedVersions[0]: Invalid value: "v1""#),
        "{}",
        status.message
    );
}

/// Two migrators at once (two managers without leader election, or a new one starting while the
/// old one still migrates) both finish, and the result is the same as with one.
#[tokio::test]
async fn two_migrators_at_once_agree() {
    let (_server, client) = server_with_widgets(40, true).await;
    let before = uids(&client, "v1").await;
    store_v2(&client, true).await;
    let (a, b) = (migrator(&client, &[]), migrator(&client, &[]));
    let (ra, rb) = tokio::join!(a.migrate(CRD), b.migrate(CRD));
    ra.unwrap();
    rb.unwrap();
    assert_eq!(stored_versions(&crd(&client).await), ["v2"]);
    assert_eq!(uids(&client, "v2").await, before);
    drop_v1(&client).await.unwrap();
}

/// A migrator stopped in the middle (the manager restarted) leaves storedVersions as they were;
/// the next one finishes the job.
#[tokio::test]
async fn a_migration_stopped_in_the_middle_is_finished_by_the_next() {
    let (server, client) = server_with_widgets(30, true).await;
    store_v2(&client, true).await;
    server.reset_write_counts();
    let first = migrator(&client, &[]);
    let running = tokio::spawn(async move { first.migrate(CRD).await });
    while server.write_total() < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    running.abort();
    let _ = running.await;
    let written = server.write_total();
    assert!(written < 30, "stopped in the middle ({written} writes)");
    assert_eq!(stored_versions(&crd(&client).await), ["v1", "v2"]);
    migrator(&client, &[]).migrate(CRD).await.unwrap();
    assert_eq!(stored_versions(&crd(&client).await), ["v2"]);
}

/// The watch migrates a CRD again when its generation changes (a new release's CRD applied while
/// the manager runs).
#[tokio::test]
async fn the_watch_migrates_a_changed_crd() {
    let (_server, client) = server_with_widgets(3, true).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(run(migrator(&client, &[]), Vec::new(), stop.clone()));
    store_v2(&client, true).await;
    let mut live = crd(&client).await;
    for _ in 0..200 {
        if stored_versions(&live) == ["v2"] && observed(&live) == Some("2".into()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        live = crd(&client).await;
    }
    assert_eq!(stored_versions(&live), ["v2"]);
    assert_eq!(observed(&live), Some("2".into()));
    stop.cancel();
    task.await.unwrap();
}

#[test]
fn the_migrator_covers_every_crd_crdgen_writes() {
    let names: Vec<String> = crate::api::crd::all()
        .unwrap()
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let role: Vec<Value> = serde_saphyr::from_str::<Value>(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/rbac/role.yaml"
        ))
        .unwrap(),
    )
    .map(|r| r["rules"].as_array().cloned().unwrap_or_default())
    .unwrap();
    let rule = role
        .iter()
        .find(|r| {
            r["apiGroups"] == json!(["apiextensions.k8s.io"]) && r["resourceNames"].is_array()
        })
        .expect("a rule for our CRDs by name");
    let mut granted: Vec<String> = rule["resourceNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    granted.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(
        granted, expected,
        "config/rbac/role.yaml names every CRD crdgen writes"
    );
    assert_eq!(
        rule["resources"],
        json!([
            "customresourcedefinitions",
            "customresourcedefinitions/status"
        ])
    );
    for verb in ["patch", "update"] {
        assert!(rule["verbs"].as_array().unwrap().contains(&json!(verb)));
    }
}
