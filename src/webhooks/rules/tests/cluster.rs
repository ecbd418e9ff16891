use super::*;
use crate::webhooks::rules::{
    default_docker_cluster, default_docker_cluster_template, validate_docker_cluster,
    validate_docker_cluster_template,
};

#[test]
fn defaulting_sets_port_control_plane_and_sorts_failure_domains() {
    const SORTED: &[&str] = &["spec.failureDomains were sorted by name"];
    let cases: [(&str, DockerCluster, DockerCluster, &[&str]); 4] = [
        (
            "empty spec gets port 6443",
            DockerCluster::test(),
            DockerCluster::test().port(6443),
            &[],
        ),
        (
            "a given port is kept",
            DockerCluster::test().port(7443),
            DockerCluster::test().port(7443),
            &[],
        ),
        (
            "controlPlane defaults to false, set values are kept",
            DockerCluster::test().failure_domains(&[("fd1", Some(true)), ("fd2", None)]),
            DockerCluster::test()
                .port(6443)
                .failure_domains(&[("fd1", Some(true)), ("fd2", Some(false))]),
            &[],
        ),
        (
            "unsorted failure domains are sorted, with a warning",
            DockerCluster::test().failure_domains(&[
                ("fd3", None),
                ("fd1", Some(true)),
                ("fd2", Some(false)),
            ]),
            DockerCluster::test().port(6443).failure_domains(&[
                ("fd1", Some(true)),
                ("fd2", Some(false)),
                ("fd3", Some(false)),
            ]),
            SORTED,
        ),
    ];
    for (case, mut given, expected, warnings) in cases {
        assert_eq!(
            default_docker_cluster(&mut given),
            warnings,
            "case {case:?}"
        );
        assert_eq!(given, expected, "case {case:?}");
    }

    let mut template = DockerClusterTemplate::test().failure_domains(&[("b", None), ("a", None)]);
    assert_eq!(
        default_docker_cluster_template(&mut template),
        ["spec.template.spec.failureDomains were sorted by name"]
    );
    assert_eq!(
        template,
        DockerClusterTemplate::test()
            .port(6443)
            .failure_domains(&[("a", Some(false)), ("b", Some(false))]),
        "the template's spec.template.spec is defaulted like a DockerCluster"
    );
}

