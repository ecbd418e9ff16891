use super::*;
use crate::webhooks::rules::{validate_docker_machine, validate_docker_machine_template};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn docker_machine_create_accepts_sane_specs() {
    let sane = [
        ("empty", DockerMachine::test()),
        (
            "plain image",
            DockerMachine::test().custom_image("kindest/node:v1.31.0"),
        ),
        (
            "image with registry port, tag and digest",
            DockerMachine::test()
                .custom_image(&format!("localhost:5000/kindest/node:v1.31.0@{DIGEST}")),
        ),
        (
            "IPv6 registry",
            DockerMachine::test().custom_image("[fd00::1]:5000/node:dev"),
        ),
        (
            "preloaded images",
            DockerMachine::test().pre_load(&[
                "nginx",
                "docker.io/library/busybox:1.36",
                "ghcr.io/a/b_c__d-e.f:x",
            ]),
        ),
        (
            "mounts",
            DockerMachine::test().mounts(&[
                ("/var/run/docker.sock", "/var/run/docker.sock"),
                ("/data", "/srv/data"),
            ]),
        ),
        (
            "bootstrap timeout",
            DockerMachine::test().bootstrap_timeout("10m30s"),
        ),
    ];
    for (case, machine) in sane {
        check(case, validate_docker_machine(&machine, None), &[]);
    }
}

#[test]
fn docker_machine_create_refuses_broken_images() {
    let refused = [
        (
            DockerMachine::test().custom_image("kindest/Node:v1.31.0"),
            "spec.customImage: Invalid value: \"kindest/Node:v1.31.0\": must be an image \
             reference ([registry[:port]/]repository[:tag][@digest], e.g. \
             \"kindest/node:v1.31.0\"): the repository name must be lowercase (\"Node\")",
        ),
        (
            DockerMachine::test().custom_image("kindest/node:"),
            "spec.customImage: Invalid value: \"kindest/node:\": must be an image reference \
             ([registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"): the \
             tag \"\" must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or \
             '-'",
        ),
        (
            DockerMachine::test().custom_image("kindest//node"),
            "spec.customImage: Invalid value: \"kindest//node\": must be an image reference \
             ([registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"): the \
             repository name has an empty path component (\"//\" or a leading or trailing \"/\")",
        ),
        (
            DockerMachine::test().custom_image("kindest/node@sha256:abc"),
            "spec.customImage: Invalid value: \"kindest/node@sha256:abc\": must be an image \
             reference ([registry[:port]/]repository[:tag][@digest], e.g. \
             \"kindest/node:v1.31.0\"): the digest \"sha256:abc\" must be an algorithm and at \
             least 32 hex digits, e.g. \"sha256:\" followed by 64 hex digits",
        ),
        (
            DockerMachine::test().custom_image("kindest/node v1"),
            "spec.customImage: Invalid value: \"kindest/node v1\": must be an image reference \
             ([registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"): the \
             repository path component \"node v1\" may only contain lowercase letters, digits and \
             the separators '.', '_', '__' or '-' between them",
        ),
        (
            DockerMachine::test().pre_load(&["nginx", ""]),
            "spec.preLoadImages[1]: Invalid value: \"\": must be an image reference \
             ([registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"): must \
             not be empty",
        ),
    ];
    for (machine, expected) in refused {
        check(
            expected,
            validate_docker_machine(&machine, None),
            &[expected],
        );
    }
}

