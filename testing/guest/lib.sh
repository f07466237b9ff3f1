# lib.sh: helpers for the guest's test scripts (sourced as /lib.sh).
#
#   host ctl mm_stat        runs `ztier ctl --ctl SOCK mm_stat` on the host
#                           and prints its output; returns its exit status
#   attach PORT [FLAGS]     nbd-client to the host's ztier on 10.0.2.2:PORT,
#                           export zram0, as /dev/nbd0
#   check NAME CONDITION    prints "@@CHECK ok|FAIL NAME" (CONDITION is a
#                           test(1) expression) and remembers a failure
#   finish                  exits 1 if any check failed, else 0

exec 3<>/dev/ttyS1
FAILED=0

host() {
  line=""
  for a in "$@"; do  # each word quoted, for the host's shlex.split
    line="$line '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"
  done
  echo "$line" >&3
  while IFS= read -r line <&3; do
    case "$line" in
      "@@RC "*) return "${line#@@RC }" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
  return 127
}

attach() {
  port=$1
  shift
  nbd-client 10.0.2.2 "$port" /dev/nbd0 -N zram0 -b 4096 "$@"
}

check() {
  name=$1
  shift
  if [ "$@" ]; then
    echo "@@CHECK ok $name"
  else
    echo "@@CHECK FAIL $name ($*)"
    FAILED=1
  fi
}

finish() {
  [ "$FAILED" = 0 ]
  exit $?
}

# The Nth field (1-based) of a zram stat line.
field() {
  echo "$1" | awk -v n="$2" '{print $n}'
}

# ---- ztier inside the guest (tests/ublk_*.sh) ----
# The server runs in the guest from /opt (build_guest.py --ztier) and the
# guest's kernel is its client through ublk (/dev/ublk-control, one
# /dev/ublkbN per device zramN). With ZT_TRANSPORT=nbd (kernel_tests.py
# --via-nbd, a debugging aid for a ztier without --ublk) the same helpers
# serve over a Unix socket and attach /dev/nbdN with nbd-client instead;
# only device 0 is attached then.
#
#   zt_serve ARGS...     starts `ztier serve --ublk --ctl $ZT_CTL ARGS` in
#                        the background (log $ZT_LOG, pid $ZT_PID) and waits
#                        for the control socket; 1 (log dumped) if it exited
#   zt_dev N             /dev/ublkbN (or /dev/nbdN)
#   zt_wait_dev N [SECS] polls until zt_dev N is a block device with a size
#   zt_wait_gone PATH [SECS]  polls until PATH no longer exists
#   zt_ctl ARGS...       ztier ctl --ctl $ZT_CTL ARGS
#   zt_stop              SIGTERM; checks that the server exits 0 within 30 s
#                        and that its disks are gone
#   zt_kill9             SIGKILL, and reaps the server
#   zt_log               the server's log, between markers
#   wait_until SECS CMD... polls CMD (every 0.2 s) until it succeeds; 1 on
#                        timeout

ZT_CTL=/run/ztier.ctl
ZT_LOG=/tmp/ztier-serve.log
ZT_SOCK=/run/ztier.sock
ZT_TRANSPORT=${ZT_TRANSPORT:-ublk}
ZT_PID=

wait_until() {
  secs=$1
  shift
  n=$((secs * 5))
  while [ "$n" -gt 0 ]; do
    "$@" && return 0
    sleep 0.2
    n=$((n - 1))
  done
  "$@"
}

zt_ctl() {
  ztier ctl --ctl "$ZT_CTL" "$@"
}

zt_dev() {
  if [ "$ZT_TRANSPORT" = nbd ]; then echo "/dev/nbd$1"; else echo "/dev/ublkb$1"; fi
}

zt_log() {
  echo "---- ztier serve's log ($ZT_LOG) ----"
  cat "$ZT_LOG" 2>/dev/null
  echo "---- end of the log ----"
}

# The state letter of process $1 (R, S, D, Z, ...); empty once reaped.
proc_state() {
  sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1
}

zt_running() {
  [ -n "$ZT_PID" ] && s=$(proc_state "$ZT_PID") && [ -n "$s" ] && [ "$s" != Z ]
}

_has_size() {
  [ -b "$1" ] && [ "$(cat "/sys/block/${1#/dev/}/size" 2>/dev/null || echo 0)" -gt 0 ]
}

zt_wait_dev() {
  wait_until "${2:-30}" _has_size "$(zt_dev "$1")"
}

_gone() {
  [ ! -e "$1" ]
}

zt_wait_gone() {
  wait_until "${2:-30}" _gone "$1"
}

zt_serve() {
  rm -f "$ZT_CTL"
  # The guest's kernel always has ublk_drv: its absence is a failure.
  [ "$ZT_TRANSPORT" = nbd ] || [ -c /dev/ublk-control ] ||
    check "the kernel has ublk (/dev/ublk-control)" -c /dev/ublk-control
  if [ "$ZT_TRANSPORT" = nbd ]; then
    ztier serve --unix "$ZT_SOCK" --ctl "$ZT_CTL" "$@" >>"$ZT_LOG" 2>&1 &
  else
    ztier serve --ublk --ctl "$ZT_CTL" "$@" >>"$ZT_LOG" 2>&1 &
  fi
  ZT_PID=$!
  echo "-1000" > "/proc/$ZT_PID/oom_score_adj" 2>/dev/null
  if ! wait_until 60 test -S "$ZT_CTL" || ! zt_running; then
    echo "zt_serve: ztier serve $* did not start (state '$(proc_state "$ZT_PID")')"
    zt_log
    return 1
  fi
  if [ "$ZT_TRANSPORT" = nbd ]; then
    swap=""
    case " $* " in *" --mlock "*) swap=-swap ;; esac
    nbd-client -unix "$ZT_SOCK" /dev/nbd0 -N zram0 -b 4096 $swap >/dev/null ||
      { echo "zt_serve: nbd-client failed"; zt_log; return 1; }
  fi
  return 0
}

_zt_exited() {
  s=$(proc_state "$ZT_PID")
  [ -z "$s" ] || [ "$s" = Z ]
}

# Waits (bounded) for the server to exit and reaps it; its exit status, or
# 255 if it did not exit within $1 seconds.
_zt_reap() {
  wait_until "$1" _zt_exited || return 255
  wait "$ZT_PID"
}

_no_ublk_nodes() {
  ! ls /dev/ublkb* /dev/ublkc* >/dev/null 2>&1
}

zt_stop() {
  if [ "$ZT_TRANSPORT" = nbd ]; then
    nbd-client -d /dev/nbd0 >/dev/null 2>&1
  fi
  kill -TERM "$ZT_PID"
  _zt_reap 30
  rc=$?
  check "ztier serve exited 0 on SIGTERM (status $rc)" "$rc" = 0
  [ "$rc" = 0 ] || zt_log
  if [ "$ZT_TRANSPORT" = ublk ]; then
    wait_until 10 _no_ublk_nodes
    left=$(ls /dev/ublkb* /dev/ublkc* 2>/dev/null | tr '\n' ' ')
    check "no ublk disk left after SIGTERM ($left)" -z "$left"
  fi
  ZT_PID=
}

zt_kill9() {
  kill -KILL "$ZT_PID"
  _zt_reap 30
  ZT_PID=
}
