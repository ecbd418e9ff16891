//! Kubernetes clients as the manager builds them: our user agent and client-go's token-bucket
//! rate limit. The management cluster's client and the workload clusters' clients are all built
//! here.

use http::{HeaderName, HeaderValue};
use kube::client::ClientBuilder;
use kube::{Client, Config};

use super::ratelimit::RateLimitLayer;

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

/// Builds the client: our user agent, and client-go's token-bucket limit (`qps`, `burst`).
pub fn build_client(mut config: Config, qps: f32, burst: u32) -> Result<Client, ClientError> {
    let url = config.cluster_url.to_string();
    config.headers.push((
        HeaderName::from_static("user-agent"),
        HeaderValue::from_static(USER_AGENT),
    ));
    let builder = ClientBuilder::try_from(config).map_err(|source| ClientError { url, source })?;
    Ok(builder.with_layer(&RateLimitLayer::new(qps, burst)).build())
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
        let client = build_client(Config::new(url.parse().unwrap()), 10.0, 10).unwrap();
        let version = client.apiserver_version().await.unwrap();
        assert_eq!(version.git_version, "v1.34.0");
        let request = server.await.unwrap();
        assert!(request.starts_with("get /version"), "{request}");
        assert!(
            request.contains("user-agent: capd-rs-controller-manager"),
            "{request}"
        );
    }
}
