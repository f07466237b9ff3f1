# Conformance: one sequence of zram operations, applied step by step to the
# guest kernel's own /sys/block/zram0 and to ztier's zram0 (through
# `ztier ctl` on the host), with the same data written to both through the
# block device (dd oflag=direct). Each step prints, for each side,
#   @@CONF <step> <zram|ztier> <status> <output, lines joined by " | ">
# where status is 0 or the errno name, and at the end "@@CONF_DONE N", N
# the number of @@CONF lines; kernel_tests.py compares them.
# Variables from kernel_tests.py: PORT, BACKING (ztier's backing file).
. /lib.sh

Z=/sys/block/zram0

# The errno name of a sysfs write or read error ("Invalid argument").
errno_of() {
  case "$1" in
    *"Invalid argument"*) echo EINVAL ;;
    *"Device or resource busy"*) echo EBUSY ;;
    *"No such device"*) echo ENODEV ;;
    *"Numerical result out of range"*) echo ERANGE ;;
    *"Input/output error"*) echo EIO ;;
    *"No space left"*) echo ENOSPC ;;
    *"Cannot allocate memory"*) echo ENOMEM ;;
    *"Permission denied"*) echo EACCES ;;
    *"Operation not permitted"*) echo EPERM ;;
    *"Operation not supported"* | *"Not supported"*) echo EOPNOTSUPP ;;
    *"No such file"*) echo ENOENT ;;
    *) echo "E?($1)" ;;
  esac
}

# ztier's zram0 has no NBD client: the host has seen nbd-client -d.
ztier_detached() {
  [ "$(host status -n --raw -o NAME,CLIENTS)" = "zram0 0" ]
}

CONF_LINES=0  # the @@CONF lines printed, for @@CONF_DONE
emit() {  # emit STEP SIDE STATUS OUTPUT
  CONF_LINES=$((CONF_LINES + 1))
  printf '@@CONF %s %s %s %s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\n' '|')"
}

