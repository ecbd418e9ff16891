//! Table tests of every rule, allowed and denied. Each denied case names the full message a user
//! sees (`path: type: value: detail`), so a change of wording is a conscious one.

mod cluster;
mod machine;
mod pool;

use std::collections::BTreeMap;

use crate::api::v1beta2::{
    DockerCluster, DockerClusterSpec, DockerClusterTemplate, DockerClusterTemplateResource,
    DockerClusterTemplateSpec, DockerMachine, DockerMachinePool, DockerMachinePoolMachineTemplate,
    DockerMachinePoolSpec, DockerMachinePoolTemplate, DockerMachinePoolTemplateResource,
    DockerMachinePoolTemplateSpec, DockerMachineSpec, DockerMachineTemplate,
    DockerMachineTemplateResource, DockerMachineTemplateSpec, FailureDomain, Mount,
};
use crate::webhooks::field::FieldError;

use super::{Context, TOPOLOGY_DRY_RUN_ANNOTATION};

/// Builders that read as sentences: `DockerMachine::test().custom_image("x")`.
pub(super) trait Fixture: Sized {
    fn test() -> Self;
}

impl Fixture for DockerCluster {
    fn test() -> Self {
        DockerCluster::new("c1", DockerClusterSpec::default())
    }
}

impl Fixture for DockerClusterTemplate {
    fn test() -> Self {
        DockerClusterTemplate::new(
            "ct1",
            DockerClusterTemplateSpec {
                template: DockerClusterTemplateResource::default(),
            },
        )
    }
}

impl Fixture for DockerMachine {
    fn test() -> Self {
        DockerMachine::new("m1", DockerMachineSpec::default())
    }
}

impl Fixture for DockerMachineTemplate {
    fn test() -> Self {
        DockerMachineTemplate::new(
            "mt1",
            DockerMachineTemplateSpec {
                template: DockerMachineTemplateResource::default(),
            },
        )
    }
}

impl Fixture for DockerMachinePool {
    fn test() -> Self {
        DockerMachinePool::new("p1", DockerMachinePoolSpec::default())
    }
}

impl Fixture for DockerMachinePoolTemplate {
    fn test() -> Self {
        DockerMachinePoolTemplate::new(
            "pt1",
            DockerMachinePoolTemplateSpec {
                template: DockerMachinePoolTemplateResource::default(),
            },
        )
    }
}

/// Edits of the cluster spec, shared by DockerCluster and the template's `spec.template.spec`.
pub(super) trait ClusterSpecFixture: Sized {
    fn cluster_spec(&mut self) -> &mut DockerClusterSpec;

    fn port(mut self, port: i32) -> Self {
        self.cluster_spec().control_plane_endpoint.port = port;
        self
    }

    fn failure_domains(mut self, domains: &[(&str, Option<bool>)]) -> Self {
        self.cluster_spec().failure_domains = domains
            .iter()
            .map(|(name, control_plane)| FailureDomain {
                name: (*name).into(),
                control_plane: *control_plane,
                ..Default::default()
            })
            .collect();
        self
    }

    fn lb_image(mut self, repository: &str, tag: &str) -> Self {
        let lb = &mut self.cluster_spec().load_balancer;
        lb.image_repository = repository.into();
        lb.image_tag = tag.into();
        self
    }

    fn haproxy_template(mut self, name: &str) -> Self {
        self.cluster_spec()
            .load_balancer
            .custom_haproxy_config_template_ref =
            Some(crate::api::v1beta2::LocalObjectReference { name: name.into() });
        self
    }
}

impl ClusterSpecFixture for DockerCluster {
    fn cluster_spec(&mut self) -> &mut DockerClusterSpec {
        &mut self.spec
    }
}

impl ClusterSpecFixture for DockerClusterTemplate {
    fn cluster_spec(&mut self) -> &mut DockerClusterSpec {
        &mut self.spec.template.spec
    }
}

/// Edits of the machine spec, shared by DockerMachine and the template's `spec.template.spec`.
pub(super) trait MachineSpecFixture: Sized {
    fn machine_spec(&mut self) -> &mut DockerMachineSpec;

    fn custom_image(mut self, image: &str) -> Self {
        self.machine_spec().custom_image = image.into();
        self
    }

    fn pre_load(mut self, images: &[&str]) -> Self {
        self.machine_spec().pre_load_images = images.iter().map(|i| (*i).into()).collect();
        self
    }

    fn mounts(mut self, mounts: &[(&str, &str)]) -> Self {
        self.machine_spec().extra_mounts = bind_mounts(mounts);
        self
    }

