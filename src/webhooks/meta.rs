//! Label and annotation checks for the `spec.template.metadata` of templates, with the rules and
//! messages of Kubernetes' own object metadata validation (what CAPI's `ObjectMeta.Validate`
//! runs), so a template cannot stamp labels onto objects that the API server would then refuse.

use std::collections::BTreeMap;

use super::field::{self, FieldError};
use crate::api::v1beta2::TemplateObjectMeta;

/// Longest name part of a qualified name (`prefix/name`).
const QUALIFIED_NAME_MAX: usize = 63;
/// Longest label value.
const LABEL_VALUE_MAX: usize = 63;
/// Longest DNS subdomain (the prefix of a qualified name).
const DNS_SUBDOMAIN_MAX: usize = 253;
/// Largest total size of all annotations of an object, keys and values together.
pub const ANNOTATIONS_SIZE_MAX: usize = 256 * 1024;

const QUALIFIED_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
     must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', \
     regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric \
     characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
     'MyValue', or 'my_value', or '12345', regex used for validation is \
     '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const DNS_SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
     (e.g. 'example.com', regex used for validation is \
     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Checks the labels and annotations of a template's `metadata` at `path`.
pub fn validate_template_metadata(meta: &TemplateObjectMeta, path: &str) -> Vec<FieldError> {
    let mut errors = validate_labels(&meta.labels, &format!("{path}.labels"));
    errors.extend(validate_annotations(
        &meta.annotations,
        &format!("{path}.annotations"),
    ));
    errors
}

/// Label keys must be qualified names, values short label values.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (key, value) in labels {
        for problem in qualified_name_problems(key) {
            errors.push(FieldError::invalid(path, key.as_str(), problem));
        }
        for problem in label_value_problems(value) {
            errors.push(FieldError::invalid(
                field::key(path, key),
                value.as_str(),
                problem,
            ));
        }
    }
    errors
}

/// Annotation keys must be qualified names (case-insensitive); all of them together may not
/// exceed [`ANNOTATIONS_SIZE_MAX`].
pub fn validate_annotations(annotations: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut total = 0;
    for (key, value) in annotations {
        for problem in qualified_name_problems(&key.to_lowercase()) {
            errors.push(FieldError::invalid(path, key.as_str(), problem));
        }
        total += key.len() + value.len();
    }
    if total > ANNOTATIONS_SIZE_MAX {
        errors.push(FieldError::too_long(path, ANNOTATIONS_SIZE_MAX));
    }
    errors
}

/// Why `value` is not a qualified name (`[dns-subdomain/]name`); empty when it is one.
pub fn qualified_name_problems(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut problems = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_string());
            } else {
                problems.extend(
                    dns_subdomain_problems(prefix)
                        .into_iter()
                        .map(|p| format!("prefix part {p}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_RULE} with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_string());
    } else {
        if name.len() > QUALIFIED_NAME_MAX {
            problems.push(format!(
                "name part must be no more than {QUALIFIED_NAME_MAX} characters"
            ));
        }
        if !is_qualified_name_part(name) {
            problems.push(format!("name part {QUALIFIED_NAME_RULE}"));
        }
    }
    problems
}

/// Why `value` is not a label value; empty when it is one (the empty string is).
pub fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        problems.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        problems.push(LABEL_VALUE_RULE.to_string());
    }
    problems
}

/// Why `value` is not a lowercase RFC 1123 subdomain; empty when it is one.
pub fn dns_subdomain_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > DNS_SUBDOMAIN_MAX {
        problems.push(format!(
            "must be no more than {DNS_SUBDOMAIN_MAX} characters"
        ));
    }
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                edge(first) && edge(last) && bytes.iter().all(|b| edge(b) || *b == b'-')
            }
            _ => false,
        }
    };
    if !value.split('.').all(label_ok) {
        problems.push(DNS_SUBDOMAIN_RULE.to_string());
    }
    problems
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(value: &str) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}
