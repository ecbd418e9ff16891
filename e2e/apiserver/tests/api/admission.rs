//! Admission webhooks: mutating and validating webhook configurations are called on create and
//! update, their patches applied (and pruned), their denials answered as kube-apiserver does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testapiserver::Options;

use crate::common::{
    install_widgets, start, start_webhook_with, start_with, status, widget, widgets,
};

/// What the webhooks saw, and the client they read the server back with (set once it runs).
#[derive(Clone, Default)]
struct Hook {
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    client: Arc<OnceLock<Client>>,
}

impl Hook {
    fn seen(&self, which: &str) -> Vec<Value> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(w, _)| w == which)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

fn answer(request: &Value, response: Value) -> Json<Value> {
    let mut response = response;
    response["uid"] = request["uid"].clone();
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// Defaults `spec.color` to blue, and tries to add a field the schema does not have.
async fn mutate(State(hook): State<Hook>, Json(review): Json<Value>) -> Json<Value> {
    let request = review["request"].clone();
    hook.seen
        .lock()
        .unwrap()
        .push(("mutate".into(), request.clone()));
    let mut ops = vec![json!({"op": "add", "path": "/spec/bogus", "value": 1})];
    if request["object"]["spec"]["color"].is_null() {
        ops.push(json!({"op": "add", "path": "/spec/color", "value": "blue"}));
    }
    let patch = base64::engine::general_purpose::STANDARD.encode(Value::from(ops).to_string());
    answer(
        &request,
        json!({"allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": ["defaulted"]}),
    )
}

/// Refuses widgets bigger than 5; reads the server back first, as Cluster API's webhooks do.
async fn validate(State(hook): State<Hook>, Json(review): Json<Value>) -> Json<Value> {
    let request = review["request"].clone();
    hook.seen
        .lock()
        .unwrap()
        .push(("validate".into(), request.clone()));
    let Some(client) = hook.client.get() else {
        return answer(
            &request,
            json!({"allowed": false, "status": {"message": "no client"}}),
        );
    };
    if widgets(client).list(&ListParams::default()).await.is_err() {
        return answer(
            &request,
            json!({"allowed": false, "status": {"message": "cannot list"}}),
        );
    }
    if request["object"]["spec"]["size"]
        .as_i64()
        .unwrap_or_default()
        > 5
    {
        return answer(
            &request,
            json!({"allowed": false, "status": {"code": 422, "reason": "Invalid",
                   "message": "Widget.example.com \"b\" is invalid: spec.size: Invalid value: 7: too big"}}),
        );
    }
    answer(&request, json!({"allowed": true}))
}

fn rules() -> Value {
    json!([{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"],
            "apiVersions": ["v1"], "resources": ["widgets"]}])
}

/// A server whose widgets are defaulted by a mutating webhook reached as the service
/// `default/hooks` (its certificate checked for `hooks.default.svc`) and checked by a validating
/// webhook reached by URL; both webhooks read the server back while they answer.
async fn admitted() -> (testapiserver::Handle, Client, Hook) {
    let hook = Hook::default();
    let app = axum::Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .with_state(hook.clone());
    let (port, ca, task) = start_webhook_with(&["hooks.default.svc".into()], app).await;
    std::mem::forget(task);
    let (handle, client) = start_with(Options {
        service_endpoints: BTreeMap::from([("default/hooks".into(), format!("127.0.0.1:{port}"))]),
        ..Options::default()
    })
    .await;
    hook.client.set(client.clone()).ok();
    install_widgets(&client).await;
    configure(
        &client,
        json!({"caBundle": ca, "service": {"namespace": "default", "name": "hooks", "path": "/mutate"}}),
        json!({"caBundle": ca, "url": format!("https://127.0.0.1:{port}/validate")}),
        "Fail",
    )
    .await;
    (handle, client, hook)
}

/// Stores one mutating and one validating configuration for widgets.
async fn configure(client: &Client, mutating: Value, validating: Value, policy: &str) {
    let webhook = |name: &str, client_config: Value| {
        json!({"metadata": {"name": "widgets"}, "webhooks": [{
            "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": policy, "rules": rules(), "clientConfig": client_config}]})
    };
    let m: MutatingWebhookConfiguration =
        serde_json::from_value(webhook("default.widgets.example.com", mutating)).unwrap();
    let v: ValidatingWebhookConfiguration =
        serde_json::from_value(webhook("validate.widgets.example.com", validating)).unwrap();
    let pp = PatchParams::apply("test").force();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch("widgets", &pp, &Patch::Apply(&m))
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch("widgets", &pp, &Patch::Apply(&v))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_mutating_webhook_defaults_what_is_created_and_updated() {
    let (_h, client, hook) = admitted().await;
    let api = widgets(&client);
    let a = api
        .create(&PostParams::default(), &widget("a", json!({"size": 3})))
        .await
        .unwrap();
    assert_eq!(a.data["spec"]["color"], "blue", "defaulted by the webhook");
    assert!(
        a.data["spec"].get("bogus").is_none(),
        "what the schema lacks is pruned"
    );
    assert_eq!(
        a.data["spec"]["replicas"], 1,
        "the schema's default still applies"
    );
    let create = &hook.seen("mutate")[0];
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(
        create["resource"],
        json!({"group": "example.com", "version": "v1", "resource": "widgets"})
    );
    assert_eq!(create["namespace"], "default");
    assert!(
        create["object"]["metadata"]["uid"].is_null(),
        "mutating webhooks see the object before the registry prepares it"
    );
    assert!(create["oldObject"].is_null());
    let validated = &hook.seen("validate")[0];
    assert_eq!(
        validated["object"]["spec"]["color"], "blue",
        "validation sees the mutated object"
    );
    assert!(validated["object"]["metadata"]["uid"].is_string());

    let patch = json!({"spec": {"color": "red", "size": 4}});
    let a = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        (
            a.data["spec"]["color"].as_str(),
            a.data["spec"]["size"].as_i64()
        ),
        (Some("red"), Some(4))
    );
    let update = hook.seen("mutate").last().cloned().unwrap();
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["options"]["kind"], "PatchOptions");
    assert_eq!(update["oldObject"]["spec"]["size"], 3);
    assert_eq!(update["object"]["spec"]["size"], 4);
}

