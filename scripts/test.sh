#!/usr/bin/env bash
# Runs every check and test of the workspace: formatting, clippy (-D warnings), the API docs
# (rustdoc -D warnings), and all tests
# (unit tests, the filetests, the parser fuzz budget, the workloads on real data, doc tests). Installs nothing but what
# the tests need. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo (Rust 1.95) is required" >&2; exit 1; }
bash scripts/install_deps.sh
# The workload tests read real inputs (mache.pqr, lund_a.mtx, coins.png): fetched and checked.
bash scripts/fetch_data.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The API documentation builds without warnings (broken intra-doc links, private links).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo test --workspace
