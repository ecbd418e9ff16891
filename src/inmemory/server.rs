//! The HTTP side of a fake workload cluster's API server: `GET /`, `/version`, discovery, and
//! get, list, watch, create, update, patch and delete of the [`RESOURCES`](super::resources)
//! it serves. Request bodies are JSON, or protobuf for the built-in kinds Cluster API writes that
//! way (the `kubeproto` crate); answers are JSON;
//! and the `portforward` subresource of pods ([`super::portforward`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::etcd::EtcdIdentity;
use super::patch;
use super::portforward;
use super::resources::{self, ResourceType};
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{Change, Filter, Store, StoreError};

/// The Kubernetes version the fake API servers report (and their Nodes' kubelets).
pub use super::objects::KUBERNETES_VERSION;

/// How long a watch lasts without a `timeoutSeconds` (kube-apiserver picks 30–60 min).
const DEFAULT_WATCH: Duration = Duration::from_secs(1800);

/// What the handlers share: the cluster's objects, its etcd's identity, and the token that
/// closes the server (and its watches and port-forward sessions).
#[derive(Clone)]
pub struct Shared {
    /// The cluster's objects.
    pub store: Arc<Store>,
    /// The cluster's etcd CA and serving certificates.
    pub etcd: Arc<EtcdIdentity>,
    /// Cancelled when the server closes.
    pub closed: CancellationToken,
    /// The port the server listens on (on every address), which port-forwards to an API server
    /// pod reach.
    pub port: u16,
}

/// The router of one fake cluster's API server; its watches and port-forward sessions end
/// when `closed` is cancelled.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route(
            "/api/v1/namespaces/{namespace}/pods/{name}/portforward",
            get(portforward::upgrade).post(portforward::upgrade),
        )
        .fallback(handle)
        .with_state(shared)
}

fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A Kubernetes `Status` answer for `error`.
pub fn error(error: &StoreError) -> Response {
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::BAD_REQUEST);
    json_response(code, &error.status())
}

fn not_found(path: &str) -> Response {
    error(&StoreError::NotFound(format!(
        "the server could not find {path}"
    )))
}

/// What a resource URL names.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    resource: &'static ResourceType,
    namespace: Option<String>,
    name: Option<String>,
}

/// Reads `/api/v1/...` or `/apis/<group>/<version>/...` into a [`Target`]; `None` for paths
/// that name no served resource.
fn target(segments: &[&str]) -> Option<Target> {
    let (group, version, rest) = match segments {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let namespaced =
        |plural: &str| resources::find(group, version, plural).filter(|r| r.namespaced);
    let (resource, namespace, name) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced(plural).is_some() => {
            (namespaced(plural)?, Some(ns.to_string()), tail)
        }
        [plural, tail @ ..] => (resources::find(group, version, plural)?, None, tail),
        [] => return None,
    };
    let name = match name {
        [] => None,
        // The status subresource reads and writes the whole object here.
        [name] | [name, "status"] => Some(name.to_string()),
        _ => return None,
    };
    Some(Target {
        resource,
        namespace,
        name,
    })
}

async fn handle(
    State(Shared { store, closed, .. }): State<Shared>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if method == Method::GET {
        let document = match segments.as_slice() {
            [] => Some(json!({"paths": ["/api", "/api/v1", "/apis", "/version"]})),
            ["version"] => Some(json!({
                "major": "1", "minor": "34", "gitVersion": KUBERNETES_VERSION,
                "platform": "linux/amd64", "goVersion": "go1.24",
                "compiler": "gc", "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
            })),
            ["api"] => Some(resources::core_versions()),
            ["api", version] => resources::resource_list("", version),
            ["apis"] => Some(resources::group_list()),
            ["apis", group] => resources::group(group),
            ["apis", group, version] => resources::resource_list(group, version),
            _ => None,
        };
        if let Some(document) = document {
            return json_response(StatusCode::OK, &document);
        }
    }
    let Some(target) = target(&segments) else {
        return not_found(path);
    };
    match serve(&store, &method, &target, &query, &headers, &body) {
        Ok(Served::Object(code, object)) => json_response(code, &object),
        Ok(Served::Watch(filter, since)) => watch(&store, &target, filter, since, &query, closed),
        Err(e) => error(&e),
    }
}

enum Served {
    Object(StatusCode, Value),
    Watch(Filter, Option<u64>),
}

fn filter(target: &Target, query: &HashMap<String, String>) -> Result<Filter, StoreError> {
    Ok(Filter {
        namespace: target.namespace.clone(),
        labels: query
            .get("labelSelector")
            .map_or(Ok(LabelSelector::default()), |s| LabelSelector::parse(s))?,
        fields: query
            .get("fieldSelector")
            .map_or(Ok(FieldSelector::default()), |s| FieldSelector::parse(s))?,
    })
}

/// The media type of a request's body, without its parameters.
fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map_or("", str::trim)
}

/// A create or update body: JSON, or protobuf as controller-runtime sends built-in kinds (CABPK's
/// bootstrap token Secrets, KCP's `kubeadm-config` ConfigMap).
fn parse_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, StoreError> {
    if content_type(headers) == PROTOBUF {
        return kubeproto::to_json(body).map_err(|e| match e {
            kubeproto::ProtobufError::Malformed(why) => {
                StoreError::Invalid(format!("the protobuf body could not be read: {why}"))
            }
            kubeproto::ProtobufError::Unsupported(kind) => StoreError::UnsupportedMediaType(
                format!("{PROTOBUF} is read for v1 Secret and ConfigMap only, not {kind}"),
            ),
        });
    }
    parse_json(body)
}

