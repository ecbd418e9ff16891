//! Table tests of every rule, allowed and denied. Each denied case names the full message a user
//! sees (`path: type: value: detail`), so a change of wording is a conscious one.

mod cluster;
mod dev;
mod machine;
mod pool;

use std::collections::BTreeMap;

use crate::api::v1beta2::{
    DevCluster, DevClusterTemplate, DevMachine, DevMachinePool, DevMachinePoolTemplate,
    DevMachineTemplate, DockerCluster, DockerClusterSpec, DockerClusterTemplate, DockerMachine,
    DockerMachinePool, DockerMachinePoolMachineTemplate, DockerMachinePoolTemplate,
    DockerMachineSpec, DockerMachineTemplate, FailureDomain, Mount,
};
use crate::webhooks::field::FieldError;

use super::{Context, TOPOLOGY_DRY_RUN_ANNOTATION};

/// Builders that read as sentences: `DockerMachine::test().custom_image("x")`.
pub(super) trait Fixture: Sized {
    fn test() -> Self;
}

/// `Kind::test()`: an object named `name` with the default spec.
macro_rules! fixtures {
    ($($kind:ty => $name:literal),+ $(,)?) => {$(
        impl Fixture for $kind {
            fn test() -> Self {
                <$kind>::new($name, Default::default())
            }
        }
    )+};
}

fixtures! {
    DockerCluster => "c1",
    DockerClusterTemplate => "ct1",
    DockerMachine => "m1",
    DockerMachineTemplate => "mt1",
    DockerMachinePool => "p1",
    DockerMachinePoolTemplate => "pt1",
    DevCluster => "dc1",
    DevClusterTemplate => "dct1",
    DevMachine => "dm1",
    DevMachineTemplate => "dmt1",
    DevMachinePool => "dp1",
    DevMachinePoolTemplate => "dpt1",
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

/// The container settings of a fixture, wherever its kind keeps them.
pub(super) struct SettingsMut<'a> {
    custom_image: &'a mut String,
    pre_load_images: &'a mut Vec<String>,
    extra_mounts: &'a mut Vec<Mount>,
}

impl<'a> From<&'a mut DockerMachineSpec> for SettingsMut<'a> {
    fn from(spec: &'a mut DockerMachineSpec) -> Self {
        Self {
            custom_image: &mut spec.custom_image,
            pre_load_images: &mut spec.pre_load_images,
            extra_mounts: &mut spec.extra_mounts,
        }
    }
}

impl<'a> From<&'a mut DockerMachinePoolMachineTemplate> for SettingsMut<'a> {
    fn from(template: &'a mut DockerMachinePoolMachineTemplate) -> Self {
        Self {
            custom_image: &mut template.custom_image,
            pre_load_images: &mut template.pre_load_images,
            extra_mounts: &mut template.extra_mounts,
        }
    }
}

/// Edits of the container settings, shared by the machine kinds (`spec`,
/// `spec.template.spec`) and the pool kinds (`spec.template`, `spec.template.spec.template`).
pub(super) trait ContainerFixture: Sized {
    fn settings(&mut self) -> SettingsMut<'_>;

    fn custom_image(mut self, image: &str) -> Self {
        *self.settings().custom_image = image.into();
        self
    }

    fn pre_load(mut self, images: &[&str]) -> Self {
        *self.settings().pre_load_images = images.iter().map(|i| (*i).into()).collect();
        self
    }

    fn mounts(mut self, mounts: &[(&str, &str)]) -> Self {
        *self.settings().extra_mounts = mounts
            .iter()
            .map(|(container, host)| Mount {
                container_path: (*container).into(),
                host_path: (*host).into(),
                read_only: false,
            })
            .collect();
        self
    }
}

impl ContainerFixture for DockerMachine {
    fn settings(&mut self) -> SettingsMut<'_> {
        (&mut self.spec).into()
    }
}

impl ContainerFixture for DockerMachineTemplate {
    fn settings(&mut self) -> SettingsMut<'_> {
        (&mut self.spec.template.spec).into()
    }
}

impl ContainerFixture for DockerMachinePool {
    fn settings(&mut self) -> SettingsMut<'_> {
        (&mut self.spec.template).into()
    }
}

impl ContainerFixture for DockerMachinePoolTemplate {
    fn settings(&mut self) -> SettingsMut<'_> {
        (&mut self.spec.template.spec.template).into()
    }
}

/// A DockerMachine's bootstrap timeout.
pub(super) trait BootstrapFixture: Sized {
    fn bootstrap_timeout(self, timeout: &str) -> Self;
}

impl BootstrapFixture for DockerMachine {
    fn bootstrap_timeout(mut self, timeout: &str) -> Self {
        self.spec.bootstrap_timeout = Some(timeout.into());
        self
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

/// MetaFixture for template kinds, which all keep `spec.template.metadata`.
macro_rules! template_meta_fixtures {
    ($($kind:ty),+ $(,)?) => {$(
        impl MetaFixture for $kind {
            fn object_annotations(&mut self) -> &mut BTreeMap<String, String> {
                self.metadata.annotations.get_or_insert_with(BTreeMap::new)
            }
            fn template_meta(&mut self) -> &mut crate::api::v1beta2::TemplateObjectMeta {
                &mut self.spec.template.metadata
            }
        }
    )+};
}

template_meta_fixtures!(
    DockerClusterTemplate,
    DockerMachineTemplate,
    DockerMachinePoolTemplate,
    DevClusterTemplate,
    DevMachineTemplate,
    DevMachinePoolTemplate,
);

/// The update rules both machine template kinds share, from `stored` (image
/// `kindest/node:v1.31.0`): the template spec is immutable (`immutable`: the message naming the
/// changed customImage and preLoadImages), except in the topology controller's dry runs, which
/// are still checked (`image_path`: where customImage sits). Template metadata may change.
pub(super) fn template_update_rules<T: ContainerFixture + MetaFixture + Clone>(
    stored: &T,
    validate: impl Fn(&T, Option<&T>, &Context) -> Vec<FieldError>,
    immutable: &str,
    image_path: &str,
) {
    let update = |case: &str, new: T, context: Context, expected: &[&str]| {
        check(case, validate(&new, Some(stored), &context), expected);
    };
    let changed = || {
        stored
            .clone()
            .custom_image("kindest/node:v1.32.0")
            .pre_load(&["nginx"])
    };
    update("unchanged", stored.clone(), Context::default(), &[]);
    update(
        "template metadata may change",
        stored.clone().template_annotation("note", "x"),
        Context::default(),
        &[],
    );
    update(
        "spec change refused, naming what changed",
        changed(),
        Context::default(),
        &[immutable],
    );
    update(
        "spec change in a topology dry run allowed",
        changed().topology_dry_run(),
        dry_run(),
        &[],
    );
    update(
        "a dry run that changes the spec to something broken is still refused for that",
        stored
            .clone()
            .custom_image("kindest/Node")
            .topology_dry_run(),
        dry_run(),
        &[&format!(
            "{image_path}: Invalid value: \"kindest/Node\": must be an image reference \
             ([registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"): the \
             repository name must be lowercase (\"Node\")"
        )],
    );
    update(
        "a plain dry run is still checked",
        changed(),
        dry_run(),
        &[immutable],
    );
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
