# Hot-plug of ztier's ublk disks, with the disks idle: hot_remove (through
# ztier ctl in the guest) makes /dev/ublkb1 disappear and leaves
# /dev/ublkb0 alone; hot_add and disksize bring /dev/ublkb1 back, and it
# serves IO.
. /lib.sh

# A pattern that is not all one byte: 2 MiB of files, then 2 MiB random.
tar -cf - /lib 2>/dev/null | dd of=/tmp/pat bs=1M count=2 iflag=fullblock 2>/dev/null
dd if=/dev/urandom bs=1M count=2 2>/dev/null >> /tmp/pat

# roundtrip N: writes the pattern to disk N (direct) and reads it back.
roundtrip() {
  d=$(zt_dev "$1")
  dd if=/tmp/pat of="$d" bs=64k oflag=direct 2>/dev/null &&
    dd if="$d" bs=64k count=64 iflag=direct 2>/dev/null | cmp - /tmp/pat
}

zt_serve --device zram0:64M --device zram1:64M --comp-algorithm lz4 ||
  { check "ztier serve started" 1 = 0; finish; }
zt_wait_dev 0 && zt_wait_dev 1
check "$(zt_dev 0) and $(zt_dev 1) appeared" $? = 0
roundtrip 1
check "zram1 serves IO before the hot_remove" $? = 0

out=$(zt_ctl hot_remove 1 2>&1)
rc=$?
echo "hot_remove 1: status $rc, '$out'"
check "hot_remove 1 of an idle disk succeeds" "$rc" = 0
zt_wait_gone "$(zt_dev 1)" 30
check "$(zt_dev 1) disappeared" $? = 0
check "$(zt_dev 0) is still there" -b "$(zt_dev 0)"
out=$(zt_ctl --device zram1 disksize 2>&1)
rc=$?
echo "zram1 disksize after the hot_remove: status $rc, '$out'"
check "zram1 is gone from the control socket too (ENODEV)" \
  "$rc:$(echo "$out" | grep -c ENODEV)" = "1:1"

n=$(zt_ctl hot_add 2>&1)
echo "hot_add: '$n'"
check "hot_add gives zram1 back ($n)" "$n" = 1
zt_ctl --device zram1 disksize 32M
check "disksize 32M on the new zram1" $? = 0
zt_wait_dev 1 30
check "$(zt_dev 1) is back" $? = 0
sectors=$(cat /sys/block/$(basename "$(zt_dev 1)")/size 2>/dev/null)
check "$(zt_dev 1) has the new size, 32 MiB ($sectors sectors)" "$sectors" = 65536
roundtrip 1
check "the new $(zt_dev 1) serves IO (write, read back, cmp)" $? = 0
roundtrip 0
check "$(zt_dev 0) still serves IO" $? = 0
st=$(ztier status --ctl "$ZT_CTL" 2>&1)
echo "$st"
check "ztier status shows both disks, no queue given up" \
  "$(echo "$st" | grep -c -E '^zram[01]: /dev/ublkb[0-9]+, [0-9]+ queues$')" = 2
mm=$(zt_ctl --device zram1 mm_stat)
check "the IO went to the new zram1 (orig_data_size $(field "$mm" 1))" \
  "$(field "$mm" 1)" -ge 4194304

zt_stop
finish
