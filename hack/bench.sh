#!/usr/bin/env bash
# Benchmarks the provider against the raw Docker floor on this machine and prints a table; the
# figures also go to out/bench.json (git-ignored). Builds what it needs:
#   - the test images (e2e/images/build.sh; nothing is pulled),
#   - the manager image (hack/image-build.sh: a static release build; its binary is the one measured),
#   - the benchmark binary (e2e/bench), optimised like the manager and for the same target and
#     flags, so that it reuses the manager's release dependencies: it holds the in-process test
#     API servers, whose CPU the provider's run shares with the engine and the floor never pays
#     (a debug build of them took about 4× the manager's CPU).
# Usage: hack/bench.sh [--quick] [capd-bench flags, e.g. --repetitions 5 --sizes 1,10,30]
#   --quick  one repetition, N = 1 and 10, a pool of 10, 20 machines for 20 s at rest, without
#            waiting out ext4's inode window after deletions (under 10 minutes; its times are a
#            smoke check, its calls and writes exact: see docs/src/benchmarks.md)
#   --in-memory  the in-memory scale benchmark instead (docs/src/benchmarks.md, "In-memory scale"):
#            no image is built, only the manager and the benchmark; e.g.
#            hack/bench.sh --in-memory --clusters 100 --machines-per-cluster 10
#            (figures to out/bench-inmemory.json)
# Not part of hack/test.sh: the full run (N = 1, 10, 30, 100) takes about 45 minutes on 2 cores,
# most of it waiting before each repetition for the load left by the one before to settle
# (--settle 0 starts at once, and marks such repetitions busy), and on an ext4 without a journal
# about 2 hours (--deletion-wait 0 skips that wait, e.g. to count calls only).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
image=capd-rs-manager:bench

target=x86_64-unknown-linux-gnu
in_memory=false
for arg in "$@"; do
  [[ $arg == --in-memory ]] && in_memory=true
done

if $in_memory; then
  # The same static release manager the image holds, without the images.
  echo "--- manager and benchmark binaries" >&2
  RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release --locked --target "$target" -p capd-rs -p capd-bench --bin manager --bin capd-bench >&2
  exec "target/$target/release/capd-bench" \
    --manager "target/$target/release/manager" \
    --out out/bench-inmemory.json \
    "$@"
fi

echo "--- test images" >&2
bash e2e/images/build.sh >&2
echo "--- manager image $image" >&2
bash hack/image-build.sh "$image" >&2
echo "--- benchmark binary" >&2
RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --release --locked --target "$target" -p capd-bench >&2

exec "target/$target/release/capd-bench" \
  --manager "target/$target/release/manager" \
  --image "$image" \
  --out out/bench.json \
  "$@"
