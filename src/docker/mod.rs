//! The container runtime seam: networks, node containers, the load balancer.
//!
//! - [`ContainerRuntime`]: the narrow async trait every Docker call goes through
//!   (object safe, held as `Arc<dyn ContainerRuntime>`).
//! - [`DockerEngine`]: the implementation on a real Docker engine, or on Podman's
//!   Docker-compatible service (the only user of bollard); [`Engine`] says which, and the facts
//!   about it that change what the provider asks.
//! - [`FakeRuntime`]: an in-memory implementation that records calls, for unit tests.
//! - [`counting`]: a call-counting wrapper the benchmark enables with an environment variable.
//! - [`monitor`]: a wrapper that notices an engine that stops answering, and its recovery.
//! - [`types`]: the domain types exchanged with the runtime.
//! - [`network`]: the provider's network, found or created the way kind creates it.
//! - [`node`]: node containers: names, labels, run options (pure), addresses, operations.
//! - [`kind`]: which `kindest/node` image runs a Kubernetes version, and in which mode.
//! - [`loadbalancer`]: the haproxy load balancer: container, configuration, safe reloads.
//!
//! Only [`engine`] imports bollard. Every error enum has a `category()` for metrics and Events.

pub mod counting;
pub mod engine;
pub mod fake;
pub mod kind;
pub mod loadbalancer;
pub mod monitor;
pub mod network;
pub mod node;
pub mod pinning;
pub mod runtime;
pub mod types;

pub use engine::{DockerEngine, EngineAddress, TlsFiles};
pub use fake::FakeRuntime;
pub use runtime::{
    ContainerRuntime, DOCKER_UNREACHABLE, LineMatch, Removal, RuntimeError,
    caused_by_unreachable_engine, ensure_image,
};
pub use types::{
    BindMount, ContainerInfo, ContainerSpec, ContainerSummary, DeviceMapping, EndpointAddresses,
    Engine, EngineKind, ExecOutput, ExecRequest, ExecStdin, HostInfo, Labels, NetworkInfo,
    NetworkSpec, PortPublish, PublishedPort, RestartPolicy, same_image,
};