    fn bootstrap_timeout(mut self, timeout: &str) -> Self {
        self.machine_spec().bootstrap_timeout = Some(timeout.into());
        self
    }
}

impl MachineSpecFixture for DockerMachine {
    fn machine_spec(&mut self) -> &mut DockerMachineSpec {
        &mut self.spec
    }
}

impl MachineSpecFixture for DockerMachineTemplate {
    fn machine_spec(&mut self) -> &mut DockerMachineSpec {
        &mut self.spec.template.spec
    }
}

/// Read-write bind mounts from `(containerPath, hostPath)` pairs.
fn bind_mounts(mounts: &[(&str, &str)]) -> Vec<Mount> {
    mounts
        .iter()
        .map(|(container, host)| Mount {
            container_path: (*container).into(),
            host_path: (*host).into(),
            read_only: false,
        })
        .collect()
}

/// Edits of a pool's container settings, shared by DockerMachinePool (`spec.template`) and the
/// pool template (`spec.template.spec.template`).
pub(super) trait PoolFixture: Sized {
    fn pool_settings(&mut self) -> &mut DockerMachinePoolMachineTemplate;

    fn pool_image(mut self, image: &str) -> Self {
        self.pool_settings().custom_image = image.into();
        self
    }

    fn pool_pre_load(mut self, images: &[&str]) -> Self {
        self.pool_settings().pre_load_images = images.iter().map(|i| (*i).into()).collect();
        self
    }

    fn pool_mounts(mut self, mounts: &[(&str, &str)]) -> Self {
        self.pool_settings().extra_mounts = bind_mounts(mounts);
        self
    }
}

impl PoolFixture for DockerMachinePool {
    fn pool_settings(&mut self) -> &mut DockerMachinePoolMachineTemplate {
        &mut self.spec.template
    }
}

impl PoolFixture for DockerMachinePoolTemplate {
    fn pool_settings(&mut self) -> &mut DockerMachinePoolMachineTemplate {
        &mut self.spec.template.spec.template
    }
}

/// Edits of object and template metadata.
pub(super) trait MetaFixture: Sized {
    fn object_annotations(&mut self) -> &mut BTreeMap<String, String>;
    fn template_meta(&mut self) -> &mut crate::api::v1beta2::TemplateObjectMeta;

    /// Marks the object as sent by the topology controller's dry run.
    fn topology_dry_run(mut self) -> Self {
        self.object_annotations()
            .insert(TOPOLOGY_DRY_RUN_ANNOTATION.into(), String::new());
        self
    }

    fn template_label(mut self, key: &str, value: &str) -> Self {
        self.template_meta().labels.insert(key.into(), value.into());
        self
    }

    fn template_annotation(mut self, key: &str, value: &str) -> Self {
        self.template_meta()
            .annotations
            .insert(key.into(), value.into());
        self
    }
}

impl MetaFixture for DockerClusterTemplate {
    fn object_annotations(&mut self) -> &mut BTreeMap<String, String> {
        self.metadata.annotations.get_or_insert_with(BTreeMap::new)
    }
    fn template_meta(&mut self) -> &mut crate::api::v1beta2::TemplateObjectMeta {
        &mut self.spec.template.metadata
    }
}

impl MetaFixture for DockerMachinePoolTemplate {
    fn object_annotations(&mut self) -> &mut BTreeMap<String, String> {
        self.metadata.annotations.get_or_insert_with(BTreeMap::new)
    }
    fn template_meta(&mut self) -> &mut crate::api::v1beta2::TemplateObjectMeta {
        &mut self.spec.template.metadata
    }
}

impl MetaFixture for DockerMachineTemplate {
    fn object_annotations(&mut self) -> &mut BTreeMap<String, String> {
        self.metadata.annotations.get_or_insert_with(BTreeMap::new)
    }
    fn template_meta(&mut self) -> &mut crate::api::v1beta2::TemplateObjectMeta {
        &mut self.spec.template.metadata
    }
}

/// Contexts by what is on.
pub(super) fn topology_on() -> Context {
    Context {
        cluster_topology: true,
        dry_run: false,
    }
}

pub(super) fn dry_run() -> Context {
    Context {
        cluster_topology: true,
        dry_run: true,
    }
}

/// One row: a case name, the errors found, and the messages expected (empty: allowed).
pub(super) fn check(case: &str, errors: Vec<FieldError>, expected: &[&str]) {
    let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(got, expected, "case {case:?}");
}
