//! Test doubles for the manager's integration tests: a minimal fake Kubernetes API (version,
//! discovery of our group, Leases, TokenReview, SubjectAccessReview) and tiny HTTP(S) clients.
//! The full test API server (e2e/apiserver) replaces the fake once it lands.

// Test scaffolding: a failure here is a test failure, so unwrap and panic are the point.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A token the fake authenticates as `prometheus`, who may get /metrics.
pub const ALLOWED_TOKEN: &str = "token-of-prometheus";
/// A token the fake authenticates as `alice`, who may not.
pub const DENIED_TOKEN: &str = "token-of-alice";
/// A manager token the fake rejects with 401.
pub const REVOKED_TOKEN: &str = "revoked-manager-token";

#[derive(Default)]
pub struct ApiState {
    pub crds_served: bool,
    pub leases: BTreeMap<(String, String), Lease>,
    pub next_resource_version: u64,
    pub token_reviews: usize,
    /// Lease reads and writes answer 500, as an API server in trouble.
    pub lease_api_down: bool,
}

/// The fake API server, serving plain HTTP on a loopback port.
pub struct FakeApi {
    pub url: String,
    pub state: Arc<Mutex<ApiState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn status(code: StatusCode, reason: &str, message: &str) -> (StatusCode, Json<Value>) {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, Json(body))
}

type Reply = (StatusCode, Json<Value>);
type Shared = State<Arc<Mutex<ApiState>>>;

impl FakeApi {
    pub async fn start(crds_served: bool) -> FakeApi {
        let state = Arc::new(Mutex::new(ApiState {
            crds_served,
            next_resource_version: 1,
            ..ApiState::default()
        }));
        let lease_path = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}";
        let router = Router::new()
            .route("/version", get(version))
            .route(
                "/apis/infrastructure.cluster.x-k8s.io/v1beta2",
                get(discovery),
            )
            .route("/apis/cluster.x-k8s.io/v1beta2", get(capi_discovery))
            .route(lease_path, get(get_lease).put(replace_lease))
            .route(
                "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                post(create_lease),
            )
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                post(token_review),
            )
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(access_review),
            )
            .fallback(empty_collections)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        FakeApi { url, state, task }
    }

    pub fn serve_crds(&self) {
        self.state.lock().unwrap().crds_served = true;
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        let key = (namespace.to_owned(), name.to_owned());
        self.state.lock().unwrap().leases.get(&key).cloned()
    }

    /// Stores a Lease as if another client wrote it.
    pub fn put_lease(&self, namespace: &str, name: &str, mut lease: Lease) {
        let mut state = self.state.lock().unwrap();
        lease.metadata.name = Some(name.to_owned());
        lease.metadata.namespace = Some(namespace.to_owned());
        lease.metadata.resource_version = Some(state.next_resource_version.to_string());
        state.next_resource_version += 1;
        state
            .leases
            .insert((namespace.to_owned(), name.to_owned()), lease);
    }

    /// Writes a kubeconfig for this server into `dir`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        self.kubeconfig_with_token(dir, "manager-token")
    }

    /// Writes a kubeconfig for this server, authenticating with `token`, into `dir`.
    pub fn kubeconfig_with_token(&self, dir: &Path, token: &str) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\nusers:\n- name: fake\n  user:\n    token: {token}\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// Any other read answers as an empty collection, and watches stay open without events, so the
/// controllers' watches (Clusters, Machines, our kinds) sync against this fake.
async fn empty_collections(request: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    if request.method() != axum::http::Method::GET {
        return StatusCode::NOT_FOUND.into_response();
    }
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    if watch {
        let body = axum::body::Body::from_stream(futures::stream::pending::<
            Result<Vec<u8>, std::io::Error>,
        >());
        return (StatusCode::OK, body).into_response();
    }
    Json(json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": []}))
        .into_response()
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": "1", "minor": "34", "gitVersion": "v1.34.0-fake", "gitCommit": "",
        "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": "",
    }))
}

async fn discovery(State(state): Shared, headers: HeaderMap) -> Reply {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
    if bearer == Some(&format!("Bearer {REVOKED_TOKEN}")) {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    if !state.lock().unwrap().crds_served {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    let resource = |name: &str, kind: &str| json!({"name": name, "singularName": "", "namespaced": true, "kind": kind, "verbs": ["get", "list", "watch"]});
    let body = json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "resources": [
            resource("dockerclusters", "DockerCluster"),
            resource("dockermachines", "DockerMachine"),
            resource("dockermachinetemplates", "DockerMachineTemplate"),
        ],
    });
    (StatusCode::OK, Json(body))
}

