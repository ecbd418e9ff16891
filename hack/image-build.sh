#!/usr/bin/env bash
# Builds the manager image on a machine without any container registry:
#   1. compiles the manager on the host as a static binary (glibc with crt-static, release profile),
#   2. checks that it really is static,
#   3. assembles the CA bundle the image ships at /etc/ssl/certs/ca-certificates.crt: the certificates
#      of Debian's ca-certificates package (what CAPD's distroless image has), without anything the
#      host added to its own trust store,
#   4. builds the Dockerfile's `prebuilt` stage on RUNTIME_IMAGE (default `scratch`: nothing to pull).
# Usage: hack/image-build.sh [IMAGE]          (default: localhost/capd-rs-manager:dev, the image config/default uses)
# Environment: RUNTIME_IMAGE   base of the image; any image present locally, e.g. an imported distroless
#                              static image (default: scratch)
#              CA_BUNDLE       a PEM bundle to ship instead (needed on a host without Debian's
#                              ca-certificates package)
# Load the result into a kind management cluster with `kind load docker-image IMAGE --name CLUSTER`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
image=${1:-localhost/capd-rs-manager:dev}
runtime_image=${RUNTIME_IMAGE:-scratch}
target=x86_64-unknown-linux-gnu
binary="target/$target/release/manager"
# Where the Dockerfile's `prebuilt` stage takes the bundle from (.dockerignore lets it through).
bundle=target/image/ca-certificates.crt

for tool in cargo docker; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: $tool is required to build the manager image" >&2
    exit 1
  fi
done

cd "$root"
echo "--- building $binary (static, release)"
RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --release --locked --target "$target" --bin manager

# A dynamically linked binary would fail at start on an image without a C library.
if command -v file >/dev/null 2>&1; then
  linkage=$(file -b "$binary")
  if [[ $linkage != *"statically linked"* && $linkage != *"static-pie linked"* ]]; then
    echo "error: $binary is not statically linked: $linkage" >&2
    exit 1
  fi
else
  linkage=$(ldd "$binary" 2>&1 || true)
  if [[ $linkage != *"statically linked"* && $linkage != *"not a dynamic executable"* ]]; then
    echo "error: $binary is dynamically linked: $linkage" >&2
    exit 1
  fi
fi

# The package's own certificate files, not /etc/ssl/certs/ca-certificates.crt: update-ca-certificates
# merges local CAs (/usr/local/share/ca-certificates) into that file, and those must not ship.
echo "--- assembling $bundle"
mkdir -p "$(dirname "$bundle")"
if [[ -n ${CA_BUNDLE:-} ]]; then
  cp "$CA_BUNDLE" "$bundle"
elif command -v dpkg-query >/dev/null 2>&1 && dpkg-query -L ca-certificates >/dev/null 2>&1; then
  mapfile -t certificates < <(dpkg-query -L ca-certificates | grep -E '^/usr/share/ca-certificates/.+\.crt$' | LC_ALL=C sort)
  # Each file ends with a newline in the bundle, as update-ca-certificates writes it.
  for certificate in "${certificates[@]}"; do sed -e '$a\' "$certificate"; done >"$bundle"
else
  echo "error: Debian's ca-certificates package is not installed: set CA_BUNDLE to the PEM bundle to ship" >&2
  exit 1
fi
chmod 0644 "$bundle"
count=$(grep -c -- '-----BEGIN CERTIFICATE-----' "$bundle" || true)
if ((count == 0)); then
  echo "error: $bundle holds no certificate" >&2
  exit 1
fi
echo "$bundle: $count certificates"

echo "--- building image $image on $runtime_image"
docker build --target prebuilt \
  --build-arg "RUNTIME_IMAGE=$runtime_image" \
  --build-arg "TARGET=$target" \
  -t "$image" .

size=$(docker image inspect --format '{{.Size}}' "$image")
echo "built $image: $((size / 1024)) KiB"
