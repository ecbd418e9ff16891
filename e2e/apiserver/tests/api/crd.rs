//! CustomResourceDefinitions: discovery, status split, generation, pruning, defaulting,
//! validation and conversion between versions.

use std::collections::BTreeMap;

use axum::Json;
use axum::routing::post;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams, ValidationDirective};
use kube::discovery::{Discovery, Scope};
use serde_json::{Value, json};
use testapiserver::Options;
use testapiserver::cacher::WatchCacheStats;

use crate::common::{
    install_crd, install_widgets, start, start_webhook_with, start_with, status, widget,
    widget_crd, widget_resource, widgets,
};

#[tokio::test]
async fn crd_reports_established_and_appears_in_discovery() {
    let (_h, client) = start().await;
    let crd = install_widgets(&client).await;
    let st = crd.status.unwrap();
    let types: Vec<&str> = st
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert!(types.contains(&"NamesAccepted") && types.contains(&"Established"));
    assert_eq!(st.accepted_names.as_ref().unwrap().kind, "Widget");
    assert_eq!(st.stored_versions, Some(vec!["v1".to_string()]));
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let group = discovery.get("example.com").expect("group discovered");
    assert_eq!(
        group.preferred_version(),
        Some("v2"),
        "GA versions sort newest first"
    );
    let (ar, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("widgets discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "widgets/status" || sub.plural == "status")
    );

    let aggregated = Discovery::new(client).run_aggregated().await.unwrap();
    let group = aggregated
        .get("example.com")
        .expect("group in aggregated discovery");
    assert_eq!(group.preferred_version(), Some("v2"));
    assert!(
        group
            .recommended_resources()
            .iter()
            .any(|(ar, _)| ar.kind == "Widget")
    );
    assert!(
        aggregated.get("").is_some(),
        "the core group is discovered too"
    );
}

#[tokio::test]
async fn status_is_split_and_generation_follows_spec() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let mut w = widget("w", json!({"size": 1}));
    w.data["status"] = json!({"phase": "Ignored"});
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    let labelled = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );

    let with_status = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.data["status"]["phase"], "Ready");
    assert_eq!(
        with_status.data["spec"]["size"], 1,
        "spec is ignored on /status"
    );
    assert_eq!(with_status.metadata.generation, Some(1));

    let spec_change = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"phase": "Hacked"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec_change.metadata.generation, Some(2));
    assert_eq!(
        spec_change.data["status"]["phase"], "Ready",
        "status is ignored on the main resource"
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_defaults_applied() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let mut w = widget(
        "p",
        json!({
            "size": 2,
            "bogus": true,
            "ports": [{"name": "http"}],
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "junk": 1}, "anything": {"goes": 1}},
            "extra": {"free": {"form": 1}}
        }),
    );
    w.data["topLevelJunk"] = json!(1);
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    let spec = &created.data["spec"];
    assert!(spec.get("bogus").is_none());
    assert!(created.data.get("topLevelJunk").is_none());
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["ports"][0]["port"], 80);
    assert_eq!(spec["template"]["kind"], "Pod");
    assert_eq!(spec["template"]["anything"]["goes"], 1);
    assert!(
        spec["template"]["metadata"].get("junk").is_none(),
        "embedded metadata is ObjectMeta"
    );
    assert_eq!(spec["extra"]["free"]["form"], 1);

    let strict = PatchParams::default().validation(ValidationDirective::Strict);
    let err = status(
        api.patch("p", &strict, &Patch::Merge(json!({"spec": {"typo": 1}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.typo\""
    );
}

#[tokio::test]
async fn embedded_resources_need_a_kind_and_valid_metadata() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let w = widget(
        "e",
        json!({"size": 1, "template": {"apiVersion": "v1", "metadata": {"name": "a/b",
            "labels": {"ok": "not ok!"}}}}),
    );
    let err = status(api.create(&PostParams::default(), &w).await.unwrap_err());
    assert_eq!(err.code, 422, "{}", err.message);
    let causes: Vec<String> = err
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    for expected in [
        "spec.template.kind: Required value: must not be empty",
        "spec.template.metadata.name: Invalid value: \"a/b\": may not contain '/'",
        "spec.template.metadata.labels: Invalid value: \"not ok!\": a valid label must be",
    ] {
        assert!(
            causes.iter().any(|c| c.starts_with(expected)),
            "{expected}\nmissing from {causes:#?}"
        );
    }
}

#[tokio::test]
async fn invalid_objects_get_422_with_causes() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let api = widgets(&client);
    let missing = status(
        api.create(&PostParams::default(), &widget("m", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((missing.code, missing.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        missing.message,
        "Widget.example.com \"m\" is invalid: spec.size: Required value"
    );
    let cause = &missing.details.as_ref().unwrap().causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueRequired", "spec.size")
    );

    let bad = widget(
        "b",
        json!({
            "size": 20,
            "color": "green",
            "name": "ABCDEFGHIJ",
            "tags": ["a", "a"],
            "ports": [{"name": "x"}, {"name": "x"}],
            "when": "yesterday",
            "address": true,
            "labels": {"a": "1", "b": "2", "c": "3"}
        }),
    );
    let err = status(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(err.code, 422);
    let causes: Vec<(String, String)> = err
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, c.reason))
        .collect();
    for expected in [
        ("spec.size", "FieldValueInvalid"),
        ("spec.color", "FieldValueNotSupported"),
        ("spec.name", "FieldValueTooLong"),
        ("spec.name", "FieldValueInvalid"),
        ("spec.tags[1]", "FieldValueDuplicate"),
        ("spec.ports[1]", "FieldValueDuplicate"),
        ("spec.when", "FieldValueInvalid"),
        ("spec.address", "FieldValueTypeInvalid"),
        ("spec.labels", "FieldValueTooMany"),
    ] {
        assert!(
            causes
                .iter()
                .any(|(f, r)| f == expected.0 && r == expected.1),
            "{expected:?} missing from {causes:?}"
        );
    }
    assert!(
        err.message.contains(
            "spec.size: Invalid value: 20: spec.size in body should be less than or equal to 10"
        ),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(
            "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\""
        ),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn versions_without_conversion_rewrite_api_version_only() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let v1 = widgets(&client);
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));
    v1.create(&PostParams::default(), &widget("a", json!({"size": 3})))
        .await
        .unwrap();
    let as_v2 = v2.get("a").await.unwrap();
    assert_eq!(as_v2.types.unwrap().api_version, "example.com/v2");
    assert_eq!(as_v2.data["spec"]["size"], 3);
    let mut b: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "b"}, "spec": {"size": 4}
    }))
    .unwrap();
    b = v2.create(&PostParams::default(), &b).await.unwrap();
    assert_eq!(b.types.unwrap().api_version, "example.com/v2");
    let back = v1.get("b").await.unwrap();
    assert_eq!(back.types.unwrap().api_version, "example.com/v1");
    assert_eq!(back.data["spec"]["size"], 4);
}

