#!/usr/bin/env bash
# The test command: installs what the tests need, builds the test images, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Test images for the Docker integration tests (tests/docker_*.rs); a no-op when up to date.
bash e2e/images/build.sh

cargo test --workspace
