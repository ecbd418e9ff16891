//! The proxy's modes against a small stand-in engine on a unix socket: `/_ping` answers at once,
//! `/events` streams without end, and an exec start upgrades the connection and echoes its input
//! back until the client half-closes it, then says `bye`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::engine_proxy::Mode as ProxyMode;

/// The stand-in engine: its socket, and how many requests it received.
struct FakeEngine {
    socket: PathBuf,
    requests: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl FakeEngine {
    fn start() -> FakeEngine {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("engine.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, counter.clone()));
            }
        });
        FakeEngine {
            socket,
            requests,
            _dir: dir,
        }
    }

    fn proxy(&self) -> EngineProxy {
        EngineProxy::start_to(Upstream::Unix(self.socket.clone()))
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn answer(mut stream: UnixStream, requests: Arc<AtomicUsize>) {
    loop {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8];
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        requests.fetch_add(1, Ordering::SeqCst);
        let head = String::from_utf8_lossy(&head).into_owned();
        if head.starts_with("GET /v1.41/events") {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                .await;
            loop {
                if stream.write_all(b"3\r\n{}\n\r\n").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if head.starts_with("POST /v1.41/exec/") {
            let _ = stream
                .write_all(b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
                .await;
            let mut input = Vec::new();
            let _ = stream.read_to_end(&mut input).await;
            let _ = stream.write_all(&input).await;
            let _ = stream.write_all(b"bye").await;
            return;
        }
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
            .await;
    }
}

const PING: &[u8] = b"GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n";
const PONG: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK";

async fn connect(proxy: &EngineProxy) -> std::io::Result<UnixStream> {
    UnixStream::connect(proxy.socket()).await
}

/// `future`'s output; panics when it takes more than 30 s (a broken proxy must fail, not hang).
async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("done within 30 s")
}

/// Reads one answer to a ping (its exact length).
async fn read_pong(stream: &mut UnixStream) -> String {
    let mut answer = vec![0u8; PONG.len()];
    within(stream.read_exact(&mut answer)).await.unwrap();
    String::from_utf8(answer).unwrap()
}

/// Waits until connecting is refused (`refused`), or accepted (`!refused`).
async fn wait_connect_refused(proxy: &EngineProxy, refused: bool) {
    for _ in 0..200 {
        let outcome = match connect(proxy).await {
            Ok(_) => false,
            // A connection queued while the listener closes is reset: not yet the steady state.
            Err(error) => error.kind() == std::io::ErrorKind::ConnectionRefused || !refused,
        };
        if outcome == refused {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("connections never became refused={refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_through_forwards_keep_alive_requests_upgrades_and_half_closes() {
    let engine = FakeEngine::start();
    let proxy = engine.proxy();
    let mut stream = connect(&proxy).await.unwrap();
    for _ in 0..2 {
        stream.write_all(PING).await.unwrap();
        assert_eq!(read_pong(&mut stream).await, PONG);
    }

    let mut exec = connect(&proxy).await.unwrap();
    exec.write_all(b"POST /v1.41/exec/abc/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nstdin bytes")
        .await
        .unwrap();
    exec.shutdown().await.unwrap();
    let mut answer = String::new();
    within(exec.read_to_string(&mut answer)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 101 UPGRADED"), "{answer}");
    assert!(
        answer.ends_with("stdin bytesbye"),
        "the input reached the engine whole, then its end: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_cuts_open_connections_and_refuses_new_ones_until_pass_through() {
    let engine = FakeEngine::start();
    let proxy = engine.proxy();
    let mut open = connect(&proxy).await.unwrap();
    open.write_all(PING).await.unwrap();
    assert_eq!(read_pong(&mut open).await, PONG);

    proxy.set(Mode::Refuse);
    let mut rest = Vec::new();
    assert_eq!(
        within(open.read_to_end(&mut rest)).await.map_or(0, |n| n),
        0,
        "the open connection is cut"
    );
    wait_connect_refused(&proxy, true).await;

    proxy.set(Mode::PassThrough);
    wait_connect_refused(&proxy, false).await;
    let mut again = connect(&proxy).await.unwrap();
    again.write_all(PING).await.unwrap();
    assert_eq!(read_pong(&mut again).await, PONG);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_holds_requests_on_open_and_new_connections_until_the_mode_changes() {
    let engine = FakeEngine::start();
    let proxy = engine.proxy();
    let mut open = connect(&proxy).await.unwrap();
    open.write_all(PING).await.unwrap();
    assert_eq!(read_pong(&mut open).await, PONG);
    let before = engine.requests();

    proxy.set(Mode::Hang);
    // Give the relay a moment to see the mode, as a request in flight would.
    tokio::time::sleep(Duration::from_millis(50)).await;
    open.write_all(PING).await.unwrap();
    let mut fresh = connect(&proxy).await.expect("a hung engine still accepts");
    fresh.write_all(PING).await.unwrap();
    let mut byte = [0u8];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), open.read(&mut byte))
            .await
            .is_err(),
        "no answer while hanging"
    );
    assert_eq!(engine.requests(), before, "nothing reached the engine");

    proxy.set(Mode::PassThrough);
    assert_eq!(read_pong(&mut open).await, PONG, "answered late");
    assert_eq!(read_pong(&mut fresh).await, PONG);
    assert_eq!(engine.requests(), before + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_streams_ends_streams_once_answered_and_lets_other_requests_through() {
    let engine = FakeEngine::start();
    let proxy = engine.proxy();
    // A stream open before the mode changes is cut too.
    let mut before = connect(&proxy).await.unwrap();
    before
        .write_all(b"GET /v1.41/events HTTP/1.1\r\nHost: docker\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    within(before.read_exact(&mut head)).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    proxy.set(Mode::CutStreams);
    let mut rest = Vec::new();
    let cut = tokio::time::timeout(Duration::from_secs(30), before.read_to_end(&mut rest)).await;
    assert!(cut.is_ok(), "the open stream is cut");

    let mut events = connect(&proxy).await.unwrap();
    events
        .write_all(b"GET /v1.41/events?since=1 HTTP/1.1\r\nHost: docker\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let cut = tokio::time::timeout(Duration::from_secs(30), events.read_to_end(&mut answer)).await;
    assert!(cut.is_ok(), "a new stream is cut");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200 OK"),
        "the stream started: {answer}"
    );

    let mut ping = connect(&proxy).await.unwrap();
    ping.write_all(PING).await.unwrap();
    assert_eq!(read_pong(&mut ping).await, PONG, "other requests pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_streams_spares_a_kept_alive_connection_once_its_stream_ended() {
    let engine = FakeEngine::start();
    let proxy = engine.proxy();
    let mut stream = connect(&proxy).await.unwrap();
    // A logs request answered whole (as the stand-in answers it), then pings on the same
    // connection: those are not streams.
    stream
        .write_all(b"GET /v1.41/containers/c1/logs?stdout=1 HTTP/1.1\r\nHost: docker\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_pong(&mut stream).await, PONG);
    proxy.set(ProxyMode::CutStreams);
    for _ in 0..2 {
        stream.write_all(PING).await.unwrap();
        assert_eq!(read_pong(&mut stream).await, PONG);
    }
}

#[test]
fn streaming_requests_are_recognised_by_their_request_line() {
    for line in [
        "GET /v1.41/events?filters=%7B%7D HTTP/1.1",
        "GET /events HTTP/1.1",
        "POST /v1.47/exec/0123abcd/start HTTP/1.1",
        "POST /v1.41/containers/c1/attach?stream=1 HTTP/1.1",
        "GET /v1.41/containers/c1/logs?stdout=1 HTTP/1.1",
        "GET /v1.41/containers/c1/stats HTTP/1.1",
        "POST /v1.41/images/create?fromImage=kindest%2Fnode HTTP/1.1",
        "GET /v1.41/images/kindest/node:v1.31.0/get HTTP/1.1\r",
    ] {
        assert!(is_streaming_request(line.as_bytes()), "{line}");
    }
    for line in [
        "GET /_ping HTTP/1.1",
        "GET /v1.41/containers/c1/json HTTP/1.1",
        "POST /v1.41/exec/0123abcd/json HTTP/1.1",
        "POST /v1.41/containers/create?name=c1 HTTP/1.1",
        "{\"Cmd\": [\"GET /events HTTP/1.1\"]}",
        "",
    ] {
        assert!(!is_streaming_request(line.as_bytes()), "{line}");
    }
}

#[test]
fn the_engine_address_is_read_as_docker_reads_it() {
    assert_eq!(
        Upstream::parse("unix:///var/run/docker.sock", false),
        Upstream::Unix("/var/run/docker.sock".into())
    );
    assert_eq!(
        Upstream::parse("tcp://127.0.0.1:2375", false),
        Upstream::Tcp("127.0.0.1:2375".into())
    );
}