# side_zram STEP ATTR [VALUE]: a store is one write(2) of VALUE (dd), whose
# error message carries the errno's text.
side_zram() {
  if [ $# -eq 2 ]; then
    out=$(cat "$Z/$2" 2>&1)
  else
    out=$(printf '%s' "$3" | dd of="$Z/$2" bs=4096 2>&1) && out=""
  fi
  if [ $? -eq 0 ]; then emit "$1" zram 0 "$out"; else emit "$1" zram "$(errno_of "$out")" ""; fi
}

# side_ztier STEP ATTR [VALUE]
side_ztier() {
  if [ $# -eq 2 ]; then
    out=$(host ctl "$2" 2>&1)
  else
    out=$(host ctl "$2" "$3" 2>&1)
  fi
  rc=$?
  if [ $rc -eq 0 ]; then
    emit "$1" ztier 0 "$out"
  else
    # "ztier ctl: EBUSY: why"
    e=$(printf '%s' "$out" | sed -n 's/^ztier ctl: \(E[A-Z]*\):.*/\1/p' | head -1)
    emit "$1" ztier "${e:-E?($out)}" ""
  fi
}

# step NAME ATTR [VALUE]: the same operation on both sides.
step() {
  side_zram "$@"
  side_ztier "$@"
}

# both NAME COMMAND: a block-device command on /dev/zram0 and /dev/nbd0
# (DEV in COMMAND, and BLK, the device's name under /sys/block), e.g. dd;
# its status and what it printed, on each side.
both() {
  name=$1
  shift
  for side in zram ztier; do
    dev=/dev/zram0
    [ $side = ztier ] && dev=/dev/nbd0
    out=$(DEV=$dev BLK=${dev#/dev/} sh -c "$*" 2>&1)
    emit "$name" $side $? "$out"
  done
}

# The data: 1024 pages of files (compressible), 256 zero pages, 256
# same-filled pages, 256 random pages (incompressible: huge).
tar -cf /tmp/files.tar /lib 2>/dev/null
dd if=/tmp/files.tar of=/tmp/data bs=4k count=1024 2>/dev/null
dd if=/dev/zero bs=4k count=256 2>/dev/null >> /tmp/data
awk 'BEGIN { for (i = 0; i < 131072; i++) printf "zzzzzzzz" }' >> /tmp/data
dd if=/dev/urandom bs=4k count=256 2>/dev/null >> /tmp/data
echo "data: $(stat -c %s /tmp/data) bytes"
PAGES=$(( $(stat -c %s /tmp/data) / 4096 ))

# ---- phase 1: no backing device ----
echo 1 > $Z/reset
host ctl reset 1 >/dev/null  # both sides start uninitialised
step list.comp_algorithm comp_algorithm
step uninit.initstate initstate
step uninit.disksize disksize
step uninit.writeback writeback idle
step uninit.idle idle all
step uninit.compact compact 1
step bad.algorithm_params algorithm_params "frobnicate=1"
step bad.algorithm_params_level algorithm_params "level=x"
step set.algorithm_params algorithm_params "algo=lz4 level=1"
step bad.comp_algorithm comp_algorithm nosuch
step set.comp_algorithm comp_algorithm lz4
step read.comp_algorithm comp_algorithm
step bad.disksize disksize 0
step set.disksize disksize 32M
step read.disksize disksize
step init.initstate initstate
step again.disksize disksize 64M
step late.comp_algorithm comp_algorithm lz4hc
step late.backing_dev backing_dev /dev/null
step set.mem_limit mem_limit 16M
step read.mem_limit mem_limit
attach "$PORT" >/dev/null || echo "attach failed"
both write.data 'dd if=/tmp/data of=$DEV bs=4k oflag=direct 2>/dev/null'
step written.mm_stat mm_stat
step written.io_stat io_stat
step written.debug_stat debug_stat
both trim.first_mib 'blkdiscard -o 0 -l 1048576 $DEV'
step trimmed.mm_stat mm_stat
step trimmed.io_stat io_stat
# The bytes a read past the end gets (none), and the device's size in
# 512-byte sectors; the status is dd's.
both read.past_end 'dd if=$DEV of=/tmp/past_end bs=4k skip=8192 count=1 iflag=direct 2>/dev/null; rc=$?; wc -c < /tmp/past_end; cat /sys/block/$BLK/size; exit $rc'
step set.idle_all idle all
step set.idle_age idle 100
step bad.idle idle bogus
step nobd.writeback writeback idle
step nobd.bd_stat bd_stat
step set.compact compact 1
step compacted.mm_stat mm_stat
step reset_mem_used_max mem_used_max 0
step bad.mem_used_max mem_used_max 5
exec 4</dev/zram0  # the kernel's device in use, as nbd0 is by nbd-client
step busy.reset reset 1
exec 4<&-
nbd-client -d /dev/nbd0 >/dev/null
wait_until 30 ztier_detached
step idle.reset reset 1
step reset.initstate initstate
step reset.disksize disksize
step reset.mm_stat mm_stat

# ---- phase 2: writeback to a backing device ----
dd if=/dev/zero of=/tmp/backing bs=1M count=32 2>/dev/null
losetup /dev/loop0 /tmp/backing
step none.backing_dev backing_dev
side_zram set.backing_dev backing_dev /dev/loop0
side_ztier set.backing_dev backing_dev "$BACKING"
step set2.disksize disksize 32M
step default.writeback_limit_enable writeback_limit_enable
step default.writeback_limit writeback_limit
attach "$PORT" >/dev/null || echo "attach failed"
both write2.data 'dd if=/tmp/data of=$DEV bs=4k oflag=direct 2>/dev/null'
step written2.mm_stat mm_stat
step wb2.idle_all idle all
for tok in bogus "page_index=" "page_index=99999999" "page_indexes=5-3" \
    "page_indexes=1-"; do
  step "bad.writeback[$tok]" writeback "$tok"
done
step wb.page_index writeback page_index=1
step wb.page_index.bd_stat bd_stat
step wb.huge writeback huge
step wb.huge.bd_stat bd_stat
step wb.incompressible writeback incompressible
step wb.huge_idle writeback huge_idle
step wb.huge_idle.bd_stat bd_stat
step set.writeback_limit_enable writeback_limit_enable 1
step set.writeback_limit writeback_limit 10
step read.writeback_limit writeback_limit
step limited.writeback writeback idle
step limited.bd_stat bd_stat
step spent.writeback_limit writeback_limit
step spent.writeback writeback idle
step off.writeback_limit_enable writeback_limit_enable 0
step unlimited.writeback writeback idle
step unlimited.bd_stat bd_stat
step wb.mm_stat mm_stat
step wb.io_stat io_stat
both readback.data "dd if=\$DEV bs=4k count=$PAGES iflag=direct 2>/dev/null | cmp - /tmp/data"
step readback.bd_stat bd_stat
# Writeback tokens of later kernels (several tokens, page_indexes=): 6.12
# refuses them. Last, since ztier writes pages back where 6.12 does not.
both rewrite.data 'dd if=/tmp/data of=$DEV bs=4k count=64 oflag=direct 2>/dev/null'
step later.writeback[page_indexes=9-9] writeback page_indexes=9-9
step later.writeback[page_indexes=2-10] writeback page_indexes=2-10
step later.writeback[two_tokens] writeback "page_index=20 page_index=21"
exec 4</dev/zram0
step busy2.reset reset 1
exec 4<&-
nbd-client -d /dev/nbd0 >/dev/null
wait_until 30 ztier_detached
step idle2.reset reset 1
step reset2.bd_stat bd_stat
step reset2.backing_dev backing_dev
# memparse reads a prefix: the kernel takes "12Q" as 12 bytes.
step trailing.disksize disksize 12Q
step trailing.read_disksize disksize
step trailing.reset reset 1
losetup -d /dev/loop0
echo "@@CONF_DONE $CONF_LINES"
