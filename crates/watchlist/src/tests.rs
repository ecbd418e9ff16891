use std::collections::HashMap;

use serde_json::json;

use super::*;

fn options(watch_path: bool, query: &[(&str, &str)]) -> Result<ListOptions, Refusal> {
    let query: HashMap<&str, &str> = query.iter().copied().collect();
    ListOptions::from_query(watch_path, |k| query.get(k).copied())
}

fn checked(query: &[(&str, &str)]) -> Result<ListOptions, Refusal> {
    let options = options(false, query)?;
    options.validate()?;
    Ok(options)
}

const STREAMING: &[(&str, &str)] = &[
    ("watch", "true"),
    ("sendInitialEvents", "true"),
    ("resourceVersionMatch", "NotOlderThan"),
    ("allowWatchBookmarks", "true"),
];

#[test]
fn client_gos_streaming_list_gets_a_snapshot_ended_by_the_bookmark() {
    let first = checked(STREAMING).unwrap();
    assert_eq!(
        first.start(7).unwrap(),
        Start::Snapshot { end_bookmark: true }
    );
    // On a new watch the reflector asks from the resourceVersion it had; the server sends the
    // current objects again, from at least that resourceVersion.
    let again = checked(&[STREAMING, &[("resourceVersion", "5")]].concat()).unwrap();
    assert_eq!(
        again.start(7).unwrap(),
        Start::Snapshot { end_bookmark: true }
    );
}

#[test]
fn initial_events_from_beyond_the_servers_resource_version_are_too_large() {
    let ahead = checked(&[STREAMING, &[("resourceVersion", "9")]].concat()).unwrap();
    let refused = ahead.start(7).unwrap_err();
    assert_eq!((refused.code, refused.reason), (504, "Timeout"));
    assert_eq!(
        refused.status()["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

#[test]
fn without_bookmarks_the_initial_events_come_without_the_end_bookmark() {
    let query = [
        ("watch", "true"),
        ("sendInitialEvents", "true"),
        ("resourceVersionMatch", "NotOlderThan"),
    ];
    let options = checked(&query).unwrap();
    assert_eq!(
        options.start(3).unwrap(),
        Start::Snapshot {
            end_bookmark: false
        }
    );
}

#[test]
fn a_legacy_watch_from_nothing_or_zero_starts_with_the_current_objects() {
    for rv in ["", "0"] {
        let options = checked(&[("watch", "true"), ("resourceVersion", rv)]).unwrap();
        assert_eq!(
            options.start(4).unwrap(),
            Start::Snapshot {
                end_bookmark: false
            }
        );
    }
    let resumed = checked(&[("watch", "1"), ("resourceVersion", "3")]).unwrap();
    assert_eq!(resumed.start(4).unwrap(), Start::After(3));
    let path = options(true, &[("resourceVersion", "2")]).unwrap();
    assert_eq!(path.start(4).unwrap(), Start::After(2));
}

#[test]
fn send_initial_events_false_starts_from_now_or_from_the_version_asked() {
    let base = [
        ("watch", "true"),
        ("sendInitialEvents", "false"),
        ("resourceVersionMatch", "NotOlderThan"),
    ];
    assert_eq!(checked(&base).unwrap().start(8).unwrap(), Start::After(8));
    let zero = checked(&[&base[..], &[("resourceVersion", "0")]].concat()).unwrap();
    assert_eq!(zero.start(8).unwrap(), Start::After(8));
    let six = checked(&[&base[..], &[("resourceVersion", "6")]].concat()).unwrap();
    assert_eq!(six.start(8).unwrap(), Start::After(6));
}

#[test]
fn send_initial_events_on_a_list_is_refused_as_kube_apiserver_refuses_it() {
    let refused = checked(&[("sendInitialEvents", "true")]).unwrap_err();
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.status(),
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            "reason": "Invalid",
            "details": {
                "name": "",
                "group": "meta.k8s.io",
                "kind": "ListOptions",
                "causes": [{
                    "reason": "FieldValueForbidden",
                    "message": "Forbidden: sendInitialEvents is forbidden for list",
                    "field": "sendInitialEvents",
                }],
            },
            "code": 422,
        })
    );
}

#[test]
fn send_initial_events_without_not_older_than_is_refused() {
    let refused = checked(&[("watch", "true"), ("sendInitialEvents", "true")]).unwrap_err();
    assert_eq!(
        refused.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    let exact = checked(&[
        ("watch", "true"),
        ("sendInitialEvents", "true"),
        ("resourceVersionMatch", "Exact"),
    ])
    .unwrap_err();
    assert_eq!(
        exact.message,
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]"
    );
    let causes = exact.status()["details"]["causes"].clone();
    assert_eq!(causes[1]["reason"], "FieldValueNotSupported");
}

#[test]
fn a_resource_version_match_needs_what_it_qualifies() {
    let watch =
        checked(&[("watch", "true"), ("resourceVersionMatch", "NotOlderThan")]).unwrap_err();
    assert!(
        watch.message.ends_with(
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        ),
        "{}",
        watch.message
    );
    let list = checked(&[("resourceVersionMatch", "NotOlderThan")]).unwrap_err();
    assert!(
        list.message
            .ends_with("resourceVersionMatch is forbidden unless resourceVersion is provided")
    );
    let exact_zero =
        checked(&[("resourceVersionMatch", "Exact"), ("resourceVersion", "0")]).unwrap_err();
    assert!(
        exact_zero
            .message
            .ends_with(r#"resourceVersionMatch "exact" is forbidden for resourceVersion "0""#)
    );
    let continued = checked(&[
        ("resourceVersionMatch", "NotOlderThan"),
        ("resourceVersion", "3"),
        ("continue", "abc"),
    ])
    .unwrap_err();
    assert!(
        continued
            .message
            .ends_with("resourceVersionMatch is forbidden when continue is provided")
    );
    assert!(
        checked(&[
            ("resourceVersionMatch", "NotOlderThan"),
            ("resourceVersion", "3")
        ])
        .is_ok()
    );
}

#[test]
fn malformed_parameters_are_bad_requests() {
    let flag = options(false, &[("watch", "yes")]).unwrap_err();
    assert_eq!(flag.code, 400);
    let rv = checked(&[("watch", "true"), ("resourceVersion", "abc")]).unwrap_err();
    assert_eq!((rv.code, rv.reason), (400, "BadRequest"));
}

#[test]
fn the_end_bookmark_carries_the_annotation_and_the_resource_version() {
    assert_eq!(
        bookmark("v1", "Node", 12, true),
        json!({
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "resourceVersion": "12",
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        })
    );
    assert!(bookmark("v1", "Node", 12, false)["metadata"]["annotations"].is_null());
}

#[test]
fn an_expired_resource_version_says_the_oldest_one_left() {
    let refused = expired(3, 40);
    assert_eq!((refused.code, refused.reason), (410, "Expired"));
    assert_eq!(refused.message, "too old resource version: 3 (40)");
}
