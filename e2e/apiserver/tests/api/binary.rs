//! The `testapiserver` binary: starts fast, prints its URL, writes a kubeconfig, stops on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

#[tokio::test]
async fn binary_serves_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_testapiserver"))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_string()
    })
    .await
    .unwrap();
    let startup = started.elapsed();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    println!("testapiserver binary answered with its URL after {startup:?}");
    // Typically a few milliseconds; the bound leaves room for a loaded CI machine.
    assert!(startup < Duration::from_secs(3), "started in {startup:?}");

    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&text).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    assert!(
        !namespaces
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status:?}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server did not stop on SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
