//! Tests of the fake runtime itself.

use super::*;

fn spec(name: &str) -> ContainerSpec {
    ContainerSpec {
        name: name.to_string(),
        image: "img:1".to_string(),
        network: "kind".to_string(),
        ..Default::default()
    }
}

async fn runtime_with_network() -> FakeRuntime {
    let fake = FakeRuntime::new();
    fake.add_image("img:1");
    let net = NetworkSpec {
        name: "kind".into(),
        driver: "bridge".into(),
        ..Default::default()
    };
    fake.create_network(&net).await.unwrap();
    fake
}

#[tokio::test]
async fn calls_are_recorded_per_instance() {
    let a = runtime_with_network().await;
    let b = FakeRuntime::new();
    a.run_container(&spec("c1")).await.unwrap();
    assert!(
        a.calls()
            .contains(&Call::RunContainer(Box::new(spec("c1"))))
    );
    assert!(b.calls().is_empty());
}

#[tokio::test]
async fn containers_get_addresses_from_their_network() {
    let fake = runtime_with_network().await;
    fake.run_container(&spec("c1")).await.unwrap();
    let info = fake.inspect_container("c1").await.unwrap().unwrap();
    let ip = info.networks["kind"].ipv4.unwrap();
    assert_eq!(ip.octets()[..2], [172, 18]);
    assert!(info.running);
}

#[tokio::test]
async fn file_commands_round_trip_and_deleted_containers_are_absent() {
    let fake = runtime_with_network().await;
    fake.run_container(&spec("c1")).await.unwrap();
    let write = ExecRequest::new(["cp", "/dev/stdin", "/etc/x"]).stdin_bytes("hello");
    assert!(fake.exec("c1", &write).await.unwrap().success());
    let read = fake
        .exec("c1", &ExecRequest::new(["cp", "/etc/x", "/dev/stdout"]))
        .await
        .unwrap();
    assert_eq!(read.stdout_text(), "hello");
    fake.delete_container("c1").await.unwrap();
    fake.delete_container("c1").await.unwrap();
    assert!(fake.inspect_container("c1").await.unwrap().is_none());
    let err = fake.exec("c1", &write).await.unwrap_err();
    assert!(err.is_not_found());
}

#[tokio::test]
async fn injected_failures_fire_once() {
    let fake = runtime_with_network().await;
    fake.fail_next(
        Op::RunContainer,
        RuntimeError::from_status("start container c1", 500, "port is already allocated"),
    );
    assert!(fake.run_container(&spec("c1")).await.is_err());
    assert!(fake.containers().is_empty());
    fake.run_container(&spec("c1")).await.unwrap();
    assert_eq!(fake.containers().len(), 1);
}

#[tokio::test]
async fn overlapping_subnets_are_refused() {
    let fake = runtime_with_network().await;
    let subnet: IpNetwork = "172.18.0.0/16".parse().unwrap();
    let net = NetworkSpec {
        name: "other".into(),
        subnets: vec![subnet],
        ..Default::default()
    };
    assert!(
        fake.create_network(&net)
            .await
            .unwrap_err()
            .is_pool_overlap()
    );
}

#[tokio::test]
async fn a_stopped_container_starts_again_and_a_missing_one_is_not_found() {
    let fake = runtime_with_network().await;
    fake.run_container(&spec("c1")).await.unwrap();
    fake.stop_container("c1");
    assert!(!fake.inspect_container("c1").await.unwrap().unwrap().running);
    fake.start_container("c1").await.unwrap();
    fake.start_container("c1").await.unwrap();
    let info = fake.inspect_container("c1").await.unwrap().unwrap();
    assert!(info.running);
    assert_eq!(info.status, "running");
    assert_eq!(
        fake.calls()
            .iter()
            .filter(|c| **c == Call::StartContainer("c1".into()))
            .count(),
        2
    );
    assert!(
        fake.start_container("absent")
            .await
            .unwrap_err()
            .is_not_found()
    );
}
