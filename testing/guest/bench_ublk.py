#!/usr/bin/python3
"""`ztier bench ublk`: ztier as a block device, in one guest, against the
guest kernel's own zram.

usage: bench_ublk.py --ztier BIN [--guest DIR] [--runs N] [--seconds S]
                     [--size SIZE] [--targets LIST] [--mem MIB] [--smp N]
                     [--cpu MODEL]
                     [--serve-args ARGS] [--timeout SECONDS] [--json PATH]
                     [--quick] [--machine-line LINE --machine-json JSON]

Builds (or reuses) the test guest in DIR (default: the folder `guest` beside
BIN, as `make test-kernel` has it) with BIN and fio on its /opt
(build_guest.py --ztier), boots ONE guest (qemu TCG, 2 vCPUs, 1024 MiB), and
in it measures three block devices of the same size and codec (lz4), one at
a time, with the same fio jobs:

  zram        the guest kernel's /dev/zram0
  ztier-ublk  /dev/ublkb0 of `ztier serve --ublk` (the kernel's ublk driver)
  ztier-nbd   /dev/nbd0: the same `ztier serve`, over NBD on the guest's
              loopback (nbd-client 127.0.0.1), the kernel's NBD client

`ztier serve` runs inside the guest (/opt/bin/ztier), so every figure comes
from the same emulated CPU. Without --ublk in BIN's `serve --help`, or when
/dev/ublkb0 does not appear, ztier-ublk is left out with a note and the
server runs for NBD alone.

`ztier bench ublk` runs this with its own binary as BIN and the machine
line and JSON object of every experiment (tools/ztier/machine_info.h);
without them the script makes a shorter machine line of its own.

Each target is first filled (untimed: fio write 128k QD8 over the whole
size). Then for each of RUNS runs, each job runs S seconds on each target,
the targets in the order above in odd runs and reversed in even ones. The
jobs are those of `ztier bench nbd` (bench_fio.h): 4k randwrite and randread
at QD1 and QD32, 128k write and read at QD8, all
  fio --ioengine=io_uring --direct=1 --buffer_compress_percentage=50
      --refill_buffers --size=SIZE --time_based --runtime=S
with fio's default random seed, so every target gets the same offsets and
the same (half-compressible) data. Each job's fio JSON comes back on the
console after "@@FIO RUN JOB TARGET STATUS".

Output: the benchmarks' one result model (tools/ztier/bench_report.h): a
machine line, a config, "== TITLE ==" tables (per job and target: IOPS,
MB/s, clat p50 and p99, median (min-max) over runs), the targets of issue
P13 beside the figures (4 KiB random at QD32: ztier-ublk >= 2x ztier-nbd
and >= 0.7x zram, the median of per-run IOPS ratios) and one ratio line
per job; --json writes the same as {benchmark, machine, conditions,
tables}, which tools/bench/compare_runs.py reads. Progress goes to stderr.

Figures come from software emulation (TCG): compare them only with each
other (docs/benchmarks.md says what would differ on real hardware). The
guest's CPU is run_guest.py's GUEST_CPU, qemu's max model without ERMS and
FSRM, whose `rep movsb`/`rep stosb` TCG runs a byte at a time (run_guest.py
says more); --cpu max keeps them.

Exit status: 0 measured (also with a target left out); 1 the guest or a
job failed; 2 bad usage.
"""
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_guest import GUEST_CPU, run_guest  # noqa: E402

BENCHMARK = "ztier bench ublk"
TARGETS = ["zram", "ztier-ublk", "ztier-nbd"]
DEVICES = {"zram": "/dev/zram0", "ztier-ublk": "/dev/ublkb0",
           "ztier-nbd": "/dev/nbd0"}
