//! `status.storedVersions` as kube-apiserver keeps it: the storage version is listed at the create
//! and added when an update makes another version the storage version; a CRD update may not drop
//! a version still listed (objects may still be stored in it), while a status update may write any
//! list, which the next CRD update is then held to.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{install_widgets, start, status, widget, widget_crd, widget_resource, widgets};

const NAME: &str = "widgets.example.com";

/// The widget CRD at the live resourceVersion, with `edit` applied to its versions.
async fn widget_crd_update(
    crds: &Api<CustomResourceDefinition>,
    edit: impl FnOnce(&mut Vec<Value>),
) -> CustomResourceDefinition {
    let live = crds.get(NAME).await.unwrap();
    let mut crd = widget_crd(json!({"strategy": "None"}));
    crd["metadata"]["resourceVersion"] = json!(live.metadata.resource_version);
    edit(crd["spec"]["versions"].as_array_mut().unwrap());
    serde_json::from_value(crd).unwrap()
}

async fn set_stored_versions(crds: &Api<CustomResourceDefinition>, versions: &[&str]) {
    crds.patch_status(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"storedVersions": versions}})),
    )
    .await
    .unwrap();
}

async fn stored_versions(crds: &Api<CustomResourceDefinition>) -> Vec<String> {
    crds.get(NAME)
        .await
        .unwrap()
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_crd_update_must_keep_every_stored_version() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    widgets(&client)
        .create(&PostParams::default(), &widget("w1", json!({"size": 3})))
        .await
        .unwrap();
    // As an installation that once stored v2 objects has it.
    set_stored_versions(&crds, &["v1", "v2"]).await;
    assert_eq!(stored_versions(&crds).await, ["v1", "v2"]);
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));

    let without_v2 =
        widget_crd_update(&crds, |versions| versions.retain(|v| v["name"] == "v1")).await;
    let err = status(
        crds.replace(NAME, &PostParams::default(), &without_v2)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422, "{}", err.message);
    assert_eq!(err.reason, "Invalid");
    assert_eq!(
        err.message,
        r#"CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: status.storedVersions[1]: Invalid value: "v2": missing from spec.versions; v2 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v2 and removes v2 from status.storedVersions"#
    );
    assert_eq!(
        v2.get("w1").await.unwrap().data["spec"]["size"],
        3,
        "the refused update changed nothing: v2 is still served"
    );

    let v2_unserved = widget_crd_update(&crds, |versions| {
        for v in versions.iter_mut().filter(|v| v["name"] == "v2") {
            v["served"] = json!(false);
        }
    })
    .await;
    crds.replace(NAME, &PostParams::default(), &v2_unserved)
        .await
        .unwrap();
    assert_eq!(status(v2.get("w1").await.unwrap_err()).code, 404);
    assert_eq!(
        widgets(&client).get("w1").await.unwrap().data["spec"]["size"],
        3
    );
    assert_eq!(stored_versions(&crds).await, ["v1", "v2"]);

    // Once a storage migration is done and v2 is dropped from the stored versions (a status
    // update, not held to the rule), the spec may drop it too.
    set_stored_versions(&crds, &["v1"]).await;
    let without_v2 =
        widget_crd_update(&crds, |versions| versions.retain(|v| v["name"] == "v1")).await;
    crds.replace(NAME, &PostParams::default(), &without_v2)
        .await
        .unwrap();
}

/// As etcd3, which skips a write only when the new encoding equals the stored bytes, an unchanged
/// write of an object stored in an older version rewrites it in the storage version (what storage
/// version migration relies on); once rewritten, the same write changes nothing.
#[tokio::test]
async fn an_unchanged_write_moves_an_object_to_the_storage_version() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    widgets(&client)
        .create(&PostParams::default(), &widget("w1", json!({"size": 3})))
        .await
        .unwrap();
    let v2_stored = widget_crd_update(&crds, |versions| {
        for v in versions.iter_mut() {
            v["storage"] = json!(v["name"] == "v2");
        }
    })
    .await;
    crds.replace(NAME, &PostParams::default(), &v2_stored)
        .await
        .unwrap();
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));
    let live = v2.get("w1").await.unwrap();
    let written = v2
        .replace("w1", &PostParams::default(), &live)
        .await
        .unwrap();
    assert_ne!(
        written.metadata.resource_version, live.metadata.resource_version,
        "rewritten in v2"
    );
    assert_eq!(written.data["spec"], live.data["spec"]);
    let again = v2
        .replace("w1", &PostParams::default(), &written)
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, written.metadata.resource_version,
        "already stored in v2"
    );
}

#[tokio::test]
async fn the_storage_version_is_listed_at_the_create_and_when_it_changes() {
    let (_h, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds
        .create(
            &PostParams::default(),
            &serde_json::from_value(widget_crd(json!({"strategy": "None"}))).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        created
            .status
            .and_then(|s| s.stored_versions)
            .unwrap_or_default(),
        ["v1"],
        "in the create's answer already"
    );
    let v2_stored = widget_crd_update(&crds, |versions| {
        for v in versions.iter_mut() {
            v["storage"] = json!(v["name"] == "v2");
        }
    })
    .await;
    let updated = crds
        .replace(NAME, &PostParams::default(), &v2_stored)
        .await
        .unwrap();
    assert_eq!(
        updated
            .status
            .and_then(|s| s.stored_versions)
            .unwrap_or_default(),
        ["v1", "v2"]
    );
    // Back to v1: already listed, nothing added.
    let v1_stored = widget_crd_update(&crds, |versions| {
        for v in versions.iter_mut() {
            v["storage"] = json!(v["name"] == "v1");
        }
    })
    .await;
    crds.replace(NAME, &PostParams::default(), &v1_stored)
        .await
        .unwrap();
    assert_eq!(stored_versions(&crds).await, ["v1", "v2"]);
}

/// kube-apiserver does not check `status.storedVersions` on a status update (only the status's
/// names): any list is stored. The next update of the CRD adds the storage version again and is
/// refused while a listed version is not in `spec.versions`.
#[tokio::test]
async fn a_status_update_is_not_held_to_the_stored_versions_rules() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    set_stored_versions(&crds, &[]).await;
    assert!(stored_versions(&crds).await.is_empty());
    let same = widget_crd_update(&crds, |_| {}).await;
    crds.replace(NAME, &PostParams::default(), &same)
        .await
        .unwrap();
    assert_eq!(
        stored_versions(&crds).await,
        ["v1"],
        "the CRD update added it"
    );

    set_stored_versions(&crds, &["v0"]).await;
    assert_eq!(stored_versions(&crds).await, ["v0"]);
    let same = widget_crd_update(&crds, |_| {}).await;
    let err = status(
        crds.replace(NAME, &PostParams::default(), &same)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.ends_with(
            r#"is invalid: status.storedVersions[0]: Invalid value: "v0": missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0 and removes v0 from status.storedVersions"#
        ),
        "{}",
        err.message
    );
}