fn parse_json(body: &[u8]) -> Result<Value, StoreError> {
    serde_json::from_slice(body)
        .map_err(|e| StoreError::Invalid(format!("the request body is not JSON: {e}")))
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn serve(
    store: &Store,
    method: &Method,
    target: &Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Served, StoreError> {
    let resource = target.resource;
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let ok = |object| Ok(Served::Object(StatusCode::OK, object));
    match (method.as_str(), target.name.as_deref()) {
        ("GET", Some(name)) => ok(store.get(resource, namespace, name)?),
        ("GET", None) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            let since = query
                .get("resourceVersion")
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|v| *v > 0);
            Ok(Served::Watch(filter(target, query)?, since))
        }
        ("GET", None) => {
            let (items, version) = store.list(resource, &filter(target, query)?);
            ok(json!({
                "kind": format!("{}List", resource.kind),
                "apiVersion": resource.api_version(),
                "metadata": {"resourceVersion": version.to_string()},
                "items": items,
            }))
        }
        ("POST", None) => {
            let object = store.create(resource, namespace, parse_body(headers, body)?)?;
            Ok(Served::Object(StatusCode::CREATED, object))
        }
        ("PUT", Some(name)) => {
            ok(store.update(resource, namespace, name, parse_body(headers, body)?)?)
        }
        ("PATCH", Some(name)) => {
            let content_type = content_type(headers);
            let how: fn(&mut Value, &Value) = match content_type {
                "application/merge-patch+json" => patch::merge,
                // Server-side apply is taken as a merge patch: no field ownership is kept.
                "application/apply-patch+yaml" | "application/apply-patch+json" => {
                    let body = parse_json(body)?;
                    return match store.get(resource, namespace, name) {
                        Err(StoreError::NotFound(_)) => {
                            let mut object = body;
                            object["metadata"]["name"] = json!(name);
                            ok(store.create(resource, namespace, object)?)
                        }
                        _ => ok(store.patch(resource, namespace, name, &body, patch::merge)?),
                    };
                }
                "application/strategic-merge-patch+json" => patch::strategic,
                _ => {
                    return Err(StoreError::Invalid(format!(
                        "unsupported patch type {content_type:?}"
                    )));
                }
            };
            ok(store.patch(resource, namespace, name, &parse_json(body)?, how)?)
        }
        ("DELETE", Some(name)) => ok(store.delete(resource, namespace, name)?),
        _ => Err(StoreError::Invalid(format!(
            "{method} is not supported on {}",
            resource.plural
        ))),
    }
}

fn event_line(change: &Change) -> Bytes {
    let line = json!({"type": change.kind.as_str(), "object": change.object.as_ref()});
    Bytes::from(format!("{line}\n"))
}

/// A watch response: newline-delimited JSON events until `timeoutSeconds` (or
/// [`DEFAULT_WATCH`]) pass, or the watcher falls too far behind (it then lists again).
fn watch(
    store: &Store,
    target: &Target,
    filter: Filter,
    since: Option<u64>,
    query: &HashMap<String, String>,
    closed: CancellationToken,
) -> Response {
    let subscription = store.watch(target.resource, since);
    let plural = target.resource.plural;
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_WATCH, Duration::from_secs);
    let deadline = tokio::time::Instant::now() + timeout;
    let backlog: Vec<Bytes> = subscription
        .backlog
        .iter()
        .filter(|c| filter.matches(plural, c))
        .map(event_line)
        .collect();
    let live = futures::stream::unfold(
        (subscription.live, filter, closed),
        move |(mut receiver, filter, closed)| async move {
            loop {
                let next = tokio::select! {
                    () = closed.cancelled() => return None,
                    next = tokio::time::timeout_at(deadline, receiver.recv()) => next,
                };
                match next {
                    Ok(Ok(change)) if filter.matches(plural, &change) => {
                        return Some((event_line(&change), (receiver, filter, closed)));
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(RecvError::Lagged(_) | RecvError::Closed)) | Err(_) => return None,
                }
            }
        },
    );
    let stream = futures::stream::iter(backlog)
        .chain(live)
        .map(Ok::<_, std::convert::Infallible>);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> Option<(&'static str, Option<String>, Option<String>)> {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        target(&segments).map(|t| (t.resource.plural, t.namespace, t.name))
    }

    #[test]
    fn urls_name_their_resource_namespace_and_object() {
        assert_eq!(read("/api/v1/nodes"), Some(("nodes", None, None)));
        assert_eq!(
            read("/api/v1/namespaces/kube-system"),
            Some(("namespaces", None, Some("kube-system".into())))
        );
        assert_eq!(
            read("/api/v1/namespaces/kube-system/pods/etcd-m1/status"),
            Some(("pods", Some("kube-system".into()), Some("etcd-m1".into())))
        );
        assert_eq!(
            read("/apis/apps/v1/namespaces/kube-system/daemonsets"),
            Some(("daemonsets", Some("kube-system".into()), None))
        );
        // Eviction answers 404, as CAPD's fake server does; so do resources it does not hold.
        assert_eq!(read("/api/v1/namespaces/default/pods/p/eviction"), None);
        assert_eq!(read("/apis/batch/v1/jobs"), None);
    }

    #[test]
    fn an_unsupported_patch_type_is_refused() {
        let store = Store::new();
        let nodes = resources::find("", "v1", "nodes").unwrap_or(&resources::RESOURCES[0]);
        store
            .create(nodes, "", json!({"metadata": {"name": "n1"}}))
            .unwrap();
        let target = Target {
            resource: nodes,
            namespace: None,
            name: Some("n1".into()),
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            "application/json-patch+json".parse().unwrap(),
        );
        let refused = serve(
            &store,
            &Method::PATCH,
            &target,
            &HashMap::new(),
            &headers,
            b"[]",
        );
        assert!(matches!(refused, Err(StoreError::Invalid(_))));
    }
}
