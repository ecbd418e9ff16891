#!/usr/bin/env bash
# Renders the provider's clusterctl release artifacts from config/ (kustomize built into kubectl):
#   OUT_DIR/infrastructure-components.yaml
#   OUT_DIR/repository/infrastructure-docker/<nextVersion>/   a clusterctl local repository: components,
#                                                           metadata.yaml and the cluster templates
# Usage: hack/build-components.sh [OUT_DIR]     (default: out/ at the repository root, git-ignored)
# The output depends only on config/, metadata.yaml, templates/ and the kustomize version (kubectl >= 1.27,
# kustomize v5): running it twice gives the same bytes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out}

if ! command -v kubectl >/dev/null 2>&1; then
  echo "error: kubectl is required to build the components (its built-in kustomize renders config/default);" \
    "install kubectl >= 1.27" >&2
  exit 1
fi

# One value of clusterctl-settings.json, the file clusterctl's create-local-repository.py reads too.
setting() {
  local value
  value=$(sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\([^\"]*\)\".*/\1/p" "$root/clusterctl-settings.json")
  if [[ -z $value ]]; then
    echo "error: clusterctl-settings.json has no \"$1\"" >&2
    exit 1
  fi
  printf '%s' "$value"
}
provider=$(setting name)
components_file=$(setting componentsFile)
version=$(setting nextVersion)
config_folder=$(setting configFolder)

# The CRDs are generated from the Rust types; say so instead of kustomize's "evalsymlink failure".
while read -r crd; do
  if [[ ! -f "$root/config/crd/$crd" ]]; then
    echo "error: config/crd/$crd is missing: generate the CRDs with \`cargo run --bin crdgen\`" >&2
    exit 1
  fi
done < <(sed -n 's/^- \(bases\/.*\.yaml\)[[:space:]]*$/\1/p' "$root/config/crd/kustomization.yaml")

mkdir -p "$out"
tmp=$(mktemp "$out/.components.XXXXXX")
trap 'rm -f "$tmp"' EXIT
kubectl kustomize "$root/$config_folder" >"$tmp"
mv "$tmp" "$out/$components_file"

repo="$out/repository/$provider/$version"
rm -rf "$repo"
mkdir -p "$repo"
cp "$out/$components_file" "$repo/$components_file"
cp "$root/metadata.yaml" "$repo/metadata.yaml"
if compgen -G "$root/templates/*.yaml" >/dev/null; then
  cp "$root"/templates/*.yaml "$repo/"
fi

echo "wrote $out/$components_file"
echo "wrote clusterctl local repository $repo"
