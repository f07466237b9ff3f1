# A ztier server killed with SIGKILL leaves its ublk disk behind in the
# kernel (the driver removes the block disk when its server dies, but the
# ublk device, /dev/ublkc0, stays until someone deletes it). A new server
# deletes that stale disk when it starts and serves a new one in its
# place; SIGTERM then removes every disk, warning of cut-off clients only
# where a disk is in use (held open), not for every disk that holds data.
. /lib.sh

dd if=/dev/urandom of=/tmp/pat bs=1M count=4 2>/dev/null
roundtrip() {
  dd if=/tmp/pat of="$1" bs=64k oflag=direct 2>/dev/null &&
    dd if="$1" bs=64k count=64 iflag=direct 2>/dev/null | cmp - /tmp/pat
}
ublk_state() {
  echo "$(ls /dev/ublkb* /dev/ublkc* 2>/dev/null | tr '\n' ' ')"
}

zt_serve --device zram0:64M --comp-algorithm lz4 ||
  { check "ztier serve started" 1 = 0; finish; }
D0=$(zt_dev 0)
zt_wait_dev 0
check "$D0 appeared" $? = 0
roundtrip "$D0"
check "the first server serves IO" $? = 0

zt_kill9
echo "after kill -9: $(ublk_state)"
check "the killed server left its ublk device behind (/dev/ublkc0)" -c /dev/ublkc0
# The driver notices a dead server (its char device closed with the
# process) and stops the block disk; it never deletes the device.
zt_wait_gone "$D0" 30
check "the driver stopped the dead server's $D0" $? = 0
echo "after the driver noticed: $(ublk_state)"

mv "$ZT_LOG" /tmp/ztier-serve-1.log
zt_serve --device zram0:64M --comp-algorithm lz4 ||
  { check "the second ztier serve started" 1 = 0; finish; }
zt_wait_dev 0
check "the second server's $D0 appeared" $? = 0
state=$(ublk_state)
echo "with the second server: $state"
# Had the stale device stayed, the new disk would have taken the lowest
# free id, 1.
check "the stale device is gone: one ublk device, id 0 ($state)" \
  "$state" = "/dev/ublkb0 /dev/ublkc0 "
# Nothing held the dead disk: its delete (a blocking DEL_DEV before 6.9)
# was done at once, and no warning says it waits for an opener.
waits=$(grep -c 'lets go of it' "$ZT_LOG")
check "no warning of a delete waiting for an opener ($waits)" "$waits" = 0
zt_log
roundtrip "$D0"
check "the second server's $D0 serves IO (write, read back, cmp)" $? = 0
mm=$(zt_ctl mm_stat)
check "the IO went to the second server (orig_data_size $(field "$mm" 1))" \
  "$(field "$mm" 1)" -ge 4194304

zt_stop
# The disk held 4 MiB but nobody used it at the stop: its own client ref
# is no client the stop would cut off, and no warning says otherwise.
warned=$(grep -c 'client(s) attached' "$ZT_LOG")
check "no 'client(s) attached' warning for an unused disk ($warned)" \
  "$warned" = 0
[ "$warned" = 0 ] || zt_log

# ... but a disk held open at the stop is a client cut off: said, by path.
mv "$ZT_LOG" /tmp/ztier-serve-2.log
zt_serve --device zram0:64M --comp-algorithm lz4 ||
  { check "the third ztier serve started" 1 = 0; finish; }
zt_wait_dev 0
roundtrip "$D0"
check "the third server's $D0 serves IO" $? = 0
exec 3<"$D0"
zt_stop
exec 3<&-
warned=$(grep -c "client(s) attached ($D0: process" "$ZT_LOG")
check "a 'client(s) attached' warning for a disk held open ($warned)" \
  "$warned" = 1
[ "$warned" = 1 ] || zt_log
finish
