#!/usr/bin/env bash
# Builds capd-test/realnode:<hash>, a real Kubernetes node image (the kindest/node of capd-rs's
# tests): Debian bookworm with systemd, containerd, runc and the CNI plugins from Debian's
# packages; kubelet, kubeadm and the control-plane images built from the Kubernetes source in
# ../shared/k8s; the control-plane images preloaded into containerd (nothing is ever pulled).
# See README.md beside this script.
#
# Usage: e2e/images/real/build.sh [--check] [--force]
#   --check  only report whether the image exists (exit 1 when it does not)
#   --force  rebuild the image even when it exists (the compiled binaries stay cached)
# Prints CAPD_REAL_NODE_IMAGE=... and writes it to e2e/images/.build/real.env (git-ignored).
# <hash> covers this directory's recipe (build.sh, rootfs/, crictl/, pause/), the Debian suite
# and package list, and the sha256 of the Kubernetes source tarball.
# Environment:
#   CAPD_K8S_SRC     the Kubernetes source tarball, or the folder holding it
#                    (default: <repo>/../shared/k8s/kubernetes-v1.28.4-src.tar.xz)
#   CAPD_CACHE_DIR   compiled binaries and Go's cache (default /var/cache/capd-rs), outside the repo
#   DEBIAN_MIRROR    (default http://deb.debian.org/debian), DEBIAN_SUITE (default bookworm)
# Needs root (debootstrap, chroot, mounts) and Docker; installs what it lacks with apt-get.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
build_dir="$(cd "$here/.." && pwd)/.build"
env_file="$build_dir/real.env"
suite="${DEBIAN_SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${CAPD_CACHE_DIR:-/var/cache/capd-rs}"
k8s_version=v1.28.4
k8s_src="${CAPD_K8S_SRC:-$repo/../shared/k8s}"
[[ -d $k8s_src ]] && k8s_src="$k8s_src/kubernetes-$k8s_version-src.tar.xz"
# The node's packages (debootstrap --variant=minbase adds these and their dependencies).
packages="systemd,systemd-sysv,containerd,runc,containernetworking-plugins,iptables,nftables,conntrack,socat,ethtool,ebtables,kmod,mount,util-linux,procps,iproute2,ca-certificates,netbase,libseccomp2"
# The images kubeadm v1.28.4 asks for, made here (CoreDNS is not: see README.md).
etcd_image=registry.k8s.io/etcd:3.5.9-0
pause_image=registry.k8s.io/pause:3.9
k8s_cmds="kubelet kubeadm kube-apiserver kube-controller-manager kube-scheduler kube-proxy"

check_only=false
force=false
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    --force) force=true ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

log() { echo "build.sh: $*" >&2; }

[[ -f $k8s_src ]] || { log "no Kubernetes source tarball at $k8s_src (set CAPD_K8S_SRC)"; exit 1; }
k8s_sha="$(sha256sum "$k8s_src" | cut -d' ' -f1)"

recipe_hash() {
  (
    cd "$here"
    printf 'suite=%s packages=%s k8s=%s %s\n' "$suite" "$packages" "$k8s_version" "$k8s_sha"
    find build.sh rootfs crictl pause -type f -print0 | sort -z | xargs -0 sha256sum
    find build.sh rootfs crictl pause -type f -print0 | sort -z | xargs -0 stat -c '%a %n'
  ) | sha256sum | cut -c1-12
}

hash="$(recipe_hash)"
image="capd-test/realnode:$hash"

write_env() {
  mkdir -p "$build_dir"
  printf 'CAPD_REAL_NODE_IMAGE=%s\n' "$image" > "$env_file.tmp"
  mv "$env_file.tmp" "$env_file"
  cat "$env_file"
}

have_image() { docker image inspect "$image" >/dev/null 2>&1; }

if $check_only; then
  if have_image; then write_env; exit 0; fi
  log "image $image is missing; run e2e/images/real/build.sh"
  exit 1
fi

mkdir -p "$build_dir"
exec 9>"$build_dir/real.lock"
flock 9

if ! $force && have_image; then
  log "image for recipe $hash already present"
  write_env
  exit 0
fi

