#!/usr/bin/env bash
# Installs the system packages the build needs when they are missing (DESIGN §7): LLVM 19
# with its static libraries (llvm-19-dev, libpolly-19-dev), zstd, and a C compiler/linker.
# On Debian/Ubuntu through apt-get (as root, or with sudo when available).
set -euo pipefail
need=()
command -v llvm-config-19 >/dev/null || need+=(llvm-19-dev)
[ -e /usr/lib/llvm-19/lib/libPolly.a ] || need+=(libpolly-19-dev)
{ [ -e /usr/include/zstd.h ] || [ -e /usr/lib/x86_64-linux-gnu/libzstd.so ]; } || need+=(libzstd-dev)
command -v cc >/dev/null || need+=(build-essential)
[ ${#need[@]} -eq 0 ] && exit 0
echo "== installing ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! command -v apt-get >/dev/null; then
  echo "error: please install ${need[*]} (LLVM 19 with static libraries) with your package manager" >&2
  exit 1
fi
$sudo apt-get update -qq || true
$sudo apt-get install -y -qq "${need[@]}" >/dev/null || {
  echo "error: apt-get could not install ${need[*]}" >&2; exit 1; }
command -v llvm-config-19 >/dev/null || { echo "error: llvm-config-19 still missing" >&2; exit 1; }
