//! Create, read, update, delete of built-in kinds, with kube-apiserver's errors.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{start, status};

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn default_namespaces_exist_at_start() {
    let (_h, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client);
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for expected in ["default", "kube-system", "kube-public"] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected} missing from {names:?}"
        );
    }
}

#[tokio::test]
async fn create_sets_server_fields_and_get_returns_them() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(&PostParams::default(), &configmap("one", &[("a", "1")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.uid.as_ref().map(String::len), Some(36));
    assert!(meta.creation_timestamp.is_some());
    assert!(
        meta.resource_version
            .as_ref()
            .is_some_and(|rv| !rv.is_empty())
    );
    assert_eq!(meta.generation, None, "ConfigMaps do not track generation");
    let managed = meta.managed_fields.as_ref().expect("managedFields set");
    assert_eq!(managed[0].operation.as_deref(), Some("Update"));
    let got = cms.get("one").await.unwrap();
    assert_eq!(got.data, created.data);
    assert_eq!(
        got.metadata.resource_version,
        created.metadata.resource_version
    );
}

#[tokio::test]
async fn generate_name_appends_five_characters() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = configmap("", &[]);
    cm.metadata.name = None;
    cm.metadata.generate_name = Some("gen-".into());
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn errors_have_the_status_shape_of_kube_apiserver() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let missing = status(cms.get("nope").await.unwrap_err());
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "configmaps \"nope\" not found");
    let details = missing.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.kind.as_str(),
            details.group.as_str()
        ),
        ("nope", "configmaps", "")
    );

    cms.create(&PostParams::default(), &configmap("dup", &[]))
        .await
        .unwrap();
    let dup = status(
        cms.create(&PostParams::default(), &configmap("dup", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "configmaps \"dup\" already exists");

    let bad = status(
        cms.create(&PostParams::default(), &configmap("Bad_Name", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));
    assert!(bad.message.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", bad.message);
    assert_eq!(bad.details.unwrap().causes[0].field, "metadata.name");

    let elsewhere: Api<ConfigMap> = Api::namespaced(client, "does-not-exist");
    let no_ns = status(
        elsewhere
            .create(&PostParams::default(), &configmap("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (no_ns.code, no_ns.message.as_str()),
        (404, "namespaces \"does-not-exist\" not found")
    );
}

#[tokio::test]
async fn stale_updates_conflict_and_unconditional_updates_win() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let v1 = cms
        .create(&PostParams::default(), &configmap("cc", &[("a", "1")]))
        .await
        .unwrap();
    let mut first = v1.clone();
    first.data = Some([("a".to_string(), "2".to_string())].into());
    let v2 = cms
        .replace("cc", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(v2.metadata.resource_version, v1.metadata.resource_version);

    let mut stale = v1.clone();
    stale.data = Some([("a".to_string(), "3".to_string())].into());
    let conflict = status(
        cms.replace("cc", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        "Operation cannot be fulfilled on configmaps \"cc\": the object has been modified; please apply your changes to the latest version and try again"
    );

    stale.metadata.resource_version = None;
    let forced = cms
        .replace("cc", &PostParams::default(), &stale)
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "3");

    let mut other_uid = forced.clone();
    other_uid.metadata.resource_version = None;
    other_uid.metadata.uid = Some("not-the-uid".into());
    let err = status(
        cms.replace("cc", &PostParams::default(), &other_uid)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert!(
        err.message
            .contains("Precondition failed: UID in precondition: not-the-uid"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn noop_writes_keep_the_resource_version() {
    let (h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(&PostParams::default(), &configmap("same", &[("a", "1")]))
        .await
        .unwrap();
    let before = h.resource_version().await;
    let patched = cms
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.resource_version,
        created.metadata.resource_version
    );
    let replaced = cms
        .replace("same", &PostParams::default(), &patched)
        .await
        .unwrap();
    assert_eq!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(h.resource_version().await, before, "no write happened");
}

#[tokio::test]
async fn patch_types_change_what_they_should() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &configmap("p", &[("a", "1"), ("b", "2")]),
    )
    .await
    .unwrap();
    let merged = cms
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data.unwrap(),
        [
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
        .into()
    );
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/data/b", "value": "20"}]))
            .unwrap();
    let jp = cms
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(jp.data.unwrap()["b"], "20");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "nope"}]))
            .unwrap();
    let err = status(
        cms.patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    let smp = cms
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(smp.metadata.labels.unwrap()["x"], "y");
}

#[tokio::test]
async fn secrets_and_leases_round_trip() {
    let (h, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dmFsdWU="}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let got = secrets.get("s").await.unwrap();
    assert_eq!(got.data.unwrap()["k"].0, b"value");
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let renewed = leases
        .patch(
            "leader",
            &PatchParams::apply("me").force(),
            &Patch::Apply(json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "spec": {"holderIdentity": "me", "renewTime": "2024-01-01T00:00:00.000000Z"}
            })),
        )
        .await
        .unwrap();
    assert_eq!(
        renewed.spec.unwrap().renew_time.unwrap().0.to_string(),
        "2024-01-01T00:00:00Z"
    );
    let counts = h.write_counts();
    assert_eq!(counts.get("create secrets"), Some(&1));
    assert_eq!(counts.get("patch leases.coordination.k8s.io"), Some(&1));
    assert_eq!(h.write_total(), 3);
    assert_eq!(h.request_counts().get("get secrets"), Some(&1));
}

#[tokio::test]
async fn delete_answers_success_status_and_removes() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &configmap("gone", &[]))
        .await
        .unwrap();
    let answer = cms.delete("gone", &DeleteParams::default()).await.unwrap();
    let st = answer.right().expect("a Status for an immediate delete");
    assert!(st.is_success());
    assert!(cms.get_opt("gone").await.unwrap().is_none());
}

#[tokio::test]
async fn built_in_rules_apply_to_secrets_configmaps_and_namespaces() {
    let (_h, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "sd"}, "stringData": {"k": "value"}}))
            .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["k"].0, b"value");
    assert!(created.string_data.is_none());
    assert_eq!(created.type_.as_deref(), Some("Opaque"));

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut frozen = configmap("frozen", &[("a", "1")]);
    frozen.immutable = Some(true);
    cms.create(&PostParams::default(), &frozen).await.unwrap();
    let err = status(
        cms.patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("field is immutable when `immutable` is set"),
        "{}",
        err.message
    );

    let namespaces: Api<Namespace> = Api::all(client);
    let err = status(
        namespaces
            .delete("default", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
}

#[tokio::test]
async fn nodes_take_provider_ids_and_status_addresses_like_a_cloud_controller_sets_them() {
    use k8s_openapi::api::core::v1::Node;
    let (_h, client) = start().await;
    let nodes: Api<Node> = Api::all(client);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "c1-control-plane-abc", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": "c1-control-plane-abc"}]}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let patched = nodes
        .patch(
            "c1-control-plane-abc",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"providerID": "docker:////c1-control-plane-abc", "taints": null}}),
            ),
        )
        .await
        .unwrap();
    let spec = patched.spec.unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some("docker:////c1-control-plane-abc")
    );
    assert!(spec.taints.is_none());
    let with_ip = nodes
        .patch_status(
            "c1-control-plane-abc",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "172.18.0.3"}]}}),
            ),
        )
        .await
        .unwrap();
    let addresses: Vec<String> = with_ip
        .status
        .unwrap()
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        vec!["Hostname=c1-control-plane-abc", "InternalIP=172.18.0.3"],
        "merged by type"
    );
    assert_eq!(
        with_ip.spec.unwrap().provider_id.as_deref(),
        Some("docker:////c1-control-plane-abc")
    );
}

