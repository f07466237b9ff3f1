# Swap: the same workload (patterns: twice the guest's RAM in patterned
# words, every word read back) on the guest kernel's own zram (lz4) and on
# ztier over NBD (lz4), alternating, REPS times each; both with discard
# (swapon -d). Variables from kernel_tests.py: PORT, REPS, MIB.
. /lib.sh

zram_run() {
  echo 1 > /sys/block/zram0/reset
  echo lz4 > /sys/block/zram0/comp_algorithm
  echo 1G > /sys/block/zram0/disksize
  mkswap /dev/zram0 >/dev/null
  swapon -d /dev/zram0 || { check "zram swapon -d" 1 = 0; return; }
  out=$(patterns "$MIB" "$1")
  rc=$?
  echo "$out"
  echo "@@RESULT swap zram $1 $out"
  echo "@@RESULT mm_stat zram $1 $(cat /sys/block/zram0/mm_stat)"
  check "zram rep $1: every word read back" "$rc" = 0
  # Left on, zram0 (the higher priority) would take ztier's run's swap.
  swapoff /dev/zram0
  check "zram rep $1: swapoff" $? = 0
}

# The workload's pages left ztier's pool: at most 5% of the peak stays.
_discarded() {
  a=$(field "$(host ctl mm_stat)" 1)
  [ -n "$a" ] && [ "$((a * 20))" -le "$peak" ]
}

ztier_run() {
  attach "$PORT" -swap || { check "nbd-client -swap" 1 = 0; return; }
  mkswap /dev/nbd0 >/dev/null
  swapon -d /dev/nbd0 || { check "ztier swapon -d" 1 = 0; return; }
  patterns "$MIB" "$1" > /tmp/out &
  w=$!
  peak=0
  while kill -0 $w 2>/dev/null; do
    o=$(field "$(host ctl mm_stat)" 1)
    [ -n "$o" ] && [ "$o" -gt "$peak" ] && peak=$o
    sleep 2
  done
  wait $w
  rc=$?
  out=$(cat /tmp/out)
  echo "$out"
  # Discards of the freed swap clusters are queued work: wait for them.
  wait_until 30 _discarded
  after=$(host ctl mm_stat)
  echo "@@RESULT swap ztier $1 $out"
  echo "@@RESULT mm_stat ztier $1 peak_orig_data_size $peak after: $after"
  check "ztier rep $1: every word read back" "$rc" = 0
  # The workload went through ztier: at its peak ztier held (orig_data_size)
  # at least a quarter of it (about all of it, in the runs so far).
  check "ztier rep $1: peak stored bytes $peak >= 1/4 of $MIB MiB" \
    "$peak" -ge $((MIB * 1024 * 1024 / 4))
  a=$(field "$after" 1)
  check "ztier rep $1: after the workload, stored bytes '$a' <= 5% of the peak $peak" \
    "$a" -le "$((peak / 20))"
  # swapoff reads every page still in swap back from ztier.
  swapoff /dev/nbd0
  check "ztier rep $1: swapoff" $? = 0
  nbd-client -d /dev/nbd0 >/dev/null
  check "ztier rep $1: nbd-client -d" $? = 0
  # What swapoff read back stays stored until the next swapon -d discards
  # the whole device.
}

# Swap over the network needs memory to send: the guest's network driver
# refills its receive ring with atomic allocations, and at the edge of
# memory, with the default reserve (about 1.5 MiB here), those fail, the
# host's ACKs are never received, and swap-out to nbd0 waits forever.
# A larger reserve (vm.min_free_kbytes), as docs/swap.md asks of a client
# kernel, keeps atomic allocations working; zram gets the same setting.
echo 16384 > /proc/sys/vm/min_free_kbytes
rep=1
while [ "$rep" -le "$REPS" ]; do
  zram_run "$rep"
  ztier_run "$rep"
  rep=$((rep + 1))
done
finish
