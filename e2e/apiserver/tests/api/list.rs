//! Lists: pagination over a consistent snapshot, label and field selectors.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

use crate::common::{start, status};

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn pagination_is_consistent_and_counts_what_remains() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), &[]))
            .await
            .unwrap();
    }
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let token = first.metadata.continue_.clone().unwrap();
    cms.create(&PostParams::default(), &cm("cm-9", &[]))
        .await
        .unwrap();
    let second = cms
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    let names: Vec<String> = second
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        vec!["cm-2", "cm-3", "cm-4"],
        "the snapshot excludes later objects"
    );
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert!(second.metadata.continue_.is_none());
    let bad = status(
        cms.list(&ListParams::default().continue_token("garbage"))
            .await
            .unwrap_err(),
    );
    assert_eq!(bad.code, 400);
}

#[tokio::test]
async fn label_and_field_selectors_filter() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &cm("web", &[("app", "web"), ("tier", "front")]),
    )
    .await
    .unwrap();
    cms.create(&PostParams::default(), &cm("db", &[("app", "db")]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("plain", &[]))
        .await
        .unwrap();
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    };
    let cases = [
        ("app=web", vec!["web"]),
        ("app!=web", vec!["db", "plain"]),
        ("app in (web,db)", vec!["db", "web"]),
        ("app notin (web)", vec!["db", "plain"]),
        ("tier", vec!["web"]),
        ("!app", vec!["plain"]),
    ];
    for (selector, expected) in cases {
        let got = names(
            cms.list(&ListParams::default().labels(selector))
                .await
                .unwrap(),
        );
        assert_eq!(got, expected, "{selector}");
    }
    let by_name = names(
        cms.list(&ListParams::default().fields("metadata.name=db"))
            .await
            .unwrap(),
    );
    assert_eq!(by_name, vec!["db"]);
    let all: Api<ConfigMap> = Api::all(client);
    let not_default = names(
        all.list(&ListParams::default().fields("metadata.namespace!=default"))
            .await
            .unwrap(),
    );
    assert!(not_default.is_empty());
    let unsupported = status(
        cms.list(&ListParams::default().fields("data.x=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (unsupported.code, unsupported.message.as_str()),
        (400, "field label not supported: data.x")
    );
}
