#!/usr/bin/python3
"""`make test-kernel`: a real Linux kernel on ztier, in a guest.

usage: kernel_tests.py --ztier BIN --guest DIR [--via-nbd] [TEST...]

Builds (or reuses) the guest in DIR (build_guest.py, with --ztier BIN: the
guest's /opt holds ztier and fio), then runs each TEST (default: all, in the
order below) in its own boot of the guest. Two kinds of test:

With ztier on the host: this script starts a `ztier serve` on the host's
loopback, which the guest reaches as 10.0.2.2 over NBD:

  swap     swap on the guest's own zram and on ztier over NBD, alternating,
           with discard (tests/swap.sh)
  ext4     ext4 on ztier: writeback of a tarball to a backing file on the
           host and back, the writeback_limit flow, fstrim (tests/ext4.sh)
  conformance
           one sequence of zram operations on the guest's /sys/block/zram0
           and on ztier, every status and attribute compared
           (tests/conformance.sh, conformance.py); the table goes to
           DIR/results/conformance.md, which docs/conformance.md copies

With ztier inside the guest: no server on the host; the script starts
`ztier serve --ublk` from /opt (lib.sh's zt_serve), so that the guest's
kernel (ublk_drv) sees each ztier device zramN as /dev/ublkbN; it stops
the server with SIGTERM and checks that it exits 0 and that no ublk disk
is left (zt_stop). A guest without /dev/ublk-control fails these tests.

  ublk_fio      fio, io_uring, O_DIRECT: 128 MiB of 4 KiB random writes at
                iodepth 32 and 64 MiB of 128 KiB sequential writes, every
                block read back and verified (crc32c)
  ublk_ext4     ext4: a tarball of about 40 MiB in and out (sync, drop
                caches) with equal sha256; rm and fstrim free its memory
                in the pool (mm_stat)
  ublk_swap     swap (swapon -d) with ztier --mlock --mem-limit in the same
                guest: twice the guest's MemTotal in patterned words, every
                word read back (patterns)
  ublk_hotplug  hot_remove of an idle disk removes /dev/ublkb1; hot_add and
                disksize bring it back, and it serves IO
  ublk_busy     hot_remove and reset refused with EBUSY while the disk is
                mounted or swapped on, and the disk keeps serving; after
                umount and swapoff, hot_remove succeeds
  ublk_reset_race
                a swapon started while a reset of the disk looks for
                users: either the swapon wins (the reset is refused) or
                the reset does (the swapon fails), never both
  ublk_crash    SIGKILL leaves the ublk device behind; the next server
                deletes it and serves a new disk in its place
  ublk_stall    with a remote backing store (a second ztier) stopped, a
                read of a written-back page waits while a read from RAM on
                the same queue is served at once; the stalled read ends
                with the right data once the remote goes on

--via-nbd runs the in-guest tests with ztier over NBD inside the guest
(a Unix socket and nbd-client) instead of ublk: a debugging aid for the
scripts (ublk_fio and ublk_ext4 pass that way; the others are about ublk,
and swap over NBD to a server in the same kernel deadlocks).

A test passes when its script exits 0 and every @@CHECK line it printed is
ok. @@RESULT lines are collected into DIR/results/NAME.txt. Each test ends
with "== NAME: passed|FAILED ..., N s" and the run with "N passed, N
failed". Times and figures come from software emulation (TCG): compare them
only with each other.
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_guest import run_guest  # noqa: E402
import conformance  # noqa: E402


class Server:
    """`ztier serve` on 127.0.0.1:PORT with its control socket in `tmp`."""

    def __init__(self, ztier, tmp, flags):
        self.port = None  # the kernel's choice (port 0), from the banner
        self.ctl = os.path.join(tmp, "ztier.ctl")
        self.log_path = os.path.join(tmp, "serve.log")
        # errors="replace": a byte that is not UTF-8 must not end the
        # thread that drains the pipe (the server would block on its log).
        self.proc = subprocess.Popen(
            [ztier, "serve", "--listen", "127.0.0.1:0",
             "--unix", os.path.join(tmp, "ztier.sock"), "--ctl", self.ctl] +
            flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace")
        self.banner = threading.Event()
        self.copier = threading.Thread(target=self._copy_log, daemon=True)
        self.copier.start()
        # The banner's TCP line comes once the NBD and control sockets
        # listen (tools/ztier/serve_cmd.cc: StartServers, then the banner);
        # the end of its output, if it exited before.
        self.banner.wait(120)
        if self.port is None:
            try:
                self.proc.wait(timeout=10)  # the end of its output: its exit
            except subprocess.TimeoutExpired:
                pass

    def _copy_log(self):
        """Copies the server's output to its log; the banner's port."""
        with open(self.log_path, "w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                m = re.search(r"TCP: nbds?://127\.0\.0\.1:(\d+)/", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    self.banner.set()
        self.banner.set()

    def alive(self):
        return self.proc.poll() is None and self.port is not None

    def stop(self):
        """Stops the server; its log. self.problem says what went wrong: it
        had exited by itself, did not stop on SIGTERM within 10 s, or
        exited with another status than 0."""
        self.problem = None
        if self.proc.poll() is not None:
            self.problem = ("ztier serve had exited before the end (status %d)"
                            % self.proc.returncode)
        else:
            self.proc.terminate()
            try:
                if self.proc.wait(timeout=10) != 0:
                    self.problem = ("ztier serve exited with status %d on "
                                    "SIGTERM" % self.proc.returncode)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.problem = "ztier serve did not stop within 10 s of SIGTERM"
        self.copier.join()
        with open(self.log_path) as f:
            return f.read()


# name -> (ztier serve flags, variables for the script, guest RAM in MiB)
def tests(tmp):
    return {
        # What a kernel swap client needs (docs/swap.md): the memory locked
        # and allocated up front, no io timeout that could cut it off.
        "swap": (["--device", "zram0:1G", "--comp-algorithm", "lz4",
                  "--mlock", "--mem-limit", "512M", "--io-timeout", "0"],
                 {"REPS": "2", "MIB": "512"}, 256),
        "ext4": (["--device", "zram0:256M", "--comp-algorithm", "lz4",
                  "--backing-dev", os.path.join(tmp, "zram0.backing")],
                 {"BACKING1": os.path.join(tmp, "zram1.backing")}, 256),
        "conformance": (["--device", "zram0:32M", "--comp-algorithm", "lz4"],
                        {"BACKING": os.path.join(tmp, "zram0.backing")}, 256),
    }


# Tests where ztier runs inside the guest, from /opt (build_guest.py
# --ztier), as a ublk server for the guest's own kernel: no server on the
# host; the script starts `ztier serve --ublk` itself (lib.sh's zt_serve).
# name -> (variables for the script, guest RAM in MiB, vCPUs)
def guest_tests():
    return {
        "ublk_fio": ({}, 512, 2),
        "ublk_ext4": ({}, 512, 2),
        # RAM: the workload is twice MemTotal, which the script reads (421
        # MiB at 256 MiB of RAM); ztier's locked memory (about 70 MiB) and
        # /opt's page cache share that RAM. At 192 MiB (27 MiB free before
        # the workload) one run of two never ended.
        "ublk_swap": ({}, 256, 2),
        "ublk_hotplug": ({}, 256, 2),
        "ublk_busy": ({}, 256, 2),
        "ublk_reset_race": ({}, 256, 2),
        "ublk_crash": ({}, 256, 2),
        "ublk_stall": ({}, 256, 2),
        # Not in the default list: captures testdata/ublk_descriptors.txt.
        "ublk_trace": ({}, 256, 2),
    }


def judge_conformance(g, results_dir):
    """The failures of the conformance comparison; writes its table."""
    lines = g.lines("@@CONF ")
    order, steps = conformance.parse(lines)
    rows = conformance.compare(order, steps)
    kernel = (g.lines("@@BOOTED ") or ["?"])[0]
    with open(os.path.join(results_dir, "conformance.md"), "w") as f:
        f.write(conformance.table(rows, kernel))
    failures = ["%s: kernel %s, ztier %s" % (r[0], r[1], r[2])
                for r in rows if r[3] == "DIFFERS"]
    # "@@CONF_DONE N": the script printed N @@CONF lines; fewer read here
    # means the console lost some (a kernel message mixed into them), and
    # with them steps that would not be compared.
    done = g.lines("@@CONF_DONE")
    if not done:
        failures.append("the sequence did not run to its end")
    elif done[0] != str(len(lines)):
        failures.append("the script printed %s @@CONF lines, %d came back" %
                        (done[0], len(lines)))
    if not rows:
        failures.append("no step ran")
    return failures


def judge_trace(g, results_dir):
    """Writes the descriptor trace that tests/ublk_trace.sh printed between
    its @@TRACE markers to DIR/results/ublk_descriptors.txt."""
    lines, inside = [], False
    for line in g.output.splitlines():
        if line.startswith("@@TRACE begin"):
            inside = True
        elif line.startswith("@@TRACE end"):
            inside = False
        elif inside:
            lines.append(line)
    if not any(l and not l.startswith("#") for l in lines):
        return ["no trace between the @@TRACE markers"]
    kernel = (g.lines("@@BOOTED ") or ["?"])[0]
    with open(os.path.join(results_dir, "ublk_descriptors.txt"), "w") as f:
        f.write("# ublk descriptors for src/ublk/request_test.cc's ReplayTest.\n"
                "# CAPTURED from a real kernel: %s with ublk_drv in the qemu "
                "guest of testing/guest/,\n# by `kernel_tests.py ... "
                "ublk_trace` (tests/ublk_trace.sh: ztier serve --ublk "
                "--ublk-trace FILE,\n# fio randrw/write+fsync/read/trim, "
                "blkdiscard, BLKZEROOUT, dd conv=fsync) on %s.\n"
                % (kernel, time.strftime("%Y-%m-%d")))
        f.write("\n".join(lines) + "\n")
    return []


JUDGES = {"conformance": judge_conformance, "ublk_trace": judge_trace}


HOST_TESTS = ["swap", "ext4", "conformance"]
GUEST_TESTS = ["ublk_fio", "ublk_ext4", "ublk_swap", "ublk_hotplug",
               "ublk_busy", "ublk_reset_race", "ublk_crash", "ublk_stall"]


def run_one(name, ztier, guest, results_dir, via_nbd):
    """Runs test `name`; True when it passed."""
    tmp = tempfile.mkdtemp(prefix="ztier-kt-")
    try:
        table = tests(tmp)
        in_guest = guest_tests()
        server = None
        if name in table:
            flags, variables, mem = table[name]
            smp = 1
            server = Server(ztier, tmp, flags)
            if not server.alive():
                print("kernel_tests: %s: ztier serve did not start:\n%s" %
                      (name, server.stop()))
                return False
            variables = dict(variables, PORT=str(server.port))
            where = "ztier on 127.0.0.1:%d" % server.port
        elif name in in_guest:
            variables, mem, smp = in_guest[name]
            if via_nbd:
                variables = dict(variables, ZT_TRANSPORT="nbd")
            where = "ztier in the guest%s" % (" over NBD" if via_nbd else "")
        else:
            print("kernel_tests: unknown test '%s' (known: %s)" %
                  (name, ", ".join(list(table) + list(in_guest))))
            return False
        script = "".join("%s='%s'\n" % kv for kv in sorted(variables.items()))
        script += open(os.path.join(HERE, "tests", name + ".sh")).read()
        start = time.time()
        print("== %s (guest %d MiB, %d vCPU, %s)" % (name, mem, smp, where),
              flush=True)
        g = run_guest(guest, script, ztier=ztier if server else None,
                      ctl=server.ctl if server else None,
                      mem_mib=mem, timeout=900, echo=True, smp=smp)
        if not g.lines("@@BOOTED ") and server is None:
            # The guest kernel died before userspace (6.12 under TCG with 2
            # vCPUs has panicked in its early boot: an int3 in
            # sched_clock_cpu while patching text): nothing of ztier ran,
            # so boot once more.
            print("== %s: the guest did not boot; booting it once more" %
                  name, flush=True)
            g = run_guest(guest, script, ztier=None, ctl=None, mem_mib=mem,
                          timeout=900, echo=True, smp=smp)
        log = server.stop() if server else None
        secs = time.time() - start
        checks = g.lines("@@CHECK ")
        bad = [c for c in checks if not c.startswith("ok ")]
        if server is not None and server.problem:
            print("@@CHECK FAIL " + server.problem)
            bad.append(server.problem)
        if name in JUDGES:
            judged = JUDGES[name](g, results_dir)
            for failure in judged:
                print("@@CHECK FAIL " + failure)
            bad += judged
            checks = checks or ["ok compared"]
        with open(os.path.join(results_dir, name + ".txt"), "w") as f:
            f.write("\n".join(g.lines("@@RESULT ")) + "\n")
        ok = g.status == 0 and not bad and checks
        if log is not None:
            print("-- ztier serve's log:\n" + log.rstrip())
        if ok:
            print("== %s: passed, %d checks, %.0f s" % (name, len(checks), secs))
            return True
        why = g.why or ("%d failed checks" % len(bad) if bad else
                        "exit status %d" % g.status if g.status else
                        "no checks ran")
        print("== %s: FAILED (%s), %.0f s" % (name, why, secs))
        return False
    finally:
        subprocess.run(["rm", "-rf", tmp])


def main():
    args = sys.argv[1:]
    ztier = guest = None
    via_nbd = "--via-nbd" in args
    if via_nbd:
        args.remove("--via-nbd")
    if "--ztier" in args:
        i = args.index("--ztier")
        ztier = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if "--guest" in args:
        i = args.index("--guest")
        guest = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if not ztier or not guest:
        sys.exit(__doc__)
    # --ztier: opt.img, with ztier and fio, for the tests that run them in
    # the guest.
    r = subprocess.run([sys.executable, os.path.join(HERE, "build_guest.py"),
                        guest, "--ztier", ztier])
    if r.returncode != 0:
        print("kernel_tests: could not build the guest")
        print("0 passed, 1 failed")
        return 1
    results_dir = os.path.join(guest, "results")
    os.makedirs(results_dir, exist_ok=True)
    passed, failed = 0, []
    for name in args or HOST_TESTS + GUEST_TESTS:
        if run_one(name, ztier, guest, results_dir, via_nbd):
            passed += 1
        else:
            failed.append(name)
    if failed:
        print("failed: " + " ".join(failed))
    print("%d passed, %d failed" % (passed, len(failed)))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
