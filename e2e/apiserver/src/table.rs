//! `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` answers, as kubectl asks for them:
//! kube's printers for the built-in kinds, `additionalPrinterColumns` for custom resources.

use serde_json::{Value, json};

use crate::resources::{Representation, ResourceDef};

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// What rows carry besides cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// Parses `includeObject`.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|part| part.contains("as=Table"))
}

struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
    path: Option<String>,
}

fn col(name: &str, kind: &str, description: &str) -> Column {
    Column {
        name: name.into(),
        kind: kind.into(),
        format: if name == "Name" {
            "name".into()
        } else {
            String::new()
        },
        description: description.into(),
        priority: 0,
        path: None,
    }
}

fn wide(mut c: Column) -> Column {
    c.priority = 1;
    c
}

fn columns(def: &ResourceDef, version: &str) -> Vec<Column> {
    let name = col("Name", "string", NAME_DESCRIPTION);
    let age = col("Age", "string", AGE_DESCRIPTION);
    if def.custom {
        let mut cols = vec![name];
        let printer = def
            .version(version)
            .map(|v| v.printer_columns.clone())
            .unwrap_or_default();
        if printer.is_empty() {
            cols.push(Column {
                path: Some(".metadata.creationTimestamp".into()),
                kind: "date".into(),
                ..col("Age", "date", AGE_DESCRIPTION)
            });
        }
        for p in printer {
            cols.push(Column {
                name: p["name"].as_str().unwrap_or_default().into(),
                kind: p["type"].as_str().unwrap_or("string").into(),
                format: p["format"].as_str().unwrap_or_default().into(),
                description: p["description"].as_str().unwrap_or_default().into(),
                priority: p["priority"].as_i64().unwrap_or(0),
                path: p["jsonPath"].as_str().map(String::from),
            });
        }
        return cols;
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => vec![
            name,
            col("Data", "string", "Data contains the configuration data."),
            age,
        ],
        ("", "secrets") => vec![
            name,
            col(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data.",
            ),
            col("Data", "string", "Data contains the secret data."),
            age,
        ],
        ("", "namespaces") => vec![
            name,
            col("Status", "string", "The status of the namespace"),
            age,
        ],
        ("", "nodes") => vec![
            name,
            col("Status", "string", "The status of the node"),
            col("Roles", "string", "The roles of the node"),
            age,
            col("Version", "string", "Kubelet Version reported by the node."),
            wide(col(
                "Internal-IP",
                "string",
                "List of internal IPs for the node.",
            )),
            wide(col(
                "External-IP",
                "string",
                "List of external IPs for the node.",
            )),
            wide(col(
                "OS-Image",
                "string",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            )),
            wide(col(
                "Kernel-Version",
                "string",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            )),
            wide(col(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            )),
        ],
        ("coordination.k8s.io", "leases") => vec![
            name,
            col(
                "Holder",
                "string",
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            age,
        ],
        (_, "events") => vec![
            col("Last Seen", "string", "The last time this event was seen"),
            col(
                "Type",
                "string",
                "Type of this event (Normal, Warning), new types could be added in the future.",
            ),
            col(
                "Reason",
                "string",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col("Object", "string", "The object that this event is about."),
            col(
                "Message",
                "string",
                "A human-readable description of the status of this operation.",
            ),
        ],
        ("apiextensions.k8s.io", _) => vec![name, col("Created At", "date", AGE_DESCRIPTION)],
        _ => vec![name, col("Created At", "date", AGE_DESCRIPTION)],
    }
}

/// kube's `duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn since(ts: &Value) -> Value {
    let Some(parsed) = ts.as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return json!("<unknown>");
    };
    let seconds = jiff::Timestamp::now().as_second() - parsed.as_second();
    json!(human_duration(seconds))
}

fn count(v: &Value) -> usize {
    v.as_object().map(|m| m.len()).unwrap_or(0)
}

fn node_status(node: &Value) -> String {
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| match c["status"].as_str() {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    if node["spec"]["unschedulable"] == json!(true) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    }
}

