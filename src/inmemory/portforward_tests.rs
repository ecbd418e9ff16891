//! The `portforward` subresource and the fake etcd behind it, driven over the real TLS listener
//! the way KCP drives them: an HTTP/1.1 SPDY/3.1 upgrade, an error and a data stream of
//! request 0 for port 2379, then TLS (server name `etcd-<machine>`, ALPN h2) and gRPC calls
//! over the data stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::Clusters;
use super::etcd::proto::{
    AlarmRequest, AlarmResponse, MemberListRequest, MemberListResponse, MemberRemoveRequest,
    MoveLeaderRequest, StatusRequest, StatusResponse,
};
use super::objects::{self, ETCD_LEADER_FROM_ANNOTATION, ETCD_MEMBER_REMOVED_ANNOTATION};
use super::resources;
use super::spdy::{Decoder, Encoder, FLAG_FIN, Frame};

const CA_CRT: &str = include_str!("testdata/ca.crt");
const CA_KEY: &str = include_str!("testdata/ca.key");
const WAIT: Duration = Duration::from_secs(10);

fn ca_der() -> CertificateDer<'static> {
    use base64::Engine;
    let body = CA_CRT
        .split("-----BEGIN CERTIFICATE-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END CERTIFICATE-----").next())
        .unwrap();
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    CertificateDer::from(
        base64::engine::general_purpose::STANDARD
            .decode(compact)
            .unwrap(),
    )
}

