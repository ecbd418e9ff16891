#!/usr/bin/env bash
# Builds capd-test/realnode:<version>-<hash>, a real Kubernetes node image that works like kind's
# node images (kindest/node) with capd-rs: Debian bookworm with systemd, containerd, runc and the
# CNI plugins from Debian's packages; etcd from Debian's packages; kubelet, kubeadm and the
# control-plane images made from the Kubernetes server binaries YOU bring, in the layout of
# Kubernetes' release archive kubernetes-server-linux-amd64.tar.gz; the control-plane images
# preloaded into containerd (nothing is ever pulled). Nothing of Kubernetes is built here.
# See README.md beside this script.
#
# Usage: e2e/images/real/build.sh --kubernetes-server PATH [--dry-run] [--check] [--force]
#   --kubernetes-server PATH  the server binaries: the archive kubernetes-server-linux-amd64.tar.gz,
#                      or a folder holding kubernetes/server/bin/, server/bin/ or the binaries
#                      themselves (kubelet kubeadm kube-apiserver kube-controller-manager
#                      kube-scheduler kube-proxy; a crictl beside them is used when present).
#                      Default: $CAPD_KUBERNETES_SERVER.
#   --dry-run  check the binaries and print the image it would build, then exit (no root needed)
#   --check    only report whether that image exists (exit 1 when it does not)
#   --force    rebuild the image even when it exists
# Prints CAPD_REAL_NODE_IMAGE=<image> on its last line: export it for the real-node scenario
# (real_cluster) and `hack/run.sh --real`. <version> is what `kubeadm version` says; <hash> covers
# this directory's recipe (build.sh, rootfs/, crictl/, pause/), the Debian suite and package list,
# and the sha256 of every binary.
# Environment:
#   CAPD_KUBERNETES_SERVER  the default of --kubernetes-server
#   CAPD_CACHE_DIR   our crictl's build (default /var/cache/capd-rs), outside the repo
#   DEBIAN_MIRROR    (default http://deb.debian.org/debian), DEBIAN_SUITE (default bookworm)
# Needs root (debootstrap, chroot, mounts) and Docker; installs what it lacks with apt-get.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="$(cd "$here/.." && pwd)/.build"
suite="${DEBIAN_SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${CAPD_CACHE_DIR:-/var/cache/capd-rs}"
# The node's packages (debootstrap --variant=minbase adds these and their dependencies).
packages="systemd,systemd-sysv,containerd,runc,containernetworking-plugins,iptables,nftables,conntrack,socat,ethtool,ebtables,kmod,mount,util-linux,procps,iproute2,ca-certificates,netbase,libseccomp2"
k8s_cmds="kubelet kubeadm kube-apiserver kube-controller-manager kube-scheduler kube-proxy"
# Our crictl (crictl/main.go) is built in a chroot of this Debian suite, which packages the CRI
# API and gRPC for Go (golang-github-kubernetes-cri-api-dev; bookworm does not).
crictl_suite=trixie
crictl_packages="golang-go,golang-github-kubernetes-cri-api-dev"

server="${CAPD_KUBERNETES_SERVER:-}"
dry_run=false
check_only=false
force=false
while (($#)); do
  case "$1" in
    --kubernetes-server) server="${2:-}"; shift 2 || shift ;;
    --kubernetes-server=*) server="${1#*=}"; shift ;;
    --dry-run) dry_run=true; shift ;;
    --check) check_only=true; shift ;;
    --force) force=true; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

log() { echo "build.sh: $*" >&2; }
refuse() { log "$*"; exit 1; }

# --- the Kubernetes binaries the user brings ----------------------------------------------------
[[ -n $server ]] || refuse "no Kubernetes server binaries: pass --kubernetes-server PATH (or set CAPD_KUBERNETES_SERVER) with Kubernetes' release archive kubernetes-server-linux-amd64.tar.gz or a folder of its kubernetes/server/bin/ binaries ($k8s_cmds)"
[[ -e $server ]] || refuse "--kubernetes-server $server: no such file or folder"
unpacked=""
cleanup_unpacked() { if [[ -n $unpacked ]]; then rm -rf "$unpacked"; fi; }
trap cleanup_unpacked EXIT
if [[ -f $server ]]; then
  # The release archive: only the binaries are taken out of it (it also holds image tarballs).
  unpacked="$(mktemp -d)"
  members=()
  for cmd in $k8s_cmds; do members+=("kubernetes/server/bin/$cmd"); done
  tar -xzf "$server" -C "$unpacked" --wildcards --no-anchored "${members[@]}" 2>/dev/null || true
  bin="$unpacked/kubernetes/server/bin"
  [[ -d $bin ]] || refuse "$server is not Kubernetes' server release archive (no kubernetes/server/bin/ in it)"
