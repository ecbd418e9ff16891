//! Conversions between the domain types and the bollard models, and error mapping.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummary as BollardSummary,
    DeviceMapping as BollardDevice, EndpointIpamConfig, EndpointSettings, HostConfig,
    HostConfigCgroupnsModeEnum, Ipam, IpamConfig, NetworkCreateRequest, NetworkInspect,
    NetworkingConfig, PortBinding, RestartPolicy as BollardRestart, RestartPolicyNameEnum,
    SystemInfo, SystemVersion,
};
use ipnetwork::IpNetwork;

use crate::docker::runtime::RuntimeError;
use crate::docker::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, EndpointAddresses, Engine, HostInfo, Labels,
    NetworkInfo, NetworkSpec, PublishedPort, RestartPolicy,
};

/// Maps a bollard error for `action`; HTTP 404 becomes [`RuntimeError::NotFound`]. A connection
/// that could not be made or broke, and a request unanswered within `timeout`, become
/// [`RuntimeError::Unreachable`].
pub(super) fn map_err(
    action: impl Into<String>,
    timeout: Duration,
    err: BollardError,
) -> RuntimeError {
    let action = action.into();
    match err {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => RuntimeError::from_status(action, status_code, message),
        BollardError::RequestTimeoutError => unanswered(action, timeout),
        BollardError::HyperLegacyError { .. }
        | BollardError::HyperResponseError { .. }
        | BollardError::IOError { .. }
        | BollardError::SocketNotFoundError(_) => RuntimeError::Unreachable {
            action,
            source: Box::new(err),
        },
        other => RuntimeError::Transport {
            action,
            source: Box::new(other),
        },
    }
}

/// Whether `error` is an answer that could not be read because it holds one of Podman's own
/// passing container states (see `DockerEngine::read_states`).
pub(super) fn is_passing_podman_state(error: &RuntimeError) -> bool {
    let RuntimeError::Transport { source, .. } = error else {
        return false;
    };
    let text = source.to_string();
    ["unknown variant `stopped`", "unknown variant `configured`"]
        .iter()
        .any(|state| text.contains(state))
}

/// The error of a request the engine did not answer within `timeout`.
pub(super) fn unanswered(action: String, timeout: Duration) -> RuntimeError {
    RuntimeError::Unreachable {
        action,
        source: format!("no answer within {}s", timeout.as_secs()).into(),
    }
}

fn port_key(port: u16) -> String {
    format!("{port}/tcp")
}

fn restart_policy(policy: RestartPolicy) -> BollardRestart {
    let (name, max) = match policy {
        RestartPolicy::No => (RestartPolicyNameEnum::NO, None),
        RestartPolicy::OnFailure { max_retries } => (
            RestartPolicyNameEnum::ON_FAILURE,
            Some(i64::from(max_retries)),
        ),
        RestartPolicy::UnlessStopped => (RestartPolicyNameEnum::UNLESS_STOPPED, None),
    };
    BollardRestart {
        name: Some(name),
        maximum_retry_count: max,
    }
}

fn non_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn non_empty_map<K: Eq + std::hash::Hash, V>(m: HashMap<K, V>) -> Option<HashMap<K, V>> {
    (!m.is_empty()).then_some(m)
}

