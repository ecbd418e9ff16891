//! The resources a fake workload cluster serves, and its discovery documents.

use serde_json::{Value, json};

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceType {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural name, as in URLs.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

impl ResourceType {
    /// `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn resource(
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        plural,
        kind,
        namespaced,
    }
}

/// What Cluster API core, KCP and CABPK read and write in a workload cluster.
pub const RESOURCES: &[ResourceType] = &[
    resource("", "nodes", "Node", false),
    resource("", "pods", "Pod", true),
    resource("", "namespaces", "Namespace", false),
    resource("", "configmaps", "ConfigMap", true),
    resource("", "secrets", "Secret", true),
    resource("", "services", "Service", true),
    resource("", "endpoints", "Endpoints", true),
    resource("", "serviceaccounts", "ServiceAccount", true),
    resource(
        "rbac.authorization.k8s.io",
        "clusterroles",
        "ClusterRole",
        false,
    ),
    resource(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
    ),
    resource("rbac.authorization.k8s.io", "roles", "Role", true),
    resource(
        "rbac.authorization.k8s.io",
        "rolebindings",
        "RoleBinding",
        true,
    ),
    resource("apps", "daemonsets", "DaemonSet", true),
    resource("apps", "deployments", "Deployment", true),
    resource("coordination.k8s.io", "leases", "Lease", true),
    // Core lists them while a Machine's deletion waits for volumes to detach (the feature gate
    // MachineWaitForVolumeDetachConsiderVolumeAttachments, on by default in 1.12).
    resource(
        "storage.k8s.io",
        "volumeattachments",
        "VolumeAttachment",
        false,
    ),
    // Served by CAPD 1.14's fake API server (its const.go discovery and in-memory scheme).
    resource("storage.k8s.io", "csidrivers", "CSIDriver", false),
    resource(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    ),
    resource(
        "policy",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    ),
];

/// The resource of `group`/`version` named `plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects have `kind` in `group`.
pub fn by_kind(group: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.kind == kind)
}

/// The named groups (not the core group), in order of first appearance.
fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !groups.contains(&r.group) {
            groups.push(r.group);
        }
    }
    groups
}

/// `GET /api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
}

fn group_document(group: &str) -> Value {
    let version = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({
        "name": group,
        "versions": [version.clone()],
        "preferredVersion": version,
    })
}

/// `GET /apis`.
pub fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(group_document).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`, `None` for a group not served.
pub fn group(group: &str) -> Option<Value> {
    groups().contains(&group).then(|| {
        let mut document = group_document(group);
        if let Some(map) = document.as_object_mut() {
            map.insert("kind".into(), json!("APIGroup"));
            map.insert("apiVersion".into(), json!("v1"));
        }
        document
    })
}

/// `GET /api/v1` or `GET /apis/<group>/<version>`, `None` when nothing is served there.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let served: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(|r| {
            let main = json!({
                "name": r.plural,
                "singularName": r.kind.to_lowercase(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            });
            let status = json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            });
            [main, status]
        })
        .collect();
    if served.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": served,
    }))
}