#[tokio::test]
async fn a_node_provider_id_cannot_change_once_set() {
    use k8s_openapi::api::core::v1::Node;
    let (_h, client) = start().await;
    let nodes: Api<Node> = Api::all(client);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let set = |id: serde_json::Value| Patch::Merge(json!({"spec": {"providerID": id}}));
    nodes
        .patch("n1", &PatchParams::default(), &set(json!("docker:////n1")))
        .await
        .unwrap();
    // Writing the same value again is fine.
    nodes
        .patch("n1", &PatchParams::default(), &set(json!("docker:////n1")))
        .await
        .unwrap();
    for other in [json!("docker:////elsewhere"), json!(null), json!("")] {
        let err = status(
            nodes
                .patch("n1", &PatchParams::default(), &set(other.clone()))
                .await
                .unwrap_err(),
        );
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{other}");
        assert_eq!(
            err.message,
            "Node \"n1\" is invalid: spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid"
        );
        let cause = &err.details.as_ref().unwrap().causes[0];
        assert_eq!(
            (cause.reason.as_str(), cause.field.as_str()),
            ("FieldValueForbidden", "spec.providerID")
        );
    }
    let applied = serde_json::json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1"}, "spec": {"providerID": "docker:////other"}});
    let err = status(
        nodes
            .patch(
                "n1",
                &PatchParams::apply("other").force(),
                &Patch::Apply(&applied),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422, "server-side apply is held to the same rule");
    let kept = nodes.get("n1").await.unwrap();
    assert_eq!(
        kept.spec.unwrap().provider_id.as_deref(),
        Some("docker:////n1")
    );
}
