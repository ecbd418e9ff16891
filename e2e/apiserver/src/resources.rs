//! What the server serves: resource definitions for built-in kinds and for custom resources.

use serde_json::{Value, json};

/// Storage key of a resource: API group and plural name.
pub type ResKey = (String, String);

/// How a custom resource converts between its versions.
#[derive(Debug, Clone, PartialEq)]
pub enum Conversion {
    /// Only `apiVersion` is rewritten.
    None,
    /// A ConversionReview is posted to a webhook.
    Webhook {
        /// `clientConfig.url`, or the URL a service reference resolved to.
        url: Option<String>,
        /// PEM bundle to trust for the webhook's certificate.
        ca_bundle: Option<Vec<u8>>,
        /// `clientConfig.service` as `namespace/name`, when the webhook is addressed as a service.
        service: Option<String>,
        /// Path of the service reference (`/convert`).
        service_path: String,
        /// Name the certificate must carry when a service was resolved (`name.namespace.svc`).
        server_name: Option<String>,
    },
}

/// How stored objects are shown for one resource (events.k8s.io Events share storage with core Events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// Stored as served.
    Native,
    /// events.k8s.io/v1 view of core/v1 Events.
    EventsV1,
}

/// One served version of a resource.
#[derive(Debug, Clone)]
pub struct VersionDef {
    /// Version name (`v1beta2`).
    pub name: String,
    /// The version's structural schema (`openAPIV3Schema`), when it has one.
    pub schema: Option<Value>,
    /// Deprecation warning, when the version is deprecated.
    pub deprecation_warning: Option<String>,
    /// Extra fields usable in field selectors (`.spec.x` style, from `selectableFields`).
    pub selectable_fields: Vec<String>,
    /// `additionalPrinterColumns` of a CRD version.
    pub printer_columns: Vec<Value>,
}

/// A resource the server serves.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group, empty for core.
    pub group: String,
    /// Plural name (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Kind of the list.
    pub list_kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names shown in discovery.
    pub short_names: Vec<String>,
    /// Categories shown in discovery.
    pub categories: Vec<String>,
    /// Served versions, preferred first.
    pub versions: Vec<VersionDef>,
    /// Every version a CRD lists, served or not (kube-apiserver keeps a watch cache for each;
    /// see [`crate::cacher`]); empty for built-in kinds.
    pub listed_versions: Vec<String>,
    /// Version objects are stored in.
    pub storage_version: String,
    /// Whether `/status` is a subresource.
    pub status_subresource: bool,
    /// Whether `metadata.generation` is maintained.
    pub has_generation: bool,
    /// Whether PUT may create a missing object.
    pub allow_create_on_update: bool,
    /// Whether this is a custom resource served from a CRD.
    pub custom: bool,
    /// Conversion strategy between versions.
    pub conversion: Conversion,
    /// Where objects are stored.
    pub storage: ResKey,
    /// How stored objects are shown.
    pub representation: Representation,
    /// The Go zero value of the kind, used as the "before" of a create when tracking fields.
    pub zero: Value,
    /// Extra field-selector fields of built-in kinds (dotted paths).
    pub field_selectors: Vec<&'static str>,
}

impl ResourceDef {
    /// The storage key of this resource.
    pub fn key(&self) -> ResKey {
        (self.group.clone(), self.plural.clone())
    }

    /// `group/version` or `version` for core.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The served version of that name.
    pub fn version(&self, name: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|v| v.name == name)
    }

    /// The schema of a version, if any.
    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.version(version).and_then(|v| v.schema.as_ref())
    }

    /// Verbs shown in discovery.
    pub fn verbs(&self) -> Vec<&'static str> {
        let mut verbs = vec!["create", "delete"];
        if self.plural != "namespaces" {
            verbs.push("deletecollection");
        }
        verbs.extend(["get", "list", "patch", "update", "watch"]);
        verbs
    }

    /// Names the error messages use for this resource.
    pub fn qualified(&self) -> crate::error::Qualified<'_> {
        crate::error::Qualified {
            group: &self.group,
            resource: &self.plural,
        }
    }
}

fn builtin(
    [group, version, plural, kind]: [&str; 4],
    namespaced: bool,
    short_names: &[&str],
    schema: Value,
    zero: Value,
) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        versions: vec![VersionDef {
            name: version.into(),
            schema: Some(schema),
            deprecation_warning: None,
            selectable_fields: vec![],
            printer_columns: vec![],
        }],
        listed_versions: vec![],
        storage_version: version.into(),
        status_subresource: false,
        has_generation: false,
        allow_create_on_update: false,
        custom: false,
        conversion: Conversion::None,
        storage: (group.into(), plural.into()),
        representation: Representation::Native,
        zero,
        field_selectors: vec![],
    }
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

fn conditions() -> Value {
    json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object"}
    })
}

/// The schema of `metadata`, shared by every kind (what ObjectMeta declares for field tracking).
pub fn metadata_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "uid": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "generation": {"type": "integer"},
            "creationTimestamp": {"type": "string"},
            "deletionTimestamp": {"type": "string"},
            "deletionGracePeriodSeconds": {"type": "integer"},
            "selfLink": {"type": "string"},
            "labels": string_map(),
            "annotations": string_map(),
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"],
                "items": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "name": {"type": "string"}, "uid": {"type": "string"},
                    "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}
                }}
            },
            "managedFields": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object"}}
        }
    })
}

