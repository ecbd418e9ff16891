//! Field paths and sets as structured-merge-diff tracks them, with the FieldsV1 encoding.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::resources::metadata_schema;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    /// A named field (`f:name`).
    Field(String),
    /// An associative-list item by its keys, canonical JSON object (`k:{"type":"Ready"}`).
    Key(String),
    /// A set item by value, JSON (`v:"a"`).
    Value(String),
    /// A list item by index (`i:0`).
    Index(usize),
}

/// A field path.
pub type Path = Vec<Pe>;

/// A set of field paths.
pub type FieldSet = BTreeSet<Path>;

static META: LazyLock<Value> = LazyLock::new(metadata_schema);

/// How a list merges.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// Items are unique scalars.
    Set,
    /// Items are objects identified by these keys.
    Map(Vec<String>),
}

/// Schema lookups shared by field tracking, merging and pruning.
#[derive(Debug, Clone, Copy)]
pub struct Schema<'a> {
    /// The node's schema, if known.
    pub node: Option<&'a Value>,
    /// Whether unknown fields are struct fields (built-in kinds) rather than free-form keys.
    pub builtin: bool,
    /// Whether this node is the object root (its `metadata` gets the ObjectMeta schema).
    pub root: bool,
}

impl<'a> Schema<'a> {
    /// Schema of an object root.
    pub fn root(node: Option<&'a Value>, builtin: bool) -> Self {
        Schema {
            node,
            builtin,
            root: true,
        }
    }

    /// The schema of a child field, and whether the field is declared (a struct field).
    pub fn field(&self, key: &str) -> (Schema<'a>, bool) {
        let child = |node: Option<&'a Value>| Schema {
            node,
            builtin: self.builtin,
            root: false,
        };
        if self.root && key == "metadata" {
            return (child(Some(&META)), true);
        }
        if let Some(node) = self.node {
            if let Some(p) = node.get("properties").and_then(|p| p.get(key)) {
                return (child(Some(p)), true);
            }
            if let Some(ap) = node.get("additionalProperties").filter(|a| a.is_object()) {
                return (child(Some(ap)), false);
            }
            if node.get("properties").is_some() && self.builtin {
                return (child(None), true);
            }
        }
        (child(None), self.builtin)
    }

    /// The schema of list items.
    pub fn items(&self) -> Schema<'a> {
        Schema {
            node: self.node.and_then(|n| n.get("items")),
            builtin: self.builtin,
            root: false,
        }
    }

    /// How the list at this node merges.
    pub fn list_kind(&self) -> ListKind {
        let Some(node) = self.node else {
            return ListKind::Atomic;
        };
        match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => ListKind::Map(
                node.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListKind::Atomic,
        }
    }

    /// Whether the object at this node is replaced as a whole.
    pub fn atomic_map(&self) -> bool {
        self.node
            .and_then(|n| n.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }
}

/// The path element of a list item.
pub fn item_pe(kind: &ListKind, item: &Value, index: usize) -> Pe {
    match kind {
        ListKind::Set => Pe::Value(item.to_string()),
        ListKind::Map(keys) => {
            let mut canonical = Map::new();
            let mut sorted = keys.clone();
            sorted.sort();
            for k in sorted {
                if let Some(v) = item.get(&k) {
                    canonical.insert(k, v.clone());
                }
            }
            Pe::Key(Value::Object(canonical).to_string())
        }
        ListKind::Atomic => Pe::Index(index),
    }
}

fn is_empty_map(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
}

/// The fields an object sets (structured-merge-diff `ToFieldSet`).
pub fn to_field_set(value: &Value, schema: Schema<'_>) -> FieldSet {
    let mut set = FieldSet::new();
    walk_set(value, schema, &mut Vec::new(), &mut set);
    set
}

fn walk_set(value: &Value, schema: Schema<'_>, path: &mut Path, set: &mut FieldSet) {
    match value {
        Value::Object(map) if !schema.atomic_map() => {
            for (k, child) in map {
                let (cs, declared) = schema.field(k);
                path.push(Pe::Field(k.clone()));
                walk_set(child, cs, path, set);
                if child.is_null() || is_empty_map(child) || !declared {
                    set.insert(path.clone());
                }
                path.pop();
            }
        }
        Value::Array(items) if schema.list_kind() != ListKind::Atomic => {
            let kind = schema.list_kind();
            for (i, item) in items.iter().enumerate() {
                path.push(item_pe(&kind, item, i));
                walk_set(item, schema.items(), path, set);
                set.insert(path.clone());
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                set.insert(path.clone());
            }
        }
    }
}

/// What changed between two objects (structured-merge-diff `Compare`).
#[derive(Debug, Default)]
pub struct Comparison {
    /// Paths only in the new object.
    pub added: FieldSet,
    /// Leaf paths whose value changed.
    pub modified: FieldSet,
    /// Paths only in the old object.
    pub removed: FieldSet,
}

/// Compares two objects field by field.
pub fn compare(old: &Value, new: &Value, schema: Schema<'_>) -> Comparison {
    let mut c = Comparison::default();
    walk_cmp(Some(old), Some(new), schema, &mut Vec::new(), &mut c);
    c
}

fn leaf(l: Option<&Value>, r: Option<&Value>, path: &Path, c: &mut Comparison) {
    if path.is_empty() {
        return;
    }
    match (l, r) {
        (None, Some(_)) => {
            c.added.insert(path.clone());
        }
        (Some(_), None) => {
            c.removed.insert(path.clone());
        }
        (Some(a), Some(b)) if a != b => {
            c.modified.insert(path.clone());
        }
        _ => {}
    }
}

