#!/usr/bin/env bash
# The main job: installs what is missing, fetches the real inputs (mache.pqr, lund_a.mtx,
# coins.png), builds weft (release), runs MDH (the OpenCL paper's electrostatics kernel) on
# mache.pqr on the default CPU device (Cranelift) and prints its time, GFLOP/s and output
# image; then the other workloads of docs/workloads.md, each checked against its f64
# reference, and the .weft programs through `weft run`. Usage: scripts/main.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo (Rust 1.95) is required" >&2; exit 1; }
if ! python3 -c 'import numpy' 2>/dev/null; then
  echo "== installing numpy (inputs and reference results)"
  python3 -m pip install --quiet numpy || { echo "error: could not install numpy with pip" >&2; exit 1; }
fi
bash scripts/install_deps.sh
echo "== fetching data (scripts/fetch_data.sh)"
bash scripts/fetch_data.sh
echo "== building weft and its examples (release)"
cargo build --release -q -p weft-cli --bin weft && cargo build --release -q -p weft-workloads --examples
ex=target/release/examples
echo "== MDH: mache.pqr's 8,279 atoms × 64³ grid points on the default CPU device (Cranelift)"
"$ex/mdh" cpu
echo "== the other workloads (docs/workloads.md) on the default CPU device, each against its f64 reference"
"$ex/jacobi" cpu 64 1e-4
"$ex/cg" cpu lund_a
"$ex/ep" cpu 24
"$ex/coins" cpu target/coins_found.png
"$ex/blackscholes" cpu 1000000
echo "== .weft programs through weft run (examples/ir)"
WEFT="$PWD/target/release/weft" python3 scripts/main_workloads.py
