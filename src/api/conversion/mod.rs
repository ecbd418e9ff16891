//! Conversions between v1beta1 and v1beta2 (the hub), between the retired v1alpha3 and v1alpha4
//! and the hub ([`legacy`]), and the dynamic entry point [`convert_object`] the conversion
//! webhook calls.
//!
//! Data a v1beta1 object cannot hold (for example `status.initialization.provisioned` being
//! absent rather than `false`, or the order of failure domains) travels the way CAPD carries it:
//! the down-converted object gets the annotation [`CONVERSION_DATA_ANNOTATION`] with the hub
//! object (without metadata) as JSON, and up-conversion restores from it and drops it. A value
//! is restored only while the v1beta1 object still says the same thing, so edits made through
//! v1beta1 win. DockerCluster, DockerMachine, DockerMachinePool, DevCluster and DevMachine always
//! carry the annotation (as CAPD does for its non-template kinds); templates only when something
//! would otherwise be lost.

mod cluster;
mod dev;
mod legacy;
mod machine;
mod pool;

#[cfg(test)]
mod tests;

pub use cluster::*;
pub use dev::*;
pub use legacy::*;
pub use machine::*;
pub use pool::*;

use kube::Resource;
use kube::core::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{CONVERSION_DATA_ANNOTATION, GROUP, v1beta1, v1beta2};

/// Failure to convert an object between API versions.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The object has no `apiVersion` or `kind`, or they are not strings.
    #[error("failed to read apiVersion and kind of the object")]
    MissingTypeMeta,
    /// The object or the target is outside our API group.
    #[error("cannot convert {api_version}: not in group {GROUP}")]
    ForeignGroup {
        /// The offending apiVersion.
        api_version: String,
    },
    /// The kind is not one we serve.
    #[error("cannot convert kind {kind}: not served by this provider")]
    UnknownKind {
        /// The offending kind.
        kind: String,
    },
    /// The version is not one the kind's CRD lists.
    #[error("cannot convert {kind} to or from version {version}: not a version of this kind")]
    UnknownVersion {
        /// Kind being converted.
        kind: String,
        /// The offending version.
        version: String,
    },
    /// The object does not decode as its declared kind and version.
    #[error("failed to decode {kind} {version}")]
    Decode {
        /// Kind being decoded.
        kind: String,
        /// Version being decoded.
        version: String,
        /// Why it failed.
        #[source]
        source: serde_json::Error,
    },
    /// The converted object could not be encoded.
    #[error("failed to encode the converted {kind}")]
    Encode {
        /// Kind being encoded.
        kind: String,
        /// Why it failed.
        #[source]
        source: serde_json::Error,
    },
    /// The conversion-data annotation does not hold a valid hub object.
    #[error("failed to read the {CONVERSION_DATA_ANNOTATION} annotation of {kind}")]
    ConversionData {
        /// Kind being converted.
        kind: String,
        /// Why it failed.
        #[source]
        source: serde_json::Error,
    },
    /// A v1beta1 port does not fit the v1beta2 field.
    #[error("cannot convert control plane endpoint port {port}: out of range")]
    PortOutOfRange {
        /// The offending port.
        port: i64,
    },
}

/// Converts any of our objects (as JSON) to `desired_api_version`, for example
/// `infrastructure.cluster.x-k8s.io/v1beta1`. An object already in that version is returned as
/// it is; any other goes through the hub (v1beta2), as controller-runtime's webhook does: up from
/// its version, then down to the desired one. The retired versions a kind's CRD lists (v1alpha3,
/// v1alpha4) convert too: kube-apiserver converts every stored object into every listed version,
/// served or not. Never panics: unknown kinds and versions are errors.
pub fn convert_object(obj: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let type_field = |name: &str| obj.get(name).and_then(Value::as_str).map(str::to_string);
    let (Some(api_version), Some(kind)) = (type_field("apiVersion"), type_field("kind")) else {
        return Err(ConversionError::MissingTypeMeta);
    };
    let from = version_of(&api_version)?;
    let to = version_of(desired_api_version)?;
    known_kind(&kind)?;
    for version in [from, to] {
        if !has_version(&kind, version) {
            return Err(ConversionError::UnknownVersion {
                kind,
                version: version.to_string(),
            });
        }
    }
    if from == to {
        return Ok(obj);
    }
    let hub = to_hub(obj, &kind, from)?;
    from_hub(hub, &kind, to)
}

/// Whether `version` is one the CRD of `kind` lists.
fn has_version(kind: &str, version: &str) -> bool {
    version == v1beta2::VERSION
        || (version == v1beta1::VERSION && !super::crd::V1BETA2_ONLY.contains(&kind))
        || super::crd::retired_versions(kind).contains(&version)
}

