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
# Polled from /proc only: a `ztier ctl` a second would page its binary in
# from /opt each time, at the edge of memory. Bounded: a workload that has
# not ended within LIMIT seconds (about 2 min is usual) is a hang, and what
# the kernel says about its blocked tasks is printed.
LIMIT=300
peak_swap=0
t=0
while [ "$(proc_state $w)" != Z ] && [ -n "$(proc_state $w)" ] && [ $t -lt $LIMIT ]; do
  used=$(awk '/^SwapTotal:/ {t=$2} /^SwapFree:/ {f=$2} END {print t-f}' /proc/meminfo)
  [ "$used" -gt "$peak_swap" ] && peak_swap=$used
  sleep 1
  t=$((t + 1))
done
if [ $t -ge $LIMIT ]; then
  check "the workload ended within $LIMIT s" $t -lt $LIMIT
  echo "---- stuck: /proc/meminfo, tasks, blocked tasks (sysrq w) ----"
  head -20 /proc/meminfo
  for p in /proc/[0-9]*; do
    st=$(sed 's/.*) //' $p/stat 2>/dev/null | cut -d' ' -f1)
    [ "$st" = D ] || [ "$st" = R ] && echo "${p#/proc/} $st $(cat $p/comm 2>/dev/null) $(cat $p/wchan 2>/dev/null)"
  done
  echo w > /proc/sysrq-trigger
  dmesg | tail -120
  echo "---- end ----"
  finish
fi
wait $w
rc=$?
out=$(cat /tmp/out)
echo "$out"
# With discard, the slots the workload freed leave the pool. The kernel
# discards a swap cluster (512 pages with THP swap) from queued work once
# every slot in it is free (free_cluster() in mm/swapfile.c), so poll
# (bounded). A page still in swap after the workload (150-170 of them,
# other processes' and the swap cache's) keeps its whole cluster, and
# 3-12% of the peak was seen to stay; without discards nearly all of it
# would. So the check asks that most of the workload's pages went.
_discarded() {
  mm=$(zt_ctl mm_stat)
  [ "$(field "$mm" 1)" -le $((peak_swap * 1024 / 10)) ]
}
wait_until 30 _discarded
swap_after=$(awk '/^SwapTotal:/ {t=$2} /^SwapFree:/ {f=$2} END {print t-f}' /proc/meminfo)
echo "@@RESULT swap ublk: workload $MIB MiB = 2 x MemTotal ($total_kib KiB); $out"
echo "@@RESULT swap ublk: peak swap used $peak_swap KiB, $t s; $swap_after KiB still used after"
echo "@@RESULT mm_stat after the workload: $mm"
check "every word read back (patterns status $rc)" "$rc" = 0
check "the workload went through swap (peak $peak_swap KiB used)" \
  "$peak_swap" -ge $((MIB * 1024 / 4))
# zram's accounting of what was swapped: the pool's peak (mem_used_max)
# held the swapped pages, compressed (the patterns compress to about
# 1/40); with discard, what the workload freed left the pool.
check "ztier's pool held the swapped pages (mem_used_max $(field "$mm" 5) >= 1/100 of $peak_swap KiB)" \
  "$(field "$mm" 5)" -ge $((peak_swap * 1024 / 100))
check "discard freed the workload's pages (orig_data_size $(field "$mm" 1) <= 1/3 of $peak_swap KiB)" \
  "$(field "$mm" 1)" -le $((peak_swap * 1024 / 3))
zt_running
check "ztier serve still running after the workload" $? = 0
swapoff "$DEV"
check "swapoff" $? = 0
zt_stop
finish
