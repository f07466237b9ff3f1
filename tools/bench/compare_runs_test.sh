#!/bin/sh
# Test of compare_runs.py (run by CTest): two made-up runs, with figures that
# agree, one that does not, conditions and a figure not in the one schema
# (an object with median, min and max) it must leave out of the comparison,
# and the per-placement count; then bad usage.
#   compare_runs_test.sh PATH/TO/compare_runs.py
set -eu
compare=$1
test_name=compare-runs-test
. "$(dirname "$0")/test_check.sh"

# run DIR RTT_A RTT_B STORE_MEDIAN: one bench-engine.json with two cases.
run() {
  mkdir -p "$1"
  cat > "$1/bench-engine.json" <<J
{"machine": {"cpu_model": "test", "cross_cpu_rtt_ns": $2},
 "measurements": [
  {"codec": "lz4", "corpus": "a", "op": "store", "threads": 1,
   "mb_s_median": $4, "mb_s_min": $(($4 - 5)), "mb_s_max": $(($4 + 5))},
  {"codec": "lz4", "corpus": "b", "op": "store", "threads": 1,
   "mb_s_median": 200, "mb_s_min": 190, "mb_s_max": 210,
   "old_shape": {"median": 1, "min": 0, "max": 2}}],
 "conditions": [
  {"codec": "lz4", "corpus": "a", "cross_cpu_rtt_ns_median": $2,
   "cross_cpu_rtt_ns_min": 1, "cross_cpu_rtt_ns_max": 900},
  {"codec": "lz4", "corpus": "b", "cross_cpu_rtt_ns_median": $3,
   "cross_cpu_rtt_ns_min": 1, "cross_cpu_rtt_ns_max": 900}]}
J
}
run "$dir/one" 55 60 100
run "$dir/two" 320 58 150
python3 "$compare" "$dir/one" "$dir/two" > "$dir/out"
cat "$dir/out"
has() { grep -q -- "$1" "$dir/out"; }
check "one of two figures agrees" has '^bench-engine: 1 of 2 medians agree'
check "the disagreeing figure is named" \
  has 'lz4 a store 1 / mb_s: 100 (95-105) vs 150 (145-155), medians 50.0% apart'
check "the machine's round trips are shown" \
  has 'round trip at the start: 55 vs 320 ns'
check "conditions are not compared, and split the count" \
  has "within 2x): 1 of 2; their figures agree 1 of 1, the others' 0 of 1"
check "the total" has '^all: 1 of 2 medians agree (50.0%)'

# The same in the one schema of tools/ztier/bench_report.h: bench engine's
# per-case tables "CODEC CORPUS" and "CODEC CORPUS conditions".
tables() {
  mkdir -p "$1"
  cat > "$1/bench-engine.json" <<J
{"benchmark": "ztier bench engine", "machine": {"cross_cpu_rtt_ns": $2},
 "conditions": {"runs": "5"},
 "tables": {
  "lz4 a": [{"op": "store", "threads": 1, "mb_s_median": $4,
             "mb_s_min": $(($4 - 5)), "mb_s_max": $(($4 + 5))}],
  "lz4 a conditions": [{"cross_cpu_rtt_ns_median": $2,
                        "cross_cpu_rtt_ns_min": 1, "cross_cpu_rtt_ns_max": 900}],
  "lz4 b": [{"op": "store", "threads": 1, "mb_s_median": 200,
             "mb_s_min": 190, "mb_s_max": 210}],
  "lz4 b conditions": [{"cross_cpu_rtt_ns_median": $3,
                        "cross_cpu_rtt_ns_min": 1, "cross_cpu_rtt_ns_max": 900}],
  "derived": [{"ratio": "batch8", "threads": 1, "value": $5},
              {"ratio": "sizes", "value": 2.5, "pages": 4096}]}}
J
}
tables "$dir/t1" 55 60 100 1.60
tables "$dir/t2" 320 58 150 1.70
python3 "$compare" "$dir/t1" "$dir/t2" > "$dir/out"
cat "$dir/out"
check "tables: one of two figures agrees" has '^bench-engine: 1 of 2 medians agree'
check "tables: the disagreeing figure is named" \
  has 'tables / lz4 a / store 1 / mb_s: 100 (95-105) vs 150 (145-155)'
check "tables: conditions are not compared, and split the count" \
  has "within 2x): 1 of 2; their figures agree 1 of 1, the others' 0 of 1"
# Single numbers (no spread): within the tolerance, 5% by default.
check "tables: single numbers are compared" has '^  single numbers: 1 of 2 within 5%'
check "tables: the number apart is named" \
  has 'derived / batch8 1 / value: 1.6 vs 1.7, 6.2% apart'
check "tables: the numbers' total" has '^all: 1 of 2 single numbers within 5% (50.0%)'
python3 "$compare" --tolerance 10 "$dir/t1" "$dir/t2" > "$dir/out"
check "tables: --tolerance 10 takes both" has '^  single numbers: 2 of 2 within 10%'

status=0
python3 "$compare" "$dir/one" >/dev/null 2>&1 || status=$?
check "bad usage exits 2" test "$status" -eq 2

check_summary
