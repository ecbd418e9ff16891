use serde_json::json;

use crate::webhooks::field::{FieldError, invalid_status};
use crate::webhooks::meta::{label_value_problems, qualified_name_problems};
use crate::webhooks::reference::{reference_problem, repository_problem, tag_problem};
use crate::webhooks::{Endpoint, Kind};

#[test]
fn image_references_that_docker_accepts() {
    let digest = format!("sha256:{}", "a".repeat(64));
    let valid = [
        "nginx".to_string(),
        "nginx:1.27".into(),
        "library/nginx:latest".into(),
        "docker.io/library/nginx".into(),
        "kindest/node:v1.31.0".into(),
        format!("kindest/node:v1.31.0@{digest}"),
        format!("kindest/node@{digest}"),
        "localhost/node:dev".into(),
        "localhost:5000/node:dev".into(),
        "registry.example.com:5000/team/app/sub:tag_1.2-3".into(),
        "Registry.Example.com/app".into(),
        "[fd00::1]/app".into(),
        "[fd00::1]:5000/app:v1".into(),
        "a__b/c-d--e/f.g_h:x".into(),
        "gcr.io/k8s-staging-cluster-api/capd-manager:main".into(),
    ];
    for reference in valid {
        assert_eq!(reference_problem(&reference), None, "{reference}");
    }
}

#[test]
fn image_references_that_docker_refuses() {
    let invalid = [
        ("", "must not be empty"),
        ("nginx:", "the tag \"\" must be"),
        (":v1", "the repository name must not be empty"),
        ("Nginx", "the repository name must be lowercase (\"Nginx\")"),
        ("nginx:-v1", "the tag \"-v1\" must be"),
        ("nginx@sha256:12", "the digest \"sha256:12\" must be"),
        ("nginx@", "the digest \"\" must be"),
        ("a/-b", "the repository path component \"-b\""),
        ("a/b_", "the repository path component \"b_\""),
        ("a/b___c", "the repository path component \"b___c\""),
        ("a/b.-c", "the repository path component \"b.-c\""),
        ("/nginx", "empty path component"),
        ("nginx/", "empty path component"),
        (
            "reg:port/app",
            "the registry \"reg:port\" has an invalid port",
        ),
        (
            "[::zz]/app",
            "the registry \"[::zz]\" has an invalid IPv6 address",
        ),
        (
            "[fd00::1/app",
            "the registry \"[fd00::1\" lacks a closing ']'",
        ),
        (
            "bad_host.com:5000/app",
            "the registry host \"bad_host.com\" must be a DNS name",
        ),
        ("ngi nx", "the repository path component \"ngi nx\""),
    ];
    for (reference, fragment) in invalid {
        let problem = reference_problem(reference).unwrap_or_default();
        assert!(problem.contains(fragment), "{reference:?}: {problem:?}");
    }
    let long = format!("{}/app", "a".repeat(255));
    assert_eq!(
        repository_problem(&long).as_deref(),
        Some("the repository name must not be more than 255 characters")
    );
    assert!(tag_problem(&"t".repeat(128)).is_none());
    assert!(tag_problem(&"t".repeat(129)).is_some());
}

