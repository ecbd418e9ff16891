#!/usr/bin/env bash
# A real management plane on this machine's loopback, from binaries you bring (nothing of
# Kubernetes or Cluster API is built or downloaded here; docs/src/contributing.md, "A real
# management plane"):
#
#   hack/real-management.sh up --kubernetes-server DIR --cluster-api DIR [options]
#   hack/real-management.sh down [--dir DIR]
#   hack/real-management.sh restart-manager [--dir DIR]
#   hack/real-management.sh --help
#
# `up` starts etcd (Debian's etcd-server package, installed with apt-get when missing),
# kube-apiserver (token auth, RBAC) and kube-controller-manager (garbage collector and namespace
# deletion only) on 127.0.0.1; writes DIR/kubeconfig; installs Cluster API's CRDs and webhook
# configurations (core, CABPK, KCP) and ours (hack/build-components.sh) with every webhook and CRD
# conversion pointed at a loopback URL with a CA bundle of its own; records the providers as
# clusterctl's inventory when the Cluster API source is given; starts the three Cluster API
# managers (feature gates ClusterTopology=true and MachinePool=true) and ours, and waits until all
# four are ready. It ends by printing `source DIR/env`, which exports KUBECONFIG, the installed
# mode's CAPD_E2E_CAPI and CAPD_E2E_KUBECONFIG, and DOCKER_HOST when the engine is Podman.
# `down` stops what `up` started (by the process ids it recorded) and removes etcd's data.
# `restart-manager` kills our manager with SIGKILL and starts it again with the same command line,
# as a Deployment replaces a deleted Pod; the env file names it as CAPD_E2E_MANAGER_RESTART, which
# the installed mode's killed-manager scenario runs instead of deleting Pods.
#
#   --kubernetes-server DIR  Kubernetes' server binaries: a folder holding kube-apiserver and
#                    kube-controller-manager (or kubernetes/server/bin/, server/bin/, bin/ of it)
#   --cluster-api DIR  Cluster API: the binaries manager, kubeadm-bootstrap-manager and
#                    kubeadm-control-plane-manager (in DIR or DIR/bin) and either its source tree
#                    (config/default, bootstrap/kubeadm/config/default and
#                    controlplane/kubeadm/config/default are rendered with kubectl's kustomize) or
#                    its release files (core-components.yaml, bootstrap-components.yaml,
#                    control-plane-components.yaml)
#   --dir DIR        state, logs and kubeconfig (default out/real-management; git-ignored)
#   --port N         first of the loopback ports (default 16443): kube-apiserver N, etcd N+1 and
#                    N+2, webhooks N+10..N+13, health N+20..N+23, metrics N+30..N+33. A second
#                    plane (for `clusterctl move`) needs another --dir and --port
#   --engine E       where our manager makes containers: docker (DOCKER_HOST or the local Docker),
#                    podman (a private rootful Podman service, hack/podman.sh, for real nodes when
#                    Docker refuses privileged containers), auto (the default: podman when
#                    CAPD_REAL_NODE_IMAGE is set and Docker refuses privileged containers)
#   --manager PATH   our manager binary (default target/release/manager, else target/debug/manager,
#                    else built with `cargo build --bin manager`)
# Needs kubectl, openssl, jq, curl; root for apt-get and Podman.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
me="real-management.sh"
say() { echo "--- $*"; }
fail() { echo "$me: $*" >&2; exit 1; }
usage() { sed -n '2,43p' "$0"; }

command=""
k8s_dir="" capi_dir="" dir="$root/out/real-management" port=16443 engine=auto manager=""
while (($#)); do
  case "$1" in
    up|down|restart-manager) command=$1; shift ;;
    --kubernetes-server|--cluster-api|--dir|--port|--engine|--manager)
      [[ $# -ge 2 && $2 != --* ]] || { echo "$me: $1 needs a value (see --help)" >&2; exit 2; }
      case "$1" in
        --kubernetes-server) k8s_dir=$2 ;; --cluster-api) capi_dir=$2 ;; --dir) dir=$2 ;;
        --port) port=$2 ;; --engine) engine=$2 ;; --manager) manager=$2 ;;
      esac
      shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$me: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $command ]] || { echo "$me: say up, down or restart-manager (see --help)" >&2; exit 2; }
