#!/usr/bin/env bash
# Fetches the datasets kiln's examples and their tests use into data/
# (ignored by git). Safe to run again: present and intact files are kept.
#
# data/digits.csv: the UCI handwritten digits (1797 8x8 images, 64 pixel
# values 0..16 then the label per line) as Debian's python3-sklearn package
# ships it (sklearn/datasets/data/digits.csv.gz); the package is downloaded,
# not installed, and only that file is taken out of it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

digits=data/digits.csv
digits_sha256=6ebb3d2fee246a4e99363262ddf8a00a3c41bee6014c373ed9d9216ba7f651b8

intact() { [[ -s $1 ]] && echo "$2  $1" | sha256sum --check --status; }

if ! intact "$digits" "$digits_sha256"; then
  echo "fetch_data: fetching $digits from Debian's python3-sklearn"
  mkdir -p data
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download -q python3-sklearn >/dev/null 2>&1); then
    # A fresh machine may have no package lists yet.
    sudo=()
    if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    (cd "$tmp" && apt-get download -q python3-sklearn >/dev/null 2>&1) || {
      echo "fetch_data: cannot download python3-sklearn with apt-get (no network or no Debian archive?)" >&2
      exit 1
    }
  fi
  dpkg-deb --fsys-tarfile "$tmp"/python3-sklearn_*.deb \
    | tar -xO ./usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz | gunzip >"$digits.tmp"
  if ! intact "$digits.tmp" "$digits_sha256"; then
    echo "fetch_data: $digits from python3-sklearn does not have the expected sha256 $digits_sha256" >&2
    echo "fetch_data: (a new package version?) check it and update the checksum in scripts/fetch_data.sh" >&2
    rm -f "$digits.tmp"
    exit 1
  fi
  mv "$digits.tmp" "$digits"
fi
