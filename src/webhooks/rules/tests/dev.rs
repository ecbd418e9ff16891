//! The Dev* kinds: the backend default and check, and the Docker rules at the Dev paths.

use super::cluster::GATE_OFF;
use super::*;
use crate::api::v1beta2::{
    DevClusterSpec, DevMachineBackendSpec, DockerClusterBackendSpec, DockerMachineBackendSpec,
    InMemoryClusterBackendSpec, InMemoryMachineBackendSpec,
};
use crate::webhooks::rules::{
    default_dev_cluster, default_dev_cluster_template, default_dev_machine,
    default_dev_machine_template, validate_dev_cluster, validate_dev_cluster_template,
    validate_dev_machine, validate_dev_machine_template,
};

const BOTH_BACKENDS: &str =
    "spec.backend: Forbidden: docker and inMemory are both set: set only one backend";

/// Edits of a DevCluster spec (the DevCluster's, or the template's `spec.template.spec`).
trait DevClusterFixture: Sized {
    fn dev_spec(&mut self) -> &mut DevClusterSpec;

    fn port(mut self, port: i32) -> Self {
        self.dev_spec().control_plane_endpoint.port = port;
        self
    }

    fn docker(mut self) -> Self {
        self.dev_spec()
            .backend
            .docker
            .get_or_insert_with(Default::default);
        self
    }

    fn in_memory(mut self) -> Self {
        self.dev_spec().backend.in_memory = Some(InMemoryClusterBackendSpec {});
        self
    }

    fn failure_domains(mut self, domains: &[(&str, Option<bool>)]) -> Self {
        let docker = self
            .dev_spec()
            .backend
            .docker
            .get_or_insert_with(DockerClusterBackendSpec::default);
        docker.failure_domains = domains
            .iter()
            .map(|(name, control_plane)| FailureDomain {
                name: (*name).into(),
                control_plane: *control_plane,
                ..Default::default()
            })
            .collect();
        self
    }

    fn lb_tag(mut self, tag: &str) -> Self {
        let docker = self
            .dev_spec()
            .backend
            .docker
            .get_or_insert_with(DockerClusterBackendSpec::default);
        docker.load_balancer.image_tag = tag.into();
        self
    }
}

impl DevClusterFixture for DevCluster {
    fn dev_spec(&mut self) -> &mut DevClusterSpec {
        &mut self.spec
    }
}

impl DevClusterFixture for DevClusterTemplate {
    fn dev_spec(&mut self) -> &mut DevClusterSpec {
        &mut self.spec.template.spec
    }
}

/// A DevMachine spec's backend.
trait DevMachineFixture: Sized {
    fn backend(&mut self) -> &mut DevMachineBackendSpec;

    fn in_memory(mut self) -> Self {
        self.backend().in_memory = Some(InMemoryMachineBackendSpec::default());
        self
    }

    fn docker(mut self) -> Self {
        self.backend().docker.get_or_insert_with(Default::default);
        self
    }
}

impl DevMachineFixture for DevMachine {
    fn backend(&mut self) -> &mut DevMachineBackendSpec {
        &mut self.spec.backend
    }
}

impl DevMachineFixture for DevMachineTemplate {
    fn backend(&mut self) -> &mut DevMachineBackendSpec {
        &mut self.spec.template.spec.backend
    }
}

impl<'a> From<&'a mut DockerMachineBackendSpec> for SettingsMut<'a> {
    fn from(docker: &'a mut DockerMachineBackendSpec) -> Self {
        Self {
            custom_image: &mut docker.custom_image,
            pre_load_images: &mut docker.pre_load_images,
            extra_mounts: &mut docker.extra_mounts,
        }
    }
}

impl ContainerFixture for DevMachine {
    fn settings(&mut self) -> SettingsMut<'_> {
        self.backend()
            .docker
            .get_or_insert_with(Default::default)
            .into()
    }
}

impl ContainerFixture for DevMachineTemplate {
    fn settings(&mut self) -> SettingsMut<'_> {
        self.backend()
            .docker
            .get_or_insert_with(Default::default)
            .into()
    }
}

impl BootstrapFixture for DevMachine {
    fn bootstrap_timeout(mut self, timeout: &str) -> Self {
        self.backend()
            .docker
            .get_or_insert_with(Default::default)
            .bootstrap_timeout = Some(timeout.into());
        self
    }
}

