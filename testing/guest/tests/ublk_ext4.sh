# ext4 on a ztier disk served by ztier in the guest (ublk): a tarball in and
# out through the file system with the page cache dropped between, then
# fstrim frees its pool memory.
. /lib.sh

# The tarball: the programs of /opt and /lib (about 19 MiB), and the
# largest libraries of /opt/lib under 16 MiB each, up to 20 MiB more.
extra=$(ls -S /opt/lib | while read -r f; do
  s=$(stat -c %s "/opt/lib/$f")
  [ "$s" -lt 16777216 ] || continue
  total=$((${total:-0} + s))
  echo "/opt/lib/$f"
  [ "$total" -lt 20971520 ] || break
done)
tar -cf /tmp/tarball.tar /opt/libexec /lib $extra 2>/dev/null
size=$(stat -c %s /tmp/tarball.tar)
want=$(sha256sum /tmp/tarball.tar | cut -d' ' -f1)
echo "@@RESULT tarball $size bytes, sha256 $want"
check "a tarball of a few tens of MiB ($size bytes)" "$size" -ge 33554432

zt_serve --device zram0:256M --comp-algorithm lz4 || { check "ztier serve started" 1 = 0; finish; }
DEV=$(zt_dev 0)
zt_wait_dev 0
check "$DEV appeared" $? = 0
mkfs.ext4 -q -F "$DEV"
check "mkfs.ext4 $DEV" $? = 0
mkdir -p /mnt/z
mount -t ext4 "$DEV" /mnt/z
check "mount" $? = 0
cp /tmp/tarball.tar /mnt/z/
check "cp in" $? = 0
sync
echo 3 > /proc/sys/vm/drop_caches
cp /mnt/z/tarball.tar /tmp/back.tar
check "cp out" $? = 0
got=$(sha256sum /tmp/back.tar | cut -d' ' -f1)
check "sha256 after sync, drop_caches and the copy out ($got)" "$got" = "$want"
rm -f /tmp/back.tar

sync
before=$(zt_ctl mm_stat)
rm /mnt/z/tarball.tar
sync
fstrim -v /mnt/z
check "fstrim" $? = 0
after=$(zt_ctl mm_stat)
echo "@@RESULT mm_stat before rm+fstrim: $before"
echo "@@RESULT mm_stat after rm+fstrim:  $after"
b1=$(field "$before" 1) a1=$(field "$after" 1)
b3=$(field "$before" 3) a3=$(field "$after" 3)
check "fstrim freed the file's data: orig_data_size $b1 -> $a1 (file $size)" \
  "$((b1 - a1))" -ge "$((size * 9 / 10))"
check "fstrim freed pool memory: mem_used_total $b3 -> $a3" \
  "$((a3 * 2))" -le "$b3"
umount /mnt/z
check "umount" $? = 0

zt_stop
finish
