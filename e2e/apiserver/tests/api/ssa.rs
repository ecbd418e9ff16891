//! Server-side apply: ownership in managedFields, conflicts, force, removal of dropped fields,
//! list-map merging of conditions.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::{install_widgets, start, status, widgets};

fn body(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": spec})
}

fn managers(obj: &DynamicObject) -> Vec<(String, String)> {
    obj.metadata
        .managed_fields
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn owned(obj: &DynamicObject, manager: &str) -> Value {
    let entry = obj
        .metadata
        .managed_fields
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.manager.as_deref() == Some(manager))
        .unwrap_or_else(|| panic!("no entry for {manager}"));
    serde_json::to_value(entry.fields_v1.as_ref().unwrap()).unwrap()
}

#[tokio::test]
async fn apply_creates_and_records_ownership() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let obj = api
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &Patch::Apply(body(json!({"size": 1, "tags": ["x"]}))),
        )
        .await
        .unwrap();
    assert_eq!(obj.metadata.generation, Some(1));
    assert_eq!(
        managers(&obj),
        vec![("alice".to_string(), "Apply".to_string())]
    );
    assert_eq!(
        owned(&obj, "alice"),
        json!({"f:spec": {"f:size": {}, "f:tags": {"v:\"x\"": {}}}})
    );
}

#[tokio::test]
async fn conflicting_apply_fails_unless_forced() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.patch(
        "s",
        &PatchParams::apply("alice"),
        &Patch::Apply(body(json!({"size": 1}))),
    )
    .await
    .unwrap();
    let same = api
        .patch(
            "s",
            &PatchParams::apply("bob"),
            &Patch::Apply(body(json!({"size": 1}))),
        )
        .await;
    assert!(
        same.is_ok(),
        "same value is shared ownership, not a conflict"
    );
    let err = status(
        api.patch(
            "s",
            &PatchParams::apply("carol"),
            &Patch::Apply(body(json!({"size": 2}))),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message
            .starts_with("Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.size"),
        "{}",
        err.message
    );
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".spec.size");
    assert_eq!(causes[0].message, "conflict with \"alice\"");
    let forced = api
        .patch(
            "s",
            &PatchParams::apply("carol").force(),
            &Patch::Apply(body(json!({"size": 2}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data["spec"]["size"], 2);
    let names: Vec<String> = managers(&forced).into_iter().map(|(m, _)| m).collect();
    assert_eq!(names, vec!["carol"], "alice and bob lost their only field");
}

#[tokio::test]
async fn update_owners_are_named_with_their_version_in_conflicts() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    cms.patch("c", &PatchParams::apply("applier"), &Patch::Apply(&cm))
        .await
        .unwrap();
    let pp = PatchParams {
        field_manager: Some("editor".into()),
        ..Default::default()
    };
    cms.patch("c", &pp, &Patch::Merge(json!({"data": {"a": "2"}})))
        .await
        .unwrap();
    let err = status(
        cms.patch("c", &PatchParams::apply("applier"), &Patch::Apply(&cm))
            .await
            .unwrap_err(),
    );
    assert!(
        err.message
            .starts_with("Apply failed with 1 conflict: conflict with \"editor\" using v1 at "),
        "{}",
        err.message
    );
    assert!(err.message.ends_with(": .data.a"), "{}", err.message);
}

#[tokio::test]
async fn fields_an_applier_drops_are_removed_unless_someone_else_owns_them() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.patch(
        "s",
        &PatchParams::apply("alice"),
        &Patch::Apply(body(json!({"size": 1, "color": "red", "name": "abc"}))),
    )
    .await
    .unwrap();
    api.patch(
        "s",
        &PatchParams::apply("bob"),
        &Patch::Apply(body(json!({"size": 1, "name": "abc"}))),
    )
    .await
    .unwrap();
    let after = api
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &Patch::Apply(body(json!({"size": 1}))),
        )
        .await
        .unwrap();
    let spec = &after.data["spec"];
    assert!(spec.get("color").is_none(), "alice alone owned color");
    assert_eq!(spec["name"], "abc", "bob still owns name");
}

#[tokio::test]
async fn a_struct_field_an_applier_drops_disappears_whole() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.patch(
        "s",
        &PatchParams::apply("alice"),
        // An embedded resource needs its apiVersion and kind, as kube-apiserver demands.
        &Patch::Apply(body(
            json!({"size": 1, "template": {"apiVersion": "v1", "kind": "ConfigMap", "a": 1}}),
        )),
    )
    .await
    .unwrap();
    let after = api
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &Patch::Apply(body(json!({"size": 1}))),
        )
        .await
        .unwrap();
    assert!(
        after.data["spec"].get("template").is_none(),
        "no empty template is left behind: {}",
        after.data["spec"]
    );
}

#[tokio::test]
async fn list_map_items_an_applier_drops_disappear_whole() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.patch(
        "s",
        &PatchParams::apply("alice"),
        &Patch::Apply(body(
            json!({"size": 1, "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}),
        )),
    )
    .await
    .unwrap();
    let after = api
        .patch(
            "s",
            &PatchParams::apply("alice"),
            &Patch::Apply(body(
                json!({"size": 1, "ports": [{"name": "a", "port": 1}]}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(
        after.data["spec"]["ports"],
        json!([{"name": "a", "port": 1}])
    );
}

#[tokio::test]
async fn conditions_merge_by_type_across_managers() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.patch(
        "s",
        &PatchParams::apply("owner"),
        &Patch::Apply(body(json!({"size": 1}))),
    )
    .await
    .unwrap();
    let status_body = |conds: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "status": {"conditions": conds}});
    api.patch_status(
        "s",
        &PatchParams::apply("x").force(),
        &Patch::Apply(status_body(json!([{"type": "A", "status": "True"}]))),
    )
    .await
    .unwrap();
    api.patch_status(
        "s",
        &PatchParams::apply("y").force(),
        &Patch::Apply(status_body(json!([{"type": "B", "status": "False"}]))),
    )
    .await
    .unwrap();
    let obj = api
        .patch_status(
            "s",
            &PatchParams::apply("x").force(),
            &Patch::Apply(status_body(json!([{"type": "A", "status": "False"}]))),
        )
        .await
        .unwrap();
    let conds = obj.data["status"]["conditions"].as_array().unwrap().clone();
    assert_eq!(
        conds,
        vec![
            json!({"type": "A", "status": "False"}),
            json!({"type": "B", "status": "False"})
        ]
    );
    let entry = obj
        .metadata
        .managed_fields
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.manager.as_deref() == Some("y"))
        .unwrap();
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "status applies keep the generation"
    );
    let before = obj.metadata.resource_version.clone();
    let again = api
        .patch_status(
            "s",
            &PatchParams::apply("x").force(),
            &Patch::Apply(status_body(json!([{"type": "A", "status": "False"}]))),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, before,
        "re-applying the same status is a no-op"
    );
}

#[tokio::test]
async fn updates_own_what_they_add_with_dot_markers_like_kube() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let mut w = crate::common::widget("u", json!({"size": 1, "labels": {"a": "b"}}));
    w.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    let pp = kube::api::PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let created = api.create(&pp, &w).await.unwrap();
    assert_eq!(
        owned(&created, "creator"),
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {".": {}, "f:labels": {".": {}, "f:a": {}}, "f:replicas": {}, "f:size": {}}
        })
    );
}
