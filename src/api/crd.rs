//! The CustomResourceDefinitions of our kinds, built from the Rust types: both versions merged
//! (v1beta2 stored), Cluster API contract labels, and conversion through our webhook. CAPD's
//! retired versions v1alpha3 and v1alpha4 are not listed, as in CAPD 1.13 and later: an
//! installation that stored objects in them must have them migrated (`status.storedVersions`
//! trimmed) before these CRDs apply, which CAPD 1.10 to 1.12's manager and ours do at start-up
//! ([`crate::crdmigrator`]).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceValidation, ServiceReference,
    WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde_json::Value;

use super::schema::{root_schema, schema_for};
use super::{v1beta1, v1beta2};

/// Name of the Service in front of the conversion webhook (kustomize adds the `capd-` prefix).
pub const WEBHOOK_SERVICE_NAME: &str = "webhook-service";
/// Namespace of that Service before kustomize rewrites it.
pub const WEBHOOK_SERVICE_NAMESPACE: &str = "system";
/// HTTP path of the conversion webhook.
pub const CONVERSION_PATH: &str = "/convert";

/// Failure to build a CRD from the Rust types.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The generated schema does not fit the CRD schema type.
    #[error("failed to convert the generated schema of {kind} {version}")]
    Schema {
        /// Kind whose schema failed.
        kind: String,
        /// Version whose schema failed.
        version: String,
        /// Why it failed.
        #[source]
        source: serde_json::Error,
    },
    /// The CRD could not be turned into JSON.
    #[error("failed to serialize the {name} CRD")]
    Json {
        /// Name of the CRD.
        name: String,
        /// Why it failed.
        #[source]
        source: serde_json::Error,
    },
    /// The CRD could not be rendered as YAML.
    #[error("failed to render the {name} CRD as YAML")]
    Yaml {
        /// Name of the CRD.
        name: String,
        /// Why it failed.
        #[source]
        source: serde_saphyr::SerializeError,
    },
    /// Versions of a kind disagree on group, kind or scope.
    #[error("failed to merge the versions of {kind}")]
    Merge {
        /// Kind whose versions failed to merge.
        kind: String,
        /// Why it failed.
        #[source]
        source: kube::core::crd::MergeError,
    },
}

/// How an object of one kind looks in one version.
struct VersionSpec {
    crd: CustomResourceDefinition,
    description: &'static str,
    spec: Value,
    status: Option<Value>,
}

impl VersionSpec {
    /// A kind with a spec and a status subresource.
    fn with_status<K: CustomResourceExt, S: JsonSchema, T: JsonSchema>(
        description: &'static str,
    ) -> Self {
        Self {
            crd: K::crd(),
            description,
            spec: schema_for::<S>(),
            status: Some(schema_for::<T>()),
        }
    }

    /// A kind with only a spec.
    fn spec_only<K: CustomResourceExt, S: JsonSchema>(description: &'static str) -> Self {
        Self {
            crd: K::crd(),
            description,
            spec: schema_for::<S>(),
            status: None,
        }
    }

    /// Makes the API server fill in `spec: {}` when a client leaves it out, so every stored
    /// object decodes into the typed structs (only for kinds whose spec has no required field).
    fn defaulted_spec(mut self) -> Self {
        if let Value::Object(spec) = &mut self.spec {
            spec.insert("default".into(), Value::Object(Default::default()));
        }
        self
    }

    fn into_crd(self) -> Result<CustomResourceDefinition, CrdError> {
        let mut crd = self.crd;
        let kind = crd.spec.names.kind.clone();
        let root = root_schema(self.description, self.spec, self.status);
        for version in &mut crd.spec.versions {
            let schema =
                serde_json::from_value(root.clone()).map_err(|source| CrdError::Schema {
                    kind: kind.clone(),
                    version: version.name.clone(),
                    source,
                })?;
            version.schema = Some(CustomResourceValidation {
                open_api_v3_schema: Some(schema),
            });
        }
        Ok(crd)
    }
}

