//! The HTTPS server: one axum router for `/convert` and the admission endpoints, served with the
//! reloading certificate. Bodies are checked before decoding (JSON content type, size limits) and
//! every request is judged on a blocking thread, so one large review cannot stall the others.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::certs::{self, CertificateError, ServingCertificate};
use super::{
    ADMISSION_BODY_LIMIT, CONVERSION_BODY_LIMIT, CONVERT_PATH, Endpoint, Reply, Settings,
    admission, conversion,
};
use crate::serving::TlsListener;
use crate::serving::TlsMinVersion;
use crate::serving::{ListenAddr, ListenError};

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The serving certificate is unusable.
    #[error("failed to load the webhook serving certificate")]
    Certificate(#[from] CertificateError),
    /// The port could not be bound.
    #[error("failed to listen for webhook requests")]
    Listen(#[from] ListenError),
    /// The bound socket could not be used.
    #[error("failed to start the webhook TLS listener")]
    Io(#[from] io::Error),
}

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Interface to listen on; `None` for every interface (CAPD's `:9443`).
    pub host: Option<String>,
    /// `--webhook-port`; 0 picks a free port (tests).
    pub port: u16,
    /// `--webhook-cert-dir`.
    pub cert_dir: PathBuf,
    /// `--webhook-cert-name` (a file in `cert_dir`).
    pub cert_name: String,
    /// `--webhook-key-name` (a file in `cert_dir`).
    pub key_name: String,
    /// `--tls-min-version`.
    pub tls_min_version: TlsMinVersion,
    /// How often to look for a rotated certificate.
    pub reload_interval: Duration,
    /// What the rules depend on.
    pub settings: Settings,
}

/// A bound webhook server with its certificate loaded, ready to serve.
#[derive(Debug)]
pub struct WebhookServer {
    listener: TcpListener,
    certificate: Arc<ServingCertificate>,
    tls: Arc<rustls::ServerConfig>,
    reload_interval: Duration,
    settings: Settings,
}

impl WebhookServer {
    /// Loads the certificate and binds the port. Fails when either is impossible, as
    /// controller-runtime's webhook server does: without them the API server cannot reach us.
    pub async fn bind(config: WebhookConfig) -> Result<Self, WebhookError> {
        let WebhookConfig {
            host,
            port,
            cert_dir,
            cert_name,
            key_name,
            tls_min_version,
            reload_interval,
            settings,
        } = config;
        let certificate =
            ServingCertificate::load(&cert_dir.join(&cert_name), &cert_dir.join(&key_name))?;
        let tls = certificate.server_config(tls_min_version)?;
        let address = ListenAddr::Tcp { host, port };
        let listener = address
            .bind()
            .await?
            .ok_or_else(|| io::Error::other("the webhook listen address is disabled"))?;
        Ok(Self {
            listener,
            certificate,
            tls,
            reload_interval,
            settings,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The certificate being served.
    pub fn certificate(&self) -> &Arc<ServingCertificate> {
        &self.certificate
    }

    /// Serves until `stop` is cancelled, reloading the certificate when its files change.
    pub async fn serve(self, stop: CancellationToken) -> io::Result<()> {
        let watcher = tokio::spawn(
            self.certificate
                .clone()
                .watch(self.reload_interval, stop.child_token()),
        );
        let listener = TlsListener::new(self.listener, self.tls)?;
        let served = axum::serve(listener, router(self.settings))
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        watcher.abort();
        served
    }
}

/// The default interval between certificate checks.
pub const DEFAULT_RELOAD_INTERVAL: Duration = certs::RELOAD_INTERVAL;

impl WebhookError {
    /// Whether the start failed only because a certificate file does not exist (yet).
    pub fn is_missing_certificate(&self) -> bool {
        matches!(
            self,
            WebhookError::Certificate(CertificateError::Read { source, .. })
                if source.kind() == io::ErrorKind::NotFound
        )
    }
}

/// Waits until the certificate files exist (checking every `config.reload_interval`), then
/// binds and serves until `stop` is cancelled. For a manager started before its certificate
/// was written, e.g. outside a cluster; in a pod the mounted Secret is there from the start.
pub async fn serve_once_certificate_exists(
    config: WebhookConfig,
    stop: CancellationToken,
) -> Result<(), WebhookError> {
    let mut ticker = tokio::time::interval(config.reload_interval);
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            _ = ticker.tick() => {}
        }
        match WebhookServer::bind(config.clone()).await {
            Ok(server) => {
                tracing::info!(
                    cert_dir = %config.cert_dir.display(),
                    "Found the webhook serving certificate; serving webhooks"
                );
                return Ok(server.serve(stop).await?);
            }
            Err(error) if error.is_missing_certificate() => {}
            Err(error) => return Err(error),
        }
    }
}

/// Which answer format a route uses for errors found before its review is decoded.
#[derive(Clone, Copy)]
enum Protocol {
    Admission(Endpoint),
    Conversion,
}

/// The routes: `/convert` and every admission endpoint ([`Endpoint::ALL`]).
pub fn router(settings: Settings) -> Router {
    let mut router = Router::new().route(
        CONVERT_PATH,
        post(
            move |headers: HeaderMap, body: Result<Bytes, BytesRejection>| {
                handle(Protocol::Conversion, settings, headers, body)
            },
        )
        .layer(DefaultBodyLimit::max(CONVERSION_BODY_LIMIT)),
    );
    for endpoint in Endpoint::ALL {
        router = router.route(
            &endpoint.path(),
            post(
                move |headers: HeaderMap, body: Result<Bytes, BytesRejection>| {
                    handle(Protocol::Admission(endpoint), settings, headers, body)
                },
            )
            .layer(DefaultBodyLimit::max(ADMISSION_BODY_LIMIT)),
        );
    }
    router
}

async fn handle(
    protocol: Protocol,
    settings: Settings,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let refuse = |status: u16, message: String| match protocol {
        Protocol::Admission(_) => admission::refuse(status, message),
        Protocol::Conversion => conversion::refuse(status, message),
    };
    if let Some(problem) = content_type_problem(headers.get(header::CONTENT_TYPE)) {
        return refuse(400, problem);
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                let limit = match protocol {
                    Protocol::Admission(_) => ADMISSION_BODY_LIMIT,
                    Protocol::Conversion => CONVERSION_BODY_LIMIT,
                };
                format!("the request body is larger than the limit of {limit} bytes")
            } else {
                format!("failed to read the request body: {}", rejection.body_text())
            };
            return refuse(status.as_u16(), message);
        }
    };
    // Decoding and converting large reviews is CPU work: keep it off the async workers.
    let judged = tokio::task::spawn_blocking(move || match protocol {
        Protocol::Admission(endpoint) => admission::review(endpoint, &settings, &body),
        Protocol::Conversion => conversion::review(&body),
    })
    .await;
    match judged {
        Ok(reply) => reply,
        Err(error) => {
            tracing::error!(error = %error, "A webhook request handler failed");
            refuse(500, "internal error while handling the request".into())
        }
    }
}

/// Why a request's content type is not JSON; `None` when it is.
fn content_type_problem(value: Option<&HeaderValue>) -> Option<String> {
    let Some(value) = value else {
        return Some("the request has no Content-Type: expected application/json".into());
    };
    let text = value.to_str().unwrap_or("");
    let mime = text.split(';').next().unwrap_or("").trim();
    (!mime.eq_ignore_ascii_case("application/json"))
        .then(|| format!("unsupported Content-Type {text:?}: expected application/json"))
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body,
        )
            .into_response()
    }
}
