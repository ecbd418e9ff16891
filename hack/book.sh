#!/usr/bin/env bash
# Builds the book (docs/, an mdBook) into docs/book/ and checks it (docs/src/contributing.md, "The book"):
# the scale-curve figure matches the benchmarks' table, `mdbook build docs` succeeds, and no internal
# link or anchor of the book or of README.md leads nowhere (hack/linkcheck.py; no network).
#
# mdbook comes from crates.io, pinned, with only its `search` feature: the default `serve` and `watch`
# (a live-reload server and a file watcher, for writers) would add tokio, axum and notify to the build,
# while the search box costs one crate. It is kept in /var/cache/capd-rs/mdbook (CAPD_MDBOOK_CACHE to
# change), so only the first run compiles it (2.5–4 minutes on two cores); a missing cache, or another
# version in it, is installed again. To preview while writing: `$cache/bin/mdbook build docs` and open
# docs/book/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.5.4
cache=${CAPD_MDBOOK_CACHE:-/var/cache/capd-rs/mdbook}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/capd-rs/mdbook
  mkdir -p "$cache"
fi
mdbook=$cache/bin/mdbook
if [ "$("$mdbook" --version 2>/dev/null)" != "mdbook v$version" ]; then
  echo "--- installing mdbook $version into $cache (once)"
  nice cargo install mdbook --locked --version "$version" --no-default-features --features search \
    --force --root "$cache" --quiet
fi

python3 hack/scale-curve.py --check
rm -rf docs/book
"$mdbook" build docs
python3 hack/linkcheck.py docs/book
