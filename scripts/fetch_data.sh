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
echo "data ready in $cache: $(ls "$cache" | tr '\n' ' ')"
