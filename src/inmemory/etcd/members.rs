//! The etcd members of a fake cluster, kept where CAPD keeps them: in the annotations of the
//! etcd static pods in `kube-system` (cluster id, member id, leading since when, removed).
//! The leader is the member whose `leader-from` is the latest; moving leadership writes a later
//! one, so the picture survives a manager restart with the store.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::proto::{Member, ResponseHeader, StatusResponse};
use crate::inmemory::objects::{
    ETCD_CLUSTER_ID_ANNOTATION, ETCD_LEADER_FROM_ANNOTATION, ETCD_MEMBER_ID_ANNOTATION,
    ETCD_MEMBER_REMOVED_ANNOTATION, KUBE_SYSTEM,
};
use crate::inmemory::selectors::LabelSelector;
use crate::inmemory::store::{Filter, Store};
use crate::inmemory::{patch, resources};

/// The etcd version the fake members report.
pub const ETCD_VERSION: &str = "3.6.4";

/// An RPC that failed: its gRPC status code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    /// gRPC status code (2 UNKNOWN, 5 NOT_FOUND, 12 UNIMPLEMENTED, ...).
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

/// gRPC UNKNOWN: what a Go error returned by a handler becomes (as CAPD's handlers return).
pub const UNKNOWN: u8 = 2;
/// gRPC NOT_FOUND.
pub const NOT_FOUND: u8 = 5;
/// gRPC INTERNAL: what grpc-go answers for a request that does not unmarshal.
pub const INTERNAL: u8 = 13;
/// gRPC UNIMPLEMENTED.
pub const UNIMPLEMENTED: u8 = 12;

fn unknown(message: impl Into<String>) -> RpcError {
    RpcError {
        code: UNKNOWN,
        message: message.into(),
    }
}

/// One etcd pod, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdPod {
    /// The pod's name, `etcd-<machine>`.
    pub pod: String,
    /// The member's name: the pod's name without `etcd-` (the node's name).
    pub name: String,
    /// Cluster id annotation, as written.
    pub cluster_id: Option<String>,
    /// Member id annotation, as written.
    pub member_id: Option<String>,
    /// Since when it leads, when it has led.
    pub leader_from: Option<Timestamp>,
    /// Removed from the etcd cluster (MemberRemove).
    pub removed: bool,
}

impl EtcdPod {
    fn read(pod: &Value) -> Self {
        let name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let annotations = pod.pointer("/metadata/annotations");
        let annotation = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Self {
            name: name.strip_prefix("etcd-").unwrap_or(&name).to_string(),
            cluster_id: annotation(ETCD_CLUSTER_ID_ANNOTATION),
            member_id: annotation(ETCD_MEMBER_ID_ANNOTATION),
            leader_from: annotation(ETCD_LEADER_FROM_ANNOTATION).and_then(|t| t.parse().ok()),
            removed: annotation(ETCD_MEMBER_REMOVED_ANNOTATION).is_some(),
            pod: name,
        }
    }
}

/// The etcd pods of the cluster (`component=etcd,tier=control-plane` in `kube-system`), in
/// name order.
pub fn etcd_pods(store: &Store) -> Vec<EtcdPod> {
    let (Some(pods), Ok(labels)) = (
        resources::find("", "v1", "pods"),
        LabelSelector::parse("component=etcd,tier=control-plane"),
    ) else {
        return Vec::new();
    };
    let filter = Filter {
        namespace: Some(KUBE_SYSTEM.into()),
        labels,
        ..Default::default()
    };
    store
        .list(pods, &filter)
        .0
        .iter()
        .map(EtcdPod::read)
        .collect()
}

/// The current leader among `pods`: the member not removed whose `leader-from` is the latest
/// (the first of equals).
pub fn leader(pods: &[EtcdPod]) -> Option<&EtcdPod> {
    let mut leader: Option<&EtcdPod> = None;
    for pod in pods.iter().filter(|p| !p.removed) {
        if let Some(since) = pod.leader_from
            && leader.and_then(|l| l.leader_from).is_none_or(|l| since > l)
        {
            leader = Some(pod);
        }
    }
    leader
}

/// What member `pod` answers to MemberList and Status (CAPD's `inspectEtcd`): the members not
/// removed, and its own status naming the leader.
///
/// # Errors
/// UNKNOWN when `pod` was removed, an annotation does not parse, members disagree on the
/// cluster id, or no member leads.
pub fn inspect(store: &Store, pod: &str) -> Result<(Vec<Member>, StatusResponse), RpcError> {
    let pods = etcd_pods(store);
    let mut cluster_id: Option<u64> = None;
    let mut header = None;
    let mut members = Vec::new();
    for etcd in pods.iter() {
        if etcd.removed {
            if etcd.pod == pod {
                return Err(unknown("inspect called on etcd which has been removed"));
            }
            continue;
        }
        let parse = |value: &Option<String>, what: &str| {
            value
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| {
                    unknown(format!(
                        "failed read {what} annotation from etcd member with name {}",
                        etcd.pod
                    ))
                })
        };
        let id = parse(&etcd.cluster_id, "cluster ID")?;
        match cluster_id {
            None => cluster_id = Some(id),
            Some(first) if first != id => {
                return Err(unknown(
                    "invalid etcd cluster, members have different cluster ID",
                ));
            }
            Some(_) => {}
        }
        let member_id = parse(&etcd.member_id, "member ID")?;
        if etcd.pod == pod {
            header = Some(ResponseHeader {
                cluster_id: id,
                member_id,
                revision: 1,
                raft_term: 2,
            });
        }
        members.push(Member {
            id: member_id,
            name: etcd.name.clone(),
            ..Default::default()
        });
    }
    let leader = leader(&pods)
        .and_then(|l| l.member_id.as_deref())
        .and_then(|id| id.parse::<u64>().ok())
        .ok_or_else(|| unknown("invalid etcd cluster, no leader found"))?;
    let status = StatusResponse {
        header: header.clone(),
        version: ETCD_VERSION.into(),
        db_size: 1 << 20,
        db_size_in_use: 1 << 20,
        leader,
        raft_index: 1,
        raft_term: 2,
        raft_applied_index: 1,
        ..Default::default()
    };
    Ok((members, status))
}