/// The retired versions CAPD 1.12's CRDs list (unserved) for each kind. Our CRDs no longer list
/// them, as CAPD 1.13 removed them; the conversion webhook still converts them, for as long as CAPD
/// 1.12's CRDs are in front of this manager ([`super::conversion`] says when).
const LEGACY_VERSIONS: &[(&str, &[&str])] = &[
    ("DockerCluster", &["v1alpha3", "v1alpha4"]),
    ("DockerClusterTemplate", &["v1alpha4"]),
    ("DockerMachine", &["v1alpha3", "v1alpha4"]),
    ("DockerMachineTemplate", &["v1alpha3", "v1alpha4"]),
    ("DockerMachinePool", &["v1alpha3", "v1alpha4"]),
];

/// The kinds CAPD introduced in v1beta2 (1.13): their CRDs list no other version, and the
/// conversion webhook converts them to no other.
pub const V1BETA2_ONLY: &[&str] = &["DevMachinePool", "DevMachinePoolTemplate"];

/// The retired versions CAPD 1.12's CRD of `kind` lists (none for a kind CAPD introduced in
/// v1beta1 or later), which the conversion webhook converts to and from ([`super::legacy`]).
pub fn retired_versions(kind: &str) -> &'static [&'static str] {
    LEGACY_VERSIONS
        .iter()
        .find(|(legacy_kind, _)| *legacy_kind == kind)
        .map_or(&[][..], |(_, names)| names)
}

/// The successor of a Docker* kind (`DevMachine` for `DockerMachine`), `None` for a Dev kind.
pub fn successor(kind: &str) -> Option<String> {
    kind.strip_prefix("Docker").map(|rest| format!("Dev{rest}"))
}

/// Marks the v1beta2 version of a Docker* kind deprecated, as CAPD 1.13 and later do (v1beta1
/// already is), with CAPD's sentence in its schema description. No `deprecationWarning`: the API
/// server then warns with its default text, as it does for CAPD's CRDs.
fn deprecate_docker_kind(crd: &mut CustomResourceDefinition) {
    let kind = crd.spec.names.kind.clone();
    let Some(dev) = successor(&kind) else {
        return;
    };
    for version in &mut crd.spec.versions {
        if version.name != v1beta2::VERSION {
            continue;
        }
        version.deprecated = Some(true);
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            let text = root.description.take().unwrap_or_default();
            root.description = Some(format!(
                "{text}\n\nDeprecated: {kind} is deprecated. Use {dev} instead."
            ));
        }
    }
}

fn merge(versions: Vec<VersionSpec>) -> Result<CustomResourceDefinition, CrdError> {
    let crds = versions
        .into_iter()
        .map(VersionSpec::into_crd)
        .collect::<Result<Vec<_>, _>>()?;
    let kind = crds
        .first()
        .map(|c| c.spec.names.kind.clone())
        .unwrap_or_default();
    let mut crd = kube::core::crd::merge_crds(crds, v1beta2::VERSION)
        .map_err(|source| CrdError::Merge { kind, source })?;
    deprecate_docker_kind(&mut crd);
    crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    crd.metadata.labels = Some(BTreeMap::from([
        (
            "cluster.x-k8s.io/v1beta1".to_string(),
            "v1beta1".to_string(),
        ),
        (
            "cluster.x-k8s.io/v1beta2".to_string(),
            "v1beta2".to_string(),
        ),
    ]));
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: WEBHOOK_SERVICE_NAME.into(),
                    namespace: WEBHOOK_SERVICE_NAMESPACE.into(),
                    path: Some(CONVERSION_PATH.into()),
                    port: None,
                }),
                ..Default::default()
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    });
    Ok(crd)
}

const DOCKER_CLUSTER_DOC: &str = "DockerCluster is the infrastructure of one Cluster API workload cluster on Docker: \
     the network its nodes join and the haproxy load balancer in front of its control plane.";
const DOCKER_CLUSTER_TEMPLATE_DOC: &str =
    "DockerClusterTemplate describes DockerClusters to create, for ClusterClass-based clusters.";
const DOCKER_MACHINE_DOC: &str = "DockerMachine is the infrastructure of one Cluster API Machine on Docker: a container \
     running a Kubernetes node image.";
const DOCKER_MACHINE_TEMPLATE_DOC: &str = "DockerMachineTemplate describes DockerMachines to create, for control planes and \
     machine deployments.";