#[test]
fn docker_cluster_validation() {
    let create = |case: &str, cluster: DockerCluster, expected: &[&str]| {
        check(case, validate_docker_cluster(&cluster, None), expected);
    };
    create("empty", DockerCluster::test(), &[]);
    create(
        "sorted failure domains",
        DockerCluster::test().failure_domains(&[("fd1", None), ("fd2", None)]),
        &[],
    );
    create(
        "unsorted failure domains",
        DockerCluster::test().failure_domains(&[("fd2", None), ("fd1", None)]),
        &[
            r#"spec.failureDomains: Invalid value: ["fd2","fd1"]: failure domains must be sorted by name"#,
        ],
    );
    create(
        "load balancer image from a mirror with a port",
        DockerCluster::test().lb_image("registry.example.com:5000/mirror/", "v20230606-42a2262b"),
        &[],
    );
    create(
        "custom haproxy template",
        DockerCluster::test().haproxy_template("my-haproxy"),
        &[],
    );
    create(
        "uppercase repository and bad tag",
        DockerCluster::test().lb_image("kindest/Mirror", ".v1"),
        &[
            "spec.loadBalancer.imageRepository: Invalid value: \"kindest/Mirror\": must be a \
             registry and repository prefix such as \"kindest\" or \
             \"registry.example.com:5000/mirror\" (the image is \
             <imageRepository>/haproxy:<imageTag>): the repository name must be lowercase \
             (\"Mirror\")",
            "spec.loadBalancer.imageTag: Invalid value: \".v1\": the tag \".v1\" must be 1 to 128 \
             letters, digits, '_', '.' or '-', not starting with '.' or '-'",
        ],
    );
    create(
        "repository with a tag in it",
        DockerCluster::test().lb_image("kindest:v1", ""),
        &[
            "spec.loadBalancer.imageRepository: Invalid value: \"kindest:v1\": must be a registry \
           and repository prefix such as \"kindest\" or \"registry.example.com:5000/mirror\" (the \
           image is <imageRepository>/haproxy:<imageTag>): the registry \"kindest:v1\" has an \
           invalid port (digits expected after ':')",
        ],
    );
    create(
        "haproxy template name that no ConfigMap can have",
        DockerCluster::test().haproxy_template("My_Template"),
        &[
            "spec.loadBalancer.customHAProxyConfigTemplateRef.name: Invalid value: \
           \"My_Template\": must be the name of a ConfigMap: a lowercase RFC 1123 subdomain must \
           consist of lower case alphanumeric characters, '-' or '.', and must start and end with \
           an alphanumeric character (e.g. 'example.com', regex used for validation is \
           '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ],
    );
}

#[test]
fn docker_cluster_update_blames_only_what_changes() {
    let stored = DockerCluster::test().lb_image("", "-bad");
    check(
        "a bad tag stored before the check existed does not block other edits",
        validate_docker_cluster(&stored.clone().port(7443), Some(&stored)),
        &[],
    );
    check(
        "changing it to another bad tag is refused",
        validate_docker_cluster(&DockerCluster::test().lb_image("", "-worse"), Some(&stored)),
        &[
            "spec.loadBalancer.imageTag: Invalid value: \"-worse\": the tag \"-worse\" must be 1 to \
           128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
        ],
    );
    let unsorted = DockerCluster::test().failure_domains(&[("b", None), ("a", None)]);
    check(
        "failure domain order is checked on update too (as CAPD)",
        validate_docker_cluster(&unsorted, Some(&unsorted)),
        &[
            r#"spec.failureDomains: Invalid value: ["b","a"]: failure domains must be sorted by name"#,
        ],
    );
}

pub(super) const GATE_OFF: &str = "spec: Forbidden: can be set only if the ClusterTopology feature flag is \
    enabled (start the manager with --feature-gates=ClusterTopology=true, e.g. run `export \
    CLUSTER_TOPOLOGY=true` before `clusterctl init`)";

#[test]
fn docker_cluster_template_create() {
    let create =
        |case: &str, template: DockerClusterTemplate, context: Context, expected: &[&str]| {
            check(
                case,
                validate_docker_cluster_template(&template, None, &context),
                expected,
            );
        };
    create(
        "refused without the ClusterTopology gate",
        DockerClusterTemplate::test(),
        Context::default(),
        &[GATE_OFF],
    );
    create(
        "allowed with the gate",
        DockerClusterTemplate::test()
            .template_label("cluster.x-k8s.io/role", "infra")
            .template_annotation("example.com/Note", "anything goes here"),
        topology_on(),
        &[],
    );
    create(
        "unsorted failure domains",
        DockerClusterTemplate::test().failure_domains(&[("b", None), ("a", None)]),
        topology_on(),
        &[
            r#"spec.template.spec.failureDomains: Invalid value: ["b","a"]: failure domains must be sorted by name"#,
        ],
    );
    create(
        "bad label key, bad label value",
        DockerClusterTemplate::test()
            .template_label("a/b/c", "ok")
            .template_label("app", "-web"),
        topology_on(),
        &[
            "spec.template.metadata.labels: Invalid value: \"a/b/c\": a qualified name must \
             consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for \
             validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS \
             subdomain prefix and '/' (e.g. 'example.com/MyName')",
            "spec.template.metadata.labels[app]: Invalid value: \"-web\": a valid label must be \
             an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
             start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or \
             '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ],
    );
    create(
        "bad annotation key prefix",
        DockerClusterTemplate::test().template_annotation("Example_com/note", "x"),
        topology_on(),
        &[
            "spec.template.metadata.annotations: Invalid value: \"Example_com/note\": prefix part a \
           lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
           '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
           used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ],
    );
    create(
        "annotations over 256 KiB",
        DockerClusterTemplate::test().template_annotation("big", &"x".repeat(256 * 1024)),
        topology_on(),
        &["spec.template.metadata.annotations: Too long: may not be more than 262144 bytes"],
    );
}

#[test]
fn docker_cluster_template_update() {
    let stored = DockerClusterTemplate::test().lb_image("kindest", "v1");
    let update = |case: &str, new: DockerClusterTemplate, context: Context, expected: &[&str]| {
        check(
            case,
            validate_docker_cluster_template(&new, Some(&stored), &context),
            expected,
        );
    };
    let immutable = "spec.template.spec: Invalid value: DockerClusterTemplate spec.template.spec \
        field is immutable. Please create a new resource instead. Changed: loadBalancer.imageTag";
    update(
        "unchanged, even without the gate (it guards creation only)",
        stored.clone(),
        Context::default(),
        &[],
    );
    update(
        "defaulted port equals the stored template without one",
        stored.clone().port(6443),
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
        stored.clone().lb_image("kindest", "v2"),
        topology_on(),
        &[immutable],
    );
    update(
        "spec change in a topology dry run allowed",
        stored.clone().lb_image("kindest", "v2").topology_dry_run(),
        dry_run(),
        &[],
    );
    update(
        "a plain server-side dry run is still checked",
        stored.clone().lb_image("kindest", "v2"),
        dry_run(),
        &[immutable],
    );
    update(
        "the dry-run annotation without a dry run is still checked",
        stored.clone().lb_image("kindest", "v2").topology_dry_run(),
        topology_on(),
        &[immutable],
    );
    update(
        "new bad template metadata refused",
        stored.clone().template_label("app", "no spaces"),
        topology_on(),
        &[
            "spec.template.metadata.labels[app]: Invalid value: \"no spaces\": a valid label must \
           be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
           start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or \
           '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ],
    );
}