#[test]
fn dev_cluster_defaulting_picks_docker_then_defaults_it_like_a_docker_cluster() {
    let cases: [(&str, DevCluster, DevCluster, &[&str]); 4] = [
        (
            "no backend: docker, port 6443",
            DevCluster::test(),
            DevCluster::test().docker().port(6443),
            &[],
        ),
        (
            "docker failure domains defaulted and sorted, with a warning at the Dev path",
            DevCluster::test()
                .port(7443)
                .failure_domains(&[("fd2", None), ("fd1", Some(true))]),
            DevCluster::test()
                .port(7443)
                .failure_domains(&[("fd1", Some(true)), ("fd2", Some(false))]),
            &["spec.backend.docker.failureDomains were sorted by name"],
        ),
        (
            "in-memory only: left alone (no docker, no port)",
            DevCluster::test().in_memory(),
            DevCluster::test().in_memory(),
            &[],
        ),
        (
            "both: docker defaulted, in-memory kept (validation refuses the pair)",
            DevCluster::test().docker().in_memory(),
            DevCluster::test().docker().in_memory().port(6443),
            &[],
        ),
    ];
    for (case, mut given, expected, warnings) in cases {
        assert_eq!(default_dev_cluster(&mut given), warnings, "case {case:?}");
        assert_eq!(given, expected, "case {case:?}");
    }

    let mut template = DevClusterTemplate::test().failure_domains(&[("b", None), ("a", None)]);
    assert_eq!(
        default_dev_cluster_template(&mut template),
        ["spec.template.spec.backend.docker.failureDomains were sorted by name"]
    );
    assert_eq!(
        template,
        DevClusterTemplate::test()
            .port(6443)
            .failure_domains(&[("a", Some(false)), ("b", Some(false))])
    );
    let mut bare = DevClusterTemplate::test();
    default_dev_cluster_template(&mut bare);
    assert_eq!(bare, DevClusterTemplate::test().docker().port(6443));
}

#[test]
fn dev_machine_defaulting_picks_docker_when_no_backend_is_set() {
    let mut machine = DevMachine::test();
    assert!(default_dev_machine(&mut machine).is_empty());
    assert_eq!(machine, DevMachine::test().docker());
    let mut in_memory = DevMachine::test().in_memory();
    default_dev_machine(&mut in_memory);
    assert_eq!(in_memory, DevMachine::test().in_memory());

    let mut template = DevMachineTemplate::test();
    assert!(default_dev_machine_template(&mut template).is_empty());
    assert_eq!(template, DevMachineTemplate::test().docker());
}

#[test]
fn dev_cluster_validation_names_dev_paths() {
    let create = |case: &str, cluster: DevCluster, expected: &[&str]| {
        check(case, validate_dev_cluster(&cluster, None), expected);
    };
    create("docker", DevCluster::test().docker().port(6443), &[]);
    create("in-memory only", DevCluster::test().in_memory(), &[]);
    create(
        "both backends",
        DevCluster::test().docker().in_memory(),
        &[BOTH_BACKENDS],
    );
    create(
        "unsorted failure domains",
        DevCluster::test().failure_domains(&[("b", None), ("a", None)]),
        &[
            "spec.backend.docker.failureDomains: Invalid value: [\"b\",\"a\"]: failure domains \
             must be sorted by name",
        ],
    );
    create(
        "broken load balancer tag",
        DevCluster::test().lb_tag("v1 beta"),
        &[
            "spec.backend.docker.loadBalancer.imageTag: Invalid value: \"v1 beta\": the tag \
             \"v1 beta\" must be 1 to 128 letters, digits, '_', '.' or '-', not starting with \
             '.' or '-'",
        ],
    );
    // Stored with both (before this rule, or by a client that skipped it): still editable.
    let stored = DevCluster::test().docker().in_memory();
    check(
        "both backends, already stored",
        validate_dev_cluster(&stored.clone().port(7443), Some(&stored)),
        &[],
    );
}

#[test]
fn dev_cluster_template_rules_are_docker_cluster_templates() {
    let template = DevClusterTemplate::test().docker();
    check(
        "gate off",
        validate_dev_cluster_template(&template, None, &Context::default()),
        &[GATE_OFF],
    );
    check(
        "unsorted, both backends",
        validate_dev_cluster_template(
            &template
                .clone()
                .failure_domains(&[("b", None), ("a", None)])
                .in_memory(),
            None,
            &topology_on(),
        ),
        &[
            "spec.template.spec.backend.docker.failureDomains: Invalid value: [\"b\",\"a\"]: \
             failure domains must be sorted by name",
            "spec.template.spec.backend: Forbidden: docker and inMemory are both set: set only \
             one backend",
        ],
    );
    let stored = DevClusterTemplate::test().docker().port(6443);
    let immutable = "spec.template.spec: Invalid value: DevClusterTemplate spec.template.spec \
                     field is immutable. Please create a new resource instead. Changed: \
                     backend.docker.loadBalancer";
    let update = |case: &str, new: DevClusterTemplate, context: Context, expected: &[&str]| {
        check(
            case,
            validate_dev_cluster_template(&new, Some(&stored), &context),
            expected,
        );
    };
    update(
        "the defaults are no change",
        DevClusterTemplate::test(),
        topology_on(),
        &[],
    );
    update(
        "template metadata may change",
        stored.clone().template_label("tier", "gold"),
        topology_on(),
        &[],
    );
    update(
        "spec change refused",
        stored.clone().lb_tag("v2"),
        topology_on(),
        &[immutable],
    );
    update(
        "spec change in a topology dry run allowed",
        stored.clone().lb_tag("v2").topology_dry_run(),
        dry_run(),
        &[],
    );
}