fn tls_client(alpn: &[u8]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A fake cluster of three control planes (`m1` leads) and its listener.
async fn cluster() -> (Clusters, Arc<super::WorkloadCluster>, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let clusters = Clusters::new("127.0.0.1".into(), port..=port);
    let cluster = clusters.ensure("ns/c1", None).unwrap();
    let pods = resources::find("", "v1", "pods").unwrap();
    for (machine, member, leads) in [
        ("m1", "101", true),
        ("m2", "102", false),
        ("m3", "103", false),
    ] {
        let annotations =
            objects::etcd_annotations("7", member, leads.then_some("2026-01-01T00:00:00Z"));
        let pod = objects::static_pod("etcd", machine, annotations);
        cluster.store.create(pods, "kube-system", pod).unwrap();
        for component in ["kube-apiserver", "kube-scheduler"] {
            let pod = objects::static_pod(component, machine, serde_json::json!({}));
            cluster.store.create(pods, "kube-system", pod).unwrap();
        }
    }
    cluster.etcd.set_ca(CA_CRT, CA_KEY);
    clusters
        .start_api_server(&cluster, CA_CRT, CA_KEY)
        .await
        .unwrap();
    (clusters, cluster, port)
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// Sends `head` over TLS to the API server; the response head and the bytes after it.
async fn request(port: u16, head: &str) -> (String, BytesMut, Tls) {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tls_client(b"http/1.1").connect(name, tcp).await.unwrap();
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut buf = BytesMut::new();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let response = String::from_utf8_lossy(&buf[..end]).to_string();
            buf.advance(end + 4);
            return (response, buf, tls);
        }
        let n = tokio::time::timeout(WAIT, tls.read_buf(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(n, 0, "the server closed before answering: {buf:?}");
    }
}

fn spdy_request(pod: &str) -> String {
    format!(
        "POST /api/v1/namespaces/kube-system/pods/{pod}/portforward HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\
         Content-Length: 0\r\n\r\n"
    )
}

/// The client side of one port-forward connection, as client-go's SPDY dialer drives it.
struct Forward {
    tls: Tls,
    buf: BytesMut,
    encoder: Encoder,
    decoder: Decoder,
}

impl Forward {
    async fn open(port: u16, pod: &str) -> Self {
        let (head, buf, tls) = request(port, &spdy_request(pod)).await;
        let lower = head.to_lowercase();
        assert!(lower.starts_with("http/1.1 101"), "{head}");
        assert!(lower.contains("upgrade: spdy/3.1"), "{head}");
        assert!(lower.contains("connection: upgrade"), "{head}");
        assert!(
            lower.contains("x-stream-protocol-version: portforward.k8s.io"),
            "{head}"
        );
        // A bare upgrade response: no body framing for the SPDY bytes to be mistaken for.
        assert!(!lower.contains("content-length"), "{head}");
        assert!(!lower.contains("transfer-encoding"), "{head}");
        Self {
            tls,
            buf,
            encoder: Encoder::new().unwrap(),
            decoder: Decoder::new(),
        }
    }

    async fn send(&mut self, frame: Frame) {
        let mut out = BytesMut::new();
        self.encoder.encode(&frame, &mut out).unwrap();
        self.tls.write_all(&out).await.unwrap();
    }

    /// The next frame; `None` when the server closed the connection.
    async fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf).unwrap() {
                return Some(frame);
            }
            let n = tokio::time::timeout(WAIT, self.tls.read_buf(&mut self.buf))
                .await
                .expect("a frame or the end")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    /// KCP's dial: the error stream (closed at once), then the data stream; both replied to.
    async fn streams(&mut self, port: &str) {
        let headers = |kind: &str| {
            vec![
                ("streamtype".to_string(), vec![kind.to_string()]),
                ("port".to_string(), vec![port.to_string()]),
                ("requestid".to_string(), vec!["0".to_string()]),
            ]
        };
        self.send(Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: headers("error"),
        })
        .await;
        assert!(matches!(
            self.recv().await,
            Some(Frame::SynReply { stream_id: 1, .. })
        ));
        self.send(Frame::Data {
            stream_id: 1,
            flags: FLAG_FIN,
            data: Bytes::new(),
        })
        .await;
        self.send(Frame::SynStream {
            stream_id: 3,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: headers("data"),
        })
        .await;
        assert!(matches!(
            self.recv().await,
            Some(Frame::SynReply { stream_id: 3, .. })
        ));
    }

    /// The data stream as a byte stream, bridged by a task; what arrives on the error stream
    /// comes out of the receiver.
    fn tunnel(mut self) -> (tokio::io::DuplexStream, mpsc::UnboundedReceiver<String>) {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (errors, error_text) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (mut from_app, mut to_app) = tokio::io::split(ours);
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                tokio::select! {
                    read = from_app.read(&mut chunk) => match read {
                        Ok(0) | Err(_) => return,
                        Ok(n) => self.send(Frame::Data { stream_id: 3, flags: 0, data: Bytes::copy_from_slice(&chunk[..n]) }).await,
                    },
                    frame = self.recv() => match frame {
                        Some(Frame::Data { stream_id: 3, data, flags }) => {
                            if to_app.write_all(&data).await.is_err() { return; }
                            if flags & FLAG_FIN != 0 { let _ = to_app.shutdown().await; }
                        }
                        Some(Frame::Data { stream_id: 1, data, .. }) => {
                            let _ = errors.send(String::from_utf8_lossy(&data).to_string());
                        }
                        Some(_) => {}
                        None => return,
                    },
                }
            }
        });
        (theirs, error_text)
    }
}

/// etcd clientv3 over the tunnel: TLS for `etcd-<machine>` with ALPN h2, then HTTP/2.
struct Etcd {
    sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
}

