//! Decoding of built-in kinds through their typed (k8s-openapi) structs, as kube-apiserver
//! decodes requests into Go structs: unknown fields disappear (and are reported for
//! `fieldValidation`), values of the wrong type are refused, timestamps are normalised.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceDef;

fn round_trip<T: DeserializeOwned + Serialize>(object: &Value) -> Result<Value, serde_json::Error> {
    let typed: T = serde_json::from_value(object.clone())?;
    serde_json::to_value(typed)
}

/// Decodes a built-in object through its typed struct; returns it with the paths of the fields
/// the struct does not know. Custom resources and unknown kinds pass through unchanged.
pub fn decode(def: &ResourceDef, object: &Value) -> ApiResult<(Value, Vec<String>)> {
    if def.custom {
        return Ok((object.clone(), Vec::new()));
    }
    let decoded = match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => round_trip::<Namespace>(object),
        ("", "secrets") => round_trip::<Secret>(object),
        ("", "configmaps") => round_trip::<ConfigMap>(object),
        ("", "serviceaccounts") => round_trip::<ServiceAccount>(object),
        ("", "events") => round_trip::<Event>(object),
        ("", "nodes") => round_trip::<Node>(object),
        ("events.k8s.io", "events") => round_trip::<EventV1>(object),
        ("coordination.k8s.io", "leases") => round_trip::<Lease>(object),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            round_trip::<MutatingWebhookConfiguration>(object)
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            round_trip::<ValidatingWebhookConfiguration>(object)
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            round_trip::<CustomResourceDefinition>(object)
        }
        _ => return Ok((object.clone(), Vec::new())),
    };
    let decoded = decoded.map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {e}",
            kind = def.kind,
            version = def.storage_version,
        ))
    })?;
    let mut unknown = Vec::new();
    dropped(object, &decoded, "", &mut unknown);
    Ok((decoded, unknown))
}

/// Removes the value at a path as `decode` reports them (`spec.items[0].x`).
pub fn remove_dotted(object: &mut Value, path: &str) {
    let mut steps: Vec<String> = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        while let Some(open) = rest.find('[') {
            if open > 0 {
                steps.push(rest[..open].to_string());
            }
            let close = rest[open..]
                .find(']')
                .map(|c| c + open)
                .unwrap_or(rest.len());
            steps.push(rest[open..close.min(rest.len())].to_string() + "]");
            rest = rest.get(close + 1..).unwrap_or_default();
        }
        if !rest.is_empty() {
            steps.push(rest.to_string());
        }
    }
    let Some((last, parents)) = steps.split_last() else {
        return;
    };
    let mut current = object;
    for step in parents {
        let next = match step.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(i) => i.parse::<usize>().ok().and_then(|i| current.get_mut(i)),
            None => current.get_mut(step.as_str()),
        };
        match next {
            Some(n) => current = n,
            None => return,
        }
    }
    if let Some(map) = current.as_object_mut() {
        map.remove(last.as_str());
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Paths present (and not null) in `before` but gone from `after`.
fn dropped(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in b {
                match a.get(k) {
                    None if !v.is_null() => out.push(join(path, k)),
                    Some(av) => dropped(v, av, &join(path, k), out),
                    None => {}
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if a.len() == b.len() => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                dropped(bv, av, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;
    use serde_json::json;

    #[test]
    fn unknown_fields_of_built_ins_are_dropped_and_reported() {
        let defs = builtins();
        let cm = defs.iter().find(|d| d.plural == "configmaps").unwrap();
        let (decoded, unknown) = decode(
            cm,
            &json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "bogus": 1}, "data": {"k": "v"}, "typo": true
            }),
        )
        .unwrap();
        assert_eq!(
            unknown,
            vec!["metadata.bogus".to_string(), "typo".to_string()]
        );
        assert!(decoded.get("typo").is_none());
        let err = decode(cm, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 1}})).unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn dotted_paths_with_indices_are_removed() {
        let mut v = json!({"spec": {"items": [{"x": 1, "keep": 2}]}});
        remove_dotted(&mut v, "spec.items[0].x");
        assert_eq!(v, json!({"spec": {"items": [{"keep": 2}]}}));
    }
}
