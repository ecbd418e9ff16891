//! What a [`FakeRuntime`](super::FakeRuntime) records, and the operations failures can be injected into.

use crate::docker::types::{ContainerSpec, ExecRequest, Labels, NetworkSpec};

/// One call made on a [`FakeRuntime`], with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// [`ContainerRuntime::host_info`].
    HostInfo,
    /// [`ContainerRuntime::ping`].
    Ping,
    /// [`ContainerRuntime::inspect_network`].
    InspectNetwork(String),
    /// [`ContainerRuntime::list_networks`].
    ListNetworks(Labels),
    /// [`ContainerRuntime::create_network`].
    CreateNetwork(NetworkSpec),
    /// [`ContainerRuntime::remove_network`].
    RemoveNetwork(String),
    /// [`ContainerRuntime::image_exists`].
    ImageExists(String),
    /// [`ContainerRuntime::pull_image`].
    PullImage(String),
    /// [`ContainerRuntime::run_container`].
    RunContainer(Box<ContainerSpec>),
    /// [`ContainerRuntime::inspect_container`].
    InspectContainer(String),
    /// [`ContainerRuntime::list_containers`].
    ListContainers(Labels),
    /// [`ContainerRuntime::exec`]: container name and request.
    Exec(String, ExecRequest),
    /// [`ContainerRuntime::kill_container`]: container name and signal.
    KillContainer(String, String),
    /// [`ContainerRuntime::delete_container`].
    DeleteContainer(String),
    /// [`ContainerRuntime::container_logs`].
    ContainerLogs(String),
    /// [`ContainerRuntime::follow_logs`].
    FollowLogs(String),
    /// [`ContainerRuntime::start_container`].
    StartContainer(String),
}

/// An operation of the runtime, used to inject a failure with [`FakeRuntime::fail_next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `host_info`.
    HostInfo,
    /// `ping`.
    Ping,
    /// `inspect_network`.
    InspectNetwork,
    /// `list_networks`.
    ListNetworks,
    /// `create_network`.
    CreateNetwork,
    /// `remove_network`.
    RemoveNetwork,
    /// `image_exists`.
    ImageExists,
    /// `pull_image`.
    PullImage,
    /// `run_container`.
    RunContainer,
    /// `inspect_container`.
    InspectContainer,
    /// `list_containers`.
    ListContainers,
    /// `exec`.
    Exec,
    /// `kill_container`.
    KillContainer,
    /// `delete_container`.
    DeleteContainer,
    /// `container_logs`.
    ContainerLogs,
    /// `follow_logs`.
    FollowLogs,
    /// `start_container`.
    StartContainer,
}
