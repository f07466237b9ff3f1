#!/bin/sh
# unit_read_bound.sh: the codec's own bound on random 4 KiB reads and on
# reads in order from 16-page units (unit_read_bound.cc), on each corpus of
# a folder: what docs/benchmarks.md sets beside `ztier bench ratio`'s
# units-16 rows.
#
#   tools/bench/unit_read_bound.sh [CORPUS_DIR]     (default testdata)
#
# Builds unit_read_bound with g++ against liblz4 and libzstd (installed by
# `make deps`) into build/, and runs it on each *.pages.zst, decompressed
# into a temporary folder.
set -eu
cd "$(dirname "$0")/../.."
dir=${1:-testdata}
mkdir -p build
bin=$(pwd)/build/unit_read_bound
g++ -O2 -std=c++20 -Wall -Wextra -o "$bin" tools/bench/unit_read_bound.cc \
  -llz4 -lzstd
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for c in "$dir"/*.pages.zst; do
  name=$(basename "$c" .zst)
  zstd -dqf "$c" -o "$work/$name"
  (cd "$work" && "$bin" "$name")
done
