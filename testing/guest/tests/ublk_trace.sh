# Not a test of the default list: captures real ublk request descriptors
# for testdata/ublk_descriptors.txt (src/ublk/request_test.cc replays it).
# ztier serves zram0 with --ublk-trace; a short mix of reads, writes,
# trims (fio --rw=trim), fsyncs and write zeroes (BLKZEROOUT) runs on
# /dev/ublkb0; the trace goes to the console between "@@TRACE begin" and
# "@@TRACE end", and kernel_tests.py writes it to
# DIR/results/ublk_descriptors.txt.
. /lib.sh

SIZE=64M
zt_serve --device zram0:$SIZE --comp-algorithm lz4 --ublk-max-io 512K --ublk-trace /tmp/trace.txt ||
  { check "ztier serve started" 1 = 0; finish; }
DEV=$(zt_dev 0)
zt_wait_dev 0
check "$DEV appeared" $? = 0
f="--filename=$DEV --ioengine=io_uring --direct=1 --output-format=terse"
fio --name=mix $f --rw=randrw --bs=4k --iodepth=16 --size=8m >/dev/null
check "fio randrw 4k" $? = 0
fio --name=seq $f --rw=write --bs=256k --iodepth=4 --size=8m --fsync=4 >/dev/null
check "fio write 256k with fsync" $? = 0
fio --name=big $f --rw=read --bs=1m --iodepth=2 --size=4m >/dev/null
check "fio read 1m" $? = 0
fio --name=trim $f --rw=trim --bs=64k --iodepth=4 --size=4m >/dev/null
check "fio trim 64k" $? = 0
blkdiscard -o 8388608 -l 4194304 "$DEV"
check "blkdiscard 4 MiB" $? = 0
zeroout "$DEV" 16777216 1048576
check "BLKZEROOUT 1 MiB" $? = 0
zeroout "$DEV" 20975616 8192
check "BLKZEROOUT 8 KiB" $? = 0
dd if=/dev/urandom of="$DEV" bs=4k count=4 oflag=direct conv=fsync 2>/dev/null
check "dd conv=fsync" $? = 0
zt_stop

ops=$(grep -v '^#' /tmp/trace.txt | awk '{print $1}' | sort -u | tr '\n' ' ')
echo "@@RESULT trace: $(grep -vc '^#' /tmp/trace.txt) requests, ops $ops"
for op in 0 1 3 5; do
  check "the trace has op $op" -n "$(grep -v '^#' /tmp/trace.txt | awk -v o=$op '$1 == o' | head -1)"
done
echo "@@TRACE begin"
echo "# disksize=$((64 * 1024 * 1024))"
echo "# max_io=524288"
grep '^#' /tmp/trace.txt
grep -v '^#' /tmp/trace.txt | head -100
# and after those, the first request of every op, flag and size
# combination
grep -v '^#' /tmp/trace.txt | tail -n +101 | awk '!seen[$1 " " $2 " " $3]++'
echo "@@TRACE end"
finish
