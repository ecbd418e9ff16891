#!/usr/bin/env bash
# Runs the provider's main job, the controller manager, on this machine.
#
#   bash hack/run.sh              against the management cluster of $KUBECONFIG (or ~/.kube/config);
#                                 when there is none, in a sandbox (below)
#   bash hack/run.sh --sandbox    in a sandbox: a throwaway local test API server (e2e/apiserver), the
#                                 manager, and a Cluster API core stand-in (e2e/suite, capi-stand-in)
#                                 that builds a demo cluster of test node containers, shows it live,
#                                 and deletes it on Ctrl-C, leaving nothing behind
#   bash hack/run.sh --sandbox --once     the same without a terminal: create, check, delete, exit
#                                 (0 when all went well)
#   bash hack/run.sh --real       a sandbox whose cluster is a REAL Kubernetes cluster: the node
#                                 image of CAPD_REAL_NODE_IMAGE (a kind node image: kindest/node, or
#                                 one e2e/images/real/build.sh made from Kubernetes binaries you
#                                 bring; without it, it says so and exits 0) bootstrapped by
#                                 real kubeadm with data from the e2e suite's CABPK/KCP stand-in;
#                                 ends with the workload cluster's `kubectl get nodes -o wide`
#                                 (its kubeconfig: out/sandbox/demo.kubeconfig). Real nodes need
#                                 privileged containers: when Docker refuses them, it runs them on
#                                 a private rootful Podman (hack/podman.sh), stopped on exit.
#                                 `--real --once` checks (Nodes Ready through the load balancer,
#                                 provider IDs, /healthz through haproxy), deletes, exits
#   Sandbox options: --control-planes N, --workers N (default 1 and 1), --no-demo (the API server
#   and the manager only: Cluster API's part is then played by hand or by the e2e suite).
#   bash hack/run.sh --capi-demo  against the management cluster of $KUBECONFIG where Cluster API
#                                 core, CABPK and KCP are installed (`clusterctl init`): runs the
#                                 manager, then the e2e scenario installed_quick_start builds a demo
#                                 cluster through real KubeadmControlPlane and MachineDeployment
#                                 objects (templates/cluster-template.yaml rendered with clusterctl's
#                                 variable rules), checks it and deletes it; then the manager stops.
#                                 Nodes are the test node image (only the infrastructure is checked:
#                                 real core never initializes it) or, with CAPD_REAL_NODE_IMAGE, real
#                                 (the cluster must become Available with its Nodes Ready)
#   bash hack/run.sh --capi-demo --kubernetes-server DIR --cluster-api DIR
#                                 the same on a real management plane started for the demo from
#                                 binaries you bring (hack/real-management.sh up, out/capi-demo/plane;
#                                 stopped at the end) instead of the cluster of $KUBECONFIG
#   bash hack/run.sh [options] -- <manager flags>   extra flags for the manager (see `--help`)
#
# Our CRDs are applied first (server-side apply of config/crd/bases). The manager runs with leader
# election off, health on 127.0.0.1:9440 and plain-HTTP metrics on 127.0.0.1:8443. It waits until
# Cluster API core's Cluster and Machine kinds are served too: on a real management cluster
# `clusterctl init` installs them (README, Quick start); the sandbox gets stand-in CRDs
# (hack/sandbox/). The sandbox builds the test node images when missing (e2e/images/build.sh), runs
# the dev profile (CAPD_RUN_PROFILE=release for optimised binaries), puts the cluster on the Docker
# network capd-sandbox and writes its logs and kubeconfigs to out/sandbox/.
set -euo pipefail
cd "$(dirname "$0")/.."

sandbox=false
once=false
real=false
demo=true
capi_demo=false
stand_in_args=()
manager_args=()
plane_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sandbox) sandbox=true; shift ;;
    --once) once=true; sandbox=true; stand_in_args+=(--once); shift ;;
    --real) real=true; sandbox=true; shift ;;
    --control-planes) stand_in_args+=(--control-plane-machines "${2:?--control-planes needs a number}"); shift 2 ;;
    --workers) stand_in_args+=(--worker-machines "${2:?--workers needs a number}"); shift 2 ;;
    --no-demo) demo=false; shift ;;
    --) shift; manager_args=("$@"); break ;;
    --capi-demo) capi_demo=true; shift ;;
    --kubernetes-server|--cluster-api) plane_args+=("$1" "${2:?$1 needs a folder}"); shift 2 ;;
    -h|--help) sed -n '2,46p' "$0"; exit 0 ;;
    *) echo "hack/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

