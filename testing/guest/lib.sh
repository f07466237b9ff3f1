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
