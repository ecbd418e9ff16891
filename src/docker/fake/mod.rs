//! [`FakeRuntime`]: an in-memory [`ContainerRuntime`] for tests of the layers above.
//!
//! It records every call on the instance (never in globals), keeps containers, networks and images
//! in memory, assigns addresses and host ports, simulates the few file commands the provider runs
//! (`cp /dev/stdin <path>`, `cp <path> /dev/stdout`, `mkdir -p`, `test -f`), and lets a test inject
//! failures and scripted exec results.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use ipnetwork::{IpNetwork, Ipv4Network};

use super::runtime::{ContainerRuntime, LineMatch, Removal, RuntimeError};
use super::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, EndpointAddresses, Engine, ExecOutput,
    ExecRequest, ExecStdin, HostInfo, Labels, NetworkInfo, NetworkSpec, PublishedPort,
};

mod calls;

pub use calls::{Call, Op};

/// The next network id, process-wide (see `create_network`).
static NETWORK_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

type ExecHandler = Box<dyn Fn(&str, &ExecRequest) -> Option<ExecOutput> + Send + Sync>;

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    failures: HashMap<Op, VecDeque<RuntimeError>>,
    containers: BTreeMap<String, ContainerInfo>,
    networks: BTreeMap<String, NetworkInfo>,
    images: BTreeSet<String>,
    pullable: BTreeSet<String>,
    host: HostInfo,
    engine: Engine,
    ipv6_unavailable: bool,
    duplicate_networks: bool,
    unreachable: bool,
    files: BTreeMap<(String, String), Vec<u8>>,
    logs: BTreeMap<String, String>,
    exec_handlers: Vec<ExecHandler>,
    next_id: u64,
    next_port: u16,
}

impl State {
    /// A network by id, else by name.
    fn find_network(&self, name_or_id: &str) -> Option<&NetworkInfo> {
        self.networks
            .get(name_or_id)
            .or_else(|| self.networks.values().find(|n| n.name == name_or_id))
    }
}

/// An in-memory container runtime for tests. Clones share the same state.
#[derive(Clone, Default)]
pub struct FakeRuntime {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("FakeRuntime")
            .field("containers", &state.containers.keys().collect::<Vec<_>>())
            .field("networks", &state.networks.keys().collect::<Vec<_>>())
            .field("calls", &state.calls.len())
            .finish()
    }
}

