//! A CRD update may not drop a version still listed in `status.storedVersions` (objects may still
//! be stored in it), as kube-apiserver refuses it; the version may stay, unserved.

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
    assert!(
        err.message.contains(
            r#"status.storedVersions[1]: Invalid value: "v2": must appear in spec.versions"#
        ),
        "{}",
        err.message
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