else
  bin="$server"
  for sub in kubernetes/server/bin server/bin bin; do
    if [[ -d $server/$sub ]]; then bin="$server/$sub"; break; fi
  done
fi
missing=()
for cmd in $k8s_cmds; do [[ -f $bin/$cmd && -x $bin/$cmd ]] || missing+=("$cmd"); done
((${#missing[@]} == 0)) || refuse "missing in $bin: ${missing[*]} (needs $k8s_cmds, executable)"

# The version: what kubeadm says; every other binary must say the same.
version="$("$bin/kubeadm" version -o short 2>/dev/null)" || refuse "$bin/kubeadm version failed: is it a kubeadm for this machine ($(uname -m))?"
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || refuse "$bin/kubeadm version printed '$version', not a Kubernetes version"
disagree=()
for cmd in $k8s_cmds; do
  [[ $cmd == kubeadm ]] && continue
  said="$("$bin/$cmd" --version 2>/dev/null | awk '{print $NF}')" || said=""
  [[ $said == "$version" ]] || disagree+=("$cmd ${said:-(no version)}")
done
((${#disagree[@]} == 0)) || refuse "the binaries disagree on the version: kubeadm $version, $(IFS=,; echo "${disagree[*]}" | sed 's/,/, /g')"

# The images this kubeadm asks for (its own list, offline with the version given).
images="$("$bin/kubeadm" config images list --kubernetes-version "$version" 2>/dev/null)" \
  || refuse "$bin/kubeadm config images list --kubernetes-version $version failed"
image_named() { grep -E "/$1:[^/]+$" <<< "$images" | head -n 1; }
declare -A cp_images
for cmd in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
  cp_images[$cmd]="$(image_named "$cmd")"
  [[ -n ${cp_images[$cmd]} ]] || refuse "kubeadm $version lists no $cmd image"
done
etcd_image="$(image_named etcd)"
pause_image="$(image_named pause)"
[[ -n $etcd_image && -n $pause_image ]] || refuse "kubeadm $version lists no etcd or pause image"

# crictl: the user's, when it lies beside the binaries; else ours (crictl/main.go).
user_crictl=""
for candidate in "$bin/crictl" "$server/crictl"; do
  if [[ -d $server && -x $candidate ]]; then user_crictl="$candidate"; break; fi
done

recipe_hash() {
  (
    cd "$here"
    printf 'suite=%s packages=%s crictl=%s %s\n' "$suite" "$packages" "$crictl_suite" "$crictl_packages"
    find build.sh rootfs crictl pause -type f -print0 | sort -z | xargs -0 sha256sum
    find build.sh rootfs crictl pause -type f -print0 | sort -z | xargs -0 stat -c '%a %n'
    for cmd in $k8s_cmds; do printf '%s %s\n' "$(sha256sum < "$bin/$cmd" | cut -d' ' -f1)" "$cmd"; done
    if [[ -n $user_crictl ]]; then printf '%s crictl\n' "$(sha256sum < "$user_crictl" | cut -d' ' -f1)"; fi
  ) | sha256sum | cut -c1-12
}
hash="$(recipe_hash)"
image="capd-test/realnode:$version-$hash"

if $dry_run; then
  log "kubernetes $version from $bin; crictl: ${user_crictl:-ours, built from crictl/main.go}"
  log "images: ${cp_images[*]} $etcd_image (Debian's etcd) $pause_image (ours)"
  echo "CAPD_REAL_NODE_IMAGE=$image"
  exit 0
fi

have_image() { docker image inspect "$image" >/dev/null 2>&1; }

if $check_only; then
  if have_image; then echo "CAPD_REAL_NODE_IMAGE=$image"; exit 0; fi
  log "image $image is missing; run build.sh without --check"
  exit 1
fi

[[ $(id -u) == 0 ]] || refuse "building the image needs root (debootstrap, chroot, mounts); --dry-run does not"
mkdir -p "$build_dir"
exec 9>"$build_dir/real.lock"
flock 9

if ! $force && have_image; then
  log "image $image already present"
  echo "CAPD_REAL_NODE_IMAGE=$image"
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
missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v gcc >/dev/null || missing+=(gcc)
[[ -f /usr/lib/x86_64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
command -v python3 >/dev/null || missing+=(python3)
command -v file >/dev/null || missing+=(file)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- crictl ------------------------------------------------------------------------------------
# Ours is built with Debian's Go and Debian's packaged CRI API and gRPC (GOPATH mode over
# /usr/share/gocode, offline), in a minimal chroot of $crictl_suite kept in the cache for the next
# build; the binary is cached by the source's hash.
if [[ -n $user_crictl ]]; then
  crictl_bin="$user_crictl"
else
  crictl_sha="$(printf '%s %s ' "$crictl_suite" "$crictl_packages" | cat - "$here/crictl/main.go" | sha256sum | cut -c1-16)"
  crictl_bin="$cache/crictl/$crictl_sha/crictl"
  if [[ ! -x $crictl_bin ]]; then
    chroot_dir="$cache/crictl/chroot-$crictl_suite"
    if [[ ! -f $chroot_dir/.complete ]]; then
      rm -rf --one-file-system "$chroot_dir"; mkdir -p "$chroot_dir"
      log "debootstrap $crictl_suite, then apt-get install ${crictl_packages//,/ } in it (to build our crictl; once)"
      # apt's resolver inside the chroot, not debootstrap's: debootstrap's --include takes both
      # sides of the alternatives in the Go packages' dependencies and fails on their conflicts.
      if ! { debootstrap --variant=minbase "$crictl_suite" "$chroot_dir" "$mirror" &&
        chroot "$chroot_dir" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
          apt-get install -y -qq --no-install-recommends ${crictl_packages//,/ }; } \
        >"$build_dir/crictl-debootstrap.log" 2>&1; then
        tail -n 30 "$build_dir/crictl-debootstrap.log" >&2
        refuse "the $crictl_suite chroot for crictl failed (full log: $build_dir/crictl-debootstrap.log)"
      fi
      touch "$chroot_dir/.complete"
    fi
    mkdir -p "$chroot_dir/build/src/capd-crictl"
    cp "$here/crictl/main.go" "$chroot_dir/build/src/capd-crictl/"
    # Go finds its GOROOT through /proc/self/exe.
    mount -t proc proc "$chroot_dir/proc"
    built_crictl=true
    chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/build GO111MODULE=off \
      GOPATH=/build:/usr/share/gocode GOCACHE=/build/cache GOFLAGS= GOPROXY=off \
      GOTOOLCHAIN=local GOTELEMETRY=off CGO_ENABLED=0 \
      sh -c 'cd /build/src/capd-crictl && go build -trimpath -ldflags "-s -w" -o /build/crictl .' >&2 \
      || built_crictl=false
    umount "$chroot_dir/proc"
    $built_crictl || refuse "building crictl/main.go with Debian's Go and CRI API failed"
    mkdir -p "$(dirname "$crictl_bin")"
    mv "$chroot_dir/build/crictl" "$crictl_bin"
    step "built our crictl into $crictl_bin"
  fi
fi

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
  cleanup_unpacked
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
# containerd's sandbox image is the pause image this kubeadm asks for; /kind/version says the
# Kubernetes version as in kind's node images (the e2e suite reads it from either).
sed -i "s|@PAUSE_IMAGE@|$pause_image|" "$rootfs/etc/containerd/config.toml"
mkdir -p "$rootfs/kind"
echo "$version" > "$rootfs/kind/version"
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
  echo "kubernetes $version (the binaries brought from $server)"
  if [[ -n $user_crictl ]]; then echo "crictl: the one brought ($user_crictl)"; else echo "crictl: ours (crictl/main.go, built with Debian $crictl_suite Go and CRI API)"; fi
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
  make_image "${cp_images[$cmd]}" "$dir" null
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
make_image "${cp_images[kube-proxy]}" "$dir" null

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
for want in "${cp_images[@]}" "$etcd_image" "$pause_image"; do
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
    --change "LABEL io.x-k8s.capd-test.kubernetes=$version" \
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
echo "CAPD_REAL_NODE_IMAGE=$image"
