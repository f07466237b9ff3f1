# A swapon that races a reset never ends on a deleted disk: the reset of
# zram0 looks at whether /dev/ublkb0 is in use (a look through /proc,
# slowed here by a few hundred processes with descriptors open), and a
# swapon issued meanwhile must either win (the reset is refused with
# EBUSY) or lose (swapon fails, the disk goes). Each round starts the reset
# and, after a delay that grows from round to round, a swapon; a round
# where both succeed, or /proc/swaps names a deleted device, fails.
. /lib.sh

zt_serve --device zram0:64M --comp-algorithm lz4 ||
  { check "ztier serve started" 1 = 0; finish; }
D0=$(zt_dev 0)
zt_wait_dev 0
check "$D0 appeared" $? = 0

# Processes with descriptors open, which the look through /proc reads.
holders=""
i=0
while [ $i -lt 300 ]; do
  sleep 600 3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null \
    8</dev/null 9</dev/null &
  holders="$holders $!"
  i=$((i + 1))
done

raced=0 bad=0
for d in 0 0.01 0.02 0.05 0.1 0.15 0.2 0.3 0.4 0.6 0.8 1.2; do
  mkswap "$D0" >/dev/null 2>&1 || { echo "mkswap $D0 failed"; bad=1; break; }
  (zt_ctl --device zram0 reset 1 >/tmp/reset.out 2>&1; echo $? >/tmp/reset.rc) &
  r=$!
  sleep "$d"
  swapon "$D0" 2>/dev/null
  s=$?
  wait $r
  rc=$(cat /tmp/reset.rc)
  echo "delay $d: reset status $rc ($(cat /tmp/reset.out)), swapon status $s"
  echo "  /proc/swaps: $(tail -n +2 /proc/swaps | tr '\n' ' ')"
  if grep -q deleted /proc/swaps || { [ "$rc" = 0 ] && [ "$s" = 0 ]; }; then
    bad=1
    break
  fi
  [ "$s" = 0 ] && { swapoff "$D0"; raced=$((raced + 1)); }
  if [ "$rc" = 0 ]; then
    zt_ctl --device zram0 disksize 64M && zt_wait_dev 0 30 ||
      { echo "zram0 did not come back after the reset"; bad=1; break; }
  fi
done
check "no swapon landed on a disk that the reset deleted" "$bad" = 0
echo "@@RESULT rounds where swapon won: $raced"

kill $holders 2>/dev/null
wait $holders 2>/dev/null
[ "$bad" = 0 ] && zt_stop
finish
