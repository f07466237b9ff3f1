#!/usr/bin/env bash
# tools/soak/soak.sh: a bounded soak of `ztier serve` (`make soak`).
#
# Starts `ztier serve` in a temporary folder with three devices:
#   zram0 512M  backing file for writeback; fio (nbd engine) with crc32c
#               verification, writeback idle/huge/limited, trims, compact
#               of a fragmented pool;
#   zram1 256M  mem_limit 64M: filled until ENOSPC (expected), trimmed,
#               rewritten; reset and re-initialised while no client is
#               attached, then checked to read as zeros;
#   zram2 16M   (hot_add) each corpus file, nbdcopy in and out with a
#               sha256 compare, before and after writeback to its own file.
# and repeats cycles of these steps until the deadline (checked before every
# step; a step takes seconds, never more than about a minute). Every
# external command runs under `timeout`. Counts operations and errors,
# prints a summary with the server's final mm_stat/io_stat/bd_stat, and
# exits 1 on any error; a server that dies ends the soak at once. Two
# failures are expected, and checked for rather than counted as errors:
# ENOSPC while zram1 is filled past its mem_limit, and EIO from `writeback`
# once writeback_limit is spent. The server is stopped and the folder
# removed when the script exits, on success, error or interrupt.
#
# usage: soak.sh --ztier PATH [--corpus DIR] [--minutes N]
set -euo pipefail

ZTIER=""
CORPUS="$(cd "$(dirname "$0")/../.." && pwd)/testdata"
MINUTES=20
STEP_TIMEOUT=60  # seconds; a command that takes longer is an error

usage() {
  echo "usage: $0 --ztier PATH [--corpus DIR] [--minutes N]" >&2
  exit 2
}

while (($#)); do
  case "$1" in
    --ztier) ZTIER="${2:-}"; shift 2 ;;
    --corpus) CORPUS="${2:-}"; shift 2 ;;
    --minutes) MINUTES="${2:-}"; shift 2 ;;
    -h | --help) usage ;;
    *) echo "soak: unknown argument: $1" >&2; usage ;;
  esac
done
[[ -n "$ZTIER" && "$MINUTES" =~ ^[0-9]+$ ]] || usage
ZTIER="$(realpath "$ZTIER")"
[[ -x "$ZTIER" ]] || { echo "soak: not executable: $ZTIER" >&2; exit 2; }
for tool in fio nbdcopy zstd jq sha256sum timeout cmp; do
  command -v "$tool" >/dev/null ||
    { echo "soak: $tool is required (make deps; apt-get install jq)" >&2; exit 2; }
