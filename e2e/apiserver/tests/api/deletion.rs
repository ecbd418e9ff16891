//! Deletion: finalizers, preconditions, garbage collection of dependents, namespaces and CRDs.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{Value, json};

use crate::common::{eventually, install_widgets, start, status, widget, widgets};

fn cm(name: &str, extra_meta: Value) -> ConfigMap {
    let mut meta = json!({"name": name});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), extra_meta.as_object()) {
        m.extend(extra.clone());
    }
    serde_json::from_value(json!({"metadata": meta})).unwrap()
}

fn owner_ref(owner: &ConfigMap, block: bool) -> Value {
    json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid, "blockOwnerDeletion": block}])
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let mut w = widget("f", json!({"size": 1}));
    w.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();
    let pending = api
        .delete("f", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("object returned while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(
        pending.metadata.generation,
        Some(2),
        "marking for deletion bumps the generation"
    );

    let err = status(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        err.message
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/hold"},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))
    .unwrap();
    api.patch("f", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert!(api.get_opt("f").await.unwrap().is_none());
}

#[tokio::test]
async fn kube_runtime_finalizer_helper_adds_and_removes_its_finalizer() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{Event, finalizer};
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("fz", json!({"size": 1})))
        .await
        .unwrap();
    let run = |api: kube::Api<kube::api::DynamicObject>| async move {
        let obj = std::sync::Arc::new(api.get("fz").await.unwrap());
        finalizer(&api, "example.com/cleanup", obj, |event| async move {
            match event {
                Event::Apply(_) | Event::Cleanup(_) => Ok::<_, kube::Error>(Action::await_change()),
            }
        })
        .await
    };
    run(api.clone()).await.unwrap();
    let with = api.get("fz").await.unwrap();
    assert_eq!(
        with.metadata.finalizers,
        Some(vec!["example.com/cleanup".to_string()])
    );
    run(api.clone()).await.unwrap();
    api.delete("fz", &DeleteParams::default()).await.unwrap();
    run(api.clone()).await.unwrap();
    assert!(
        api.get_opt("fz").await.unwrap().is_none(),
        "cleanup removed the finalizer and the object"
    );
}

#[tokio::test]
async fn preconditions_guard_deletes() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("p", json!({})))
        .await
        .unwrap();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = status(cms.delete("p", &dp).await.unwrap_err());
    assert_eq!(err.code, 409);
    assert!(
        err.message
            .contains("Precondition failed: UID in precondition: wrong"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &cm("dep", json!({"ownerReferences": owner_ref(&owner, false)})),
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the dependent is collected", || {
        let cms = cms.clone();
        async move { cms.get_opt("dep").await.unwrap().is_none() }
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &cm(
            "dep",
            json!({"ownerReferences": owner_ref(&owner, true), "finalizers": ["example.com/slow"]}),
        ),
    )
    .await
    .unwrap();
    let pending = cms
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(
        pending
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    eventually("the dependent is being deleted", || {
        let cms = cms.clone();
        async move {
            cms.get("dep")
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_some()
        }
    })
    .await;
    assert!(
        cms.get_opt("owner").await.unwrap().is_some(),
        "the owner waits"
    );
    cms.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the owner goes after its dependent", || {
        let cms = cms.clone();
        async move { cms.get_opt("owner").await.unwrap().is_none() }
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_owner() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &cm("dep", json!({"ownerReferences": owner_ref(&owner, false)})),
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::orphan()).await.unwrap();
    eventually("the owner is gone", || {
        let cms = cms.clone();
        async move { cms.get_opt("owner").await.unwrap().is_none() }
    })
    .await;
    let dep = cms.get("dep").await.unwrap();
    assert!(dep.metadata.owner_references.is_none_or(|r| r.is_empty()));
}

#[tokio::test]
async fn delete_collection_honours_selectors() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(
        &PostParams::default(),
        &cm("a", json!({"labels": {"x": "1"}})),
    )
    .await
    .unwrap();
    cms.create(
        &PostParams::default(),
        &cm("b", json!({"labels": {"x": "1"}})),
    )
    .await
    .unwrap();
    cms.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("x=1"),
    )
    .await
    .unwrap();
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test]
async fn namespace_deletion_removes_its_contents() {
    let (_h, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap(),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, "tmp");
    cms.create(
        &PostParams::default(),
        &cm("inside", json!({"finalizers": ["example.com/hold"]})),
    )
    .await
    .unwrap();
    let pending = namespaces
        .delete("tmp", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        pending.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    let refused = status(
        cms.create(&PostParams::default(), &cm("late", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 403);
    eventually("the content is being deleted", || {
        let cms = cms.clone();
        async move {
            cms.get("inside")
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_some()
        }
    })
    .await;
    assert!(
        namespaces.get_opt("tmp").await.unwrap().is_some(),
        "the namespace waits for its content"
    );
    cms.patch(
        "inside",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the namespace is gone", || {
        let namespaces = namespaces.clone();
        async move { namespaces.get_opt("tmp").await.unwrap().is_none() }
    })
    .await;
    assert!(cms.get_opt("inside").await.unwrap().is_none());
}

#[tokio::test]
async fn crd_deletion_removes_custom_resources_and_serving() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("w", json!({"size": 1})))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the CRD is gone", || {
        let crds = crds.clone();
        async move { crds.get_opt("widgets.example.com").await.unwrap().is_none() }
    })
    .await;
    let err = status(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);
}
