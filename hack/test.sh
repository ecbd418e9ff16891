#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, builds the test
# images from Debian packages when their recipe changed, builds the manager image as shipped, then
# runs every test of the workspace, the e2e scenarios once more against an existing cluster, and
# the podman lane (the engine tests and e2e scenarios on Podman). Real nodes are opt-in: with
# CAPD_REAL_NODE_IMAGE naming a kind node image the engine holds (docs/src/contributing.md, "Real
# nodes"), the podman lane also runs the real-node scenario, which must then pass; without it that
# scenario prints its skip.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "--- test images (a no-op when up to date)"
bash e2e/images/build.sh

# The as-shipped e2e lane (e2e/suite/tests/scenarios/as_shipped.rs) runs the manager from this
# image under the Deployment's restrictions. A release build: several minutes when cold.
echo "--- manager image for the as-shipped lane"
export CAPD_E2E_MANAGER_IMAGE=${CAPD_E2E_MANAGER_IMAGE:-capd-rs-manager:e2e}
bash hack/image-build.sh "$CAPD_E2E_MANAGER_IMAGE"

echo "--- cargo test"
cargo test --workspace

# The e2e scenarios again against an existing cluster: one standalone test API server that every
# scenario shares, as a real management cluster would be (each keeps to namespaces of its own and
# gives its manager a unique --watch-filter; docs/src/contributing.md, "End-to-end suite").
echo "--- e2e scenarios with CAPD_E2E_USE_EXISTING_CLUSTER=true"
cargo build --quiet -p testapiserver --bin testapiserver
existing=$(mktemp -d)
target/debug/testapiserver --kubeconfig-out "$existing/kubeconfig" 2>"$existing/apiserver.log" &
apiserver=$!
trap 'kill "$apiserver" 2>/dev/null || true; rm -rf "$existing"' EXIT
for _ in $(seq 100); do [[ -s $existing/kubeconfig ]] && break; sleep 0.1; done
CAPD_E2E_USE_EXISTING_CLUSTER=true CAPD_E2E_KUBECONFIG="$existing/kubeconfig" \
  cargo test -p capd-e2e --test scenarios

# The podman lane (docs/src/contributing.md, "The podman lane"): the engine tests and the e2e
# scenarios again, on a private rootful Podman service (hack/podman.sh installs podman when missing
# and loads the test images and the manager image), and the start-up check against a rootless
# Podman service.
echo "--- podman lane"
podman_dir=$(mktemp -d)
trap 'kill "$apiserver" 2>/dev/null || true; rm -rf "$existing"; bash hack/podman.sh stop "$podman_dir"; rm -rf "$podman_dir"' EXIT
podman_host=$(CAPD_PODMAN_EXTRA_IMAGES=$CAPD_E2E_MANAGER_IMAGE bash hack/podman.sh start "$podman_dir")
rootless_host=$(bash hack/podman.sh rootless "$podman_dir")
(
  export "$podman_host"
  cargo test --test docker_network --test docker_node --test docker_loadbalancer \
    --test docker_outage --test docker_tls --test gardener_docker --test controllers_lifecycle \
    --test controllers_stopped
  CAPD_TEST_ROOTLESS_DOCKER_HOST=${rootless_host#DOCKER_HOST=} \
    cargo test --test controllers_gates -- rootless
  cargo test -p capd-e2e --test scenarios -- --skip real_cluster
  # Real nodes (docs/src/contributing.md, "Real nodes"), only with CAPD_REAL_NODE_IMAGE: a real
  # cluster built through the provider, alone on the machine's cores, against a fresh test API
  # server and again against the existing cluster.
  if [[ -n ${CAPD_REAL_NODE_IMAGE:-} ]]; then
    export CAPD_E2E_REAL_NODES=required
    cargo test -p capd-e2e --test scenarios real_cluster -- --nocapture
    CAPD_E2E_USE_EXISTING_CLUSTER=true CAPD_E2E_KUBECONFIG="$existing/kubeconfig" \
      cargo test -p capd-e2e --test scenarios real_cluster -- --nocapture
  else
    echo "--- real nodes: skipped (CAPD_REAL_NODE_IMAGE is not set; docs/src/contributing.md, \"Real nodes\")"
  fi
  # Nothing left on Podman: no node or load balancer container, no network the provider made.
  leftovers=$(docker ps -aq --filter label=io.x-k8s.kind.cluster
    docker network ls -q --filter label=io.x-k8s.capd.created-by)
  if [[ -n $leftovers ]]; then
    echo "the podman lane left containers or networks behind:" >&2
    docker ps -a --filter label=io.x-k8s.kind.cluster >&2
    docker network ls --filter label=io.x-k8s.capd.created-by >&2
    exit 1
  fi
)
