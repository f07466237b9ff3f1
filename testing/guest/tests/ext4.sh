# A file system on ztier: the two test flows of the zram writeback batching
# series (docs/references.md), as it writes them, with ztier on the host and
# its backing file there; then fstrim. Variables from kernel_tests.py: PORT,
# BACKING1 (the backing file of zram1, on the host).
. /lib.sh

# 1) zram0 has a writeback device (--backing-dev) and a disksize.
# 2) the sha256sum of a tarball
tar -cf /tmp/tarball.tar /lib /bin/patterns 2>/dev/null
want=$(sha256sum /tmp/tarball.tar | cut -d' ' -f1)
echo "tarball $(stat -c %s /tmp/tarball.tar) bytes, sha256 $want"
# 3) mkfs.ext4 on the device, cp the tarball
attach "$PORT" || { check "nbd-client" 1 = 0; finish; }
mkfs.ext4 -q -F /dev/nbd0
check "mkfs.ext4" $? = 0
mkdir -p /mnt/z
mount -t ext4 /dev/nbd0 /mnt/z
check "mount ext4" $? = 0
cp /tmp/tarball.tar /mnt/z/
umount /mnt/z  # everything on the device, nothing in the page cache
# 4) idle writeback
host ctl idle all
host ctl writeback idle
check "writeback idle" $? = 0
bd=$(host ctl bd_stat)
echo "bd_stat after writeback: $bd"
check "pages were written back (bd_stat $bd)" "$(field "$bd" 3)" -gt 1000
# 5) cp the tarball from the device (re-reading written-back pages) and
#    compare the sha256sum again
mount -t ext4 /dev/nbd0 /mnt/z
cp /mnt/z/tarball.tar /tmp/back.tar
got=$(sha256sum /tmp/back.tar | cut -d' ' -f1)
check "sha256 after writeback and re-read ($got)" "$got" = "$want"
bd=$(host ctl bd_stat)
echo "bd_stat after the re-read: $bd"
check "the re-read read the backing store (bd_stat $bd)" "$(field "$bd" 2)" -gt 0

# fstrim frees pool memory: a second copy of the tarball lives in the pool;
# removing both and trimming frees its pages, and the first copy's blocks on
# the backing store.
cp /tmp/tarball.tar /mnt/z/second.tar
sync
before=$(field "$(host ctl mm_stat)" 1)
rm /mnt/z/tarball.tar /mnt/z/second.tar
sync
fstrim /mnt/z
check "fstrim" $? = 0
after=$(field "$(host ctl mm_stat)" 1)
size=$(stat -c %s /tmp/tarball.tar)
echo "orig_data_size before rm+fstrim $before, after $after (file $size bytes)"
check "fstrim freed the file's pool memory ('$before' -> '$after')" \
  "$after" -le "$((before - size * 9 / 10))"
bd=$(host ctl bd_stat)
echo "bd_stat after fstrim: $bd"
check "fstrim freed the written-back blocks (bd_stat $bd)" \
  "$(field "$bd" 1)" -lt 100
umount /mnt/z
nbd-client -d /dev/nbd0 >/dev/null

# Writeback limit: 1) a device with a writeback device; 2) writeback_limit
# 1002 and enabled; 3) write 10M, across the limit; 4) idle writeback;
# 5) the writeback is limited to 1002 pages.
host ctl hot_add
host ctl --device zram1 backing_dev "$BACKING1"
host ctl --device zram1 disksize 64M
host ctl --device zram1 writeback_limit_enable 1
host ctl --device zram1 writeback_limit 1002
nbd-client 10.0.2.2 "$PORT" /dev/nbd1 -N zram1 -b 4096 ||
  { check "nbd-client zram1" 1 = 0; finish; }
# 10M of data that does not repeat (as fio's buffers), written direct
dd if=/dev/urandom of=/tmp/r bs=1M count=10 2>/dev/null
dd if=/tmp/r of=/dev/nbd1 bs=4k oflag=direct 2>/dev/null
check "dd 10M to zram1" $? = 0
host ctl --device zram1 idle all
host ctl --device zram1 writeback idle
bd=$(host ctl --device zram1 bd_stat)
echo "zram1 bd_stat: $bd"
check "writeback stopped at the limit: bd_stat '$bd'" \
  "$(echo $bd)" = "1002 0 1002"
lim=$(host ctl --device zram1 writeback_limit)
check "writeback_limit spent ($lim)" "$lim" = 0
nbd-client -d /dev/nbd1 >/dev/null
finish
