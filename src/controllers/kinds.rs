//! The kinds the cluster and machine reconcilers serve, and the one view they work on.
//!
//! CAPD's successor API (DevCluster, DevMachine) holds a DockerCluster's or a DockerMachine's
//! settings under `spec.backend.docker`. Both generations are served by the same reconcilers: a
//! [`ServedKind`] turns its object into a [`View`], a DockerCluster or DockerMachine with the
//! object's metadata, spec and status, that also knows the object it came from. Decisions read
//! the view as a Docker* object; status and spec writes and Events go to the real object, in its
//! own kind and shape.
//!
//! A Dev* object with the `inMemory` backend has a view too, whose [`Backend`] says so: the
//! reconcilers gate it, hold its finalizer and write its status as any other, and hand its
//! infrastructure to the in-memory backend instead of Docker. A Dev* object that names no
//! backend at all has no view: the reconcilers report it unsupported and do nothing else.

use std::fmt::Debug;
use std::ops::Deref;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::v1beta2::{
    DevCluster, DevMachine, DockerCluster, DockerClusterSpec, DockerMachine, DockerMachineSpec,
    DockerMachineStatus, InMemoryMachineBackendSpec,
};

mod write;

/// Name of the DockerCluster controller in metrics and logs.
pub const DOCKER_CLUSTER_CONTROLLER: &str = "dockercluster";

/// Name of the controller of DevClusters (the same reconcile) in metrics and logs.
pub const DEV_CLUSTER_CONTROLLER: &str = "devcluster";

/// Name of the DockerMachine controller in metrics and logs.
pub const DOCKER_MACHINE_CONTROLLER: &str = "dockermachine";

/// Name of the controller of DevMachines (the same reconcile) in metrics and logs.
pub const DEV_MACHINE_CONTROLLER: &str = "devmachine";

/// Name of the DockerMachinePool controller in metrics and logs.
pub const DOCKER_MACHINE_POOL_CONTROLLER: &str = "dockermachinepool";

/// Which generation of the API an object belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Served {
    /// DockerCluster, DockerMachine.
    Docker,
    /// DevCluster, DevMachine (docker backend).
    Dev,
}

/// A Dev* object whose spec names no backend (the defaulting webhook was bypassed): there is
/// nothing to provision it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnsupportedBackend;

/// What makes the infrastructure of a viewed object.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Backend {
    /// Docker containers (every Docker* object, and Dev* objects with `backend.docker`).
    #[default]
    Docker,
    /// The in-memory fakes (Dev* objects with `backend.inMemory`), with a DevMachine's settings
    /// (a DevCluster's are empty).
    InMemory(InMemoryMachineBackendSpec),
}

/// An object a reconciler serves: its kind, and its docker view.
pub trait ServedKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The Docker* shape of the view.
    type Docker: Clone;
    /// The generation of the API.
    const SERVED: Served;
    /// Name of the controller of this kind in metrics and logs.
    const CONTROLLER: &'static str;

    /// The object as its Docker* counterpart, and the backend that serves it.
    ///
    /// # Errors
    /// [`UnsupportedBackend`] for a Dev* object that names no backend.
    fn docker(&self) -> std::result::Result<(Self::Docker, Backend), UnsupportedBackend>;

    /// The [`View`] reconcilers work on.
    ///
    /// # Errors
    /// As [`ServedKind::docker`].
    fn view(&self) -> std::result::Result<View<Self::Docker>, UnsupportedBackend> {
        let (inner, backend) = self.docker()?;
        Ok(View {
            inner,
            served: Self::SERVED,
            backend,
            reference: self.object_ref(&()),
        })
    }
}

impl ServedKind for DockerCluster {
    type Docker = DockerCluster;
    const SERVED: Served = Served::Docker;
    const CONTROLLER: &'static str = DOCKER_CLUSTER_CONTROLLER;

    fn docker(&self) -> std::result::Result<(DockerCluster, Backend), UnsupportedBackend> {
        Ok((self.clone(), Backend::Docker))
    }
}

impl ServedKind for DevCluster {
    type Docker = DockerCluster;
    const SERVED: Served = Served::Dev;
    const CONTROLLER: &'static str = DEV_CLUSTER_CONTROLLER;