/// Moves `spec.size` (v1) to `spec.dimension` (v2) and back.
async fn convert(Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let objects: Vec<Value> = request["objects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut o| {
            let spec = o["spec"].as_object_mut().cloned().unwrap_or_default();
            let mut spec = spec;
            if desired.ends_with("/v2") {
                if let Some(size) = spec.remove("size") {
                    spec.insert("dimension".into(), size);
                }
            } else if let Some(d) = spec.remove("dimension") {
                spec.insert("size".into(), d);
            }
            o["spec"] = Value::Object(spec);
            o["apiVersion"] = json!(desired);
            o
        })
        .collect();
    Json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": request["uid"], "convertedObjects": objects, "result": {"status": "Success"}}
    }))
}

/// [`convert`], refusing `example.com/v3` as a webhook that does not know that version does.
async fn convert_refusing_v3(Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    if request["desiredAPIVersion"] == "example.com/v3" {
        return Json(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {"uid": request["uid"], "convertedObjects": [], "result": {
                "status": "Failure", "message": "cannot convert Widget to v3: not served"}}
        }));
    }
    convert(Json(review)).await
}

/// Serves the conversion webhook over HTTPS on a free port; returns the port and the CA bundle.
async fn start_webhook(
    names: &[String],
) -> (u16, String, tokio::task::JoinHandle<std::io::Result<()>>) {
    start_webhook_with(names, axum::Router::new().route("/convert", post(convert))).await
}