fn addresses(node: &Value, kind: &str) -> String {
    let found: Vec<&str> = node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == kind)
        .filter_map(|a| a["address"].as_str())
        .collect();
    if found.is_empty() {
        "<none>".into()
    } else {
        found.join(",")
    }
}

fn cells(def: &ResourceDef, cols: &[Column], o: &Value) -> Vec<Value> {
    let name = o["metadata"]["name"].clone();
    let age = since(&o["metadata"]["creationTimestamp"]);
    if def.custom {
        return cols
            .iter()
            .map(|c| match &c.path {
                None => name.clone(),
                Some(p) => {
                    let found = crate::jsonpath::find(o, p);
                    match (found.first(), c.kind.as_str()) {
                        (None, _) => Value::Null,
                        (Some(v), "date") => since(v),
                        (Some(Value::String(s)), "string") => json!(s),
                        (Some(v), "string") => json!(v.to_string()),
                        (Some(v), "integer") => v.as_i64().map(|n| json!(n)).unwrap_or(Value::Null),
                        (Some(v), "number") => v.as_f64().map(|n| json!(n)).unwrap_or(Value::Null),
                        (Some(v), "boolean") => {
                            v.as_bool().map(|b| json!(b)).unwrap_or(Value::Null)
                        }
                        (Some(_), _) => Value::Null,
                    }
                }
            })
            .collect();
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => vec![
            name,
            json!(count(&o["data"]) + count(&o["binaryData"])),
            age,
        ],
        ("", "secrets") => vec![name, o["type"].clone(), json!(count(&o["data"])), age],
        ("", "namespaces") => vec![name, o["status"]["phase"].clone(), age],
        ("", "nodes") => {
            let mut roles: Vec<String> = o["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/").map(String::from))
                .filter(|r| !r.is_empty())
                .collect();
            roles.sort();
            let info = &o["status"]["nodeInfo"];
            vec![
                name,
                json!(node_status(o)),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                age,
                info["kubeletVersion"].clone(),
                json!(addresses(o, "InternalIP")),
                json!(addresses(o, "ExternalIP")),
                info["osImage"].clone(),
                info["kernelVersion"].clone(),
                info["containerRuntimeVersion"].clone(),
            ]
        }
        ("coordination.k8s.io", "leases") => vec![name, o["spec"]["holderIdentity"].clone(), age],
        (_, "events") => {
            let core = if def.representation == Representation::EventsV1 {
                crate::convert::events_v1_to_core(o)
            } else {
                o.clone()
            };
            let last = [
                &core["series"]["lastObservedTime"],
                &core["lastTimestamp"],
                &core["eventTime"],
                &core["metadata"]["creationTimestamp"],
            ]
            .into_iter()
            .find(|t| !t.is_null())
            .cloned()
            .unwrap_or(Value::Null);
            let object = format!(
                "{}/{}",
                core["involvedObject"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_lowercase(),
                core["involvedObject"]["name"].as_str().unwrap_or_default()
            );
            vec![
                since(&last),
                core["type"].clone(),
                core["reason"].clone(),
                json!(object),
                core["message"].clone(),
            ]
        }
        _ => vec![name, o["metadata"]["creationTimestamp"].clone()],
    }
}

fn row_object(o: &Value, include: Include) -> Option<Value> {
    match include {
        Include::None => None,
        Include::Object => Some(o.clone()),
        Include::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o["metadata"],
        })),
    }
}

/// A Table of objects; `headers` false leaves out the column definitions (later watch events).
pub fn table(
    def: &ResourceDef,
    version: &str,
    objects: &[Value],
    metadata: Value,
    include: Include,
    headers: bool,
) -> Value {
    let cols = columns(def, version);
    let definitions: Vec<Value> = if headers {
        cols.iter()
            .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(def, &cols, o)});
            if let Some(obj) = row_object(o, include) {
                row["object"] = obj;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(3600 * 5 + 60 * 7), "5h7m");
        assert_eq!(human_duration(3600 * 24 * 3), "3d");
    }
}