fn to_hash(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The engine's create body for a container spec; `allow_privileged: false` runs it unprivileged.
pub(super) fn container_body(spec: &ContainerSpec, allow_privileged: bool) -> ContainerCreateBody {
    let mut port_bindings = HashMap::new();
    for publish in &spec.ports {
        let binding = PortBinding {
            host_ip: Some(publish.host_ip.clone()),
            host_port: Some(publish.host_port.map(|p| p.to_string()).unwrap_or_default()),
        };
        port_bindings
            .entry(port_key(publish.container_port))
            .or_insert_with(|| Some(Vec::new()))
            .get_or_insert_with(Vec::new)
            .push(binding);
    }
    let devices: Vec<BollardDevice> = spec
        .devices
        .iter()
        .map(|d| BollardDevice {
            path_on_host: Some(d.host_path.clone()),
            path_in_container: Some(d.container_path.clone()),
            cgroup_permissions: Some(d.permissions.clone()),
        })
        .collect();
    let host_config = HostConfig {
        privileged: Some(spec.privileged && allow_privileged),
        security_opt: non_empty(spec.security_opt.clone()),
        tmpfs: non_empty_map(to_hash(&spec.tmpfs)),
        binds: non_empty(spec.mounts.iter().map(|m| m.to_bind_string()).collect()),
        port_bindings: non_empty_map(port_bindings),
        restart_policy: Some(restart_policy(spec.restart)),
        cgroupns_mode: spec
            .private_cgroupns
            .then_some(HostConfigCgroupnsModeEnum::PRIVATE),
        sysctls: non_empty_map(to_hash(&spec.sysctls)),
        network_mode: Some(spec.network.clone()),
        devices: non_empty(devices),
        userns_mode: spec.userns_host.then(|| "host".to_string()),
        init: Some(false),
        ..Default::default()
    };
    let requested = spec.addresses;
    let networking_config = (requested.ipv4.is_some() || requested.ipv6.is_some()).then(|| {
        let endpoint = EndpointSettings {
            ipam_config: Some(EndpointIpamConfig {
                ipv4_address: requested.ipv4.map(|a| a.to_string()),
                ipv6_address: requested.ipv6.map(|a| a.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        NetworkingConfig {
            endpoints_config: Some(HashMap::from([(spec.network.clone(), endpoint)])),
        }
    });
    ContainerCreateBody {
        hostname: Some(spec.hostname.clone().unwrap_or_else(|| spec.name.clone())),
        networking_config,
        image: Some(spec.image.clone()),
        labels: Some(to_hash(&spec.labels)),
        env: non_empty(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        entrypoint: spec.entrypoint.clone(),
        cmd: spec.cmd.clone(),
        tty: Some(spec.tty),
        exposed_ports: non_empty(
            spec.ports
                .iter()
                .map(|p| port_key(p.container_port))
                .collect(),
        ),
        volumes: non_empty(spec.volumes.clone()),
        host_config: Some(host_config),
        ..Default::default()
    }
}

fn parse_v4(s: Option<&String>) -> Option<Ipv4Addr> {
    s.filter(|s| !s.is_empty()).and_then(|s| s.parse().ok())
}

fn parse_v6(s: Option<&String>) -> Option<Ipv6Addr> {
    s.filter(|s| !s.is_empty()).and_then(|s| s.parse().ok())
}

fn sorted_labels(labels: Option<HashMap<String, String>>) -> Labels {
    labels.unwrap_or_default().into_iter().collect()
}

/// The domain view of a container inspect answer.
pub(super) fn container_info(resp: ContainerInspectResponse) -> ContainerInfo {
    let state = resp.state.unwrap_or_default();
    let config = resp.config.unwrap_or_default();
    let settings = resp.network_settings.unwrap_or_default();
    let networks = settings
        .networks
        .unwrap_or_default()
        .into_iter()
        .map(|(name, ep)| {
            let addresses = EndpointAddresses {
                ipv4: parse_v4(ep.ip_address.as_ref()),
                ipv6: parse_v6(ep.global_ipv6_address.as_ref()),
            };
            (name, addresses)
        })
        .collect();
    let mut ports: Vec<PublishedPort> = Vec::new();
    for (key, bindings) in settings.ports.unwrap_or_default() {
        let Some(container_port) = key.strip_suffix("/tcp").and_then(|p| p.parse().ok()) else {
            continue;
        };
        for binding in bindings.unwrap_or_default() {
            let Some(host_port) = binding.host_port.and_then(|p| p.parse().ok()) else {
                continue;
            };
            ports.push(PublishedPort {
                container_port,
                host_ip: binding.host_ip.unwrap_or_default(),
                host_port,
            });
        }
    }
    ports.sort_by(|a, b| (a.container_port, &a.host_ip).cmp(&(b.container_port, &b.host_ip)));
    let volumes = resp
        .mounts
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.typ.as_deref() == Some("volume"))
        .filter_map(|m| m.name)
        .collect();
    ContainerInfo {
        id: resp.id.unwrap_or_default(),
        name: resp
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        image: config.image.unwrap_or_default(),
        labels: sorted_labels(config.labels),
        running: state.running.unwrap_or(false),
        status: state.status.map(|s| s.to_string()).unwrap_or_default(),
        exit_code: state.exit_code.unwrap_or_default(),
        networks,
        ports,
        volumes,
    }
}

/// The domain view of a container listing line.
pub(super) fn container_summary(summary: BollardSummary) -> ContainerSummary {
    let status = summary.state.map(|s| s.to_string()).unwrap_or_default();
    ContainerSummary {
        id: summary.id.unwrap_or_default(),
        name: summary
            .names
            .unwrap_or_default()
            .first()
            .map(|n| n.trim_start_matches('/').to_string())
            .unwrap_or_default(),
        image: summary.image.unwrap_or_default(),
        labels: sorted_labels(summary.labels),
        running: status == "running",
        status,
    }
}

fn subnets(ipam: Option<Ipam>) -> Vec<IpNetwork> {
    ipam.and_then(|i| i.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.subnet.and_then(|s| s.parse().ok()))
        .collect()
}

fn gateways(ipam: Option<&Ipam>) -> Vec<IpAddr> {
    ipam.and_then(|i| i.config.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.gateway.as_deref().and_then(|g| g.parse().ok()))
        .collect()
}

/// The domain view of a network inspect answer.
pub(super) fn network_info(net: NetworkInspect) -> NetworkInfo {
    let attached = net.containers.unwrap_or_default();
    let mut attached_addresses: Vec<IpAddr> = attached
        .values()
        .flat_map(|c| [c.ipv4_address.as_deref(), c.ipv6_address.as_deref()])
        .flatten()
        // `172.18.0.2/16`: the address with its prefix length.
        .filter_map(|a| a.split('/').next()?.parse().ok())
        .collect();
    attached_addresses.sort();
    let mut containers: Vec<String> = attached.into_keys().collect();
    containers.sort();
    NetworkInfo {
        id: net.id.unwrap_or_default(),
        name: net.name.unwrap_or_default(),
        driver: net.driver.unwrap_or_default(),
        options: driver_options(net.options),
        labels: sorted_labels(net.labels),
        enable_ipv6: net.enable_ipv6.unwrap_or(false),
        gateways: gateways(net.ipam.as_ref()),
        subnets: subnets(net.ipam),
        containers,
        attached_addresses,
    }
}

/// A network's driver options in Docker's names: Podman reports the MTU Docker calls
/// `com.docker.network.driver.mtu` as `mtu`.
fn driver_options(options: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    options
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| match key.as_str() {
            "mtu" => ("com.docker.network.driver.mtu".to_string(), value),
            _ => (key, value),
        })
        .collect()
}

/// The domain view of a network listing line.
pub(super) fn network_summary(net: bollard::models::Network) -> NetworkInfo {
    NetworkInfo {
        id: net.id.unwrap_or_default(),
        name: net.name.unwrap_or_default(),
        driver: net.driver.unwrap_or_default(),
        options: driver_options(net.options),
        labels: sorted_labels(net.labels),
        enable_ipv6: net.enable_ipv6.unwrap_or(false),
        gateways: gateways(net.ipam.as_ref()),
        subnets: subnets(net.ipam),
        containers: Vec::new(),
        attached_addresses: Vec::new(),
    }
}

/// The engine's create request for a network spec.
pub(super) fn network_request(spec: &NetworkSpec) -> NetworkCreateRequest {
    let config: Vec<IpamConfig> = spec
        .subnets
        .iter()
        .map(|s| IpamConfig {
            subnet: Some(s.to_string()),
            ..Default::default()
        })
        .collect();
    NetworkCreateRequest {
        name: spec.name.clone(),
        driver: Some(spec.driver.clone()),
        options: non_empty_map(to_hash(&spec.options)),
        labels: non_empty_map(to_hash(&spec.labels)),
        enable_ipv6: spec.enable_ipv6.then_some(true),
        ipam: non_empty(config).map(|config| Ipam {
            driver: Some("default".to_string()),
            config: Some(config),
            options: None,
        }),
        ..Default::default()
    }
}

/// The domain view of the engine's system info.
pub(super) fn host_info(info: SystemInfo) -> HostInfo {
    HostInfo {
        ncpu: info
            .ncpu
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or_default(),
        mem_total_bytes: info
            .mem_total
            .and_then(|m| u64::try_from(m).ok())
            .unwrap_or_default(),
        server_version: info.server_version.unwrap_or_default(),
        storage_driver: info.driver.unwrap_or_default(),
        security_options: info.security_options.unwrap_or_default(),
        cgroup_version: info
            .cgroup_version
            .map(|v| v.to_string())
            .filter(|v| !v.is_empty()),
        cgroup_controllers: None,
    }
}

/// The component Podman names itself with in its `/version` answer.
const PODMAN_COMPONENT: &str = "Podman Engine";

/// Which engine answered `/version`: Podman lists a component of its own, where Docker lists
/// `Engine`; anything else is taken for Docker.
pub(super) fn engine(version: &SystemVersion) -> Engine {
    let podman = version
        .components
        .iter()
        .flatten()
        .find(|c| c.name == PODMAN_COMPONENT);
    match podman {
        Some(component) => Engine::podman(&component.version),
        None => Engine::docker(version.version.as_deref().unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::types::{BindMount, PortPublish};

    #[test]
    fn container_body_carries_run_options() {
        let spec = ContainerSpec {
            name: "c1-cp-0".into(),
            image: "kindest/node:v1.31.0".into(),
            privileged: true,
            tmpfs: BTreeMap::from([("/tmp".into(), String::new())]),
            volumes: vec!["/var".into()],
            mounts: vec![BindMount {
                host_path: "/lib/modules".into(),
                container_path: "/lib/modules".into(),
                read_only: true,
                selinux_relabel: false,
            }],
            ports: vec![PortPublish {
                container_port: 6443,
                host_ip: "127.0.0.1".into(),
                host_port: None,
            }],
            restart: RestartPolicy::OnFailure { max_retries: 1 },
            private_cgroupns: true,
            network: "kind".into(),
            ..Default::default()
        };
        let body = container_body(&spec, true);
        assert_eq!(
            container_body(&spec, false).host_config.unwrap().privileged,
            Some(false)
        );
        let host = body.host_config.unwrap();
        assert_eq!(body.hostname.as_deref(), Some("c1-cp-0"));
        assert_eq!(host.binds.unwrap(), vec!["/lib/modules:/lib/modules:ro"]);
        assert_eq!(
            host.cgroupns_mode,
            Some(HostConfigCgroupnsModeEnum::PRIVATE)
        );
        assert_eq!(host.restart_policy.unwrap().maximum_retry_count, Some(1));
        let binding = &host.port_bindings.unwrap()["6443/tcp"].clone().unwrap()[0];
        assert_eq!(binding.host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(binding.host_port.as_deref(), Some(""));
        assert_eq!(body.exposed_ports.unwrap(), vec!["6443/tcp"]);
        assert_eq!(body.volumes.unwrap(), vec!["/var"]);
    }

    #[test]
    fn missing_addresses_are_none() {
        assert_eq!(parse_v4(Some(&String::new())), None);
        assert_eq!(
            parse_v6(Some(&"fc00::2".to_string())),
            Some("fc00::2".parse().unwrap())
        );
    }

    #[test]
    fn network_inspect_keeps_subnets_and_gateways() {
        let ipam = Ipam {
            driver: Some("default".into()),
            config: Some(vec![
                IpamConfig {
                    subnet: Some("172.18.0.0/16".into()),
                    gateway: Some("172.18.0.1".into()),
                    ..Default::default()
                },
                IpamConfig {
                    subnet: Some("fc00:f853:ccd:e793::/64".into()),
                    ..Default::default()
                },
            ]),
            options: None,
        };
        let info = network_info(NetworkInspect {
            name: Some("kind".into()),
            ipam: Some(ipam),
            ..Default::default()
        });
        assert_eq!(info.subnets.len(), 2);
        assert_eq!(info.gateways, vec!["172.18.0.1".parse::<IpAddr>().unwrap()]);
    }

    /// A `/version` answer captured from an engine on the development machine.
    fn version(file: &str) -> SystemVersion {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/docker/testdata")
            .join(file);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn podmans_passing_states_are_recognised_in_an_unreadable_answer() {
        let read = |json: &str| {
            let source = serde_json::from_str::<Vec<BollardSummary>>(json).unwrap_err();
            map_err(
                "list containers",
                Duration::from_secs(1),
                BollardError::JsonSerdeError { err: source },
            )
        };
        assert!(is_passing_podman_state(&read(
            r#"[{"Id":"a","State":"stopped"}]"#
        )));
        assert!(is_passing_podman_state(&read(
            r#"[{"Id":"a","State":"configured"}]"#
        )));
        assert!(!is_passing_podman_state(&read(r#"[{"Id":1}]"#)));
        assert!(!is_passing_podman_state(&RuntimeError::from_status(
            "list containers",
            500,
            "unknown variant `stopped`"
        )));
    }

    #[test]
    fn the_engine_is_told_by_its_version_answer() {
        let docker = engine(&version("version-docker-20.10.json"));
        assert_eq!(docker, Engine::docker("20.10.24+dfsg1"));
        assert_eq!(docker.to_string(), "Docker 20.10.24+dfsg1");
        let podman = engine(&version("version-podman-4.3.json"));
        assert_eq!(podman, Engine::podman("4.3.1"));
        assert_eq!(
            (podman.name(), podman.to_string().as_str()),
            ("podman", "Podman 4.3.1")
        );
        assert!(docker.takes_masquerade_option() && !podman.takes_masquerade_option());
        assert!(docker.pins_only_named_subnets() && !podman.pins_only_named_subnets());
    }

    #[test]
    fn cgroup_version_is_read_from_the_engine_info() {
        let info: SystemInfo =
            serde_json::from_str(r#"{"CgroupVersion":"2","SecurityOptions":["name=rootless"]}"#)
                .unwrap();
        let host = host_info(info);
        assert_eq!(host.cgroup_version.as_deref(), Some("2"));
        assert!(host.rootless());
        assert_eq!(host.rootless_shortfall(), None);
        let unknown =
            host_info(serde_json::from_str(r#"{"SecurityOptions":["name=rootless"]}"#).unwrap());
        assert_eq!(unknown.cgroup_version, None);
        assert!(
            unknown
                .rootless_shortfall()
                .unwrap()
                .contains("a cgroup version it does not report")
        );
        let undelegated = HostInfo {
            cgroup_controllers: Some(vec!["cpu".into(), "pids".into()]),
            ..host.clone()
        };
        assert!(
            undelegated
                .rootless_shortfall()
                .unwrap()
                .contains("without the memory controller(s) delegated"),
            "{undelegated:?}"
        );
        let cgroup_v1 = HostInfo {
            cgroup_version: Some("1".into()),
            ..host
        };
        assert!(
            cgroup_v1
                .rootless_shortfall()
                .unwrap()
                .contains("rootless on cgroup v1")
        );
        let rootful = HostInfo {
            security_options: Vec::new(),
            ..cgroup_v1
        };
        assert_eq!(rootful.rootless_shortfall(), None);
    }
}