impl FakeRuntime {
    /// An empty runtime: no images, no networks, no containers, 4 CPUs and 16 GiB of memory.
    pub fn new() -> Self {
        let fake = Self::default();
        fake.lock().host = HostInfo {
            ncpu: 4,
            mem_total_bytes: 16 * 1024 * 1024 * 1024,
            server_version: "fake".to_string(),
            storage_driver: "overlay2".to_string(),
            security_options: Vec::new(),
            cgroup_version: Some("2".to_string()),
            cgroup_controllers: None,
        };
        fake.lock().engine = Engine::docker("fake");
        fake
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes an image present locally.
    pub fn add_image(&self, image: &str) -> &Self {
        self.lock().images.insert(image.to_string());
        self
    }

    /// Lets `pull_image` succeed for an image (pulls fail otherwise, as on a machine without registry).
    pub fn allow_pull(&self, image: &str) -> &Self {
        self.lock().pullable.insert(image.to_string());
        self
    }

    /// Replaces the host facts returned by `host_info`.
    pub fn set_host_info(&self, host: HostInfo) -> &Self {
        self.lock().host = host;
        self
    }

    /// Replaces the engine identity returned by `engine` (a fake Docker engine by default).
    pub fn set_engine(&self, engine: Engine) -> &Self {
        self.lock().engine = engine;
        self
    }

    /// Makes network creation with IPv6 fail like an engine without IPv6 support.
    pub fn disable_ipv6(&self) -> &Self {
        self.lock().ipv6_unavailable = true;
        self
    }

    /// Lets `create_network` accept a name already in use, as engines before API 1.44 do when the
    /// client does not ask for a duplicate check.
    pub fn allow_duplicate_networks(&self) -> &Self {
        self.lock().duplicate_networks = true;
        self
    }

    /// While `unreachable`, every call fails as it does when the engine is down
    /// ([`RuntimeError::Unreachable`]); the state is kept.
    pub fn set_unreachable(&self, unreachable: bool) -> &Self {
        self.lock().unreachable = unreachable;
        self
    }

    /// Makes the next call of `op` fail with `error` (errors queue up per operation).
    pub fn fail_next(&self, op: Op, error: RuntimeError) -> &Self {
        self.lock().failures.entry(op).or_default().push_back(error);
        self
    }

    /// Answers execs for which `handler` returns `Some`; handlers are tried in the order added,
    /// before the built-in file commands.
    pub fn on_exec(
        &self,
        handler: impl Fn(&str, &ExecRequest) -> Option<ExecOutput> + Send + Sync + 'static,
    ) -> &Self {
        self.lock().exec_handlers.push(Box::new(handler));
        self
    }

    /// Sets what a container wrote so far (`container_logs`, `follow_logs`).
    pub fn set_logs(&self, container: &str, logs: &str) -> &Self {
        self.lock()
            .logs
            .insert(container.to_string(), logs.to_string());
        self
    }

    /// Puts a file into a container's simulated file system.
    pub fn set_file(&self, container: &str, path: &str, content: &[u8]) -> &Self {
        self.lock()
            .files
            .insert((container.to_string(), path.to_string()), content.to_vec());
        self
    }

    /// A file of a container's simulated file system.
    pub fn file(&self, container: &str, path: &str) -> Option<Vec<u8>> {
        self.lock()
            .files
            .get(&(container.to_string(), path.to_string()))
            .cloned()
    }

    /// Marks a container as exited (as if its main process died).
    pub fn stop_container(&self, name: &str) -> &Self {
        if let Some(c) = self.lock().containers.get_mut(name) {
            c.running = false;
            c.status = "exited".to_string();
            c.exit_code = 137;
        }
        self
    }

    /// Gives a container another IPv4 address on a network, as an engine may when a stopped
    /// container starts again and its address was taken meanwhile.
    pub fn set_ipv4(&self, container: &str, network: &str, address: Ipv4Addr) -> &Self {
        if let Some(c) = self.lock().containers.get_mut(container) {
            c.networks.entry(network.to_string()).or_default().ipv4 = Some(address);
        }
        self
    }

    /// Adds a network as if someone else had created it (keyed by its id).
    pub fn add_network(&self, network: NetworkInfo) -> &Self {
        self.lock().networks.insert(network.id.clone(), network);
        self
    }

    /// Every call made so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The exec requests made so far in one container, in order.
    pub fn execs(&self, container: &str) -> Vec<ExecRequest> {
        self.lock()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Exec(name, request) if name == container => Some(request.clone()),
                _ => None,
            })
            .collect()
    }

    /// The containers that currently exist.
    pub fn containers(&self) -> Vec<ContainerInfo> {
        self.lock().containers.values().cloned().collect()
    }

    /// The networks that currently exist.
    pub fn networks(&self) -> Vec<NetworkInfo> {
        self.lock().networks.values().cloned().collect()
    }

    /// Records a call and returns an injected failure for `op`, if any.
    fn enter(&self, op: Op, call: Call) -> Result<MutexGuard<'_, State>, RuntimeError> {
        let mut state = self.lock();
        state.calls.push(call);
        if state.unreachable {
            return Err(RuntimeError::Unreachable {
                action: format!("{op:?}"),
                source: "connection refused (fake engine down)".into(),
            });
        }
        match state.failures.get_mut(&op).and_then(VecDeque::pop_front) {
            Some(err) => Err(err),
            None => Ok(state),
        }
    }
}

/// The engine's answer about a container that does not exist.
fn no_such_container(action: String, name: &str) -> RuntimeError {
    RuntimeError::from_status(action, 404, format!("No such container: {name}"))
}

fn labels_match(have: &Labels, want: &Labels) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v))
}

fn overlaps(a: &IpNetwork, b: &IpNetwork) -> bool {
    a.contains(b.network()) || b.contains(a.network())
}

fn nth_host(subnet: &IpNetwork, n: u32) -> Option<IpAddr> {
    match subnet {
        IpNetwork::V4(net) => net.nth(n).map(IpAddr::V4),
        IpNetwork::V6(net) => {
            let base = u128::from(net.network());
            Some(IpAddr::V6((base + u128::from(n)).into()))
        }
    }
}

fn output(exit_code: i64, stdout: &[u8], stderr: &str) -> ExecOutput {
    ExecOutput {
        stdout: stdout.to_vec(),
        stderr: stderr.as_bytes().to_vec(),
        exit_code,
    }
}

/// What the process reads on stdin; an image export reads as `fake image archive of <image>`.
fn stdin_bytes(stdin: Option<&ExecStdin>) -> Vec<u8> {
    match stdin {
        None => Vec::new(),
        Some(ExecStdin::Bytes(b)) => b.clone(),
        Some(ExecStdin::Image(image)) => format!("fake image archive of {image}").into_bytes(),
    }
}

