//! Merging an applied configuration into a live object, and removing fields an applier dropped.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::fieldset::{ListKind, Path, Pe, Schema, item_pe};

/// Merges `config` over `live` following the schema's list and map types (structured-merge-diff `Merge`).
pub fn merge(live: Option<&Value>, config: &Value, schema: Schema<'_>) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(r)) if !schema.atomic_map() => {
            let mut out = l.clone();
            for (k, rv) in r {
                if rv.is_null() {
                    out.remove(k);
                    continue;
                }
                let (cs, _) = schema.field(k);
                let merged = merge(l.get(k), rv, cs);
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (None, Value::Object(r)) => {
            let mut out = Map::new();
            for (k, rv) in r {
                if rv.is_null() {
                    continue;
                }
                let (cs, _) = schema.field(k);
                out.insert(k.clone(), merge(None, rv, cs));
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(r)) if schema.list_kind() != ListKind::Atomic => {
            Value::Array(merge_lists(l, r, schema))
        }
        _ => config.clone(),
    }
}

fn merge_lists(l: &[Value], r: &[Value], schema: Schema<'_>) -> Vec<Value> {
    let kind = schema.list_kind();
    let lk: Vec<Pe> = l
        .iter()
        .enumerate()
        .map(|(i, v)| item_pe(&kind, v, i))
        .collect();
    let rk: Vec<Pe> = r
        .iter()
        .enumerate()
        .map(|(i, v)| item_pe(&kind, v, i))
        .collect();
    let rset: HashSet<&Pe> = rk.iter().collect();
    let mut emitted: HashSet<Pe> = HashSet::new();
    let mut out = Vec::new();
    let (mut li, mut ri) = (0, 0);
    while li < l.len() || ri < r.len() {
        if li < l.len() && emitted.contains(&lk[li]) {
            li += 1;
            continue;
        }
        if li < l.len() && ri < r.len() {
            if lk[li] == rk[ri] {
                out.push(merge(Some(&l[li]), &r[ri], schema.items()));
                emitted.insert(lk[li].clone());
                li += 1;
                ri += 1;
                continue;
            }
            if !rset.contains(&lk[li]) {
                out.push(l[li].clone());
                emitted.insert(lk[li].clone());
                li += 1;
                continue;
            }
        }
        if ri < r.len() {
            let live_item = lk.iter().position(|k| k == &rk[ri]).map(|i| &l[i]);
            if !emitted.contains(&rk[ri]) {
                out.push(merge(live_item, &r[ri], schema.items()));
                emitted.insert(rk[ri].clone());
            }
            ri += 1;
            continue;
        }
        if li < l.len() {
            out.push(l[li].clone());
            emitted.insert(lk[li].clone());
            li += 1;
        }
    }
    out
}

/// Removes the value at a field path, if present.
pub fn remove_path(object: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = object;
    for pe in parents {
        let next = match (pe, current) {
            (Pe::Field(f), Value::Object(m)) => m.get_mut(f),
            (pe, Value::Array(items)) => find_item(items, pe).and_then(|i| items.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => current = n,
            None => return,
        }
    }
    match (last, current) {
        (Pe::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (pe, Value::Array(items)) => {
            if let Some(i) = find_item(items, pe) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

fn find_item(items: &[Value], pe: &Pe) -> Option<usize> {
    match pe {
        Pe::Index(i) => (*i < items.len()).then_some(*i),
        Pe::Value(v) => items.iter().position(|item| &item.to_string() == v),
        Pe::Key(k) => {
            let keys: Map<String, Value> = serde_json::from_str(k).ok()?;
            items
                .iter()
                .position(|item| keys.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))
        }
        Pe::Field(_) => None,
    }
}

/// Drops empty label, annotation, finalizer and owner lists like the Go types' `omitempty` does.
pub fn tidy_metadata(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in ["labels", "annotations", "finalizers", "ownerReferences"] {
            let empty = match meta.get(f) {
                Some(Value::Object(m)) => m.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                meta.remove(f);
            }
        }
    }
}
