//! A stand-in for Cluster API's kubeadm bootstrap provider (CABPK) and KubeadmControlPlane (KCP)
//! of release 1.12, shaping their output as they do, so that the suite can build a real workload
//! cluster through the provider (issue 29) with the real node image of `e2e/images/real`.
//!
//! [`RealCluster`] strings these together into the steps of a real cluster's life (created,
//! first control plane, joins, a worker removed, Nodes checked against the DockerMachines), which
//! the real-node scenario and the sandbox's stand-in (`hack/run.sh --real`) share. [`Floor`]
//! bootstraps the same node image by hand with the same kubeadm commands, the baseline the
//! scenario reports the provider's times against.
//!
//! Paths are relative to `kubernetes-sigs/cluster-api` at `release-1.12`.
//!
//! | Behaviour | CABPK / KCP / core 1.12 (file, function) | Simplified here |
//! |---|---|---|
//! | Cluster CA, etcd CA, front-proxy CA, service-account key pair; Secrets `<cluster>-ca`, `-etcd`, `-proxy`, `-sa` with `tls.crt`/`tls.key`, type `cluster.x-k8s.io/secret`, cluster-name label | `util/secret/certificates.go` (`NewCertificatesForInitialControlPlane`, `newSelfSignedCACert`, `generateServiceAccountKeys`, `AsSecret`); KCP `controllers/helpers.go` (`reconcileClusterCertificates`) | ECDSA P-256 keys (CABPK's `encryptionAlgorithm: ECDSA-P256`; its default RSA-2048 needs a key generator the suite does not have), PKCS#8 key PEM; random serial; no owner reference (no KCP object) |
//! | `caCertHashes`: `sha256:` + SHA-256 of the CA's SubjectPublicKeyInfo | `util/secret/certificates.go` (`hashCert`) | - |
//! | Control-plane init cloud-config: header, certificate `write_files` (ca, etcd/ca, front-proxy-ca, sa: certificate `0640`, key `0600`, `root:root`), `/run/kubeadm/kubeadm.yaml` = `---`, ClusterConfiguration, `---`, InitConfiguration, the `/run/cluster-api` placeholder, `runcmd` `kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete` | `internal/cloudinit/controlplane_init.go` (`NewInitControlPlane`), `files.go`, `cloudinit.go`, `utils.go` (`Indent`) | no users, NTP, disks, mounts, boot/pre/post commands, extra files, verbosity (the suite sets none) |
//! | ClusterConfiguration and InitConfiguration, kubeadm `v1beta3` for 1.28, keys sorted, `taints: null` | `internal/controllers/kubeadmconfig_controller.go` (`handleClusterNotInitialized`, `computeClusterConfigurationAndAdditionalData`); `types/utils.go` (`MarshalClusterConfigurationForVersion`, `MarshalInitConfigurationForVersion`) | only `v1beta3` (Kubernetes 1.23 to 1.30) |
//! | The KCP spec: certSANs `localhost`, `127.0.0.1`, `0.0.0.0`, `host.docker.internal`; kubelet `eviction-hard`; controller-manager `enable-hostpath-provisioner` | CAPD `templates/clusterclass-quick-start.yaml`, `cluster-template-development.yaml` | plus, for the real node image, `imagePullPolicy: Never` and `skipPhases: [addon/coredns]` ([`KubeadmConfigSpec::real_node`], user fields of KCP) |
//! | Worker join cloud-config: `/run/kubeadm/kubeadm-join-config.yaml` = `---` + JoinConfiguration with `discovery.bootstrapToken` (`apiServerEndpoint` = the Cluster's endpoint, token, CA hash) and the `node.cluster.x-k8s.io/uninitialized:NoSchedule` taint; `runcmd` `kubeadm join --config ...  && echo success > ...` | `internal/cloudinit/node.go` (`NewNode`); `kubeadmconfig_controller.go` (`joinWorker`, `reconcileDiscovery`) | - |
//! | Control-plane join cloud-config: the shared CA, etcd CA, front-proxy CA and sa files, the JoinConfiguration (no leading `---`) with `controlPlane: {localAPIEndpoint: {}}` | `internal/cloudinit/controlplane_join.go` (`NewJoinControlPlane`); `util/secret/certificates.go` (`NewControlPlaneJoinCerts`); `kubeadmconfig_controller.go` (`joinControlplane`) | - |
//! | Bootstrap data Secret: named after the KubeadmConfig (= the Machine), `value` + `format: cloud-config`, type `cluster.x-k8s.io/secret`, cluster-name label | `kubeadmconfig_controller.go` (`storeBootstrapData`) | no KubeadmConfig owner reference |
//! | Bootstrap token Secret `bootstrap-token-<id>` in the workload `kube-system`: type `bootstrap.kubernetes.io/token`, authentication and signing usages, group `system:bootstrappers:kubeadm:default-node-token`, expiration (15 min TTL), description | `internal/controllers/token.go` (`createToken`) | no refresh or rotation (joins take well under the TTL) |
//! | `<cluster>-kubeconfig` Secret, key `value`: server `https://<endpoint>`, the CA, user `<cluster>-admin` with a client certificate CN `kubernetes-admin`, O `system:masters`, context `<cluster>-admin@<cluster>` | `util/kubeconfig/kubeconfig.go` (`New`, `CreateSecretWithOwner`, `GenerateSecretWithOwner`); KCP `helpers.go` (`reconcileKubeconfig`) | owned by the Cluster (not a KCP object); no rotation |
//! | Control plane initialized once `kube-system/kubeadm-config` exists | KCP `controllers/status.go` (`setControlPlaneInitialized`) | written on the Cluster directly ([`crate::Env::mark_control_plane_initialized`]) |
//! | Scale-down of a stacked etcd: leadership moved off the deleted member, then its member removed, with a client certificate KCP signs with the etcd CA (CN `cluster-api.x-k8s.io`) | KCP `workload_cluster_etcd.go` (`ForwardEtcdLeadership`, `RemoveEtcdMemberForMachine`); `workload_cluster.go` (`generateClientCert`); `controllers/controller.go` (`reconcilePreTerminateHook`) | etcd reached directly at `<node>:2379` over its JSON gateway (KCP: gRPC through an API-server port-forward); no pre-terminate hook annotation: the scenario removes the member between marking the Machine deleting and deleting its infrastructure, where the hook runs |
//! | Drain (cordon, evict all but DaemonSet and mirror Pods), the Node deleted after the infrastructure, the uninitialized taint removed once the Node exists | core `internal/controllers/machine/machine_controller.go` (`drainNode`, `deleteNode`), `machine_controller_noderef.go` | evictions are not retried; no volume detach wait |

