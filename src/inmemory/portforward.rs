//! The `portforward` subresource of pods, as CAPD's in-memory API server serves it
//! (`apiV1PortForward`): `httpstream.Handshake` on `X-Stream-Protocol-Version`
//! (`portforward.k8s.io`), the SPDY/3.1 upgrade of k8s.io/apimachinery's response upgrader,
//! then spdystream's server side ([`super::spdy`]): each stream is answered with an empty
//! SYN_REPLY, streams pair by `requestID` (an error and a data stream), and each complete pair
//! forwards its data stream to the pod's port. Two kinds of pods are served: an etcd pod on port
//! 2379, whose data stream is tunnelled, in process, to the cluster's fake etcd ([`super::etcd`]),
//! and a `kube-apiserver-<machine>` pod on any port, whose data stream reaches the fake API server
//! itself on its listener, as CAPD's `doPortForward` dials it (KCP reads the API server's
//! certificate expiry that way); a pod that does not exist is a 404 before any upgrade, as from
//! kube-apiserver; any other pod or port gets its error on the error stream. A WebSocket
//! upgrade (client-go's tunnelling
//! dialer) is refused as CAPD refuses it, which client-go treats as an upgrade failure and
//! falls back to SPDY.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::etcd::{grpc, members};
use super::server::Shared;
use super::spdy::{self, Decoder, Encoder, FLAG_FIN, Frame, Headers};

/// The port-forward subprotocol (`portforward.PortForwardProtocolV1Name`).
pub const PROTOCOL: &str = "portforward.k8s.io";

/// The request header naming the client's subprotocols.
pub const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";

/// The one port the fake pods serve: etcd's client port.
pub const ETCD_PORT: &str = "2379";

/// How long a pair may wait for its second stream (kubelet's and CAPD's 30 s).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection with no frame for this long is closed (CAPD's 10 min idle timeout).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Bytes buffered in each direction between a data stream and the fake etcd.
const TUNNEL_BUFFER: usize = 64 * 1024;

fn text(code: StatusCode, message: String, extra: &[(&'static str, &str)]) -> Response {
    let mut response = (
        code,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{message}\n"),
    )
        .into_response();
    for (name, value) in extra {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().append(*name, value);
        }
    }
    response
}

fn contains(headers: &HeaderMap, name: header::HeaderName, wanted: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_lowercase().contains(wanted))
}