# name, fio --rw, block size, iodepth, whose figures count (write or read):
# the jobs of `ztier bench nbd` (tools/ztier/bench_fio.cc).
JOBS = [
    ("randwrite-4k-qd1", "randwrite", 4096, 1, "write"),
    ("randwrite-4k-qd32", "randwrite", 4096, 32, "write"),
    ("randread-4k-qd1", "randread", 4096, 1, "read"),
    ("randread-4k-qd32", "randread", 4096, 32, "read"),
    ("write-128k-qd8", "write", 128 * 1024, 8, "write"),
    ("read-128k-qd8", "read", 128 * 1024, 8, "read"),
]
FIO_COMMON = ["--ioengine=io_uring", "--direct=1",
              "--buffer_compress_percentage=50", "--refill_buffers",
              "--group_reporting", "--percentile_list=50:99",
              "--output-format=json"]
# Issue P13's targets: (numerator, denominator, job, at least).
GOALS = [
    ("ztier-ublk", "ztier-nbd", "randread-4k-qd32", 2.0),
    ("ztier-ublk", "ztier-nbd", "randwrite-4k-qd32", 2.0),
    ("ztier-ublk", "zram", "randread-4k-qd32", 0.7),
    ("ztier-ublk", "zram", "randwrite-4k-qd32", 0.7),
]
NBD_PORT = 10809


START = time.time()


def log(msg):
    print("bench ublk [%4.0f s]: %s" % (time.time() - START, msg),
          file=sys.stderr, flush=True)


def job_title(job):
    name, rw, bs, depth, _ = job
    size = "%dk" % (bs // 1024)
    return "%s %s QD%d" % (rw, size, depth)


def parse_size(text):
    m = re.fullmatch(r"([0-9]+)([KMG]?)", text.strip().upper())
    if not m:
        raise ValueError("--size takes N, NK, NM or NG, not '%s'" % text)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20,
                              "G": 1 << 30}[m.group(2)]


def size_text(n):
    if n % (1 << 30) == 0:
        return "%d GiB" % (n >> 30)
    if n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    return "%d bytes" % n


# ---- statistics and the report (the result model of bench_report.h) ----

def summarize(samples):
    """bench_stats.h's Summarize: median (mean of the middle two), min, max,
    mean, sample stddev (n - 1; 0 for one), cv in percent."""
    v = sorted(samples)
    n = len(v)
    if n == 0:
        return None
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    mean = sum(v) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    return {"n": n, "median": med, "min": v[0], "max": v[-1], "mean": mean,
            "stddev": sd, "cv": sd / mean * 100 if mean else 0.0}


def fmt(v, decimals):
    return "%.*f" % (decimals, v)


def json_key(column):
    """bench_report.h's JsonKey: "MB/s median" -> "mb_s_median"."""
    return "_".join(w.lower() for w in re.split(r"[^A-Za-z0-9]+", column) if w)


def json_number(v, decimals):
    if v is None or not math.isfinite(v):
        return None
    if decimals == 0:
        return int(round(v))
    return round(v, decimals)


RANGE, CV = 1, 2


class Row:
    def __init__(self):
        self.cells = []  # (column, kind, value, decimals, show)

    def text(self, column, value):
        self.cells.append((column, "text", value, 0, 0))
        return self

    def int(self, column, value):
        self.cells.append((column, "int", value, 0, 0))
        return self

    def key(self, column, value):
        """A cell of the JSON only (an identifying field the text's other
        columns already say)."""
        self.cells.append((column, "key", value, 0, 0))
        return self

    def number(self, column, value, decimals):
        self.cells.append((column, "number", value, decimals, 0))
        return self

    def figure(self, column, samples, decimals, show=RANGE):
        self.cells.append((column, "figure", list(samples), decimals, show))
        return self


def cell_columns(cell):
    """The text columns of a cell: [(heading, text, left-aligned)]."""
    column, kind, value, decimals, show = cell
    if kind == "key":
        return []
    if kind == "figure":
        s = summarize(value)
        out = []
        if show & RANGE:
            out.append((column + " median (min-max)",
                        "%s (%s-%s)" % (fmt(s["median"], decimals),
                                        fmt(s["min"], decimals),
                                        fmt(s["max"], decimals)) if s else "-",
                        False))
        else:
            out.append((column, fmt(s["median"], decimals) if s else "-",
                        False))
        if show & CV:
            out.append(("cv%", fmt(s["cv"], 1) if s else "-", False))
        return out
    if kind == "text":
        return [(column, value, True)]
    if kind == "int":
        return [(column, str(value), False)]
    return [(column, fmt(value, decimals), False)]


