//! Field ownership (`metadata.managedFields`) for updates and server-side apply.

pub mod fieldset;
mod merge;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use fieldset::{FieldSet, Path, Pe, Schema, compare, covers, to_field_set};

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the fields were set through.
    pub api_version: String,
    /// When the entry last changed.
    pub time: Option<String>,
    /// `status` or empty.
    pub subresource: String,
    /// Owned fields.
    pub set: FieldSet,
}

impl Entry {
    fn same_owner(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
            if let Some(t) = &self.time {
                s.push_str(&format!(" at {t}"));
            }
        }
        s
    }
}

/// Reads the entries of an object's `metadata.managedFields`.
pub fn decode_entries(object: &Value) -> Vec<Entry> {
    let Some(list) = object["metadata"]["managedFields"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            Some(Entry {
                manager: e["manager"].as_str().unwrap_or_default().to_string(),
                operation: e["operation"].as_str()?.to_string(),
                api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: e["time"].as_str().map(String::from),
                subresource: e["subresource"].as_str().unwrap_or_default().to_string(),
                set: fieldset::decode(&e["fieldsV1"]),
            })
        })
        .collect()
}

/// Writes entries into `metadata.managedFields`, sorted like kube-apiserver sorts them.
pub fn encode_entries(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
            });
            if let Some(t) = &e.time {
                v["time"] = json!(t);
            }
            v["fieldsType"] = json!("FieldsV1");
            v["fieldsV1"] = fieldset::encode(&e.set);
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Fields the server ignores for ownership: reset by the endpoint's strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    /// Nothing is reset.
    Nothing,
    /// The main resource of a kind with a status subresource: `status` is reset.
    Status,
    /// The status subresource: everything but `status` and `metadata` is reset.
    AllButStatus,
}

/// What a write is tracked as.
#[derive(Debug, Clone)]
pub struct Tracking<'a> {
    /// The served version's schema.
    pub schema: Option<&'a Value>,
    /// Whether the kind is built in.
    pub builtin: bool,
    /// Manager name.
    pub manager: &'a str,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// `status` or empty.
    pub subresource: &'a str,
    /// Fields reset by the endpoint.
    pub reset: Reset,
    /// Time stamped on changed entries.
    pub now: &'a str,
}

impl Tracking<'_> {
    fn schema(&self) -> Schema<'_> {
        Schema::root(self.schema, self.builtin)
    }

    fn ignored(&self, path: &Path) -> bool {
        let top = match path.first() {
            Some(Pe::Field(f)) => f.as_str(),
            _ => return false,
        };
        match self.reset {
            Reset::Nothing => false,
            Reset::Status => top == "status",
            Reset::AllButStatus => top != "status" && top != "metadata",
        }
    }
}

const STRIPPED_META: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "generation",
    "managedFields",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Whether `path` is a metadata field tracking never records. kube's strip-meta manager drops
/// such paths from the acting manager's set after its operation, so one set by a client (the
/// seed entry `{"f:metadata":{"f:name":{}}}` Cluster API's CRD migrator writes) never makes an
/// apply remove the field.
fn is_stripped_meta(path: &Path) -> bool {
    matches!(path.as_slice(), [Pe::Field(m), Pe::Field(f)] if m == "metadata" && STRIPPED_META.contains(&f.as_str()))
}

/// The object without the fields field tracking never records.
fn stripped(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(map) = o.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in STRIPPED_META {
                meta.remove(*f);
            }
        }
    }
    o
}

fn without_meta_root(mut set: FieldSet) -> FieldSet {
    set.remove(&vec![Pe::Field("metadata".into())]);
    set
}

/// The entries to start from: those of the new object when the client changed them, else the live ones.
fn starting_entries(live: &Value, new: &Value) -> Vec<Entry> {
    match new["metadata"].get("managedFields") {
        Some(Value::Array(_))
            if new["metadata"]["managedFields"] != live["metadata"]["managedFields"] =>
        {
            decode_entries(new)
        }
        _ => decode_entries(live),
    }
}

/// Records an update (create, replace, non-apply patch) in the new object's managedFields.
pub fn track_update(t: &Tracking<'_>, live: &Value, new: &mut Value) {
    let mut entries = starting_entries(live, new);
    let c = compare(&stripped(live), &stripped(new), t.schema());
    let changed: FieldSet = without_meta_root(c.added.union(&c.modified).cloned().collect())
        .into_iter()
        .filter(|p| !t.ignored(p))
        .collect();
    let removed = without_meta_root(c.removed);
    for e in &mut entries {
        e.set = e.set.difference(&changed).cloned().collect();
        e.set = e.set.difference(&removed).cloned().collect();
    }
    if !changed.is_empty() {
        let me = Entry {
            manager: t.manager.to_string(),
            operation: "Update".into(),
            api_version: t.api_version.to_string(),
            time: Some(t.now.to_string()),
            subresource: t.subresource.to_string(),
            set: FieldSet::new(),
        };
        match entries.iter_mut().find(|e| e.same_owner(&me)) {
            Some(e) => {
                e.set.extend(changed);
                e.time = me.time;
            }
            None => entries.push(Entry { set: changed, ..me }),
        }
    }
    encode_entries(new, entries);
}