    fn docker(&self) -> std::result::Result<(DockerCluster, Backend), UnsupportedBackend> {
        let (spec, backend) = match (self.spec.docker(), &self.spec.backend.in_memory) {
            (Some(spec), _) => (spec, Backend::Docker),
            (None, Some(_)) => (
                DockerClusterSpec {
                    control_plane_endpoint: self.spec.control_plane_endpoint.clone(),
                    ..Default::default()
                },
                Backend::InMemory(InMemoryMachineBackendSpec::default()),
            ),
            (None, None) => return Err(UnsupportedBackend),
        };
        let cluster = DockerCluster {
            metadata: self.metadata.clone(),
            spec,
            status: self.status.clone(),
        };
        Ok((cluster, backend))
    }
}

impl ServedKind for DockerMachine {
    type Docker = DockerMachine;
    const SERVED: Served = Served::Docker;
    const CONTROLLER: &'static str = DOCKER_MACHINE_CONTROLLER;

    fn docker(&self) -> std::result::Result<(DockerMachine, Backend), UnsupportedBackend> {
        Ok((self.clone(), Backend::Docker))
    }
}

impl ServedKind for DevMachine {
    type Docker = DockerMachine;
    const SERVED: Served = Served::Dev;
    const CONTROLLER: &'static str = DEV_MACHINE_CONTROLLER;

    fn docker(&self) -> std::result::Result<(DockerMachine, Backend), UnsupportedBackend> {
        let (spec, backend) = match (self.spec.docker(), &self.spec.backend.in_memory) {
            (Some(spec), _) => (spec, Backend::Docker),
            (None, Some(in_memory)) => (
                DockerMachineSpec {
                    provider_id: self.spec.provider_id.clone(),
                    ..Default::default()
                },
                Backend::InMemory(in_memory.clone()),
            ),
            (None, None) => return Err(UnsupportedBackend),
        };
        let machine = DockerMachine {
            metadata: self.metadata.clone(),
            spec,
            status: self.status.as_ref().map(DockerMachineStatus::from),
        };
        Ok((machine, backend))
    }
}

/// A served object as its Docker* counterpart, with the identity of the real object.
#[derive(Clone, Debug)]
pub struct View<T> {
    inner: T,
    served: Served,
    backend: Backend,
    reference: ObjectReference,
}

/// A DockerCluster or a DevCluster, as a DockerCluster.
pub type ClusterView = View<DockerCluster>;

/// A DockerMachine or a DevMachine, as a DockerMachine.
pub type MachineView = View<DockerMachine>;

impl<T> Deref for View<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: Resource<DynamicType = ()>> View<T> {
    /// The view of a Docker* object (for tests and callers that only have the Docker kind).
    pub fn docker(inner: T) -> Self {
        let reference = inner.object_ref(&());
        Self {
            inner,
            served: Served::Docker,
            backend: Backend::Docker,
            reference,
        }
    }
}

impl<T> View<T> {
    /// The backend that serves the object.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn namespace(&self) -> String {
        self.reference.namespace.clone().unwrap_or_default()
    }

    fn name(&self) -> String {
        self.reference.name.clone().unwrap_or_default()
    }
}

/// What a write of the main resource returned: the object as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// Whether its deletion has begun (`metadata.deletionTimestamp`), perhaps since the view
    /// this pass works on was read.
    pub deleting: bool,
}

impl MachineView {
    /// The key of this machine in the task registry and on the trigger channel.
    pub fn key(&self) -> MachineRef {
        MachineRef {
            served: self.served,
            namespace: self.namespace(),
            name: self.name(),
        }
    }
}

/// A machine as the task registry and the controllers' trigger channel know it: its
/// generation of the API, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MachineRef {
    /// DockerMachine or DevMachine.
    pub served: Served,
    /// Namespace of the object.
    pub namespace: String,
    /// Name of the object.
    pub name: String,
}

