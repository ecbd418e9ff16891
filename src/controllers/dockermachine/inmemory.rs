//! The in-memory backend of a DevMachine: after CAPD's waits (Cluster infrastructure, bootstrap
//! data, and for workers an initialized control plane), its fake VM, Node, etcd member and API
//! server come up in stages ([`super::inmemory_stages`]) in its cluster's fake workload cluster
//! ([`crate::inmemory`]). No pass blocks: a stage not yet due requeues for the time left.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use serde_json::{Map, Value, json};

use super::Fetched;
use super::inmemory_stages::{self as stages, VM_STARTED_ANNOTATION};
use crate::api::capi::{Cluster, Machine};
use crate::api::conditions::{
    ConditionStatus, WAITING_FOR_BOOTSTRAP_DATA_REASON,
    WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON, WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON,
    set_condition,
};
use crate::api::v1beta2::{DockerMachineStatus, InMemoryMachineBackendSpec};
use crate::controllers::conditions::{condition, paused_condition};
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::{Error, Result};
use crate::controllers::fake_clusters::{cluster_key, reserve};
use crate::controllers::kinds::{Applied, MachineView};
use crate::inmemory::etcd::members;
use crate::inmemory::objects::{self, KUBE_SYSTEM};
use crate::inmemory::resources::{self, ResourceType};
use crate::inmemory::{StoreError, WorkloadCluster};

/// The wait before any stage, as the docker backend words it (`VMProvisioned` instead of
/// `ContainerProvisioned`); `None` once the machine may start.
pub fn wait(
    machine: &Machine,
    cluster: &Cluster,
    generation: Option<i64>,
) -> Option<crate::api::conditions::Condition> {
    let (reason, message) = if !cluster.infrastructure_provisioned() {
        (
            WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON,
            "Waiting for the Cluster infrastructure to be ready",
        )
    } else if machine.bootstrap_data_secret_name().is_some() {
        return None;
    } else if !machine.is_control_plane() && !cluster.control_plane_initialized() {
        (
            WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON,
            "Waiting for the control plane to be initialized",
        )
    } else {
        (
            WAITING_FOR_BOOTSTRAP_DATA_REASON,
            "Waiting for the bootstrap provider to set the bootstrap data",
        )
    };
    Some(condition(
        stages::VM_PROVISIONED_CONDITION,
        ConditionStatus::False,
        reason,
        message,
        generation,
    ))
}

fn resource(plural: &str) -> Result<&'static ResourceType> {
    let group = match plural {
        "clusterroles" | "clusterrolebindings" => "rbac.authorization.k8s.io",
        "daemonsets" | "deployments" => "apps",
        _ => "",
    };
    resources::find(group, "v1", plural).ok_or_else(|| Error::NotFinished {
        what: format!("a served resource {plural}"),
    })
}

/// Creates `object` unless it exists.
fn ensure(cluster: &WorkloadCluster, key: &str, plural: &str, object: Value) -> Result<()> {
    let resource = resource(plural)?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match cluster.store.create(resource, &namespace, object) {
        Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
        Err(source) => Err(Error::FakeCluster {
            action: format!("create {plural}"),
            cluster: key.to_string(),
            source,
        }),
    }
}