/// The built-in file commands of the simulated container file system.
fn builtin_exec(
    state: &mut State,
    container: &str,
    request: &ExecRequest,
) -> Result<ExecOutput, RuntimeError> {
    let argv: Vec<&str> = request.argv.iter().map(String::as_str).collect();
    let key = |path: &str| (container.to_string(), path.to_string());
    Ok(match argv.as_slice() {
        ["cp", "/dev/stdin", path] => {
            let data = stdin_bytes(request.stdin.as_ref());
            state.files.insert(key(path), data);
            output(0, b"", "")
        }
        ["cp", path, "/dev/stdout"] => match state.files.get(&key(path)) {
            Some(data) => output(0, data, ""),
            None => output(
                1,
                b"",
                &format!("cp: cannot stat '{path}': No such file or directory"),
            ),
        },
        ["test", "-f", path] => output(i64::from(!state.files.contains_key(&key(path))), b"", ""),
        _ => output(0, b"", ""),
    })
}

#[async_trait]
impl ContainerRuntime for FakeRuntime {
    fn engine(&self) -> Engine {
        self.lock().engine.clone()
    }

    async fn host_info(&self) -> Result<HostInfo, RuntimeError> {
        Ok(self.enter(Op::HostInfo, Call::HostInfo)?.host.clone())
    }

    async fn ping(&self) -> Result<(), RuntimeError> {
        self.enter(Op::Ping, Call::Ping).map(drop)
    }

    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>, RuntimeError> {
        let state = self.enter(Op::InspectNetwork, Call::InspectNetwork(name.to_string()))?;
        let Some(mut network) = state.find_network(name).cloned() else {
            return Ok(None);
        };
        let attached: Vec<&ContainerInfo> = state
            .containers
            .values()
            .filter(|c| c.networks.contains_key(&network.name))
            .collect();
        network.containers = attached.iter().map(|c| c.id.clone()).collect();
        // As engines report it: only running containers hold their addresses.
        network.attached_addresses = attached
            .iter()
            .filter(|c| c.running)
            .flat_map(|c| {
                let ep = c.networks[&network.name];
                [ep.ipv4.map(IpAddr::V4), ep.ipv6.map(IpAddr::V6)]
            })
            .flatten()
            .collect();
        Ok(Some(network))
    }

