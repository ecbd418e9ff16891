//! The e2e lane that runs the manager image as shipped (`capd_e2e::shipped`) keeps in step with
//! the rendered Deployment: its securityContext, mounts, args and env. When one of them changes,
//! this test names what the other lacks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use capd_e2e::shipped::{KUBECONFIG, Ports, ShippedRun};
use serde_json::Value;

use crate::packaging::variables::substitute;
use crate::packaging::*;

/// What the lane adds for running outside a pod: the kubeconfig stands in for the service account,
/// the ports move because the container shares the host's network, and this engine refuses
/// privileged node containers.
const LANE_ONLY_ARGS: [&str; 3] = ["--kubeconfig", "--health-addr", "--webhook-port"];
const LANE_ONLY_ENV: [&str; 1] = ["CAPD_RS_UNPRIVILEGED_CONTAINERS"];
/// Args whose port the lane picks (same flag, another port).
const MOVED_ADDRESS_ARGS: [&str; 1] = ["--diagnostics-address"];
const LANE_PLUMBING: [&str; 2] = ["--detach", "--network=host"];

/// The lane's `docker run` options and the manager's args, split at the image.
fn lane() -> (Vec<String>, Vec<String>) {
    let run = ShippedRun {
        name: "lane".into(),
        image: "capd-rs-manager:e2e".into(),
        kubeconfig: PathBuf::from("/host/kubeconfig"),
        cert_dir: PathBuf::from("/host/serving-certs"),
        namespace: "lane-ns".into(),
        network: "lane-net".into(),
        ports: Ports {
            health: 40001,
            webhook: 40002,
            diagnostics: 40003,
        },
        unprivileged: true,
        extra_args: Vec::new(),
        ca_bundle: None,
    };
    let all = run.docker_run_args();
    let at = all
        .iter()
        .position(|a| *a == run.image)
        .expect("the image in the docker run args");
    (all[..at].to_vec(), all[at + 1..].to_vec())
}

/// The Deployment's pod spec as `clusterctl init` renders it with the default variables.
fn pod() -> Value {
    let text = substitute(&built().text, &BTreeMap::new());
    parse_documents(&text)
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the Deployment")["spec"]["template"]["spec"]
        .clone()
}

/// The `docker run` options the securityContext asks for; unknown fields fail the test.
fn options_for(security: &Value) -> BTreeSet<String> {
    let mut options = BTreeSet::new();
    let (mut user, mut group) = (None, None);
    for (key, value) in security.as_object().expect("a securityContext") {
        match key.as_str() {
            "runAsUser" => user = value.as_i64(),
            "runAsGroup" => group = value.as_i64(),
            "runAsNonRoot" => assert_eq!(value, false, "the lane runs as uid 0"),
            "privileged" if value == true => {
                options.insert("--privileged".to_string());
            }
            "allowPrivilegeEscalation" if value == false => {
                options.insert("--security-opt=no-new-privileges".to_string());
            }
            "readOnlyRootFilesystem" if value == true => {
                options.insert("--read-only".to_string());
            }
            "privileged" | "allowPrivilegeEscalation" | "readOnlyRootFilesystem" => {}
            "capabilities" => {
                for cap in strings(value.get("drop")) {
                    options.insert(format!("--cap-drop={cap}"));
                }
                for cap in strings(value.get("add")) {
                    options.insert(format!("--cap-add={cap}"));
                }
            }
            // Docker's default seccomp profile is the runtime default.
            "seccompProfile" => assert_eq!(value["type"], "RuntimeDefault", "seccompProfile"),
            other => panic!(
                "the Deployment's securityContext.{other} has no counterpart in the as-shipped \
                 lane: add it to SECURITY_OPTIONS in e2e/suite/src/shipped.rs and here"
            ),
        }
    }
    let user = user.expect("runAsUser");
    options.insert(format!("--user={user}:{}", group.unwrap_or(user)));
    options
}

