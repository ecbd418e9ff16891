//! API types of the provider: the `infrastructure.cluster.x-k8s.io` kinds in `v1beta1` and
//! `v1beta2` (the storage and hub version), their CRDs, conversions between the versions,
//! the condition vocabulary, and read-only views of the Cluster API core objects we read.
//!
//! - [`v1beta2`]: the hub version; controllers work with these types (`DockerCluster`,
//!   `DockerMachine`, their templates, `DockerMachinePool`, the Dev kinds, and the shared
//!   sub-types). `DevMachinePool` and `DevMachinePoolTemplate` exist in this version only.
//! - [`v1beta1`]: the deprecated version, served for compatibility and converted to the hub.
//! - [`legacy`]: the retired v1alpha3 and v1alpha4 shapes, never served, converted for the API
//!   server's watch caches and for objects an old installation stored in them.
//! - [`conversion`]: pure v1beta1 <-> v1beta2 and v1alpha3/v1alpha4 <-> v1beta2 functions and
//!   [`conversion::convert_object`], the entry point of the conversion webhook.
//! - [`conditions`]: `Condition` (metav1 shape), the legacy v1beta1 condition, type and reason
//!   constants, and [`conditions::set_condition`].
//! - [`capi`]: read-only views of Cluster API `Cluster` and `Machine`.
//! - [`crd`]: builds the merged `CustomResourceDefinition` of every kind (used by `crdgen`).
//!   Use [`crd::all`], not `CustomResourceExt::crd()`: the derive is told not to generate
//!   schemas, because [`schema`] produces CAPD-identical ones.
//! - [`duration`]: Go duration strings (`spec.bootstrapTimeout`, the manager's duration flags).

pub mod capi;
pub mod conditions;
pub mod conversion;
pub mod crd;
pub mod duration;
pub mod legacy;
pub mod schema;
pub mod v1beta1;
pub mod v1beta2;

/// API group of every kind this provider serves.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Category under which `kubectl get cluster-api` lists our kinds.
pub const CATEGORY: &str = "cluster-api";

/// Finalizer CAPD puts on a DockerCluster (kept identical so objects migrate both ways).
pub const DOCKER_CLUSTER_FINALIZER: &str = "dockercluster.infrastructure.cluster.x-k8s.io";

/// Finalizer CAPD puts on a DockerMachine.
pub const DOCKER_MACHINE_FINALIZER: &str = "dockermachine.infrastructure.cluster.x-k8s.io";

/// Finalizer CAPD puts on a DockerMachinePool.
pub const DOCKER_MACHINE_POOL_FINALIZER: &str = "dockermachinepool.infrastructure.cluster.x-k8s.io";

/// Label on every Cluster API object that names the owning Cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// Label Cluster API puts on control plane Machines (value is empty).
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";

/// Annotation that marks a Machine to be removed first when its pool or set scales down.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";

/// Label naming the MachinePool a Machine belongs to.
pub const MACHINE_POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";

/// Annotation that pauses reconciliation of a single object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

/// Annotation marking infrastructure as managed by something else than this provider:
/// when present on a DockerCluster, the controller leaves it alone.
pub const MANAGED_BY_ANNOTATION: &str = "cluster.x-k8s.io/managed-by";

/// Annotation recording a control-plane machine's load balancer weight, as CAPD 1.14 writes it on
/// DevMachines and DockerMachines: `"100"` once the machine is a backend, `"0"` once it is
/// drained because its Machine is being deleted; absent before registration.
pub const WEIGHT_ANNOTATION: &str = "devmachine.infrastructure.cluster.x-k8s.io/weight";

/// The weight annotation before CAPD 1.14: CAPD 1.12 wrote `"0"` on a drained machine, earlier
/// builds of this provider also `"100"` on a registered one. Read for objects made then, never
/// written.
pub const LEGACY_WEIGHT_ANNOTATION: &str = "dockermachine.infrastructure.cluster.x-k8s.io/weight";

/// Annotation in which a down-converted object keeps the hub data its version cannot hold.
pub const CONVERSION_DATA_ANNOTATION: &str = "cluster.x-k8s.io/conversion-data";

/// Returns true when `value` equals the type's default; used by `skip_serializing_if` to mirror
/// Go's `omitempty`/`omitzero` on structs and scalars.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
