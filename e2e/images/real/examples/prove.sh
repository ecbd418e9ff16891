#!/usr/bin/env bash
# Proves the real node image by hand under Podman, with capd-rs's node run options, the way the
# provider would drive it: a private rootful Podman service (as hack/podman.sh starts it), node
# containers created through its Docker-compatible API with the body capd-rs sends (privileged,
# seccomp/AppArmor unconfined, tmpfs /run and /tmp, an anonymous /var volume, /lib/modules:ro,
# a private cgroup namespace, a tty, restart on-failure:1, KUBECONFIG and 127.0.0.1::6443 on
# control planes), then `kubeadm init` on a control plane, `kubeadm join` of a worker and
# `kubeadm join --control-plane` of a second control plane (stacked etcd), with the configs
# beside this script and capd-rs's --ignore-preflight-errors. Prints timings; removes everything
# it made (KEEP=1 keeps the cluster and the service).
#
# Usage: CAPD_REAL_NODE_IMAGE=... bash e2e/images/real/examples/prove.sh   (the image of
# e2e/images/real/build.sh; needs root, podman, curl, openssl, kubectl; the configs beside it
# name Kubernetes v1.28.4: edit kubernetesVersion for another version)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image=${CAPD_REAL_NODE_IMAGE:?set CAPD_REAL_NODE_IMAGE to the image build.sh printed}
work=${PROVE_DIR:-/tmp/capd-real-prove}
cluster=capd-real
net=capd-real-prove
cp1=$cluster-cp1 w1=$cluster-w1 cp2=$cluster-cp2
preflight=--ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables
sock=$work/podman.sock

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "prove: $*" >&2; }
timings=()
record() { timings+=("$(printf '%-44s %6ss' "$1" "$2")"); say "$1: $2s"; }

cleanup() {
  if [[ ${KEEP:-0} == 1 ]]; then say "KEEP=1: leaving $cp1 $w1 $cp2, network $net and the service ($sock)"; return; fi
  for c in $cp1 $w1 $cp2; do podman rm -f -v "$c" >/dev/null 2>&1 || true; done
  podman network rm -f "$net" >/dev/null 2>&1 || true
  if [[ -s $work/service.pid ]]; then kill "$(cat "$work/service.pid")" 2>/dev/null || true; fi
  rm -f "$work/service.pid"
}
trap cleanup EXIT

# --- the private Podman service and the image ------------------------------------------------
command -v podman >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman; }
mkdir -p "$work"
# A service a KEEP=1 run left behind (ours: its pid is in our own file) is stopped first.
if [[ -s $work/service.pid ]]; then kill "$(cat "$work/service.pid")" 2>/dev/null || true; sleep 1; fi
rm -f "$sock"
printf '[containers]\ndefault_ulimits = []\n' > "$work/containers.conf"
CONTAINERS_CONF=$work/containers.conf podman system service --time=0 "unix://$sock" >"$work/service.log" 2>&1 &
echo $! > "$work/service.pid"
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
if ! podman image exists "$image"; then
  t=$(now)
  say "loading $image from Docker"
  docker save "$image" | podman load >/dev/null
  record "docker save | podman load" "$(since "$t")"
fi
podman network exists "$net" || podman network create "$net" >/dev/null

api() { curl -sS --fail-with-body --unix-socket "$sock" -H 'Content-Type: application/json' "$@"; }

# create_node NAME ROLE: the create body of src/docker/engine/convert.rs for a node spec, or with
# PROVE_ENGINE=cli the same options through `podman create` (where --cgroupns=private is honoured;
# Podman 4.3's Docker-compatible API ignores HostConfig.CgroupnsMode).
create_node() {
  if [[ ${PROVE_ENGINE:-api} == cli ]]; then create_node_cli "$@"; return; fi
  local name=$1 role=$2 env='[]' ports='' exposed=''
  if [[ $role == control-plane ]]; then
    env='["KUBECONFIG=/etc/kubernetes/admin.conf"]'
    exposed='"ExposedPorts":{"6443/tcp":{}},'
    ports='"PortBindings":{"6443/tcp":[{"HostIp":"127.0.0.1","HostPort":""}]},'
  fi
  api -X POST "http://d/v1.41/containers/create?name=$name" -d @- >/dev/null <<EOF
{"Hostname":"$name","Image":"$image","Tty":true,"Env":$env,$exposed
 "Labels":{"io.x-k8s.kind.cluster":"$cluster","io.x-k8s.kind.role":"$role"},
 "Volumes":{"/var":{}},
 "HostConfig":{"Privileged":true,"SecurityOpt":["seccomp=unconfined","apparmor=unconfined"],
  "Tmpfs":{"/tmp":"","/run":""},"Binds":["/lib/modules:/lib/modules:ro"],$ports
  "RestartPolicy":{"Name":"on-failure","MaximumRetryCount":1},"CgroupnsMode":"private",
  "NetworkMode":"$net","Init":false}}
EOF
  api -X POST "http://d/v1.41/containers/$name/start" >/dev/null
}

