//! Integration tests of node containers and exec on the real Docker engine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod docker_support;

use std::time::{Duration, Instant};

use capd::docker::network::{delete_network, ensure_network};
use capd::docker::node::{
    AddressType, IpFamily, NodeRole, NodeSpec, create_node, delete_node, find_container,
    node_addresses, preload_image, provider_id, wait_for_multi_user,
};
use capd::docker::{ContainerRuntime, ExecRequest, RuntimeError};
use docker_support::{Guard, engine, images};

fn node_spec(guard: &Guard, network: &str, name: &str, role: NodeRole) -> NodeSpec {
    let mut spec = NodeSpec::new(&guard.id, name, role, &images().node, network);
    spec.extra_labels = guard.labels();
    spec
}

#[tokio::test]
async fn node_lifecycle_exec_addresses_and_delete() {
    let guard = Guard::new("node");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();
    let name = format!("{}-cp-0", guard.id);

    let info = create_node(
        &engine,
        &node_spec(&guard, &network.name, &name, NodeRole::ControlPlane),
        None,
    )
    .await
    .unwrap();
    guard.track_volumes(&info.volumes);
    assert!(info.running);
    assert_eq!(info.labels["io.x-k8s.kind.cluster"], guard.id);
    assert_eq!(info.labels["io.x-k8s.kind.role"], "control-plane");
    assert_eq!(info.volumes.len(), 1, "the anonymous /var volume");
    let published = info
        .ports
        .iter()
        .find(|p| p.container_port == 6443)
        .expect("6443 published");
    assert_eq!(published.host_ip, "127.0.0.1");
    assert!(published.host_port > 0);
    assert_eq!(provider_id(&info.name), format!("docker:////{name}"));
    assert!(
        find_container(&engine, &guard.id, &name)
            .await
            .unwrap()
            .unwrap()
            .running
    );

    wait_for_multi_user(&engine, &name, Duration::from_secs(30))
        .await
        .unwrap();

    // stdin reaches the process and comes back on stdout; stderr and exit code are separate.
    let payload: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let out = engine
        .exec(
            &name,
            &ExecRequest::new(["sh", "-c", "cat; echo done >&2; exit 3"])
                .stdin_bytes(payload.clone()),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.len(), payload.len());
    assert!(out.stdout == payload, "stdin must come back unchanged");
    assert_eq!(out.stderr_text(), "done\n");
    assert_eq!(out.exit_code, 3);

    let out = engine
        .exec(
            &name,
            &ExecRequest::new(["sh", "-c", "printf %s \"$GREETING\""])
                .env("GREETING", "hello node"),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "hello node");
    assert!(out.success());

    // The process has ended when exec returns: a file written just before exit is there.
    engine
        .exec(
            &name,
            &ExecRequest::new(["sh", "-c", "sleep 1; echo late > /tmp/late"]),
        )
        .await
        .unwrap();
    let out = engine
        .exec(&name, &ExecRequest::new(["cat", "/tmp/late"]))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "late\n");

    let start = Instant::now();
    let err = engine
        .exec(
            &name,
            &ExecRequest::new(["sleep", "30"]).timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Timeout { .. }), "{err}");
    assert!(start.elapsed() < Duration::from_secs(10));

    let addresses = node_addresses(&engine, &name, &network.name, IpFamily::V4)
        .await
        .unwrap();
    let ip = info.networks[&network.name].ipv4.unwrap().to_string();
    let found: Vec<(AddressType, String)> =
        addresses.into_iter().map(|a| (a.kind, a.address)).collect();
    assert_eq!(
        found,
        vec![
            (AddressType::Hostname, name.clone()),
            (AddressType::InternalIp, ip.clone()),
            (AddressType::ExternalIp, ip),
        ]
    );
    if network.enable_ipv6 {
        let dual = node_addresses(&engine, &name, &network.name, IpFamily::Dual)
            .await
            .unwrap();
        assert_eq!(dual.len(), 5);
    }
    let err = node_addresses(&engine, &name, "bridge", IpFamily::V4)
        .await
        .unwrap_err();
    assert_eq!(
        err.category(),
        "missing_address",
        "addresses come from the given network only"
    );

    // Image preload: the engine's export of the image is streamed into the node's
    // `ctr images import -`; the stand-in keeps the archive, whose manifest names the image.
    preload_image(&engine, &name, &images().haproxy)
        .await
        .unwrap();
    let archive = "/var/lib/capd-standin/imported/0.tar";
    let out = engine
        .exec(
            &name,
            &ExecRequest::new(["sh", "-c", &format!("wc -c < {archive}")]),
        )
        .await
        .unwrap();
    let size: u64 = out.stdout_text().trim().parse().unwrap();
    assert!(size > 1_000_000, "imported archive is {size} bytes");
    let manifest = engine
        .exec(
            &name,
            &ExecRequest::new(["tar", "-xOf", archive, "manifest.json"]),
        )
        .await
        .unwrap();
    assert!(
        manifest.stdout_text().contains(&images().haproxy),
        "the archive is a `docker save` of {}: {}",
        images().haproxy,
        manifest.stdout_text()
    );
    // An image the engine cannot export fails the exec, which still ends (its input is closed).
    let err = engine
        .exec(
            &name,
            &ExecRequest::new(["sh", "-c", "cat > /dev/null"])
                .stdin_image("capd-test/absent:0")
                .timeout(Duration::from_secs(30)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.category(), "not_found", "{err}");

    delete_node(&engine, &name).await.unwrap();
    delete_node(&engine, &name).await.unwrap();
    assert!(engine.inspect_container(&name).await.unwrap().is_none());
    assert_eq!(
        delete_network(&engine, &network.name).await.unwrap(),
        capd::docker::network::NetworkDeletion::Removed
    );
    guard.assert_clean(&engine).await;
}

