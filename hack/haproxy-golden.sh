#!/bin/sh
# Regenerates the expected outputs of the haproxy template tests with Go's text/template (what
# CAPD renders customHAProxyConfigTemplateRef with): every template under
# src/docker/testdata/haproxy/templates and the default template, with every data set of
# data.json. Needs Go 1.23 or newer (GO=/path/to/go to choose one).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-$(command -v go || echo /usr/lib/go-1.23/bin/go)}
data=$root/src/docker/testdata/haproxy
rm -rf "$data/expected"
cd "$root/hack/haproxy-golden"
"$go" run . -data "$data/data.json" -out "$data/expected" \
  "$root/src/docker/loadbalancer/default.cfg.tmpl" "$data"/templates/*.tmpl
echo "wrote $(find "$data/expected" -type f | wc -l) expected outputs under $data/expected"