/// Deletes the `plural` named `name` in `namespace`, if it exists.
fn remove(
    cluster: &WorkloadCluster,
    key: &str,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Result<()> {
    match cluster.store.delete(resource(plural)?, namespace, name) {
        Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
        Err(source) => Err(Error::FakeCluster {
            action: format!("delete {plural} {name}"),
            cluster: key.to_string(),
            source,
        }),
    }
}

/// The etcd pod of a new member (as CAPD's backend makes it): the cluster id of the members
/// there (a new one for the first), a fresh member id, and leadership when no member leads.
fn etcd_pod(cluster: &WorkloadCluster, machine: &str) -> Value {
    let pods = members::etcd_pods(&cluster.store);
    let present = || pods.iter().filter(|p| !p.removed);
    let cluster_id = present()
        .find_map(|p| p.cluster_id.clone())
        .unwrap_or_else(objects::random_etcd_id);
    let mut member_id = objects::random_etcd_id();
    while pods
        .iter()
        .any(|p| p.member_id.as_ref() == Some(&member_id))
    {
        member_id = objects::random_etcd_id();
    }
    let now = now_text();
    let led = members::leader(&pods).is_some();
    let annotations =
        objects::etcd_annotations(&cluster_id, &member_id, (!led).then_some(now.as_str()));
    objects::static_pod("etcd", machine, annotations)
}

fn now_text() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The CA (`tls.crt`, `tls.key`) of the Secret `<cluster>-<purpose>` (`ca`, `etcd`).
async fn cluster_secret(
    ctx: &Context,
    namespace: &str,
    cluster: &str,
    purpose: &str,
) -> Result<(String, String)> {
    let name = format!("{cluster}-{purpose}");
    let secret = ctx
        .api::<Secret>(namespace)
        .get_opt(&name)
        .await
        .map_err(Error::kube(format!("read Secret {namespace}/{name}")))?
        .ok_or_else(|| Error::NotFinished {
            what: format!("the cluster Secret {namespace}/{name}"),
        })?;
    let text = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .ok_or_else(|| Error::NotFinished {
                what: format!("key {key} in Secret {namespace}/{name}"),
            })
    };
    Ok((text("tls.crt")?, text("tls.key")?))
}

/// The annotation and `spec.providerID` this backend owns on the DevMachine, applied together.
async fn apply_owned(
    ctx: &Context,
    view: &MachineView,
    started: &str,
    provider_id: Option<&str>,
) -> Result<Applied> {
    let mut fields = Map::new();
    fields.insert(
        "metadata".into(),
        json!({"annotations": {VM_STARTED_ANNOTATION: started}}),
    );
    if let Some(id) = provider_id {
        fields.insert("spec".into(), json!({"providerID": id}));
    }
    view.apply_owned(ctx, fields).await
}