impl Etcd {
    async fn connect<Io>(io: Io, server_name: &str) -> Self
    where
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let name = ServerName::try_from(server_name.to_string()).unwrap();
        let tls = tls_client(b"h2").connect(name, io).await.unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(connection);
        Self { sender }
    }

    /// A unary call: the response message, or the gRPC status and message.
    async fn call<Q: Message, R: Message + Default>(
        &mut self,
        method: &str,
        request: &Q,
    ) -> Result<R, (String, String)> {
        let message = request.encode_to_vec();
        let mut body = BytesMut::new();
        body.put_u8(0);
        body.put_u32(message.len() as u32);
        body.put_slice(&message);
        let request = http::Request::post(format!("https://etcd/{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(body.freeze()))
            .unwrap();
        let response = self.sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/grpc");
        let collected = response.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap();
        let data = collected.to_bytes();
        let status = trailers["grpc-status"].to_str().unwrap().to_string();
        if status != "0" {
            let text = trailers
                .get("grpc-message")
                .map(|m| m.to_str().unwrap().to_string())
                .unwrap_or_default();
            return Err((status, text));
        }
        assert_eq!(data[0], 0);
        Ok(R::decode(&data[5..]).unwrap())
    }

    async fn members(&mut self) -> Vec<(u64, String)> {
        let list: MemberListResponse = self
            .call(
                "etcdserverpb.Cluster/MemberList",
                &MemberListRequest { linearizable: true },
            )
            .await
            .unwrap();
        list.members.into_iter().map(|m| (m.id, m.name)).collect()
    }

    async fn status(&mut self) -> Result<StatusResponse, (String, String)> {
        self.call("etcdserverpb.Maintenance/Status", &StatusRequest {})
            .await
    }
}

async fn etcd_of(port: u16, machine: &str) -> (Etcd, mpsc::UnboundedReceiver<String>) {
    let pod = format!("etcd-{machine}");
    let mut forward = Forward::open(port, &pod).await;
    forward.streams("2379").await;
    let (io, errors) = forward.tunnel();
    (Etcd::connect(io, &pod).await, errors)
}

fn annotation(cluster: &super::WorkloadCluster, pod: &str, key: &str) -> Option<String> {
    let pods = resources::find("", "v1", "pods").unwrap();
    let pod = cluster.store.get(pods, "kube-system", pod).unwrap();
    pod["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn kcp_reaches_the_etcd_members_through_the_port_forward() {
    let (_clusters, cluster, port) = cluster().await;

    let (mut etcd, _errors) = etcd_of(port, "m2").await;
    assert_eq!(
        etcd.members().await,
        [(101, "m1".into()), (102, "m2".into()), (103, "m3".into())]
    );
    let status = etcd.status().await.unwrap();
    assert_eq!(status.leader, 101, "m1 leads");
    let header = status.header.unwrap();
    assert_eq!((header.cluster_id, header.member_id), (7, 102));
    let alarms: AlarmResponse = etcd
        .call("etcdserverpb.Maintenance/Alarm", &AlarmRequest::default())
        .await
        .unwrap();
    assert!(alarms.alarms.is_empty());

    // KCP moves leadership (on the leader's connection) before removing a member.
    let (mut leader, _) = etcd_of(port, "m1").await;
    leader
        .call::<_, super::etcd::proto::MoveLeaderResponse>(
            "etcdserverpb.Maintenance/MoveLeader",
            &MoveLeaderRequest { target_id: 103 },
        )
        .await
        .unwrap();
    assert_eq!(etcd.status().await.unwrap().leader, 103);
    assert!(annotation(&cluster, "etcd-m3", ETCD_LEADER_FROM_ANNOTATION).is_some());
    leader
        .call::<_, super::etcd::proto::MoveLeaderResponse>(
            "etcdserverpb.Maintenance/MoveLeader",
            &MoveLeaderRequest { target_id: 102 },
        )
        .await
        .unwrap();
    assert_eq!(leader.status().await.unwrap().leader, 102);

    // MemberRemove: the member is gone from the list; its own etcd no longer answers.
    let removed: super::etcd::proto::MemberRemoveResponse = etcd
        .call(
            "etcdserverpb.Cluster/MemberRemove",
            &MemberRemoveRequest { id: 101 },
        )
        .await
        .unwrap();
    assert_eq!(removed.members.len(), 2);
    assert_eq!(
        etcd.members().await,
        [(102, "m2".into()), (103, "m3".into())]
    );
    assert_eq!(
        annotation(&cluster, "etcd-m1", ETCD_MEMBER_REMOVED_ANNOTATION).as_deref(),
        Some("")
    );
    let refused = leader.status().await.unwrap_err();
    assert_eq!(refused.0, "2");
    assert!(refused.1.contains("has been removed"), "{refused:?}");
    let unknown = etcd
        .call::<_, AlarmResponse>(
            "etcdserverpb.Cluster/MemberRemove",
            &MemberRemoveRequest { id: 999 },
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.0, "5");
    let unimplemented = etcd
        .call::<_, AlarmResponse>("etcdserverpb.KV/Range", &StatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(unimplemented.0, "12");
}

/// What a port-forward to `pod`'s `port` says on its error stream, once both streams close.
async fn refusal(port: u16, pod: &str, target: &str) -> String {
    let mut forward = Forward::open(port, pod).await;
    forward.streams(target).await;
    let mut text = String::new();
    let mut closed = (false, false);
    while closed != (true, true) {
        match forward.recv().await {
            Some(Frame::Data {
                stream_id,
                flags,
                data,
            }) => {
                if stream_id == 1 {
                    text.push_str(&String::from_utf8_lossy(&data));
                }
                if flags & FLAG_FIN != 0 {
                    if stream_id == 1 {
                        closed.0 = true;
                    } else {
                        closed.1 = true;
                    }
                }
            }
            Some(_) => {}
            None => panic!("the connection closed before both streams"),
        }
    }
    text
}

#[tokio::test]
async fn forwards_to_other_pods_or_ports_fail_on_the_error_stream() {
    let (_clusters, _cluster, port) = cluster().await;
    let text = refusal(port, "kube-scheduler-m1", "10259").await;
    assert_eq!(
        text,
        "error forwarding port 10259 to pod kube-system/kube-scheduler-m1: \
         pod kube-system/kube-scheduler-m1 is neither an etcd nor an API server pod of this fake cluster"
    );
    let text = refusal(port, "etcd-m1", "80").await;
    assert!(
        text.starts_with("error forwarding port 80 to pod kube-system/etcd-m1: "),
        "{text}"
    );
}

/// kube-apiserver looks the pod up before it upgrades (KCP reads an API server's certificate
/// as soon as its Node exists, before the static pods): a missing pod is a 404 Status.
#[tokio::test]
async fn a_port_forward_to_a_missing_pod_is_not_found_before_any_upgrade() {
    let (_clusters, _cluster, port) = cluster().await;
    for pod in ["kube-apiserver-gone", "etcd-gone"] {
        let (response, mut body, mut tls) = request(port, &spdy_request(pod)).await;
        assert!(response.starts_with("HTTP/1.1 404"), "{pod}: {response}");
        while !body.ends_with(b"}") {
            let n = tokio::time::timeout(WAIT, tls.read_buf(&mut body))
                .await
                .unwrap()
                .unwrap();
            assert_ne!(n, 0, "{pod}: {body:?}");
        }
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "NotFound", "{pod}: {status}");
        assert_eq!(status["code"], 404, "{pod}: {status}");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("\"{pod}\" not found"))),
            "{pod}: {status}"
        );
    }
}

