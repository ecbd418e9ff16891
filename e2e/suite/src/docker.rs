//! The Docker engine as a user sees it: the `docker` command line, the test images, and what a
//! cluster left in the engine.

use std::path::PathBuf;
use std::process::Command;

/// The label the provider puts on every container of a cluster.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
/// The label the provider puts on a node container of a Machine in a failure domain.
pub const FAILURE_DOMAIN_LABEL: &str = "io.x-k8s.cluster.failureDomain";
/// The label the provider puts on a container of a DockerMachinePool.
pub const MACHINE_POOL_LABEL: &str = "docker.cluster.x-k8s.io/machine-pool";
/// The label the provider puts on a container of a DevMachinePool (CAPD 1.14's).
pub const DEV_MACHINE_POOL_LABEL: &str = "dev.cluster.x-k8s.io/machine-pool";
/// Where the haproxy configuration lives in the load balancer container.
pub const HAPROXY_CONFIG: &str = "/usr/local/etc/haproxy/haproxy.cfg";
/// Where the kubeadm stand-in of the node image records its runs.
pub const KUBEADM_LOG: &str = "/var/lib/capd-standin/kubeadm.log";

/// The test images built by `e2e/images/build.sh`.
#[derive(Debug, Clone)]
pub struct Images {
    /// The node image (stands in for kindest/node).
    pub node: String,
    /// The load balancer image repository (the provider adds `/haproxy`).
    pub haproxy_repository: String,
    /// The load balancer image tag.
    pub haproxy_tag: String,
}

fn image_setting(key: &str) -> Option<String> {
    if let Ok(value) = std::env::var(key)
        && !value.is_empty()
    {
        return Some(value);
    }
    let path = crate::workspace_root().join("e2e/images/.build/images.env");
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim().to_string())
}

fn image_present(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The test images; panics with instructions when they were not built.
pub fn images() -> Images {
    let missing = "the test images are missing: run `bash e2e/images/build.sh` (hack/test.sh does)";
    let node = image_setting("CAPD_TEST_NODE_IMAGE").expect(missing);
    let haproxy = image_setting("CAPD_TEST_HAPROXY_IMAGE").expect(missing);
    assert!(image_present(&node) && image_present(&haproxy), "{missing}");
    // The provider builds the load balancer image as `<repository>/haproxy:<tag>`.
    let (repository, tag) = haproxy
        .rsplit_once(':')
        .expect("the haproxy image has a tag");
    let repository = repository
        .strip_suffix("/haproxy")
        .expect("the haproxy test image is named <repository>/haproxy:<tag>");
    Images {
        node,
        haproxy_repository: repository.to_string(),
        haproxy_tag: tag.to_string(),
    }
}

/// Whether the engine runs privileged containers (sandboxed engines refuse them; the manager then
/// runs the stand-in images unprivileged).
pub fn privileged_allowed(node_image: &str) -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let ok = docker(&["run", "--rm", "--privileged", "--entrypoint", "true", node_image]).0;
        if !ok {
            eprintln!("note: this engine refuses privileged containers; the manager runs them unprivileged");
        }
        ok
    })
}

