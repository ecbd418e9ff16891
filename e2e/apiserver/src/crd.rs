//! CustomResourceDefinitions: validation, defaults, status, and the resources they serve.

use std::cmp::Ordering;
use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::error::{Cause, cause};
use crate::resources::{Conversion, Representation, ResKey, ResourceDef, VersionDef, builtins};
use crate::store::Store;

/// The finalizer that makes CRD deletion remove every custom resource first.
pub use crate::gc::CLEANUP_FINALIZER;

fn crd_key() -> ResKey {
    (
        "apiextensions.k8s.io".into(),
        "customresourcedefinitions".into(),
    )
}

/// Fills the defaults kube-apiserver gives a CRD.
pub fn defaults(crd: &mut Value) {
    let kind = crd["spec"]["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let names = &mut crd["spec"]["names"];
    if names.is_object() {
        if names["singular"].as_str().unwrap_or_default().is_empty() {
            names["singular"] = json!(kind.to_lowercase());
        }
        if names["listKind"].as_str().unwrap_or_default().is_empty() && !kind.is_empty() {
            names["listKind"] = json!(format!("{kind}List"));
        }
    }
    if crd["spec"]["conversion"]["strategy"].is_null() && crd["spec"].is_object() {
        crd["spec"]["conversion"] = json!({"strategy": "None"});
    }
}

/// Adds the cleanup finalizer and a new status to a new CRD: its storage version is its only
/// stored version (kube-apiserver's `PrepareForCreate`).
pub fn prepare_create(crd: &mut Value) {
    let mut finalizers: Vec<Value> = crd["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
        finalizers.push(json!(CLEANUP_FINALIZER));
    }
    crd["metadata"]["finalizers"] = json!(finalizers);
    let stored: Vec<String> = storage_version(crd).into_iter().collect();
    crd["status"] = json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored});
}

/// An update of a CRD (not of its status), whose status is the stored one: a storage version not
/// yet in `status.storedVersions` is added to it (kube-apiserver's `PrepareForUpdate`). A status
/// update leaves the list as the client wrote it.
pub fn prepare_update(crd: &mut Value) {
    let Some(storage) = storage_version(crd) else {
        return;
    };
    let mut stored = strings(&crd["status"]["storedVersions"]);
    if !stored.contains(&storage) {
        stored.push(storage);
        crd["status"]["storedVersions"] = json!(stored);
    }
}

/// The first version marked as the storage version.
fn storage_version(crd: &Value) -> Option<String> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"] == json!(true))
        .and_then(|v| v["name"].as_str())
        .map(String::from)
}

/// Validates a CRD's names, versions and their schemas (which must be structural, as
/// apiextensions.k8s.io/v1 demands).
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if group.is_empty() {
        causes.push(cause("FieldValueRequired", "spec.group", "Required value"));
    }
    if plural.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "spec.names.plural",
            "Required value",
        ));
    }
    if spec["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        causes.push(cause(
            "FieldValueRequired",
            "spec.names.kind",
            "Required value",
        ));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        other => causes.push(cause(
            "FieldValueNotSupported",
            "spec.scope",
            format!(
                "Unsupported value: {:?}: supported values: \"Cluster\", \"Namespaced\"",
                other.unwrap_or_default()
            ),
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: null: must have exactly one version marked as storage version",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v["storage"] == json!(true))
            .count();
        if storage != 1 {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.versions",
                format!("Invalid value: []apiextensions.CustomResourceDefinitionVersion{{...}}: must have exactly one version marked as storage version (found {storage})"),
            ));
        }
        if !versions.iter().any(|v| v["served"] == json!(true)) {
            causes.push(cause("FieldValueInvalid", "spec.versions", "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have at least one version marked as served"));
        }
    }
    causes.extend(validate_schemas(&versions));
    if spec["conversion"]["strategy"] == json!("Webhook")
        && spec["conversion"]["webhook"]["clientConfig"].is_null()
    {
        causes.push(cause(
            "FieldValueRequired",
            "spec.conversion.webhook.clientConfig",
            "Required value: required when strategy is set to Webhook",
        ));
    }
    causes
}