[[ $port =~ ^[0-9]+$ ]] && ((port >= 1024 && port <= 65000)) \
  || { echo "$me: --port $port: expected a number from 1024 to 65000" >&2; exit 2; }
case "$engine" in auto|docker|podman) ;; *) echo "$me: --engine $engine: expected auto, docker or podman" >&2; exit 2 ;; esac
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pids="$dir/pids" logs="$dir/logs"

# Stops what `up` recorded, each process by its id, the managers first; then the Podman service.
stop_order="capd-rs-manager capi-kubeadm-control-plane-manager capi-kubeadm-bootstrap-manager capi-manager kube-controller-manager kube-apiserver etcd"
down() {
  local name pid
  for name in $stop_order; do
    [[ -s $pids/$name.pid ]] || continue
    pid=$(cat "$pids/$name.pid")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      say "stopped $name ($pid)"
    fi
    rm -f "$pids/$name.pid"
  done
  if [[ -d $dir/podman ]]; then bash "$root/hack/podman.sh" stop "$dir/podman"; fi
  rm -rf "$dir/etcd"
}
if [[ $command == down ]]; then down; say "down (logs kept in $logs)"; exit 0; fi

# Kills our manager (SIGKILL, no goodbye) and starts it again from the command line `up` recorded,
# appending to its log; waits until it is ready again.
restart_manager() {
  [[ -s $pids/capd-rs-manager.pid && -s $dir/capd-rs-manager.command ]] \
    || fail "no manager of ours recorded in $dir: start the plane with up first"
  local pid ready
  pid=$(cat "$pids/capd-rs-manager.pid")
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "the manager ($pid) survived SIGKILL"
  say "killed capd-rs-manager ($pid)"
  ready=$(cat "$dir/capd-rs-manager.ready")
  # The recorded line is quoted word by word (printf %q).
  eval "setsid $(cat "$dir/capd-rs-manager.command") >>\"\$logs/capd-rs-manager.log\" 2>&1 < /dev/null &"
  echo $! > "$pids/capd-rs-manager.pid"
  for _ in $(seq 900); do
    curl -fsS -o /dev/null "$ready" 2>/dev/null && { say "capd-rs-manager started again ($(cat "$pids/capd-rs-manager.pid")) and ready"; return 0; }
    sleep 0.2
  done
  fail "capd-rs-manager not ready again in 180s (log: $logs/capd-rs-manager.log)"
}
if [[ $command == restart-manager ]]; then restart_manager; exit 0; fi

# --- what the user brings -------------------------------------------------------------------------
[[ -n $k8s_dir ]] || fail "no Kubernetes server binaries: pass --kubernetes-server DIR, a folder holding kube-apiserver and kube-controller-manager (Kubernetes' release archive kubernetes-server-linux-amd64.tar.gz unpacked, or your own build)"
[[ -n $capi_dir ]] || fail "no Cluster API: pass --cluster-api DIR, a folder holding its binaries manager, kubeadm-bootstrap-manager and kubeadm-control-plane-manager and its source tree or release files (core-components.yaml, bootstrap-components.yaml, control-plane-components.yaml)"
[[ -d $k8s_dir ]] || fail "--kubernetes-server $k8s_dir: no such folder"
[[ -d $capi_dir ]] || fail "--cluster-api $capi_dir: no such folder"
# The first of DIR/<sub> that holds a binary named $2, else empty.
find_bin() {
  local base=$1 name=$2 sub
  for sub in "" bin kubernetes/server/bin server/bin; do
    if [[ -f $base/$sub/$name && -x $base/$sub/$name ]]; then echo "$base/${sub:+$sub/}$name"; return; fi
  done
}
missing=()
declare -A bin
for name in kube-apiserver kube-controller-manager; do
  bin[$name]=$(find_bin "$k8s_dir" "$name")
  [[ -n ${bin[$name]} ]] || missing+=("$name (in --kubernetes-server $k8s_dir)")
