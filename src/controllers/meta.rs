//! Pure helpers on object metadata: owners, external management, the cluster an object belongs
//! to, and references between Cluster API objects and ours.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::ObjectMeta;

use crate::api::capi::{CAPI_GROUP, ContractVersionedObjectReference};
use crate::api::{CLUSTER_NAME_LABEL, GROUP, MANAGED_BY_ANNOTATION};

/// The group part of an `apiVersion` (`""` for the core group).
pub fn api_group(api_version: &str) -> &str {
    api_version
        .split_once('/')
        .map_or("", |(group, _version)| group)
}

/// The first owner reference of the given API group and kind.
pub fn owner<'a>(meta: &'a ObjectMeta, group: &str, kind: &str) -> Option<&'a OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| o.kind == kind && api_group(&o.api_version) == group)
}

/// Name of the owning Cluster API `Cluster`, if set.
pub fn owner_cluster(meta: &ObjectMeta) -> Option<&str> {
    owner(meta, CAPI_GROUP, "Cluster").map(|o| o.name.as_str())
}

/// Name of the owning Cluster API `Machine`, if set.
pub fn owner_machine(meta: &ObjectMeta) -> Option<&str> {
    owner(meta, CAPI_GROUP, "Machine").map(|o| o.name.as_str())
}

/// Whether the infrastructure is managed by another system (annotation
/// `cluster.x-k8s.io/managed-by`, as Cluster API checks it; the contract text calls it a label, so
/// the label is honoured too). Such objects are never touched.
pub fn is_externally_managed(meta: &ObjectMeta) -> bool {
    let has = |map: &Option<std::collections::BTreeMap<String, String>>| {
        map.as_ref()
            .is_some_and(|m| m.contains_key(MANAGED_BY_ANNOTATION))
    };
    has(&meta.annotations) || has(&meta.labels)
}

/// The value of the `cluster.x-k8s.io/cluster-name` label.
pub fn cluster_label(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_NAME_LABEL))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Whether a Cluster API reference points at one of our kinds, by group and kind (v1beta2
/// references carry no version).
pub fn refers_to(reference: &ContractVersionedObjectReference, kind: &str) -> bool {
    reference.kind == kind && reference.api_group == GROUP && !reference.name.is_empty()
}

/// Whether the object is being deleted.
pub fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// `namespace/name` of an object, for messages.
pub fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned_by(api_version: &str, kind: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
                uid: "u".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn owners_are_matched_by_group_and_kind_whatever_the_version() {
        let meta = owned_by("cluster.x-k8s.io/v1beta1", "Cluster", "c1");
        assert_eq!(owner_cluster(&meta), Some("c1"));
        assert_eq!(owner_machine(&meta), None);
        let foreign = owned_by("example.com/v1", "Cluster", "c1");
        assert_eq!(owner_cluster(&foreign), None);
    }

    #[test]
    fn managed_by_annotation_or_label_means_external() {
        let mut meta = ObjectMeta::default();
        assert!(!is_externally_managed(&meta));
        meta.annotations = Some([(MANAGED_BY_ANNOTATION.to_string(), String::new())].into());
        assert!(is_externally_managed(&meta));
        let labelled = ObjectMeta {
            labels: Some([(MANAGED_BY_ANNOTATION.to_string(), "other".to_string())].into()),
            ..Default::default()
        };
        assert!(is_externally_managed(&labelled));
    }

    #[test]
    fn references_match_group_and_kind() {
        let reference = ContractVersionedObjectReference {
            api_group: GROUP.into(),
            kind: "DockerMachine".into(),
            name: "m1".into(),
        };
        assert!(refers_to(&reference, "DockerMachine"));
        assert!(!refers_to(&reference, "DockerCluster"));
        let other_group = ContractVersionedObjectReference {
            api_group: "infrastructure.example.com".into(),
            ..reference
        };
        assert!(!refers_to(&other_group, "DockerMachine"));
    }
}