start=$(date +%s)
step_start=$start
step() {
  local now; now=$(date +%s)
  log "$* (+$((now - step_start))s, $((now - start))s in all)"
  step_start=$now
}

# --- tools -----------------------------------------------------------------------------------
apt_updated=false
apt_install() {
  if ! $apt_updated; then apt-get update -qq >&2; apt_updated=true; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# Go: Debian's golang-1.24-go where the suite has it (trixie, newer backports), else golang-1.23-go
# from bookworm-backports (the source's go.mod asks for Go 1.20; both build it).
find_go() {
  local v
  for v in 1.24 1.23; do
    if [[ -x /usr/lib/go-$v/bin/go ]]; then echo "/usr/lib/go-$v"; return 0; fi
  done
  return 1
}
ensure_go() {
  goroot="$(find_go)" && return 0
  apt-get update -qq >&2; apt_updated=true
  if apt-cache show golang-1.24-go >/dev/null 2>&1; then
    apt_install golang-1.24-go
  else
    local codename
    codename="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)"
    if ! apt-cache show golang-1.23-go >/dev/null 2>&1; then
      log "adding ${codename}-backports to apt's sources for golang-1.23-go"
      printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" "$codename" > /etc/apt/sources.list.d/capd-rs-backports.sources
      apt-get update -qq >&2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -t "$codename-backports" golang-1.23-go >&2
  fi
  goroot="$(find_go)"
}

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v gcc >/dev/null || missing+=(gcc)
[[ -f /usr/lib/x86_64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
command -v python3 >/dev/null || missing+=(python3)
command -v file >/dev/null || missing+=(file)
command -v xz >/dev/null || missing+=(xz-utils)
((${#missing[@]})) && { log "installing ${missing[*]}"; apt_install "${missing[@]}"; }
ensure_go
go_version="$("$goroot/bin/go" env GOVERSION)"

# --- Kubernetes binaries (cached outside the repo, keyed by the tarball and the Go version) ----
k8s_dir="$cache/k8s/${k8s_sha:0:16}-$go_version"
bin="$k8s_dir/bin"
crictl_sha="$(sha256sum "$here/crictl/main.go" | cut -c1-16)"
crictl_bin="$k8s_dir/crictl-$crictl_sha/crictl"
src="$k8s_dir/src"

extract_src() {
  [[ -f $src/.complete ]] && return 0
  rm -rf "$src"; mkdir -p "$src"
  tar -xJf "$k8s_src" -C "$src"
  touch "$src/.complete"
}
go_build() {
  # The offline build of ../shared/k8s/README.md, at low priority (the machine is shared).
  (
    cd "$src"
    export GOROOT="$goroot" PATH="$goroot/bin:$PATH" GOFLAGS=-mod=vendor GOTOOLCHAIN=local \
      GOPROXY=off CGO_ENABLED=0 GOCACHE="$cache/go-build" GOPATH="$cache/gopath"
    nice -n 10 go build -tags providerless -trimpath \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version \
        -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=28 \
        -X k8s.io/component-base/version.gitTreeState=clean" "$@"
  )
}
built=true
for cmd in $k8s_cmds; do [[ -x $bin/$cmd ]] || built=false; done
if ! $built; then
  log "building $k8s_cmds from $(basename "$k8s_src") with $go_version (several minutes on a cold cache)"
  extract_src
  mkdir -p "$bin.tmp"
  # shellcheck disable=SC2046
  go_build -o "$bin.tmp/" $(for cmd in $k8s_cmds; do echo "./cmd/$cmd"; done)
  rm -rf "$bin"; mv "$bin.tmp" "$bin"
  step "built the Kubernetes binaries into $bin"
fi
if [[ ! -x $crictl_bin ]]; then
  extract_src
  rm -rf "$src/cmd/capd-crictl"; mkdir -p "$src/cmd/capd-crictl" "$(dirname "$crictl_bin")"
  cp "$here/crictl/main.go" "$src/cmd/capd-crictl/"
  go_build -o "$crictl_bin.tmp" ./cmd/capd-crictl
  mv "$crictl_bin.tmp" "$crictl_bin"
  step "built capd-crictl into $crictl_bin"
fi
# Everything is compiled: the extracted source is not needed again until the tarball changes.
rm -rf "$src"

# --- the node's root file system ---------------------------------------------------------------
rootfs="$build_dir/real-rootfs-$hash"
work="$build_dir/real-work-$hash"
containerd_pid=""
cleanup() {
  if [[ -n $containerd_pid ]]; then kill "$containerd_pid" 2>/dev/null || true; wait "$containerd_pid" 2>/dev/null || true; fi
  # debootstrap and the image import mount /proc and /sys in the target; never leave them behind.
  if [[ -d $rootfs ]]; then
    awk -v root="$rootfs" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$rootfs"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work"

log "debootstrap $suite from $mirror"
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$build_dir/real-debootstrap.log" 2>&1; then
  tail -n 30 "$build_dir/real-debootstrap.log" >&2
  log "debootstrap failed (full log: $build_dir/real-debootstrap.log)"
  exit 1
fi
step "debootstrapped $suite"

# etcd for the etcd image: Debian's etcd-server and etcd-client (3.4), unpacked, never installed
# in the node.
chroot "$rootfs" apt-get install -y -qq --download-only --no-install-recommends etcd-server etcd-client >/dev/null
for deb in "$rootfs"/var/cache/apt/archives/etcd-server_*.deb "$rootfs"/var/cache/apt/archives/etcd-client_*.deb; do
  dpkg-deb -x "$deb" "$work/etcd-deb"
done
etcd_version="$(dpkg-deb -f "$(ls "$rootfs"/var/cache/apt/archives/etcd-server_*.deb)" Version)"

# The node's own files, then the binaries.
cp -a "$here/rootfs/." "$rootfs/"
install -m 0755 "$bin/kubelet" "$bin/kubeadm" "$rootfs/usr/bin/"
install -m 0755 "$crictl_bin" "$rootfs/usr/local/bin/crictl"
mkdir -p "$rootfs/etc/kubernetes/manifests" "$rootfs/var/lib/kubelet" "$rootfs/etc/cni/net.d" "$rootfs/etc/capd-node"

# systemd as PID 1 of a container: only what a node needs starts (the units below and the
# sysinit basics); getty, logind, timers, udev and binfmt stay off; tmpfiles' setup would empty
# directories the runtime relies on.
rm -f "$rootfs"/lib/systemd/system/multi-user.target.wants/* \
  "$rootfs"/etc/systemd/system/*.wants/* \
  "$rootfs"/lib/systemd/system/local-fs.target.wants/* \
  "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* \
  "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl* \
  "$rootfs"/lib/systemd/system/basic.target.wants/* \
  "$rootfs"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service
chroot "$rootfs" systemctl mask systemd-binfmt.service >/dev/null 2>&1
chroot "$rootfs" systemctl set-default multi-user.target >/dev/null 2>&1
chroot "$rootfs" systemctl enable containerd.service kubelet.service >/dev/null 2>&1
: > "$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"

# The runtime's base spec for pods: containerd's default without its RLIMIT_NOFILE of 1024.
chroot "$rootfs" ctr oci spec | python3 -c '
import json, sys
spec = json.load(sys.stdin)
spec["process"].pop("rlimits", None)
json.dump(spec, sys.stdout, indent=2)' > "$rootfs/etc/containerd/cri-base.json"

{
  echo "kubernetes $k8s_version (source sha256 $k8s_sha, $go_version)"
  echo "etcd $etcd_version (Debian etcd-server, as $etcd_image)"
  # shellcheck disable=SC2016
  chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' systemd containerd runc containernetworking-plugins iptables
  echo "recipe $hash"
} > "$rootfs/etc/capd-node/versions"
step "configured the root file system"

# --- the control-plane images ----------------------------------------------------------------
# copy_closure ROOT DEST PATH...: copies each PATH of ROOT (files or symlinks, with the targets
# of symlinks) and the shared libraries its ELF files load into DEST, keeping the layout.
copy_closure() {
  local root=$1 dest=$2; shift 2
  local path lib
  for path in "$@"; do
    copy_path "$root" "$dest" "$path"
    if file -L "$root$path" 2>/dev/null | grep -q 'ELF.*dynamic'; then
      for lib in $(chroot "$root" ldd "$path" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
        copy_path "$root" "$dest" "$lib"
      done
    fi
  done
}
copy_path() {
  local root=$1 dest=$2 path=$3 dir target
  # Resolve symlinked parents (the usr-merged /lib, /lib64, /sbin) inside ROOT.
  dir=$(chroot "$root" readlink -f "$(dirname "$path")")
  target=$(chroot "$root" readlink -f "$path")
  mkdir -p "$dest$dir" "$dest$(dirname "$target")"
  [[ -e $dest$target ]] || cp -a "$root$target" "$dest$target"
  if [[ $dir/$(basename "$path") != "$target" ]]; then
    ln -sfn "$target" "$dest$dir/$(basename "$path")"
  fi
}
base_layout() {
  # usr-merged top-level links and the directories every image has
  local dest=$1 link
  mkdir -p "$dest/usr/local/bin" "$dest/tmp" "$dest/etc" "$dest/run" "$dest/var"
  chmod 1777 "$dest/tmp"
  for link in bin sbin lib lib64; do
    [[ -L $rootfs/$link ]] && cp -a "$rootfs/$link" "$dest/$link"
  done
  echo 'root:x:0:0:root:/root:/sbin/nologin' > "$dest/etc/passwd"
  echo 'root:x:0:' > "$dest/etc/group"
  return 0
}

# make_image NAME DIR ENTRYPOINT_JSON: writes $work/images/<n>.tar, a docker-archive with one
# uncompressed layer (DIR) named NAME.
image_count=0
make_image() {
  local name=$1 dir=$2 entrypoint=$3 out layer_sha config config_sha
  image_count=$((image_count + 1))
  out="$work/archive-$image_count"
  mkdir -p "$out" "$work/images"
  tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$dir" -cf "$out/layer.tar" .
  layer_sha=$(sha256sum "$out/layer.tar" | cut -d' ' -f1)
  mkdir -p "$out/$layer_sha"; mv "$out/layer.tar" "$out/$layer_sha/layer.tar"
  config=$(printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"capd-rs e2e/images/real/build.sh"}]}' "$entrypoint" "$layer_sha")
  config_sha=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" > "$out/$config_sha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config_sha" "$name" "$layer_sha" > "$out/manifest.json"
  tar --numeric-owner --owner=0 --group=0 -C "$out" -cf "$work/images/$image_count.tar" manifest.json "$config_sha.json" "$layer_sha"
  rm -rf "$out"
}

# kube-apiserver, kube-controller-manager, kube-scheduler: the static binary, run by name.
for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
  dir="$work/img-$cmd"; base_layout "$dir"
  install -m 0755 "$bin/$cmd" "$dir/usr/local/bin/"
  make_image "registry.k8s.io/$cmd:$k8s_version" "$dir" null
done

# kube-proxy: the binary at /usr/local/bin/kube-proxy (kubeadm's DaemonSet runs that path), with
# iptables (nft backend, as the node's) and conntrack, and the libraries and modules they load.
dir="$work/img-kube-proxy"; base_layout "$dir"
install -m 0755 "$bin/kube-proxy" "$dir/usr/local/bin/"
xt_modules=$(cd "$rootfs" && find usr/lib/x86_64-linux-gnu/xtables -name '*.so' | sed 's|^|/|')
# shellcheck disable=SC2086
copy_closure "$rootfs" "$dir" /usr/sbin/xtables-nft-multi /usr/sbin/conntrack $xt_modules
for tool in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore \
  iptables-nft iptables-nft-save iptables-nft-restore ip6tables-nft ip6tables-nft-save ip6tables-nft-restore; do
  ln -sfn xtables-nft-multi "$dir/usr/sbin/$tool"
done
for f in /etc/protocols /etc/services /etc/ethertypes /etc/nsswitch.conf; do
  [[ -e $rootfs$f ]] && cp -a "$rootfs$f" "$dir$f"
done
mkdir -p "$dir/var/lib/kube-proxy" "$dir/run/xtables.lock.d"
make_image "registry.k8s.io/kube-proxy:$k8s_version" "$dir" null

# etcd: Debian's etcd and etcdctl with the C library they load, named as kubeadm's etcd image
# (kubeadm's static pod runs `etcd` by name).
dir="$work/img-etcd"; base_layout "$dir"
install -m 0755 "$work/etcd-deb/usr/bin/etcd" "$work/etcd-deb/usr/bin/etcdctl" "$rootfs/usr/local/bin/"
copy_closure "$rootfs" "$dir" /usr/local/bin/etcd /usr/local/bin/etcdctl
rm -f "$rootfs/usr/local/bin/etcd" "$rootfs/usr/local/bin/etcdctl"
mkdir -p "$dir/var/lib/etcd"
make_image "$etcd_image" "$dir" null

# pause: our own static program (pause/pause.c).
dir="$work/img-pause"; mkdir -p "$dir"
gcc -static -Os -s -o "$dir/pause" "$here/pause/pause.c"
make_image "$pause_image" "$dir" '["/pause"]'
step "made $image_count images"

# Import them into the node's containerd store with the node's own containerd and ctr (no
# unpacking: containerd unpacks an image the first time a pod uses it); pinned, so the kubelet's
# image garbage collection never removes them.
mount -t proc proc "$rootfs/proc"
mkdir -p "$rootfs/run/capd-build"
cat > "$rootfs/run/capd-build/config.toml" <<'EOF'
version = 2
root = "/var/lib/containerd"
state = "/run/capd-build/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "/run/capd-build/containerd.sock"
EOF
chroot "$rootfs" /usr/bin/containerd --config /run/capd-build/config.toml >"$build_dir/real-containerd.log" 2>&1 &
containerd_pid=$!
for _ in $(seq 100); do [[ -S $rootfs/run/capd-build/containerd.sock ]] && break; sleep 0.1; done
ctr_() { chroot "$rootfs" ctr --address /run/capd-build/containerd.sock --namespace k8s.io "$@"; }
ctr_ version >/dev/null || { cat "$build_dir/real-containerd.log" >&2; log "containerd did not start"; exit 1; }
for tarball in "$work"/images/*.tar; do
  ctr_ images import --no-unpack - < "$tarball" >&2
done
ctr_ images ls -q > "$rootfs/etc/capd-node/images"
while read -r name; do
  ctr_ images label "$name" io.cri-containerd.pinned=pinned >/dev/null
done < "$rootfs/etc/capd-node/images"
kill "$containerd_pid"; wait "$containerd_pid" 2>/dev/null || true
containerd_pid=""
umount "$rootfs/proc"
rm -rf "$rootfs/run/capd-build"
for want in registry.k8s.io/kube-apiserver:$k8s_version registry.k8s.io/kube-controller-manager:$k8s_version \
  registry.k8s.io/kube-scheduler:$k8s_version registry.k8s.io/kube-proxy:$k8s_version "$etcd_image" "$pause_image"; do
  grep -qx "$want" "$rootfs/etc/capd-node/images" || { log "image $want missing after the import"; exit 1; }
done
step "imported the images into containerd"

# Trim what a node never reads.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log

# --- the Docker image ------------------------------------------------------------------------
replaced="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -C "$rootfs" -c . \
  | docker import \
    --change "LABEL io.x-k8s.capd-test.recipe=$hash" \
    --change "LABEL io.x-k8s.capd-test.kubernetes=$k8s_version" \
    --change 'ENV container=docker' \
    --change 'ENTRYPOINT ["/usr/local/bin/capd-entrypoint", "/sbin/init"]' \
    - "$image-import" >/dev/null
# docker import takes no STOPSIGNAL: systemd stops cleanly on SIGRTMIN+3 (docker stop); a
# one-line build adds it to the imported image without adding a layer.
stop_signal() { printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$image-import" | docker build -q -t "$image" - >/dev/null; }
if DOCKER_BUILDKIT=0 stop_signal 2>/dev/null || stop_signal; then
  docker rmi "$image-import" >/dev/null
else
  log "warning: could not set STOPSIGNAL SIGRTMIN+3 (docker stop will wait for its timeout)"
  docker tag "$image-import" "$image"
  docker rmi "$image-import" >/dev/null
fi
for id in $replaced; do
  [[ $id == "$(docker image inspect -f '{{.Id}}' "$image")" ]] || docker rmi "$id" >/dev/null 2>&1 || true
done
step "imported $image into Docker"
log "built $image in $(( $(date +%s) - start ))s"
write_env
