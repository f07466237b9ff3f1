# Swap on a ztier disk served by ztier in the same guest (ublk): a workload
# of twice the guest's RAM (MemTotal) in patterned words, every word read
# back (patterns), with discard (swapon -d). ztier runs as docs/swap.md
# asks of a swap server: --mlock --mem-limit, never the OOM killer's choice
# (zt_serve), and the kernel keeps a larger reserve for atomic allocations.
. /lib.sh

echo 16384 > /proc/sys/vm/min_free_kbytes
total_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
MIB=$(( (total_kib * 2 + 1023) / 1024 ))

# The memory ztier locks, in this small guest: the pool's reserve
# (--mem-limit; the patterns compress to about 1/25) and each ublk queue's
# buffers, depth x max-io (the default, a queue per CPU of 64 x 512 KiB,
# would lock 64 MiB here).
zt_serve --device zram0:1G --comp-algorithm lz4 --mlock --mem-limit 32M \
    --ublk-queues 1 --ublk-depth 32 --ublk-max-io 128K ||
  { check "ztier serve started" 1 = 0; finish; }
DEV=$(zt_dev 0)
zt_wait_dev 0
check "$DEV appeared" $? = 0
locked=$(awk '/^VmLck:/ {print $2}' "/proc/$ZT_PID/status")
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$ZT_PID/status")
echo "@@RESULT ztier: VmLck $locked KiB, VmRSS $rss KiB"
check "ztier's memory is locked (VmLck $locked KiB)" "${locked:-0}" -gt 32768
mkswap "$DEV" >/dev/null
swapon -d "$DEV"
check "swapon -d $DEV" $? = 0
echo "@@RESULT MemTotal $total_kib KiB; before the workload: $(grep -E '^(MemFree|SwapFree):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
patterns "$MIB" 1 > /tmp/out &
w=$!
peak=0
peak_swap=0
while kill -0 $w 2>/dev/null && [ "$(proc_state $w)" != Z ]; do
  o=$(field "$(zt_ctl mm_stat)" 1)
  [ -n "$o" ] && [ "$o" -gt "$peak" ] && peak=$o
  used=$(awk '/^SwapTotal:/ {t=$2} /^SwapFree:/ {f=$2} END {print t-f}' /proc/meminfo)
  [ "$used" -gt "$peak_swap" ] && peak_swap=$used
  sleep 1
done
wait $w
rc=$?
out=$(cat /tmp/out)
echo "$out"
echo "@@RESULT swap ublk: workload $MIB MiB = 2 x MemTotal ($total_kib KiB); $out"
echo "@@RESULT swap ublk: peak swap used $peak_swap KiB, peak orig_data_size $peak"
echo "@@RESULT mm_stat after the workload: $(zt_ctl mm_stat)"
check "every word read back (patterns status $rc)" "$rc" = 0
check "the workload went through swap (peak $peak_swap KiB used)" \
  "$peak_swap" -ge $((MIB * 1024 / 4))
check "ztier held the swapped pages (peak orig_data_size $peak)" \
  "$peak" -ge $((MIB * 1024 * 1024 / 4))
zt_running
check "ztier serve still running after the workload" $? = 0
swapoff "$DEV"
check "swapoff" $? = 0
zt_stop
finish