/// KCP reads each API server's certificate expiry through a port-forward to its pod's port
/// (`GetAPIServerCertificateExpiry`: a TLS handshake, no request): the tunnel reaches the fake
/// API server, whose certificate the cluster CA signed, and a request through it is answered.
#[tokio::test]
async fn a_port_forward_to_an_api_server_pod_reaches_the_api_server() {
    let (_clusters, _cluster, port) = cluster().await;
    let mut forward = Forward::open(port, "kube-apiserver-m2").await;
    forward.streams("6443").await;
    let (io, _errors) = forward.tunnel();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tls_client(b"http/1.1").connect(name, io).await.unwrap();
    let certificate = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    assert_ne!(certificate, ca_der(), "the API server's own certificate");
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, tls.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(super::server::KUBERNETES_VERSION),
        "{answer}"
    );
}

#[tokio::test]
async fn the_spdy_connection_answers_pings_and_refuses_bad_streams() {
    let (_clusters, _cluster, port) = cluster().await;
    let mut forward = Forward::open(port, "etcd-m1").await;
    forward.send(Frame::Ping { id: 1 }).await;
    assert_eq!(forward.recv().await, Some(Frame::Ping { id: 1 }));
    // A stream without a valid streamType is reset (CANCEL); an even id is a protocol error.
    forward
        .send(Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![("streamtype".into(), vec!["other".into()])],
        })
        .await;
    assert_eq!(
        forward.recv().await,
        Some(Frame::RstStream {
            stream_id: 1,
            status: super::spdy::CANCEL
        })
    );
    forward
        .send(Frame::SynStream {
            stream_id: 4,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![("streamtype".into(), vec!["data".into()])],
        })
        .await;
    assert_eq!(
        forward.recv().await,
        Some(Frame::RstStream {
            stream_id: 4,
            status: super::spdy::PROTOCOL_ERROR
        })
    );
}