#[test]
fn docker_machine_create_refuses_broken_mounts_and_timeouts() {
    let refused: [(DockerMachine, &[&str]); 6] = [
        (
            DockerMachine::test().mounts(&[("var/lib/x", "/x")]),
            &[
                "spec.extraMounts[0].containerPath: Invalid value: \"var/lib/x\": must be an absolute path",
            ],
        ),
        (
            DockerMachine::test().mounts(&[("/x", "")]),
            &["spec.extraMounts[0].hostPath: Required value: an absolute path is required"],
        ),
        (
            DockerMachine::test().mounts(&[("/x", "/host:ro")]),
            &[
                "spec.extraMounts[0].hostPath: Invalid value: \"/host:ro\": must not contain ':' \
               (Docker bind mounts cannot express it)",
            ],
        ),
        (
            DockerMachine::test().mounts(&[("/data", "/a"), ("/data/", "/b")]),
            &[
                "spec.extraMounts[1].containerPath: Duplicate value: \"/data/\": \
               spec.extraMounts[0] already mounts this container path; each container path can \
               be mounted once",
            ],
        ),
        (
            DockerMachine::test().bootstrap_timeout("5 minutes"),
            &[
                "spec.bootstrapTimeout: Invalid value: \"5 minutes\": must be a duration such as 5m \
               or 90s: invalid duration \"5 minutes\": unknown unit \" minutes\" (use ns, us, ms, \
               s, m or h)",
            ],
        ),
        (
            DockerMachine::test().bootstrap_timeout("0s"),
            &[
                "spec.bootstrapTimeout: Invalid value: \"0s\": must be a duration such as 5m or \
               90s: must be longer than zero",
            ],
        ),
    ];
    for (machine, expected) in refused {
        check(
            expected[0],
            validate_docker_machine(&machine, None),
            expected,
        );
    }
}

#[test]
fn docker_machine_update() {
    let stored = DockerMachine::test()
        .custom_image("kindest/node:v1.31.0")
        .mounts(&[("relative", "/x")]);
    check(
        "unchanged",
        validate_docker_machine(&stored, Some(&stored)),
        &[],
    );
    check(
        "customImage is immutable",
        validate_docker_machine(
            &stored.clone().custom_image("kindest/node:v1.32.0"),
            Some(&stored),
        ),
        &["spec.customImage: Invalid value: \"kindest/node:v1.32.0\": field is immutable"],
    );
    check(
        "a stored bad mount does not block other edits",
        validate_docker_machine(&stored.clone().pre_load(&["nginx"]), Some(&stored)),
        &[],
    );
    check(
        "a new bad mount is refused",
        validate_docker_machine(
            &stored
                .clone()
                .mounts(&[("relative", "/x"), ("/ok", "also-relative")]),
            Some(&stored),
        ),
        &[
            "spec.extraMounts[1].hostPath: Invalid value: \"also-relative\": must be an absolute path",
        ],
    );
}

#[test]
fn docker_machine_template_create() {
    check(
        "sane template",
        validate_docker_machine_template(
            &DockerMachineTemplate::test()
                .custom_image("kindest/node:v1.31.0")
                .template_label("nodepool", "pool-1"),
            None,
            &Context::default(),
        ),
        &[],
    );
    check(
        "metadata and spec are checked",
        validate_docker_machine_template(
            &DockerMachineTemplate::test()
                .template_label("", "x")
                .mounts(&[("/a", "b")]),
            None,
            &Context::default(),
        ),
        &[
            "spec.template.metadata.labels: Invalid value: \"\": name part must be non-empty",
            "spec.template.spec.extraMounts[0].hostPath: Invalid value: \"b\": must be an absolute path",
        ],
    );
}

#[test]
fn docker_machine_template_update() {
    let stored = DockerMachineTemplate::test().custom_image("kindest/node:v1.31.0");
    template_update_rules(
        &stored,
        validate_docker_machine_template,
        "spec.template.spec: Invalid value: DockerMachineTemplate spec.template.spec field is \
         immutable. Please create a new resource instead. Changed: customImage, preLoadImages",
        "spec.template.spec.customImage",
    );
    let update = |case: &str, new: DockerMachineTemplate, context: Context, expected: &[&str]| {
        check(
            case,
            validate_docker_machine_template(&new, Some(&stored), &context),
            expected,
        );
    };
    update(
        "bad template metadata refused on update (as CAPD)",
        stored.clone().template_label("x", "y/z"),
        Context::default(),
        &[
            "spec.template.metadata.labels[x]: Invalid value: \"y/z\": a valid label must be an \
           empty string or consist of alphanumeric characters, '-', '_' or '.', and must start \
           and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', \
           regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ],
    );
}
