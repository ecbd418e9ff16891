//! Object metadata: server-set fields, name generation and validation of names and labels.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::Regex;
use serde_json::Value;

use crate::error::{Cause, cause};

static COUNTER: AtomicU64 = AtomicU64::new(0);
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);

fn random_u64() -> u64 {
    let mut h = SEED.build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

/// A new random UUID (version 4 layout).
pub fn new_uid() -> String {
    let a = random_u64();
    let b = random_u64();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        ((b >> 48) & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// Five random characters as `generateName` appends (the alphabet of `utilrand.String`).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// The current time as Kubernetes serialises `metav1.Time` (RFC 3339, seconds).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A compiled constant pattern; `None` never happens for the valid patterns below, and then
/// every check reports a mismatch instead of panicking.
fn pattern(re: &str) -> Option<Regex> {
    Regex::new(re).ok()
}

fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

static DNS1123_SUBDOMAIN: LazyLock<Option<Regex>> =
    LazyLock::new(|| pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
static DNS1123_LABEL: LazyLock<Option<Regex>> =
    LazyLock::new(|| pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"));
static LABEL_VALUE: LazyLock<Option<Regex>> =
    LazyLock::new(|| pattern(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"));
static QUALIFIED_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| pattern(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"));

/// Messages of a DNS-1123 subdomain check, as `validation.IsDNS1123Subdomain` words them.
pub fn dns_subdomain_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !matches(&DNS1123_SUBDOMAIN, name) {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    errs
}

/// Messages of a DNS-1123 label check, as `validation.IsDNS1123Label` words them.
pub fn dns_label_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !matches(&DNS1123_LABEL, name) {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

fn qualified_name_errors(key: &str) -> Vec<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(
                dns_subdomain_errors(p)
                    .into_iter()
                    .map(|e| format!("prefix part {e}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".to_string());
        }
        if !matches(&QUALIFIED_NAME, name) {
            errs.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string());
        }
    }
    errs
}

/// Validates `metadata` of an object to be stored: name, labels and annotation keys.
pub fn validate_meta(object: &Value, namespaced: bool, dns_label_names: bool) -> Vec<Cause> {
    let meta = &object["metadata"];
    let mut causes = Vec::new();
    let name = meta["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    } else {
        let errs = if dns_label_names {
            dns_label_errors(name)
        } else {
            dns_subdomain_errors(name)
        };
        for e in errs {
            causes.push(cause(
                "FieldValueInvalid",
                "metadata.name",
                format!("Invalid value: {name:?}: {e}"),
            ));
        }
    }
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    if !namespaced && !namespace.is_empty() {
        causes.push(cause(
            "FieldValueForbidden",
            "metadata.namespace",
            "Forbidden: not allowed on this type",
        ));
    }
    labels_and_annotations(meta, "metadata", &mut causes);
    causes
}

/// Validates the `metadata` of an embedded resource (`x-kubernetes-embedded-resource`) at
/// `path`, as apiextensions-apiserver does: names are path segments and may be absent, a
/// namespace is a DNS label, labels, annotations and owner references as at the root.
pub fn validate_embedded_meta(meta: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(fields) = meta.as_object() else {
        causes.push(cause(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: {}: expected a map, got {}",
                crate::error::show_value(meta),
                meta
            ),
        ));
        return causes;
    };
    for (key, prefix) in [("name", false), ("generateName", true)] {
        let value = fields.get(key).and_then(Value::as_str).unwrap_or_default();
        for e in path_segment_errors(value, prefix) {
            causes.push(cause(
                "FieldValueInvalid",
                format!("{path}.{key}"),
                format!("Invalid value: {value:?}: {e}"),
            ));
        }
    }
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    if !namespace.is_empty() {
        for e in dns_label_errors(namespace) {
            causes.push(cause(
                "FieldValueInvalid",
                format!("{path}.namespace"),
                format!("Invalid value: {namespace:?}: {e}"),
            ));
        }
    }
    labels_and_annotations(meta, path, &mut causes);
    causes
}

/// `path.ValidatePathSegmentName`: what a name in a URL path may not be.
fn path_segment_errors(name: &str, prefix: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                errs.push(format!("may not be '{illegal}'"));
            }
        }
    }
    for illegal in ["/", "%"] {
        if name.contains(illegal) {
            errs.push(format!("may not contain '{illegal}'"));
        }
    }
    errs
}

/// Label keys and values, owner references and annotation keys and size of `meta` at `path`.
fn labels_and_annotations(meta: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            for e in qualified_name_errors(k) {
                causes.push(cause(
                    "FieldValueInvalid",
                    format!("{path}.labels"),
                    format!("Invalid value: {k:?}: {e}"),
                ));
            }
            let v = v.as_str().unwrap_or_default();
            let mut errs = Vec::new();
            if v.len() > 63 {
                errs.push("must be no more than 63 characters".to_string());
            }
            if !matches(&LABEL_VALUE, v) {
                errs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string());
            }
            for e in errs {
                causes.push(cause(
                    "FieldValueInvalid",
                    format!("{path}.labels"),
                    format!("Invalid value: {v:?}: {e}"),
                ));
            }
        }
    }
    validate_owner_references(
        &meta["ownerReferences"],
        &format!("{path}.ownerReferences"),
        causes,
    );
    if let Some(annotations) = meta["annotations"].as_object() {
        let total: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map(str::len).unwrap_or_default())
            .sum();
        for k in annotations.keys() {
            for e in qualified_name_errors(&k.to_lowercase()) {
                causes.push(cause(
                    "FieldValueInvalid",
                    format!("{path}.annotations"),
                    format!("Invalid value: {k:?}: {e}"),
                ));
            }
        }
        if total > 256 * 1024 {
            causes.push(cause(
                "FieldValueTooLong",
                format!("{path}.annotations"),
                "Too long: may not be more than 262144 bytes",
            ));
        }
    }
}