/// Fields of ObjectMeta; other keys under `metadata` are dropped like the Go decoder does.
pub const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The built-in resources every server starts with.
pub fn builtins() -> Vec<ResourceDef> {
    let empty = json!({"type": "object"});
    let mut namespace = builtin(
        ["", "v1", "namespaces", "Namespace"],
        false,
        &["ns"],
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"finalizers": {"type": "array", "x-kubernetes-list-type": "atomic"}}},
            "status": {"type": "object", "properties": {"conditions": conditions()}}
        }}),
        json!({"spec": {}, "status": {}}),
    );
    namespace.status_subresource = true;
    namespace.field_selectors = vec!["status.phase"];
    let data_schema = json!({"type": "object", "properties": {
        "data": string_map(), "binaryData": string_map(), "stringData": string_map()
    }});
    let mut secret = builtin(
        ["", "v1", "secrets", "Secret"],
        true,
        &[],
        data_schema.clone(),
        json!({}),
    );
    secret.field_selectors = vec!["type"];
    let configmap = builtin(
        ["", "v1", "configmaps", "ConfigMap"],
        true,
        &["cm"],
        data_schema,
        json!({}),
    );
    let serviceaccount = builtin(
        ["", "v1", "serviceaccounts", "ServiceAccount"],
        true,
        &["sa"],
        json!({"type": "object", "properties": {
            "secrets": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
            "imagePullSecrets": {"type": "array", "x-kubernetes-list-type": "atomic"}
        }}),
        json!({}),
    );
    let mut event = builtin(
        ["", "v1", "events", "Event"],
        true,
        &["ev"],
        empty.clone(),
        json!({"involvedObject": {}, "source": {}}),
    );
    event.allow_create_on_update = true;
    event.field_selectors = vec![
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ];
    let mut events_v1 = builtin(
        ["events.k8s.io", "v1", "events", "Event"],
        true,
        &["ev"],
        empty.clone(),
        json!({"regarding": {}, "deprecatedSource": {}}),
    );
    events_v1.storage = (String::new(), "events".into());
    events_v1.representation = Representation::EventsV1;
    events_v1.allow_create_on_update = true;
    let mut node = builtin(
        ["", "v1", "nodes", "Node"],
        false,
        &["no"],
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "taints": {"type": "array", "x-kubernetes-list-type": "atomic"},
                "podCIDRs": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
            }},
            "status": {"type": "object", "properties": {
                "conditions": conditions(),
                "addresses": conditions(),
                "capacity": string_map(),
                "allocatable": string_map()
            }}
        }}),
        json!({"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {}}, "nodeInfo": {}}}),
    );
    node.status_subresource = true;
    node.field_selectors = vec!["spec.unschedulable"];
    let mut lease = builtin(
        ["coordination.k8s.io", "v1", "leases", "Lease"],
        true,
        &[],
        empty,
        json!({"spec": {}}),
    );
    lease.allow_create_on_update = true;
    let mut crd = builtin(
        [
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
        ],
        false,
        &["crd", "crds"],
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "versions": {"type": "array", "x-kubernetes-list-type": "atomic"},
                "names": {"type": "object", "properties": {
                    "shortNames": {"type": "array", "x-kubernetes-list-type": "atomic"},
                    "categories": {"type": "array", "x-kubernetes-list-type": "atomic"}
                }}
            }},
            "status": {"type": "object", "properties": {
                "conditions": conditions(),
                "storedVersions": {"type": "array", "x-kubernetes-list-type": "atomic"}
            }}
        }}),
        json!({"spec": {"names": {}}, "status": {"acceptedNames": {}}}),
    );
    crd.status_subresource = true;
    crd.has_generation = true;
    crd.categories = vec!["api-extensions".into()];
    // Read by the admission plugins (`crate::admission`); `webhooks` merge by name.
    let webhooks = || {
        json!({"type": "object", "properties": {
            "webhooks": {"type": "array", "x-kubernetes-list-type": "map",
                         "x-kubernetes-list-map-keys": ["name"]}
        }})
    };
    let mut mutating = builtin(
        [
            "admissionregistration.k8s.io",
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        ],
        false,
        &[],
        webhooks(),
        json!({}),
    );
    mutating.categories = vec!["api-extensions".into()];
    let mut validating = builtin(
        [
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        ],
        false,
        &[],
        webhooks(),
        json!({}),
    );
    validating.categories = vec!["api-extensions".into()];
    vec![
        namespace,
        secret,
        configmap,
        serviceaccount,
        event,
        node,
        events_v1,
        lease,
        crd,
        mutating,
        validating,
    ]
}

/// Whether stored changes of `def` are converted into its listed versions (by the watch cache,
/// [`crate::cacher`]).
pub fn fills(def: &ResourceDef) -> bool {
    def.custom
        && matches!(def.conversion, Conversion::Webhook { .. })
        && def.listed_versions.len() > 1
}