create_node_cli() {
  local name=$1 role=$2 extra=()
  [[ $role == control-plane ]] && extra=(-e KUBECONFIG=/etc/kubernetes/admin.conf -p 127.0.0.1::6443)
  CONTAINERS_CONF=$work/containers.conf podman create --name "$name" --hostname "$name" -t \
    --label "io.x-k8s.kind.cluster=$cluster" --label "io.x-k8s.kind.role=$role" \
    --privileged --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --tmpfs /tmp --tmpfs /run -v /var -v /lib/modules:/lib/modules:ro --cgroupns=private \
    --restart on-failure:1 --network "$net" "${extra[@]}" "$image" >/dev/null
  CONTAINERS_CONF=$work/containers.conf podman start "$name" >/dev/null
}

# boot_node NAME ROLE: creates and starts it, waits for systemd's multi-user line (what the
# provider waits for), for `systemctl is-system-running`, then runs the provider's runtime check.
boot_node() {
  local name=$1 role=$2 t state
  t=$(now)
  create_node "$name" "$role"
  record "$name: create+start" "$(since "$t")"
  say "$name: cgroup namespace $(podman container inspect -f '{{.HostConfig.CgroupMode}}' "$name")"
  until podman logs "$name" 2>&1 | grep -q 'Reached target .*Multi-User System'; do
    podman container inspect -f '{{.State.Running}}' "$name" | grep -q true || { podman logs "$name" | tail -30 >&2; exit 1; }
    sleep 0.2
  done
  record "$name: start to 'Reached target Multi-User System'" "$(since "$t")"
  for _ in $(seq 300); do
    state=$(podman exec "$name" systemctl is-system-running 2>/dev/null || true)
    [[ $state == running || $state == degraded ]] && break
    sleep 0.2
  done
  record "$name: start to is-system-running=$state" "$(since "$t")"
  [[ $state == running ]] || podman exec "$name" systemctl --failed --no-legend >&2 || true
  for _ in $(seq 8); do podman exec "$name" crictl ps >/dev/null 2>&1 && break; sleep 0.5; done
  podman exec "$name" crictl ps >/dev/null
}

ip_of() { podman container inspect -f "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}" "$1"; }

# render FILE: the config beside this script with ${CP_IP} ${TOKEN} ${CA_HASH} ${CERT_KEY} filled in.
render() {
  sed -e "s|\${CP_IP}|$cp_ip|g" -e "s|\${TOKEN}|$token|g" -e "s|\${CA_HASH}|${ca_hash:-}|g" \
    -e "s|\${CERT_KEY}|$cert_key|g" "$here/$1"
}

# bootstrap NAME CONFIG PATH ARGS...: writes the config as the provider's write_files does and runs
# kubeadm as its runcmd rewrite does (sentinel, then kubeadm with capd-rs's preflight flag).
bootstrap() {
  local name=$1 config=$2 path=$3; shift 3
  render "$config" | podman exec -i "$name" /bin/sh -c "mkdir -p $(dirname "$path") && cat > $path /dev/stdin"
  podman exec "$name" /bin/sh -c "mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && kubeadm $* $preflight --config $path && echo success > /run/cluster-api/bootstrap-success.complete" \
    > "$work/$name-kubeadm.log" 2>&1 || { tail -40 "$work/$name-kubeadm.log" >&2; exit 1; }
}

kubectl_() { kubectl --kubeconfig "$work/admin.conf" "$@"; }