#[tokio::test]
async fn a_websocket_upgrade_is_refused_so_client_go_falls_back_to_spdy() {
    let (_clusters, _cluster, port) = cluster().await;
    // client-go's tunnelling dialer: GET, a WebSocket upgrade, the subprotocol in
    // Sec-WebSocket-Protocol and no X-Stream-Protocol-Version.
    let head = "GET /api/v1/namespaces/kube-system/pods/etcd-m1/portforward HTTP/1.1\r\n\
        Host: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
        Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
        Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n";
    let (response, _, _) = request(port, head).await;
    assert!(
        response.starts_with("HTTP/1.1 500"),
        "any status but 101 is gorilla's ErrBadHandshake, an UpgradeFailureError: {response}"
    );
    // With the version header but a WebSocket upgrade: the upgrader's 400.
    let head = "GET /api/v1/namespaces/kube-system/pods/etcd-m1/portforward HTTP/1.1\r\n\
        Host: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
        X-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n";
    let (response, _, _) = request(port, head).await;
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    // An unknown subprotocol: 403 naming the accepted one.
    let head = "POST /api/v1/namespaces/kube-system/pods/etcd-m1/portforward HTTP/1.1\r\n\
        Host: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
        X-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n";
    let (response, _, _) = request(port, head).await;
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    assert!(
        response
            .to_lowercase()
            .contains("x-accepted-stream-protocol-versions: portforward.k8s.io"),
        "{response}"
    );
}

#[tokio::test]
async fn closing_the_listener_ends_port_forward_sessions_and_etcd_connections() {
    let (clusters, cluster, port) = cluster().await;
    let (mut etcd, _errors) = etcd_of(port, "m1").await;
    assert_eq!(etcd.status().await.unwrap().leader, 101);
    let mut idle = Forward::open(port, "etcd-m2").await;
    clusters.stop_api_server(&cluster);
    assert_eq!(idle.recv().await, None, "the session's connection closes");
    let closed = tokio::time::timeout(WAIT, async {
        while !etcd.sender.is_closed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the etcd connection through the tunnel ends"
    );
}

#[tokio::test]
async fn streams_pair_by_request_id_in_either_order() {
    let (_clusters, _cluster, port) = cluster().await;
    let mut forward = Forward::open(port, "etcd-m1").await;
    let headers = |kind: &str| {
        vec![
            ("streamtype".to_string(), vec![kind.to_string()]),
            ("port".to_string(), vec!["80".to_string()]),
            ("requestid".to_string(), vec!["5".to_string()]),
        ]
    };
    for (stream_id, kind) in [(1, "data"), (3, "error")] {
        forward
            .send(Frame::SynStream {
                stream_id,
                associated_to: 0,
                priority: 0,
                flags: 0,
                headers: headers(kind),
            })
            .await;
        assert!(
            matches!(forward.recv().await, Some(Frame::SynReply { stream_id: id, .. }) if id == stream_id)
        );
    }
    match forward.recv().await {
        Some(Frame::Data {
            stream_id: 3, data, ..
        }) => assert!(
            String::from_utf8_lossy(&data).starts_with("error forwarding port 80"),
            "{data:?}"
        ),
        other => panic!("expected the error on the error stream, got {other:?}"),
    }
}