/// Merges an applied configuration into the live object, tracking ownership; conflicts fail unless forced.
pub fn track_apply(
    t: &Tracking<'_>,
    live: &Value,
    config: &Value,
    force: bool,
) -> ApiResult<Value> {
    let mut entries = decode_entries(live);
    let mut merged = merge::merge(Some(live), config, t.schema());
    let config_set: FieldSet = without_meta_root(to_field_set(&stripped(config), t.schema()))
        .into_iter()
        .filter(|p| !t.ignored(p))
        .collect();
    let me = Entry {
        manager: t.manager.to_string(),
        operation: "Apply".into(),
        api_version: t.api_version.to_string(),
        time: None,
        subresource: t.subresource.to_string(),
        set: config_set.clone(),
    };
    let position = entries.iter().position(|e| e.same_owner(&me));
    let last = position.map(|i| entries.remove(i)).map(|mut last| {
        last.set.retain(|p| !is_stripped_meta(p));
        last
    });
    if let Some(last) = &last {
        let others: FieldSet = entries.iter().flat_map(|e| e.set.iter().cloned()).collect();
        // structured-merge-diff's EnsureNamedFieldsAreMembers: a struct field below which the
        // manager set fields last time goes too once nothing below it is set any more.
        let last_set: FieldSet = last
            .set
            .iter()
            .flat_map(|p| {
                named_ancestors(t.schema(), p)
                    .into_iter()
                    .chain([p.clone()])
            })
            .collect();
        let mut gone: Vec<&Path> = last_set.difference(&config_set).collect();
        // Parents first: removing a list item by its key must happen before its key field goes.
        gone.sort_by_key(|p| p.len());
        let mut removed: Vec<&Path> = Vec::new();
        for path in gone {
            if removed.iter().any(|r| path.starts_with(r)) {
                continue;
            }
            if !covers(&others, path) && !covers(&config_set, path) {
                merge::remove_path(&mut merged, path);
                removed.push(path);
            }
        }
    }
    merge::tidy_metadata(&mut merged);
    let c = compare(&stripped(live), &stripped(&merged), t.schema());
    let changed: FieldSet = without_meta_root(c.added.union(&c.modified).cloned().collect())
        .into_iter()
        .filter(|p| !t.ignored(p))
        .collect();
    let removed = without_meta_root(c.removed);
    let mut conflicts: Vec<(String, String, Path)> = Vec::new();
    for e in &entries {
        for p in e.set.intersection(&changed) {
            conflicts.push((e.manager.clone(), e.describe(), p.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    for e in &mut entries {
        e.set = e.set.difference(&changed).cloned().collect();
        e.set = e.set.difference(&removed).cloned().collect();
    }
    let object_changed = stripped(live) != stripped(&merged);
    let time = if object_changed {
        Some(t.now.to_string())
    } else {
        last.as_ref()
            .and_then(|l| l.time.clone())
            .or(Some(t.now.to_string()))
    };
    entries.push(Entry { time, ..me });
    encode_entries(&mut merged, entries);
    Ok(merged)
}

/// The strict ancestors of `path` that are declared struct fields, below the top level and
/// outside `metadata` (those are never removed as a whole).
fn named_ancestors(schema: Schema<'_>, path: &Path) -> Vec<Path> {
    if path.first() == Some(&Pe::Field("metadata".into())) {
        return Vec::new();
    }
    let mut ancestors = Vec::new();
    let mut node = schema;
    for (depth, pe) in path.iter().enumerate().take(path.len().saturating_sub(1)) {
        let declared = match pe {
            Pe::Field(name) => {
                let (child, declared) = node.field(name);
                node = child;
                declared
            }
            Pe::Key(_) | Pe::Value(_) | Pe::Index(_) => {
                node = node.items();
                false
            }
        };
        if declared && depth >= 1 {
            ancestors.push(path[..=depth].to_vec());
        }
    }
    ancestors
}

fn conflict_error(conflicts: &[(String, String, Path)]) -> ApiError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(_, who, path)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {who}"),
            field: fieldset::display(path),
        })
        .collect();
    let message = if let [(_, who, path)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {who}: {}",
            fieldset::display(path)
        )
    } else {
        let mut by_manager: BTreeMap<&str, (&str, Vec<String>)> = BTreeMap::new();
        for (manager, who, path) in conflicts {
            by_manager
                .entry(manager)
                .or_insert((who, Vec::new()))
                .1
                .push(fieldset::display(path));
        }
        let mut lines = Vec::new();
        for (who, paths) in by_manager.values() {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = causes
        .iter()
        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
        .collect();
    ApiError {
        code: 409,
        reason: "Conflict".into(),
        message,
        details: Some(json!({"causes": causes})),
    }
}
pub use merge::tidy_metadata as tidy;
