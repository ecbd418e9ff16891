//! Core 1.12's MachineSet and KubeadmControlPlane Machines and the infrastructure machines they
//! clone from a template (the Machine controller's passes over them: `machine_controller.rs`).

use kube::api::DynamicObject;
use serde_json::{Map, Value, json};

use super::{InfraKinds, MACHINE_FINALIZER, MachineSpec, capi, infra, owner};
use crate::Env;
use crate::pool::label_value;

/// The label core puts on every object of a cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// The label KCP puts on its Machines and their infrastructure machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// The label naming the KubeadmControlPlane (formatted as a label value).
pub const CONTROL_PLANE_NAME_LABEL: &str = "cluster.x-k8s.io/control-plane-name";
/// The label naming the MachineDeployment of a worker Machine.
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// The label naming the MachineSet of a worker Machine (formatted as a label value).
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// The label a MachineDeployment tells its MachineSets apart with.
pub const TEMPLATE_HASH_LABEL: &str = "machine-template-hash";
/// The annotation naming the template an infrastructure machine was cloned from.
pub const CLONED_FROM_NAME_ANNOTATION: &str = "cluster.x-k8s.io/cloned-from-name";
/// The annotation naming that template's group and kind (`Kind.group`).
pub const CLONED_FROM_GROUP_KIND_ANNOTATION: &str = "cluster.x-k8s.io/cloned-from-groupkind";
/// KCP's pre-terminate hook on its Machines: held until it removed the etcd member.
pub const KCP_CLEANUP_HOOK: &str = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup";

/// The characters Kubernetes' name generator draws random suffixes from.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// What owns a suite Machine in core, and the names core gives it: a KubeadmControlPlane named
/// as the Cluster's `controlPlaneRef` (the Cluster's own name) with the template
/// `<cluster>-control-plane`, or the MachineDeployment `<cluster>-md-0` with the template of the
/// same name and its MachineSet `<cluster>-md-0-<suffix>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineOwner {
    cluster: String,
    control_plane: bool,
}

impl MachineOwner {
    /// The owner of a control plane (`control_plane`) or worker Machine of `cluster`.
    pub fn new(cluster: &str, control_plane: bool) -> Self {
        Self {
            cluster: cluster.to_string(),
            control_plane,
        }
    }

    /// The KubeadmControlPlane's name, as the suite's Clusters reference it.
    pub fn control_plane_name(&self) -> String {
        self.cluster.clone()
    }

    /// The MachineDeployment's name.
    pub fn deployment_name(&self) -> String {
        format!("{}-md-0", self.cluster)
    }

    /// The MachineSet's name: the MachineDeployment's and a suffix of five characters, stable
    /// for the cluster (core draws it at random once per MachineSet).
    pub fn set_name(&self) -> String {
        format!("{}-{}", self.deployment_name(), self.suffix())
    }

    /// The infrastructure machine template's name.
    pub fn template_name(&self) -> String {
        if self.control_plane {
            format!("{}-control-plane", self.cluster)
        } else {
            self.deployment_name()
        }
    }

    /// The MachineSet's `machine-template-hash`: the template's hash and the MachineSet's suffix.
    fn template_hash(&self) -> String {
        let hash = fnv32a(self.template_name().as_bytes());
        format!("{hash}-{}", self.suffix())
    }

    fn suffix(&self) -> String {
        let mut n = fnv32a(self.deployment_name().as_bytes()) as usize;
        (0..5)
            .map(|_| {
                let c = SUFFIX_ALPHABET[n % SUFFIX_ALPHABET.len()];
                n /= SUFFIX_ALPHABET.len();
                char::from(c)
            })
            .collect()
    }