class Table:
    def __init__(self, name, title, text=True):
        self.name, self.title, self.text, self.rows = name, title, text, []

    def add_row(self):
        self.rows.append(Row())
        return self.rows[-1]

    def render(self):
        heads, left = [], []
        for r in self.rows:
            for c in r.cells:
                for h, _, lft in cell_columns(c):
                    if h not in heads:
                        heads.append(h)
                        left.append(lft)
        rows = []
        for r in self.rows:
            cells = [""] * len(heads)
            for c in r.cells:
                for h, t, _ in cell_columns(c):
                    cells[heads.index(h)] = t
            rows.append(cells)
        width = [max([len(h)] + [len(r[i]) for r in rows])
                 for i, h in enumerate(heads)]

        def line(cells):
            parts = [c.ljust(width[i]) if left[i] else c.rjust(width[i])
                     for i, c in enumerate(cells)]
            return "  ".join(parts).rstrip()
        out = "== %s ==\n" % self.title if self.title else ""
        return out + "\n".join([line(heads)] + [line(r) for r in rows]) + "\n\n"

    def json_rows(self):
        rows = []
        for r in self.rows:
            obj = {}
            for column, kind, value, decimals, _ in r.cells:
                key = json_key(column)
                if kind == "figure":
                    s = summarize(value)
                    for suffix, d in (("median", decimals), ("min", decimals),
                                      ("max", decimals), ("stddev", decimals),
                                      ("cv", 2)):
                        obj[key + "_" + suffix] = (
                            json_number(s[suffix], d) if s else None)
                elif kind == "number":
                    obj[key] = json_number(value, decimals)
                else:
                    obj[key] = value
            rows.append(obj)
        return rows


class Report:
    def __init__(self, machine_line, machine):
        self.machine_line, self.machine = machine_line, machine
        self.conditions = {}
        self.blocks = []  # str (a line) or Table
        self.tables = {}

    def line(self, text):
        self.blocks.append(text)

    def table(self, name, title, text=True):
        t = Table(name, title, text)
        self.tables[name] = t
        self.blocks.append(t)
        return t

    def ratio(self, what, ratios, missing,
              note="median of per-run ratios"):
        """bench_report.h's Report::Ratio."""
        t = self.tables.get("ratios") or self.table("ratios", "", text=False)
        t.add_row().text("ratio", what).figure("x", ratios, 4)
        if not ratios:
            self.line("%s: not measured (%s)" % (what, missing))
            return
        s = summarize(ratios)
        self.line("%s: %sx (%s, %s-%s)" % (what, fmt(s["median"], 2), note,
                                          fmt(s["min"], 2), fmt(s["max"], 2)))

    def text(self):
        out = self.machine_line + "\n"
        for b in self.blocks:
            if isinstance(b, str):
                out += b + "\n"
            elif b.text:
                out += b.render()
        return out

    def json(self):
        return {"benchmark": BENCHMARK, "machine": self.machine,
                "conditions": self.conditions,
                "tables": {name: t.json_rows()
                           for name, t in self.tables.items()}}


def host_machine():
    """The machine line and object when not given by `ztier bench ublk`
    (machine_info.h's, without the codec library versions)."""
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    u = platform.uname()
    kernel = "%s %s %s" % (u.system, u.release, u.machine)
    cores = os.cpu_count() or 0
    return ("machine: %s, %d cores, %s" % (model, cores, kernel),
            {"cpu_model": model, "cores": cores, "kernel": kernel})


# ---- the guest ----