#[test]
fn dev_machine_validation_names_dev_paths() {
    let create = |case: &str, machine: DevMachine, expected: &[&str]| {
        check(case, validate_dev_machine(&machine, None), expected);
    };
    create(
        "docker",
        DevMachine::test().custom_image("kindest/node:v1.31.0"),
        &[],
    );
    create("in-memory only", DevMachine::test().in_memory(), &[]);
    create(
        "both backends",
        DevMachine::test().docker().in_memory(),
        &[BOTH_BACKENDS],
    );
    create(
        "broken mount and timeout",
        DevMachine::test()
            .mounts(&[("var/lib/x", "/x")])
            .bootstrap_timeout("0s"),
        &[
            "spec.backend.docker.extraMounts[0].containerPath: Invalid value: \"var/lib/x\": \
             must be an absolute path",
            "spec.backend.docker.bootstrapTimeout: Invalid value: \"0s\": must be a duration \
             such as 5m or 90s: must be longer than zero",
        ],
    );
    create(
        "broken preload image",
        DevMachine::test().pre_load(&["nginx:"]),
        &[
            "spec.backend.docker.preLoadImages[0]: Invalid value: \"nginx:\": must be an image \
             reference ([registry[:port]/]repository[:tag][@digest], e.g. \
             \"kindest/node:v1.31.0\"): the tag \"\" must be 1 to 128 letters, digits, '_', \
             '.' or '-', not starting with '.' or '-'",
        ],
    );
    let stored = DevMachine::test().custom_image("kindest/node:v1.31.0");
    check(
        "customImage is immutable",
        validate_dev_machine(
            &stored.clone().custom_image("kindest/node:v1.32.0"),
            Some(&stored),
        ),
        &[
            "spec.backend.docker.customImage: Invalid value: \"kindest/node:v1.32.0\": field is \
             immutable",
        ],
    );
    check(
        "preLoadImages may change",
        validate_dev_machine(&stored.clone().pre_load(&["nginx"]), Some(&stored)),
        &[],
    );
}

#[test]
fn dev_machine_template_update() {
    let stored = DevMachineTemplate::test().custom_image("kindest/node:v1.31.0");
    template_update_rules(
        &stored,
        validate_dev_machine_template,
        "spec.template.spec: Invalid value: DevMachineTemplate spec.template.spec field is \
         immutable. Please create a new resource instead. Changed: backend.docker.customImage, \
         backend.docker.preLoadImages",
        "spec.template.spec.backend.docker.customImage",
    );
    check(
        "both backends on creation",
        validate_dev_machine_template(
            &DevMachineTemplate::test().docker().in_memory(),
            None,
            &Context::default(),
        ),
        &[
            "spec.template.spec.backend: Forbidden: docker and inMemory are both set: set only \
           one backend",
        ],
    );
    let errors = validate_dev_machine_template(
        &DevMachineTemplate::test()
            .docker()
            .template_label("app", "-web"),
        None,
        &Context::default(),
    );
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["spec.template.metadata.labels[app]"]);
}

#[test]
fn the_backend_of_a_stored_object_cannot_change() {
    let docker = DevCluster::test().docker().port(6443);
    let in_memory = DevCluster::test().in_memory();
    check(
        "cluster: docker to inMemory",
        validate_dev_cluster(&in_memory, Some(&docker)),
        &[
            "spec.backend: Forbidden: the backend cannot change from docker to inMemory: what \
             the docker backend made would be left behind; create a new object instead",
        ],
    );
    check(
        "cluster: same backend, other settings",
        validate_dev_cluster(&docker.clone().port(7443), Some(&docker)),
        &[],
    );
    let machine = DevMachine::test().custom_image("kindest/node:v1.31.0");
    check(
        "machine: docker to inMemory",
        validate_dev_machine(&DevMachine::test().in_memory(), Some(&machine)),
        &[
            "spec.backend: Forbidden: the backend cannot change from docker to inMemory: what \
             the docker backend made would be left behind; create a new object instead",
        ],
    );
    check(
        "machine: inMemory to docker",
        validate_dev_machine(&machine, Some(&DevMachine::test().in_memory())),
        &[
            "spec.backend: Forbidden: the backend cannot change from inMemory to docker: what \
             the inMemory backend made would be left behind; create a new object instead",
        ],
    );
}
