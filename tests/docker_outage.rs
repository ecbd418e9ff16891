//! The engine client and its monitor when the real engine is reached through the suite's
//! fault-injecting proxy (`capd_e2e::EngineProxy`): exec with input passes through it, a refused
//! or hung engine fails calls as unreachable instead of holding them, the monitor reports a hung
//! engine and its recovery, and a cut exec stream never passes for a command that ran.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod docker_support;

use std::sync::Arc;
use std::time::Duration;

use capd::docker::monitor::{EngineReport, Timings, monitor_with};
use capd::docker::{
    ContainerRuntime, ContainerSpec, DOCKER_UNREACHABLE, DockerEngine, EngineAddress, ExecRequest,
    Labels,
};
use capd_e2e::{EngineProxy, ProxyMode};
use docker_support::{Guard, engine, images};
use tokio_util::sync::CancellationToken;

/// A client of the engine behind `proxy` (unprivileged where the engine refuses privileges).
async fn engine_behind(proxy: &EngineProxy) -> DockerEngine {
    let address = EngineAddress {
        host: proxy.docker_host(),
        tls: None,
    };
    let behind = DockerEngine::connect_to(&address).await.unwrap();
    if engine().await.allows_privileged() {
        behind
    } else {
        behind.without_privileges()
    }
}

/// Runs a container that only sleeps, through the engine directly; returns its name.
async fn sleeper(guard: &Guard) -> String {
    let name = format!("{}-sleeper", guard.id);
    let mut spec = ContainerSpec::capd_defaults(&name, &images().node, "bridge");
    spec.labels = guard.labels();
    spec.entrypoint = Some(vec!["sleep".into(), "600".into()]);
    spec.privileged = false;
    engine().await.run_container(&spec).await.unwrap();
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_with_input_passes_through_and_a_refused_engine_is_unreachable() {
    let guard = Guard::new("outage");
    let container = sleeper(&guard).await;
    let proxy = EngineProxy::start();
    let behind = engine_behind(&proxy).await;

    let request = ExecRequest::new(["cat"]).stdin_bytes(b"through the proxy".to_vec());
    let out = behind.exec(&container, &request).await.unwrap();
    assert!(out.success());
    assert_eq!(
        out.stdout_text(),
        "through the proxy",
        "upgrade and half-close"
    );

    proxy.set(ProxyMode::Refuse);
    let error = behind.inspect_container(&container).await.unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    assert_eq!(error.category(), DOCKER_UNREACHABLE);

    proxy.set(ProxyMode::PassThrough);
    let mut inspected = None;
    for _ in 0..100 {
        if let Ok(found) = behind.inspect_container(&container).await {
            inspected = found;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(inspected.is_some_and(|c| c.running), "the client recovers");
    behind.delete_container(&container).await.unwrap();
    guard.assert_clean(&engine().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_engine_fails_calls_at_the_request_timeout_instead_of_holding_them() {
    let proxy = EngineProxy::start();
    let behind = engine_behind(&proxy)
        .await
        .with_request_timeout(Duration::from_secs(1));
    proxy.set(ProxyMode::Hang);
    let held = tokio::time::timeout(
        Duration::from_secs(60),
        behind.list_containers(&Labels::new()),
    )
    .await
    .expect("the call returns");
    let error = held.unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    assert!(
        capd::runtime::error_chain(&error).contains("no answer within 1s"),
        "{error}"
    );
}

/// A stand-in engine on a unix socket that answers `/version` and sends the headers of every other
/// answer, then nothing more: an engine that hangs in the middle of an answer.
async fn engine_stalling_after_headers(socket: &std::path::Path) -> tokio::task::JoinHandle<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::UnixListener::bind(socket).unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The connection stays open: the next request is awaited.
                loop {
                    let mut head = Vec::new();
                    while !head.ends_with(b"\r\n\r\n") {
                        let mut byte = [0u8];
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    if String::from_utf8_lossy(&head).contains("/version ") {
                        let body = r#"{"ApiVersion":"1.41","Version":"20.10.0"}"#;
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = stream.write_all(answer.as_bytes()).await;
                    } else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[")
                            .await;
                    }
                }
            });
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_stalls_after_its_headers_fails_at_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("engine.sock");
    let server = engine_stalling_after_headers(&socket).await;
    let address = EngineAddress {
        host: format!("unix://{}", socket.display()),
        tls: None,
    };
    let stalled = DockerEngine::connect_to(&address)
        .await
        .unwrap()
        .with_request_timeout(Duration::from_secs(1));
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        stalled.list_containers(&Labels::new()),
    )
    .await
    .expect("the call returns");
    let error = outcome.unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitor_reports_a_hung_engine_and_its_recovery() {
    let proxy = EngineProxy::start();
    let behind: Arc<dyn ContainerRuntime> = Arc::new(engine_behind(&proxy).await);
    let timings = Timings {
        slow_call: Duration::from_millis(200),
        ping_timeout: Duration::from_millis(500),
        retry_interval: Duration::from_millis(100),
    };
    let (runtime, watcher) = monitor_with(behind, timings);
    let (tx, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    tokio::spawn(watcher.run(
        move |report| {
            let _ = tx.send(matches!(report, EngineReport::Up));
        },
        stop.clone(),
    ));

    proxy.set(ProxyMode::Hang);
    let call = tokio::spawn({
        let runtime = runtime.clone();
        async move { runtime.list_containers(&Labels::new()).await }
    });
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(60), reports.recv())
            .await
            .expect("a report")
    };
    assert_eq!(next().await, Some(false), "a hung call is noticed");
    assert!(runtime.is_down());
    proxy.set(ProxyMode::PassThrough);
    assert_eq!(next().await, Some(true), "and so is the recovery");
    assert!(call.await.unwrap().is_ok(), "the held call got its answer");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_whose_stream_is_cut_never_passes_for_a_command_that_ran() {
    let guard = Guard::new("outage-cut");
    let container = sleeper(&guard).await;
    let proxy = EngineProxy::start();
    let behind = engine_behind(&proxy).await;
    proxy.set(ProxyMode::CutStreams);

    let request = ExecRequest::new(["sh", "-c", "sleep 1; echo done"]);
    let outcome = tokio::time::timeout(Duration::from_secs(60), behind.exec(&container, &request))
        .await
        .expect("the exec returns");
    if let Ok(out) = &outcome {
        assert!(
            !(out.success() && out.stdout_text().contains("done")),
            "{out:?}"
        );
    }
    // Calls that are not streams still get their answers.
    assert!(
        behind
            .inspect_container(&container)
            .await
            .unwrap()
            .is_some()
    );

    proxy.set(ProxyMode::PassThrough);
    let out = behind.exec(&container, &request).await.unwrap();
    assert_eq!(out.stdout_text().trim(), "done");
    behind.delete_container(&container).await.unwrap();
    guard.assert_clean(&engine().await).await;
}