#[tokio::test]
async fn webhook_conversion_calls_the_crd_webhook() {
    let (port, ca, webhook) = start_webhook(&[]).await;
    let (_h, client) = start().await;
    let conversion = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": ca}
    }});
    install_crd(&client, widget_crd(conversion)).await;
    let v1 = widgets(&client);
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));
    v1.create(&PostParams::default(), &widget("a", json!({"size": 3})))
        .await
        .unwrap();
    let as_v2 = v2.get("a").await.unwrap();
    assert_eq!(as_v2.data["spec"]["dimension"], 3);
    assert!(as_v2.data["spec"].get("size").is_none());
    let b: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "b"}, "spec": {"dimension": 5}
    }))
    .unwrap();
    v2.create(&PostParams::default(), &b).await.unwrap();
    assert_eq!(
        v1.get("b").await.unwrap().data["spec"]["size"],
        5,
        "stored in v1 via the webhook"
    );
    let listed = v2.list(&Default::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .all(|w| w.data["spec"].get("dimension").is_some())
    );
    webhook.abort();
}

/// The widget CRD converting through the webhook on `port`, with a third version `v3` listed but
/// not served (as CRDs list the versions they retired).
fn widget_crd_with_unserved_v3(port: u16, ca: &str) -> Value {
    let mut crd = widget_crd(json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": ca}
    }}));
    crd["spec"]["versions"].as_array_mut().unwrap().push(json!({
        "name": "v3", "served": false, "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
    }));
    crd
}

/// Waits until the watch caches satisfy `done`, up to 10 s; returns them.
async fn caches_until(
    handle: &testapiserver::Handle,
    done: impl Fn(&BTreeMap<String, WatchCacheStats>) -> bool,
) -> BTreeMap<String, WatchCacheStats> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let caches = handle.watch_caches();
        if done(&caches) || tokio::time::Instant::now() > deadline {
            return caches;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// kube-apiserver keeps a watch cache for every version a CRD lists, served or not, and fills
/// it through the conversion webhook: a webhook that refuses an unserved version fails that
/// cache, logged and retried as kube's cacher does, while reads of the served versions work.
#[tokio::test]
async fn a_webhook_refusing_an_unserved_version_fails_its_watch_cache_again_and_again() {
    let app = axum::Router::new().route("/convert", post(convert_refusing_v3));
    let (port, ca, webhook) = start_webhook_with(&[], app).await;
    let (handle, client) = start().await;
    install_crd(&client, widget_crd_with_unserved_v3(port, &ca)).await;
    widgets(&client)
        .create(&PostParams::default(), &widget("a", json!({"size": 3})))
        .await
        .unwrap();
    let caches = caches_until(&handle, |c| {
        c.get("widgets.example.com/v3")
            .is_some_and(|s| s.failures >= 2)
    })
    .await;
    let v3 = &caches["widgets.example.com/v3"];
    assert!(
        v3.failures >= 2,
        "failed, then failed again on retry: {caches:?}"
    );
    assert_eq!(v3.fills, 0);
    assert_eq!(
        v3.last_error.as_deref(),
        Some(
            "failed to list example.com/v3, Kind=Widget: conversion webhook for example.com/v1, \
             Kind=Widget failed: cannot convert Widget to v3: not served"
        )
    );
    let v2 = &caches["widgets.example.com/v2"];
    assert_eq!((v2.fills > 0, v2.failures), (true, 0), "{caches:?}");
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));
    assert_eq!(v2.get("a").await.unwrap().data["spec"]["dimension"], 3);
    webhook.abort();
}

#[tokio::test]
async fn a_webhook_converting_every_listed_version_fills_every_watch_cache() {
    let (port, ca, webhook) = start_webhook(&[]).await;
    let (handle, client) = start().await;
    install_crd(&client, widget_crd_with_unserved_v3(port, &ca)).await;
    for name in ["a", "b"] {
        widgets(&client)
            .create(&PostParams::default(), &widget(name, json!({"size": 3})))
            .await
            .unwrap();
    }
    let versions = ["v1", "v2", "v3"].map(|v| format!("widgets.example.com/{v}"));
    let caches = caches_until(&handle, |c| {
        versions
            .iter()
            .all(|v| c.get(v).is_some_and(|s| s.fills > 0))
    })
    .await;
    for version in &versions {
        let stats = caches.get(version).cloned().unwrap_or_default();
        assert!(stats.fills > 0, "{version}: {caches:?}");
        assert_eq!(stats.failures, 0, "{version}: {caches:?}");
    }
    webhook.abort();
}