#[test]
fn the_as_shipped_lane_runs_the_image_as_the_deployment_does() {
    let pod = pod();
    let manager = &pod["containers"][0];
    let (options, args) = lane();
    assert!(
        pod.get("securityContext")
            .is_none_or(|s| s == &serde_json::json!({})),
        "a pod-level securityContext appeared: mirror it in the as-shipped lane"
    );
    assert_eq!(strings(manager.get("command")), vec!["/manager"]);
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile");
    assert!(
        dockerfile.contains(r#"ENTRYPOINT ["/manager"]"#),
        "the lane relies on the image's entrypoint being the Deployment's command"
    );

    // securityContext ↔ the lane's security options.
    let lane_security: BTreeSet<String> = options
        .iter()
        .filter(|o| {
            !["--volume=", "--env=", "--name="]
                .iter()
                .any(|p| o.starts_with(p))
                && !LANE_PLUMBING.contains(&o.as_str())
        })
        .cloned()
        .collect();
    assert_eq!(
        lane_security,
        options_for(&manager["securityContext"]),
        "the as-shipped lane (e2e/suite/src/shipped.rs) and the Deployment's securityContext differ"
    );

    // volumeMounts ↔ the lane's --volume options (plus its kubeconfig).
    let lane_mounts: BTreeMap<String, (String, bool)> = options
        .iter()
        .filter_map(|o| o.strip_prefix("--volume="))
        .map(|v| {
            let parts: Vec<&str> = v.split(':').collect();
            let read_only = parts.get(2) == Some(&"ro");
            (parts[1].to_string(), (parts[0].to_string(), read_only))
        })
        .collect();
    let volumes: BTreeMap<&str, &Value> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| (str_at(v, "/name"), v))
        .collect();
    let mut expected_paths = BTreeSet::from([KUBECONFIG.to_string()]);
    for mount in manager["volumeMounts"].as_array().expect("volumeMounts") {
        let path = str_at(mount, "/mountPath")
            .trim_end_matches('/')
            .to_string();
        let (host, read_only) = lane_mounts.get(&path).unwrap_or_else(|| {
            panic!("the Deployment mounts {path}, the as-shipped lane does not: {lane_mounts:?}")
        });
        assert_eq!(
            *read_only,
            mount["readOnly"] == true,
            "{path}: read-only in one, not in the other"
        );
        let volume = volumes[str_at(mount, "/name")];
        if let Some(host_path) = volume.pointer("/hostPath/path") {
            // The engine's socket is the one exception: the lane mounts the socket of the engine
            // it runs on (Podman's in the podman lane), where a kind node on Podman has Podman's
            // socket at the Deployment's host path.
            let engine_socket = path == capd_e2e::shipped::DOCKER_SOCKET
                && host.as_str() == capd_e2e::shipped::engine_socket();
            assert!(
                host_path == host.as_str() || engine_socket,
                "{path}: another host path: {host_path} and {host}"
            );
        }
        expected_paths.insert(path);
    }
    assert_eq!(
        lane_mounts.keys().cloned().collect::<BTreeSet<_>>(),
        expected_paths,
        "the as-shipped lane mounts what the Deployment does, and its kubeconfig"
    );

    // args: the Deployment's, with the lane's few additions.
    let flag = |a: &str| a.split('=').next().unwrap_or_default().to_string();
    let lane_flags: BTreeSet<String> = args.iter().map(|a| flag(a)).collect();
    let deployment_args = strings(manager.get("args"));
    for arg in &deployment_args {
        if MOVED_ADDRESS_ARGS.contains(&flag(arg).as_str()) {
            assert!(lane_flags.contains(&flag(arg)), "the lane lacks {arg}");
        } else {
            assert!(
                args.iter().any(|a| a == arg),
                "the lane lacks {arg}: {args:?}"
            );
        }
    }
    let deployment_flags: BTreeSet<String> = deployment_args.iter().map(|a| flag(a)).collect();
    let added: BTreeSet<&str> = lane_flags
        .iter()
        .filter(|f| !deployment_flags.contains(*f))
        .map(String::as_str)
        .collect();
    assert_eq!(
        added,
        BTreeSet::from(LANE_ONLY_ARGS),
        "args of the as-shipped lane that the Deployment does not pass"
    );

    // env: the Deployment's names, the same DOCKER_HOST, and the lane's additions.
    let lane_env: BTreeMap<&str, &str> = options
        .iter()
        .filter_map(|o| o.strip_prefix("--env="))
        .filter_map(|e| e.split_once('='))
        .collect();
    let mut expected_env: BTreeSet<&str> = LANE_ONLY_ENV.into_iter().collect();
    for e in manager["env"].as_array().expect("env") {
        expected_env.insert(str_at(e, "/name"));
    }
    assert_eq!(
        lane_env.keys().copied().collect::<BTreeSet<_>>(),
        expected_env,
        "env of the as-shipped lane and of the Deployment"
    );
    let deployment_docker_host = manager["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "DOCKER_HOST")
        .map(|e| str_at(e, "/value"));
    assert_eq!(deployment_docker_host, lane_env.get("DOCKER_HOST").copied());
}
