//! The facts Podman keeps out of its Docker-compatible `/info`: whether it runs rootless, and
//! which cgroup controllers its user may use. Read once from Podman's own API
//! (`GET /v4.0.0/libpod/info`), which bollard does not speak: one HTTP/1.0 request over the same
//! socket or plain TCP address, answered with the whole body and a closed connection.

use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::docker::runtime::RuntimeError;

/// The libpod endpoint read, at the lowest API version of Podman 4.
const INFO_PATH: &str = "/v4.0.0/libpod/info";

/// Largest answer read (Podman's info is a few KiB).
const MAX_ANSWER: u64 = 1024 * 1024;

/// What the libpod info says about the host, in the words `HostInfo` uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PodmanHost {
    /// Podman runs as an unprivileged user.
    pub rootless: bool,
    /// `1` or `2`.
    pub cgroup_version: Option<String>,
    /// The cgroup controllers the engine may use (`cpu`, `memory`, `pids`, ...); on cgroup v2
    /// rootless, those delegated to its user.
    pub cgroup_controllers: Vec<String>,
}

#[derive(Deserialize)]
struct Info {
    host: Host,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Host {
    #[serde(default)]
    cgroup_version: String,
    #[serde(default)]
    cgroup_controllers: Option<Vec<String>>,
    security: Security,
}

#[derive(Deserialize)]
struct Security {
    #[serde(default)]
    rootless: bool,
}

/// Reads the libpod info of the Podman service at `host` (`unix://`, or `tcp://`/`http://`
/// without TLS: the caller does not ask for a TLS address); `None` for another scheme, where only
/// the compatible API's facts are known.
///
/// # Errors
/// [`RuntimeError::Connect`] when the service does not answer within `timeout` or answers
/// something that is not its info.
pub(super) async fn host(
    host: &str,
    timeout: Duration,
) -> Result<Option<PodmanHost>, RuntimeError> {
    let error = |detail: String| RuntimeError::Connect {
        host: host.to_string(),
        source: format!("read Podman's {INFO_PATH}: {detail}").into(),
    };
    let read = async {
        match host.split_once("://") {
            Some(("unix", path)) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                get(stream).await.map(Some)
            }
            Some(("tcp" | "http", address)) => {
                let stream = tokio::net::TcpStream::connect(address.trim_end_matches('/')).await?;
                get(stream).await.map(Some)
            }
            _ => Ok(None),
        }
    };
    let answer = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| error(format!("no answer within {timeout:?}")))?
        .map_err(|e| error(e.to_string()))?;
    answer.map(|body| parse(&body).map_err(error)).transpose()
}

/// Sends the request and returns the body of a `200` answer.
async fn get(mut stream: impl AsyncRead + AsyncWrite + Unpin) -> std::io::Result<Vec<u8>> {
    let request =
        format!("GET {INFO_PATH} HTTP/1.0\r\nHost: podman\r\nAccept: application/json\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("the answer has no header end"))?;
    let status_line = String::from_utf8_lossy(&answer[..split]);
    let status_line = status_line.lines().next().unwrap_or_default();
    if status_line.split_whitespace().nth(1) != Some("200") {
        return Err(std::io::Error::other(format!("answered {status_line:?}")));
    }
    Ok(answer.split_off(split + 4))
}

/// The facts of a libpod info body.
fn parse(body: &[u8]) -> Result<PodmanHost, String> {
    let info: Info = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let version = info.host.cgroup_version.trim_start_matches('v').to_string();
    Ok(PodmanHost {
        rootless: info.host.security.rootless,
        cgroup_version: Some(version).filter(|v| !v.is_empty()),
        cgroup_controllers: info.host.cgroup_controllers.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rootless_cgroup_version_and_controllers_are_read() {
        let body = br#"{"host":{"cgroupVersion":"v1","cgroupControllers":[],"security":{"rootless":true,"seccompEnabled":true}},"store":{}}"#;
        assert_eq!(
            parse(body).unwrap(),
            PodmanHost {
                rootless: true,
                cgroup_version: Some("1".into()),
                cgroup_controllers: Vec::new(),
            }
        );
        let body = br#"{"host":{"cgroupVersion":"v2","cgroupControllers":["cpu","memory","pids"],"security":{"rootless":false}}}"#;
        let host = parse(body).unwrap();
        assert_eq!(host.cgroup_version.as_deref(), Some("2"));
        assert_eq!(host.cgroup_controllers, ["cpu", "memory", "pids"]);
        assert!(parse(b"{}").is_err());
    }

    #[tokio::test]
    async fn the_request_is_one_get_and_only_a_200_body_is_taken() {
        let (client, mut server) = tokio::io::duplex(4096);
        let serve = tokio::spawn(async move {
            let mut request = vec![0; 256];
            let n = server.read(&mut request).await.unwrap();
            server
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}")
                .await
                .unwrap();
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        assert_eq!(get(client).await.unwrap(), b"{\"a\":1}");
        assert!(
            serve
                .await
                .unwrap()
                .starts_with("GET /v4.0.0/libpod/info HTTP/1.0\r\n")
        );

        let (client, mut server) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            let mut request = vec![0; 256];
            let _ = server.read(&mut request).await;
            let _ = server.write_all(b"HTTP/1.0 404 Not Found\r\n\r\nno").await;
        });
        let err = get(client).await.unwrap_err();
        assert!(err.to_string().contains("404"), "{err}");
    }
}