    /// The Machine's labels: for KCP (`ControlPlaneMachineLabels`) the machine template's labels
    /// with the cluster name, the control plane and the KCP's name forced; for a MachineSet
    /// (`machineLabelsFromMachineSet`) its template's labels (the MachineDeployment's with the
    /// cluster and deployment names, and the template hash) with the set's and deployment's names.
    pub fn machine_labels(&self, template_labels: &Value) -> Value {
        let mut labels = object_or_empty(template_labels);
        labels[CLUSTER_NAME_LABEL] = json!(self.cluster);
        if self.control_plane {
            labels[CONTROL_PLANE_LABEL] = json!("");
            labels[CONTROL_PLANE_NAME_LABEL] = json!(label_value(&self.control_plane_name()));
        } else {
            labels[DEPLOYMENT_NAME_LABEL] = json!(self.deployment_name());
            labels[TEMPLATE_HASH_LABEL] = json!(self.template_hash());
            labels[SET_NAME_LABEL] = json!(label_value(&self.set_name()));
        }
        labels
    }

    /// The Machine's annotations: KCP's pre-terminate hook (`ComputeDesiredMachine`); none from
    /// a MachineSet whose template has none.
    pub fn machine_annotations(&self) -> Value {
        if self.control_plane {
            json!({KCP_CLEANUP_HOOK: ""})
        } else {
            json!({})
        }
    }

    /// The infrastructure machine's labels and annotations as `GenerateTemplate` makes them from
    /// a template with no metadata of its own: the labels passed (the Machine's) with the
    /// cluster name forced; the annotations passed (a MachineSet's Machine's, none of KCP's
    /// hook) with the two `cloned-from` annotations naming the template.
    pub fn infra_machine_metadata(&self, machine_labels: &Value, kinds: InfraKinds) -> Value {
        let mut labels = object_or_empty(machine_labels);
        labels[CLUSTER_NAME_LABEL] = json!(self.cluster);
        let mut annotations = if self.control_plane {
            json!({})
        } else {
            self.machine_annotations()
        };
        let template_kind = format!("{}Template", kinds.machine());
        annotations[CLONED_FROM_NAME_ANNOTATION] = json!(self.template_name());
        annotations[CLONED_FROM_GROUP_KIND_ANNOTATION] =
            json!(format!("{template_kind}.infrastructure.cluster.x-k8s.io"));
        json!({"labels": labels, "annotations": annotations})
    }
}

/// The 32-bit FNV-1a hash of `bytes`.
fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(16_777_619)
    })
}

fn object_or_empty(value: &Value) -> Value {
    Value::Object(value.as_object().cloned().unwrap_or_else(Map::new))
}