mod certs;
mod cloud_init;
mod cluster;
mod config;
mod env;
mod etcd;
mod floor;
mod token;

#[cfg(test)]
mod image_tests;
#[cfg(test)]
mod tests;

pub use certs::{
    Authority, CERTIFICATES_DIR, CLUSTER_NAME_LABEL, CLUSTER_SECRET_TYPE, ClientCert,
    ClusterCertificates, Purpose, ServiceAccountKey, admin_kubeconfig, cluster_secret, secret_name,
    spki_hash,
};
pub use cloud_init::{
    CLOUD_CONFIG_HEADER, File, INIT_CONFIG_PATH, JOIN_CONFIG_PATH, SENTINEL_FILE_COMMAND,
    certificate_files, indent, init_control_plane, join_control_plane, join_worker,
};
pub use cluster::{
    BOOTSTRAP_TIMEOUT, CLUSTER_NETWORK, NO_REAL_NODE_IMAGE, Progress, READY_TIMEOUT,
    REAL_NODE_IMAGE_VARIABLE, RealCluster, node_image_version, real_node_image_setting,
    supported_version,
};
pub use config::{
    ClusterSettings, Discovery, KUBEADM_API_VERSION, KubeadmConfigSpec, NODE_UNINITIALIZED_TAINT,
    cluster_configuration, control_plane_join_configuration, init_configuration,
    worker_join_configuration,
};
pub use env::{Workload, node_ready};
pub use etcd::{ETCD_CLIENT_PORT, EtcdClient, Member, Removal, parse_http_answer};
pub use floor::{
    CREATED_BY_LABEL, Floor, FloorTimes, PREFLIGHT_FLAG, control_plane_join_config_file,
    init_config_file, kubeadm_command, node_container_spec, node_run_args, ratio_line,
    worker_join_config_file, write_files_script,
};
pub use token::{BootstrapToken, DEFAULT_NODE_TOKEN_GROUP, DEFAULT_TOKEN_TTL};
