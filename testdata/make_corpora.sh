#!/usr/bin/env bash
# Makes the page corpora of testdata/ with `ztier corpus capture`, from the
# workloads in testdata/gen/. Run as root from anywhere, after `make build`:
#
#   testdata/make_corpora.sh [--ztier PATH] [NAME...]
#
# NAME is any of anon-python anon-cc1plus files-mixed (default: all). Writes
# testdata/NAME.pages.zst and NAME.pages.zst.json (the capture's record),
# then prints their sha256 sums and `ztier estimate` on each. Needs Debian
# 12's python3 and g++ (build-essential). The captures differ from run to
# run (address-space layout, allocator timing); their figures repeat closely.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ZTIER="$HERE/../build/ztier"
if [ "${1:-}" = "--ztier" ]; then ZTIER=$2; shift 2; fi
[ -x "$ZTIER" ] || { echo "make_corpora: no ztier at $ZTIER (run make build)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/ztier-corpora.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
capture() { "$ZTIER" corpus capture --level 19 --max-pages 4096 "$@"; }

# Waits for "ready PID ..." in file $1 and prints PID.
ready_pid() {
  until grep -q '^ready' "$1" 2>/dev/null; do sleep 0.5; done
  awk '/^ready/ {print $2}' "$1"
}

anon-python() {
  PYTHONHASHSEED=0 /usr/bin/python3 "$HERE/gen/python_heap.py" > "$WORK/py" &
  local pid
  pid=$(ready_pid "$WORK/py")
  capture --pid "$pid" -o "$HERE/anon-python.pages.zst"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

# cc1plus is stopped once its resident set reaches 384 MiB, during template
# instantiation, captured while stopped, then killed.
anon-cc1plus() {
  g++ -std=c++20 -O2 -DKINDS=8 -c "$HERE/gen/templates.cc" -o /dev/null \
    2>/dev/null &
  local gxx=$! cc1
  until cc1=$(pgrep -P "$gxx" -x cc1plus); do sleep 0.1; done
  until [ "$(awk '/^VmRSS/ {print $2}' "/proc/$cc1/status")" -ge 393216 ]; do
    sleep 0.2
  done
  kill -STOP "$cc1"
  capture --pid "$cc1" -o "$HERE/anon-cc1plus.pages.zst"
  kill -KILL "$cc1"
  wait "$gxx" 2>/dev/null || true
}

files-mixed() {
  /usr/bin/python3 "$HERE/gen/map_files.py" > "$WORK/files" &
  local pid
  pid=$(ready_pid "$WORK/files")
  capture --pid "$pid" --mappings file -o "$HERE/files-mixed.pages.zst"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(anon-python anon-cc1plus files-mixed)
for n in "${names[@]}"; do
  case "$n" in
    anon-python|anon-cc1plus|files-mixed) ;;
    *) echo "make_corpora: unknown corpus '$n'" >&2; exit 2 ;;
  esac
  echo "== $n"
  "$n"
done
cd "$HERE"
for n in "${names[@]}"; do
  zstd -q -d -c "$n.pages.zst" | sha256sum | sed "s/-\$/$n.pages/"
  sha256sum "$n.pages.zst"
  ls -l "$n.pages.zst"
done
for n in "${names[@]}"; do "$ZTIER" estimate --corpus "$n.pages.zst"; done
