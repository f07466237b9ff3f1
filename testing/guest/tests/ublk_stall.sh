# A read of a written-back page from a remote backing store that has
# stopped answering holds only itself: the ublk queue that took it goes on
# serving reads from RAM at once (the disk's waiter threads,
# src/ublk/include/ublk/ublk_disk.h), and the stalled read completes, with
# the right data, once the remote answers again. One queue, so that both
# reads reach the same queue thread.
. /lib.sh

# Centiseconds since boot.
now_cs() {
  cut -d' ' -f1 /proc/uptime | tr -d .
}

# Whether process $1 still runs (not exited, reaped or not).
alive() {
  s=$(proc_state "$1")
  [ -n "$s" ] && [ "$s" != Z ]
}

# The remote: a second ztier, serving an NBD export over a Unix socket.
ztier serve --unix /run/remote.sock --ctl /run/remote.ctl \
  --device zram0:64M --comp-algorithm lz4 >>/tmp/remote.log 2>&1 &
REMOTE=$!
wait_until 60 test -S /run/remote.ctl
check "the remote ztier started" -S /run/remote.ctl

zt_serve --device zram0:64M --comp-algorithm lz4 --ublk-queues 1 \
  --backing-dev "nbd+unix:///zram0?socket=/run/remote.sock" \
  --backing-timeout 20 || { check "ztier serve started" 1 = 0; finish; }
DEV=$(zt_dev 0)
zt_wait_dev 0
check "$DEV appeared" $? = 0

# 8 MiB of data, all written back; then its second half written again,
# which brings it back to RAM.
dd if=/dev/urandom of=/tmp/data bs=1M count=8 2>/dev/null
dd if=/tmp/data of="$DEV" bs=1M oflag=direct 2>/dev/null
check "8 MiB written" $? = 0
zt_ctl idle all && zt_ctl writeback idle
bd=$(zt_ctl bd_stat)
echo "@@RESULT bd_stat after writeback: $bd"
check "the pages were written back (bd_stat '$bd')" "$(field "$bd" 1)" -ge 2048
dd if=/tmp/data of="$DEV" bs=1M seek=4 skip=4 count=4 oflag=direct 2>/dev/null
check "the second half written again" $? = 0

# bd_reads: counted when the server begins a read of a written-back page.
bd_reads() {
  field "$(zt_ctl bd_stat)" 2
}

kill -STOP "$REMOTE"
# Page 0 is on the remote, which does not answer now.
reads=$(bd_reads)
dd if="$DEV" of=/tmp/page0 bs=4k count=1 iflag=direct 2>/dev/null &
STALLED=$!
wait_until 30 test "$(bd_reads)" -gt "$reads"
check "the server began the read of a written-back page" $? = 0
sleep 1
alive "$STALLED"
check "the read of a written-back page waits for the stopped remote" $? = 0
# Page 1536 is in RAM: it must not wait behind page 0.
t0=$(now_cs)
dd if="$DEV" of=/tmp/page1536 bs=4k skip=1536 count=1 iflag=direct 2>/dev/null
rc=$?
t1=$(now_cs)
echo "@@RESULT a RAM page read while a written-back read stalls: $((t1 - t0))0 ms"
check "the RAM page was read (status $rc)" "$rc" = 0
check "the RAM page was read at once ($((t1 - t0))0 ms, under 3 s)" \
  $((t1 - t0)) -lt 300
dd if=/tmp/data bs=4k skip=1536 count=1 2>/dev/null | cmp -s - /tmp/page1536
check "the RAM page read back right" $? = 0
alive "$STALLED"
check "the written-back read still waits" $? = 0

kill -CONT "$REMOTE"
# Bounded: a read never committed must fail the test, not hang it.
stalled_done() {
  ! alive "$STALLED"
}
wait_until 30 stalled_done
check "the written-back read ended once the remote answered" $? = 0
alive "$STALLED" && kill -KILL "$STALLED"
wait "$STALLED"
rc=$?
check "the written-back read completed once the remote answered (status $rc)" "$rc" = 0
dd if=/tmp/data bs=4k count=1 2>/dev/null | cmp -s - /tmp/page0
check "the written-back page read back right" $? = 0

zt_stop
kill -TERM "$REMOTE"
wait "$REMOTE"
rc=$?
check "the remote ztier exited 0 (status $rc)" "$rc" = 0
finish
