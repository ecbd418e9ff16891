#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, builds the test
# images from Debian packages when their recipe changed, builds the manager image as shipped, then
# runs every test of the workspace, and the e2e scenarios once more against an existing cluster.
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
# gives its manager a unique --watch-filter; README, "End-to-end suite").
echo "--- e2e scenarios with CAPD_E2E_USE_EXISTING_CLUSTER=true"
cargo build --quiet -p testapiserver --bin testapiserver
existing=$(mktemp -d)
target/debug/testapiserver --kubeconfig-out "$existing/kubeconfig" 2>"$existing/apiserver.log" &
apiserver=$!
trap 'kill "$apiserver" 2>/dev/null || true; rm -rf "$existing"' EXIT
for _ in $(seq 100); do [[ -s $existing/kubeconfig ]] && break; sleep 0.1; done
CAPD_E2E_USE_EXISTING_CLUSTER=true CAPD_E2E_KUBECONFIG="$existing/kubeconfig" \
  cargo test -p capd-e2e --test scenarios