/// The DockerCluster CRD.
pub fn docker_cluster() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DockerCluster,
            v1beta2::DockerClusterSpec,
            v1beta2::DockerClusterStatus,
        >(DOCKER_CLUSTER_DOC)
        .defaulted_spec(),
        VersionSpec::with_status::<
            v1beta1::DockerCluster,
            v1beta1::DockerClusterSpec,
            v1beta1::DockerClusterStatus,
        >(DOCKER_CLUSTER_DOC)
        .defaulted_spec(),
    ])
}

/// The DockerClusterTemplate CRD.
pub fn docker_cluster_template() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::spec_only::<v1beta2::DockerClusterTemplate, v1beta2::DockerClusterTemplateSpec>(
            DOCKER_CLUSTER_TEMPLATE_DOC,
        ),
        VersionSpec::spec_only::<v1beta1::DockerClusterTemplate, v1beta1::DockerClusterTemplateSpec>(
            DOCKER_CLUSTER_TEMPLATE_DOC,
        ),
    ])
}

/// The DockerMachine CRD.
pub fn docker_machine() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DockerMachine,
            v1beta2::DockerMachineSpec,
            v1beta2::DockerMachineStatus,
        >(DOCKER_MACHINE_DOC)
        .defaulted_spec(),
        VersionSpec::with_status::<
            v1beta1::DockerMachine,
            v1beta1::DockerMachineSpec,
            v1beta1::DockerMachineStatus,
        >(DOCKER_MACHINE_DOC)
        .defaulted_spec(),
    ])
}

/// The DockerMachineTemplate CRD.
pub fn docker_machine_template() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DockerMachineTemplate,
            v1beta2::DockerMachineTemplateSpec,
            v1beta2::DockerMachineTemplateStatus,
        >(DOCKER_MACHINE_TEMPLATE_DOC),
        VersionSpec::spec_only::<v1beta1::DockerMachineTemplate, v1beta1::DockerMachineTemplateSpec>(
            DOCKER_MACHINE_TEMPLATE_DOC,
        ),
    ])
}

const DOCKER_MACHINE_POOL_DOC: &str = "DockerMachinePool is the infrastructure of one Cluster API MachinePool on Docker: \
     a group of identical node containers.";
const DOCKER_MACHINE_POOL_TEMPLATE_DOC: &str = "DockerMachinePoolTemplate describes DockerMachinePools to create, for ClusterClass-based clusters.";

/// The DockerMachinePool CRD.
pub fn docker_machine_pool() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DockerMachinePool,
            v1beta2::DockerMachinePoolSpec,
            v1beta2::DockerMachinePoolStatus,
        >(DOCKER_MACHINE_POOL_DOC)
        .defaulted_spec(),
        VersionSpec::with_status::<
            v1beta1::DockerMachinePool,
            v1beta1::DockerMachinePoolSpec,
            v1beta1::DockerMachinePoolStatus,
        >(DOCKER_MACHINE_POOL_DOC)
        .defaulted_spec(),
    ])
}

/// The DockerMachinePoolTemplate CRD.
pub fn docker_machine_pool_template() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DockerMachinePoolTemplate,
            v1beta2::DockerMachinePoolTemplateSpec,
            v1beta2::DockerMachinePoolTemplateStatus,
        >(DOCKER_MACHINE_POOL_TEMPLATE_DOC),
        VersionSpec::with_status::<
            v1beta1::DockerMachinePoolTemplate,
            v1beta1::DockerMachinePoolTemplateSpec,
            v1beta1::DockerMachinePoolTemplateStatus,
        >(DOCKER_MACHINE_POOL_TEMPLATE_DOC),
    ])
}

const DEV_CLUSTER_DOC: &str = "DevCluster is the infrastructure of one Cluster API workload cluster, made by the \
     backend its spec names: with the docker backend, the network its nodes join and the haproxy \
     load balancer in front of its control plane, as a DockerCluster.";
const DEV_CLUSTER_TEMPLATE_DOC: &str =
    "DevClusterTemplate describes DevClusters to create, for ClusterClass-based clusters.";
const DEV_MACHINE_DOC: &str = "DevMachine is the infrastructure of one Cluster API Machine, made by the backend its \
     spec names: with the docker backend, a container running a Kubernetes node image, as a \
     DockerMachine.";
const DEV_MACHINE_TEMPLATE_DOC: &str = "DevMachineTemplate describes DevMachines to create, for control planes and machine deployments.";