/// Runs `docker <args>`: whether it succeeded, and its trimmed stdout.
pub fn docker(args: &[&str]) -> (bool, String) {
    let out = Command::new("docker").args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    docker(args)
        .1
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Container names carrying all of some `key=value` labels (running or not), sorted.
fn containers_labelled(labels: &[String]) -> Vec<String> {
    let mut args = vec!["ps", "-a", "--format", "{{.Names}}"];
    for label in labels {
        args.extend(["--filter", label.as_str()]);
    }
    let mut names = docker_lines(&args);
    names.sort();
    names
}

/// Container names of a cluster (running or not), sorted.
pub fn cluster_containers(cluster: &str) -> Vec<String> {
    containers_labelled(&[format!("label={CLUSTER_LABEL}={cluster}")])
}

/// Container names of a cluster's machine pool (running or not), sorted: those with `pool_label`
/// ([`MACHINE_POOL_LABEL`] or [`DEV_MACHINE_POOL_LABEL`]) set to the pool's name.
pub fn pool_containers(cluster: &str, pool_label: &str, pool: &str) -> Vec<String> {
    containers_labelled(&[
        format!("label={CLUSTER_LABEL}={cluster}"),
        format!("label={pool_label}={pool}"),
    ])
}

/// Whether a container is running.
pub fn container_running(container: &str) -> bool {
    docker(&["inspect", "--format", "{{.State.Running}}", container]).1 == "true"
}

/// `docker ps -a` of the containers of some clusters, for failure reports.
pub fn cluster_containers_table(clusters: &[String]) -> String {
    let mut out = String::new();
    for cluster in clusters {
        out.push_str(
            &docker(&[
                "ps",
                "-a",
                "--filter",
                &format!("label={CLUSTER_LABEL}={cluster}"),
                "--format",
                "table {{.Names}}\t{{.Image}}\t{{.Status}}\t{{.Ports}}",
            ])
            .1,
        );
        out.push('\n');
    }
    out
}

/// The anonymous volumes of a container.
pub fn container_volumes(container: &str) -> Vec<String> {
    docker_lines(&[
        "inspect",
        "--format",
        "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}\n{{end}}{{end}}",
        container,
    ])
}

/// Whether a volume exists.
pub fn volume_exists(volume: &str) -> bool {
    docker(&["volume", "inspect", volume]).0
}

/// Whether a network exists.
pub fn network_exists(network: &str) -> bool {
    docker(&["network", "inspect", network]).0
}

/// Runs a command in a container and returns its stdout.
pub fn docker_exec(container: &str, command: &[&str]) -> String {
    let mut args = vec!["exec", container];
    args.extend_from_slice(command);
    docker(&args).1
}

/// The engine's id of a container (empty when absent).
pub fn container_id(container: &str) -> String {
    docker(&["inspect", "--format", "{{.Id}}", container]).1
}

/// A label of a container (empty when absent).
pub fn container_label(container: &str, label: &str) -> String {
    docker(&[
        "inspect",
        "--format",
        &format!("{{{{index .Config.Labels \"{label}\"}}}}"),
        container,
    ])
    .1
}

/// The address of a container on a network.
pub fn ip_on(container: &str, network: &str) -> String {
    docker(&[
        "inspect",
        "--format",
        &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
        container,
    ])
    .1
}

/// The host port a container's `port/tcp` is published on.
pub fn published_port(container: &str, port: u16) -> Option<u16> {
    docker(&["port", container, &format!("{port}/tcp")])
        .1
        .lines()
        .filter_map(|l| l.rsplit_once(':'))
        .find_map(|(_, p)| p.trim().parse().ok())
}

/// The haproxy configuration of a load balancer container.
pub fn haproxy_config(lb: &str) -> String {
    docker_exec(lb, &["cat", HAPROXY_CONFIG])
}

/// The `server` lines of a haproxy configuration: `(name, address, weight)`.
pub fn haproxy_backends(config: &str) -> Vec<(String, String, u32)> {
    config
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let weight = words
                .iter()
                .position(|w| *w == "weight")
                .and_then(|i| words.get(i + 1))
                .and_then(|w| w.parse().ok())?;
            match words.as_slice() {
                ["server", name, address, ..] => {
                    Some((name.to_string(), address.to_string(), weight))
                }
                _ => None,
            }
        })
        .collect()
}

/// One server of the `kube-apiservers` backend, as haproxy itself sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaproxyServer {
    /// The server's name (the node container's).
    pub name: String,
    /// `UP` (weight 0 included), `DOWN`, `DRAIN` (set by hand), `MAINT`, `no check`, or a
    /// transition (`UP 1/3`).
    pub status: String,
    /// The weight haproxy uses now.
    pub weight: u32,
    /// The last health check's result: `L7OK` when `/healthz` answered 200.
    pub check: String,
}