/// One pass of the normal reconcile.
///
/// # Errors
/// [`Error::Kube`] for writes to the management cluster, [`Error::InMemory`] and
/// [`Error::FakeCluster`] for the fake cluster, [`Error::NotFinished`] while the cluster CA is
/// missing.
pub async fn reconcile_normal(
    ctx: &Context,
    view: &MachineView,
    spec: &InMemoryMachineBackendSpec,
    fetched: &Fetched,
) -> Result<Action> {
    let (Some(machine), Some(cluster), Some(cluster_name), Some(infra)) = (
        fetched.machine.as_ref(),
        fetched.cluster.as_ref(),
        fetched.cluster_name.as_deref(),
        fetched.docker_cluster.as_ref(),
    ) else {
        return Ok(Action::await_change());
    };
    let generation = view.metadata.generation;
    let mut status: DockerMachineStatus = view.status.clone().unwrap_or_default();
    set_condition(&mut status.conditions, paused_condition(false, generation));
    let control_plane = machine.is_control_plane();

    if let Some(waiting) = wait(machine, cluster, generation) {
        tracing::info!(reason = %waiting.reason, "Waiting before provisioning the fake machine");
        set_condition(&mut status.conditions, waiting);
        stages::summarize(&mut status.conditions, control_plane, generation);
        super::write_status(ctx, view, &status).await?;
        return Ok(Action::await_change());
    }
    let delays = match stages::delays(spec, view.metadata.uid.as_deref().unwrap_or_default()) {
        Ok(delays) => delays,
        Err(message) => {
            set_condition(
                &mut status.conditions,
                stages::invalid_settings(message.clone(), generation),
            );
            stages::summarize(&mut status.conditions, control_plane, generation);
            super::write_status(ctx, view, &status).await?;
            ctx.event(view, EventKind::Warning, "InvalidSettings", message)
                .await;
            return Ok(Action::await_change());
        }
    };
    let recorded = view
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VM_STARTED_ANNOTATION))
        .and_then(|t| t.parse::<Timestamp>().ok());
    let now = Timestamp::now();
    let started = match recorded {
        Some(started) => started,
        None => {
            // To the nanosecond: every deadline is timed from here. Applied with the provider
            // ID when there is one: both are this backend's fields.
            let provider_id = Some(view.spec.provider_id.as_str()).filter(|id| !id.is_empty());
            apply_owned(ctx, view, &now.to_string(), provider_id).await?;
            now
        }
    };
    let plan = stages::plan(
        &mut status.conditions,
        started,
        now,
        control_plane,
        &delays,
        generation,
    );

    let namespace = view.metadata.namespace.clone().unwrap_or_default();
    let key = cluster_key(&namespace, cluster_name);
    let fake = reserve(ctx, &key, infra.spec.control_plane_endpoint.port)?;
    let name = view.metadata.name.clone().unwrap_or_default();
    if plan.node {
        ensure(
            &fake,
            &key,
            "nodes",
            objects::node(&name, control_plane, &now_text()),
        )?;
    }
    if plan.etcd
        && fake
            .store
            .get(resource("pods")?, KUBE_SYSTEM, &format!("etcd-{name}"))
            .is_err()
    {
        ensure(&fake, &key, "pods", etcd_pod(&fake, &name))?;
    }
    if plan.etcd && !fake.etcd.has_ca() {
        // The fake etcd serves with certificates of the cluster's etcd CA, as CAPD's does.
        let (crt, key_pem) = cluster_secret(ctx, &namespace, cluster_name, "etcd").await?;
        fake.etcd.set_ca(&crt, &key_pem);
    }
    if plan.api_server {
        for component in [
            "kube-apiserver",
            "kube-scheduler",
            "kube-controller-manager",
        ] {
            ensure(
                &fake,
                &key,
                "pods",
                objects::static_pod(component, &name, json!({})),
            )?;
        }
        let version = machine.spec.version.as_deref().unwrap_or("v1.34.0");
        for (plural, object) in objects::kubeadm_objects(version) {
            ensure(&fake, &key, plural, object)?;
        }
        if !fake.listening() {
            let (crt, key_pem) = cluster_secret(ctx, &namespace, cluster_name, "ca").await?;
            ctx.in_memory
                .start_api_server(&fake, &crt, &key_pem)
                .await
                .map_err(|source| Error::InMemory {
                    action: "start the API server".into(),
                    cluster: key.clone(),
                    source,
                })?;
        }
    }
    if plan.vm {
        let provider_id = objects::provider_id(&name);
        if view.spec.provider_id != provider_id {
            let applied = apply_owned(ctx, view, &started.to_string(), Some(&provider_id)).await?;
            // The provider ID is spec: the conditions are observed at the generation it made.
            for condition in &mut status.conditions {
                condition.observed_generation = applied.generation;
            }
        }
        status.initialization.provisioned = Some(true);
    }
    super::write_status(ctx, view, &status).await?;
    Ok(match plan.requeue {
        // A little more, not to wake just before the deadline.
        Some(left) => Action::requeue(left + Duration::from_millis(50)),
        None => Action::requeue(ctx.manager.config.sync_period),
    })
}

/// Removes the machine from its fake cluster: its Node, then its static pods (and so its etcd
/// member); the API server listener closes with the last control plane's.
///
/// # Errors
/// [`Error::FakeCluster`] when the fake cluster refuses a deletion.
pub async fn reconcile_delete(ctx: &Context, view: &MachineView, fetched: &Fetched) -> Result<()> {
    let namespace = view.metadata.namespace.clone().unwrap_or_default();
    let Some(cluster_name) = fetched.cluster_name.as_deref() else {
        return Ok(());
    };
    let key = cluster_key(&namespace, cluster_name);
    let Some(fake) = ctx.in_memory.get(&key) else {
        return Ok(());
    };
    let name = view.metadata.name.clone().unwrap_or_default();
    remove(&fake, &key, "nodes", "", &name)?;
    for component in objects::CONTROL_PLANE_COMPONENTS {
        remove(
            &fake,
            &key,
            "pods",
            KUBE_SYSTEM,
            &format!("{component}-{name}"),
        )?;
    }
    fake.etcd.forget(&format!("etcd-{name}"));
    let filter = crate::inmemory::store::Filter {
        namespace: Some(KUBE_SYSTEM.into()),
        labels: crate::inmemory::selectors::LabelSelector::parse("component=kube-apiserver")
            .unwrap_or_default(),
        ..Default::default()
    };
    if fake.store.list(resource("pods")?, &filter).0.is_empty() && fake.listening() {
        ctx.in_memory.stop_api_server(&fake);
        tracing::info!(cluster = %key, "Stopped the fake API server with its last control plane");
    }
    Ok(())
}
