//! The diagnostics endpoint (`--diagnostics-address`): Prometheus `/metrics`.
//!
//! Secure by default, like controller-runtime's secure metrics: HTTPS, and every request must
//! carry a bearer token that the Kubernetes API authenticates (TokenReview) and authorizes for
//! `get` on the non-resource URL `/metrics` (SubjectAccessReview). With `--insecure-diagnostics`
//! it is plain HTTP without checks. Tokens are never logged.

use std::io;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::runtime::error_chain;
use crate::runtime::metrics::{self, Metrics};
use crate::serving::TlsListener;

/// The only path served, and the one access reviews ask about.
pub const METRICS_PATH: &str = "/metrics";

/// Why an access review could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The TokenReview request failed.
    #[error("create TokenReview")]
    TokenReview(#[source] kube::Error),
    /// The SubjectAccessReview request failed.
    #[error("create SubjectAccessReview")]
    SubjectAccessReview(#[source] kube::Error),
}

/// The outcome of checking a request's bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated and allowed to get `/metrics`.
    Allowed,
    /// The token is not valid.
    Unauthenticated,
    /// Valid token, but the user may not get `/metrics`.
    Forbidden {
        /// The authenticated user name.
        user: String,
    },
}

/// Authenticates and authorizes bearer tokens through the Kubernetes API.
#[derive(Clone)]
pub struct AccessReviewer {
    client: Client,
}

impl AccessReviewer {
    /// A reviewer using the manager's own client (it needs RBAC to create TokenReviews and
    /// SubjectAccessReviews, as CAPD's manifests grant).
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// Checks `token` for `get` on `/metrics`.
    pub async fn review(&self, token: &str) -> Result<Verdict, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::TokenReview)?;
        let status = reviewed.status.unwrap_or_default();
        let (true, Some(user)) = (status.authenticated == Some(true), status.user) else {
            return Ok(Verdict::Unauthenticated);
        };
        let username = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(ReviewError::SubjectAccessReview)?;
        if decided.status.is_some_and(|s| s.allowed) {
            Ok(Verdict::Allowed)
        } else {
            Ok(Verdict::Forbidden { user: username })
        }
    }
}

/// How the endpoint is exposed.
pub enum Security {
    /// Plain HTTP, no checks (`--insecure-diagnostics`).
    Insecure,
    /// HTTPS, bearer tokens reviewed by the API server.
    Secure {
        /// The TLS configuration (certificate, versions).
        tls: Arc<ServerConfig>,
        /// Who checks tokens.
        reviewer: AccessReviewer,
    },
}

#[derive(Clone)]
struct DiagnosticsState {
    metrics: Metrics,
    reviewer: Option<AccessReviewer>,
}

/// The routes: `GET /metrics`, behind token review when a reviewer is given.
pub fn router(metrics: Metrics, reviewer: Option<AccessReviewer>) -> Router {
    Router::new()
        .route(METRICS_PATH, get(serve_metrics))
        .with_state(DiagnosticsState { metrics, reviewer })
}

/// Serves the endpoint on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    security: Security,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> io::Result<()> {
    match security {
        Security::Insecure => {
            axum::serve(listener, router(metrics, None))
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
        Security::Secure { tls, reviewer } => {
            let listener = TlsListener::new(listener, tls)?;
            axum::serve(listener, router(metrics, Some(reviewer)))
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
    }
}

async fn serve_metrics(State(state): State<DiagnosticsState>, headers: HeaderMap) -> Response {
    if let Some(reviewer) = &state.reviewer {
        let Some(token) = bearer_token(&headers) else {
            return (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: a bearer token is required\n",
            )
                .into_response();
        };
        match reviewer.review(token).await {
            Ok(Verdict::Allowed) => {}
            Ok(Verdict::Unauthenticated) => {
                return (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
            }
            Ok(Verdict::Forbidden { user }) => {
                tracing::debug!(user = %user, "Denied metrics access");
                let body = format!("Forbidden: user {user:?} may not get {METRICS_PATH}\n");
                return (StatusCode::FORBIDDEN, body).into_response();
            }
            Err(error) => {
                tracing::warn!(error = %error_chain(&error), "Metrics access review failed");
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal Server Error: authentication or authorization check failed\n",
                )
                    .into_response();
            }
        }
    }
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        state.metrics.render(),
    )
        .into_response()
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_authorization(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        assert_eq!(
            bearer_token(&with_authorization("Bearer abc.def")),
            Some("abc.def")
        );
        assert_eq!(
            bearer_token(&with_authorization("bearer   abc ")),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&with_authorization("Basic dXNlcjpwdw==")),
            None
        );
        assert_eq!(bearer_token(&with_authorization("Bearer ")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }
}