fn annotate(store: &Store, pod: &str, key: &str, value: &str) -> Result<(), RpcError> {
    let pods = resources::find("", "v1", "pods").ok_or_else(|| unknown("pods are not served"))?;
    store
        .patch(
            pods,
            KUBE_SYSTEM,
            pod,
            &json!({"metadata": {"annotations": {key: value}}}),
            patch::merge,
        )
        .map(|_| ())
        .map_err(|e| unknown(e.to_string()))
}

fn pod_of(pods: &[EtcdPod], id: u64) -> Option<&EtcdPod> {
    let id = id.to_string();
    pods.iter().find(|p| p.member_id.as_deref() == Some(&id))
}

/// MoveLeader: the member `target` leads from now (a `leader-from` later than any other).
///
/// # Errors
/// UNKNOWN when no etcd pod has that member id.
pub fn move_leader(store: &Store, target: u64) -> Result<(), RpcError> {
    let pods = etcd_pods(store);
    let pod = pod_of(&pods, target).ok_or_else(|| {
        unknown(format!(
            "etcd member with ID {target} did not become the leader: expected etcd Pod not found"
        ))
    })?;
    let latest = pods.iter().filter_map(|p| p.leader_from).max();
    let mut now = Timestamp::now();
    if let Some(latest) = latest.filter(|l| *l >= now) {
        now = latest + jiff::SignedDuration::from_millis(1);
    }
    annotate(
        store,
        &pod.pod,
        ETCD_LEADER_FROM_ANNOTATION,
        &now.to_string(),
    )
}

/// MemberRemove: the member `id` is marked removed (its pod stays until its machine goes);
/// answers the members left.
///
/// # Errors
/// NOT_FOUND when no etcd pod has that member id.
pub fn remove_member(store: &Store, id: u64) -> Result<Vec<Member>, RpcError> {
    let pods = etcd_pods(store);
    let pod = pod_of(&pods, id).ok_or_else(|| RpcError {
        code: NOT_FOUND,
        message: format!("no etcd member with id {id} found"),
    })?;
    annotate(store, &pod.pod, ETCD_MEMBER_REMOVED_ANNOTATION, "")?;
    Ok(etcd_pods(store)
        .iter()
        .filter(|p| !p.removed)
        .filter_map(|p| {
            Some(Member {
                id: p.member_id.as_deref()?.parse().ok()?,
                name: p.name.clone(),
                ..Default::default()
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inmemory::objects;

    fn store_with(members: &[(&str, &str, Option<&str>)]) -> Store {
        let store = Store::new();
        let pods = resources::find("", "v1", "pods").unwrap();
        for (machine, id, since) in members {
            let annotations = objects::etcd_annotations("7", id, *since);
            let pod = objects::static_pod("etcd", machine, annotations);
            store.create(pods, KUBE_SYSTEM, pod).unwrap();
        }
        store
    }

    #[test]
    fn the_latest_leader_from_leads_and_removed_members_do_not() {
        let store = store_with(&[
            ("m1", "1", Some("2026-01-01T00:00:00Z")),
            ("m2", "2", Some("2026-01-01T00:00:05.5Z")),
            ("m3", "3", None),
        ]);
        let (members, status) = inspect(&store, "etcd-m3").unwrap();
        assert_eq!(status.leader, 2);
        assert_eq!(status.header.map(|h| h.member_id), Some(3));
        assert_eq!(
            members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["m1", "m2", "m3"]
        );
        // Moving leadership within the same second as the last move still moves it.
        move_leader(&store, 3).unwrap();
        assert_eq!(inspect(&store, "etcd-m1").unwrap().1.leader, 3);
        move_leader(&store, 1).unwrap();
        assert_eq!(inspect(&store, "etcd-m1").unwrap().1.leader, 1);
        // The leader removed: the member that led before it leads again (CAPD's rule).
        let left = remove_member(&store, 1).unwrap();
        assert_eq!(left.len(), 2);
        assert_eq!(inspect(&store, "etcd-m2").unwrap().1.leader, 3);
        assert!(move_leader(&store, 42).is_err());
        // No member with `leader-from`: CAPD's error.
        let leaderless = store_with(&[("m1", "1", None)]);
        let error = inspect(&leaderless, "etcd-m1").unwrap_err();
        assert!(error.message.contains("no leader found"), "{error}");
    }

    #[test]
    fn members_that_disagree_on_the_cluster_id_are_an_error() {
        let store = store_with(&[("m1", "1", Some("2026-01-01T00:00:00Z"))]);
        let pods = resources::find("", "v1", "pods").unwrap();
        let other = objects::static_pod("etcd", "m2", objects::etcd_annotations("8", "2", None));
        store.create(pods, KUBE_SYSTEM, other).unwrap();
        let error = inspect(&store, "etcd-m1").unwrap_err();
        assert!(error.message.contains("different cluster ID"), "{error}");
    }
}