#[tokio::test]
async fn a_validating_webhook_denial_is_the_clients_error_and_nothing_is_stored() {
    let (_h, client, hook) = admitted().await;
    let api = widgets(&client);
    let err = api
        .create(&PostParams::default(), &widget("b", json!({"size": 7})))
        .await
        .unwrap_err();
    let st = status(err);
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        st.message,
        "admission webhook \"validate.widgets.example.com\" denied the request: Widget.example.com \"b\" is invalid: spec.size: Invalid value: 7: too big"
    );
    assert!(api.get_opt("b").await.unwrap().is_none());
    api.create(&PostParams::default(), &widget("c", json!({"size": 2})))
        .await
        .unwrap();
    let err = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status(err).code, 422);
    assert_eq!(
        api.get("c").await.unwrap().data["spec"]["size"],
        2,
        "the denied update left the object alone"
    );
    // The rules name the resource only: status writes are not sent.
    let before = hook.seen.lock().unwrap().len();
    api.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Up"}})),
    )
    .await
    .unwrap();
    assert_eq!(hook.seen.lock().unwrap().len(), before);
}

#[tokio::test]
async fn unreachable_webhooks_fail_the_request_unless_their_policy_ignores_failures() {
    let (_h, client) = start().await;
    install_widgets(&client).await;
    let nowhere = json!({"service": {"namespace": "default", "name": "nowhere", "path": "/m"}});
    configure(&client, nowhere.clone(), nowhere.clone(), "Fail").await;
    let api = widgets(&client);
    let err = api
        .create(&PostParams::default(), &widget("a", json!({"size": 1})))
        .await
        .unwrap_err();
    let st = status(err);
    assert_eq!((st.code, st.reason.as_str()), (500, "InternalError"));
    assert!(
        st.message.starts_with(
            "Internal error occurred: failed calling webhook \"default.widgets.example.com\": failed to call webhook: Post \"https://nowhere.default.svc:443/m?timeout=10s\""
        ),
        "{}",
        st.message
    );
    configure(&client, nowhere.clone(), nowhere, "Ignore").await;
    api.create(&PostParams::default(), &widget("a", json!({"size": 1})))
        .await
        .unwrap();
}
