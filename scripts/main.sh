#!/usr/bin/env bash
# The main job: installs what is missing, builds weft (release), and runs the example
# workloads in examples/ir on the default CPU device, checking them against numpy.
# Usage: scripts/main.sh
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
echo "== building weft (release)"
cargo build --release -p weft
WEFT="$PWD/target/release/weft" python3 scripts/main_workloads.py
echo "== the weft library: the MDH example on mache.pqr (4,096 atoms × 32³ points) and the particle system, on the default CPU device"
cargo run --release -q -p weft --example mdh -- cpu 4096 32
cargo run --release -q -p weft --example particles -- cpu 100000 100
