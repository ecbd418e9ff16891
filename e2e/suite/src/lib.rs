//! The provider's end-to-end suite, as a library its scenarios (`tests/`) and the controllers'
//! integration tests of the root crate share.
//!
//! An [`Env`] is one scenario's world: a management API (a fresh test API server by default, or
//! the existing cluster of `CAPD_E2E_KUBECONFIG`/`KUBECONFIG` with
//! `CAPD_E2E_USE_EXISTING_CLUSTER=true`), our CRDs and the Cluster API core CRDs installed, the
//! real manager binary running as a process, a workload API server holding Nodes, and the suite
//! playing Cluster API core ([`core`]). Dropping it kills the manager, prints a report when the
//! scenario failed ([`report`]) and removes the containers and networks the scenario caused.
//!
//! A test harness fails a test by panicking: `unwrap`, `expect` and `panic!` are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod capd_world;
pub mod chaos;
pub mod core;
pub mod docker;
pub mod engine_proxy;
pub mod env;
pub mod envsubst;
pub mod installed;
pub mod kubeadm;
pub mod manager;
pub mod observe;
pub mod pool;
pub mod report;
pub mod shipped;
pub mod stand_in;
pub mod tls;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::core::*;
pub use crate::docker::*;
pub use crate::engine_proxy::{EngineProxy, Mode as ProxyMode};
pub use crate::env::{Env, Management, NAMESPACE, client_for};
pub use crate::manager::{http_get, manager_binary, metric};
pub use crate::observe::{PROVIDER_FIELD_MANAGER, field_owners};
pub use crate::pool::*;

/// The root of the workspace (where `config/`, `src/` and `e2e/` are).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The `spec.template.spec` of the template `kind` `name` of a ClusterClass file
/// (`templates/<file>`): what Cluster API's topology controller copies into the object it makes
/// from it. The class files use no variables, so they are read as they are.
pub fn class_template_spec(file: &str, kind: &str, name: &str) -> serde_json::Value {
    let path = workspace_root().join("templates").join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let objects: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    objects
        .into_iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {}", path.display()))["spec"]["template"]
        ["spec"]
        .clone()
}

/// A short name unique to this process and call (container host names must stay short).
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("{prefix}{:x}{n}", (std::process::id() ^ nanos) & 0xffffff)
}

/// Waits until `check` returns `Some`, polling every 200 ms; panics naming `what` on timeout.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
