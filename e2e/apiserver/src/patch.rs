//! Non-apply patches: JSON merge patch, JSON patch and strategic merge patch.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::ssa::fieldset::{ListKind, Schema, item_pe};

/// Patch content types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type of a Content-Type header, if supported.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Applies a JSON patch or a merge patch (strategic or not) to an object.
pub fn apply_patch(
    current: &Value,
    body: &[u8],
    kind: PatchType,
    schema: Schema<'_>,
) -> ApiResult<Value> {
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut doc = current.clone();
            for op in &ops.0 {
                if missing_null_test(&doc, op) {
                    continue;
                }
                json_patch::patch(&mut doc, std::slice::from_ref(op))
                    .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
            }
            Ok(doc)
        }
        PatchType::Merge => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "json: cannot unmarshal non-object into Go value of type map[string]interface {}",
                ));
            }
            let mut doc = current.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        PatchType::Strategic => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "json: cannot unmarshal non-object into Go value of type map[string]interface {}",
                ));
            }
            Ok(strategic(Some(current), &patch, schema))
        }
        PatchType::Apply => Err(ApiError::internal("apply patches are not merge patches")),
    }
}

/// Whether an op tests that a missing member is null, which kube-apiserver's JSON patch library
/// (evanphx/json-patch) accepts while RFC 6902 implementations reject it. kube-runtime's finalizer
/// helper relies on it when adding the first finalizer.
fn missing_null_test(doc: &Value, op: &json_patch::PatchOperation) -> bool {
    let json_patch::PatchOperation::Test(t) = op else {
        return false;
    };
    if !t.value.is_null() {
        return false;
    }
    let path = t.path.as_str();
    let parent = path.rsplit_once('/').map(|(p, _)| p).unwrap_or_default();
    doc.pointer(path).is_none() && doc.pointer(parent).is_some()
}

/// Strategic merge: a merge patch whose lists with merge keys (list-type map/set) merge by key,
/// honouring `$patch: delete|replace` and ignoring the other directives.
fn strategic(current: Option<&Value>, patch: &Value, schema: Schema<'_>) -> Value {
    match patch {
        Value::Object(p) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut out = p.clone();
                out.remove("$patch");
                return Value::Object(out);
            }
            let mut out = match current {
                Some(Value::Object(c)) => c.clone(),
                _ => Map::new(),
            };
            for (k, v) in p {
                if k.starts_with('$') {
                    continue;
                }
                if v.is_null() {
                    out.remove(k);
                    continue;
                }
                let (cs, _) = schema.field(k);
                let merged = strategic(out.get(k), v, cs);
                out.insert(k.clone(), merged);
            }
            for (k, v) in p {
                if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/")
                    && let (Some(Value::Array(list)), Some(remove)) =
                        (out.get_mut(field), v.as_array())
                {
                    list.retain(|item| !remove.contains(item));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let kind = schema.list_kind();
            let Some(Value::Array(existing)) = current else {
                return Value::Array(
                    items
                        .iter()
                        .filter(|i| i.get("$patch").is_none())
                        .cloned()
                        .collect(),
                );
            };
            match kind {
                ListKind::Atomic => Value::Array(items.clone()),
                ListKind::Set => {
                    let mut out = existing.clone();
                    for i in items {
                        if !out.contains(i) {
                            out.push(i.clone());
                        }
                    }
                    Value::Array(out)
                }
                ListKind::Map(_) => {
                    let mut out = existing.clone();
                    for item in items {
                        let pe = item_pe(&kind, item, 0);
                        let pos = out.iter().position(|e| item_pe(&kind, e, 0) == pe);
                        let directive = item.get("$patch").and_then(Value::as_str);
                        match (pos, directive) {
                            (Some(i), Some("delete")) => {
                                out.remove(i);
                            }
                            (_, Some("delete")) => {}
                            (Some(i), _) => out[i] = strategic(Some(&out[i]), item, schema.items()),
                            (None, _) => out.push(strategic(None, item, schema.items())),
                        }
                    }
                    Value::Array(out)
                }
            }
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_conditions_by_type() {
        let schema = json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}}}}});
        let current = json!({"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}});
        let patch = json!({"status": {"conditions": [{"type": "B", "status": "True"}]}});
        let out = apply_patch(
            &current,
            patch.to_string().as_bytes(),
            PatchType::Strategic,
            Schema::root(Some(&schema), true),
        )
        .unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "A", "status": "True"}, {"type": "B", "status": "True"}])
        );
    }

    #[test]
    fn testing_a_missing_member_against_null_passes() {
        let current = json!({"metadata": {"name": "a"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}
        ]);
        let out = apply_patch(
            &current,
            patch.to_string().as_bytes(),
            PatchType::Json,
            Schema::root(None, true),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
    }

    #[test]
    fn failed_json_patch_test_is_invalid() {
        let current = json!({"metadata": {"finalizers": ["a"]}});
        let patch = json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "b"}]);
        let err = apply_patch(
            &current,
            patch.to_string().as_bytes(),
            PatchType::Json,
            Schema::root(None, true),
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
    }
}
