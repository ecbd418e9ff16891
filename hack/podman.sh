#!/usr/bin/env bash
# A private rootful Podman service for the podman lane of the tests (docs/src/podman.md):
#   hack/podman.sh start DIR   installs podman when missing, starts `podman system service` on
#                              DIR/podman.sock, loads the test images, the real node image of
#                              CAPD_REAL_NODE_IMAGE when set (and those of CAPD_PODMAN_EXTRA_IMAGES)
#                              from Docker, prints DOCKER_HOST=unix://...
#   hack/podman.sh rootless DIR starts a rootless service as the user capd-rootless (made when
#                              missing, with subordinate ids) on DIR/rootless/podman.sock, prints
#                              its DOCKER_HOST; it gets no images: it serves the start-up check
#   hack/podman.sh stop DIR    stops the services (the tests remove what they made)
# The service uses its own containers.conf (DIR/containers.conf) with no default ulimits: Podman
# otherwise asks for more open files than some sandboxes allow, and no container starts.
# Podman's own storage and networks are shared with any other Podman use on this machine; the
# lane's objects carry the test labels and are removed by the tests themselves.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
command=${1:-}
dir=${2:-}
[[ -n $command && -n $dir ]] || { sed -n '2,10p' "$0" >&2; exit 2; }
socket=$dir/podman.sock

case "$command" in
  start)
    if ! command -v podman >/dev/null; then
      echo "podman.sh: installing podman" >&2
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman >&2
    fi
    mkdir -p "$dir"
    printf '[containers]\ndefault_ulimits = []\n' > "$dir/containers.conf"
    export CONTAINERS_CONF=$dir/containers.conf
    podman system service --time=0 "unix://$socket" >"$dir/service.log" 2>&1 &
    echo $! > "$dir/service.pid"
    for _ in $(seq 100); do [[ -S $socket ]] && break; sleep 0.1; done
    [[ -S $socket ]] || { cat "$dir/service.log" >&2; echo "podman.sh: the service did not start" >&2; exit 1; }
    # The images the tests run, from Docker (nothing is pulled): Podman names them localhost/...
    # and finds them by their short names.
    # shellcheck disable=SC1091
    source "$root/e2e/images/.build/images.env"
    # The test images' tags change with their recipe; the extra ones (the manager image) are
    # loaded every time, since their tags do not.
    missing=()
    for image in "$CAPD_TEST_NODE_IMAGE" "$CAPD_TEST_HAPROXY_IMAGE" ${CAPD_REAL_NODE_IMAGE:-}; do
      podman image exists "$image" || missing+=("$image")
    done
    read -r -a extra <<< "${CAPD_PODMAN_EXTRA_IMAGES:-}"
    missing+=("${extra[@]}")
    if ((${#missing[@]})); then
      echo "podman.sh: loading ${missing[*]} from Docker" >&2
      docker save "${missing[@]}" | podman load >&2
    fi
    echo "DOCKER_HOST=unix://$socket"
    ;;
  rootless)
    user=capd-rootless
    command -v newuidmap >/dev/null || {
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq uidmap >&2
    }
    id "$user" >/dev/null 2>&1 || useradd --create-home "$user"
    grep -q "^$user:" /etc/subuid || echo "$user:300000:65536" >> /etc/subuid
    grep -q "^$user:" /etc/subgid || echo "$user:300000:65536" >> /etc/subgid
    run=$dir/rootless
    mkdir -p "$run"
    chmod 755 "$dir"
    chown "$user" "$run"
    printf '[containers]\ndefault_ulimits = []\n' > "$run/containers.conf"
    su -s /bin/bash "$user" -c "XDG_RUNTIME_DIR=$run CONTAINERS_CONF=$run/containers.conf \
      podman system service --time=0 unix://$run/podman.sock >$run/service.log 2>&1 & echo \$! > $run/service.pid"
    for _ in $(seq 100); do [[ -S $run/podman.sock ]] && break; sleep 0.1; done
    [[ -S $run/podman.sock ]] || { cat "$run/service.log" >&2; echo "podman.sh: the rootless service did not start" >&2; exit 1; }
    echo "DOCKER_HOST=unix://$run/podman.sock"
    ;;
  stop)
    for pid_file in "$dir/service.pid" "$dir/rootless/service.pid"; do
      if [[ -s $pid_file ]]; then
        kill "$(cat "$pid_file")" 2>/dev/null || true
        rm -f "$pid_file"
      fi
    done
    ;;
  *)
    echo "podman.sh: unknown command $command" >&2
    exit 2
    ;;
esac
