//! [`EngineProxy`]: a fault-injecting proxy in front of the Docker engine's socket, for outage
//! tests (never shipped). The real engine keeps running; the manager, given the proxy's socket as
//! `DOCKER_HOST`, sees it go away, hang or cut its streams, while the suite keeps using the real
//! engine directly.
//!
//! It copies bytes both ways and understands nothing of HTTP beyond spotting the request lines
//! of streaming endpoints, so HTTP/1.1 upgrades (exec and attach) and half-closed connections work
//! in pass-through. [`Mode`] switches at run time:
//!
//! - [`Mode::PassThrough`]: every connection is forwarded.
//! - [`Mode::Refuse`]: the socket stops listening (connections are refused, as with a stopped
//!   engine whose socket file is left) and open connections are cut.
//! - [`Mode::Hang`]: connections are accepted and nothing is forwarded either way, on new and open
//!   connections alike; forwarding resumes where it stopped when the mode changes back, as with
//!   an engine that answers late.
//! - [`Mode::CutStreams`]: a connection whose request asks for a stream (`/events`, exec start,
//!   attach, logs, stats, image pull or export) is cut as soon as part of the answer went through;
//!   other requests pass.
//!
//! The proxy runs on a thread and runtime of its own, so a scenario's blocking calls never stall it.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;

/// What the proxy does with connections; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything.
    PassThrough,
    /// Refuse new connections and cut open ones.
    Refuse,
    /// Accept, but forward nothing until the mode changes.
    Hang,
    /// Cut streaming responses once they started; forward the rest.
    CutStreams,
}

/// Where the real engine listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// A unix socket (`unix:///var/run/docker.sock`).
    Unix(PathBuf),
    /// A plain TCP address (`tcp://127.0.0.1:2375`, as `host:port`).
    Tcp(String),
}

impl Upstream {
    /// The engine this process's environment names (`DOCKER_HOST`, default the local socket).
    /// Panics for an engine reached over TLS: the proxy copies bytes and cannot terminate TLS.
    pub fn from_env() -> Upstream {
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string());
        let tls = std::env::var("DOCKER_TLS_VERIFY").is_ok_and(|v| !v.is_empty());
        Self::parse(&host, tls)
    }

    fn parse(host: &str, tls: bool) -> Upstream {
        match host.split_once("://") {
            Some(("unix", path)) => Upstream::Unix(PathBuf::from(path)),
            Some(("tcp" | "http", address)) if !tls => {
                Upstream::Tcp(address.trim_end_matches('/').to_string())
            }
            _ => panic!("the engine proxy forwards a unix socket or plain TCP, not {host}"),
        }
    }

    async fn connect(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Upstream::Unix(path) => Box::pin(UnixStream::connect(path).await?),
            Upstream::Tcp(address) => Box::pin(TcpStream::connect(address).await?),
        })
    }
}

trait Io: AsyncRead + AsyncWrite + Send {}
impl<T: AsyncRead + AsyncWrite + Send> Io for T {}
type Stream = Pin<Box<dyn Io>>;