#[tokio::test]
async fn failed_start_leaves_nothing() {
    let guard = Guard::new("badstart");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();
    let name = format!("{}-w-0", guard.id);
    let mut spec = node_spec(&guard, &network.name, &name, NodeRole::Worker).container_spec();
    spec.entrypoint = Some(vec!["/does/not/exist".to_string()]);

    let err = engine.run_container(&spec).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("start container {name}")),
        "{err}"
    );
    assert!(engine.inspect_container(&name).await.unwrap().is_none());
    assert!(
        engine
            .list_containers(&guard.labels())
            .await
            .unwrap()
            .is_empty()
    );

    delete_network(&engine, &network.name).await.unwrap();
    guard.assert_clean(&engine).await;
}

#[tokio::test]
async fn missing_image_is_a_clear_error() {
    let guard = Guard::new("noimage");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();
    let name = format!("{}-w-0", guard.id);
    let mut spec = node_spec(&guard, &network.name, &name, NodeRole::Worker);
    spec.image = "capd-test/absent:0".into();

    let err = create_node(&engine, &spec, None).await.unwrap_err();
    assert_eq!(err.category(), "image_unavailable");
    let cause = std::error::Error::source(&err).unwrap().to_string();
    assert_eq!(
        cause,
        "image capd-test/absent:0 not found locally and pull failed"
    );
    assert!(
        engine
            .list_containers(&guard.labels())
            .await
            .unwrap()
            .is_empty()
    );

    delete_network(&engine, &network.name).await.unwrap();
    guard.assert_clean(&engine).await;
}

#[tokio::test]
async fn a_stopped_node_starts_again_with_its_file_system_and_address() {
    let guard = Guard::new("start");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();
    let name = format!("{}-w-0", guard.id);
    let info = create_node(
        &engine,
        &node_spec(&guard, &network.name, &name, NodeRole::Worker),
        None,
    )
    .await
    .unwrap();
    guard.track_volumes(&info.volumes);
    let kept = ExecRequest::new(["sh", "-c", "echo kept > /var/lib/kept"]);
    assert!(engine.exec(&name, &kept).await.unwrap().success());

    // Its addresses are pinned: asked for at creation, recorded on its labels.
    let pinned = capd::docker::pinning::pinned_addresses(&info.labels);
    assert_eq!(
        info.networks[&network.name], pinned,
        "the engine gave the node the addresses it asked for"
    );
    assert!(pinned.ipv4.is_some(), "{:?}", info.labels);

    // What an engine restart leaves: the container exists but does not run.
    engine.kill_container(&name, "SIGKILL").await.unwrap();
    let stopped = engine.inspect_container(&name).await.unwrap().unwrap();
    assert!(!stopped.running, "{stopped:?}");
    // Meanwhile another node starts: it gets other addresses than the stopped one's, and one
    // started by hand, unpinned, gets whatever the engine gives it.
    let other = format!("{}-w-1", guard.id);
    let other_info = create_node(
        &engine,
        &node_spec(&guard, &network.name, &other, NodeRole::Worker),
        None,
    )
    .await
    .unwrap();
    guard.track_volumes(&other_info.volumes);
    assert_ne!(
        other_info.networks[&network.name].ipv4, pinned.ipv4,
        "a stopped node's address is not handed out again"
    );

    engine.start_container(&name).await.unwrap();
    engine
        .start_container(&name)
        .await
        .expect("starting a running container succeeds");
    let started = engine.inspect_container(&name).await.unwrap().unwrap();
    assert!(started.running);
    assert_eq!(started.id, info.id, "the same container");
    assert_eq!(
        started.networks,
        info.networks,
        "the same addresses after the start, on {}",
        engine.engine()
    );
    let read = ExecRequest::new(["cat", "/var/lib/kept"]);
    assert_eq!(
        engine
            .exec(&name, &read)
            .await
            .unwrap()
            .stdout_text()
            .trim(),
        "kept"
    );

    delete_node(&engine, &other).await.unwrap();
    delete_node(&engine, &name).await.unwrap();
    let absent = engine.start_container(&name).await.unwrap_err();
    assert!(absent.is_not_found(), "{absent}");
    delete_network(&engine, &network.name).await.unwrap();
    guard.assert_clean(&engine).await;
}