/// GET or POST `/api/v1/namespaces/{namespace}/pods/{name}/portforward`.
pub async fn upgrade(
    State(shared): State<Shared>,
    Path((namespace, pod)): Path<(String, String)>,
    mut request: Request,
) -> Response {
    // kube-apiserver looks the pod up before it proxies anything (`pod.PortForwardLocation`):
    // a missing pod is a 404 Status, whatever the upgrade headers.
    if let Some(pods) = super::resources::find("", "v1", "pods")
        && let Err(missing) = shared.store.get(pods, &namespace, &pod)
    {
        return super::server::error(&missing);
    }
    let headers = request.headers();
    // httpstream.Handshake: comma-separated values of every X-Stream-Protocol-Version.
    let offered: Vec<String> = headers
        .get_all(PROTOCOL_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if offered.is_empty() {
        // What CAPD writes when the handshake fails: client-go's WebSocket dialer (which
        // sends no X-Stream-Protocol-Version) reads any answer but 101 as an upgrade failure.
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("unable to upgrade: {PROTOCOL_HEADER} is required"),
            &[],
        );
    }
    if !offered.iter().any(|p| p == PROTOCOL) {
        return text(
            StatusCode::FORBIDDEN,
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts [\"{PROTOCOL}\"]"
            ),
            &[("X-Accepted-Stream-Protocol-Versions", PROTOCOL)],
        );
    }
    if !contains(headers, header::CONNECTION, "upgrade")
        || !contains(headers, header::UPGRADE, "spdy/3.1")
    {
        return text(
            StatusCode::BAD_REQUEST,
            "unable to upgrade: missing upgrade headers in request".into(),
            &[(PROTOCOL_HEADER, PROTOCOL)],
        );
    }
    let on_upgrade = hyper::upgrade::on(&mut request);
    let session = Session {
        namespace,
        pod,
        shared,
    };
    tokio::spawn(async move {
        let closed = session.shared.closed.clone();
        tokio::select! {
            () = closed.cancelled() => {}
            upgraded = on_upgrade => match upgraded {
                Ok(upgraded) => session.run(TokioIo::new(upgraded)).await,
                Err(error) => tracing::debug!(%error, "A port-forward upgrade failed"),
            },
        }
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(PROTOCOL));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    response
}

/// An error and a data stream of one `requestID`, until both are there.
#[derive(Debug)]
struct Pair {
    error: Option<u32>,
    data: Option<(u32, String)>,
    since: Instant,
}

/// Data received on a data stream before its pair is complete.
#[derive(Debug, Default)]
struct Early {
    chunks: Vec<Bytes>,
    fin: bool,
}

/// One upgraded port-forward connection.
struct Session {
    namespace: String,
    pod: String,
    shared: Shared,
}

/// The state of a running session.
struct Streams {
    frames: mpsc::Sender<Frame>,
    last_stream_id: u32,
    pairs: HashMap<String, Pair>,
    early: HashMap<u32, Early>,
    tunnels: HashMap<u32, WriteHalf<DuplexStream>>,
    token: CancellationToken,
}

impl Session {
    async fn run<Io>(self, io: Io)
    where
        Io: AsyncRead + AsyncWrite + Send + 'static,
    {
        // Ends the writer, the tunnels and their etcd connections with the session, and all
        // of them with the cluster's server.
        let token = self.shared.closed.child_token();
        let (mut reader, writer) = tokio::io::split(io);
        let (frames, outgoing) = mpsc::channel(64);
        let encoder = match Encoder::new() {
            Ok(encoder) => encoder,
            Err(error) => {
                tracing::warn!(%error, "A port-forward connection could not start");
                return;
            }
        };
        tokio::spawn(write_frames(writer, encoder, outgoing, token.clone()));
        let mut streams = Streams {
            frames,
            last_stream_id: 0,
            pairs: HashMap::new(),
            early: HashMap::new(),
            tunnels: HashMap::new(),
            token: token.clone(),
        };
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::with_capacity(16 * 1024);
        let mut idle_since = Instant::now();
        'session: loop {
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(Frame::GoAway { .. })) => break 'session,
                    Ok(Some(frame)) => {
                        idle_since = Instant::now();
                        self.on_frame(&mut streams, frame).await;
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::debug!(%error, pod = %self.pod, "A port-forward connection broke the protocol");
                        break 'session;
                    }
                }
            }
            let deadline = streams
                .pairs
                .values()
                .map(|p| p.since + STREAM_CREATION_TIMEOUT)
                .min()
                .unwrap_or(idle_since + IDLE_TIMEOUT)
                .min(idle_since + IDLE_TIMEOUT);
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep_until(deadline) => {
                    if idle_since + IDLE_TIMEOUT <= Instant::now() {
                        break;
                    }
                    streams.expire_pairs().await;
                }
                read = reader.read_buf(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
            }
        }
        token.cancel();
    }

    async fn on_frame(&self, streams: &mut Streams, frame: Frame) {
        match frame {
            Frame::SynStream {
                stream_id, headers, ..
            } => self.on_stream(streams, stream_id, &headers).await,
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                streams
                    .on_data(stream_id, data, flags & FLAG_FIN != 0)
                    .await
            }
            Frame::RstStream { stream_id, .. } => {
                streams.early.remove(&stream_id);
                if let Some(mut tunnel) = streams.tunnels.remove(&stream_id) {
                    let _ = tunnel.shutdown().await;
                }
            }
            // spdystream echoes the peer's pings (odd ids from a client).
            Frame::Ping { id } if id & 1 == 1 => streams.send(Frame::Ping { id }).await,
            // SETTINGS, WINDOW_UPDATE, HEADERS, SYN_REPLY: spdystream acts on none of them here.
            _ => {}
        }
    }

    /// A new stream: checked, replied to, and paired.
    async fn on_stream(&self, streams: &mut Streams, stream_id: u32, headers: &Headers) {
        // spdystream: client stream ids are odd and increase.
        if stream_id & 1 == 0 || stream_id <= streams.last_stream_id {
            streams
                .send(Frame::RstStream {
                    stream_id,
                    status: spdy::PROTOCOL_ERROR,
                })
                .await;
            return;
        }
        streams.last_stream_id = stream_id;
        let kind = spdy::header(headers, "streamtype").unwrap_or_default();
        if kind != "error" && kind != "data" {
            // HTTPStreamReceived refuses it; httpstream resets the stream.
            tracing::debug!(pod = %self.pod, stream_type = kind, "Refused a port-forward stream");
            streams
                .send(Frame::RstStream {
                    stream_id,
                    status: spdy::CANCEL,
                })
                .await;
            return;
        }
        streams
            .send(Frame::SynReply {
                stream_id,
                flags: 0,
                headers: Vec::new(),
            })
            .await;
        // Old clients send no requestID: CAPD derives it from the stream ids.
        let request_id = spdy::header(headers, "requestid").map_or_else(
            || match kind {
                "error" => stream_id.to_string(),
                _ => stream_id.saturating_sub(2).to_string(),
            },
            str::to_string,
        );
        let pair = streams.pairs.entry(request_id.clone()).or_insert(Pair {
            error: None,
            data: None,
            since: Instant::now(),
        });
        let duplicate = if kind == "error" {
            pair.error.is_some()
        } else {
            pair.data.is_some()
        };
        if duplicate {
            // CAPD's pair.add refuses it and prints why on the pair's error stream.
            let error = pair.error;
            let message = format!(
                "error processing stream for request {request_id}: {kind} stream already assigned"
            );
            if let Some(error) = error {
                streams.data(error, Bytes::from(message), false).await;
            }
            return;
        }
        if kind == "error" {
            pair.error = Some(stream_id);
        } else {
            let port = spdy::header(headers, "port").unwrap_or_default();
            pair.data = Some((stream_id, port.to_string()));
            streams.early.insert(stream_id, Early::default());
        }
        if let Some(Pair {
            error: Some(error),
            data: Some((data, port)),
            ..
        }) = streams.pairs.get(&request_id)
        {
            let (error, data, port) = (*error, *data, port.clone());
            streams.pairs.remove(&request_id);
            self.forward(streams, error, data, &port).await;
        }
    }

    /// Where port `port` of this session's pod leads, or why it cannot be forwarded.
    fn target(&self, port: &str) -> Result<Target, String> {
        let in_kube_system = self.namespace == super::objects::KUBE_SYSTEM;
        let is_api_server = in_kube_system
            && self.pod.starts_with(API_SERVER_POD_PREFIX)
            && super::resources::find("", "v1", "pods").is_some_and(|pods| {
                self.shared
                    .store
                    .get(pods, &self.namespace, &self.pod)
                    .is_ok()
            });
        if is_api_server {
            return Ok(Target::ApiServer);
        }
        let is_etcd = in_kube_system
            && members::etcd_pods(&self.shared.store)
                .iter()
                .any(|p| p.pod == self.pod);
        if !is_etcd {
            return Err(format!(
                "pod {}/{} is neither an etcd nor an API server pod of this fake cluster",
                self.namespace, self.pod
            ));
        }
        if port != ETCD_PORT {
            return Err(format!("the fake etcd pods serve port {ETCD_PORT} only"));
        }
        self.shared
            .etcd
            .server_config(&self.pod)
            .map(Target::Etcd)
            .map_err(|e| e.to_string())
    }

    /// Forwards a complete pair: tunnels the data stream to the fake etcd member, or writes
    /// why not on the error stream; either way both streams are closed at the end, as CAPD's
    /// `portForward` closes them.
    async fn forward(&self, streams: &mut Streams, error: u32, data: u32, port: &str) {
        let early = streams.early.remove(&data).unwrap_or_default();
        let target = match self.target(port) {
            Ok(target) => target,
            Err(reason) => {
                let message = format!(
                    "error forwarding port {port} to pod {}/{}: {reason}",
                    self.namespace, self.pod
                );
                tracing::info!(pod = %self.pod, %port, %reason, "Refused a port-forward");
                streams.data(error, Bytes::from(message), true).await;
                streams.data(data, Bytes::new(), true).await;
                return;
            }
        };
        let (ours, theirs) = tokio::io::duplex(TUNNEL_BUFFER);
        match target {
            Target::Etcd(config) => {
                tokio::spawn(grpc::serve(
                    theirs,
                    config,
                    self.shared.store.clone(),
                    self.pod.clone(),
                    streams.token.clone(),
                ));
            }
            Target::ApiServer => {
                tokio::spawn(dial_api_server(
                    theirs,
                    self.shared.port,
                    streams.token.clone(),
                ));
            }
        }
        let (from_etcd, mut to_etcd) = tokio::io::split(ours);
        for chunk in early.chunks {
            if to_etcd.write_all(&chunk).await.is_err() {
                break;
            }
        }
        if early.fin {
            let _ = to_etcd.shutdown().await;
        } else {
            streams.tunnels.insert(data, to_etcd);
        }
        tokio::spawn(pump(
            from_etcd,
            error,
            data,
            streams.frames.clone(),
            streams.token.clone(),
        ));
    }
}