kubeconfig="${KUBECONFIG:-$HOME/.kube/config}"
if [ ${#plane_args[@]} -gt 0 ] && { [ "$capi_demo" = false ] || [ "$sandbox" = true ]; }; then
  echo "hack/run.sh: --kubernetes-server and --cluster-api go with --capi-demo only" >&2
  exit 2
fi
if [ ${#plane_args[@]} -gt 0 ]; then
  # The demo on a real management plane of its own: the plane runs our manager too.
  echo "--- building the manager and the e2e scenarios"
  cargo build --bin manager
  cargo test --no-run -p capd-e2e --test scenarios
  plane=out/capi-demo/plane
  trap 'bash hack/real-management.sh down --dir "$plane"' EXIT
  bash hack/real-management.sh up "${plane_args[@]}" --dir "$plane" --manager target/debug/manager
  # shellcheck disable=SC1091
  source "$plane/env"
  echo "--- the demo cluster through the real plane (e2e scenario installed_quick_start)"
  cargo test -p capd-e2e --test scenarios installed_quick_start -- --nocapture
  exit 0
fi
if [ "$capi_demo" = true ] && { [ "$sandbox" = true ] || [ ! -f "$kubeconfig" ]; }; then
  echo "hack/run.sh --capi-demo: needs a kubeconfig ($kubeconfig) whose cluster runs Cluster API, and no sandbox option" >&2
  exit 2
fi
if [ "$sandbox" = false ] && [ ! -f "$kubeconfig" ]; then
  echo "hack/run.sh: no kubeconfig at $kubeconfig: starting a sandbox instead"
  sandbox=true
fi
if [ "$sandbox" = false ] && [ ${#stand_in_args[@]} -gt 0 ]; then
  echo "hack/run.sh: --control-planes and --workers are sandbox options (add --sandbox)" >&2
  exit 2
fi
if [ "$once" = true ] && [ "$demo" = false ]; then
  echo "hack/run.sh: --once runs the demo cluster; it cannot go with --no-demo" >&2
  exit 2
fi
if [ "$real" = true ] && [ -z "${CAPD_REAL_NODE_IMAGE:-}" ]; then
  echo "hack/run.sh --real: skipped: CAPD_REAL_NODE_IMAGE is not set. Set it to a kind node image the engine holds (kindest/node:vX.Y.Z, on a machine with a registry), or build one from Kubernetes server binaries you bring: bash e2e/images/real/build.sh --kubernetes-server DIR-or-kubernetes-server-linux-amd64.tar.gz (it prints the value)."
  exit 0
fi
if [ "$real" = true ] && ! docker image inspect "$CAPD_REAL_NODE_IMAGE" >/dev/null 2>&1; then
  echo "hack/run.sh --real: the engine has no image $CAPD_REAL_NODE_IMAGE (CAPD_REAL_NODE_IMAGE); build or load it first" >&2
  exit 1
fi
if [ "$real" = true ] && [ "$demo" = false ]; then
  echo "hack/run.sh: --real builds the demo cluster with real nodes; it cannot go with --no-demo" >&2
  exit 2
fi

# The sandbox builds three binaries: the unoptimised dev profile builds them much sooner
# (docs/src/getting-started.md, "The sandbox").
profile="${CAPD_RUN_PROFILE:-$([ "$sandbox" = true ] && echo dev || echo release)}"
bin_dir=target/$([ "$profile" = dev ] && echo debug || echo "$profile")
started=$(date +%s)
if [ "$sandbox" = true ]; then
  echo "--- building the manager, the test API server and the Cluster API stand-in ($profile profile)"
  cargo build --profile "$profile" -p capd-rs --bin manager -p testapiserver --bin testapiserver \
    -p capd-e2e --bin capi-stand-in
else
  echo "--- building the manager ($profile profile)"
  cargo build --profile "$profile" --bin manager
fi
echo "--- built in $(( $(date +%s) - started ))s"

# The manager's command line against $kubeconfig (the user's cluster, or the sandbox's).
manager_command() {
  manager=(
    "$bin_dir/manager"
    --kubeconfig "$kubeconfig"
    --leader-elect=false
    --health-addr 127.0.0.1:9440
    --diagnostics-address 127.0.0.1:8443
    --insecure-diagnostics
    --webhook-cert-dir "$PWD/out/webhook-certs"
    "${manager_args[@]}"
  )
}

if [ "$sandbox" = false ]; then
  echo "--- applying the CRDs from config/crd/bases"
  kubectl --kubeconfig "$kubeconfig" apply --server-side --force-conflicts -f config/crd/bases
  manager_command
  if [ "$capi_demo" = false ]; then
    echo "--- starting the manager (Ctrl-C stops it)"
    exec "${manager[@]}"
  fi
  # The demo through the installed Cluster API: the manager in the background (its log in
  # out/capi-demo/manager.log), the scenario in the foreground.
  mkdir -p out/capi-demo
  echo "--- building the e2e scenarios"
  cargo test --no-run -p capd-e2e --test scenarios
  echo "--- starting the manager (log: out/capi-demo/manager.log)"
  "${manager[@]}" >out/capi-demo/manager.log 2>&1 &
  manager_pid=$!
  trap 'kill "$manager_pid" 2>/dev/null || true; wait "$manager_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do
    curl -fsS http://127.0.0.1:9440/readyz >/dev/null 2>&1 && break
    kill -0 "$manager_pid" 2>/dev/null || { echo "hack/run.sh: the manager exited (out/capi-demo/manager.log)" >&2; exit 1; }
    sleep 0.2
  done
  echo "--- the demo cluster through the installed Cluster API (e2e scenario installed_quick_start)"
  CAPD_E2E_CAPI=installed CAPD_E2E_KUBECONFIG="$kubeconfig" \
    cargo test -p capd-e2e --test scenarios installed_quick_start -- --nocapture
  exit 0
fi

# The sandbox. The test images stand in for kindest/node and kindest/haproxy (there is no
# registry); they run unprivileged, which sandboxed engines require. With --real, the nodes are the
# real node image (e2e/images/real), which needs privileged containers; the load balancer is still
# the test haproxy image.
echo "--- test node images (built when missing: about a minute, needs root for debootstrap)"
bash e2e/images/build.sh
if [ "$real" = true ]; then
  echo "--- real node image: $CAPD_REAL_NODE_IMAGE (Kubernetes $(docker run --rm --entrypoint cat "$CAPD_REAL_NODE_IMAGE" /kind/version))"
  stand_in_args+=(--real-node-image "$CAPD_REAL_NODE_IMAGE")
  export CAPD_RS_UNPRIVILEGED_CONTAINERS=false
fi
export CAPD_DOCKER_NETWORK="${CAPD_DOCKER_NETWORK:-capd-sandbox}"
export CAPD_RS_UNPRIVILEGED_CONTAINERS="${CAPD_RS_UNPRIVILEGED_CONTAINERS:-true}"
network=$CAPD_DOCKER_NETWORK
cluster=demo

out=out/sandbox
mkdir -p "$out"
kubeconfig="$PWD/$out/kubeconfig"
podman_dir=

# What a demo cluster may leave in the engine when its run was killed: its containers on the
# sandbox network (with their anonymous volumes), then the network once unused, if the provider made
# it (label io.x-k8s.capd.created-by): like the provider, never a network someone else made.
sweep() {
  local containers
  containers=$(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$cluster" --filter "network=$network")
  if [ -n "$containers" ]; then
    echo "--- removing containers left by cluster $cluster: $(docker inspect -f '{{.Name}}' $containers | tr -d / | tr '\n' ' ')"
    docker rm -fv $containers >/dev/null
  fi
  if docker network inspect "$network" >/dev/null 2>&1 \
    && [ -n "$(docker network inspect -f '{{index .Labels "io.x-k8s.capd.created-by"}}' "$network")" ] \
    && [ -z "$(docker network inspect -f '{{range .Containers}}x{{end}}' "$network")" ]; then
    docker network rm "$network" >/dev/null && echo "--- removed the Docker network $network"
  fi
}

pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  sweep
  if [ -n "$podman_dir" ]; then
    bash hack/podman.sh stop "$podman_dir"
    echo "--- stopped the private Podman service"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Real nodes run privileged: on the configured engine when it allows that, else on a private
# rootful Podman service (in a session of its own, so that Ctrl-C leaves it to the cleanup), which
# the manager and the stand-in reach through DOCKER_HOST.
if [ "$real" = true ]; then
  # shellcheck disable=SC1091
  source e2e/images/.build/images.env
  if docker run --rm --privileged --entrypoint true "$CAPD_TEST_NODE_IMAGE" >/dev/null 2>&1; then
    echo "--- engine: ${DOCKER_HOST:-the Docker engine} accepts privileged containers; the real nodes run there"
  else
    echo "--- engine: Podman (a private rootful service, hack/podman.sh), since Docker refuses privileged containers, which real nodes need; loading the images into it (the first time ~30 s)"
    podman_dir=$PWD/$out/podman
    bash hack/podman.sh stop "$podman_dir"   # a service left by a run killed harder
    host=$(setsid -w bash hack/podman.sh start "$podman_dir")
    export DOCKER_HOST=${host#DOCKER_HOST=}
    echo "--- engine: Podman at $DOCKER_HOST (stopped on exit; see its containers with: DOCKER_HOST=$DOCKER_HOST docker ps)"
  fi
fi
sweep

# The API server and the manager run in sessions of their own: Ctrl-C reaches only the stand-in,
# which deletes the cluster while the manager still runs; they are stopped afterwards.
rm -f "$kubeconfig"
setsid "$bin_dir/testapiserver" --kubeconfig-out "$kubeconfig" >"$out/apiserver.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$kubeconfig" ] && break; sleep 0.1; done
[ -s "$kubeconfig" ] || { echo "hack/run.sh: the sandbox API server did not start ($out/apiserver.log)" >&2; exit 1; }
echo "--- sandbox API server ready; use it with: export KUBECONFIG=$kubeconfig"

echo "--- applying the CRDs from config/crd/bases and the Cluster API stand-in CRDs"
kubectl --kubeconfig "$kubeconfig" apply --server-side --force-conflicts -f config/crd/bases >/dev/null
kubectl --kubeconfig "$kubeconfig" apply --server-side -f hack/sandbox/cluster-api-stand-in-crds.yaml >/dev/null

manager_command
if [ "$demo" = false ]; then
  echo "--- starting the manager (Ctrl-C stops it and the sandbox)"
  trap - INT TERM
  "${manager[@]}" &
  pids+=($!)
  wait "${pids[-1]}"
  exit
fi

echo "--- starting the manager (log: $out/manager.log)"
setsid "${manager[@]}" >"$out/manager.log" 2>&1 &
pids+=($!)
# Ready within a second on a quiet machine; the bound is generous for a machine busy with builds.
for _ in $(seq 1 900); do
  curl -sf http://127.0.0.1:9440/readyz >/dev/null 2>&1 && break
  kill -0 "${pids[-1]}" 2>/dev/null || break
  sleep 0.1
done
if ! curl -sf http://127.0.0.1:9440/readyz >/dev/null 2>&1; then
  tail -n 40 "$out/manager.log" >&2
  echo "readyz: $(curl -s http://127.0.0.1:9440/readyz 2>&1 || echo 'no answer')" >&2
  echo "--- the sandbox API server's log (last 20 lines of $out/apiserver.log)" >&2
  tail -n 20 "$out/apiserver.log" >&2
  echo "who listens on 9440: $(ss -ltnp 'sport = :9440' 2>/dev/null | tail -n +2)" >&2
  echo "hack/run.sh: the manager did not become ready in 90 s (log: $out/manager.log)" >&2
  exit 1
fi

# Ctrl-C goes to the stand-in (it deletes the cluster); the script only waits for it.
trap ':' INT
rc=0
"$bin_dir/capi-stand-in" --kubeconfig "$kubeconfig" --network "$network" --out-dir "$out" \
  "${stand_in_args[@]}" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "--- manager log (last 20 lines of $out/manager.log)" >&2
  tail -n 20 "$out/manager.log" >&2
  echo "hack/run.sh: the sandbox run failed (capi-stand-in exited with $rc); cleaning up" >&2
fi
exit "$rc"