done
for name in manager kubeadm-bootstrap-manager kubeadm-control-plane-manager; do
  bin[$name]=$(find_bin "$capi_dir" "$name")
  [[ -n ${bin[$name]} ]] || missing+=("$name (in --cluster-api $capi_dir or its bin/)")
done
# Cluster API's manifests: the release files, else the source tree's kustomizations.
declare -A manifest=([core]=core-components.yaml [bootstrap]=bootstrap-components.yaml [control-plane]=control-plane-components.yaml)
declare -A kustomization=([core]=config/default [bootstrap]=bootstrap/kubeadm/config/default [control-plane]=controlplane/kubeadm/config/default)
for part in core bootstrap control-plane; do
  if [[ -f $capi_dir/${manifest[$part]} ]]; then
    manifest[$part]="file:$capi_dir/${manifest[$part]}"
  elif [[ -f $capi_dir/${kustomization[$part]}/kustomization.yaml ]]; then
    manifest[$part]="kustomize:$capi_dir/${kustomization[$part]}"
  else
    missing+=("Cluster API's $part manifests (${manifest[$part]} or the source tree's ${kustomization[$part]}/ in $capi_dir)")
  fi
done
for tool in kubectl openssl jq curl; do
  command -v "$tool" >/dev/null || missing+=("the command $tool")