    async fn list_networks(&self, labels: &Labels) -> Result<Vec<NetworkInfo>, RuntimeError> {
        let state = self.enter(Op::ListNetworks, Call::ListNetworks(labels.clone()))?;
        Ok(state
            .networks
            .values()
            .filter(|n| labels_match(&n.labels, labels))
            .cloned()
            .collect())
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, RuntimeError> {
        let mut state = self.enter(Op::CreateNetwork, Call::CreateNetwork(spec.clone()))?;
        let action = format!("create network {}", spec.name);
        if !state.duplicate_networks && state.find_network(&spec.name).is_some() {
            let message = format!("network with name {} already exists", spec.name);
            return Err(RuntimeError::from_status(action, 409, message));
        }
        if spec.enable_ipv6 && state.ipv6_unavailable {
            let message = "Cannot read IPv6 setup for bridge br-fake: no such file or directory";
            return Err(RuntimeError::from_status(action, 500, message));
        }
        let taken: Vec<IpNetwork> = state
            .networks
            .values()
            .flat_map(|n| n.subnets.clone())
            .collect();
        if spec
            .subnets
            .iter()
            .any(|s| taken.iter().any(|t| overlaps(s, t)))
        {
            let message = "Pool overlaps with other one on this address space";
            return Err(RuntimeError::from_status(action, 403, message));
        }
        let mut subnets = spec.subnets.clone();
        if !subnets.iter().any(IpNetwork::is_ipv4) {
            let free = (18u8..=31)
                .filter_map(|b| Ipv4Network::new(Ipv4Addr::new(172, b, 0, 0), 16).ok())
                .map(IpNetwork::V4)
                .find(|candidate| !taken.iter().any(|t| overlaps(candidate, t)));
            subnets.extend(free);
        }
        // Unique in the process, as an engine's ids are unique: what the provider keeps per
        // network in the process (the pinning book) never mixes two tests' networks.
        let id = format!(
            "fake-network-{}",
            NETWORK_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let info = NetworkInfo {
            id: id.clone(),
            name: spec.name.clone(),
            driver: spec.driver.clone(),
            options: spec.options.clone(),
            labels: spec.labels.clone(),
            enable_ipv6: spec.enable_ipv6,
            // The engine's default IPAM gives each subnet its first host as the gateway.
            gateways: subnets.iter().filter_map(|s| nth_host(s, 1)).collect(),
            subnets,
            ..NetworkInfo::default()
        };
        state.networks.insert(id.clone(), info);
        Ok(id)
    }

    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError> {
        let mut state = self.enter(Op::RemoveNetwork, Call::RemoveNetwork(name.to_string()))?;
        let Some(network) = state.find_network(name).cloned() else {
            return Ok(());
        };
        if state
            .containers
            .values()
            .any(|c| c.networks.contains_key(&network.name))
        {
            let message =
                format!("error while removing network: network {name} has active endpoints");
            return Err(RuntimeError::from_status(
                format!("remove network {name}"),
                403,
                message,
            ));
        }
        state.networks.remove(&network.id);
        Ok(())
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        let state = self.enter(Op::ImageExists, Call::ImageExists(image.to_string()))?;
        Ok(state.images.contains(image))
    }

    async fn pull_image(&self, image: &str) -> Result<(), RuntimeError> {
        let mut state = self.enter(Op::PullImage, Call::PullImage(image.to_string()))?;
        if state.pullable.contains(image) {
            state.images.insert(image.to_string());
            Ok(())
        } else {
            let message = format!("pull access denied for {image}, repository does not exist");
            Err(RuntimeError::from_status(
                format!("pull image {image}"),
                404,
                message,
            ))
        }
    }

    async fn run_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        let mut state = self.enter(Op::RunContainer, Call::RunContainer(Box::new(spec.clone())))?;
        let action = format!("create container {}", spec.name);
        if !state.images.contains(&spec.image) {
            return Err(RuntimeError::from_status(
                action,
                404,
                format!("No such image: {}", spec.image),
            ));
        }
        if state.containers.contains_key(&spec.name) {
            let message = format!(
                "Conflict. The container name \"/{}\" is already in use",
                spec.name
            );
            return Err(RuntimeError::from_status(action, 409, message));
        }
        let Some(network) = state.find_network(&spec.network).cloned() else {
            return Err(RuntimeError::from_status(
                action,
                404,
                format!("network {} not found", spec.network),
            ));
        };
        state.next_id += 1;
        let n = state.next_id;
        let mut endpoint = EndpointAddresses::default();
        for subnet in &network.subnets {
            match nth_host(subnet, 1 + n as u32) {
                Some(IpAddr::V4(ip)) => endpoint.ipv4 = Some(ip),
                Some(IpAddr::V6(ip)) => endpoint.ipv6 = Some(ip),
                None => {}
            }
        }
        // Requested addresses, refused as the engine's IPAM does when a running container
        // holds one.
        let requested = [
            spec.addresses.ipv4.map(IpAddr::V4),
            spec.addresses.ipv6.map(IpAddr::V6),
        ];
        for address in requested.into_iter().flatten() {
            let held = state.containers.values().any(|c| {
                c.running
                    && c.networks.get(&spec.network).is_some_and(|ep| {
                        ep.ipv4.map(IpAddr::V4) == Some(address)
                            || ep.ipv6.map(IpAddr::V6) == Some(address)
                    })
            });
            if held {
                return Err(RuntimeError::from_status(
                    action,
                    500,
                    "Address already in use",
                ));
            }
        }
        endpoint.ipv4 = spec.addresses.ipv4.or(endpoint.ipv4);
        endpoint.ipv6 = spec.addresses.ipv6.or(endpoint.ipv6);
        let mut ports = Vec::new();
        for publish in &spec.ports {
            state.next_port = state.next_port.max(32767) + 1;
            ports.push(PublishedPort {
                container_port: publish.container_port,
                host_ip: publish.host_ip.clone(),
                host_port: publish.host_port.unwrap_or(state.next_port),
            });
        }
        let id = format!("fake-container-{n}");
        let info = ContainerInfo {
            id: id.clone(),
            name: spec.name.clone(),
            image: spec.image.clone(),
            labels: spec.labels.clone(),
            running: true,
            status: "running".to_string(),
            exit_code: 0,
            networks: BTreeMap::from([(spec.network.clone(), endpoint)]),
            ports,
            volumes: spec
                .volumes
                .iter()
                .map(|_| format!("fake-volume-{n}"))
                .collect(),
        };
        state.containers.insert(spec.name.clone(), info);
        Ok(id)
    }

    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        let state = self.enter(
            Op::InspectContainer,
            Call::InspectContainer(name.to_string()),
        )?;
        Ok(state.containers.get(name).cloned())
    }