/// `ValidateOwnerReferences`: required fields and at most one controller.
fn validate_owner_references(refs: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(refs) = refs.as_array() else { return };
    let mut controllers = Vec::new();
    for r in refs {
        let api_version = r["apiVersion"].as_str().unwrap_or_default();
        let version = api_version.rsplit('/').next().unwrap_or_default();
        for (field, value, empty) in [
            ("apiVersion", version, "version must not be empty"),
            (
                "kind",
                r["kind"].as_str().unwrap_or_default(),
                "kind must not be empty",
            ),
            (
                "name",
                r["name"].as_str().unwrap_or_default(),
                "name must not be empty",
            ),
            (
                "uid",
                r["uid"].as_str().unwrap_or_default(),
                "uid must not be empty",
            ),
        ] {
            if value.is_empty() {
                let shown = if field == "apiVersion" {
                    api_version
                } else {
                    value
                };
                causes.push(cause(
                    "FieldValueInvalid",
                    format!("{path}.{field}"),
                    format!("Invalid value: {shown:?}: {empty}"),
                ));
            }
        }
        if r["controller"] == Value::Bool(true) {
            controllers.push(format!(
                "{}/{}",
                r["kind"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default()
            ));
        }
    }
    if controllers.len() > 1 {
        let shown: Vec<String> = controllers.iter().map(|c| format!("{c:?}")).collect();
        causes.push(cause(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: []v1.OwnerReference{{...}}: Only one reference can have Controller set to true. Found \"true\" in references for {}",
                shown.join(" and ")
            ),
        ));
    }
}

/// Validates metadata changes of an update: immutable fields and finalizers of deleted objects.
pub fn validate_meta_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let (om, nm) = (&old["metadata"], &new["metadata"]);
    for f in ["name", "namespace"] {
        if nm[f] != om[f] && !nm[f].is_null() {
            causes.push(cause(
                "FieldValueInvalid",
                format!("metadata.{f}"),
                format!(
                    "Invalid value: {}: field is immutable",
                    crate::error::show_value(&nm[f])
                ),
            ));
        }
    }
    if !om["deletionTimestamp"].is_null() {
        let old_f: Vec<&Value> = om["finalizers"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let added: Vec<String> = nm["finalizers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|f| !old_f.contains(f))
                    .map(|f| crate::error::show_value(f).to_string())
                    .collect()
            })
            .unwrap_or_default();
        if !added.is_empty() {
            causes.push(cause(
                "FieldValueForbidden",
                "metadata.finalizers",
                format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added.join(", ")
                ),
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_must_be_dns_subdomains() {
        let bad = json!({"metadata": {"name": "Bad_Name"}});
        let causes = validate_meta(&bad, true, false);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "metadata.name");
        assert!(
            causes[0]
                .message
                .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn uids_look_like_uuids_and_differ() {
        let a = new_uid();
        assert_eq!(a.len(), 36);
        assert_ne!(a, new_uid());
        assert_eq!(name_suffix().len(), 5);
    }
}

#[cfg(test)]
mod owner_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owner_references_need_uid_and_one_controller() {
        let o = json!({"metadata": {"name": "a", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "y", "uid": "2", "controller": true}
        ]}});
        let causes = validate_meta(&o, true, false);
        assert!(
            causes
                .iter()
                .any(|c| c.field == "metadata.ownerReferences.uid"
                    && c.message == "Invalid value: \"\": uid must not be empty")
        );
        assert!(causes.iter().any(|c| {
            c.field == "metadata.ownerReferences"
                && c.message
                    .contains("Only one reference can have Controller set to true")
        }));
    }
}