/// Every version needs a schema, and the schemas must be structural. When all versions have the
/// same schema kube-apiserver checks it once, at `spec.validation` (see [`crate::schema::hoisted`]).
fn validate_schemas(versions: &[Value]) -> Vec<Cause> {
    let required = |index: usize| {
        cause(
            "FieldValueRequired",
            format!("spec.versions[{index}].schema.openAPIV3Schema"),
            "Required value: schemas are required",
        )
    };
    if crate::schema::hoisted(versions) {
        return match &versions[0]["schema"]["openAPIV3Schema"] {
            schema @ Value::Object(_) => {
                crate::schema::validate_crd_schema(schema, "spec.validation.openAPIV3Schema")
            }
            _ => (0..versions.len()).map(required).collect(),
        };
    }
    let mut causes = Vec::new();
    for (index, version) in versions.iter().enumerate() {
        match &version["schema"]["openAPIV3Schema"] {
            schema @ Value::Object(_) => {
                let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
                causes.extend(crate::schema::validate_crd_schema(schema, &path));
            }
            _ => causes.push(required(index)),
        }
    }
    causes
}

/// kube-apiserver's `ValidateCustomResourceDefinitionStoredVersions`, run on the create and on
/// every update of a CRD but not on status updates: `status.storedVersions` is not empty, holds
/// the storage version, and every version in it stays in `spec.versions` (objects may still be
/// stored in it). Messages as kube-apiserver v1.33 and later word them (v1.28 said
/// `must appear in spec.versions`).
pub fn validate_stored_versions(crd: &Value) -> Vec<Cause> {
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let raw = &crd["status"]["storedVersions"];
    let stored = strings(raw);
    let path = "status.storedVersions";
    if stored.is_empty() {
        return vec![cause(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: {}: must have at least one stored version",
                go_strings(raw, &stored)
            ),
        )];
    }
    let mut causes: Vec<Cause> = versions
        .iter()
        .filter(|v| v["storage"] == json!(true))
        .filter_map(|v| v["name"].as_str())
        .filter(|name| !stored.iter().any(|s| s == name))
        .map(|name| {
            cause(
                "FieldValueInvalid",
                path,
                format!(
                    "Invalid value: {}: must have the storage version {name}",
                    go_strings(raw, &stored)
                ),
            )
        })
        .collect();
    // kube keeps the last index of a version listed twice.
    let mut missing: Vec<(usize, &String)> = stored
        .iter()
        .enumerate()
        .filter(|(index, v)| stored.iter().rposition(|s| s == *v) == Some(*index))
        .filter(|(_, v)| !versions.iter().any(|d| d["name"] == json!(v)))
        .collect();
    missing.sort();
    causes.extend(missing.into_iter().map(|(index, v)| {
        cause(
            "FieldValueInvalid",
            format!("{path}[{index}]"),
            format!(
                "Invalid value: {v:?}: missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"
            ),
        )
    }));
    causes
}

