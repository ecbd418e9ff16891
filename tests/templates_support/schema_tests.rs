//! The validator finds each kind of problem it claims to find (and nothing on valid input).

use serde_json::{Value, json};

use super::schema::{validate_object, validate_value};

fn problems(value: Value, schema: Value) -> Vec<String> {
    validate_value(&value, &schema, "x")
        .into_iter()
        .map(|p| p.to_string())
        .collect()
}

fn one(value: Value, schema: Value, expected: &str) {
    let found = problems(value.clone(), schema);
    assert!(
        found.len() == 1 && found[0].contains(expected),
        "{value}: expected one problem containing {expected:?}, got {found:?}"
    );
}

#[test]
fn types_nulls_and_int_or_string() {
    let int = json!({"type": "integer"});
    assert!(problems(json!(3), int.clone()).is_empty());
    one(
        json!("3"),
        int.clone(),
        "x in body must be of type integer: \"string\"",
    );
    one(
        json!(1.5),
        int.clone(),
        "must be of type integer: \"number\"",
    );
    one(Value::Null, int, "null is not allowed");
    assert!(problems(Value::Null, json!({"type": "string", "nullable": true})).is_empty());
    let ios = json!({"x-kubernetes-int-or-string": true});
    assert!(problems(json!(1), ios.clone()).is_empty());
    assert!(problems(json!("10%"), ios.clone()).is_empty());
    one(json!(true), ios, "must be of type integer,string");
}

#[test]
fn strings_numbers_and_enums() {
    let s = json!({"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"});
    assert!(problems(json!("abc"), s.clone()).is_empty());
    one(
        json!("a"),
        s.clone(),
        "x in body should be at least 2 chars long",
    );
    one(
        json!("abcd"),
        s.clone(),
        "Too long: may not be more than 3 bytes",
    );
    one(json!("aB"), s, "x in body should match '^[a-z]+$'");
    one(
        json!("now"),
        json!({"type": "string", "format": "date-time"}),
        "x in body must be of type date-time",
    );
    let n = json!({"type": "integer", "minimum": 1, "maximum": 65535, "format": "int32"});
    one(
        json!(0),
        n.clone(),
        "x in body should be greater than or equal to 1",
    );
    one(
        json!(70000),
        n,
        "x in body should be less than or equal to 65535",
    );
    one(
        json!(5_000_000_000_i64),
        json!({"type": "integer", "format": "int32"}),
        "Checked value must be of type integer with format int32 in x",
    );
    one(
        json!(7),
        json!({"type": "integer", "multipleOf": 2}),
        "x in body should be a multiple of 2",
    );
    one(
        json!("x"),
        json!({"type": "string", "enum": ["a", "b"]}),
        "Unsupported value: \"x\": supported values: \"a\", \"b\"",
    );
}

#[test]
fn objects_unknown_fields_required_and_defaults() {
    let schema = json!({
        "type": "object",
        "required": ["name", "port"],
        "properties": {
            "name": {"type": "string"},
            "port": {"type": "integer", "default": 6443},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        },
        "minProperties": 1
    });
    assert!(
        problems(
            json!({"name": "a", "labels": {"k": "v"}, "free": {"any": [1]}}),
            schema.clone()
        )
        .is_empty()
    );
    one(
        json!({"nmae": "a", "name": "b"}),
        schema.clone(),
        "x.nmae: unknown field",
    );
    one(json!({"port": 1}), schema.clone(), "x.name: Required value");
    one(
        json!({"name": "a", "labels": {"k": 1}}),
        schema.clone(),
        "x.labels.k in body must be of type string",
    );
    one(
        json!({}),
        json!({"type": "object", "minProperties": 1}),
        "x in body should have at least 1 properties",
    );
}

#[test]
fn lists_sets_and_list_maps() {
    let l = json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}});
    one(
        json!([]),
        l.clone(),
        "x in body should have at least 1 items",
    );
    one(
        json!(["a", "b", "c"]),
        l.clone(),
        "Too many: 3: must have at most 2 items",
    );
    one(json!(["a", 1]), l, "x[1] in body must be of type string");
    one(
        json!(["a", "a"]),
        json!({"type": "array", "x-kubernetes-list-type": "set"}),
        "x[1]: Duplicate value: \"a\"",
    );
    let map = json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}
    });
    assert!(problems(json!([{"name": "a"}, {"name": "b"}]), map.clone()).is_empty());
    one(
        json!([{"name": "a"}, {"name": "a", "value": "x"}]),
        map.clone(),
        "x[1]: Duplicate value: map[string]interface {}{\"name\":\"a\"}",
    );
    one(json!([{"value": "x"}]), map, "x[0].name: Required value");
}

#[test]
fn combinators_cel_and_embedded_resources() {
    let any = json!({"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+%$"}]});
    assert!(problems(json!("5%"), any.clone()).is_empty());
    one(json!("five"), any, "x in body must be of type anyOf");
    one(
        json!("x"),
        json!({"type": "string", "not": {"enum": ["x"]}}),
        "\"x\" must not validate the schema (not)",
    );
    let unique = json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x.name == y.name))", "message": "name must be unique"}]});
    one(
        json!([{"name": "a"}, {"name": "a"}]),
        unique,
        "name must be unique",
    );
    let unknown_rule =
        json!({"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'"}]});
    one(json!("y"), unknown_rule, "CEL rule not understood");
    let embedded = json!({"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}});
    one(
        json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}),
        embedded.clone(),
        "x.apiVersion: Required value: must not be empty",
    );
    one(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"nmae": "p"}}),
        embedded,
        "x.metadata.nmae: unknown field",
    );
}

#[test]
fn object_metadata() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    let ok = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a-b", "namespace": "default",
        "labels": {"cluster.x-k8s.io/cluster-name": "demo"}, "annotations": {"note": "any text"}}});
    assert!(validate_object(&ok, &schema).is_empty());
    let bad = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "A_b", "labels": {"k": "not ok!"}}});
    let found: Vec<String> = validate_object(&bad, &schema)
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0]
            .starts_with("metadata.name: Invalid value: \"A_b\": a lowercase RFC 1123 subdomain"),
        "{found:?}"
    );
    assert!(
        found[1].starts_with("metadata.labels: Invalid value: \"not ok!\": a valid label"),
        "{found:?}"
    );
}