impl Env {
    /// A Machine as core's MachineSet or KubeadmControlPlane makes it, pointing to the
    /// infrastructure machine of the same name (not created), without a finalizer.
    pub fn machine(&self, cluster: &str, name: &str, spec: &MachineSpec) -> Value {
        let owner = MachineOwner::new(cluster, spec.control_plane);
        let mut bootstrap = json!({});
        if let Some(secret) = &spec.bootstrap_secret {
            bootstrap["dataSecretName"] = json!(secret);
        }
        let mut machine_spec = json!({
            "clusterName": cluster,
            "version": spec.version.as_deref().unwrap_or("v1.31.0"),
            "bootstrap": bootstrap,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": self.kinds.machine(), "name": name}
        });
        if let Some(fd) = &spec.failure_domain {
            machine_spec["failureDomain"] = json!(fd);
        }
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "metadata": {
                "name": name,
                // The template's labels: the watch filter, when there is one, is the user's.
                "labels": owner.machine_labels(&self.labels(cluster)),
                "annotations": owner.machine_annotations()
            },
            "spec": machine_spec
        })
    }

    /// Creates a Machine as described and its DockerMachine (or DevMachine), owned by it. A
    /// MachineSet's Machine is created with core's finalizer; KCP's gets it at once, as from the
    /// Machine controller's first pass.
    pub async fn create_machine_with(
        &self,
        cluster: &str,
        name: &str,
        spec: &MachineSpec,
    ) -> (DynamicObject, DynamicObject) {
        let owner_of = MachineOwner::new(cluster, spec.control_plane);
        let mut body = self.machine(cluster, name, spec);
        if !spec.control_plane {
            body["metadata"]["finalizers"] = json!([MACHINE_FINALIZER]);
        }
        let mut machine = self.create(&capi("Machine"), body).await;
        if spec.control_plane {
            self.merge_patch(
                &capi("Machine"),
                name,
                json!({"metadata": {"finalizers": [MACHINE_FINALIZER]}}),
            )
            .await;
            machine = self.get(&capi("Machine"), name).await.unwrap();
        }
        let labels = json!(machine.metadata.labels.clone().unwrap_or_default());
        let mut metadata = owner_of.infra_machine_metadata(&labels, self.kinds);
        metadata["name"] = json!(name);
        metadata["ownerReferences"] = json!([owner("Machine", &machine)]);
        let image = spec
            .image
            .clone()
            .unwrap_or_else(|| self.images.node.clone());
        let mut docker_machine_spec = json!({"customImage": image});
        if !spec.preload_images.is_empty() {
            docker_machine_spec["preLoadImages"] = json!(spec.preload_images);
        }
        let docker_machine_spec = self.kinds.spec(docker_machine_spec, &["providerID"]);
        let kind = self.kinds.machine();
        let docker_machine = self
            .create(
                &infra(kind),
                json!({
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                    "kind": kind,
                    "metadata": metadata,
                    "spec": docker_machine_spec
                }),
            )
            .await;
        (machine, docker_machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_machines_carry_their_machine_set_and_deployment() {
        let owner = MachineOwner::new("c1", false);
        let labels = owner.machine_labels(&json!({CLUSTER_NAME_LABEL: "c1"}));
        let set = owner.set_name();
        assert!(set.starts_with("c1-md-0-") && set.len() == "c1-md-0-".len() + 5);
        assert_eq!(labels[SET_NAME_LABEL], json!(set));
        assert_eq!(labels[DEPLOYMENT_NAME_LABEL], json!("c1-md-0"));
        assert!(
            labels[TEMPLATE_HASH_LABEL]
                .as_str()
                .unwrap()
                .ends_with(&set[8..])
        );
        assert!(labels.get(CONTROL_PLANE_LABEL).is_none());
        assert_eq!(owner.machine_annotations(), json!({}));
    }

    #[test]
    fn control_plane_machines_carry_kcp_labels_and_hook() {
        let owner = MachineOwner::new("c1", true);
        let labels = owner.machine_labels(&json!({"team": "a"}));
        assert_eq!(
            labels,
            json!({"team": "a", CLUSTER_NAME_LABEL: "c1", CONTROL_PLANE_LABEL: "", CONTROL_PLANE_NAME_LABEL: "c1"})
        );
        assert_eq!(owner.machine_annotations(), json!({KCP_CLEANUP_HOOK: ""}));
    }

    #[test]
    fn infra_machines_name_their_template_without_the_kcp_hook() {
        let owner = MachineOwner::new("c1", true);
        let metadata = owner.infra_machine_metadata(&json!({"team": "a"}), InfraKinds::Dev);
        assert_eq!(
            metadata,
            json!({
                "labels": {"team": "a", CLUSTER_NAME_LABEL: "c1"},
                "annotations": {
                    CLONED_FROM_NAME_ANNOTATION: "c1-control-plane",
                    CLONED_FROM_GROUP_KIND_ANNOTATION: "DevMachineTemplate.infrastructure.cluster.x-k8s.io"
                }
            })
        );
        let worker =
            MachineOwner::new("c1", false).infra_machine_metadata(&json!({}), InfraKinds::Docker);
        assert_eq!(
            worker["annotations"][CLONED_FROM_GROUP_KIND_ANNOTATION],
            json!("DockerMachineTemplate.infrastructure.cluster.x-k8s.io")
        );
        assert_eq!(
            worker["annotations"][CLONED_FROM_NAME_ANNOTATION],
            json!("c1-md-0")
        );
    }

    #[test]
    fn names_too_long_for_a_label_value_are_hashed() {
        let cluster = "c".repeat(60);
        let labels = MachineOwner::new(&cluster, true).machine_labels(&json!({}));
        assert_eq!(labels[CONTROL_PLANE_NAME_LABEL], json!(cluster));
        let labels = MachineOwner::new(&cluster, false).machine_labels(&json!({}));
        assert!(
            labels[SET_NAME_LABEL]
                .as_str()
                .unwrap()
                .starts_with("hash_")
        );
    }
}
