# ublk.sh: `ztier serve --ublk` inside the guest (Debian 6.12 with
# ublk_drv), from build_guest.py --ztier's /opt/bin: /dev/ublkb0 appears,
# data round-trips with direct IO, ext4 on it, reset refused while it is
# mounted, hot_add + disksize makes /dev/ublkb1, fio verifies, swap on it,
# SIGTERM removes the disks, and a SIGKILLed server's disk is deleted by
# the next start. Prints the descriptor trace (--ublk-trace) between
# "@@TRACE begin" and "@@TRACE end" for testdata/ublk_descriptors.txt.
#
#   python3 testing/guest/run_guest.py build/guest testing/guest/tests/ublk.sh --mem 512 --smp 2
. /lib.sh
S="--unix /tmp/z.sock --ctl /tmp/z.ctl"
ls -l /dev/ublk-control
check control -c /dev/ublk-control

wait_for() {  # wait_for TEST-ARGS...: up to 20 s
  i=0
  while [ $i -lt 100 ]; do
    [ "$@" ] && return 0
    sleep 0.2
    i=$((i + 1))
  done
  return 1
}

ztier serve --ublk --device zram0:64M --ublk-trace /tmp/trace.txt $S \
  >/tmp/serve.log 2>&1 &
PID=$!
wait_for -b /dev/ublkb0
cat /tmp/serve.log
check ublkb0 -b /dev/ublkb0

dd if=/dev/urandom of=/tmp/a bs=1M count=4 2>/dev/null
dd if=/tmp/a of=/dev/ublkb0 bs=1M oflag=direct 2>/dev/null
dd if=/dev/ublkb0 of=/tmp/b bs=1M count=4 iflag=direct 2>/dev/null
cmp /tmp/a /tmp/b
check roundtrip $? = 0
ztier ctl --ctl /tmp/z.ctl --device zram0 mm_stat

mkdir -p /mnt/z
mkfs.ext4 -q -F /dev/ublkb0 && mount -t ext4 -o discard /dev/ublkb0 /mnt/z
check mount $? = 0
cp /tmp/a /mnt/z/a && sync
echo 3 >/proc/sys/vm/drop_caches
cmp /tmp/a /mnt/z/a
check ext4_file $? = 0
rm /mnt/z/a && sync && { fstrim -v /mnt/z || true; }
ztier ctl --ctl /tmp/z.ctl --device zram0 reset 1
check reset_refused_while_mounted $? != 0
check still_there -b /dev/ublkb0
umount /mnt/z

ztier ctl --ctl /tmp/z.ctl hot_add
ztier ctl --ctl /tmp/z.ctl --device zram1 disksize 32M
wait_for -b /dev/ublkb1
check hot_add_ublkb1 -b /dev/ublkb1
ztier ctl --ctl /tmp/z.ctl --device zram1 reset 1
check reset_unused $? = 0
wait_for ! -b /dev/ublkb1
check reset_removes_ublkb1 ! -b /dev/ublkb1

if command -v fio >/dev/null; then
  fio --name=v --filename=/dev/ublkb0 --rw=randwrite --bs=4k,64k --size=16m \
    --direct=1 --ioengine=psync --numjobs=1 --verify=crc32c \
    --verify_fatal=1 --output-format=terse >/tmp/fio.txt 2>&1
  rc=$?
  tail -3 /tmp/fio.txt
  check fio_verify $rc = 0
fi

mkswap /dev/ublkb0 >/dev/null && swapon -d /dev/ublkb0
check swapon $? = 0
cat /proc/swaps
swapoff /dev/ublkb0

kill -TERM $PID
wait $PID
check serve_exit $? = 0
cat /tmp/serve.log
check sigterm_removes_ublkb0 ! -b /dev/ublkb0

echo "@@TRACE begin"
wc -l /tmp/trace.txt
head -120 /tmp/trace.txt
# and the first line of every op and flag combination after those
tail -n +121 /tmp/trace.txt | awk '!seen[$1 " " $2]++'
echo "@@TRACE end"

# Crash: SIGKILL leaves the disk; the next start deletes it.
ztier serve --ublk --device zram0:16M $S >/tmp/serve2.log 2>&1 &
PID=$!
wait_for -b /dev/ublkb0
grep -q "as a block device" /tmp/serve2.log || sleep 3
kill -KILL $PID
wait $PID 2>/dev/null
sleep 1
ls -l /dev/ublk* 2>/dev/null
ztier serve --ublk --device zram0:16M $S >/tmp/serve3.log 2>&1 &
PID=$!
wait_for -b /dev/ublkb0
sleep 1
cat /tmp/serve3.log
ls -l /dev/ublk*
grep -q "stopping and deleting it" /tmp/serve3.log
check recovery_logged $? = 0
check ublkb0_again -b /dev/ublkb0
kill -TERM $PID
wait $PID
finish
