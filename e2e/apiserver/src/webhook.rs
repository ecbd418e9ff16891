//! A minimal HTTPS client for conversion webhooks (HTTP/1.1, one request per connection).

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Failures of a webhook call.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL cannot be used.
    #[error("parse webhook url {0:?}")]
    Url(String),
    /// The CA bundle holds no usable certificate.
    #[error("load webhook caBundle")]
    CaBundle,
    /// Connecting, TLS or the exchange failed.
    #[error("call webhook")]
    Io(#[from] std::io::Error),
    /// TLS set-up failed.
    #[error("configure webhook tls")]
    Tls(#[from] rustls::Error),
    /// No answer in time.
    #[error("call webhook: timed out")]
    Timeout,
    /// The answer is not HTTP.
    #[error("read webhook response: malformed http")]
    Malformed,
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
    let tcp = TcpStream::connect((target.host.as_str(), target.port)).await?;
    let host_header = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: {host_header}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        target.path,
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let mut response = Vec::new();
    if target.tls {
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
        let mut stream = connector.connect(name, tcp).await?;
        stream.write_all(&request).await?;
        stream.flush().await?;
        read_to_end_lenient(&mut stream, &mut response).await?;
    } else {
        let mut stream = tcp;
        stream.write_all(&request).await?;
        stream.read_to_end(&mut response).await?;
    }
    parse_response(&response)
}

async fn read_to_end_lenient<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    match stream.read_to_end(out).await {
        Ok(_) => Ok(()),
        // Servers often close without close_notify; what arrived is complete thanks to Connection: close.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => Ok(()),
        Err(e) => Err(e),
    }
}

fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), WebhookError> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(WebhookError::Malformed)?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let body = &raw[split + 4..];
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or(WebhookError::Malformed)?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok((status, body.to_vec()));
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or(WebhookError::Malformed)?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]).to_string();
        let size =
            usize::from_str_radix(size_text.split(';').next().unwrap_or_default().trim(), 16)
                .map_err(|_| WebhookError::Malformed)?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            break;
        }
        if rest.len() < size {
            return Err(WebhookError::Malformed);
        }
        out.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    Ok((status, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_responses_are_reassembled() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let (code, body) = parse_response(raw).unwrap();
        assert_eq!(code, 200);
        assert_eq!(body, b"abcde");
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
