#!/bin/sh
# Test of render_docs.sh (run by CTest): renders a small template from
# made-up results into a temporary folder and checks every kind of marker,
# and that a missing result fails without touching the old output.
#   render_docs_test.sh PATH/TO/render_docs.sh
set -eu
render=$1
test_name=render-docs-test
. "$(dirname "$0")/test_check.sh"

mkdir -p "$dir/results" "$dir/docs/charts"
printf 'machine: test\n\n== table A ==\nrow a1\n\n== table B ==\nrow b1\n\nwrote x.json\n\n\n' \
  > "$dir/results/bench-x.txt"
echo 110 > "$dir/results/bench-x.time"
echo "./build/ztier bench x --json build/bench-results/bench-x.json" > "$dir/results/bench-x.cmd"
echo 7 > "$dir/results/bench-y.time"
printf '\211PNG\r\n\032\n' > "$dir/docs/charts/c1.png"
printf '# c1: Chart [one] title\nset output\n' > "$dir/docs/charts/c1.gp"
cat > "$dir/t.md.in" <<'T'
# Doc
Took @@DURATION bench-x@@ and @@DURATION bench-y@@.
@@OUTPUT bench-x@@
B only:
@@OUTPUT bench-x /^== table B/ /^wrote/@@
@@CHART c1@@
@@COMMAND bench-x@@
T
"$render" "$dir/t.md.in" "$dir/results" "$dir/docs/charts" "$dir/docs/out.md" >/dev/null
out=$(cat "$dir/docs/out.md")
check "durations" grep -qx 'Took 1 min 50 s and 7 s.' "$dir/docs/out.md"
check "whole output, trailing blank lines dropped" sh -c \
  'printf "%s\n" "$1" | sed -n "3,13p" | tr "\n" "|" | grep -qx "\`\`\`|machine: test||== table A ==|row a1||== table B ==|row b1||wrote x.json|\`\`\`|"' _ "$out"
check "command line in a block" sh -c \
  'printf "%s\n" "$1" | tail -3 | tr "\n" "|" | grep -qx "\`\`\`|./build/ztier bench x --json build/bench-results/bench-x.json|\`\`\`|"' _ "$out"
check "no marker left" sh -c '! grep -q "@@" "$1"' _ "$dir/docs/out.md"
check "section from START to before STOP" sh -c \
  'printf "%s\n" "$1" | sed -n "/^B only:/,\$p" | head -5 | tr "\n" "|" | grep -qx "B only:|\`\`\`|== table B ==|row b1|\`\`\`|"' _ "$out"
check "chart linked relative to the document, titled from its script" \
  grep -qx '!\[Chart one title\](charts/c1.png)' "$dir/docs/out.md"

cp "$dir/docs/out.md" "$dir/before.md"
echo "@@OUTPUT missing@@" > "$dir/bad.md.in"
check "a missing result fails" sh -c \
  '! "$1" "$2/bad.md.in" "$2/results" "$2/docs/charts" "$2/docs/out.md" 2>"$2/err"' _ "$render" "$dir"
check "naming the missing file" grep -q 'results/missing.txt' "$dir/err"
check "and leaves the old document" cmp -s "$dir/before.md" "$dir/docs/out.md"
echo "@@CHART nope@@" > "$dir/bad.md.in"
check "a missing chart fails" sh -c \
  '! "$1" "$2/bad.md.in" "$2/results" "$2/docs/charts" "$2/docs/out.md" 2>/dev/null' _ "$render" "$dir"
echo "@@OUTPUT bench-x /^nothing/@@" > "$dir/bad.md.in"
check "a START that matches nothing fails" sh -c \
  '! "$1" "$2/bad.md.in" "$2/results" "$2/docs/charts" "$2/docs/out.md" 2>/dev/null' _ "$render" "$dir"
check "no temporary file left" sh -c '! ls "$1"/docs/out.md.tmp.* >/dev/null 2>&1' _ "$dir"

check_summary
