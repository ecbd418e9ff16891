//! Admission webhooks: the `MutatingWebhookConfiguration`s and `ValidatingWebhookConfiguration`s
//! stored in the server are called on create and update, as kube-apiserver's webhook admission
//! plugins call them (`k8s.io/apiserver/pkg/admission/plugin/webhook`).
//!
//! What is imitated:
//! - Order: configurations sorted by name, webhooks in their order; mutating webhooks see the
//!   decoded, pruned and defaulted object before the registry prepares it (no uid or
//!   creationTimestamp on a create), validating webhooks the prepared object, after the
//!   registry's own validation. The object a mutating webhook patched is pruned and defaulted
//!   again.
//! - Matching by `rules` (operations, apiGroups, apiVersions, resources with kube's `*`, `*/*`,
//!   `r/*`, `*/s` forms, scope).
//! - The call: an `admission.k8s.io/v1` (or `v1beta1`, when that is all the webhook accepts)
//!   `AdmissionReview` POSTed to `clientConfig.url`, or to the service of `clientConfig.service`
//!   through [`Store::service_endpoints`](crate::store::Store) with the certificate checked for
//!   `<name>.<namespace>.svc`, trusting `caBundle`, with `?timeout=<timeoutSeconds>s` (10 s by
//!   default). The answer's uid must match; `JSONPatch` patches are applied; `warnings` become
//!   `Warning` headers.
//! - Failures: a denial is kube's `ToStatusErr` (`admission webhook "<name>" denied the request:
//!   <message>`, the webhook's code, at least 400); a call that fails is 500 `failed calling
//!   webhook "<name>": ...` with `failurePolicy: Fail` (the v1 default) and skipped with `Ignore`.
//!
//! Simplified: only CREATE and UPDATE are admitted (not DELETE or CONNECT); `namespaceSelector`,
//! `objectSelector` and `matchConditions` are not evaluated (every request the rules match is
//! sent); `matchPolicy: Equivalent` does not convert a request of another version of the same
//! resource (only the listed versions match); `reinvocationPolicy` is not honoured (each mutating
//! webhook is called once); validating webhooks are called one after the other, not in parallel;
//! the request's user is always `system:admin` in `system:masters`.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::resources::{ResKey, ResourceDef};
use crate::store::Store;

/// Mutating or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `MutatingWebhookConfiguration`s.
    Mutating,
    /// `ValidatingWebhookConfiguration`s.
    Validating,
}

impl Phase {
    fn key(self) -> ResKey {
        let plural = match self {
            Phase::Mutating => "mutatingwebhookconfigurations",
            Phase::Validating => "validatingwebhookconfigurations",
        };
        ("admissionregistration.k8s.io".into(), plural.into())
    }
}

/// The request being admitted.
pub struct Attributes<'a> {
    /// The resource.
    pub def: &'a ResourceDef,
    /// The version the request was made in.
    pub version: &'a str,
    /// The subresource ("" for the main resource).
    pub subresource: &'a str,
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    /// Namespace ("" for cluster-scoped).
    pub namespace: &'a str,
    /// Object name (may be empty on a create with `generateName`).
    pub name: &'a str,
    /// Whether the request is a dry run.
    pub dry_run: bool,
    /// The options kind of the request (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
    pub options_kind: &'a str,
}

/// One webhook to call: its configuration's entry, with where to reach it resolved.
#[derive(Debug, Clone)]
pub struct Hook {
    name: String,
    url: Option<String>,
    /// The URL as kube-apiserver names it in errors (`https://<svc>.<ns>.svc:443/path?timeout=10s`).
    shown: String,
    server_name: Option<String>,
    service: Option<String>,
    ca_bundle: Option<Vec<u8>>,
    timeout: Duration,
    ignore_failures: bool,
    review_version: Option<&'static str>,
}

/// The webhooks of `phase` whose rules match the request, in the order kube-apiserver calls them.
pub fn matching(store: &Store, phase: Phase, attrs: &Attributes<'_>) -> Vec<Hook> {
    let mut configurations = store.list(&phase.key(), None);
    configurations.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let mut hooks = Vec::new();
    for configuration in configurations {
        for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
            let rules = webhook["rules"].as_array().into_iter().flatten();
            if rules.into_iter().any(|rule| rule_matches(rule, attrs)) {
                hooks.push(hook(webhook, &store.service_endpoints));
            }
        }
    }
    hooks
}

fn listed(list: &Value, value: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|v| v == "*" || v == value)
}

