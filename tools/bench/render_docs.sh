#!/bin/sh
# render_docs.sh: writes docs/benchmarks.md from its template and the saved
# results of `make bench`, so that the document is always the output of the
# code.
#
#   tools/bench/render_docs.sh TEMPLATE RESULTS_DIR CHARTS_DIR OUT
#   (make bench-docs: docs/benchmarks.md.in build/bench-results docs/charts
#    docs/benchmarks.md)
#
# The template is Markdown; these lines, each alone on its line, are
# replaced:
#   @@OUTPUT NAME@@                 RESULTS_DIR/NAME.txt (a command's stdout)
#                                   in a ``` block
#   @@OUTPUT NAME /START/@@         the same from its first line that
#                                   matches the awk regex START to the end
#   @@OUTPUT NAME /START/ /STOP/@@  ... up to, not including, the next line
#                                   after it that matches STOP
#   @@COMMAND NAME@@                RESULTS_DIR/NAME.cmd (the command line
#                                   that `make bench` ran) in a ``` block
#   @@CHART NAME@@                  a Markdown image of CHARTS_DIR/NAME.png,
#                                   linked relative to OUT, with the chart's
#                                   title (the first line of NAME.gp) as
#                                   its alternative text
#   @@DURATION NAME@@ (anywhere in a line)  how long the command ran
#                                   ("1 min 50 s"), from RESULTS_DIR/NAME.time
#                                   (seconds), which `make bench` writes
# A marker whose file is missing, or a START that matches no line, is an
# error: nothing is written, the exit status is 1 and the message names
# what is missing (run `make bench`, or the one experiment). OUT is written
# through a temporary file beside it and renamed, so a failed run leaves the
# old document as it was.
set -eu

if [ $# -ne 4 ]; then
  echo "usage: $0 TEMPLATE RESULTS_DIR CHARTS_DIR OUT" >&2
  exit 2
fi
template=$1
results=$2
charts=$3
out=$4
[ -f "$template" ] || { echo "$0: no template $template" >&2; exit 1; }

# Charts are linked relative to the document's folder.
link=$(realpath -m --relative-to="$(dirname "$out")" "$charts")
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT INT TERM

awk -v results="$results" -v charts="$charts" -v link="$link" \
    -v template="$template" '
function fail(msg) {
  printf "%s:%d: %s\n", template, FNR, msg > "/dev/stderr"
  failed = 1
  exit 1
}
function readable(path,    line, r) {
  r = (getline line < path)
  if (r >= 0) close(path)
  return r >= 0
}
function duration(name,    path, secs, m, s) {
  path = results "/" name ".time"
  if (!readable(path)) fail("no " path " (run make bench)")
  getline secs < path
  close(path)
  secs = secs + 0
  m = int(secs / 60)
  s = secs - m * 60
  return m > 0 ? sprintf("%d min %d s", m, s) : sprintf("%d s", s)
}
# The ```-block of RESULTS/NAME.txt, from START (a regex, "" for the first
# line) to before STOP ("" for the end). Trailing blank lines are dropped.
function output(name, start, stop,    path, line, on, n, i, buf) {
  path = results "/" name ".txt"
  if (!readable(path)) fail("no " path " (run make bench)")
  on = (start == "")
  n = 0
  while ((getline line < path) > 0) {
    if (!on && line ~ start) {
      on = 1
    } else if (on && stop != "" && n > 0 && line ~ stop) {
      break
    }
    if (on) buf[++n] = line
  }
  close(path)
  if (!on) fail(path ": no line matches /" start "/")
  while (n > 0 && buf[n] ~ /^[ \t]*$/) n--
  print "```"
  for (i = 1; i <= n; i++) print buf[i]
  print "```"
}
function command(name,    path, line) {
  path = results "/" name ".cmd"
  if (!readable(path)) fail("no " path " (run make bench)")
  print "```"
  while ((getline line < path) > 0) print line
  close(path)
  print "```"
}
function chart(name,    gp, title) {
  if (!readable(charts "/" name ".png"))
    fail("no " charts "/" name ".png (run make bench)")
  gp = charts "/" name ".gp"
  title = name
  if ((getline title < gp) > 0) {
    sub(/^# [^:]*: /, "", title)
  }
  close(gp)
  gsub(/[\[\]]/, "", title)
  print "![" title "](" link "/" name ".png)"
}
# "/re/ /re2/" -> args[1], args[2] (the slashes dropped).
function regexes(text, args,    n) {
  n = 0
  while (match(text, /\/[^\/]*\//)) {
    args[++n] = substr(text, RSTART + 1, RLENGTH - 2)
    text = substr(text, RSTART + RLENGTH)
  }
  return n
}
/^@@OUTPUT [A-Za-z0-9._-]+( .*)?@@[ \t]*$/ {
  spec = $0
  sub(/^@@OUTPUT /, "", spec)
  sub(/@@[ \t]*$/, "", spec)
  name = spec
  sub(/ .*/, "", name)
  rest = substr(spec, length(name) + 1)
  split("", args)
  n = regexes(rest, args)
  output(name, n >= 1 ? args[1] : "", n >= 2 ? args[2] : "")
  next
}
/^@@COMMAND [A-Za-z0-9._-]+@@[ \t]*$/ {
  name = $2
  sub(/@@.*/, "", name)
  command(name)
  next
}
/^@@CHART [A-Za-z0-9._-]+@@[ \t]*$/ {
  name = $2
  sub(/@@.*/, "", name)
  chart(name)
  next
}
/@@/ {
  line = $0
  while (match(line, /@@DURATION [A-Za-z0-9._-]+@@/)) {
    name = substr(line, RSTART + 11, RLENGTH - 13)
    line = substr(line, 1, RSTART - 1) duration(name) \
           substr(line, RSTART + RLENGTH)
  }
  if (line ~ /@@(OUTPUT|COMMAND|CHART|DURATION)/) fail("malformed marker: " line)
  print line
  next
}
{ print }
' "$template" > "$tmp"

mv "$tmp" "$out"
trap - EXIT INT TERM
echo "wrote $out"