fn walk_cmp(
    l: Option<&Value>,
    r: Option<&Value>,
    schema: Schema<'_>,
    path: &mut Path,
    c: &mut Comparison,
) {
    let shape = |v: Option<&Value>| match v {
        Some(Value::Object(_)) => 1,
        Some(Value::Array(_)) => 2,
        Some(_) => 3,
        None => 0,
    };
    let (sl, sr) = (shape(l), shape(r));
    let kind = if sl == 0 { sr } else { sl };
    if sl != 0 && sr != 0 && sl != sr {
        leaf(l, r, path, c);
        return;
    }
    if kind == 1 && !schema.atomic_map() {
        let empty = Map::new();
        let lm = l.and_then(Value::as_object).unwrap_or(&empty);
        let rm = r.and_then(Value::as_object).unwrap_or(&empty);
        if lm.is_empty() && rm.is_empty() {
            leaf(l, r, path, c);
            return;
        }
        let keys: BTreeSet<&String> = lm.keys().chain(rm.keys()).collect();
        for k in keys {
            let (cs, _) = schema.field(k);
            path.push(Pe::Field(k.clone()));
            walk_cmp(lm.get(k), rm.get(k), cs, path, c);
            path.pop();
        }
        hook(l, r, path, c);
    } else if kind == 2 && schema.list_kind() != ListKind::Atomic {
        let list_kind = schema.list_kind();
        let index = |v: Option<&Value>| -> BTreeMap<Pe, Value> {
            v.and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| (item_pe(&list_kind, item, i), item.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (li, ri) = (index(l), index(r));
        let keys: BTreeSet<&Pe> = li.keys().chain(ri.keys()).collect();
        for pe in keys {
            path.push(pe.clone());
            walk_cmp(li.get(pe), ri.get(pe), schema.items(), path, c);
            hook(li.get(pe), ri.get(pe), path, c);
            path.pop();
        }
        hook(l, r, path, c);
    } else {
        leaf(l, r, path, c);
    }
}

fn hook(l: Option<&Value>, r: Option<&Value>, path: &Path, c: &mut Comparison) {
    if path.is_empty() {
        return;
    }
    if l.is_none() {
        c.added.insert(path.clone());
    } else if r.is_none() {
        c.removed.insert(path.clone());
    }
}

/// Whether `set` holds `path` or anything below it.
pub fn covers(set: &FieldSet, path: &Path) -> bool {
    set.range(path.clone()..)
        .next()
        .is_some_and(|p| p.starts_with(path))
}

/// Removes every path that is `prefix` or below it.
pub fn remove_subtree(set: &mut FieldSet, prefix: &Path) {
    set.retain(|p| !p.starts_with(prefix));
}

fn pe_key(pe: &Pe) -> String {
    match pe {
        Pe::Field(f) => format!("f:{f}"),
        Pe::Key(k) => format!("k:{k}"),
        Pe::Value(v) => format!("v:{v}"),
        Pe::Index(i) => format!("i:{i}"),
    }
}

/// Encodes a set as FieldsV1 JSON.
pub fn encode(set: &FieldSet) -> Value {
    #[derive(Default)]
    struct Node {
        member: bool,
        children: BTreeMap<Pe, Node>,
    }
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }
    fn render(node: &Node) -> Value {
        let mut out = Map::new();
        if node.member && !node.children.is_empty() {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        for (pe, child) in &node.children {
            out.insert(pe_key(pe), render(child));
        }
        Value::Object(out)
    }
    render(&root)
}

/// Decodes FieldsV1 JSON into a set; unknown keys are skipped.
pub fn decode(fields: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    fn walk(v: &Value, path: &mut Path, set: &mut FieldSet) {
        let Some(map) = v.as_object() else { return };
        if map.is_empty() && !path.is_empty() {
            set.insert(path.clone());
        }
        for (k, child) in map {
            if k == "." {
                set.insert(path.clone());
                continue;
            }
            let pe = if let Some(f) = k.strip_prefix("f:") {
                Pe::Field(f.to_string())
            } else if let Some(key) = k.strip_prefix("k:") {
                match serde_json::from_str::<Value>(key) {
                    Ok(v) => Pe::Key(v.to_string()),
                    Err(_) => continue,
                }
            } else if let Some(val) = k.strip_prefix("v:") {
                match serde_json::from_str::<Value>(val) {
                    Ok(v) => Pe::Value(v.to_string()),
                    Err(_) => continue,
                }
            } else if let Some(i) = k.strip_prefix("i:") {
                match i.parse() {
                    Ok(i) => Pe::Index(i),
                    Err(_) => continue,
                }
            } else {
                continue;
            };
            path.push(pe);
            walk(child, path, set);
            path.pop();
        }
    }
    walk(fields, &mut Vec::new(), &mut set);
    set
}

/// Renders a path the way conflict messages show it (`.spec.conditions[type="Ready"].status`).
pub fn display(path: &Path) -> String {
    let mut out = String::new();
    for pe in path {
        match pe {
            Pe::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Pe::Key(k) => {
                let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Pe::Value(v) => out.push_str(&format!("[={v}]")),
            Pe::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_and_marks_members_with_dot() {
        let obj = json!({"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}});
        let old = json!({});
        let c = compare(&old, &obj, Schema::root(None, true));
        let encoded = encode(&c.added);
        assert_eq!(encoded["f:data"], json!({".": {}, "f:k": {}}));
        assert_eq!(decode(&encoded), c.added);
    }

    #[test]
    fn apply_field_set_keys_conditions_by_type() {
        let schema = json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}
        }}}});
        let obj = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let set = to_field_set(&obj, Schema::root(Some(&schema), false));
        let encoded = encode(&set);
        assert_eq!(
            encoded,
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
        );
        let path = set.iter().find(|p| p.len() == 4).unwrap();
        assert_eq!(display(path), ".status.conditions[type=\"Ready\"].status");
    }
}
