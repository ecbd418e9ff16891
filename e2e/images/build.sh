#!/usr/bin/env bash
# Builds the test images the Docker integration tests run, from Debian packages only:
#   capd-test/node:<hash>     stands in for kindest/node (see rootfs/usr/local/bin)
#   capd-test/haproxy:<hash>  an haproxy usable as the cluster load balancer
# One debootstrap rootfs (minbase + haproxy, socat, openssl) plus the files under rootfs/ is
# imported twice with different entrypoints, so both images share one layer. <hash> is a hash of
# this script and of rootfs/, so images are rebuilt only when the recipe changes.
#
# Usage: e2e/images/build.sh [--check] [--force]
#   --check  only report whether the images exist (exit 1 when they do not)
#   --force  rebuild even when the images exist
# Prints the image variables and writes them to e2e/images/.build/images.env (git-ignored).
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), DEBIAN_SUITE (default bookworm).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="$here/.build"
env_file="$build_dir/images.env"
suite="${DEBIAN_SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="haproxy,socat,openssl"

check_only=false
force=false
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    --force) force=true ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

recipe_hash() {
  (
    cd "$here"
    printf 'suite=%s packages=%s\n' "$suite" "$packages"
    sha256sum build.sh
    find rootfs -type f -print0 | sort -z | xargs -0 sha256sum
    find rootfs -type f -print0 | sort -z | xargs -0 stat -c '%a %n'
  ) | sha256sum | cut -c1-12
}

hash="$(recipe_hash)"
node_image="capd-test/node:$hash"
haproxy_image="capd-test/haproxy:$hash"

write_env() {
  mkdir -p "$build_dir"
  printf 'CAPD_TEST_NODE_IMAGE=%s\nCAPD_TEST_HAPROXY_IMAGE=%s\n' "$node_image" "$haproxy_image" > "$env_file.tmp"
  mv "$env_file.tmp" "$env_file"
  cat "$env_file"
}

have_images() {
  docker image inspect "$node_image" >/dev/null 2>&1 && docker image inspect "$haproxy_image" >/dev/null 2>&1
}

if $check_only; then
  if have_images; then write_env; exit 0; fi
  echo "build.sh: images $node_image and $haproxy_image are missing; run e2e/images/build.sh" >&2
  exit 1
fi

mkdir -p "$build_dir"
exec 9>"$build_dir/lock"
flock 9

if ! $force && have_images; then
  echo "build.sh: images for recipe $hash already present" >&2
  write_env
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "build.sh: installing debootstrap" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

rootfs="$build_dir/rootfs-$hash"
cleanup() {
  # debootstrap mounts /proc and /sys in the target; never leave them behind.
  if [ -d "$rootfs" ]; then
    awk -v root="$rootfs" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$rootfs"
  fi
}
trap cleanup EXIT
cleanup

start=$(date +%s)
echo "build.sh: debootstrap $suite ($packages) from $mirror" >&2
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$build_dir/debootstrap.log" 2>&1; then
  tail -n 30 "$build_dir/debootstrap.log" >&2
  echo "build.sh: debootstrap failed (full log: $build_dir/debootstrap.log)" >&2
  exit 1
fi

# Trim what images never need, then add the stand-ins and the default haproxy config.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/*
cp -a "$here/rootfs/." "$rootfs/"
chmod 755 "$rootfs"/usr/local/bin/*

# Images a --force rebuild replaces; removed once the new ones are tagged.
replaced="$(docker image inspect -f '{{.Id}}' "$node_image" "$haproxy_image" 2>/dev/null || true)"

import() {
  local image="$1"; shift
  tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -C "$rootfs" -c . \
    | docker import "$@" --change "LABEL io.x-k8s.capd-test.recipe=$hash" - "$image" >/dev/null
}
import "$node_image" --change 'ENTRYPOINT ["/usr/local/bin/capd-node-init"]'
import "$haproxy_image" \
  --change 'ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'

for id in $replaced; do
  docker rmi "$id" >/dev/null 2>&1 || true
done

echo "build.sh: built $node_image and $haproxy_image in $(( $(date +%s) - start ))s" >&2
write_env