/// The servers of the load balancer's `kube-apiservers` backend from haproxy's running state:
/// the stats page of the default configuration (`:8404/stats;csv`), read at the load balancer's
/// address on `network`. Unlike [`haproxy_config`], this is what haproxy loaded and checked.
pub fn haproxy_servers(lb: &str, network: &str) -> Result<Vec<HaproxyServer>, String> {
    use std::io::{Read, Write};
    let address = format!("{}:8404", ip_on(lb, network));
    let timeout = std::time::Duration::from_secs(5);
    let socket = address
        .parse()
        .map_err(|e| format!("the address {address}: {e}"))?;
    let mut stream = std::net::TcpStream::connect_timeout(&socket, timeout)
        .map_err(|e| format!("connect to {address}: {e}"))?;
    stream.set_read_timeout(Some(timeout)).ok();
    stream
        .write_all(b"GET /stats;csv HTTP/1.0\r\n\r\n")
        .map_err(|e| format!("ask {address}: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|e| format!("read {address}: {e}"))?;
    // haproxy answers in chunks, even to HTTP/1.0.
    let (status, csv) = crate::kubeadm::parse_http_answer(&answer)?;
    if status != 200 {
        return Err(format!("{address} answered {status}: {csv}"));
    }
    parse_haproxy_servers(&csv)
}

/// The `kube-apiservers` servers of haproxy's stats CSV (`# pxname,svname,...` then a row per
/// frontend, server and backend).
pub fn parse_haproxy_servers(csv: &str) -> Result<Vec<HaproxyServer>, String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .and_then(|h| h.strip_prefix("# "))
        .ok_or_else(|| format!("no CSV header in haproxy's stats: {csv}"))?
        .split(',')
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|c| *c == name)
            .ok_or_else(|| format!("no column {name} in haproxy's stats"))
    };
    let (proxy, server, status, weight, check) = (
        column("pxname")?,
        column("svname")?,
        column("status")?,
        column("weight")?,
        column("check_status")?,
    );
    Ok(lines
        .map(|line| line.split(',').collect::<Vec<_>>())
        .filter(|row| {
            row.get(proxy) == Some(&"kube-apiservers")
                && !matches!(row.get(server), Some(&"BACKEND" | &"FRONTEND"))
        })
        .map(|row| {
            let field = |i: usize| row.get(i).copied().unwrap_or_default().to_string();
            HaproxyServer {
                name: field(server),
                status: field(status),
                weight: field(weight).parse().unwrap_or_default(),
                check: field(check),
            }
        })
        .collect())
}

/// How often the kubeadm stand-in ran `init` or `join` in a node container.
pub fn kubeadm_runs(container: &str) -> usize {
    docker_exec(container, &["cat", KUBEADM_LOG])
        .lines()
        .filter(|l| l.starts_with("kubeadm init") || l.starts_with("kubeadm join"))
        .count()
}

/// Removes the containers of clusters (with their anonymous volumes) and networks: the suite's
/// cleanup, also after a failure. Only names the suite made up are given here.
pub fn remove_clusters_and_networks(clusters: &[String], networks: &[String]) {
    for cluster in clusters {
        for container in cluster_containers(cluster) {
            let _ = Command::new("docker")
                .args(["rm", "-fv", &container])
                .output();
        }
    }
    for network in networks {
        if network_exists(network) {
            let _ = Command::new("docker")
                .args(["network", "rm", network])
                .output();
        }
    }
}

/// The directory holding the test executable (`target/debug`), where the manager binary is.
pub(crate) fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/debug/deps/<test>-<hash>
    exe.parent()?.parent().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_read_from_server_lines() {
        let config = "frontend x\n  bind *:6443\nbackend y\n  server c-cp1 172.18.0.3:6443 weight 100 check check-ssl verify none\n  server c-cp2 172.18.0.4:6443 weight 0 check\n";
        assert_eq!(
            haproxy_backends(config),
            vec![
                ("c-cp1".into(), "172.18.0.3:6443".into(), 100),
                ("c-cp2".into(), "172.18.0.4:6443".into(), 0)
            ]
        );
    }

    #[test]
    fn haproxy_servers_are_read_from_its_stats_csv() {
        // Columns cut from haproxy 2.6's stats page, in its order.
        let csv = "# pxname,svname,status,weight,act,check_status,check_code
stats,FRONTEND,OPEN,,,,
control-plane,FRONTEND,OPEN,,,,
kube-apiservers,c-cp1,UP,100,1,L7OK,200
kube-apiservers,c-cp2,DRAIN,0,1,L7OK,200
kube-apiservers,c-cp3,DOWN,100,1,L4CON,
kube-apiservers,BACKEND,UP,100,2,,
";
        let server = |name: &str, status: &str, weight, check: &str| HaproxyServer {
            name: name.into(),
            status: status.into(),
            weight,
            check: check.into(),
        };
        assert_eq!(
            parse_haproxy_servers(csv).unwrap(),
            vec![
                server("c-cp1", "UP", 100, "L7OK"),
                server("c-cp2", "DRAIN", 0, "L7OK"),
                server("c-cp3", "DOWN", 100, "L4CON"),
            ]
        );
        assert!(parse_haproxy_servers("<html>").is_err());
        assert!(parse_haproxy_servers("# pxname,svname\n").is_err());
    }
}
