use super::*;
use crate::api::v1beta2::DockerMachinePoolBackendSpec;
use crate::webhooks::rules::{
    validate_dev_machine_pool, validate_dev_machine_pool_template, validate_docker_machine_pool,
    validate_docker_machine_pool_template,
};

const BAD_IMAGE: &str = "must be an image reference ([registry[:port]/]repository[:tag][@digest], \
                         e.g. \"kindest/node:v1.31.0\"): the repository name must be lowercase \
                         (\"Node\")";

#[test]
fn docker_machine_pool_create() {
    for (case, pool) in [
        (
            "empty, as CAPD's machine-pool example",
            DockerMachinePool::test(),
        ),
        (
            "image, preloads and the docker socket mount",
            DockerMachinePool::test()
                .custom_image("kindest/node:v1.31.0")
                .pre_load(&["nginx"])
                .mounts(&[("/var/run/docker.sock", "/var/run/docker.sock")]),
        ),
    ] {
        check(case, validate_docker_machine_pool(&pool, None), &[]);
    }
    check(
        "every container setting is checked, under spec.template",
        validate_docker_machine_pool(
            &DockerMachinePool::test()
                .custom_image("kindest/Node:v1.31.0")
                .pre_load(&["nginx", ""])
                .mounts(&[("/a", "relative"), ("/a/", "/b")]),
            None,
        ),
        &[
            &format!(
                "spec.template.customImage: Invalid value: \"kindest/Node:v1.31.0\": {BAD_IMAGE}"
            ),
            "spec.template.preLoadImages[1]: Invalid value: \"\": must be an image reference \
             ([registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"): must \
             not be empty",
            "spec.template.extraMounts[0].hostPath: Invalid value: \"relative\": must be an \
             absolute path",
            "spec.template.extraMounts[1].containerPath: Duplicate value: \"/a/\": \
             spec.template.extraMounts[0] already mounts this container path; each container \
             path can be mounted once",
        ],
    );
}

#[test]
fn docker_machine_pool_update() {
    let stored = DockerMachinePool::test().custom_image("kindest/node:v1.31.0");
    check(
        "the image may change: that is how a pool rolls out",
        validate_docker_machine_pool(
            &stored.clone().custom_image("kindest/node:v1.32.0"),
            Some(&stored),
        ),
        &[],
    );
    let broken = DockerMachinePool::test().mounts(&[("relative", "/x")]);
    check(
        "a problem stored before the checks existed does not block other edits",
        validate_docker_machine_pool(
            &broken.clone().custom_image("kindest/node:v1.32.0"),
            Some(&broken),
        ),
        &[],
    );
    check(
        "a problem the update brings is refused",
        validate_docker_machine_pool(&stored.clone().custom_image("kindest/Node"), Some(&stored)),
        &[&format!(
            "spec.template.customImage: Invalid value: \"kindest/Node\": {BAD_IMAGE}"
        )],
    );
}

#[test]
fn docker_machine_pool_template_create() {
    check(
        "CAPD's quick-start template (`template: {}`)",
        validate_docker_machine_pool_template(
            &DockerMachinePoolTemplate::test(),
            None,
            &Context::default(),
        ),
        &[],
    );
    check(
        "metadata and container settings are checked",
        validate_docker_machine_pool_template(
            &DockerMachinePoolTemplate::test()
                .template_label("", "x")
                .mounts(&[("/a", "b")]),
            None,
            &Context::default(),
        ),
        &[
            "spec.template.metadata.labels: Invalid value: \"\": name part must be non-empty",
            "spec.template.spec.template.extraMounts[0].hostPath: Invalid value: \"b\": must be \
             an absolute path",
        ],
    );
}

#[test]
fn docker_machine_pool_template_update() {
    template_update_rules(
        &DockerMachinePoolTemplate::test().custom_image("kindest/node:v1.31.0"),
        validate_docker_machine_pool_template,
        "spec.template.spec: Invalid value: DockerMachinePoolTemplate spec.template.spec field \
         is immutable. Please create a new resource instead. Changed: template.customImage, \
         template.preLoadImages",
        "spec.template.spec.template.customImage",
    );
}

impl<'a> From<&'a mut DockerMachinePoolBackendSpec> for SettingsMut<'a> {
    fn from(docker: &'a mut DockerMachinePoolBackendSpec) -> Self {
        Self {
            custom_image: &mut docker.custom_image,
            pre_load_images: &mut docker.pre_load_images,
            extra_mounts: &mut docker.extra_mounts,
        }
    }
}

impl ContainerFixture for DevMachinePool {
    fn settings(&mut self) -> SettingsMut<'_> {
        self.spec
            .backend
            .docker
            .get_or_insert_with(Default::default)
            .into()
    }
}

impl ContainerFixture for DevMachinePoolTemplate {
    fn settings(&mut self) -> SettingsMut<'_> {
        self.spec
            .template
            .spec
            .backend
            .docker
            .get_or_insert_with(Default::default)
            .into()
    }
}

#[test]
fn dev_machine_pool_gets_the_docker_pool_rules_at_the_dev_path() {
    check(
        "no backend: nothing to check (CAPD 1.14 accepts it; the controller reports it)",
        validate_dev_machine_pool(&DevMachinePool::test(), None),
        &[],
    );
    check(
        "the quick start's `backend: {docker: {}}`",
        validate_dev_machine_pool(&DevMachinePool::test().custom_image(""), None),
        &[],
    );
    check(
        "every container setting is checked, under spec.backend.docker",
        validate_dev_machine_pool(
            &DevMachinePool::test()
                .custom_image("kindest/Node:v1.31.0")
                .mounts(&[("/a", "relative")]),
            None,
        ),
        &[
            &format!(
                "spec.backend.docker.customImage: Invalid value: \"kindest/Node:v1.31.0\": \
                 {BAD_IMAGE}"
            ),
            "spec.backend.docker.extraMounts[0].hostPath: Invalid value: \"relative\": must be \
             an absolute path",
        ],
    );
    let stored = DevMachinePool::test().custom_image("kindest/node:v1.31.0");
    check(
        "the image may change: that is how a pool rolls out",
        validate_dev_machine_pool(
            &stored.clone().custom_image("kindest/node:v1.32.0"),
            Some(&stored),
        ),
        &[],
    );
    let broken = DevMachinePool::test().mounts(&[("relative", "/x")]);
    check(
        "a problem stored before does not block other edits",
        validate_dev_machine_pool(&broken.clone().pre_load(&["nginx"]), Some(&broken)),
        &[],
    );
    check(
        "the docker backend is not removed from a pool that has one",
        validate_dev_machine_pool(&DevMachinePool::test(), Some(&stored)),
        &[
            "spec.backend.docker: Forbidden: the docker backend cannot be removed: the pool's \
           containers would be left behind; delete the pool instead",
        ],
    );
}

#[test]
fn dev_machine_pool_template_create_and_update() {
    check(
        "CAPD 1.14's quick-start template (`backend: {docker: {}}`)",
        validate_dev_machine_pool_template(
            &DevMachinePoolTemplate::test().custom_image(""),
            None,
            &Context::default(),
        ),
        &[],
    );
    template_update_rules(
        &DevMachinePoolTemplate::test().custom_image("kindest/node:v1.31.0"),
        validate_dev_machine_pool_template,
        "spec.template.spec: Invalid value: DevMachinePoolTemplate spec.template.spec field is \
         immutable. Please create a new resource instead. Changed: backend.docker.customImage, \
         backend.docker.preLoadImages",
        "spec.template.spec.backend.docker.customImage",
    );
}
