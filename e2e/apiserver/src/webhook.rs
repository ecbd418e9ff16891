//! An HTTPS client for conversion webhooks on hyper's HTTP/1.1 client, one request per
//! connection: hyper frames the answer (`Content-Length`, chunked), so a body cut short is an
//! error, as it is for kube-apiserver's Go client.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONNECTION, CONTENT_TYPE, HOST};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Failures of a webhook call.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL cannot be used.
    #[error("parse webhook url {0:?}")]
    Url(String),
    /// The CA bundle holds no usable certificate.
    #[error("load webhook caBundle")]
    CaBundle,
    /// Connecting or the TLS handshake failed.
    #[error("connect to webhook")]
    Io(#[from] std::io::Error),
    /// TLS set-up failed.
    #[error("configure webhook tls")]
    Tls(#[from] rustls::Error),
    /// The request could not be built.
    #[error("build webhook request")]
    Request(#[from] http::Error),
    /// The HTTP exchange failed: refused, reset, malformed or cut short.
    #[error("call webhook")]
    Http(#[from] hyper::Error),
    /// No answer in time.
    #[error("call webhook: timed out")]
    Timeout,
}

struct Target {
    tls: bool,
    host: String,
    port: u16,
    path: String,
}

fn parse_url(url: &str) -> Result<Target, WebhookError> {
    let bad = || WebhookError::Url(url.to_string());
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(bad());
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = if let Some(stripped) = authority.strip_prefix('[') {
        let (h, after) = stripped.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None => default_port,
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad())?),
            None => (authority.to_string(), default_port),
        }
    };
    Ok(Target {
        tls,
        host,
        port,
        path,
    })
}

/// An error with its sources, `: `-separated, for messages shown to API clients.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// POSTs a JSON body and returns the status code and body of the answer.
pub async fn post_json(
    url: &str,
    ca_bundle: Option<&[u8]>,
    server_name: Option<&str>,
    body: &[u8],
    timeout: Duration,
) -> Result<(u16, Vec<u8>), WebhookError> {
    tokio::time::timeout(timeout, exchange(url, ca_bundle, server_name, body))
        .await
        .map_err(|_| WebhookError::Timeout)?
}

async fn exchange(
    url: &str,
    ca_bundle: Option<&[u8]>,
    server_name: Option<&str>,
    body: &[u8],
) -> Result<(u16, Vec<u8>), WebhookError> {
    let target = parse_url(url)?;
    let host_header = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let request = http::Request::post(&target.path)
        .header(HOST, host_header)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json")
        .header(CONNECTION, "close")
        .body(Full::new(Bytes::copy_from_slice(body)))?;
    let tcp = TcpStream::connect((target.host.as_str(), target.port)).await?;
    if !target.tls {
        return send(tcp, request).await;
    }
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca_bundle {
        for cert in CertificateDer::pem_slice_iter(pem).flatten() {
            roots.add(cert)?;
        }
        if roots.is_empty() {
            return Err(WebhookError::CaBundle);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(server_name.unwrap_or(&target.host).to_string())
        .map_err(|_| WebhookError::Url(url.to_string()))?;
    let stream = connector.connect(name, tcp).await?;
    send(stream, request).await
}

/// Aborts the connection task when the call ends, in time or not.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends one request over `stream` and reads the whole answer.
async fn send<S>(
    stream: S,
    request: http::Request<Full<Bytes>>,
) -> Result<(u16, Vec<u8>), WebhookError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let _connection = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "Webhook connection ended");
        }
    }));
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body.to_vec()))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A plain-HTTP server that answers one request with `answer` and closes the connection.
    async fn answering(answer: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/convert", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.ends_with(b"{}") {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            conn.write_all(answer).await.unwrap();
        });
        url
    }

    async fn post(url: &str) -> Result<(u16, Vec<u8>), WebhookError> {
        post_json(url, None, None, b"{}", Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn a_body_cut_short_of_its_content_length_is_an_error() {
        let url = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"response\":").await;
        let err = post(&url).await.unwrap_err();
        assert!(matches!(err, WebhookError::Http(_)), "{}", chain(&err));
    }

    #[tokio::test]
    async fn a_body_cut_inside_a_chunk_is_an_error() {
        let url =
            answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"resp").await;
        assert!(matches!(post(&url).await, Err(WebhookError::Http(_))));
    }

    #[tokio::test]
    async fn whole_answers_are_read_with_their_status() {
        let url = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcde").await;
        assert_eq!(post(&url).await.unwrap(), (200, b"abcde".to_vec()));
        let url = answering(
            b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .await;
        assert_eq!(post(&url).await.unwrap(), (500, b"abcde".to_vec()));
    }

    #[tokio::test]
    async fn an_answer_that_is_not_http_is_an_error() {
        let url = answering(b"SSH-2.0-OpenSSH_9.6\r\n").await;
        assert!(matches!(post(&url).await, Err(WebhookError::Http(_))));
    }

    #[test]
    fn urls_with_ipv6_hosts_parse() {
        let t = parse_url("https://[::1]:8443/convert").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 8443, "/convert")
        );
    }
}
