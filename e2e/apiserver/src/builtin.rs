//! Rules of specific built-in kinds: Secret `stringData` and `type`, immutable ConfigMaps and
//! Secrets, a Node's `spec.providerID` set once, undeletable system namespaces.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::error::{ApiError, Cause, cause};
use crate::resources::ResourceDef;

fn is(def: &ResourceDef, plural: &str) -> bool {
    def.group.is_empty() && def.plural == plural && !def.custom
}

/// Normalises a built-in object before it is stored: Secret `stringData` is merged into `data`
/// (base64) and dropped, and an empty Secret `type` becomes `Opaque`, as kube-apiserver does.
pub fn normalise(def: &ResourceDef, object: &mut Value) {
    if !is(def, "secrets") {
        return;
    }
    if let Some(Value::Object(string_data)) =
        object.as_object_mut().and_then(|o| o.remove("stringData"))
    {
        for (k, v) in string_data {
            let text = v.as_str().unwrap_or_default();
            object["data"][k] = json!(STANDARD.encode(text));
        }
    }
    if object["type"].as_str().unwrap_or_default().is_empty() {
        object["type"] = json!("Opaque");
    }
}

/// Update rules of built-in kinds: a Node's `spec.providerID` is set once; immutable ConfigMaps
/// and Secrets keep their data.
pub fn validate_update(def: &ResourceDef, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if is(def, "nodes") {
        let before = old["spec"]["providerID"].as_str().unwrap_or_default();
        if !before.is_empty() && new["spec"]["providerID"].as_str().unwrap_or_default() != before {
            causes.push(cause(
                "FieldValueForbidden",
                "spec.providerID",
                "Forbidden: node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
    if !(is(def, "secrets") || is(def, "configmaps")) || old["immutable"] != json!(true) {
        return causes;
    }
    for field in ["data", "binaryData"] {
        if old[field] != new[field] {
            causes.push(cause(
                "FieldValueForbidden",
                field,
                "Forbidden: field is immutable when `immutable` is set",
            ));
        }
    }
    if new["immutable"] != json!(true) {
        causes.push(cause(
            "FieldValueForbidden",
            "immutable",
            "Forbidden: field is immutable when `immutable` is set",
        ));
    }
    if is(def, "secrets") && old["type"] != new["type"] {
        causes.push(cause(
            "FieldValueInvalid",
            "type",
            format!(
                "Invalid value: {}: field is immutable",
                crate::error::show_value(&new["type"])
            ),
        ));
    }
    causes
}

/// Refuses deleting the namespaces kube-apiserver protects.
pub fn check_delete(def: &ResourceDef, name: &str) -> Result<(), ApiError> {
    if is(def, "namespaces") && matches!(name, "default" | "kube-system" | "kube-public") {
        let mut err = ApiError::new(
            403,
            "Forbidden",
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        );
        err.details = Some(json!({"name": name, "kind": "namespaces"}));
        return Err(err);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    #[test]
    fn secret_string_data_becomes_data() {
        let defs = builtins();
        let secrets = defs.iter().find(|d| d.plural == "secrets").unwrap();
        let mut s = json!({"metadata": {"name": "s"}, "stringData": {"k": "value"}});
        normalise(secrets, &mut s);
        assert_eq!(s["data"]["k"], "dmFsdWU=");
        assert!(s.get("stringData").is_none());
        assert_eq!(s["type"], "Opaque");
    }
}