/// Converts `obj`, of version `version`, to the hub.
fn to_hub(obj: Value, kind: &str, version: &str) -> Result<Value, ConversionError> {
    use super::legacy::{V1ALPHA3, V1ALPHA4};
    let legacy = version == V1ALPHA3 || version == V1ALPHA4;
    match kind {
        _ if version == v1beta2::VERSION => Ok(obj),
        "DockerCluster" if version == V1ALPHA3 => {
            via(obj, kind, version, docker_cluster_v1alpha3_to_hub)
        }
        "DockerCluster" if version == V1ALPHA4 => {
            via(obj, kind, version, docker_cluster_v1alpha4_to_hub)
        }
        "DockerClusterTemplate" if version == V1ALPHA4 => {
            via(obj, kind, version, docker_cluster_template_v1alpha4_to_hub)
        }
        "DockerMachine" if legacy => via(obj, kind, version, docker_machine_legacy_to_hub),
        "DockerMachineTemplate" if legacy => {
            via(obj, kind, version, docker_machine_template_legacy_to_hub)
        }
        "DockerMachinePool" if legacy => via(obj, kind, version, docker_machine_pool_legacy_to_hub),
        _ if version != v1beta1::VERSION => Err(ConversionError::UnknownVersion {
            kind: kind.to_string(),
            version: version.to_string(),
        }),
        "DockerCluster" => via(obj, kind, version, docker_cluster_to_hub),
        "DockerClusterTemplate" => via(obj, kind, version, docker_cluster_template_to_hub),
        "DockerMachine" => via(obj, kind, version, docker_machine_to_hub),
        "DockerMachineTemplate" => via(obj, kind, version, docker_machine_template_to_hub),
        "DockerMachinePool" => via(obj, kind, version, docker_machine_pool_to_hub),
        "DockerMachinePoolTemplate" => via(obj, kind, version, docker_machine_pool_template_to_hub),
        "DevCluster" => via(obj, kind, version, dev_cluster_to_hub),
        "DevClusterTemplate" => via(obj, kind, version, dev_cluster_template_to_hub),
        "DevMachine" => via(obj, kind, version, dev_machine_to_hub),
        "DevMachineTemplate" => via(obj, kind, version, dev_machine_template_to_hub),
        _ => Err(ConversionError::UnknownKind {
            kind: kind.to_string(),
        }),
    }
}

/// Converts the hub object `hub` to `version`.
fn from_hub(hub: Value, kind: &str, version: &str) -> Result<Value, ConversionError> {
    use super::legacy::{V1ALPHA3, V1ALPHA4};
    let legacy = version == V1ALPHA3 || version == V1ALPHA4;
    let from = v1beta2::VERSION;
    match kind {
        _ if version == v1beta2::VERSION => Ok(hub),
        "DockerCluster" if version == V1ALPHA3 => {
            via(hub, kind, from, docker_cluster_v1alpha3_from_hub)
        }
        "DockerCluster" if version == V1ALPHA4 => {
            via(hub, kind, from, docker_cluster_v1alpha4_from_hub)
        }
        "DockerClusterTemplate" if version == V1ALPHA4 => {
            via(hub, kind, from, docker_cluster_template_v1alpha4_from_hub)
        }
        "DockerMachine" if legacy => via(hub, kind, from, |h: &v1beta2::DockerMachine| {
            docker_machine_legacy_from_hub(h, version)
        }),
        "DockerMachineTemplate" if legacy => {
            via(hub, kind, from, |h: &v1beta2::DockerMachineTemplate| {
                docker_machine_template_legacy_from_hub(h, version)
            })
        }
        "DockerMachinePool" if legacy => via(hub, kind, from, |h: &v1beta2::DockerMachinePool| {
            docker_machine_pool_legacy_from_hub(h, version)
        }),
        _ if version != v1beta1::VERSION => Err(ConversionError::UnknownVersion {
            kind: kind.to_string(),
            version: version.to_string(),
        }),
        "DockerCluster" => via(hub, kind, from, docker_cluster_from_hub),
        "DockerClusterTemplate" => via(hub, kind, from, docker_cluster_template_from_hub),
        "DockerMachine" => via(hub, kind, from, docker_machine_from_hub),
        "DockerMachineTemplate" => via(hub, kind, from, docker_machine_template_from_hub),
        "DockerMachinePool" => via(hub, kind, from, docker_machine_pool_from_hub),
        "DockerMachinePoolTemplate" => via(hub, kind, from, docker_machine_pool_template_from_hub),
        "DevCluster" => via(hub, kind, from, dev_cluster_from_hub),
        "DevClusterTemplate" => via(hub, kind, from, dev_cluster_template_from_hub),
        "DevMachine" => via(hub, kind, from, dev_machine_from_hub),
        "DevMachineTemplate" => via(hub, kind, from, dev_machine_template_from_hub),
        _ => Err(ConversionError::UnknownKind {
            kind: kind.to_string(),
        }),
    }
}

fn known_kind(kind: &str) -> Result<(), ConversionError> {
    match kind {
        "DockerCluster"
        | "DockerClusterTemplate"
        | "DockerMachine"
        | "DockerMachineTemplate"
        | "DockerMachinePool"
        | "DockerMachinePoolTemplate"
        | "DevCluster"
        | "DevClusterTemplate"
        | "DevMachine"
        | "DevMachineTemplate"
        | "DevMachinePool"
        | "DevMachinePoolTemplate" => Ok(()),
        _ => Err(ConversionError::UnknownKind {
            kind: kind.to_string(),
        }),
    }
}