#[tokio::test]
async fn service_webhooks_are_reached_through_configured_endpoints() {
    let (port, ca, webhook) = start_webhook(&["conv.webhooks.svc".to_string()]).await;
    let mut options = Options::default();
    options
        .service_endpoints
        .insert("webhooks/conv".into(), format!("127.0.0.1:{port}"));
    let (_h, client) = start_with(options).await;
    let conversion = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "webhooks", "name": "conv", "path": "/convert"}, "caBundle": ca}
    }});
    install_crd(&client, widget_crd(conversion)).await;
    widgets(&client)
        .create(&PostParams::default(), &widget("a", json!({"size": 7})))
        .await
        .unwrap();
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));
    assert_eq!(v2.get("a").await.unwrap().data["spec"]["dimension"], 7);
    webhook.abort();
}

#[tokio::test]
async fn unreachable_service_webhook_fails_with_internal_error() {
    let (_h, client) = start().await;
    let conversion = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "conv", "namespace": "default", "path": "/convert"}}
    }});
    install_crd(&client, widget_crd(conversion)).await;
    widgets(&client)
        .create(&PostParams::default(), &widget("a", json!({"size": 3})))
        .await
        .unwrap();
    let v2: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v2"));
    let err = status(v2.get("a").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    assert!(
        err.message.contains("conversion webhook"),
        "{}",
        err.message
    );
}

/// A one-version CRD `gadgets.example.com` with the given schema.
fn gadget_crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": schema}}
            ]
        }
    })
}

#[tokio::test]
async fn a_schema_every_version_shares_is_reported_once_at_spec_validation() {
    let (_h, client) = start().await;
    let untyped = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"x": {"description": "no type"}}}}});
    let with_version = |schema: Value, other: Value| {
        let mut crd = gadget_crd(schema);
        crd["spec"]["versions"].as_array_mut().unwrap().push(json!({
            "name": "v1beta1", "served": true, "storage": false,
            "schema": {"openAPIV3Schema": other}
        }));
        crd
    };
    let missing_type =
        "FieldValueRequired: Required value: must not be empty for specified object fields";

    // The same schema on both versions, once with fields at their zero value (which the Go types
    // cannot tell from absent): kube-apiserver checks it once, at spec.validation.
    let mut zeros = untyped.clone();
    zeros["required"] = json!([]);
    zeros["description"] = json!("");
    let (_, causes) = refused_crd(&client, with_version(untyped.clone(), zeros)).await;
    assert_eq!(
        causes,
        vec![(
            "spec.validation.openAPIV3Schema.properties[spec].properties[x].type".to_string(),
            missing_type.to_string()
        )]
    );

    // Schemas that differ are checked per version.
    let mut other = untyped.clone();
    other["properties"]["status"] = json!({"type": "object"});
    let (_, causes) = refused_crd(&client, with_version(untyped, other)).await;
    assert_eq!(
        causes,
        vec![
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].type"
                    .to_string(),
                missing_type.to_string()
            ),
            (
                "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[x].type"
                    .to_string(),
                missing_type.to_string()
            ),
        ]
    );
}

/// Creates a CRD that must be refused; returns its message and causes as `field: message`.
async fn refused_crd(client: &kube::Client, crd: Value) -> (String, Vec<(String, String)>) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let err = status(crds.create(&PostParams::default(), &crd).await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str()),
        (422, "Invalid"),
        "{}",
        err.message
    );
    let causes = err
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, format!("{}: {}", c.reason, c.message)))
        .collect();
    (err.message, causes)
}