/// Discovery of Cluster API core's group, always served: `serve_crds` stands for installing ours.
async fn capi_discovery() -> Reply {
    let resource = |name: &str, kind: &str| json!({"name": name, "singularName": "", "namespaced": true, "kind": kind, "verbs": ["get", "list", "watch"]});
    let body = json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": "cluster.x-k8s.io/v1beta2",
        "resources": [resource("clusters", "Cluster"), resource("machines", "Machine")],
    });
    (StatusCode::OK, Json(body))
}

async fn get_lease(State(state): Shared, UrlPath((ns, name)): UrlPath<(String, String)>) -> Reply {
    let state = state.lock().unwrap();
    if state.lease_api_down {
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "etcd is unavailable",
        );
    }
    match state.leases.get(&(ns, name)) {
        Some(lease) => (StatusCode::OK, Json(lease_json(lease))),
        None => status(StatusCode::NOT_FOUND, "NotFound", "leases not found"),
    }
}

async fn create_lease(
    State(state): Shared,
    UrlPath(ns): UrlPath<String>,
    Json(mut lease): Json<Lease>,
) -> Reply {
    let mut state = state.lock().unwrap();
    let name = lease.metadata.name.clone().unwrap_or_default();
    let key = (ns.clone(), name);
    if state.leases.contains_key(&key) {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            "leases already exists",
        );
    }
    lease.metadata.namespace = Some(ns);
    lease.metadata.resource_version = Some(state.next_resource_version.to_string());
    state.next_resource_version += 1;
    state.leases.insert(key, lease.clone());
    (StatusCode::CREATED, Json(lease_json(&lease)))
}

async fn replace_lease(
    State(state): Shared,
    UrlPath((ns, name)): UrlPath<(String, String)>,
    Json(mut lease): Json<Lease>,
) -> Reply {
    let mut state = state.lock().unwrap();
    let key = (ns, name);
    let Some(stored) = state.leases.get(&key) else {
        return status(StatusCode::NOT_FOUND, "NotFound", "leases not found");
    };
    if stored.metadata.resource_version != lease.metadata.resource_version {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            "the object has been modified",
        );
    }
    lease.metadata.resource_version = Some(state.next_resource_version.to_string());
    state.next_resource_version += 1;
    state.leases.insert(key, lease.clone());
    (StatusCode::OK, Json(lease_json(&lease)))
}

fn lease_json(lease: &Lease) -> Value {
    let mut value = serde_json::to_value(lease).unwrap();
    value["apiVersion"] = json!("coordination.k8s.io/v1");
    value["kind"] = json!("Lease");
    value
}

async fn token_review(State(state): Shared, Json(review): Json<Value>) -> Reply {
    state.lock().unwrap().token_reviews += 1;
    let user = match review["spec"]["token"].as_str() {
        Some(ALLOWED_TOKEN) => Some("prometheus"),
        Some(DENIED_TOKEN) => Some("alice"),
        _ => None,
    };
    let status = match user {
        Some(name) => {
            json!({"authenticated": true, "user": {"username": name, "groups": ["system:authenticated"]}})
        }
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    let body = json!({
        "kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {}, "spec": review["spec"], "status": status,
    });
    (StatusCode::CREATED, Json(body))
}

async fn access_review(Json(review): Json<Value>) -> Reply {
    let spec = &review["spec"];
    let allowed = spec["user"] == "prometheus"
        && spec["nonResourceAttributes"]["path"] == "/metrics"
        && spec["nonResourceAttributes"]["verb"] == "get";
    let body = json!({
        "kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
        "metadata": {}, "spec": spec, "status": {"allowed": allowed},
    });
    (StatusCode::CREATED, Json(body))
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends `GET path` over `stream` and returns the status code and body.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    // A TLS peer may close without close_notify; what was read is what counts.
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status in {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// Plain HTTP GET on a loopback port.
pub async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    exchange(stream, path, None).await
}

/// HTTPS GET on a loopback port, accepting any certificate, offering only `versions`.
pub async fn https_get(
    port: u16,
    path: &str,
    token: Option<&str>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> std::io::Result<(u16, String)> {
    let config = crate::common::accept_any_certificate(versions).map_err(std::io::Error::other)?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name =
        rustls::pki_types::ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    let tls = connector.connect(name, tcp).await?;
    exchange(tls, path, token).await
}

/// Polls `check` every 50 ms until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
