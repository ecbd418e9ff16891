#!/usr/bin/env bash
# Smoke test on a real laptop: real kindest/node images and real kubeadm, the way a CAPD user works.
#
#   1. builds the components and the manager image (hack/build-components.sh, hack/image-build.sh);
#   2. creates a kind management cluster with the Docker socket mounted and loads the image;
#   3. `clusterctl init --infrastructure docker` from our local repository (Cluster API core,
#      kubeadm bootstrap and control plane, cert-manager: these come from their registries);
#   4. a 1 control plane + 1 worker cluster from the `development` flavor (ClusterClass quick-start),
#      with a CNI so that Nodes can become Ready;
#   5. checks that both Nodes are Ready (through `kind get kubeconfig`, so the load balancer's
#      6443/tcp mapping is exercised too) and that `clusterctl describe cluster` shows nothing
#      False; then deletes everything it made.
#
# Who runs it: whoever changes what touches real nodes (bootstrap translation, node container run
# options, load balancer), on a machine whose Docker engine allows privileged containers and can
# pull images. CI does not run it: its engine refuses privileged containers and has no registry.
#
# Needs: docker, kind, kubectl, clusterctl, cargo. Settings (environment):
#   KUBERNETES_VERSION  workload cluster version (default v1.34.0)
#   CNI_MANIFEST        CNI manifest applied to the workload cluster (default: Calico, as in the
#                       Cluster API quick start)
#   KEEP=1              keep the clusters for inspection instead of deleting them
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VERSION=${KUBERNETES_VERSION:-v1.34.0}
CNI_MANIFEST=${CNI_MANIFEST:-https://raw.githubusercontent.com/projectcalico/calico/v3.26.1/manifests/calico.yaml}
MGMT=capd-rs-smoke-mgmt
CLUSTER=capd-rs-smoke
IMAGE=localhost/capd-rs-manager:dev
WORK=$(mktemp -d)

say() { printf 'smoke-kind: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

for tool in docker kind kubectl clusterctl cargo; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done

node_image="kindest/node:${KUBERNETES_VERSION}"
say "pulling $node_image (also checks that a registry is reachable)"
docker pull "$node_image" >/dev/null || die "cannot pull $node_image: this smoke test needs a registry"
if ! docker run --rm --privileged --entrypoint true "$node_image" 2>"$WORK/privileged.err"; then
  die "this Docker engine refuses privileged containers ($(tr -d '\n' <"$WORK/privileged.err")); kind nodes need them, so the smoke test cannot run here"
fi

cleanup() {
  local status=$?
  if [ "${KEEP:-0}" = 1 ]; then
    say "KEEP=1: leaving kind cluster $MGMT and workload cluster $CLUSTER"
  else
    say "deleting everything"
    kubectl --context "kind-$MGMT" delete cluster "$CLUSTER" --wait --timeout=5m >/dev/null 2>&1 || true
    kind delete cluster --name "$MGMT" >/dev/null 2>&1 || true
    # A workload cluster whose deletion did not finish leaves kind-labelled containers.
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  if [ "$status" = 0 ]; then say "PASSED"; else say "FAILED (exit $status)"; fi
}
trap cleanup EXIT

say "building the components and the manager image"
bash hack/build-components.sh
bash hack/image-build.sh "$IMAGE"
repo=$(ls -d "$PWD"/out/repository/infrastructure-docker/*/ | head -n1)

say "creating the management cluster $MGMT"
cat >"$WORK/kind-mgmt.yaml" <<'YAML'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: dual
nodes:
- role: control-plane
  extraMounts:
  - hostPath: /var/run/docker.sock
    containerPath: /var/run/docker.sock
YAML
kind create cluster --name "$MGMT" --config "$WORK/kind-mgmt.yaml" --wait 3m
kind load docker-image "$IMAGE" --name "$MGMT"
export KUBECONFIG="$WORK/mgmt.kubeconfig"
kind get kubeconfig --name "$MGMT" >"$KUBECONFIG"

cat >"$WORK/clusterctl.yaml" <<YAML
providers:
- name: docker
  type: InfrastructureProvider
  url: ${repo}infrastructure-components.yaml
YAML
say "clusterctl init from $repo"
export CLUSTER_TOPOLOGY=true
clusterctl init --config "$WORK/clusterctl.yaml" --infrastructure docker --wait-providers

say "creating workload cluster $CLUSTER ($KUBERNETES_VERSION, 1 control plane + 1 worker)"
clusterctl generate cluster "$CLUSTER" --config "$WORK/clusterctl.yaml" --flavor development \
  --kubernetes-version "$KUBERNETES_VERSION" --control-plane-machine-count 1 --worker-machine-count 1 \
  >"$WORK/cluster.yaml"
kubectl apply -f "$WORK/cluster.yaml"

say "waiting for the control plane to be initialized"
kubectl wait cluster "$CLUSTER" --for=condition=ControlPlaneInitialized --timeout=15m

# kind interop: kind reads the load balancer's 6443/tcp host port.
kind get kubeconfig --name "$CLUSTER" >"$WORK/workload.kubeconfig"
say "applying the CNI"
kubectl --kubeconfig "$WORK/workload.kubeconfig" apply -f "$CNI_MANIFEST" >/dev/null

say "waiting for 2 Ready Nodes"
deadline=$((SECONDS + 900))
until [ "$(kubectl --kubeconfig "$WORK/workload.kubeconfig" get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" = 2 ]; do
  [ $SECONDS -lt $deadline ] || { kubectl --kubeconfig "$WORK/workload.kubeconfig" get nodes -o wide || true; die "Nodes not Ready in 15 minutes"; }
  sleep 10
done
kubectl --kubeconfig "$WORK/workload.kubeconfig" get nodes -o wide

say "waiting for the Cluster to be Available"
kubectl wait cluster "$CLUSTER" --for=condition=Available --timeout=10m
clusterctl describe cluster "$CLUSTER" --show-conditions all | tee "$WORK/describe.txt"
if grep -E '\bFalse\b' "$WORK/describe.txt"; then
  die "clusterctl describe cluster shows conditions that are False"
fi
