#!/usr/bin/env bash
# Renders the Gardener registration of the Infrastructure extension (type docker): a ControllerDeployment
# (core.gardener.cloud/v1) whose Helm chart installs config/gardener/standalone's objects, and the
# ControllerRegistration (core.gardener.cloud/v1beta1, kind Infrastructure, type docker) that points to it.
# Apply both to the garden cluster; gardenlet then installs the chart in each seed that needs it.
#
#   hack/gardener-registration.sh [--image IMAGE] [--docker-host URL] [--docker-host-network private|public]
#                                 [--output FILE]
#
# The chart is the standalone overlay as `kubectl kustomize` renders it, without its Namespace (gardenlet
# installs the chart into a namespace of its own, extension-<name>-...), with these values templated:
# every namespace of the overlay becomes {{ .Release.Namespace }}, the image {{ .Values.image }} (--image),
# DOCKER_HOST {{ .Values.dockerHost }} (--docker-host; empty: the seed node's socket). The pod carries the
# labels of Gardener's network policies: to the seed's API server and DNS, and, for a tcp://, http:// or
# https:// dockerHost, to the private networks, or the public ones with dockerHostNetwork: public
# (--docker-host-network). The registration asks gardenlet for the Pod Security level privileged (the
# socket's hostPath). The chart is packed reproducibly (sorted entries, fixed times and owners, gzip
# without a name or time), so the output changes only with its content.
# Needs kubectl (>= 1.27, for its kustomize), tar, gzip and base64.
set -euo pipefail

name=provider-docker
image=localhost/capd-rs-manager:dev
docker_host=
docker_host_network=
output=-
while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) image=${2:?--image needs a value}; shift 2 ;;
    --image=*) image=${1#--image=}; shift ;;
    --docker-host) docker_host=${2?--docker-host needs a value}; shift 2 ;;
    --docker-host=*) docker_host=${1#--docker-host=}; shift ;;
    --docker-host-network) docker_host_network=${2:?--docker-host-network needs a value}; shift 2 ;;
    --docker-host-network=*) docker_host_network=${1#--docker-host-network=}; shift ;;
    --output) output=${2:?--output needs a value}; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

case "$docker_host_network" in
  ''|private|public) ;;
  *) echo "--docker-host-network is private or public, not $docker_host_network" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
overlay_namespace=capd-gardener-system
overlay_image=localhost/capd-rs-manager:dev
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chart="$work/$name"
mkdir -p "$chart/templates"

kubectl kustomize "$root/config/gardener/standalone" >"$work/rendered.yaml"

# Drop the Namespace document; template the namespace, the image and DOCKER_HOST; after the pod's
# network policy labels, add the one a remote engine needs.
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
    if (docker_host && line ~ /^ *value: ""$/) { sub(/""$/, "{{ .Values.dockerHost | quote }}", line) }
    docker_host = (line ~ /^ *- name: DOCKER_HOST$/)
    doc = doc line "\n"
    if (line ~ /^ *networking\.gardener\.cloud\/to-runtime-apiserver: allowed$/) {
      indent = line
      sub(/[^ ].*$/, "", indent)
      doc = doc "{{- if regexMatch \"^(tcp|https?)://\" .Values.dockerHost }}\n"
      doc = doc "{{- if eq .Values.dockerHostNetwork \"public\" }}\n"
      doc = doc indent "networking.gardener.cloud/to-public-networks: allowed\n"
      doc = doc "{{- else }}\n"
      doc = doc indent "networking.gardener.cloud/to-private-networks: allowed\n"
      doc = doc "{{- end }}\n"
      doc = doc "{{- end }}\n"
    }
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
if ! grep -q '{{ .Values.dockerHost | quote }}' "$chart/templates/extension.yaml"; then
  echo "the overlay's DOCKER_HOST (empty) was not found" >&2
  exit 1
fi
if ! grep -q 'to-private-networks' "$chart/templates/extension.yaml"; then
  echo "the overlay's pod label networking.gardener.cloud/to-runtime-apiserver was not found" >&2
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
# The Docker engine (DOCKER_HOST): empty for the seed node's socket, mounted from the host; a tcp://,
# http:// or https:// address lets the pod out to it through Gardener's network policies.
dockerHost: ""
# Where such an engine is: private (RFC 1918 and carrier-grade NAT ranges outside the seed's own
# networks) or public.
dockerHostNetwork: private
EOF

raw_chart=$(
  tar --sort=name --mtime='1970-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - "$name" | gzip -9 -n | base64 -w0
)

# A YAML double-quoted string.
quoted() {
  local value=${1//\\/\\\\}
  printf '"%s"' "${value//\"/\\\"}"
}

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
EOF
  if [[ -n "$docker_host" ]]; then
    echo "    dockerHost: $(quoted "$docker_host")"
  fi
  if [[ -n "$docker_host_network" ]]; then
    echo "    dockerHostNetwork: $docker_host_network"
  fi
  cat <<EOF
---
apiVersion: core.gardener.cloud/v1beta1
kind: ControllerRegistration
metadata:
  name: $name
  annotations:
    # gardenlet labels the extension namespace pod-security.kubernetes.io/enforce with this level: the
    # manager mounts the Docker socket with a hostPath volume, which only privileged admits.
    security.gardener.cloud/pod-security-enforce: privileged
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
