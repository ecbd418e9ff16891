#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, builds the test
# images from Debian packages when their recipe changed, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x e2e/images/build.sh ] || [ -f e2e/images/build.sh ]; then
  echo "--- test images"
  bash e2e/images/build.sh
fi

echo "--- cargo test"
cargo test --workspace