#[test]
fn qualified_names_and_label_values() {
    for valid in [
        "app",
        "app.kubernetes.io/name",
        "A_b-C.d",
        "x/y",
        &"n".repeat(63),
    ] {
        assert!(qualified_name_problems(valid).is_empty(), "{valid}");
    }
    let invalid = [
        ("", vec!["name part must be non-empty"]),
        ("/x", vec!["prefix part must be non-empty"]),
        ("x/", vec!["name part must be non-empty"]),
        (
            "-x",
            vec!["name part must consist of alphanumeric characters"],
        ),
        (
            "Example.com/x",
            vec!["prefix part a lowercase RFC 1123 subdomain must consist"],
        ),
        (
            "a..b/x",
            vec!["prefix part a lowercase RFC 1123 subdomain must consist"],
        ),
        ("a/b/c", vec!["a qualified name must consist"]),
        (
            &"n".repeat(64),
            vec!["name part must be no more than 63 characters"],
        ),
    ];
    for (name, fragments) in invalid {
        let problems = qualified_name_problems(name);
        assert_eq!(problems.len(), fragments.len(), "{name:?}: {problems:?}");
        for (problem, fragment) in problems.iter().zip(fragments) {
            assert!(problem.starts_with(fragment), "{name:?}: {problem}");
        }
    }
    let long_prefix = format!("{}/x", "a".repeat(254));
    assert_eq!(
        qualified_name_problems(&long_prefix),
        ["prefix part must be no more than 253 characters"]
    );
    for valid in ["", "v1", "a-b_c.d", &"v".repeat(63)] {
        assert!(label_value_problems(valid).is_empty(), "{valid:?}");
    }
    for invalid in ["-a", "a-", "a b", "a/b"] {
        assert_eq!(label_value_problems(invalid).len(), 1, "{invalid:?}");
    }
    assert_eq!(
        label_value_problems(&"v".repeat(64)),
        ["must be no more than 63 characters"]
    );
}

#[test]
fn field_errors_read_like_kubectl_output() {
    let cases = [
        (
            FieldError::invalid("spec.customImage", "x", "field is immutable"),
            "spec.customImage: Invalid value: \"x\": field is immutable",
        ),
        (
            FieldError::invalid("spec.port", 7, "must be below 100"),
            "spec.port: Invalid value: 7: must be below 100",
        ),
        (
            FieldError::invalid("spec.list", json!(["b", "a"]), "must be sorted"),
            "spec.list: Invalid value: [\"b\",\"a\"]: must be sorted",
        ),
        (
            FieldError::forbidden("spec", "not now"),
            "spec: Forbidden: not now",
        ),
        (
            FieldError::required("spec.x", "set it"),
            "spec.x: Required value: set it",
        ),
        (
            FieldError::duplicate("spec.x[1]", "/a"),
            "spec.x[1]: Duplicate value: \"/a\"",
        ),
        (
            FieldError::too_long("metadata.annotations", 10),
            "metadata.annotations: Too long: may not be more than 10 bytes",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
    let one = invalid_status(
        "DockerCluster",
        "c1",
        &[FieldError::forbidden("spec", "no")],
    );
    assert_eq!(
        one.message.as_deref(),
        Some(
            "DockerCluster.infrastructure.cluster.x-k8s.io \"c1\" is invalid: spec: Forbidden: no"
        )
    );
    let two = invalid_status(
        "DockerCluster",
        "",
        &[
            FieldError::forbidden("spec.a", "no"),
            FieldError::required("spec.b", "yes"),
        ],
    );
    assert_eq!(
        two.message.as_deref(),
        Some(
            "DockerCluster.infrastructure.cluster.x-k8s.io \"\" is invalid: [spec.a: Forbidden: \
             no, spec.b: Required value: yes]"
        )
    );
}

#[test]
fn endpoint_paths_are_capds() {
    let paths: Vec<String> = Endpoint::ALL.iter().map(|e| e.path()).collect();
    assert_eq!(
        paths,
        [
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-dockercluster",
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-dockerclustertemplate",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockercluster",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockerclustertemplate",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockermachine",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockermachinetemplate",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockermachinepool",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-dockermachinepooltemplate",
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-devcluster",
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-devclustertemplate",
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-devmachine",
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-devmachinetemplate",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-devcluster",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-devclustertemplate",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-devmachine",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-devmachinetemplate",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-devmachinepool",
            "/validate-infrastructure-cluster-x-k8s-io-v1beta2-devmachinepooltemplate",
        ]
    );
    assert_eq!(Kind::DevMachineTemplate.plural(), "devmachinetemplates");
    assert_eq!(
        Kind::DevMachinePoolTemplate.plural(),
        "devmachinepooltemplates"
    );
    assert_eq!(
        Kind::DockerMachineTemplate.plural(),
        "dockermachinetemplates"
    );
    assert_eq!(
        Kind::DockerMachinePoolTemplate.plural(),
        "dockermachinepooltemplates"
    );
}
