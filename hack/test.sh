#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, builds the test
# images from Debian packages when their recipe changed, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "--- test images (a no-op when up to date)"
bash e2e/images/build.sh

echo "--- cargo test"
cargo test --workspace