fn version_of(api_version: &str) -> Result<&str, ConversionError> {
    match api_version.split_once('/') {
        Some((group, version)) if group == GROUP => Ok(version),
        _ => Err(ConversionError::ForeignGroup {
            api_version: api_version.to_string(),
        }),
    }
}

/// Decodes `obj` (of `version`) as `From`, converts it and encodes the result.
fn via<From, To>(
    obj: Value,
    kind: &str,
    version: &str,
    convert: impl Fn(&From) -> Result<To, ConversionError>,
) -> Result<Value, ConversionError>
where
    From: DeserializeOwned,
    To: Serialize,
{
    let from: From = serde_json::from_value(obj).map_err(|source| ConversionError::Decode {
        kind: kind.to_string(),
        version: version.to_string(),
        source,
    })?;
    serde_json::to_value(convert(&from)?).map_err(|source| ConversionError::Encode {
        kind: kind.to_string(),
        source,
    })
}

/// The hub object as CAPD stores it in the annotation: everything but `metadata`.
fn marshal_data<K: Resource<DynamicType = ()> + Serialize>(
    hub: &K,
    kind: &str,
) -> Result<String, ConversionError> {
    let mut value = serde_json::to_value(hub).map_err(|source| ConversionError::Encode {
        kind: kind.to_string(),
        source,
    })?;
    if let Value::Object(map) = &mut value {
        map.remove("metadata");
    }
    Ok(value.to_string())
}

/// Copies `metadata`, optionally adding the conversion-data annotation.
fn down_metadata(meta: &ObjectMeta, data: Option<String>) -> ObjectMeta {
    let mut meta = meta.clone();
    if let Some(data) = data {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(CONVERSION_DATA_ANNOTATION.to_string(), data);
    }
    meta
}

/// Copies `metadata` without the conversion-data annotation, and decodes that annotation.
fn up_metadata<Hub: DeserializeOwned>(
    meta: &ObjectMeta,
    kind: &str,
) -> Result<(ObjectMeta, Option<Hub>), ConversionError> {
    let mut meta = meta.clone();
    let data = meta
        .annotations
        .as_mut()
        .and_then(|a| a.remove(CONVERSION_DATA_ANNOTATION));
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
    let restored = match data {
        None => None,
        Some(text) => {
            let mut value: Value =
                serde_json::from_str(&text).map_err(|source| ConversionError::ConversionData {
                    kind: kind.to_string(),
                    source,
                })?;
            if let Value::Object(map) = &mut value {
                map.insert("metadata".into(), Value::Object(Default::default()));
            }
            Some(serde_json::from_value(value).map_err(|source| {
                ConversionError::ConversionData {
                    kind: kind.to_string(),
                    source,
                }
            })?)
        }
    };
    Ok((meta, restored))
}

/// Restores `restored` into `target` when projecting it down gives what the spoke holds now.
fn restore_if_unchanged<T: Clone, P: PartialEq>(
    target: &mut T,
    restored: &T,
    project: impl Fn(&T) -> P,
) {
    if project(restored) == project(target) {
        *target = restored.clone();
    }
}

/// Hub failure domains as the v1beta1 map.
fn failure_domains_down(domains: &[v1beta2::FailureDomain]) -> v1beta1::FailureDomains {
    domains
        .iter()
        .map(|fd| {
            (
                fd.name.clone(),
                v1beta1::FailureDomainSpec {
                    control_plane: fd.control_plane.unwrap_or(false),
                    attributes: fd.attributes.clone(),
                },
            )
        })
        .collect()
}

/// v1beta1 failure domains as the hub list, sorted by name (as CAPD does).
fn failure_domains_up(domains: &v1beta1::FailureDomains) -> Vec<v1beta2::FailureDomain> {
    domains
        .iter()
        .map(|(name, fd)| v1beta2::FailureDomain {
            name: name.clone(),
            control_plane: Some(fd.control_plane),
            attributes: fd.attributes.clone(),
        })
        .collect()
}

/// Restores the hub's failure domains (their order, an unset `controlPlane`) while the v1beta1
/// map still says the same.
fn restore_failure_domains(
    domains: &mut Vec<v1beta2::FailureDomain>,
    restored: &[v1beta2::FailureDomain],
) {
    restore_if_unchanged(domains, &restored.to_vec(), |fds| failure_domains_down(fds));
}

/// A template's `spec.template.metadata` in v1beta2.
fn template_meta_up(meta: &v1beta1::TemplateObjectMeta) -> v1beta2::TemplateObjectMeta {
    v1beta2::TemplateObjectMeta {
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
    }
}

/// A template's `spec.template.metadata` in v1beta1.
fn template_meta_down(meta: &v1beta2::TemplateObjectMeta) -> v1beta1::TemplateObjectMeta {
    v1beta1::TemplateObjectMeta {
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
    }
}