impl MachineRef {
    /// A DockerMachine's key.
    pub fn docker(namespace: &str, name: &str) -> Self {
        Self {
            served: Served::Docker,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// The reference of the object in the controller of its kind.
    pub fn object_ref<K: Resource<DynamicType = ()>>(
        &self,
    ) -> kube::runtime::reflector::ObjectRef<K> {
        kube::runtime::reflector::ObjectRef::new(&self.name).within(&self.namespace)
    }
}

impl std::fmt::Display for MachineRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.served {
            Served::Docker => "DockerMachine",
            Served::Dev => "DevMachine",
        };
        write!(f, "{kind}/{}/{}", self.namespace, self.name)
    }
}

/// What an Event is published on: any object of ours, or a view (whose Events go to the real
/// object).
pub trait Recorded {
    /// The object's reference.
    fn reference(&self) -> ObjectReference;
}

impl<K: Resource<DynamicType = ()>> Recorded for K {
    fn reference(&self) -> ObjectReference {
        self.object_ref(&())
    }
}

impl<T> Recorded for View<T> {
    fn reference(&self) -> ObjectReference {
        self.reference.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta2::DevMachineStatus;
    use crate::api::v1beta2::{
        DevClusterBackendSpec, DevClusterSpec, DevMachineBackendSpec, DevMachineSpec,
        DockerClusterBackendSpec, DockerMachineBackendSpec, FailureDomain,
        InMemoryClusterBackendSpec,
    };

    fn dev_cluster(backend: DevClusterBackendSpec) -> DevCluster {
        let mut object = DevCluster::new(
            "c1",
            DevClusterSpec {
                control_plane_endpoint: Default::default(),
                backend,
            },
        );
        object.metadata.namespace = Some("ns".into());
        object
    }

    #[test]
    fn a_docker_backend_dev_cluster_is_viewed_as_a_docker_cluster_with_its_own_identity() {
        let object = dev_cluster(DevClusterBackendSpec {
            docker: Some(DockerClusterBackendSpec {
                failure_domains: vec![FailureDomain {
                    name: "fd1".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            in_memory: None,
        });
        let view = object.view().expect("docker backend");
        assert_eq!(view.spec.failure_domains[0].name, "fd1");
        assert_eq!(view.metadata.name.as_deref(), Some("c1"));
        let reference = view.reference();
        assert_eq!(reference.kind.as_deref(), Some("DevCluster"));
        assert_eq!(
            reference.api_version.as_deref(),
            Some("infrastructure.cluster.x-k8s.io/v1beta2")
        );
    }

    #[test]
    fn an_in_memory_dev_object_is_viewed_with_the_in_memory_backend() {
        let object = dev_cluster(DevClusterBackendSpec {
            docker: None,
            in_memory: Some(InMemoryClusterBackendSpec {}),
        });
        let view = object.view().expect("in-memory backend");
        assert!(matches!(view.backend(), Backend::InMemory(_)));
        assert_eq!(view.reference().kind.as_deref(), Some("DevCluster"));
    }

    #[test]
    fn a_dev_object_naming_no_backend_has_no_view() {
        let machine = DevMachine::new(
            "m1",
            DevMachineSpec {
                provider_id: String::new(),
                backend: DevMachineBackendSpec::default(),
            },
        );
        assert_eq!(machine.view().err(), Some(UnsupportedBackend));
    }

    #[test]
    fn a_dev_machine_view_reads_its_docker_settings() {
        let mut object = DevMachine::new(
            "m1",
            DevMachineSpec {
                provider_id: "docker:////c1-m1".into(),
                backend: DevMachineBackendSpec {
                    docker: Some(DockerMachineBackendSpec {
                        custom_image: "kindest/node:v1.34.0".into(),
                        ..Default::default()
                    }),
                    in_memory: None,
                },
            },
        );
        // A DevMachine has no `loadBalancerConfigured` (CAPD 1.14 removed `status.backend`):
        // its view never says the machine is registered; the weight annotation does.
        let docker_status = DockerMachineStatus {
            load_balancer_configured: true,
            ..Default::default()
        };
        object.status = Some(DevMachineStatus::from(&docker_status));
        let view = object.view().expect("docker backend");
        assert_eq!(view.spec.custom_image, "kindest/node:v1.34.0");
        assert_eq!(view.spec.provider_id, "docker:////c1-m1");
        assert!(
            view.status
                .as_ref()
                .is_some_and(|s| !s.load_balancer_configured)
        );
        assert_eq!(view.key().to_string(), "DevMachine//m1");
    }
}
