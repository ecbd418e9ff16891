//! Events: kube-runtime's recorder writes events.k8s.io/v1 Events that core/v1 readers see too.

use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event as RecordedEvent, EventType, Recorder, Reporter};

use crate::common::start;

#[tokio::test]
async fn recorder_events_are_visible_in_both_apis() {
    let (_h, client) = start().await;
    let reporter = Reporter {
        controller: "capd-manager".into(),
        instance: Some("pod-0".into()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let reference = ObjectReference {
        api_version: Some("infrastructure.cluster.x-k8s.io/v1beta2".into()),
        kind: Some("DockerMachine".into()),
        name: Some("m0".into()),
        namespace: Some("default".into()),
        uid: Some("1234".into()),
        ..Default::default()
    };
    let event = RecordedEvent {
        type_: EventType::Warning,
        reason: "ContainerFailed".into(),
        note: Some("container exited".into()),
        action: "Provision".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    let new_api: Api<Event> = Api::namespaced(client.clone(), "default");
    let listed = new_api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items.len(),
        1,
        "the repeat is a series patch, not a new event"
    );
    let ev = &listed.items[0];
    assert_eq!(ev.reason.as_deref(), Some("ContainerFailed"));
    assert_eq!(ev.series.as_ref().map(|s| s.count), Some(2));

    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let core_events = core
        .list(&ListParams::default().fields("involvedObject.name=m0,reason=ContainerFailed"))
        .await
        .unwrap();
    assert_eq!(core_events.items.len(), 1);
    let ce = &core_events.items[0];
    assert_eq!(ce.message.as_deref(), Some("container exited"));
    assert_eq!(ce.reporting_component.as_deref(), Some("capd-manager"));
    assert_eq!(ce.type_.as_deref(), Some("Warning"));
}
