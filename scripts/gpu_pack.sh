#!/usr/bin/env bash
# Builds the statically linked binaries for the GPU machine (DESIGN §7) and packs them into
# .gpu/ (git-ignored): weft, weft-bench and the integration-test binary, stripped and
# xz-compressed (they travel to the GPU machine through the device tool's 64 MiB carry
# limit), plus the workloads' data. Then, on the GPU machine: `bash scripts/gpu_run.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p weft-cli -p weft-bench
tests_bin=$(cargo test --release -p weft-tests --test all --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys, json
for l in sys.stdin:
    try: m = json.loads(l)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "all": print(m["executable"])' | tail -1)
rm -rf .gpu && mkdir -p .gpu
for b in target/release/weft target/release/weft-bench "$tests_bin"; do
  n=$(basename "$b"); n=${n%%-[0-9a-f]*[0-9a-f]}
  [ "$n" = weft-bench ] || [ "$n" = weft ] || n=all
  strip -o ".gpu/$n" "$b"
  ls -la ".gpu/$n"
  xz -T2 -6 ".gpu/$n"
done
cp data/cache/mache.pqr data/cache/lund_a.mtx data/cache/coins.png .gpu/
du -sh .gpu
