#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, builds the test
# images from Debian packages when their recipe changed, builds the manager image as shipped, then
# runs every test of the workspace.
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
