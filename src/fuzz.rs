//! Malformed input for the code that reads what users write (bootstrap data, HAProxy templates,
//! webhook request bodies, manager flags): what the `fuzz_` property tests share.
//!
//! Each `fuzz_` test asserts that any input is answered, with a result or an error, never a
//! panic. CI runs a few dozen cases of each; `hack/chaos.sh --fuzz N` runs N cases of each in
//! release mode under a time limit, so a hang fails the run too.

use proptest::prelude::*;
use serde_json::Value;

/// Cases per `fuzz_` test: `CAPD_FUZZ_CASES` when set, else `ci_cases`.
pub(crate) fn config(ci_cases: u32) -> ProptestConfig {
    let cases = std::env::var("CAPD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci_cases);
    ProptestConfig {
        cases,
        // A long run would otherwise write regressions files into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text of every kind: printable, control characters, quotes, non-ASCII.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,24}",
        "[\\x00-\\x1f\"'\\\\$`é€\u{1F600}]{0,8}",
        Just(String::new()),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::from),
    ]
}

/// A JSON object whose keys are mostly the format's own (`keys`), so that the input reaches past
/// the first check, with values of any type nested a few levels.
pub(crate) fn object_with(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let key = prop_oneof![4 => proptest::sample::select(keys).prop_map(str::to_string), 1 => "[a-zA-Z]{1,8}"];
    let value = leaf().prop_recursive(4, 48, 6, move |inner| {
        let key = prop_oneof![4 => proptest::sample::select(keys).prop_map(str::to_string), 1 => "[a-zA-Z]{1,8}"];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(key, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::btree_map(key, value, 0..8)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}
