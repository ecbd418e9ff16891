//! Kubernetes clients as the manager builds them: our user agent, client-go's token-bucket
//! rate limit, and a bound on the answer to every request that is not a stream. The management
//! cluster's client and the workload clusters' clients are all built here.

use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue, Request};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt};
use kube::{Client, Config};
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, Layer, Service, ServiceBuilder};

use super::ratelimit::RateLimitLayer;

/// Time the management cluster's API server has to answer a request: kube-apiserver's own
/// `--request-timeout` default, past which it would have given up itself. kube's client has no
/// such bound, and a request on a connection that went dead would hold its reconcile until the
/// reconcile's own timeout, without a word.
pub const MANAGEMENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Time a workload cluster's API server has to answer a request, as Cluster API's cluster cache
/// allows: the request crosses the cluster's load balancer, whose backends go away when control
/// planes are deleted.
pub const WORKLOAD_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// User agent of every request the manager sends.
pub const USER_AGENT: &str = "capd-rs-controller-manager";

/// The HTTP client could not be built (TLS material, proxy).
#[derive(Debug, thiserror::Error)]
#[error("build the Kubernetes client for {url}")]
pub struct ClientError {
    /// The API server URL.
    pub url: String,
    /// Why.
    #[source]
    pub source: kube::Error,
}

/// How long a connection to an API server may sit idle in the client's pool before it is
/// closed: client-go's `IdleConnTimeout` (90 s, hyper's default too). kube builds hyper's pool
/// without a timer, so the timeout is never enforced and every connection the peak of
/// concurrent requests opened stays open for good; [`build_client`] gives the pool its timer.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Builds the client: our user agent, client-go's token-bucket limit (`qps`, `burst`), and
/// `timeout` for the answer to each request that is not a stream ([`AnswerTimeoutLayer`]).
/// Idle connections are closed after [`POOL_IDLE_TIMEOUT`].
pub fn build_client(
    mut config: Config,
    qps: f32,
    burst: u32,
    timeout: Duration,
) -> Result<Client, ClientError> {
    let url = config.cluster_url.to_string();
    config.headers.push((
        HeaderName::from_static("user-agent"),
        HeaderValue::from_static(USER_AGENT),
    ));
    // Kube's own stack where only it knows how (see [`with_idle_timeout`]).
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        let builder =
            ClientBuilder::try_from(config).map_err(|source| ClientError { url, source })?;
        return Ok(builder
            .with_layer(&RateLimitLayer::new(qps, burst))
            .with_layer(&AnswerTimeoutLayer { timeout })
            .build());
    }
    with_idle_timeout(config, qps, burst, timeout, POOL_IDLE_TIMEOUT)
        .map_err(|source| ClientError { url, source })
}

/// The client on the HTTP stack kube's `ClientBuilder::try_from` makes (base URL, retry of the
/// API server's 429 and 503 answers, authentication, extra headers, rustls, connect, read and
/// write timeouts; not its debug-level request spans), with a pool that closes connections idle
/// for `idle`.
/// Two cases keep kube's stack, whose pool never closes them: a proxy (kube's proxy connectors)
/// and an exec plugin (only kube reads when the plugin's client certificate expires).
fn with_idle_timeout(
    config: Config,
    qps: f32,
    burst: u32,
    timeout: Duration,
    idle: Duration,
) -> Result<Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let pool: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(idle)
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(AnswerTimeoutLayer { timeout })
        .layer(RateLimitLayer::new(qps, burst))
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pool);
    Ok(Client::new(
        BoxService::new(service),
        config.default_namespace,
    ))
}

/// A request the API server did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer from the API server within {timeout:?} to {method} {path}")]
pub struct Unanswered {
    /// The request's method.
    pub method: http::Method,
    /// The request's path (no query: it may carry selectors, never secrets, but is long).
    pub path: String,
    /// The bound.
    pub timeout: Duration,
}

/// Bounds the wait for the answer (status and headers) to each request, except streams: watches
/// and followed logs, which stay open by design. A request past its bound fails with
/// [`Unanswered`] and is logged, naming it.
#[derive(Debug, Clone, Copy)]
pub struct AnswerTimeoutLayer {
    /// The bound.
    pub timeout: Duration,
}

