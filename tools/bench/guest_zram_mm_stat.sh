#!/bin/sh
# guest_zram_mm_stat.sh: the test guest's own zram (Debian's 6.12 kernel,
# which offers zstd, where this machine's kernel does not) filled with each
# corpus of a folder, with lz4 and with zstd, and its mm_stat line for each:
# the kernel figure beside `ztier bench ratio`'s zstd rows
# (docs/benchmarks.md). mem_used_total does not depend on the guest's
# emulated CPU.
#
#   tools/bench/guest_zram_mm_stat.sh [CORPUS_DIR [PARAMS]]
#
# CORPUS_DIR defaults to testdata. PARAMS, zram's algorithm_params tokens
# (such as level=9), go to each codec through the guest's
# /sys/block/zram0/algorithm_params, beside `ztier bench ratio
# --algorithm-params PARAMS`; by default each codec's default level.
#
# Needs the guest of `make test-kernel` (build/guest) and the built ztier:
# a `ztier serve` on the host's loopback holds the corpora and the guest
# reads them over NBD (nbd-client) into /dev/zram0. Prints one line per
# corpus and codec: "CORPUS CODEC <mm_stat's columns>".
set -eu
cd "$(dirname "$0")/../.."
dir=${1:-testdata}
params=${2:-}
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
names=""
for c in "$dir"/*.pages.zst; do
  zstd -dqf "$c" -o "$work/one.bin"
  # Each corpus padded to 16 MiB (4096 pages; the checkout's are that size).
  truncate -s 16M "$work/one.bin"
  cat "$work/one.bin" >> "$work/all.bin"
  names="$names $(basename "$c" .pages.zst)"
done
n=$(echo $names | wc -w)
port=$((20000 + $$ % 20000))
./build/ztier serve --device zram0:$((n * 16))M --listen 127.0.0.1:$port \
  --unix "$work/nbd.sock" --ctl "$work/ctl.sock" > "$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do [ -S "$work/nbd.sock" ] && break; sleep 0.1; done
nbdcopy "$work/all.bin" "nbd+unix:///zram0?socket=$work/nbd.sock"
cat > "$work/guest.sh" <<GUEST
. /lib.sh
attach $port || exit 1
i=0
for corpus in $names; do
  for codec in lz4 zstd; do
    echo 1 > /sys/block/zram0/reset
    echo \$codec > /sys/block/zram0/comp_algorithm
    if [ -n "$params" ]; then
      echo "algo=\$codec $params" > /sys/block/zram0/algorithm_params || exit 1
    fi
    echo 16M > /sys/block/zram0/disksize
    dd if=/dev/nbd0 of=/dev/zram0 bs=128k count=128 skip=\$((i * 128)) \
      iflag=direct oflag=direct 2>/dev/null
    echo "@@MM \$corpus \$codec \$(cat /sys/block/zram0/mm_stat)"
  done
  i=\$((i + 1))
done
nbd-client -d /dev/nbd0 >/dev/null
GUEST
python3 testing/guest/run_guest.py build/guest "$work/guest.sh" --mem 512 \
  --timeout 600 | sed -n 's/^@@MM //p'