# --- the cluster ------------------------------------------------------------------------------
say "image $image, network $net, containers created through ${PROVE_ENGINE:-api}"
[[ ${PROVE_ENGINE:-api} == cli ]] || say "(the Docker-compatible API of the Podman service, as capd-rs creates them)"
boot_node "$cp1" control-plane
cp_ip=$(ip_of "$cp1")
token="$(openssl rand -hex 3).$(openssl rand -hex 8)"
cert_key=$(openssl rand -hex 32)
t=$(now)
bootstrap "$cp1" kubeadm-init.yaml /run/kubeadm/kubeadm.yaml init --upload-certs
record "$cp1: kubeadm init" "$(since "$t")"
podman exec "$cp1" cat /etc/kubernetes/admin.conf > "$work/admin.conf"
ca_hash="sha256:$(podman exec "$cp1" cat /etc/kubernetes/pki/ca.crt | openssl x509 -pubkey -noout \
  | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)"
kubectl_ wait --for=condition=Ready "node/$cp1" --timeout=180s >/dev/null
record "$cp1: start of init to node Ready" "$(since "$t")"

boot_node "$w1" worker
t=$(now)
bootstrap "$w1" kubeadm-join-worker.yaml /run/kubeadm/kubeadm-join-config.yaml join
record "$w1: kubeadm join" "$(since "$t")"
kubectl_ wait --for=condition=Ready "node/$w1" --timeout=180s >/dev/null
record "$w1: start of join to node Ready" "$(since "$t")"

boot_node "$cp2" control-plane
t=$(now)
bootstrap "$cp2" kubeadm-join-control-plane.yaml /run/kubeadm/kubeadm-join-config.yaml join
record "$cp2: kubeadm join --control-plane" "$(since "$t")"
kubectl_ wait --for=condition=Ready "node/$cp2" --timeout=180s >/dev/null
record "$cp2: start of join to node Ready" "$(since "$t")"

# --- what the cluster looks like ------------------------------------------------------------
kubectl_ get nodes -o wide
kubectl_ wait -n kube-system --for=condition=Ready pod -l k8s-app=kube-proxy --timeout=120s >/dev/null
kubectl_ get pods -A -o wide
etcd_flags="--endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key"
say "etcd members (etcdctl in etcd-$cp2, through the kubelet's exec):"
# shellcheck disable=SC2086
kubectl_ exec -n kube-system "etcd-$cp2" -- etcdctl $etcd_flags member list -w table
# shellcheck disable=SC2086
kubectl_ exec -n kube-system "etcd-$cp2" -- etcdctl $etcd_flags endpoint status --cluster -w table
say "the API server of $cp2 (its own etcd member):"
for _ in $(seq 60); do
  kubectl_ --server "https://$(ip_of "$cp2"):6443" get --raw /readyz >/dev/null 2>&1 && break; sleep 1
done
kubectl_ --server "https://$(ip_of "$cp2"):6443" get --raw '/readyz?verbose' | grep -E 'etcd|readyz check'
say "kube-proxy's rules on $w1 (iptables-nft):"
podman exec "$w1" iptables -t nat -S KUBE-SERVICES | grep -c 'default/kubernetes' | sed 's/^/  rules for default\/kubernetes: /'
# A pod on the worker: its sandbox (pause), the bridge CNI and the kubelet's volumes.
kubectl_ run probe --image=registry.k8s.io/kube-proxy:v1.28.4 --image-pull-policy=Never --restart=Never \
  --overrides="{\"spec\":{\"nodeName\":\"$w1\"}}" --command -- /usr/local/bin/kube-proxy --version >/dev/null
for _ in $(seq 60); do
  [[ $(kubectl_ get pod probe -o jsonpath='{.status.phase}') == Succeeded ]] && break; sleep 1
done
say "pod probe on $w1: $(kubectl_ get pod probe -o jsonpath='{.status.phase}'), printed: $(kubectl_ logs probe)"
kubectl_ run probe-pause --image=registry.k8s.io/pause:3.9 --image-pull-policy=Never \
  --overrides="{\"spec\":{\"nodeName\":\"$w1\"}}" >/dev/null
kubectl_ wait --for=condition=Ready pod/probe-pause --timeout=60s >/dev/null
say "pod probe-pause on $w1: Ready, address $(kubectl_ get pod probe-pause -o jsonpath='{.status.podIP}') (bridge CNI)"

echo
echo "Timings ($image):"
printf '  %s\n' "${timings[@]}"