GUEST_SCRIPT = r"""
. /lib.sh  # zt_wait_dev
set -u
SIZE_BYTES=@SIZE@
SECS=@SECS@
RUNS=@RUNS@
TARGETS="@TARGETS@"
UBLK=@UBLK@
SERVE_ARGS="@SERVE_ARGS@"
PORT=@PORT@
# Network block devices need memory to send (testing/guest/tests/swap.sh).
echo 16384 > /proc/sys/vm/min_free_kbytes
note() { echo "@@NOTE $*"; }
dev_of() {
  case $1 in
    zram) echo /dev/zram0 ;;
    ztier-ublk) echo /dev/ublkb0 ;;
    ztier-nbd) echo /dev/nbd0 ;;
  esac
}
have() { case " $TARGETS " in *" $1 "*) return 0 ;; esac; return 1; }
drop() {
  n=""
  for t in $TARGETS; do [ "$t" = "$1" ] || n="$n $t"; done
  TARGETS=${n# }
}
echo "@@GUEST $(uname -r) $(nproc) $(awk '/MemTotal/ {print $2}' /proc/meminfo)"
echo "@@FIOVERSION $(fio --version)"
if have zram; then
  echo lz4 > /sys/block/zram0/comp_algorithm &&
    echo "$SIZE_BYTES" > /sys/block/zram0/disksize ||
    { note "zram: could not set up /sys/block/zram0"; drop zram; }
fi
SERVE=""
serve() {
  ztier serve --device "zram0:$SIZE_BYTES" --comp-algorithm lz4 \
    --listen "127.0.0.1:$PORT" --ctl /tmp/ztier.ctl $SERVE_ARGS "$@" \
    > /tmp/serve.log 2>&1 &
  SERVE=$!
  echo -1000 > "/proc/$SERVE/oom_score_adj" 2>/dev/null
  i=0
  while [ $i -lt 300 ] && [ ! -S /tmp/ztier.ctl ]; do
    kill -0 $SERVE 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
  done
  [ -S /tmp/ztier.ctl ]
}
stop_serve() {
  kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null; rm -f /tmp/ztier.ctl
  SERVE=""
}
if have ztier-ublk || have ztier-nbd; then
  started=0
  if have ztier-ublk; then
    if [ "$UBLK" = 1 ] && serve --ublk; then
      # The disk exists before the server starts it; then it has a size.
      if zt_wait_dev 0 30; then
        started=1
      else
        note "ztier-ublk: no /dev/ublkb0 30 s after ztier serve --ublk:" \
          "$(tail -5 /tmp/serve.log | tr '\n' ' ')"
        stop_serve
      fi
    elif [ "$UBLK" = 1 ]; then
      note "ztier-ublk: ztier serve --ublk did not start:" \
        "$(tail -5 /tmp/serve.log | tr '\n' ' ')"
      stop_serve
    fi
    [ $started = 1 ] || drop ztier-ublk
  fi
  if [ $started = 0 ] && have ztier-nbd; then
    serve && started=1 || {
      note "ztier-nbd: ztier serve did not start:" \
        "$(tail -5 /tmp/serve.log | tr '\n' ' ')"
      drop ztier-nbd
    }
  fi
  if have ztier-nbd; then
    nbd-client 127.0.0.1 "$PORT" /dev/nbd0 -N zram0 -b 4096 > /tmp/nbd.log 2>&1 ||
      { note "ztier-nbd: nbd-client failed: $(cat /tmp/nbd.log)"; drop ztier-nbd; }
  fi
fi
echo "@@TARGETS $TARGETS"
[ -n "$TARGETS" ] || exit 1
mm_stat() {
  case $1 in
    zram) cat /sys/block/zram0/mm_stat ;;
    *) ztier ctl --ctl /tmp/ztier.ctl mm_stat ;;
  esac
}
# fio JOB RW BS DEPTH TARGET RUN [timed]
fio_job() {
  dev=$(dev_of "$5")
  timed=""
  [ "${7:-}" = timed ] && timed="--time_based --runtime=$SECS"
  fio --name="$1" --filename="$dev" --rw="$2" --bs="$3" --iodepth="$4" \
    --size="$SIZE_BYTES" $timed @FIO_COMMON@ --output=/tmp/fio.json \
    > /tmp/fio.err 2>&1
  rc=$?
  [ $rc = 0 ] || note "fio $1 on $5 failed ($rc): $(tr '\n' ' ' < /tmp/fio.err)"
  printf '@@FIO %s %s %s %s ' "$6" "$1" "$5" "$rc"
  tr -d '\n' < /tmp/fio.json | tr -s ' '  # a third shorter
  echo
  rm -f /tmp/fio.json
}
for t in $TARGETS; do
  fio_job fill write 131072 8 "$t" 0
  echo "@@MMSTAT $t $(mm_stat "$t")"
done
echo "@@FILLED"
run=1
while [ $run -le "$RUNS" ]; do
  order=$TARGETS
  if [ $((run % 2)) = 0 ]; then
    order=""
    for t in $TARGETS; do order="$t $order"; done
  fi
  for job in @JOBS@; do
    set -- $(echo "$job" | tr ':' ' ')
    for t in $order; do
      # What the console has left of the result drains during fio's
      # start-up (about 2 s here), before the timed part.
      fio_job "$1" "$2" "$3" "$4" "$t" "$run" timed
    done
  done
  echo "@@RUNDONE $run"
  run=$((run + 1))
done
for t in $TARGETS; do echo "@@MMSTAT_END $t $(mm_stat "$t")"; done
if have ztier-nbd; then nbd-client -d /dev/nbd0 > /dev/null 2>&1; fi
[ -z "$SERVE" ] || stop_serve
echo "@@SERVELOG $(tail -20 /tmp/serve.log 2>/dev/null | tr '\n' '|')"
exit 0
"""


