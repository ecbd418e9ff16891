//! gRPC over HTTP/2 for one fake etcd member, on one tunnelled connection: TLS, then hyper's
//! HTTP/2 server; each call is a unary POST `/etcdserverpb.<Service>/<Method>` whose body is
//! one length-prefixed protobuf message, answered with `content-type: application/grpc`, one
//! message and a `grpc-status` trailer.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::members::{self, INTERNAL, RpcError, UNIMPLEMENTED, UNKNOWN};
use super::proto::{
    AlarmRequest, AlarmResponse, MemberListRequest, MemberListResponse, MemberRemoveRequest,
    MemberRemoveResponse, MoveLeaderRequest, MoveLeaderResponse, StatusRequest,
};
use crate::inmemory::Store;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request message read.
const MAX_MESSAGE: usize = 4 << 20;

/// The body of a gRPC answer: at most one message, then trailers.
pub type GrpcBody =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// Serves member `pod` of `store`'s etcd on `io` until the client leaves or `closed` fires.
pub async fn serve<Io>(
    io: Io,
    config: Arc<ServerConfig>,
    store: Arc<Store>,
    pod: String,
    closed: CancellationToken,
) where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let accepted = tokio::select! {
        () = closed.cancelled() => return,
        accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, TlsAcceptor::from(config).accept(io)) => accepted,
    };
    let tls = match accepted {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%pod, %error, "The fake etcd's TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%pod, "The fake etcd's TLS handshake timed out");
            return;
        }
    };
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let store = store.clone();
        let pod = pod.clone();
        async move { Ok::<_, Infallible>(call(&store, &pod, request).await) }
    });
    let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        () = closed.cancelled() => {}
        served = connection => if let Err(error) = served {
            tracing::debug!(%error, "A fake etcd connection ended with an error");
        },
    }
}

/// Answers one call.
pub async fn call(store: &Store, pod: &str, request: Request<Incoming>) -> Response<GrpcBody> {
    let path = request.uri().path().to_string();
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            return answer(Err(RpcError {
                code: UNKNOWN,
                message: format!("read the request: {error}"),
            }));
        }
    };
    answer(dispatch(store, pod, &path, &body))
}

/// The message of one call's body (one uncompressed length-prefixed message).
fn message<M: Message + Default>(body: &[u8]) -> Result<M, RpcError> {
    let bad = |message: String| RpcError {
        code: INTERNAL,
        message,
    };
    let [compressed, a, b, c, d, rest @ ..] = body else {
        return Err(bad("grpc: missing message".into()));
    };
    if *compressed != 0 {
        return Err(RpcError {
            code: UNIMPLEMENTED,
            message: "grpc: compressed messages are not supported".into(),
        });
    }
    let length = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
    if length > MAX_MESSAGE || rest.len() != length {
        return Err(bad(format!(
            "grpc: message of {length} bytes does not match the body"
        )));
    }
    M::decode(rest).map_err(|e| bad(format!("grpc: failed to unmarshal the request: {e}")))
}

/// Runs the RPC named by `path` for member `pod`; the encoded response message.
pub fn dispatch(store: &Store, pod: &str, path: &str, body: &[u8]) -> Result<Vec<u8>, RpcError> {
    let inspect = || members::inspect(store, pod);
    match path {
        "/etcdserverpb.Cluster/MemberList" => {
            let _: MemberListRequest = message(body)?;
            let (members, status) = inspect()?;
            Ok(MemberListResponse {
                header: status.header,
                members,
            }
            .encode_to_vec())
        }
        "/etcdserverpb.Maintenance/Status" => {
            let _: StatusRequest = message(body)?;
            Ok(inspect()?.1.encode_to_vec())
        }
        "/etcdserverpb.Maintenance/Alarm" => {
            let _: AlarmRequest = message(body)?;
            Ok(AlarmResponse {
                header: inspect()?.1.header,
                alarms: Vec::new(),
            }
            .encode_to_vec())
        }
        "/etcdserverpb.Maintenance/MoveLeader" => {
            let request: MoveLeaderRequest = message(body)?;
            members::move_leader(store, request.target_id)?;
            Ok(MoveLeaderResponse {
                header: inspect().ok().and_then(|(_, s)| s.header),
            }
            .encode_to_vec())
        }
        "/etcdserverpb.Cluster/MemberRemove" => {
            let request: MemberRemoveRequest = message(body)?;
            let left = members::remove_member(store, request.id)?;
            Ok(MemberRemoveResponse {
                header: inspect().ok().and_then(|(_, s)| s.header),
                members: left,
            }
            .encode_to_vec())
        }
        other => Err(RpcError {
            code: UNIMPLEMENTED,
            message: format!("unknown method {other} for the fake etcd"),
        }),
    }
}

/// `grpc-message`: percent-encoded outside printable ASCII, as gRPC requires.
fn grpc_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn answer(result: Result<Vec<u8>, RpcError>) -> Response<GrpcBody> {
    let mut frames = Vec::new();
    let mut trailers = HeaderMap::new();
    match result {
        Ok(message) => {
            let mut data = BytesMut::with_capacity(5 + message.len());
            data.put_u8(0);
            data.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
            data.put_slice(&message);
            frames.push(Ok(Frame::data(data.freeze())));
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
        }
        Err(error) => {
            tracing::debug!(code = error.code, message = %error.message, "A fake etcd call failed");
            trailers.insert("grpc-status", HeaderValue::from(u16::from(error.code)));
            if let Ok(value) = HeaderValue::from_str(&grpc_message(&error.message)) {
                trailers.insert("grpc-message", value);
            }
        }
    }
    frames.push(Ok(Frame::trailers(trailers)));
    let mut response = Response::new(StreamBody::new(futures::stream::iter(frames)));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    response
}
