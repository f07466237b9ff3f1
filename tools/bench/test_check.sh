# test_check.sh: what the shell tests of tools/bench share. Sourced after
# setting test_name (sh passes no arguments to a sourced file):
#   test_name=render-docs-test
#   . "$(dirname "$0")/test_check.sh"
# Makes a temporary folder $dir (removed on exit) and defines
#   check DESCRIPTION COMMAND...   runs COMMAND, prints ok: or FAILED:
#   check_summary                  prints the counts; fails if any failed
dir=$(mktemp -d "${TMPDIR:-/tmp}/$test_name.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
passes=0
check() {
  what=$1; shift
  if "$@"; then
    echo "ok: $what"; passes=$((passes + 1))
  else
    echo "FAILED: $what"; fails=$((fails + 1))
  fi
}
check_summary() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
}