impl Streams {
    async fn send(&self, frame: Frame) {
        // The writer is gone only when the session ends.
        let _ = self.frames.send(frame).await;
    }

    async fn data(&self, stream_id: u32, data: Bytes, fin: bool) {
        let flags = if fin { FLAG_FIN } else { 0 };
        self.send(Frame::Data {
            stream_id,
            flags,
            data,
        })
        .await;
    }

    async fn on_data(&mut self, stream_id: u32, data: Bytes, fin: bool) {
        if let Some(early) = self.early.get_mut(&stream_id) {
            early.chunks.push(data);
            early.fin |= fin;
            return;
        }
        let Some(tunnel) = self.tunnels.get_mut(&stream_id) else {
            // The error stream's (unread, as in CAPD) or a closed stream's.
            return;
        };
        let failed = !data.is_empty() && tunnel.write_all(&data).await.is_err();
        if (fin || failed)
            && let Some(mut tunnel) = self.tunnels.remove(&stream_id)
        {
            let _ = tunnel.shutdown().await;
        }
    }

    /// Pairs still missing a stream after [`STREAM_CREATION_TIMEOUT`] are dropped, with an
    /// error on their error stream when they have one.
    async fn expire_pairs(&mut self) {
        let now = Instant::now();
        let expired: Vec<String> = self
            .pairs
            .iter()
            .filter(|(_, p)| p.since + STREAM_CREATION_TIMEOUT <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for request_id in expired {
            if let Some(pair) = self.pairs.remove(&request_id) {
                if let Some((data, _)) = pair.data {
                    self.early.remove(&data);
                }
                if let Some(error) = pair.error {
                    let message = format!("request {request_id}: timed out waiting for streams");
                    self.data(error, Bytes::from(message), false).await;
                }
            }
        }
    }
}

/// Where a forwarded data stream leads.
enum Target {
    /// The fake etcd member of the pod, with its serving configuration.
    Etcd(std::sync::Arc<rustls::ServerConfig>),
    /// The fake API server's own listener.
    ApiServer,
}

/// The name of an API server pod without its machine (`kube-apiserver-<machine>`).
const API_SERVER_POD_PREFIX: &str = "kube-apiserver-";

/// Carries a data stream to the fake API server's listener on loopback and back, until either
/// side ends or the session does.
async fn dial_api_server(mut stream: DuplexStream, port: u16, token: CancellationToken) {
    let mut tcp = match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
        Ok(tcp) => tcp,
        Err(error) => {
            tracing::info!(port, %error, "A port-forward could not reach the fake API server");
            return;
        }
    };
    tokio::select! {
        () = token.cancelled() => {}
        _ = tokio::io::copy_bidirectional(&mut stream, &mut tcp) => {}
    }
}

