# fio on a ztier disk served by ztier in the guest (ublk): 4 KiB random
# writes at iodepth 32 through io_uring, O_DIRECT, every block verified
# (crc32c) by reading it back; then sequential 128 KiB writes, verified.
# fio's exit status, its error field and the bytes it read back (the
# verification) are all checked.
. /lib.sh

# fio_verify NAME FIO_ARGS...: runs fio with terse output (version 3) and
# checks it: exit status 0, error 0, SIZE bytes written and read back.
fio_verify() {
  job=$1
  shift
  fio --name="$job" --filename="$DEV" --ioengine=io_uring --direct=1 \
    --verify=crc32c --do_verify=1 --verify_fatal=1 --size="$SIZE_MIB"m \
    --output-format=normal,terse --terse-version=3 "$@" > /tmp/fio.out 2>&1
  rc=$?
  grep -v '^3;' /tmp/fio.out
  terse=$(grep '^3;' /tmp/fio.out | head -1)
  # terse v3: 5 error, 6 read KiB, 47 write KiB
  err=$(echo "$terse" | cut -d';' -f5)
  rkib=$(echo "$terse" | cut -d';' -f6)
  wkib=$(echo "$terse" | cut -d';' -f47)
  want=$((SIZE_MIB * 1024))
  echo "@@RESULT fio $job: status $rc, error $err, wrote ${wkib} KiB, read back ${rkib} KiB"
  check "fio $job exited 0" "$rc" = 0
  check "fio $job: no error (error field '$err')" "$err" = 0
  check "fio $job wrote $want KiB ($wkib)" "${wkib:-0}" -ge "$want"
  check "fio $job read back (verified) $want KiB ($rkib)" "${rkib:-0}" -ge "$want"
  verr=$(grep -ci 'verify.*\(bad\|fail\|mismatch\)' /tmp/fio.out)
  check "fio $job: no verify errors in its output ($verr)" "$verr" = 0
}

SIZE_MIB=128
zt_serve --device zram0:256M --comp-algorithm lz4 || { check "ztier serve started" 1 = 0; finish; }
DEV=$(zt_dev 0)
zt_wait_dev 0
check "$DEV appeared" $? = 0
echo "$DEV: $(cat /sys/block/${DEV#/dev/}/size) sectors"

fio_verify randwrite4k --rw=randwrite --bs=4k --iodepth=32
mm=$(zt_ctl mm_stat)
echo "@@RESULT mm_stat after randwrite4k: $mm"
check "the pool holds the written data (orig_data_size $(field "$mm" 1))" \
  "$(field "$mm" 1)" -ge $((SIZE_MIB * 1024 * 1024 * 9 / 10))

SIZE_MIB=64
fio_verify seqwrite128k --rw=write --bs=128k --iodepth=8

zt_stop
finish