done
if ((${#missing[@]})); then
  printf '%s: missing:\n' "$me" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
if ! command -v etcd >/dev/null; then
  say "installing etcd (Debian's etcd-server)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null \
    || fail "could not install Debian's etcd-server with apt-get"
  # The package starts a system etcd on the default ports where an init system runs; ours is
  # separate (its own ports and data under $dir).
fi

# Our manager: the one given, else one built here (the project's own code only).
if [[ -z $manager ]]; then
  for candidate in "$root/target/release/manager" "$root/target/debug/manager"; do
    [[ -x $candidate ]] && { manager=$candidate; break; }
  done
fi
if [[ -z $manager ]]; then
  say "building our manager (cargo build --bin manager)"
  (cd "$root" && cargo build --quiet --bin manager)
  manager="$root/target/debug/manager"
fi
[[ -x $manager ]] || fail "--manager $manager: not an executable"

# --- start from nothing -----------------------------------------------------------------------------
if [[ -d $pids ]] && ls "$pids"/*.pid >/dev/null 2>&1; then
  fail "a plane already runs from $dir: run \`$0 down --dir $dir\` first"
fi
rm -rf "$dir/etcd" "$dir/pki" "$dir/components" "$logs"
mkdir -p "$pids" "$logs" "$dir/pki/webhook" "$dir/components"
cleanup_on_failure() { local rc=$?; if ((rc)); then echo "$me: up failed; stopping what it started (logs in $logs)" >&2; down >&2; fi; }
trap cleanup_on_failure EXIT

# A process of the plane, in a session of its own, its id recorded for `down`.
start() {
  local name=$1; shift
  setsid "$@" >"$logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$pids/$name.pid"
}
# Waits until `curl ARGS` succeeds, or fails naming the process and its log.
wait_for() {
  local name=$1 seconds=$2; shift 2
  for _ in $(seq $((seconds * 5))); do
    curl -fsS -o /dev/null "$@" 2>/dev/null && return 0
    kill -0 "$(cat "$pids/$name.pid")" 2>/dev/null || { tail -n 20 "$logs/$name.log" >&2; fail "$name exited (log: $logs/$name.log)"; }
    sleep 0.2
  done
  tail -n 20 "$logs/$name.log" >&2
  fail "$name not ready in ${seconds}s (log: $logs/$name.log)"
}

# --- certificates and credentials -------------------------------------------------------------------
pki=$dir/pki
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=capd-rs real management CA" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$pki/webhook/tls.key" \
  -out "$pki/serving.csr" 2>/dev/null
openssl x509 -req -in "$pki/serving.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -days 30 -out "$pki/webhook/tls.crt" \
  -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n') 2>/dev/null
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
token=$(openssl rand -hex 24)
printf '%s,admin,admin,system:masters\n' "$token" > "$pki/tokens.csv"
chmod 600 "$pki"/*.key "$pki/webhook/tls.key" "$pki/tokens.csv"
ca_bundle=$(base64 -w0 < "$pki/ca.crt")

kubeconfig=$dir/kubeconfig
cat > "$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real-management
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $ca_bundle
users:
- name: admin
  user:
    token: $token
contexts:
- name: real-management
  context: {cluster: real-management, user: admin}
current-context: real-management
EOF
chmod 600 "$kubeconfig"
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# --- etcd, kube-apiserver, kube-controller-manager ----------------------------------------------
say "etcd $(etcd --version 2>/dev/null | head -n 1 | awk '{print $NF}') on 127.0.0.1:$((port + 1))"
start etcd etcd --name real-management --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$((port + 1))" --advertise-client-urls "http://127.0.0.1:$((port + 1))" \
  --listen-peer-urls "http://127.0.0.1:$((port + 2))" --initial-advertise-peer-urls "http://127.0.0.1:$((port + 2))" \
  --initial-cluster "real-management=http://127.0.0.1:$((port + 2))"
wait_for etcd 30 "http://127.0.0.1:$((port + 1))/health"

openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$pki/apiserver.key" \
  -out "$pki/apiserver.csr" 2>/dev/null
openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -days 30 -out "$pki/apiserver.crt" \
  -extfile <(printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\n') 2>/dev/null
say "kube-apiserver $("${bin[kube-apiserver]}" --version | awk '{print $NF}') on https://127.0.0.1:$port"
start kube-apiserver "${bin[kube-apiserver]}" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
  --secure-port "$port" --etcd-servers "http://127.0.0.1:$((port + 1))" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.pub" \
  --service-account-signing-key-file "$pki/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --allow-privileged=true
wait_for kube-apiserver 120 --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$port/readyz"
start kube-controller-manager "${bin[kube-controller-manager]}" --kubeconfig "$kubeconfig" \
  --controllers garbagecollector,namespace --leader-elect=false --secure-port 0 \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt"
sleep 1
kill -0 "$(cat "$pids/kube-controller-manager.pid")" 2>/dev/null \
  || { tail -n 20 "$logs/kube-controller-manager.log" >&2; fail "kube-controller-manager exited"; }

# --- the components -------------------------------------------------------------------------------
# Every provider's components, rendered as clusterctl would install them. Without KUBECONFIG:
# a kubectl that picks its version by the server's (Google Cloud SDK's dispatcher) would otherwise
# render with the kustomize of an older kubectl, which cannot read Cluster API's kustomizations.
say "rendering the components"
for part in core bootstrap control-plane; do
  source=${manifest[$part]}
  case "$source" in
    file:*) cp "${source#file:}" "$dir/components/$part.yaml" ;;
    kustomize:*) env -u KUBECONFIG kubectl kustomize "${source#kustomize:}" > "$dir/components/$part.yaml" ;;
  esac
done
env -u KUBECONFIG bash "$root/hack/build-components.sh" "$dir/components/ours" >/dev/null
cp "$dir/components/ours/infrastructure-components.yaml" "$dir/components/infrastructure.yaml"

# Of a multi-document YAML file: the documents of the cluster-scoped kinds the plane needs.
pick() {
  awk 'function flush() { if (keep) printf "---\n%s", doc; doc = ""; keep = 0 }
       /^---/ { flush(); next }
       /^kind: (CustomResourceDefinition|MutatingWebhookConfiguration|ValidatingWebhookConfiguration)[[:space:]]*$/ { keep = 1 }
       { doc = doc $0 "\n" }
       END { flush() }' "$1"
}
# provider label | webhook port offset
declare -A provider=([core]=cluster-api [bootstrap]=bootstrap-kubeadm [control-plane]=control-plane-kubeadm [infrastructure]=infrastructure-docker)
declare -A offset=([core]=0 [bootstrap]=1 [control-plane]=2 [infrastructure]=3)
# Replaces every object of a kind with a label by what a jq filter makes of it ($url, $ca).
rewrite() {
  local kind=$1 label=$2 filter=$3 url=$4 list
  list=$(k get "$kind" -l "$label" -o json)
  [[ $(jq '.items | length' <<< "$list") -gt 0 ]] || return 0
  jq --arg url "$url" --arg ca "$ca_bundle" ".items |= map($filter)" <<< "$list" | k replace -f - >/dev/null
}
for part in core bootstrap control-plane infrastructure; do
  pick "$dir/components/$part.yaml" > "$dir/components/$part.picked.yaml"
  k apply --server-side --force-conflicts -f "$dir/components/$part.picked.yaml" >/dev/null
  url="https://127.0.0.1:$((port + 10 + offset[$part]))"
  label="cluster.x-k8s.io/provider=${provider[$part]}"
  # Webhooks and conversions at the manager's loopback port, trusted through our CA.
  for kind in mutatingwebhookconfigurations validatingwebhookconfigurations; do
    rewrite "$kind" "$label" '.webhooks |= map(.clientConfig = {url: ($url + (.clientConfig.service.path // "/")), caBundle: $ca})' "$url"
  done
  rewrite crd "$label" 'if .spec.conversion.strategy == "Webhook" then .spec.conversion.webhook.clientConfig = {url: ($url + "/convert"), caBundle: $ca} else . end' "$url"
  say "installed ${provider[$part]}: $(k get crd -l "$label" -o name | wc -l) CRDs, webhooks at $url"
done
for namespace in capi-system capi-kubeadm-bootstrap-system capi-kubeadm-control-plane-system capd-system; do
  k create namespace "$namespace" --dry-run=client -o yaml | k apply -f - >/dev/null
done

# clusterctl's inventory (for `clusterctl move` and `upgrade`), from the source tree's copy.
inventory=$capi_dir/cmd/clusterctl/config/manifest/clusterctl-api.yaml
# Cluster API's version: what its clusterctl says, else the tag of the release files' core image.
capi_version=""
clusterctl=$(find_bin "$capi_dir" clusterctl)
if [[ -n $clusterctl ]]; then capi_version=$("$clusterctl" version -o short 2>/dev/null || true); fi
if [[ ! $capi_version =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
  capi_version=$(sed -n 's#.*image: .*/cluster-api-controller:\(v[0-9][0-9.]*\)$#\1#p' "$dir/components/core.yaml" | head -n 1)
fi
if [[ -f $inventory && -n $capi_version ]]; then
  k apply --server-side -f "$inventory" >/dev/null
  k wait --for condition=Established crd/providers.clusterctl.cluster.x-k8s.io --timeout 60s >/dev/null
  ours_version=$(sed -n 's/.*"nextVersion"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$root/clusterctl-settings.json")
  for record in "capi-system cluster-api cluster-api CoreProvider $capi_version" \
    "capi-kubeadm-bootstrap-system bootstrap-kubeadm kubeadm BootstrapProvider $capi_version" \
    "capi-kubeadm-control-plane-system control-plane-kubeadm kubeadm ControlPlaneProvider $capi_version" \
    "capd-system infrastructure-docker docker InfrastructureProvider $ours_version"; do
    read -r namespace name provider_name type version <<< "$record"
    k apply -f - >/dev/null <<EOF
apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Provider
metadata:
  name: $name
  namespace: $namespace
  labels: {clusterctl.cluster.x-k8s.io: "", cluster.x-k8s.io/provider: $name}
providerName: $provider_name
type: $type
version: $version
EOF
  done
  # clusterctl init labels every object it installs so; `clusterctl move` moves the kinds of the
  # CRDs that carry the label.
  k label crd -l cluster.x-k8s.io/provider --overwrite clusterctl.cluster.x-k8s.io= >/dev/null
  say "recorded the providers in clusterctl's inventory (Cluster API $capi_version)"
else
  say "no clusterctl inventory (clusterctl move needs it): it needs Cluster API's source tree ($inventory) and its version (a clusterctl beside the managers says it)"
fi

# --- the engine -----------------------------------------------------------------------------------
engine_env=()
if [[ $engine == auto ]]; then
  engine=docker
  if [[ -n ${CAPD_REAL_NODE_IMAGE:-} ]] \
    && ! docker run --rm --privileged --entrypoint true "$CAPD_REAL_NODE_IMAGE" >/dev/null 2>&1; then
    engine=podman
  fi
fi
if [[ $engine == podman ]]; then
  say "engine: a private rootful Podman service (hack/podman.sh; loads the images from Docker)"
  host=$(setsid -w bash "$root/hack/podman.sh" start "$dir/podman")
  engine_env+=("$host")
else
  say "engine: ${DOCKER_HOST:-the local Docker engine}"
  if [[ -n ${DOCKER_HOST:-} ]]; then engine_env+=("DOCKER_HOST=$DOCKER_HOST"); fi
fi

# --- the managers ---------------------------------------------------------------------------------
# The flags every manager gets; $1: its number (0 core, 1 CABPK, 2 KCP, 3 ours).
flags() {
  flags=(--kubeconfig "$kubeconfig" --leader-elect=false --webhook-port $((port + 10 + $1))
    --webhook-cert-dir "$pki/webhook" --health-addr "127.0.0.1:$((port + 20 + $1))"
    --diagnostics-address "127.0.0.1:$((port + 30 + $1))" --insecure-diagnostics)
}
flags 0
start capi-manager env POD_NAMESPACE=capi-system "${bin[manager]}" "${flags[@]}" \
  --feature-gates=ClusterTopology=true,MachinePool=true
flags 1
start capi-kubeadm-bootstrap-manager env POD_NAMESPACE=capi-kubeadm-bootstrap-system \
  "${bin[kubeadm-bootstrap-manager]}" "${flags[@]}" --feature-gates=ClusterTopology=true,MachinePool=true
flags 2
start capi-kubeadm-control-plane-manager env POD_NAMESPACE=capi-kubeadm-control-plane-system \
  "${bin[kubeadm-control-plane-manager]}" "${flags[@]}" --feature-gates=ClusterTopology=true
flags 3
ours=(env POD_NAMESPACE=capd-system "${engine_env[@]}" "$manager" "${flags[@]}"
  --feature-gates=ClusterTopology=true,MachinePool=true)
start capd-rs-manager "${ours[@]}"
printf '%q ' "${ours[@]}" > "$dir/capd-rs-manager.command"
echo "http://127.0.0.1:$((port + 23))/readyz" > "$dir/capd-rs-manager.ready"
for pair in capi-manager:0 capi-kubeadm-bootstrap-manager:1 capi-kubeadm-control-plane-manager:2 capd-rs-manager:3; do
  wait_for "${pair%%:*}" 180 "http://127.0.0.1:$((port + 20 + ${pair##*:}))/readyz"
done
say "all four managers ready"

{
  echo "export KUBECONFIG=$kubeconfig"
  echo "export CAPD_E2E_KUBECONFIG=$kubeconfig"
  echo "export CAPD_E2E_CAPI=installed"
  printf 'export CAPD_E2E_MANAGER_RESTART=%q\n' "bash $(printf %q "$root/hack/real-management.sh") restart-manager --dir $(printf %q "$dir")"
  for e in "${engine_env[@]}"; do echo "export $e"; done
} > "$dir/env"
trap - EXIT
say "up: source $dir/env   (stop with: $0 down --dir $dir; logs in $logs)"