/// Whether one `RuleWithOperations` matches, with kube's resource wildcards: `*` is every
/// resource but no subresource, `*/*` everything, `r/*` every subresource of `r`, `*/s` the
/// subresource `s` of every resource.
fn rule_matches(rule: &Value, attrs: &Attributes<'_>) -> bool {
    let def = attrs.def;
    if !listed(&rule["operations"], attrs.operation)
        || !listed(&rule["apiGroups"], &def.group)
        || !listed(&rule["apiVersions"], attrs.version)
    {
        return false;
    }
    let resource_matches = rule["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|entry| {
            let (resource, sub) = entry.split_once('/').unwrap_or((entry, ""));
            let resource_ok = resource == "*" || resource == def.plural;
            let sub_ok = sub == "*" || sub == attrs.subresource;
            resource_ok && sub_ok
        });
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !def.namespaced,
        "Namespaced" => def.namespaced,
        _ => true,
    };
    resource_matches && scope_ok
}

fn hook(webhook: &Value, endpoints: &std::collections::BTreeMap<String, String>) -> Hook {
    let config = &webhook["clientConfig"];
    let timeout = webhook["timeoutSeconds"].as_u64().unwrap_or(10);
    let query = format!("?timeout={timeout}s");
    let (url, shown, server_name, service) = match config["url"].as_str() {
        Some(url) => (
            Some(format!("{url}{query}")),
            format!("{url}{query}"),
            None,
            None,
        ),
        None => {
            let svc = &config["service"];
            let namespace = svc["namespace"].as_str().unwrap_or_default();
            let name = svc["name"].as_str().unwrap_or_default();
            let path = svc["path"].as_str().unwrap_or("/");
            let port = svc["port"].as_u64().unwrap_or(443);
            let key = format!("{namespace}/{name}");
            let url = endpoints
                .get(&key)
                .map(|endpoint| format!("https://{endpoint}{path}{query}"));
            let shown = format!("https://{name}.{namespace}.svc:{port}{path}{query}");
            (
                url,
                shown,
                Some(format!("{name}.{namespace}.svc")),
                Some(key),
            )
        }
    };
    let versions: Vec<&str> = webhook["admissionReviewVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let review_version = ["v1", "v1beta1"].into_iter().find(|v| versions.contains(v));
    Hook {
        name: webhook["name"].as_str().unwrap_or_default().to_string(),
        url,
        shown,
        server_name,
        service,
        ca_bundle: config["caBundle"]
            .as_str()
            .and_then(|b| STANDARD.decode(b).ok()),
        timeout: Duration::from_secs(timeout),
        ignore_failures: webhook["failurePolicy"].as_str() == Some("Ignore"),
        review_version,
    }
}

/// Calls the mutating `hooks` in order; each sees the object the previous one patched.
///
/// # Errors
/// The denial or failure of a webhook, as kube-apiserver answers it.
pub async fn mutate(
    hooks: &[Hook],
    attrs: &Attributes<'_>,
    mut object: Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<Value> {
    for hook in hooks {
        let Some(response) = admit(hook, attrs, &object, old, warnings).await? else {
            continue;
        };
        let Some(patch) = response["patch"].as_str() else {
            continue;
        };
        if response["patchType"].as_str() != Some("JSONPatch") {
            failed(
                hook,
                format!(
                    "unsupported patch type {:?}",
                    response["patchType"].as_str().unwrap_or_default()
                ),
            )?;
            continue;
        }
        let bytes = match STANDARD.decode(patch) {
            Ok(b) => b,
            Err(e) => {
                failed(hook, format!("the patch is not base64: {e}"))?;
                continue;
            }
        };
        let operations: json_patch::Patch = match serde_json::from_slice(&bytes) {
            Ok(p) => p,
            Err(e) => {
                failed(hook, format!("the patch is not a JSON patch: {e}"))?;
                continue;
            }
        };
        let mut patched = object.clone();
        if let Err(e) = json_patch::patch(&mut patched, &operations) {
            failed(hook, format!("applying the patch: {e}"))?;
            continue;
        }
        object = patched;
    }
    Ok(object)
}

/// Calls the validating `hooks`; the first denial ends the request.
///
/// # Errors
/// The denial or failure of a webhook, as kube-apiserver answers it.
pub async fn validate(
    hooks: &[Hook],
    attrs: &Attributes<'_>,
    object: &Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    for hook in hooks {
        admit(hook, attrs, object, old, warnings).await?;
    }
    Ok(())
}

/// A failed call: 500 with `failurePolicy: Fail`, nothing (logged) with `Ignore`.
fn failed(hook: &Hook, why: String) -> ApiResult<()> {
    if hook.ignore_failures {
        tracing::warn!(webhook = %hook.name, error = %why, "Failed calling webhook, failing open");
        return Ok(());
    }
    Err(ApiError::internal(format!(
        "failed calling webhook {:?}: {why}",
        hook.name
    )))
}

/// One call; `None` when a failure was ignored. A denial is an error.
async fn admit(
    hook: &Hook,
    attrs: &Attributes<'_>,
    object: &Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<Option<Value>> {
    let Some(review_version) = hook.review_version else {
        failed(
            hook,
            "webhook does not accept v1 or v1beta1 AdmissionReview".into(),
        )?;
        return Ok(None);
    };
    let Some(url) = &hook.url else {
        let svc = hook.service.as_deref().unwrap_or_default();
        failed(
            hook,
            format!(
                "failed to call webhook: Post {:?}: service {svc} is not reachable from the test API server (give it an endpoint with Options::service_endpoints or --service-endpoint)",
                hook.shown
            ),
        )?;
        return Ok(None);
    };
    let uid = crate::meta::new_uid();
    let api_version = format!("admission.k8s.io/{review_version}");
    let review = review(attrs, &uid, &api_version, object, old);
    let body = review.to_string();
    let answer = crate::webhook::post_json(
        url,
        hook.ca_bundle.as_deref(),
        hook.server_name.as_deref(),
        body.as_bytes(),
        hook.timeout,
    )
    .await;
    let answer = match answer {
        Ok((200, answer)) => answer,
        Ok((code, _)) => {
            failed(
                hook,
                format!("failed to call webhook: the server responded with HTTP {code}"),
            )?;
            return Ok(None);
        }
        Err(e) => {
            failed(
                hook,
                format!(
                    "failed to call webhook: Post {:?}: {}",
                    hook.shown,
                    crate::webhook::chain(&e)
                ),
            )?;
            return Ok(None);
        }
    };
    let answer: Value = match serde_json::from_slice(&answer) {
        Ok(a) => a,
        Err(e) => {
            failed(hook, format!("received invalid webhook response: {e}"))?;
            return Ok(None);
        }
    };
    if review_version == "v1"
        && (answer["apiVersion"].as_str() != Some(api_version.as_str())
            || answer["kind"].as_str() != Some("AdmissionReview"))
    {
        failed(
            hook,
            format!(
                "expected webhook response of {api_version}, Kind=AdmissionReview, got {}, Kind={}",
                answer["apiVersion"].as_str().unwrap_or_default(),
                answer["kind"].as_str().unwrap_or_default()
            ),
        )?;
        return Ok(None);
    }
    let response = &answer["response"];
    if response["uid"].as_str() != Some(uid.as_str()) {
        failed(
            hook,
            format!(
                "expected response.uid={uid:?}, got {:?}",
                response["uid"].as_str().unwrap_or_default()
            ),
        )?;
        return Ok(None);
    }
    for warning in response["warnings"].as_array().into_iter().flatten() {
        if let Some(w) = warning.as_str() {
            warnings.push(w.to_string());
        }
    }
    if response["allowed"].as_bool() != Some(true) {
        return Err(denied(&hook.name, &response["status"]));
    }
    Ok(Some(response.clone()))
}

fn review(
    attrs: &Attributes<'_>,
    uid: &str,
    api_version: &str,
    object: &Value,
    old: Option<&Value>,
) -> Value {
    let def = attrs.def;
    let kind = json!({"group": def.group, "version": attrs.version, "kind": def.kind});
    let resource = json!({"group": def.group, "version": attrs.version, "resource": def.plural});
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": attrs.options_kind},
    });
    if !attrs.subresource.is_empty() {
        request["subResource"] = json!(attrs.subresource);
    }
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    json!({"apiVersion": api_version, "kind": "AdmissionReview", "request": request})
}

/// kube's `ToStatusErr`: the webhook's Status, its message prefixed with who denied it, its code
/// at least 400.
fn denied(name: &str, status: &Value) -> ApiError {
    let by = format!("admission webhook {name:?} denied the request");
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason = status["reason"].as_str().unwrap_or_default();
    let message = match message {
        Some(m) => format!("{by}: {m}"),
        None if !reason.is_empty() => format!("{by}: {reason}"),
        None => format!("{by} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let mut error = ApiError::new(code, reason, message);
    error.details = status.get("details").cloned();
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(group: &str, plural: &str, namespaced: bool) -> ResourceDef {
        let mut def = crate::resources::builtins()
            .into_iter()
            .next()
            .expect("built-in kinds");
        def.group = group.into();
        def.plural = plural.into();
        def.namespaced = namespaced;
        def
    }

    fn attrs<'a>(def: &'a ResourceDef, sub: &'a str, operation: &'a str) -> Attributes<'a> {
        Attributes {
            def,
            version: "v1beta2",
            subresource: sub,
            operation,
            namespace: "default",
            name: "x",
            dry_run: false,
            options_kind: "CreateOptions",
        }
    }

    fn rule(resources: &[&str]) -> Value {
        json!({"operations": ["CREATE", "UPDATE"], "apiGroups": ["cluster.x-k8s.io"],
               "apiVersions": ["v1beta2"], "resources": resources})
    }

    #[test]
    fn rules_match_resources_and_subresources_with_kubes_wildcards() {
        let md = def("cluster.x-k8s.io", "machinedeployments", true);
        let main = attrs(&md, "", "CREATE");
        let status = attrs(&md, "status", "UPDATE");
        assert!(rule_matches(&rule(&["machinedeployments"]), &main));
        assert!(!rule_matches(&rule(&["machinedeployments"]), &status));
        assert!(rule_matches(&rule(&["*"]), &main));
        assert!(!rule_matches(&rule(&["*"]), &status));
        assert!(rule_matches(&rule(&["*/*"]), &status));
        assert!(rule_matches(&rule(&["machinedeployments/*"]), &status));
        assert!(rule_matches(&rule(&["*/status"]), &status));
        assert!(!rule_matches(&rule(&["*/scale"]), &status));
        assert!(!rule_matches(&rule(&["machinesets"]), &main));
    }

    #[test]
    fn rules_match_operations_groups_versions_and_scope() {
        let md = def("cluster.x-k8s.io", "machinedeployments", true);
        assert!(!rule_matches(&rule(&["*"]), &attrs(&md, "", "DELETE")));
        let other = def("bootstrap.cluster.x-k8s.io", "machinedeployments", true);
        assert!(!rule_matches(&rule(&["*"]), &attrs(&other, "", "CREATE")));
        let mut old = attrs(&md, "", "CREATE");
        old.version = "v1beta1";
        assert!(!rule_matches(&rule(&["*"]), &old));
        let mut scoped = rule(&["*"]);
        scoped["scope"] = json!("Cluster");
        assert!(!rule_matches(&scoped, &attrs(&md, "", "CREATE")));
        scoped["scope"] = json!("Namespaced");
        assert!(rule_matches(&scoped, &attrs(&md, "", "CREATE")));
    }

    #[test]
    fn a_denial_reads_as_kube_apiservers_status_error() {
        let e = denied(
            "validation.cluster.cluster.x-k8s.io",
            &json!({"code": 422, "reason": "Invalid", "message": "Cluster.cluster.x-k8s.io \"c\" is invalid: spec.x: Required value",
                    "details": {"causes": [{"field": "spec.x"}]}}),
        );
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "admission webhook \"validation.cluster.cluster.x-k8s.io\" denied the request: Cluster.cluster.x-k8s.io \"c\" is invalid: spec.x: Required value"
        );
        assert_eq!(e.details, Some(json!({"causes": [{"field": "spec.x"}]})));
        let e = denied("w", &json!({"code": 200}));
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "admission webhook \"w\" denied the request without explanation"
            )
        );
    }

    #[test]
    fn services_resolve_through_the_endpoints_and_urls_get_the_timeout() {
        let endpoints = std::collections::BTreeMap::from([(
            "capi-system/capi-webhook-service".to_string(),
            "127.0.0.1:9443".to_string(),
        )]);
        let h = hook(
            &json!({"name": "w", "admissionReviewVersions": ["v1beta1"], "clientConfig": {"service":
                {"namespace": "capi-system", "name": "capi-webhook-service", "path": "/mutate"}}}),
            &endpoints,
        );
        assert_eq!(
            h.url.as_deref(),
            Some("https://127.0.0.1:9443/mutate?timeout=10s")
        );
        assert_eq!(
            h.server_name.as_deref(),
            Some("capi-webhook-service.capi-system.svc")
        );
        assert_eq!(h.review_version, Some("v1beta1"));
        assert!(!h.ignore_failures);
        let h = hook(
            &json!({"name": "w", "timeoutSeconds": 3, "failurePolicy": "Ignore",
                    "clientConfig": {"url": "https://example.invalid/v"}}),
            &endpoints,
        );
        assert_eq!(
            h.url.as_deref(),
            Some("https://example.invalid/v?timeout=3s")
        );
        assert_eq!(h.review_version, None);
        assert!(h.ignore_failures);
    }
}