/// Sends what the fake etcd writes as DATA frames of the data stream; at its end, closes the
/// data and error streams.
async fn pump<R: AsyncRead + Unpin>(
    mut from_etcd: R,
    error: u32,
    data: u32,
    frames: mpsc::Sender<Frame>,
    token: CancellationToken,
) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let read = tokio::select! {
            () = token.cancelled() => return,
            read = from_etcd.read(&mut buf) => read,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let frame = Frame::Data {
            stream_id: data,
            flags: 0,
            data: Bytes::copy_from_slice(&buf[..n]),
        };
        if frames.send(frame).await.is_err() {
            return;
        }
    }
    for stream_id in [data, error] {
        let fin = Frame::Data {
            stream_id,
            flags: FLAG_FIN,
            data: Bytes::new(),
        };
        if frames.send(fin).await.is_err() {
            return;
        }
    }
}

/// Encodes and writes the session's frames in order, until the session ends.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut encoder: Encoder,
    mut frames: mpsc::Receiver<Frame>,
    token: CancellationToken,
) {
    let mut out = BytesMut::with_capacity(16 * 1024);
    loop {
        let frame = tokio::select! {
            () = token.cancelled() => break,
            frame = frames.recv() => frame,
        };
        let Some(frame) = frame else { break };
        out.clear();
        if let Err(error) = encoder.encode(&frame, &mut out) {
            tracing::debug!(%error, "A port-forward frame could not be encoded");
            break;
        }
        if writer.write_all(&out).await.is_err() {
            break;
        }
    }
    token.cancel();
    let _ = writer.shutdown().await;
}