impl<S> Layer<S> for AnswerTimeoutLayer {
    type Service = AnswerTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AnswerTimeout {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The service of [`AnswerTimeoutLayer`].
#[derive(Debug, Clone)]
pub struct AnswerTimeout<S> {
    inner: S,
    timeout: Duration,
}

/// Whether a request opens a stream: a watch, or logs followed.
fn is_stream(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1" | "follow=true" | "follow=1"))
    })
}

impl<S, B> Service<Request<B>> for AnswerTimeout<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
    S::Error: From<Unanswered>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if is_stream(request.uri()) {
            return Box::pin(self.inner.call(request));
        }
        let (method, path) = (request.method().clone(), request.uri().path().to_string());
        let timeout = self.timeout;
        let answer = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(timeout, answer).await {
                Ok(answer) => answer,
                Err(_) => {
                    tracing::warn!(
                        %method,
                        path,
                        timeout_s = timeout.as_secs(),
                        "The API server did not answer in time"
                    );
                    Err(Unanswered {
                        method,
                        path,
                        timeout,
                    }
                    .into())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_client_sends_our_user_agent() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 4096];
            let n = socket.read(&mut request).await.unwrap();
            let body = r#"{"major":"1","minor":"34","gitVersion":"v1.34.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&request[..n]).to_lowercase()
        });
        let client = build_client(
            Config::new(url.parse().unwrap()),
            10.0,
            10,
            MANAGEMENT_REQUEST_TIMEOUT,
        )
        .unwrap();
        let version = client.apiserver_version().await.unwrap();
        assert_eq!(version.git_version, "v1.34.0");
        let request = server.await.unwrap();
        assert!(request.starts_with("get /version"), "{request}");
        assert!(
            request.contains("user-agent: capd-rs-controller-manager"),
            "{request}"
        );
    }

    #[tokio::test]
    async fn a_request_without_an_answer_fails_naming_it_and_a_watch_is_not_bounded() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Accepts connections and reads requests, and never answers.
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let timeout = Duration::from_millis(300);
        let client = build_client(Config::new(url.parse().unwrap()), 10.0, 10, timeout).unwrap();

        let error = client.apiserver_version().await.unwrap_err();
        let chain = crate::runtime::error_chain(&error);
        assert!(
            chain.contains("no answer from the API server within 300ms to GET /version"),
            "{chain}"
        );

        // A watch waits on: still waiting long after the bound.
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, "default");
        let params = kube::api::WatchParams::default();
        let watch = api.watch(&params, "0");
        let waited = tokio::time::timeout(timeout * 4, watch).await;
        assert!(waited.is_err(), "the watch is still waiting for its answer");
        server.abort();
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Answers one request on a kept-alive connection, then waits for the client to close it.
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 4096];
            let _ = socket.read(&mut request).await.unwrap();
            let body = r#"{"major":"1","minor":"34","gitVersion":"v1.34.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            let answered = std::time::Instant::now();
            let closed = socket.read(&mut request).await.unwrap();
            (closed, answered.elapsed())
        });
        let idle = Duration::from_millis(200);
        let client = with_idle_timeout(
            Config::new(url.parse().unwrap()),
            10.0,
            10,
            MANAGEMENT_REQUEST_TIMEOUT,
            idle,
        )
        .unwrap();
        client.apiserver_version().await.unwrap();
        let (read, after) = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the client closes its idle connection")
            .unwrap();
        assert_eq!(read, 0, "the connection ends without another request");
        assert!(
            after >= idle,
            "closed after {after:?}, before it was idle for {idle:?}"
        );
        // The client is still usable: alive until here, so it was the pool that closed it.
        drop(client);
    }

    #[test]
    fn watches_and_followed_logs_are_streams() {
        let stream = |uri: &str| is_stream(&uri.parse().unwrap());
        assert!(stream("/api/v1/pods?watch=true&resourceVersion=1"));
        assert!(stream("/api/v1/namespaces/a/pods/p/log?follow=true"));
        assert!(!stream("/api/v1/pods?labelSelector=watch%3Dtrue"));
        assert!(!stream("/api/v1/namespaces/a/configmaps/c"));
    }
}
