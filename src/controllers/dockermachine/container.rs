//! The node container of a DockerMachine: its name, its spec, and its addresses.

use crate::api::MACHINE_POOL_NAME_LABEL;
use crate::api::capi::Machine;
use crate::api::v1beta2::{DockerMachine, MachineAddress, MachineAddressType};
use crate::controllers::error::Result;
pub use crate::controllers::nodes::{Environment, extra_mounts, image_for};
use crate::docker::kind::{KindMode, Mapping};
use crate::docker::node::{self, AddressType, NodeRole, NodeSpec, machine_container_name};

/// The container name of a machine (CAPD: the Machine's name, prefixed with the cluster name
/// unless it already starts with it). A machine of a pool (label `cluster.x-k8s.io/pool-name`)
/// runs in the container its DockerMachinePool created first and named the DockerMachine after,
/// so its name comes from the DockerMachine, never from the Machine core named at random.
pub fn container_name(cluster: &str, machine: &Machine, docker_machine: &DockerMachine) -> String {
    let name = if is_pool_machine(docker_machine) {
        docker_machine.metadata.name.as_deref()
    } else {
        machine
            .metadata
            .name
            .as_deref()
            .or(docker_machine.metadata.name.as_deref())
    };
    machine_container_name(cluster, name.unwrap_or_default())
}

/// Whether a DockerMachine belongs to a DockerMachinePool (label `cluster.x-k8s.io/pool-name`).
pub fn is_pool_machine(docker_machine: &DockerMachine) -> bool {
    docker_machine
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(MACHINE_POOL_NAME_LABEL))
}

/// The node image and how to run it, from the Machine's version and `spec.customImage`.
///
/// # Errors
/// [`Error::NodeImage`] when there is no custom image and the version is missing or invalid.
pub fn node_image(machine: &Machine, docker_machine: &DockerMachine) -> Result<Mapping> {
    image_for(
        machine.spec.version.as_deref(),
        &docker_machine.spec.custom_image,
    )
}

/// The node container to run for a machine.
pub fn node_spec(
    cluster: &str,
    name: &str,
    machine: &Machine,
    docker_machine: &DockerMachine,
    image: &Mapping,
    env: &Environment,
) -> NodeSpec {
    let role = if machine.is_control_plane() {
        NodeRole::ControlPlane
    } else {
        NodeRole::Worker
    };
    let mut spec = env.node(cluster, name, role, image);
    spec.failure_domain = machine
        .spec
        .failure_domain
        .clone()
        .filter(|fd| !fd.is_empty());
    spec.extra_mounts = extra_mounts(&docker_machine.spec.extra_mounts);
    spec
}

/// Converts the runtime's addresses into the API's.
pub fn api_addresses(addresses: Vec<node::MachineAddress>) -> Vec<MachineAddress> {
    addresses
        .into_iter()
        .map(|a| MachineAddress {
            type_: match a.kind {
                AddressType::Hostname => MachineAddressType::Hostname,
                AddressType::InternalIp => MachineAddressType::InternalIP,
                AddressType::ExternalIp => MachineAddressType::ExternalIP,
            },
            address: a.address,
        })
        .collect()
}

/// The kubelet flavour the bootstrap translation needs for an image mode.
pub fn bootstrap_mode(mode: KindMode) -> crate::bootstrap::KindMode {
    match mode {
        KindMode::Kind0_19 => crate::bootstrap::KindMode::V0_19,
        KindMode::Kind0_20 | KindMode::None => crate::bootstrap::KindMode::V0_20,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta2::Mount;
    use crate::controllers::error::Error;
    use crate::controllers::fixtures::*;
    use crate::docker::node::{HostQuirks, IpFamily, ProxyEnv};
    use crate::docker::types::NetworkInfo;

    fn env() -> Environment {
        Environment {
            network: "kind".into(),
            network_info: NetworkInfo::default(),
            subnets: vec![],
            family: IpFamily::V4,
            proxy: ProxyEnv::default(),
            quirks: HostQuirks::default(),
            publish_address: "127.0.0.1".into(),
        }
    }

    #[test]
    fn container_names_are_prefixed_with_the_cluster_once() {
        let dm = DockerMachine::test("m1");
        assert_eq!(container_name("c1", &Machine::test("m1"), &dm), "c1-m1");
        assert_eq!(
            container_name("c1", &Machine::test("c1-md-x"), &dm),
            "c1-md-x"
        );
    }

    #[test]
    fn a_control_plane_in_a_failure_domain_gets_its_role_label_and_mounts() {
        let machine = Machine::test("m1").control_plane().in_failure_domain("fd1");
        let mut dm = DockerMachine::test("m1");
        dm.spec.extra_mounts = vec![Mount {
            container_path: "/var/run/docker.sock".into(),
            host_path: "/var/run/docker.sock".into(),
            read_only: false,
        }];
        let image = node_image(&machine, &dm).unwrap();
        let spec = node_spec("c1", "c1-m1", &machine, &dm, &image, &env()).container_spec();
        assert_eq!(
            spec.labels.get("io.x-k8s.kind.role").map(String::as_str),
            Some("control-plane")
        );
        assert_eq!(
            spec.labels
                .get("io.x-k8s.cluster.failureDomain")
                .map(String::as_str),
            Some("fd1")
        );
        assert!(
            spec.mounts
                .iter()
                .any(|m| m.container_path == "/var/run/docker.sock")
        );
        assert!(
            spec.image.starts_with("kindest/node:v1.31.2"),
            "{}",
            spec.image
        );
    }

    #[test]
    fn a_custom_image_wins_and_works_without_a_version() {
        let mut machine = Machine::test("m1");
        let mut dm = DockerMachine::test("m1");
        dm.spec.custom_image = "capd-test/node:dev".into();
        assert_eq!(
            node_image(&machine, &dm).unwrap().image,
            "capd-test/node:dev"
        );
        machine.spec.version = None;
        assert_eq!(
            node_image(&machine, &dm).unwrap().image,
            "capd-test/node:dev"
        );
        dm.spec.custom_image.clear();
        assert!(matches!(
            node_image(&machine, &dm),
            Err(Error::NodeImage(_))
        ));
    }
}