    async fn list_containers(
        &self,
        labels: &Labels,
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        let state = self.enter(Op::ListContainers, Call::ListContainers(labels.clone()))?;
        Ok(state
            .containers
            .values()
            .filter(|c| labels_match(&c.labels, labels))
            .map(|c| ContainerSummary {
                id: c.id.clone(),
                name: c.name.clone(),
                image: c.image.clone(),
                labels: c.labels.clone(),
                running: c.running,
                status: c.status.clone(),
            })
            .collect())
    }

    async fn exec(
        &self,
        container: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, RuntimeError> {
        let call = Call::Exec(container.to_string(), request.clone());
        let mut state = self.enter(Op::Exec, call)?;
        let action = format!("exec {:?} in container {container}", request.argv);
        match state.containers.get(container) {
            None => return Err(no_such_container(action, container)),
            Some(c) if !c.running => {
                let message = format!("Container {} is not running", c.id);
                return Err(RuntimeError::from_status(action, 409, message));
            }
            Some(_) => {}
        }
        // The engine fails the exec when the image to stream in cannot be exported.
        if let Some(ExecStdin::Image(image)) = &request.stdin
            && !state.images.contains(image)
        {
            let message = format!("reference does not exist: {image}");
            return Err(RuntimeError::from_status(action, 404, message));
        }
        if let Some(out) = state
            .exec_handlers
            .iter()
            .find_map(|h| h(container, request))
        {
            return Ok(out);
        }
        builtin_exec(&mut state, container, request)
    }

    async fn kill_container(&self, name: &str, signal: &str) -> Result<(), RuntimeError> {
        let call = Call::KillContainer(name.to_string(), signal.to_string());
        let mut state = self.enter(Op::KillContainer, call)?;
        let action = format!("send {signal} to container {name}");
        match state.containers.get_mut(name) {
            None => Err(no_such_container(action, name)),
            Some(c) if !c.running => Err(RuntimeError::from_status(
                action,
                409,
                format!("Container {} is not running", c.id),
            )),
            Some(c) => {
                if matches!(signal, "SIGKILL" | "KILL" | "9") {
                    c.running = false;
                    c.status = "exited".to_string();
                    c.exit_code = 137;
                }
                Ok(())
            }
        }
    }

    async fn delete_container(&self, name: &str) -> Result<Removal, RuntimeError> {
        let mut state = self.enter(Op::DeleteContainer, Call::DeleteContainer(name.to_string()))?;
        state.containers.remove(name);
        state.files.retain(|(c, _), _| c != name);
        Ok(Removal::Gone)
    }

    async fn container_logs(&self, name: &str) -> Result<String, RuntimeError> {
        let state = self.enter(Op::ContainerLogs, Call::ContainerLogs(name.to_string()))?;
        if !state.containers.contains_key(name) {
            let action = format!("read logs of container {name}");
            return Err(no_such_container(action, name));
        }
        Ok(state.logs.get(name).cloned().unwrap_or_default())
    }

    async fn follow_logs(
        &self,
        name: &str,
        matches: &LineMatch,
        timeout: std::time::Duration,
    ) -> Result<bool, RuntimeError> {
        const CHECK: std::time::Duration = std::time::Duration::from_millis(5);
        let deadline = tokio::time::Instant::now() + timeout;
        drop(self.enter(Op::FollowLogs, Call::FollowLogs(name.to_string()))?);
        loop {
            {
                let state = self.lock();
                let Some(container) = state.containers.get(name) else {
                    let action = format!("follow logs of container {name}");
                    return Err(no_such_container(action, name));
                };
                let seen = state
                    .logs
                    .get(name)
                    .is_some_and(|logs| logs.lines().any(matches));
                if seen || !container.running || tokio::time::Instant::now() >= deadline {
                    return Ok(seen);
                }
            }
            tokio::time::sleep(CHECK).await;
        }
    }

    async fn start_container(&self, name: &str) -> Result<(), RuntimeError> {
        let mut state = self.enter(Op::StartContainer, Call::StartContainer(name.to_string()))?;
        let Some(c) = state.containers.get_mut(name) else {
            return Err(no_such_container(format!("start container {name}"), name));
        };
        c.running = true;
        c.status = "running".to_string();
        c.exit_code = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
