//! `/healthz` and `/readyz` on `--health-addr`, and the [`Readiness`] handle behind `/readyz`.
//!
//! `/healthz` answers 200 while the process serves HTTP. `/readyz` answers 200 once every
//! required check is marked ready: the manager requires `crds` (our CRDs are served), and each
//! controller requires its own name before it starts and marks it once its watches have synced.
//! Checks can fail again later: the manager's `docker-engine` check fails while the Docker engine
//! cannot be reached and passes again once it answers.
//! A standby replica (leader election on, Lease held elsewhere) runs no controllers, so it is ready
//! once the CRDs are served: otherwise a rolling update would wait forever for a new pod that
//! cannot become leader before the old one goes away.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

/// Shared readiness state. Cheap to clone; every clone sees the same checks.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<BTreeMap<&'static str, bool>>>,
}

impl Readiness {
    /// A handle with no checks (ready).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<&'static str, bool>> {
        self.checks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a check that keeps `/readyz` failing until [`Readiness::mark_ready`] is called with
    /// the same name. Requiring an existing check again leaves its state alone.
    pub fn require(&self, name: &'static str) {
        self.lock().entry(name).or_insert(false);
    }

    /// Marks a check as passed (adding it if it was not required).
    pub fn mark_ready(&self, name: &'static str) {
        self.lock().insert(name, true);
    }

    /// Marks a check as failing again (adding it if it was not required), until the next
    /// [`Readiness::mark_ready`].
    pub fn mark_not_ready(&self, name: &'static str) {
        self.lock().insert(name, false);
    }

    /// Whether every required check has passed.
    pub fn is_ready(&self) -> bool {
        self.lock().values().all(|ready| *ready)
    }

    /// The checks that have not passed yet, sorted by name.
    pub fn pending(&self) -> Vec<&'static str> {
        self.lock()
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(name, _)| *name)
            .collect()
    }
}

/// The routes of the health server.
pub fn router(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, String) {
    let pending = readiness.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: waiting for {}", pending.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::Service;

    async fn get_path(router: &mut Router, path: &str) -> (StatusCode, String) {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = router.call(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[test]
    fn ready_only_when_every_required_check_passed() {
        let readiness = Readiness::new();
        assert!(readiness.is_ready());
        readiness.require("crds");
        readiness.require("dockermachine");
        assert!(!readiness.is_ready());
        assert_eq!(readiness.pending(), ["crds", "dockermachine"]);
        readiness.mark_ready("crds");
        readiness.require("crds");
        assert_eq!(
            readiness.pending(),
            ["dockermachine"],
            "requiring again does not reset"
        );
        let clone = readiness.clone();
        clone.mark_ready("dockermachine");
        assert!(readiness.is_ready(), "clones share state");
        readiness.mark_not_ready("docker-engine");
        assert_eq!(readiness.pending(), ["docker-engine"]);
        readiness.mark_ready("docker-engine");
        assert!(
            readiness.is_ready(),
            "a check that failed again can pass again"
        );
    }

    #[tokio::test]
    async fn readyz_reports_what_it_waits_for_and_healthz_is_always_ok() {
        let readiness = Readiness::new();
        readiness.require("crds");
        let mut router = router(readiness.clone());
        assert_eq!(
            get_path(&mut router, "/healthz").await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            get_path(&mut router, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: waiting for crds".into()
            )
        );
        readiness.mark_ready("crds");
        assert_eq!(
            get_path(&mut router, "/readyz").await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            get_path(&mut router, "/nope").await.0,
            StatusCode::NOT_FOUND
        );
    }
}
