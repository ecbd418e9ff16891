#!/usr/bin/env bash
# Runs the provider's main job, the controller manager, on this machine.
#
#   bash hack/run.sh              against the management cluster of $KUBECONFIG (or ~/.kube/config);
#                                 when there is none, against a sandbox (below)
#   bash hack/run.sh --sandbox    against a throwaway local test API server (e2e/apiserver), for trying
#                                 the provider without a Kubernetes cluster
#   bash hack/run.sh [--sandbox] -- <manager flags>   extra flags for the manager (see `--help`)
#
# Our CRDs are applied first (server-side apply of config/crd/bases). The manager runs in the foreground
# with leader election off, health on 127.0.0.1:9440 and plain-HTTP metrics on 127.0.0.1:8443; Ctrl-C
# stops it (and the sandbox). The manager waits until Cluster API core's Cluster and Machine kinds are
# served too: on a real management cluster `clusterctl init` installs them (README, Quick start); the
# sandbox gets stand-in CRDs (hack/sandbox/), and Cluster API's part is then played by hand or by the
# e2e suite.
set -euo pipefail
cd "$(dirname "$0")/.."

sandbox=false
manager_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sandbox) sandbox=true; shift ;;
    --) shift; manager_args=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "hack/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

kubeconfig="${KUBECONFIG:-$HOME/.kube/config}"
if [ "$sandbox" = false ] && [ ! -f "$kubeconfig" ]; then
  echo "hack/run.sh: no kubeconfig at $kubeconfig: starting a sandbox test API server instead"
  sandbox=true
fi

# CAPD_RUN_PROFILE=dev builds faster, unoptimised binaries.
profile="${CAPD_RUN_PROFILE:-release}"
bin_dir=target/$([ "$profile" = dev ] && echo debug || echo "$profile")
echo "--- building the manager ($profile profile)"
cargo build --profile "$profile" --bin manager
if [ "$sandbox" = true ]; then
  cargo build --profile "$profile" -p testapiserver
fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

if [ "$sandbox" = true ]; then
  mkdir -p out/sandbox
  kubeconfig="$PWD/out/sandbox/kubeconfig"
  rm -f "$kubeconfig"
  "$bin_dir/testapiserver" --kubeconfig-out "$kubeconfig" &
  pids+=($!)
  for _ in $(seq 1 100); do [ -s "$kubeconfig" ] && break; sleep 0.1; done
  [ -s "$kubeconfig" ] || { echo "hack/run.sh: the sandbox API server did not start" >&2; exit 1; }
  echo "--- sandbox API server ready; use it with: export KUBECONFIG=$kubeconfig"
fi

echo "--- applying the CRDs from config/crd/bases"
kubectl --kubeconfig "$kubeconfig" apply --server-side --force-conflicts -f config/crd/bases
if [ "$sandbox" = true ]; then
  kubectl --kubeconfig "$kubeconfig" apply --server-side -f hack/sandbox/cluster-api-stand-in-crds.yaml
fi

echo "--- starting the manager (Ctrl-C stops it)"
"$bin_dir/manager" \
  --kubeconfig "$kubeconfig" \
  --leader-elect=false \
  --health-addr 127.0.0.1:9440 \
  --diagnostics-address 127.0.0.1:8443 \
  --insecure-diagnostics \
  --webhook-cert-dir "$PWD/out/webhook-certs" \
  "${manager_args[@]}" &
pids+=($!)
wait "${pids[-1]}"
