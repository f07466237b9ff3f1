# A ztier ublk disk in use cannot be taken away: while /dev/ublkb0 is
# mounted (and /dev/ublkb1 swapped on, then held open by a process),
# hot_remove and reset are refused with EBUSY and the disk keeps serving;
# once unmounted (swapped off, closed), hot_remove succeeds.
. /lib.sh

# refused WHAT ARGS...: `ztier ctl ARGS` must fail with EBUSY.
refused() {
  what=$1
  shift
  out=$(zt_ctl "$@" 2>&1)
  rc=$?
  echo "ztier ctl $*: status $rc, '$out'"
  check "$what refused with EBUSY" "$rc:$(echo "$out" | grep -c 'EBUSY')" = "1:1"
}

zt_serve --device zram0:64M --device zram1:64M --comp-algorithm lz4 ||
  { check "ztier serve started" 1 = 0; finish; }
D0=$(zt_dev 0) D1=$(zt_dev 1)
zt_wait_dev 0 && zt_wait_dev 1
check "$D0 and $D1 appeared" $? = 0

mkfs.ext4 -q -F "$D0" && mkdir -p /mnt/z && mount -t ext4 "$D0" /mnt/z
check "mkfs.ext4 and mount $D0" $? = 0
refused "hot_remove 0 while mounted" hot_remove 0
refused "reset of zram0 while mounted" --device zram0 reset 1
check "$D0 is still there" -b "$D0"
dd if=/dev/urandom of=/tmp/f bs=1M count=4 2>/dev/null
cp /tmp/f /mnt/z/f && sync && echo 3 > /proc/sys/vm/drop_caches &&
  cmp /mnt/z/f /tmp/f
check "the mounted file system still serves (write, sync, drop caches, read)" $? = 0
ds=$(zt_ctl --device zram0 disksize)
check "zram0 kept its disksize ($ds)" "$ds" = 67108864

mkswap "$D1" >/dev/null && swapon "$D1"
check "swapon $D1" $? = 0
refused "hot_remove 1 while swapped on" hot_remove 1
refused "reset of zram1 while swapped on" --device zram1 reset 1
swapoff "$D1"
check "swapoff $D1" $? = 0
# A process that holds the disk open without claiming it (as dd or qemu
# do) is a user too, as zram's reset counts its disk's openers.
sleep 600 < "$D1" &
holder=$!
# The background shell opens $D1, then runs sleep: wait for the open.
holds_d1() {
  [ "$(readlink "/proc/$holder/fd/0")" = "$D1" ]
}
wait_until 30 holds_d1
check "a process holds $D1 open" $? = 0
refused "hot_remove 1 while a process holds it open" hot_remove 1
refused "reset of zram1 while a process holds it open" --device zram1 reset 1
kill $holder
wait $holder 2>/dev/null

umount /mnt/z
check "umount" $? = 0
out=$(zt_ctl hot_remove 0 2>&1)
check "hot_remove 0 after umount succeeds ('$out')" $? = 0
zt_wait_gone "$D0" 30
check "$D0 disappeared" $? = 0
out=$(zt_ctl hot_remove 1 2>&1)
check "hot_remove 1 after swapoff succeeds ('$out')" $? = 0
zt_wait_gone "$D1" 30
check "$D1 disappeared" $? = 0

zt_stop
finish