/// The DevCluster CRD.
pub fn dev_cluster() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DevCluster,
            v1beta2::DevClusterSpec,
            v1beta2::DevClusterStatus,
        >(DEV_CLUSTER_DOC),
        VersionSpec::with_status::<
            v1beta1::DevCluster,
            v1beta1::DevClusterSpec,
            v1beta1::DevClusterStatus,
        >(DEV_CLUSTER_DOC),
    ])
}

/// The DevClusterTemplate CRD.
pub fn dev_cluster_template() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::spec_only::<v1beta2::DevClusterTemplate, v1beta2::DevClusterTemplateSpec>(
            DEV_CLUSTER_TEMPLATE_DOC,
        ),
        VersionSpec::spec_only::<v1beta1::DevClusterTemplate, v1beta1::DevClusterTemplateSpec>(
            DEV_CLUSTER_TEMPLATE_DOC,
        ),
    ])
}

/// The DevMachine CRD.
pub fn dev_machine() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DevMachine,
            v1beta2::DevMachineSpec,
            v1beta2::DevMachineStatus,
        >(DEV_MACHINE_DOC),
        VersionSpec::with_status::<
            v1beta1::DevMachine,
            v1beta1::DevMachineSpec,
            v1beta1::DevMachineStatus,
        >(DEV_MACHINE_DOC),
    ])
}

/// The DevMachineTemplate CRD.
pub fn dev_machine_template() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DevMachineTemplate,
            v1beta2::DevMachineTemplateSpec,
            v1beta2::DevMachineTemplateStatus,
        >(DEV_MACHINE_TEMPLATE_DOC),
        VersionSpec::spec_only::<v1beta1::DevMachineTemplate, v1beta1::DevMachineTemplateSpec>(
            DEV_MACHINE_TEMPLATE_DOC,
        ),
    ])
}

const DEV_MACHINE_POOL_DOC: &str = "DevMachinePool is the infrastructure of one Cluster API MachinePool, made by the \
     backend its spec names: with the docker backend, a group of identical node containers, as \
     a DockerMachinePool.";
const DEV_MACHINE_POOL_TEMPLATE_DOC: &str =
    "DevMachinePoolTemplate describes DevMachinePools to create, for ClusterClass-based clusters.";

/// The DevMachinePool CRD (v1beta2 only, as in CAPD 1.14).
pub fn dev_machine_pool() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![
        VersionSpec::with_status::<
            v1beta2::DevMachinePool,
            v1beta2::DevMachinePoolSpec,
            v1beta2::DevMachinePoolStatus,
        >(DEV_MACHINE_POOL_DOC)
        .defaulted_spec(),
    ])
}

/// The DevMachinePoolTemplate CRD (v1beta2 only, as in CAPD 1.14).
pub fn dev_machine_pool_template() -> Result<CustomResourceDefinition, CrdError> {
    merge(vec![VersionSpec::with_status::<
        v1beta2::DevMachinePoolTemplate,
        v1beta2::DevMachinePoolTemplateSpec,
        v1beta2::DevMachinePoolTemplateStatus,
    >(DEV_MACHINE_POOL_TEMPLATE_DOC)])
}

/// Every CRD this provider installs, in a stable order.
pub fn all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        docker_cluster()?,
        docker_cluster_template()?,
        docker_machine()?,
        docker_machine_template()?,
        docker_machine_pool()?,
        docker_machine_pool_template()?,
        dev_cluster()?,
        dev_cluster_template()?,
        dev_machine()?,
        dev_machine_template()?,
        dev_machine_pool()?,
        dev_machine_pool_template()?,
    ])
}

/// File name under `config/crd/bases/` for a CRD, as controller-gen names it.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// Renders a CRD as the YAML document committed under `config/crd/bases/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let mut value = serde_json::to_value(crd).map_err(|source| CrdError::Json {
        name: name.clone(),
        source,
    })?;
    integral_numbers(&mut value);
    let body = serde_saphyr::to_string(&value).map_err(|source| CrdError::Yaml { name, source })?;
    Ok(format!("---\n{body}"))
}

/// Writes whole-number floats (the CRD types hold bounds as `f64`) as integers, so the YAML
/// says `maximum: 65535` like controller-gen's output.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64()
                && !number.is_i64()
                && !number.is_u64()
                && float.fract() == 0.0
                && float.abs() < 9.0e15
            {
                *value = Value::from(float as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers),
        _ => {}
    }
}