done
shopt -s nullglob
CORPUS_FILES=("$CORPUS"/*.pages.zst)
shopt -u nullglob
((${#CORPUS_FILES[@]})) || { echo "soak: no *.pages.zst in $CORPUS" >&2; exit 2; }

log() { printf '%s soak: %s\n' "$(date '+%F %T')" "$*"; }

# ---- state -----------------------------------------------------------------

DIR=""
SERVER_PID=""
START=$(date +%s)
DEADLINE=$((START + MINUTES * 60))
CYCLES=0
COMPLETE=0  # cycles that ran every step
VERIFY_ERRORS=0
OTHER_ERRORS=0
declare -A OPS=()
OP_KINDS=(fio_runs fio_read_ios fio_write_ios fio_trim_ios verify_only_passes
  nbdcopy_runs nbdcopy_bytes sha256_compares ctl_commands writeback_passes
  compacts resets trims_checked enospc_expected zero_checks)
for k in "${OP_KINDS[@]}"; do OPS[$k]=0; done
count() { OPS[$1]=$((OPS[$1] + ${2:-1})); }

verify_error() { VERIFY_ERRORS=$((VERIFY_ERRORS + 1)); log "VERIFY ERROR: $*" >&2; }
other_error() { OTHER_ERRORS=$((OTHER_ERRORS + 1)); log "ERROR: $*" >&2; }

cleanup() {
  local rc=$?
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  [[ -n "$DIR" ]] && rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

server_alive() { [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; }

# ---- helpers (each returns non-zero, after counting the error, on failure) -

uri() { echo "nbd+unix:///$1?socket=$DIR/nbd.sock"; }

# Helpers that count run in this shell, never in $(...), so that what they
# count is kept: `ztier ctl`'s output comes back in CTL_OUT, a column in a
# named variable.
CTL_OUT=""

# ctl DEV ATTR [VALUE]: `ztier ctl` (DEV "" for none); its status.
ctl() {
  local dev="$1" rc=0
  shift
  count ctl_commands
  local args=(--ctl "$DIR/ctl.sock")
  [[ -n "$dev" ]] && args+=(--device "$dev")
  CTL_OUT=$(timeout 60 "$ZTIER" ctl "${args[@]}" "$@" 2>&1) || rc=$?
  return "$rc"
}

# ctl_ok DEV ATTR [VALUE]: as ctl; a failure is an error.
ctl_ok() {
  ctl "$@" || { other_error "ztier ctl $*: $CTL_OUT"; return 1; }
}

# col DEV ATTR N VAR: VAR = column N (1-based) of mm_stat/io_stat/bd_stat.
col() {
  ctl_ok "$1" "$2" || return 1
  local col_value
  col_value=$(awk -v n="$3" '{ print $n }' <<<"$CTL_OUT")
  if [[ ! "$col_value" =~ ^[0-9]+$ ]]; then
    other_error "$1 $2: no column $3 in '$CTL_OUT'"
    return 1
  fi
  printf -v "$4" '%s' "$col_value"
}

# fio_run MODE LABEL DEV ARGS...: one fio run with JSON output, counted.
# MODE: io (every IO counts), verify_only (only reads are issued), enospc
# (ENOSPC is the expected end). Verify failures are verify errors.
FIO_JSON=""
fio_run() {
  local mode="$1" label="$2" dev="$3"
  shift 3
  FIO_JSON="$DIR/fio-$label.json"
  local err="$DIR/fio-$label.err" rc=0
  (cd "$DIR/fio" && timeout "$STEP_TIMEOUT" fio --ioengine=nbd --uri="$(uri "$dev")" \
    --output-format=json --output="$FIO_JSON" "$@" 2>"$err") || rc=$?
  count fio_runs
  local reads writes trims ferr
  if ! read -r reads writes trims ferr < <(jq -r \
    '[([.jobs[].read.total_ios] | add), ([.jobs[].write.total_ios] | add),
      ([.jobs[].trim.total_ios] | add), ([.jobs[].error] | max)] | @tsv' \
    "$FIO_JSON" 2>/dev/null); then
    other_error "fio $label on $dev: rc $rc, no JSON report: $(head -c 600 "$err")"
    return 1
  fi
  count fio_read_ios "$reads"
  if [[ "$mode" == verify_only ]]; then
    count verify_only_passes  # its writes are replayed, not issued
  else
    count fio_write_ios "$writes"
    count fio_trim_ios "$trims"
  fi
  if ((ferr == 84)) || grep -q '^verify:' "$err"; then
    verify_error "fio $label on $dev (error $ferr): $(grep -m3 '^verify:' "$err" | tr '\n' ' ')"
    return 1
  fi
  if [[ "$mode" == enospc ]]; then
    if ((ferr != 28)); then
      other_error "fio $label on $dev: expected ENOSPC (28), got error $ferr rc $rc: $(head -c 600 "$err")"
      return 1
    fi
    count enospc_expected
  elif ((rc != 0 || ferr != 0)); then
    other_error "fio $label on $dev: rc $rc error $ferr: $(head -c 600 "$err")"
    return 1
  fi
}

# The write phases of zram0, by name and seed. The same options (the same
# job names, --randseed and layout) replay a phase with --verify_only.
# Headers are written every 4 KiB (verify_interval is the smallest block
# size), so they name the offset and checksum of every page; the device is
# trimmed at the start of each cycle so stale pages from an earlier cycle
# read as zeros (bad magic), never as valid data.
# Write phases run to completion (no runtime/time_based), so verify_only
# replays the whole phase and no verify_state is needed.
# Data: with --verify, fio fills the first half of each block at random and
# the rest (save the headers) with zeros under --buffer_compress_percentage=50,
# so about half of rand's and seq's pages are huge and half compress well;
# the huge phase is all incompressible.
PHASE=()
phase() {
  local common=(--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0
    --randseed="$2")
  case "$1" in
    rand) PHASE=(--name=rand --rw=randwrite --bssplit=4k/40:16k/20:64k/20:128k/20
      --numjobs=4 --size=48M --offset=0 --offset_increment=64M --iodepth=8
      --buffer_compress_percentage=50 --refill_buffers "${common[@]}") ;;
    seq) PHASE=(--name=seq --rw=write --bssplit=4k/25:16k/25:64k/25:128k/25
      --numjobs=2 --size=64M --offset=256M --offset_increment=64M --iodepth=16
      --buffer_compress_percentage=50 --refill_buffers "${common[@]}") ;;
    huge) PHASE=(--name=huge --rw=randwrite --bs=64k --numjobs=1 --size=64M
      --offset=384M --iodepth=8 --refill_buffers "${common[@]}") ;;
  esac
}
SEQ_BYTES=$((128 << 20))   # the seq phase covers [256M, 384M) entirely
HUGE_PAGES=$((64 << 20 >> 12))  # the huge phase's pages, all incompressible

write_phase() {  # write_phase NAME SEED
  phase "$1" "$2"
  fio_run io "$1-write" zram0 "${PHASE[@]}"
}
verify_phase() {  # verify_phase NAME SEED
  phase "$1" "$2"
  fio_run verify_only "$1-verify" zram0 "${PHASE[@]}" --verify_only
}

sha() { sha256sum "$1" | cut -c1-64; }

# nbd_in FILE DEV / nbd_out DEV FILE: nbdcopy, counted.
nbd_in() {
  local out
  if ! out=$(timeout "$STEP_TIMEOUT" nbdcopy "$1" "$(uri "$2")" 2>&1); then
    other_error "nbdcopy $1 -> $2: $out"
    return 1
  fi
  count nbdcopy_runs
  count nbdcopy_bytes "$(stat -c %s "$1")"
}
nbd_out() {
  local out
  rm -f "$2"
  if ! out=$(timeout "$STEP_TIMEOUT" nbdcopy --no-extents "$(uri "$1")" "$2" 2>&1); then
    other_error "nbdcopy $1 -> $2: $out"
    return 1
  fi
  count nbdcopy_runs
  count nbdcopy_bytes "$(stat -c %s "$2")"
}

# ---- steps (one cycle is these in order; each prints what it checked) -----

# Trim all of zram0: nothing stays stored, in RAM or on the backing file.
step_trim_all() {
  local orig bd
  fio_run io trim-all zram0 --name=trimall --rw=trim --bs=4M --size=512M --iodepth=4 ||
    return 1
  count trims_checked
  col zram0 mm_stat 1 orig && col zram0 bd_stat 1 bd || return 1
  if ((orig != 0 || bd != 0)); then
    other_error "after trimming all of zram0: orig_data_size $orig, bd_count $bd (want 0, 0)"
    return 1
  fi
  echo "orig_data_size 0, bd_count 0"
}

step_write() {
  local orig
  write_phase rand "$SEED" && write_phase seq "$SEED" && write_phase huge "$SEED" ||
    return 1
  col zram0 mm_stat 1 orig || return 1
  echo "rand, seq, huge written and verified; orig_data_size $orig"
}

# Fragment the pool and compact it: write [448M, 512M) of zram0 in 4 KiB
# pages (each compresses to about half a page), trim every other page
# (orig_data_size drops by exactly half the region), compact (the pool
# shrinks and pages_compacted grows), then the pages left read back right.
FRAG_CHECK=(--name=fragcheck --rw=read:4k --bs=4k --offset=448M --size=64M
  --iodepth=16 --verify=crc32c --verify_fatal=1 --verify_state_save=0)
step_fragment_compact() {
  local orig0 orig1 used0 used1 moved0 moved1
  fio_run io frag-write zram0 --name=frag --rw=write --bs=4k --offset=448M \
    --size=64M --iodepth=16 --buffer_compress_percentage=50 --refill_buffers \
    --randseed="$SEED" --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --verify_state_save=0 || return 1
  col zram0 mm_stat 1 orig0 || return 1
  fio_run io frag-trim zram0 --name=fragtrim --rw=trim:4k --bs=4k \
    --offset=$(((448 << 20) + 4096)) --size=$(((64 << 20) - 4096)) --iodepth=16 ||
    return 1
  count trims_checked
  col zram0 mm_stat 1 orig1 && col zram0 mm_stat 3 used0 &&
    col zram0 mm_stat 7 moved0 || return 1
  if ((orig0 - orig1 != 32 << 20)); then
    other_error "trimming every other page of 64M freed $((orig0 - orig1)) bytes of orig_data_size (want 32M)"
    return 1
  fi
  ctl_ok zram0 compact 1 && ctl_ok zram1 compact 1 || return 1
  count compacts 2
  col zram0 mm_stat 3 used1 && col zram0 mm_stat 7 moved1 || return 1
  if ((used1 >= used0 || moved1 <= moved0)); then
    other_error "compact of a fragmented pool: mem_used_total $used0 -> $used1, pages_compacted $moved0 -> $moved1"
    return 1
  fi
  fio_run verify_only frag-check zram0 "${FRAG_CHECK[@]}" || return 1
  echo "trimmed every other page: orig_data_size -$(((orig0 - orig1) >> 20))M;" \
    "compact: mem_used_total $used0 -> $used1, pages_compacted +$((moved1 - moved0));" \
    "the rest verified"
}

# Writeback while data is stored: huge (the huge phase's pages), a limited
# pass (exactly the budget), then every idle page; then every phase reads
# back correctly, now from the backing file.
step_writeback() {
  local huge w0 w1 w2 w3 left budget=$((1000 + RANDOM % 3000))
  col zram0 mm_stat 8 huge && col zram0 bd_stat 3 w0 || return 1
  if ((huge < HUGE_PAGES)); then
    other_error "zram0 has $huge huge pages, fewer than the huge phase's $HUGE_PAGES"
    return 1
  fi
  ctl_ok zram0 idle all && ctl_ok zram0 writeback huge || return 1
  count writeback_passes
  col zram0 bd_stat 3 w1 || return 1
  if ((w1 - w0 != huge)); then
    other_error "writeback huge wrote $((w1 - w0)) pages, want every huge page: $huge"
    return 1
  fi
  verify_phase huge "$SEED" || return 1
  ctl_ok zram0 writeback_limit_enable 1 && ctl_ok zram0 writeback_limit "$budget" ||
    return 1
  # More idle pages than the budget: zram's EIO once it is spent.
  if ctl zram0 writeback idle; then
    other_error "writeback idle past writeback_limit $budget succeeded"
    return 1
  elif [[ "$CTL_OUT" != *EIO* ]]; then
    other_error "writeback idle past writeback_limit $budget: $CTL_OUT (want EIO)"
    return 1
  fi
  count writeback_passes
  col zram0 bd_stat 3 w2 && col zram0 writeback_limit 1 left || return 1
  if ((w2 - w1 != budget || left != 0)); then
    other_error "limited writeback wrote $((w2 - w1)) pages, limit left $left (want $budget, 0)"
    return 1
  fi
  ctl_ok zram0 writeback_limit_enable 0 && ctl_ok zram0 writeback idle || return 1
  count writeback_passes
  col zram0 bd_stat 3 w3 || return 1
  verify_phase rand "$SEED" && verify_phase seq "$SEED" || return 1
  ctl_ok zram0 bd_stat || return 1
  echo "written back: huge $((w1 - w0)), limited $budget, idle $((w3 - w2)) pages;" \
    "bd_stat $(xargs <<<"$CTL_OUT"); rand/seq/huge verified"
}

# Trim the seq region (every page of it stored, in RAM or on the backing
# file): orig_data_size drops by exactly its size. Then rewrite it (new
# seed), and the other phases still verify.
step_trim_rewrite() {
  local before after
  col zram0 mm_stat 1 before || return 1
  fio_run io trim-seq zram0 --name=trimseq --rw=trim --bs=1M --size=128M \
    --offset=256M --iodepth=4 || return 1
  count trims_checked
  col zram0 mm_stat 1 after || return 1
  if ((before - after != SEQ_BYTES)); then
    other_error "trimming 128M of zram0 freed $((before - after)) bytes of orig_data_size ($before -> $after)"
    return 1
  fi
  write_phase seq "$((SEED + 1))" && verify_phase rand "$SEED" &&
    verify_phase huge "$SEED" || return 1
  echo "orig_data_size $before -> $after; seq rewritten, rand/huge verified"
}

# zram1: fill past mem_limit (ENOSPC expected), trim it all, write again.
step_mem_limit() {
  local used limit orig
  fio_run enospc fill zram1 --name=fill --rw=write --bs=128k --size=256M --iodepth=8 ||
    return 1
  col zram1 mm_stat 3 used && col zram1 mm_stat 4 limit || return 1
  if ((limit == 0 || used > limit)); then
    other_error "zram1 mem_used_total $used over mem_limit $limit"
    return 1
  fi
  fio_run io trim-zram1 zram1 --name=trim1 --rw=trim --bs=4M --size=256M --iodepth=4 ||
    return 1
  count trims_checked
  col zram1 mm_stat 1 orig || return 1
  if ((orig != 0)); then
    other_error "zram1 orig_data_size $orig after trimming it all (want 0)"
    return 1
  fi
  fio_run io refill zram1 --name=refill --rw=randwrite \
    --bssplit=4k/50:32k/25:128k/25 --size=32M --iodepth=8 --randseed="$SEED" \
    --buffer_compress_percentage=50 --refill_buffers --verify=crc32c \
    --verify_fatal=1 --do_verify=1 --verify_state_save=0 || return 1
  echo "ENOSPC at mem_used_total $used (limit $limit); trimmed; 32M rewritten and verified"
}

# zram2: each corpus file in and out, before and after writeback.
step_corpus() {
  local f name want got wb
  for f in "$DIR"/corpus/*.pages; do
    name=$(basename "$f")
    want=$(sha "$f")
    ctl_ok zram2 initstate || return 1
    if [[ "$CTL_OUT" == 1 ]]; then
      ctl_ok zram2 reset 1 || return 1
      count resets
    fi
    ctl_ok zram2 backing_dev "$DIR/wb2.img" &&
      ctl_ok zram2 disksize "$(stat -c %s "$f")" || return 1
    nbd_in "$f" zram2 && nbd_out zram2 "$DIR/out.bin" || return 1
    count sha256_compares
    got=$(sha "$DIR/out.bin")
    if [[ "$got" != "$want" ]]; then
      verify_error "$name through zram2: sha256 $got, want $want"
      return 1
    fi
    ctl_ok zram2 idle all && ctl_ok zram2 writeback idle || return 1
    count writeback_passes
    col zram2 bd_stat 1 wb || return 1
    if ((wb == 0)); then
      other_error "writeback idle of $name on zram2 wrote nothing back"
      return 1
    fi
    nbd_out zram2 "$DIR/out.bin" || return 1
    count sha256_compares
    got=$(sha "$DIR/out.bin")
    if [[ "$got" != "$want" ]]; then
      verify_error "$name through zram2 after writeback of $wb pages: sha256 $got, want $want"
      return 1
    fi
    echo "$name: $wb pages written back, sha256 equal;"
  done
  rm -f "$DIR/out.bin"
}

# zram1, with no client attached: reset, disksize again, reads zeros.
step_reset() {
  local clients orig size
  ctl_ok "" status || return 1
  clients=$(jq '[.devices[] | select(.name == "zram1") | .clients] | add' <<<"$CTL_OUT")
  if [[ "$clients" != 0 ]]; then
    other_error "zram1 has '$clients' clients before reset (want 0)"
    return 1
  fi
  ctl_ok zram1 reset 1 || return 1
  count resets
  ctl_ok zram1 initstate || return 1
  if [[ "$CTL_OUT" != 0 ]]; then
    other_error "zram1 initstate is '$CTL_OUT' after reset (want 0)"
    return 1
  fi
  ctl_ok zram1 disksize 256M && ctl_ok zram1 mem_limit 64M || return 1
  col zram1 mm_stat 1 orig || return 1
  if ((orig != 0)); then
    other_error "zram1 orig_data_size $orig after reset (want 0)"
    return 1
  fi
  nbd_out zram1 "$DIR/zero.bin" || return 1
  count zero_checks
  size=$(stat -c %s "$DIR/zero.bin")
  if ((size != 256 << 20)) || ! cmp -s -n "$size" "$DIR/zero.bin" /dev/zero; then
    verify_error "zram1 does not read as 256M of zeros after reset ($size bytes read)"
    return 1
  fi
  rm -f "$DIR/zero.bin"
  echo "reset, disksize 256M, mem_limit 64M: reads 256M of zeros"
}

# After everything else: zram0 still holds what was last written to it,
# and it has failed no read or write.
step_final_verify() {
  local fr fw
  verify_phase rand "$SEED" && verify_phase seq "$((SEED + 1))" &&
    verify_phase huge "$SEED" && fio_run verify_only frag-check zram0 "${FRAG_CHECK[@]}" ||
    return 1
  col zram0 io_stat 1 fr && col zram0 io_stat 2 fw || return 1
  if ((fr != 0 || fw != 0)); then
    other_error "zram0 io_stat: $fr failed reads, $fw failed writes (want 0, 0)"
    return 1
  fi
  echo "rand/seq/huge/frag verified; zram0 io_stat failed reads/writes 0/0"
}

STEPS=(trim_all write writeback fragment_compact trim_rewrite mem_limit corpus reset final_verify)

summary() {
  local elapsed=$(($(date +%s) - START)) k d a
  echo
  echo "==== soak summary ===="
  printf 'minutes:        %d.%02d (SOAK_MINUTES=%d)\n' $((elapsed / 60)) \
    $((elapsed % 60 * 100 / 60)) "$MINUTES"
  printf 'cycles:         %d (%d complete)\n' "$CYCLES" "$COMPLETE"
  echo "operations:"
  for k in "${OP_KINDS[@]}"; do printf '  %-20s %d\n' "$k" "${OPS[$k]}"; done
  printf 'verify errors:  %d\n' "$VERIFY_ERRORS"
  printf 'other errors:   %d\n' "$OTHER_ERRORS"
  if server_alive; then
    echo "server's final stats:"
    for d in zram0 zram1 zram2; do
      for a in mm_stat io_stat bd_stat; do
        ctl "$d" "$a" || true
        printf '  %s %s: %s\n' "$d" "$a" "$(xargs <<<"$CTL_OUT")"
      done
    done
  else
    echo "server: not running"
  fi
}

# run_step NAME: 0 done, 1 failed, 2 past the deadline. A dead server ends
# the soak at once.
run_step() {
  (($(date +%s) < DEADLINE)) || return 2
  local rc=0 t0=$SECONDS
  # Messages go through a file, not $(...), so the counts stay in this shell.
  "step_$1" >"$DIR/step.out" || rc=$?
  if ! server_alive; then
    other_error "cycle $CYCLES $1: the server died; log: $(tail -20 "$DIR/serve.log")"
    summary
    exit 1
  fi
  if ((rc == 0)); then
    log "cycle $CYCLES $1 ok ($((SECONDS - t0)) s): $(xargs <"$DIR/step.out")"
  else
    log "cycle $CYCLES $1 FAILED ($((SECONDS - t0)) s)"
  fi
  return "$rc"
}

# ---- main ------------------------------------------------------------------

DIR=$(mktemp -d "${TMPDIR:-/tmp}/ztier-soak.XXXXXX")
mkdir -p "$DIR/fio" "$DIR/corpus"
log "$MINUTES minute(s), until $(date -d "@$DEADLINE" '+%F %T'); $ZTIER; in $DIR"
for f in "${CORPUS_FILES[@]}"; do
  zstd -q -d "$f" -o "$DIR/corpus/$(basename "$f" .zst)"
done
log "corpus: ${#CORPUS_FILES[@]} file(s) from $CORPUS"

"$ZTIER" serve --unix "$DIR/nbd.sock" --ctl "$DIR/ctl.sock" \
  --device zram0:512M --device zram1:256M --backing-dev "$DIR/wb.img" \
  >"$DIR/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  [[ -S "$DIR/nbd.sock" && -S "$DIR/ctl.sock" ]] && break
  server_alive || break
  sleep 0.1
done
if ! server_alive || [[ ! -S "$DIR/ctl.sock" ]]; then
  log "ztier serve did not start: $(cat "$DIR/serve.log")"
  exit 1
fi
if ! ctl_ok zram1 mem_limit 64M || ! ctl_ok "" hot_add || [[ "$CTL_OUT" != 2 ]]; then
  log "could not set zram1's mem_limit or add zram2 (hot_add: $CTL_OUT)"
  exit 1
fi
log "serving zram0 512M (backing file), zram1 256M (mem_limit 64M), zram2 (hot_add); pid $SERVER_PID"

while (($(date +%s) < DEADLINE)); do
  CYCLES=$((CYCLES + 1))
  SEED=$((CYCLES * 7919))
  log "cycle $CYCLES begins (seed $SEED)"
  rc=0
  for s in "${STEPS[@]}"; do
    run_step "$s" || rc=$?
    ((rc == 0)) && continue
    ((rc == 2)) && log "cycle $CYCLES: deadline reached before $s"
    break  # a failed step ends its cycle; the next one starts with a trim
  done
  ((rc == 0)) && COMPLETE=$((COMPLETE + 1))
done

summary
if ((VERIFY_ERRORS + OTHER_ERRORS)); then
  log "FAILED: $VERIFY_ERRORS verify error(s), $OTHER_ERRORS other error(s)"
  exit 1
fi
log "passed: $CYCLES cycles, 0 verify errors, 0 other errors"