def guest_script(cfg, ublk):
    jobs = " ".join("%s:%s:%d:%d" % j[:4] for j in JOBS)
    subs = {"@SIZE@": str(cfg["size"]), "@SECS@": str(cfg["seconds"]),
            "@RUNS@": str(cfg["runs"]), "@TARGETS@": " ".join(cfg["targets"]),
            "@UBLK@": "1" if ublk else "0",
            "@SERVE_ARGS@": cfg["serve_args"], "@PORT@": str(NBD_PORT),
            "@FIO_COMMON@": " ".join(FIO_COMMON), "@JOBS@": jobs}
    text = GUEST_SCRIPT
    for k, v in subs.items():
        text = text.replace(k, v)
    return text


def parse_fio(text, direction):
    """IOPS, MB/s, clat p50 and p99 (us) and fio's CPU% of one job's JSON,
    or None."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc = json.loads(text[start:])
        job = doc["jobs"][0]
        d = job[direction]
        pct = d.get("clat_ns", {}).get("percentile", {})

        def p(q):
            for k, v in pct.items():
                if abs(float(k) - q) < 1e-6:
                    return v / 1000.0
            return None
        return {"iops": float(d["iops"]), "mb_s": float(d["bw_bytes"]) / 1e6,
                "p50": p(50), "p99": p(99),
                "cpu": float(job.get("usr_cpu", 0)) + float(job.get("sys_cpu", 0)),
                "error": int(job.get("error", 0))}
    except (ValueError, KeyError, IndexError, TypeError):
        return None


class _Lines:
    """A stdout for run_guest(echo=True): each console line to `on_line`."""

    def __init__(self, on_line):
        self.on_line, self.buf = on_line, ""

    def write(self, text):
        self.buf += text
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.on_line(line)
        return len(text)

    def flush(self):
        pass


def run_guest_lines(cfg, script, on_line):
    """run_guest, each console line given to on_line as it comes (its echo
    goes to sys.stdout, which this points at on_line meanwhile)."""
    saved = sys.stdout
    sys.stdout = _Lines(on_line)
    try:
        return run_guest(cfg["guest"], script, mem_mib=cfg["mem"],
                         smp=cfg["smp"], cpu=cfg["cpu"],
                         timeout=cfg["timeout"], echo=True)
    finally:
        sys.stdout = saved


def ublk_supported(ztier):
    try:
        out = subprocess.run([ztier, "serve", "--help"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(r"--ublk(?![a-z-])", out) is not None


def usage_error(msg):
    print("ztier bench ublk: %s\nRun 'ztier bench ublk --help' for usage." % msg,
          file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    cfg = {"ztier": None, "guest": None, "runs": 5, "seconds": 5,
           "size": 256 << 20, "targets": list(TARGETS), "mem": 1024, "smp": 2,
           "cpu": GUEST_CPU,
           "serve_args": "", "json": None, "quick": False,
           "machine_line": None, "machine_json": None, "timeout": None}
    valued = {"--ztier", "--guest", "--runs", "--seconds", "--size",
              "--targets", "--mem", "--smp", "--cpu", "--serve-args", "--json",
              "--machine-line", "--machine-json", "--timeout"}
    given = set()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        name, eq, value = a.partition("=")
        if name == "--quick":
            cfg["quick"] = value.lower() not in ("false", "0") if eq else True
            i += 1
            continue
        if name not in valued:
            usage_error("unknown flag '%s'" % a)
        if not eq:
            if i + 1 >= len(argv):
                usage_error("%s needs a value" % name)
            value = argv[i + 1]
            i += 1
        i += 1
        key = name[2:].replace("-", "_")
        given.add(key)
        try:
            if key in ("runs", "seconds", "mem", "smp", "timeout"):
                cfg[key] = int(value)
                if cfg[key] < 1:
                    raise ValueError("%s wants at least 1" % name)
            elif key == "size":
                cfg[key] = parse_size(value)
                if cfg[key] < (1 << 20) or cfg[key] % 4096:
                    raise ValueError("--size wants at least 1M, in pages")
            elif key == "targets":
                t = [x for x in value.split(",") if x]
                bad = [x for x in t if x not in TARGETS]
                if bad or not t:
                    raise ValueError("--targets takes a comma list of %s"
                                     % ",".join(TARGETS))
                cfg[key] = [x for x in TARGETS if x in t]
            else:
                cfg[key] = value
        except ValueError as e:
            usage_error(str(e))
    if not cfg["ztier"]:
        usage_error("--ztier BIN is required")
    cfg["ztier"] = os.path.abspath(cfg["ztier"])
    if cfg["quick"]:  # the smallest settings: the chain, not the figures
        for k, v in (("runs", 1), ("seconds", 1), ("size", 64 << 20)):
            if k not in given:
                cfg[k] = v
    if not cfg["guest"]:
        cfg["guest"] = os.path.join(os.path.dirname(cfg["ztier"]), "guest")
    cfg["guest"] = os.path.abspath(cfg["guest"])
    if cfg["timeout"] is None:
        # boot and fills, then each job on each target, with fio's start-up
        # and the console's time under emulation.
        n = cfg["runs"] * len(JOBS) * len(cfg["targets"])
        cfg["timeout"] = 600 + n * (cfg["seconds"] + 15)
    return cfg


def main(argv):
    cfg = parse_args(argv)
    start = time.time()
    if cfg["machine_line"] and cfg["machine_json"]:
        machine_line = cfg["machine_line"]
        machine = json.loads(cfg["machine_json"])
    else:
        machine_line, machine = host_machine()
    ublk = "ztier-ublk" in cfg["targets"] and ublk_supported(cfg["ztier"])
    notes = []
    if "ztier-ublk" in cfg["targets"] and not ublk:
        notes.append("ztier-ublk: not measured: this ztier's serve has no "
                     "--ublk")
    log("building the guest in %s" % cfg["guest"])
    r = subprocess.run([sys.executable, os.path.join(HERE, "build_guest.py"),
                        cfg["guest"], "--ztier", cfg["ztier"]],
                       stdout=sys.stderr)
    if r.returncode != 0:
        log("could not build the guest")
        return 1
    script = guest_script(cfg, ublk)
    n_jobs = cfg["runs"] * len(JOBS) * len(cfg["targets"])
    log("booting the guest (%d vCPUs, %d MiB): %d timed jobs of %d s on %s"
        % (cfg["smp"], cfg["mem"], n_jobs, cfg["seconds"],
           ", ".join(cfg["targets"])))
    progress = {"n": 0}

    def on_line(line):
        if line.startswith("@@FIO "):
            w = line.split(" ", 5)
            if len(w) >= 5 and w[1] != "0":
                progress["n"] += 1
                fig = parse_fio(w[5] if len(w) > 5 else "",
                                "write" if "write" in w[2] else "read")
                log("[%d/%d] run %s %s %s: %s" % (
                    progress["n"], n_jobs, w[1], w[2], w[3],
                    "%.0f IOPS" % fig["iops"] if fig else "FAILED"))
            elif len(w) >= 4:
                log("filled %s" % w[3])
        elif line.startswith("@@") or "ztier" in line or "fio" in line:
            log("guest: " + line[:300])

    g = run_guest_lines(cfg, script, on_line)
    elapsed = time.time() - start
    if g.why or g.status != 0:
        log("the guest failed: %s (status %d); its console:\n%s" % (
            g.why or "exit status", g.status,
            "\n".join(l[:300] for l in g.output.splitlines()[-40:])))
        return 1
    return report(cfg, g, notes, machine_line, machine, elapsed)


def report(cfg, g, notes, machine_line, machine, elapsed):
    guest = (g.lines("@@GUEST ") or ["? ? ?"])[0].split()
    targets = (g.lines("@@TARGETS ") or [""])[0].split()
    fio_version = (g.lines("@@FIOVERSION ") or ["?"])[0]
    notes += g.lines("@@NOTE ")
    # samples[(target, job)][figure] = [per run], per_run[(target, job)][run]
    samples, per_run, failures = {}, {}, []
    for line in g.lines("@@FIO "):
        w = line.split(" ", 4)
        if len(w) < 4 or w[0] == "0":
            continue
        run, job, target, rc = w[0], w[1], w[2], w[3]
        spec = next((j for j in JOBS if j[0] == job), None)
        if spec is None:
            continue
        fig = parse_fio(w[4] if len(w) > 4 else "", spec[4])
        if fig is None or rc != "0" or fig["error"]:
            failures.append("run %s %s on %s" % (run, job, target))
            continue
        s = samples.setdefault((target, job), {})
        for k in ("iops", "mb_s", "p50", "p99", "cpu"):
            if fig[k] is not None:
                s.setdefault(k, []).append(fig[k])
        per_run.setdefault((target, job), {})[run] = fig["iops"]
    mm = {}
    for line in g.lines("@@MMSTAT "):
        w = line.split()
        if len(w) >= 4:
            mm[w[0]] = [int(x) for x in w[1:4] if x.isdigit()]

    r = Report(machine_line + "; guest: Linux %s, %s vCPUs (qemu TCG), %d MiB"
               % (guest[0], guest[1] if len(guest) > 1 else "?", cfg["mem"]),
               machine)
    conditions = {
        "runs": str(cfg["runs"]), "seconds": str(cfg["seconds"]),
        "size_bytes": str(cfg["size"]), "codec": "lz4",
        "targets": ",".join(targets), "guest_kernel": guest[0],
        "guest_vcpus": guest[1] if len(guest) > 1 else "?",
        "guest_mem_mib": str(cfg["mem"]), "emulation": "qemu TCG",
        "guest_cpu": cfg["cpu"],
        "fio": fio_version, "serve_args": cfg["serve_args"]}
    r.conditions = conditions
    r.line("config: runs=%d, fio seconds per job=%d, size=%s, codec lz4, "
           "guest %d vCPUs (-cpu %s) / %d MiB under qemu TCG (an emulated "
           "CPU: compare these figures only with each other)"
           % (cfg["runs"], cfg["seconds"], size_text(cfg["size"]), cfg["smp"],
              cfg["cpu"], cfg["mem"]))
    r.line("targets (one at a time, the order reversed every other run): " +
           ", ".join("%s (%s)" % (t, DEVICES[t]) for t in targets) +
           "; ztier serve and nbd-client run inside the guest (NBD over "
           "127.0.0.1)" +
           (", ztier serve " + cfg["serve_args"] if cfg["serve_args"] else ""))
    r.line("fio %s: %s --size=%d --time_based --runtime=%d (fio's default "
           "seed: the same offsets and data on every target)\n"
           "  fill (untimed, first on every target): write 128k QD8, one "
           "pass over the device"
           % (fio_version, " ".join(FIO_COMMON), cfg["size"], cfg["seconds"]))
    for t in targets:
        if t in mm and len(mm[t]) >= 3:
            orig, compr, used = mm[t][:3]
            r.line("after the fill, %s mm_stat: orig_data_size %d, "
                   "compr_data_size %d, mem_used_total %d bytes" %
                   (t, orig, compr, used))
    for n in notes:
        r.line("note: " + n)
    for f in failures:
        r.line("FAILED: " + f)
    r.line("")

    t = r.table("fio", "fio in the guest (%d s per job, %d runs; MB/s = "
                "10^6 bytes/s; cv%% = stddev/mean of IOPS; clat p50 and p99 "
                "in us, medians; fio CPU%% = the fio client's user + system "
                "CPU, median, 100 = one vCPU)" % (cfg["seconds"], cfg["runs"]))
    for job in JOBS:
        for target in targets:
            s = samples.get((target, job[0]), {})
            t.add_row().text("job", job_title(job)).text("target", target) \
                .key("rw", job[1]).key("block_size", job[2]) \
                .key("iodepth", job[3]) \
                .figure("IOPS", s.get("iops", []), 0, RANGE | CV) \
                .figure("MB/s", s.get("mb_s", []), 1) \
                .figure("clat p50 us", s.get("p50", []), 1, 0) \
                .figure("clat p99 us", s.get("p99", []), 1, 0) \
                .figure("fio CPU%", s.get("cpu", []), 0, 0)

    def ratios(a, b, job):
        ra, rb = per_run.get((a, job), {}), per_run.get((b, job), {})
        return [ra[k] / rb[k] for k in sorted(ra) if k in rb and rb[k] > 0]

    goals = r.table("targets", "targets of issue P13 (4 KiB random at QD32; "
                    "IOPS ratio within each run, then median over runs)")
    for a, b, job, want in GOALS:
        v = ratios(a, b, job)
        spec = next(j for j in JOBS if j[0] == job)
        met = "-" if not v else ("yes" if summarize(v)["median"] >= want
                                 else "NO")
        goals.add_row().text("ratio", "%s/%s %s IOPS" % (a, b, job_title(spec))) \
            .figure("IOPS ratio", v, 3).number("target >=", want, 2) \
            .text("met", met)
    for a, b in (("ztier-ublk", "ztier-nbd"), ("ztier-ublk", "zram"),
                 ("ztier-nbd", "zram")):
        missing = [x for x in (a, b) if x not in targets]
        if missing:  # one line for the pair
            r.ratio("%s / %s IOPS" % (a, b), [], "no %s" % " and no ".join(
                missing))
            continue
        for job in JOBS:
            r.ratio("%s / %s, %s IOPS" % (a, b, job_title(job)),
                    ratios(a, b, job[0]), "no run measured both")
    r.line("")
    r.line("took %.0f s (build, boot, fills and %d timed jobs)"
           % (elapsed, len(g.lines("@@FIO ")) - len(targets)))
    text = r.text()
    sys.stdout.write(text)
    sys.stdout.flush()
    status = 0
    if cfg["json"]:
        try:
            with open(cfg["json"] + ".tmp", "w") as f:
                json.dump(r.json(), f, indent=2)
                f.write("\n")
            os.replace(cfg["json"] + ".tmp", cfg["json"])
            print("\nwrote %s" % cfg["json"])
        except OSError as e:
            print("ztier bench ublk: %s: %s" % (cfg["json"], e),
                  file=sys.stderr)
            status = 1
    if failures or not samples:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
