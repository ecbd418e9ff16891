#!/usr/bin/env bash
# The chaos run (not part of the test command): builds the test images when their recipe changed,
# the manager and `capd-chaos`, then runs one cluster's life (3 control planes, 5 workers, +3,
# -4, deletion) while the manager is SIGKILLed at points drawn from a printed seed, and prints
# what it found. Flags go to capd-chaos: --seed N (replay a run), --kills N, --max-delay-ms N,
# --bootstrap-seconds N. Exit 0 when nothing was duplicated, leaked or bootstrapped twice.
#
# `bash hack/chaos.sh --fuzz [CASES]` runs the malformed-input property tests instead (`fuzz_` in
# the library: bootstrap data, HAProxy templates, webhook request bodies, manager flags) with
# CASES cases each (default 20000) and fails when one panics or when the run outlasts
# CAPD_FUZZ_TIMEOUT seconds (default 3600: a hang).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --fuzz ]]; then
  cases=${2:-20000}
  limit=${CAPD_FUZZ_TIMEOUT:-3600}
  cargo test --quiet --lib --no-run
  status=0
  CAPD_FUZZ_CASES=$cases timeout --signal=KILL "$limit" cargo test --quiet --lib fuzz_ || status=$?
  if [[ $status == 137 ]]; then
    echo "chaos.sh: the fuzz run did not finish within ${limit}s: a hang" >&2
  fi
  exit "$status"
fi
bash e2e/images/build.sh
cargo build --quiet --bin manager -p capd-rs
cargo build --quiet --bin capd-chaos -p capd-e2e
CAPD_E2E_MANAGER="$PWD/target/debug/manager" exec target/debug/capd-chaos "$@"
