#!/usr/bin/env bash
# The test command: installs what the tests need, builds the test images, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