#[tokio::test]
async fn non_structural_schemas_are_refused_with_kube_causes() {
    let (_h, client) = start().await;
    // One version: kube-apiserver's internal CRD type holds its schema at spec.validation.
    let root = "spec.validation.openAPIV3Schema";

    // The classic: a property with anyOf and no type.
    let (message, causes) = refused_crd(
        &client,
        gadget_crd(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "foo": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            }}}}),
        ),
    )
    .await;
    let foo = format!("{root}.properties[spec].properties[foo]");
    assert_eq!(
        message,
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: [\
             {foo}.anyOf[0].type: Forbidden: must be empty to be structural, \
             {foo}.anyOf[1].type: Forbidden: must be empty to be structural, \
             {foo}.type: Required value: must not be empty for specified object fields]"
        )
    );
    assert_eq!(
        causes,
        vec![
            (
                format!("{foo}.anyOf[0].type"),
                "FieldValueForbidden: Forbidden: must be empty to be structural".to_string()
            ),
            (
                format!("{foo}.anyOf[1].type"),
                "FieldValueForbidden: Forbidden: must be empty to be structural".to_string()
            ),
            (
                format!("{foo}.type"),
                "FieldValueRequired: Required value: must not be empty for specified object fields"
                    .to_string()
            ),
        ]
    );

    // Missing types at the root and in array items, arrays without items, metadata that says
    // more than name and generateName, and junctors naming fields the schema does not specify.
    let (_, causes) = refused_crd(
        &client,
        gadget_crd(json!({
            "properties": {
                "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
                "spec": {"type": "object", "properties": {
                    "list": {"type": "array", "items": {"properties": {"a": {"type": "string"}}}},
                    "bare": {"type": "array"},
                    "map": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}
                }}
            },
            "anyOf": [{"properties": {"extra": {"type": "string"}}}]
        })),
    )
    .await;
    let texts: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    for expected in [
        format!("{root}.type: FieldValueRequired: Required value: must not be empty at the root"),
        format!(
            "{root}.properties[spec].properties[list].items.type: FieldValueRequired: Required value: must not be empty for specified array items"
        ),
        format!(
            "{root}.properties[spec].properties[bare].items: FieldValueRequired: Required value: must be specified"
        ),
        format!(
            "{root}.properties[metadata]: FieldValueForbidden: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ),
        format!(
            "{root}.properties[extra]: FieldValueRequired: Required value: because it is defined in {root}.anyOf[0].properties[extra]"
        ),
        format!(
            "{root}.anyOf[0].properties[extra].type: FieldValueForbidden: Forbidden: must be empty to be structural"
        ),
        format!(
            "{root}.properties[spec].properties[map].additionalProperties: FieldValueForbidden: Forbidden: additionalProperties and properties are mutual exclusive"
        ),
    ] {
        assert!(
            texts.contains(&expected),
            "{expected}\nmissing from {texts:#?}"
        );
    }

    // Unserved versions are checked too, and v1 CRDs need a schema for every version.
    let mut two = gadget_crd(json!({"type": "object"}));
    two["spec"]["versions"].as_array_mut().unwrap().extend([
        json!({"name": "v1alpha1", "served": false, "storage": false,
                   "schema": {"openAPIV3Schema": {"type": "string"}}}),
        json!({"name": "v1alpha2", "served": false, "storage": false}),
    ]);
    let (_, causes) = refused_crd(&client, two).await;
    assert_eq!(
        causes,
        vec![
            (
                "spec.versions[1].schema.openAPIV3Schema.type".to_string(),
                "FieldValueInvalid: Invalid value: \"string\": must be object at the root"
                    .to_string()
            ),
            (
                "spec.versions[2].schema.openAPIV3Schema".to_string(),
                "FieldValueRequired: Required value: schemas are required".to_string()
            ),
        ]
    );

    // Nothing refused was stored, and an update cannot make a stored schema non-structural.
    let installed = install_crd(&client, gadget_crd(json!({"type": "object"}))).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    assert_eq!(installed.metadata.generation, Some(1));
    let err = status(
        crds.patch(
            "gadgets.example.com",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "add",
                    "path": "/spec/versions/0/schema/openAPIV3Schema/properties",
                    "value": {"x": {"description": "no type"}}}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.ends_with(&format!(
            "{root}.properties[x].type: Required value: must not be empty for specified object fields"
        )),
        "{}",
        err.message
    );
}
