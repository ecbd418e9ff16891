#!/usr/bin/env bash
# Renders the Gardener registration of the Infrastructure extension (type docker): a ControllerDeployment
# (core.gardener.cloud/v1) whose Helm chart installs config/gardener/standalone's objects, and the
# ControllerRegistration (core.gardener.cloud/v1beta1, kind Infrastructure, type docker) that points to it.
# Apply both to the garden cluster; gardenlet then installs the chart in each seed that needs it.
#
#   hack/gardener-registration.sh [--image IMAGE] [--output FILE]
#
# The chart is the standalone overlay as `kubectl kustomize` renders it, without its Namespace (gardenlet
# installs the chart into a namespace of its own, extension-<name>-...) and with two templated values:
# every namespace of the overlay becomes {{ .Release.Namespace }}, the image {{ .Values.image }} (the
# ControllerDeployment's helm.values.image, --image). The chart is packed reproducibly (sorted entries,
# fixed times and owners, gzip without a name or time), so the output changes only with its content.
# Needs kubectl (>= 1.27, for its kustomize), tar, gzip and base64.
set -euo pipefail

name=provider-docker
image=capd-rs-manager:dev
output=-
while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) image=${2:?--image needs a value}; shift 2 ;;
    --image=*) image=${1#--image=}; shift ;;
    --output) output=${2:?--output needs a value}; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
overlay_namespace=capd-gardener-system
overlay_image=capd-rs-manager:dev
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chart="$work/$name"
mkdir -p "$chart/templates"

kubectl kustomize "$root/config/gardener/standalone" >"$work/rendered.yaml"

# Drop the Namespace document; template the namespace and the image.
awk -v ns="$overlay_namespace" -v img="$overlay_image" '
  function flush() {
    if (doc != "" && doc !~ /(^|\n)kind: Namespace\n/) { printf "%s---\n", doc }
    doc = ""
  }
  /^---$/ { flush(); next }
  {
    line = $0
    if (line ~ ("^ *namespace: " ns "$")) { sub(ns "$", "{{ .Release.Namespace }}", line) }
    if (line ~ ("^ *(- )?image: " img "$")) { sub(img "$", "{{ .Values.image }}", line) }
    doc = doc line "\n"
  }
  END { flush() }
' "$work/rendered.yaml" >"$chart/templates/extension.yaml"

if grep -q "$overlay_namespace" "$chart/templates/extension.yaml"; then
  echo "the overlay's namespace $overlay_namespace is left somewhere the chart cannot template it" >&2
  exit 1
fi
if ! grep -q '{{ .Values.image }}' "$chart/templates/extension.yaml"; then
  echo "the overlay's image $overlay_image was not found" >&2
  exit 1
fi

cat >"$chart/Chart.yaml" <<EOF
apiVersion: v2
name: $name
description: Gardener Infrastructure extension for type docker (capd-rs), from config/gardener/standalone
type: application
version: $version
appVersion: "$version"
EOF
cat >"$chart/values.yaml" <<EOF
# The manager image.
image: $overlay_image
EOF

raw_chart=$(
  tar --sort=name --mtime='1970-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - "$name" | gzip -9 -n | base64 -w0
)

render() {
  cat <<EOF
# Rendered by hack/gardener-registration.sh from config/gardener/standalone; do not edit.
apiVersion: core.gardener.cloud/v1
kind: ControllerDeployment
metadata:
  name: $name
helm:
  rawChart: $raw_chart
  values:
    image: $image
---
apiVersion: core.gardener.cloud/v1beta1
kind: ControllerRegistration
metadata:
  name: $name
spec:
  resources:
  - kind: Infrastructure
    type: docker
    primary: true
  deployment:
    policy: OnDemand
    deploymentRefs:
    - name: $name
EOF
}

if [[ "$output" == - ]]; then
  render
else
  render >"$output"
fi