/// A string list as Go's `%#v` prints a `[]string`: `[]string{"v1", "v2"}`, `[]string(nil)` when
/// absent.
fn go_strings(raw: &Value, values: &[String]) -> String {
    if raw.is_null() {
        return "[]string(nil)".into();
    }
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn parse_kube_version(v: &str) -> Option<(u8, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major: u64 = digits.parse().ok()?;
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return Some((3, major, 0));
    }
    let (level, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (2, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (1, m)
    } else {
        return None;
    };
    Some((level, major, minor.parse().ok()?))
}

/// Orders versions as discovery does: GA, then beta, then alpha, newest first; others last by name.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_kube_version(a), parse_kube_version(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// kube-apiserver's default warning for a deprecated CRD version (`defaultDeprecationWarning`
/// in apiextensions-apiserver's `customresource_handler.go`): it names, as the replacement, the
/// served non-deprecated version of highest priority among those of higher priority than the
/// deprecated one; with none, the warning has no replacement.
fn deprecation_message(group: &str, version: &str, kind: &str, all: &[Value]) -> String {
    let mut candidates: Vec<&str> = all
        .iter()
        .filter(|v| v["served"] == json!(true) && v["deprecated"] != json!(true))
        .filter_map(|v| v["name"].as_str())
        .filter(|name| compare_versions(name, version) == Ordering::Less)
        .collect();
    candidates.sort_by(|a, b| compare_versions(a, b));
    match candidates.first() {
        Some(replacement) => {
            format!("{group}/{version} {kind} is deprecated; use {group}/{replacement} {kind}")
        }
        None => format!("{group}/{version} {kind} is deprecated"),
    }
}

/// The resource a CRD serves.
pub fn resource_def(crd: &Value) -> Option<ResourceDef> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str()?.to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str()?.to_string();
    let kind = names["kind"].as_str()?.to_string();
    let all_versions = spec["versions"].as_array()?;
    let storage_version = all_versions
        .iter()
        .find(|v| v["storage"] == json!(true))
        .and_then(|v| v["name"].as_str())?
        .to_string();
    let mut versions: Vec<VersionDef> = all_versions
        .iter()
        .filter(|v| v["served"] == json!(true))
        .filter_map(|v| {
            Some(VersionDef {
                name: v["name"].as_str()?.to_string(),
                schema: v["schema"]["openAPIV3Schema"]
                    .as_object()
                    .map(|_| v["schema"]["openAPIV3Schema"].clone()),
                deprecation_warning: (v["deprecated"] == json!(true)).then(|| {
                    v["deprecationWarning"]
                        .as_str()
                        .map(String::from)
                        .unwrap_or_else(|| {
                            deprecation_message(
                                &group,
                                v["name"].as_str().unwrap_or_default(),
                                &kind,
                                all_versions,
                            )
                        })
                }),
                printer_columns: v["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                selectable_fields: v["selectableFields"]
                    .as_array()
                    .map(|f| {
                        f.iter()
                            .filter_map(|s| s["jsonPath"].as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        })
        .collect();
    versions.sort_by(|a, b| compare_versions(&a.name, &b.name));
    let status_subresource = all_versions
        .iter()
        .any(|v| v["subresources"]["status"].is_object());
    let conversion = match spec["conversion"]["strategy"].as_str() {
        Some("Webhook") => {
            let cc = &spec["conversion"]["webhook"]["clientConfig"];
            Conversion::Webhook {
                url: cc["url"].as_str().map(String::from),
                ca_bundle: cc["caBundle"]
                    .as_str()
                    .and_then(|b| STANDARD.decode(b).ok()),
                service: cc["service"].is_object().then(|| {
                    format!(
                        "{}/{}",
                        cc["service"]["namespace"].as_str().unwrap_or_default(),
                        cc["service"]["name"].as_str().unwrap_or_default()
                    )
                }),
                service_path: cc["service"]["path"].as_str().unwrap_or("/").to_string(),
                server_name: None,
            }
        }
        _ => Conversion::None,
    };
    Some(ResourceDef {
        group: group.clone(),
        plural: plural.clone(),
        singular: names["singular"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        list_kind: names["listKind"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| format!("{kind}List")),
        kind,
        namespaced: spec["scope"] == json!("Namespaced"),
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        versions,
        listed_versions: all_versions
            .iter()
            .filter_map(|v| v["name"].as_str().map(String::from))
            .collect(),
        storage_version,
        status_subresource,
        has_generation: true,
        allow_create_on_update: false,
        custom: true,
        conversion,
        storage: (group, plural),
        representation: Representation::Native,
        zero: json!({}),
        field_selectors: vec![],
    })
}

fn condition(kind: &str, reason: &str, message: &str, now: &str, old: &Value) -> Value {
    let previous = old
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == json!(kind)));
    let time = match previous {
        Some(p) if p["status"] == json!("True") => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    json!({"type": kind, "status": "True", "lastTransitionTime": time, "reason": reason, "message": message})
}

/// Points a service-addressed conversion webhook at the endpoint configured for that service,
/// verifying the certificate for `<name>.<namespace>.svc` as kube-apiserver does.
fn resolve_service(def: &mut ResourceDef, endpoints: &std::collections::BTreeMap<String, String>) {
    if let Conversion::Webhook {
        url: url @ None,
        service: Some(service),
        service_path,
        server_name,
        ..
    } = &mut def.conversion
        && let Some(endpoint) = endpoints.get(service.as_str())
    {
        *url = Some(format!("https://{endpoint}{service_path}"));
        let (namespace, name) = service.split_once('/').unwrap_or(("", service.as_str()));
        *server_name = Some(format!("{name}.{namespace}.svc"));
    }
}

/// Rebuilds the served resources from the stored CRDs and brings CRD statuses up to date.
pub fn sync(store: &mut Store) {
    let crds = store.list(&crd_key(), None);
    let mut defs = builtins();
    let mut served_keys = HashSet::new();
    let now = crate::meta::now();
    for crd in &crds {
        let Some(mut def) = resource_def(crd) else {
            continue;
        };
        resolve_service(&mut def, &store.service_endpoints);
        if defs
            .iter()
            .any(|d| d.group == def.group && d.plural == def.plural)
        {
            continue;
        }
        served_keys.insert(def.key());
        let status = &crd["status"];
        // Kept as written: the create and updates of the CRD add the storage version
        // ([`prepare_create`], [`prepare_update`]), a status update may set any list.
        let stored_versions = strings(&status["storedVersions"]);
        let names = &crd["spec"]["names"];
        let mut accepted = json!({"plural": def.plural, "singular": def.singular, "kind": def.kind, "listKind": def.list_kind});
        if !names["shortNames"].is_null() {
            accepted["shortNames"] = names["shortNames"].clone();
        }
        if !names["categories"].is_null() {
            accepted["categories"] = names["categories"].clone();
        }
        let old = &status["conditions"];
        let mut conditions = vec![
            condition(
                "NamesAccepted",
                "NoConflicts",
                "no conflicts found",
                &now,
                old,
            ),
            condition(
                "Established",
                "InitialNamesAccepted",
                "the initial names have been accepted",
                &now,
                old,
            ),
        ];
        if !crd["metadata"]["deletionTimestamp"].is_null() {
            conditions.push(condition(
                "Terminating",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
                &now,
                old,
            ));
        }
        let new_status = json!({"conditions": conditions, "acceptedNames": accepted, "storedVersions": stored_versions});
        if *status != new_status {
            let mut updated = (**crd).clone();
            updated["status"] = new_status;
            store.put(&crd_key(), updated);
        }
        defs.push(def);
    }
    let old_custom: Vec<ResKey> = store
        .defs
        .iter()
        .filter(|d| d.custom)
        .map(ResourceDef::key)
        .collect();
    for key in old_custom {
        if !served_keys.contains(&key) {
            store.drop_resource(&key);
        }
    }
    // A new or changed CRD gets new watch caches, filled from every stored object.
    let refill: Vec<ResKey> = defs
        .iter()
        .filter(|def| crate::cacher::fills(def))
        .filter(|def| {
            !store.defs.iter().any(|old| {
                old.key() == def.key()
                    && old.conversion == def.conversion
                    && old.listed_versions == def.listed_versions
            })
        })
        .map(ResourceDef::key)
        .collect();
    store.defs = defs;
    for key in refill {
        store.queue_fill_all(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deprecation_warnings_name_only_a_newer_served_version() {
        let version = |name: &str, served: bool, deprecated: bool| json!({"name": name, "served": served, "deprecated": deprecated});
        let group = "infrastructure.cluster.x-k8s.io";
        // CAPD 1.14's Docker kinds: every served version deprecated.
        let docker = [
            version("v1beta1", true, true),
            version("v1beta2", true, true),
        ];
        assert_eq!(
            deprecation_message(group, "v1beta2", "DockerMachine", &docker),
            "infrastructure.cluster.x-k8s.io/v1beta2 DockerMachine is deprecated"
        );
        // The Dev kinds: v1beta1 deprecated, v1beta2 served.
        let dev = [
            version("v1beta1", true, true),
            version("v1beta2", true, false),
        ];
        assert_eq!(
            deprecation_message(group, "v1beta1", "DevMachine", &dev),
            "infrastructure.cluster.x-k8s.io/v1beta1 DevMachine is deprecated; \
             use infrastructure.cluster.x-k8s.io/v1beta2 DevMachine"
        );
        // An older served version is no replacement, nor is an unserved newer one.
        let older = [
            version("v1beta1", true, false),
            version("v1beta2", true, true),
            version("v1", false, false),
        ];
        assert_eq!(
            deprecation_message(group, "v1beta2", "Thing", &older),
            "infrastructure.cluster.x-k8s.io/v1beta2 Thing is deprecated"
        );
    }

    #[test]
    fn versions_sort_like_kube_discovery() {
        let mut v = vec!["v1alpha1", "v1beta1", "v1", "v2beta1", "v1beta2", "foo"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            vec!["v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }
}