/// A running proxy; dropping it stops it and cuts every connection.
pub struct EngineProxy {
    socket: PathBuf,
    mode: watch::Sender<Mode>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl EngineProxy {
    /// A proxy in pass-through to the engine of this process's environment.
    pub fn start() -> EngineProxy {
        Self::start_to(Upstream::from_env())
    }

    /// A proxy in pass-through to `upstream`, listening on a socket in a new temporary directory.
    pub fn start_to(upstream: Upstream) -> EngineProxy {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        let (mode, watched) = watch::channel(Mode::PassThrough);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let path = socket.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(serve(path, upstream, watched, ready_tx));
            // Connections still open are cut with the runtime.
            runtime.shutdown_timeout(Duration::from_millis(100));
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the engine proxy listens");
        EngineProxy {
            socket,
            mode,
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// The `DOCKER_HOST` that reaches the engine through the proxy.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The proxy's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Switches the mode; takes effect at once on new and open connections.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        // Closing the channel stops the accept loop and every connection.
        let (closed, _) = watch::channel(Mode::Refuse);
        drop(std::mem::replace(&mut self.mode, closed));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections while the mode lets it; stops when the proxy is dropped.
async fn serve(
    path: PathBuf,
    upstream: Upstream,
    mut mode: watch::Receiver<Mode>,
    ready: std::sync::mpsc::Sender<()>,
) {
    let mut listener = Some(bind(&path));
    let _ = ready.send(());
    loop {
        let current = *mode.borrow_and_update();
        if current == Mode::Refuse {
            // Not listening on an existing socket file: connections are refused.
            listener = None;
        } else if listener.is_none() {
            listener = Some(bind(&path));
        }
        let accepted = match &listener {
            Some(listener) => tokio::select! {
                accepted = listener.accept() => Some(accepted),
                changed = mode.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    None
                }
            },
            None => {
                if mode.changed().await.is_err() {
                    return;
                }
                None
            }
        };
        if let Some(Ok((client, _))) = accepted {
            tokio::spawn(relay(client, upstream.clone(), mode.clone()));
        }
    }
}

fn bind(path: &Path) -> UnixListener {
    let _ = std::fs::remove_file(path);
    UnixListener::bind(path).unwrap()
}

/// Copies one connection both ways under the current mode.
async fn relay(client: UnixStream, upstream: Upstream, mut mode: watch::Receiver<Mode>) {
    // A hung engine accepts, then never answers: connect once forwarding is allowed.
    loop {
        let current = *mode.borrow_and_update();
        match current {
            Mode::Refuse => return,
            Mode::Hang => {
                if mode.changed().await.is_err() {
                    return;
                }
            }
            Mode::PassThrough | Mode::CutStreams => break,
        }
    }
    let Ok(server) = upstream.connect().await else {
        return;
    };
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, mut server_write) = tokio::io::split(server);
    let (mut up, mut down) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let (mut client_open, mut server_open) = (true, true);
    let mut requests = RequestLines::default();
    while client_open || server_open {
        let current = *mode.borrow_and_update();
        match current {
            Mode::Refuse => return,
            Mode::Hang => {
                if mode.changed().await.is_err() {
                    return;
                }
                continue;
            }
            Mode::PassThrough | Mode::CutStreams => {}
        }
        tokio::select! {
            read = client_read.read(&mut up), if client_open => match read {
                Ok(0) | Err(_) => {
                    client_open = false;
                    let _ = server_write.shutdown().await;
                }
                Ok(n) => {
                    requests.scan(&up[..n]);
                    if server_write.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
            },
            read = server_read.read(&mut down), if server_open => match read {
                Ok(0) | Err(_) => {
                    server_open = false;
                    let _ = client_write.shutdown().await;
                }
                Ok(n) => {
                    // A stream is cut as soon as part of it went through (for an exec: the
                    // switch of protocols).
                    let cut = requests.streaming && *mode.borrow() == Mode::CutStreams;
                    if client_write.write_all(&down[..n]).await.is_err() || cut {
                        return;
                    }
                }
            },
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Spots streaming requests in what a client sends: the request line at the start of each line.
#[derive(Debug, Default)]
struct RequestLines {
    line: Vec<u8>,
    overflow: bool,
    streaming: bool,
}

/// Longest line kept for matching; request lines of the Docker API are shorter.
const MAX_LINE: usize = 1024;

impl RequestLines {
    /// Reads what the client sent.
    fn scan(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                // Each request of a kept-alive connection decides for itself.
                if let Some(streaming) =
                    (!self.overflow).then(|| request_line(&self.line)).flatten()
                {
                    self.streaming = streaming;
                }
                self.line.clear();
                self.overflow = false;
            } else if self.line.len() < MAX_LINE {
                self.line.push(byte);
            } else {
                self.overflow = true;
            }
        }
    }
}

/// Whether an HTTP request line asks for a stream: `/events`, exec start, attach, logs, stats,
/// image pull (`/images/create`) or export (`/images/<name>/get`, `/images/get`), with or
/// without the API version prefix.
pub fn is_streaming_request(line: &[u8]) -> bool {
    request_line(line) == Some(true)
}

/// For an HTTP request line, whether it asks for a stream; `None` for any other line.
fn request_line(line: &[u8]) -> Option<bool> {
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return None;
    };
    let methods = ["GET", "POST", "PUT", "DELETE", "HEAD"];
    if !methods.contains(&method) || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return None;
    }
    let path = target.split('?').next().unwrap_or_default();
    let path = match path.strip_prefix("/v") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => {
            rest.find('/').map_or("", |slash| &rest[slash..])
        }
        _ => path,
    };
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    Some(matches!(
        segments.as_slice(),
        ["events"]
            | ["exec", _, "start"]
            | ["containers", _, "attach" | "logs" | "stats"]
            | ["images", "create" | "get"]
            | ["images", .., "get"]
    ))
}

#[cfg(test)]
#[path = "engine_proxy_tests.rs"]
mod tests;
