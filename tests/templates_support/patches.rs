//! What Cluster API's topology controller makes of a ClusterClass's inline patches for one Cluster:
//! variable values (defaulted from their schemas), `builtin` values, `enabledIf`, selectors, and
//! RFC 6902 `add`/`replace`/`remove` (by the `json-patch` crate) on each template the class
//! references.

use serde_json::{Map, Value, json};

use super::refs::{class_template_refs, worker_role};
use super::{gotemplate, str_at};

/// A class template after patching, with the role it plays (`controlPlane`,
/// `infrastructureCluster`, `md:<class>`, `mp:<class>`) and, for workers, the name of the topology
/// machine deployment or machine pool.
pub struct Patched {
    pub role: String,
    pub workers: Option<String>,
    pub object: Value,
}

/// Applies schema `default`s to absent object properties, recursively.
fn defaulted(value: &mut Value, schema: &Value) {
    if let (Value::Object(map), Some(props)) = (
        &mut *value,
        schema.get("properties").and_then(Value::as_object),
    ) {
        for (name, sub) in props {
            if !map.contains_key(name)
                && let Some(d) = sub.get("default")
            {
                map.insert(name.clone(), d.clone());
            }
            if let Some(child) = map.get_mut(name) {
                defaulted(child, sub);
            }
        }
    }
}

/// The variables a patch sees: the Cluster's values, else the schema default, defaulted inside.
fn variables(class: &Value, cluster: &Value) -> Map<String, Value> {
    let set = cluster
        .pointer("/spec/topology/variables")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Map::new();
    for def in class["spec"]["variables"].as_array().into_iter().flatten() {
        let name = str_at(def, "/name");
        let schema = &def["schema"]["openAPIV3Schema"];
        let value = set
            .iter()
            .find(|v| str_at(v, "/name") == name)
            .map(|v| v["value"].clone())
            .or_else(|| schema.get("default").cloned());
        if let Some(mut value) = value {
            defaulted(&mut value, schema);
            out.insert(name.to_string(), value);
        }
    }
    out
}

/// Every template of `class` patched for `cluster`; `objects` holds the templates.
pub fn apply(class: &Value, cluster: &Value, objects: &[Value]) -> Result<Vec<Patched>, String> {
    let topology = &cluster["spec"]["topology"];
    let version = str_at(topology, "/version");
    let vars = variables(class, cluster);
    let builtin_cluster = json!({
        "name": str_at(cluster, "/metadata/name"),
        "namespace": str_at(cluster, "/metadata/namespace"),
        "topology": {"version": version, "class": str_at(topology, "/classRef/name")},
    });
    let mut patched = Vec::new();
    for (pointer, role) in class_template_refs(class) {
        let r = class.pointer(&pointer).unwrap_or(&Value::Null);
        let template = objects
            .iter()
            .find(|o| {
                str_at(o, "/apiVersion") == str_at(r, "/apiVersion")
                    && str_at(o, "/kind") == str_at(r, "/kind")
                    && str_at(o, "/metadata/name") == str_at(r, "/name")
            })
            .ok_or_else(|| format!("{pointer}: template not found"))?;
        // One copy per topology machine deployment or machine pool of the class, one for the other
        // roles.
        let instances: Vec<(Option<String>, Value)> = match worker_role(&role) {
            Some((workers, class_name)) => topology
                .pointer(&format!("/workers/{}", workers.field))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|w| str_at(w, "/class") == class_name)
                .map(|w| {
                    let name = str_at(w, "/name").to_string();
                    let mut builtin = json!({"cluster": builtin_cluster});
                    builtin[workers.builtin] = json!({"version": version, "class": class_name,
                        "name": name, "topologyName": name, "replicas": w["replicas"]});
                    (Some(name), builtin)
                })
                .collect(),
            None => {
                let builtin = json!({"cluster": builtin_cluster, "controlPlane": {
                    "version": version, "replicas": topology["controlPlane"]["replicas"],
                    "name": format!("{}-control-plane", str_at(cluster, "/metadata/name"))}});
                vec![(None, builtin)]
            }
        };
        for (workers, builtin) in instances {
            let mut data = vars.clone();
            data.insert("builtin".into(), builtin);
            let data = Value::Object(data);
            let mut object = template.clone();
            for patch in class["spec"]["patches"].as_array().into_iter().flatten() {
                apply_patch(patch, &role, &data, &mut object)
                    .map_err(|e| format!("patch {:?} on {pointer}: {e}", str_at(patch, "/name")))?;
            }
            patched.push(Patched {
                role: role.clone(),
                workers,
                object,
            });
        }
    }
    Ok(patched)
}

fn apply_patch(patch: &Value, role: &str, data: &Value, object: &mut Value) -> Result<(), String> {
    if let Some(condition) = patch.get("enabledIf").and_then(Value::as_str) {
        match gotemplate::render(condition, data)?.trim() {
            "true" => {}
            "false" => return Ok(()),
            other => return Err(format!("enabledIf gave {other:?}, not true or false")),
        }
    }
    for def in patch["definitions"].as_array().into_iter().flatten() {
        let selector = &def["selector"];
        let matches_kind = str_at(selector, "/apiVersion") == str_at(object, "/apiVersion")
            && str_at(selector, "/kind") == str_at(object, "/kind");
        let resources = &selector["matchResources"];
        let matches_role = match worker_role(role) {
            Some((workers, class_name)) => resources
                .pointer(&format!("/{}/names", workers.selector))
                .and_then(Value::as_array)
                .is_some_and(|names| names.iter().any(|n| n == class_name)),
            None => resources[role] == Value::Bool(true),
        };
        if !(matches_kind && matches_role) {
            continue;
        }
        for json_patch in def["jsonPatches"].as_array().into_iter().flatten() {
            let value = patch_value(json_patch, data)?;
            json_patch_op(
                object,
                str_at(json_patch, "/op"),
                str_at(json_patch, "/path"),
                value,
            )?;
        }
    }
    Ok(())
}

fn patch_value(json_patch: &Value, data: &Value) -> Result<Option<Value>, String> {
    if let Some(value) = json_patch.get("value") {
        return Ok(Some(value.clone()));
    }
    let variable = str_at(json_patch, "/valueFrom/variable");
    if !variable.is_empty() {
        let pointer = format!("/{}", variable.replace('.', "/"));
        return data
            .pointer(&pointer)
            .cloned()
            .map(Some)
            .ok_or_else(|| format!("variable {variable:?} has no value"));
    }
    let template = str_at(json_patch, "/valueFrom/template");
    if !template.is_empty() {
        let text = gotemplate::render(template, data)?;
        let value: Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("template output is not YAML ({e}): {text}"))?;
        return Ok(Some(value));
    }
    Ok(None)
}

/// One RFC 6902 operation of a ClusterClass patch, applied by the `json-patch` crate; a
/// ClusterClass allows `add`, `replace` and `remove`.
fn json_patch_op(
    doc: &mut Value,
    op: &str,
    path: &str,
    value: Option<Value>,
) -> Result<(), String> {
    if !matches!(op, "add" | "replace" | "remove") {
        return Err(format!(
            "{op} {path}: a ClusterClass allows add, replace and remove"
        ));
    }
    let mut operation = json!({"op": op, "path": path});
    if let Some(value) = value {
        operation["value"] = value;
    }
    let operation: json_patch::PatchOperation =
        serde_json::from_value(operation).map_err(|e| format!("{op} {path}: {e}"))?;
    json_patch::patch(doc, &[operation]).map_err(|e| format!("{op} {path}: {e}"))
}
