//! The objects a fake machine puts in its fake cluster, as CAPD's in-memory backend makes them:
//! its Node, the static pods of a control plane, and the objects `kubeadm init` leaves behind.

use serde_json::{Value, json};

/// The Kubernetes version the fake API servers report, and their Nodes' kubelets.
pub const KUBERNETES_VERSION: &str = "v1.34.0";

/// Label of control plane Nodes.
pub const CONTROL_PLANE_NODE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Annotation of an etcd pod: the etcd cluster's id.
pub const ETCD_CLUSTER_ID_ANNOTATION: &str =
    "etcd.inmemory.infrastructure.cluster.x-k8s.io/cluster-id";

/// Annotation of an etcd pod: its member id.
pub const ETCD_MEMBER_ID_ANNOTATION: &str =
    "etcd.inmemory.infrastructure.cluster.x-k8s.io/member-id";

/// Annotation of an etcd pod: since when it leads its cluster.
pub const ETCD_LEADER_FROM_ANNOTATION: &str =
    "etcd.inmemory.infrastructure.cluster.x-k8s.io/leader-from";

/// Annotation of an etcd pod whose member was removed from the etcd cluster (MemberRemove).
pub const ETCD_MEMBER_REMOVED_ANNOTATION: &str =
    "etcd.inmemory.infrastructure.cluster.x-k8s.io/member-removed";

/// The namespace of static pods.
pub const KUBE_SYSTEM: &str = "kube-system";

/// The control plane components run as static pods, `<component>-<machine>`.
pub const CONTROL_PLANE_COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
];

/// The provider ID of an in-memory machine.
pub fn provider_id(machine: &str) -> String {
    format!("in-memory://{machine}")
}

/// The Node of machine `name`: Ready, with its provider ID, labelled control plane when it is
/// one.
pub fn node(name: &str, control_plane: bool, now: &str) -> Value {
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({
            "type": type_, "status": status, "reason": reason,
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    if control_plane {
        labels.insert(CONTROL_PLANE_NODE_LABEL.into(), json!(""));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": provider_id(name)},
        "status": {
            "conditions": [
                condition("Ready", "True", "KubeletReady"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
            "nodeInfo": {"kubeletVersion": KUBERNETES_VERSION},
        },
    })
}

/// The static pod `<component>-<machine>` in `kube-system`: Running and Ready, on the machine's
/// Node, labelled `component` and `tier=control-plane`.
pub fn static_pod(component: &str, machine: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{component}-{machine}"),
            "namespace": KUBE_SYSTEM,
            "labels": {"component": component, "tier": "control-plane"},
            "annotations": annotations,
        },
        "spec": {
            "nodeName": machine,
            "containers": [{"name": component, "image": format!("registry.k8s.io/{component}")}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

/// The etcd pod's annotations: member and cluster ids, and leadership for the first member.
pub fn etcd_annotations(cluster_id: &str, member_id: &str, leader_since: Option<&str>) -> Value {
    let mut annotations = json!({
        ETCD_CLUSTER_ID_ANNOTATION: cluster_id,
        ETCD_MEMBER_ID_ANNOTATION: member_id,
    });
    if let (Some(since), Some(map)) = (leader_since, annotations.as_object_mut()) {
        map.insert(ETCD_LEADER_FROM_ANNOTATION.into(), json!(since));
    }
    annotations
}

/// A non-zero random etcd id (as CAPD: a random 32-bit number in decimal).
pub fn random_etcd_id() -> String {
    fastrand::u32(1..).to_string()
}

/// What `kubeadm init` leaves in a cluster that Cluster API reads or updates, by resource
/// plural: the `kubeadm-config` ConfigMap, the `kubeadm:get-nodes` ClusterRole and binding, the
/// `kube-proxy` DaemonSet and the `coredns` ConfigMap and Deployment.
pub fn kubeadm_objects(kubernetes_version: &str) -> Vec<(&'static str, Value)> {
    let cluster_configuration = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: {kubernetes_version}\n"
    );
    let labels = |app: &str| json!({"k8s-app": app});
    vec![
        (
            "configmaps",
            json!({
                "metadata": {"name": "kubeadm-config", "namespace": KUBE_SYSTEM},
                "data": {"ClusterConfiguration": cluster_configuration},
            }),
        ),
        (
            "clusterroles",
            json!({
                "metadata": {"name": "kubeadm:get-nodes"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
            }),
        ),
        (
            "clusterrolebindings",
            json!({
                "metadata": {"name": "kubeadm:get-nodes"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "kubeadm:get-nodes",
                },
                "subjects": [{
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Group",
                    "name": "system:bootstrappers:kubeadm:default-node-token",
                }],
            }),
        ),
        (
            "daemonsets",
            json!({
                "metadata": {"name": "kube-proxy", "namespace": KUBE_SYSTEM, "labels": labels("kube-proxy")},
                "spec": {
                    "selector": {"matchLabels": labels("kube-proxy")},
                    "template": {
                        "metadata": {"labels": labels("kube-proxy")},
                        "spec": {"containers": [{
                            "name": "kube-proxy",
                            "image": format!("registry.k8s.io/kube-proxy:{kubernetes_version}"),
                        }]},
                    },
                },
            }),
        ),
        (
            "configmaps",
            json!({
                "metadata": {"name": "coredns", "namespace": KUBE_SYSTEM},
                "data": {"Corefile": ".:53 {\n    forward . /etc/resolv.conf\n}\n"},
            }),
        ),
        (
            "deployments",
            json!({
                "metadata": {"name": "coredns", "namespace": KUBE_SYSTEM, "labels": labels("kube-dns")},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels("kube-dns")},
                    "template": {
                        "metadata": {"labels": labels("kube-dns")},
                        "spec": {"containers": [{
                            "name": "coredns",
                            "image": "registry.k8s.io/coredns/coredns:v1.12.1",
                        }]},
                    },
                },
            }),
        ),
    ]
}
