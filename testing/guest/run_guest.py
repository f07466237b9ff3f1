#!/usr/bin/python3
"""Runs a shell script inside the test guest and returns its output and status.

As a module: run_guest(guest_dir, script, ...) -> GuestResult. As a command:

  run_guest.py GUEST_DIR SCRIPT [--ctl SOCK] [--ztier BIN] [--mem MIB]
               [--smp N] [--cpu MODEL] [--timeout SECONDS]

The guest (build_guest.py) boots under qemu-system-x86_64 with software
emulation (TCG: this machine's /dev/kvm is not one a stock kernel runs on),
N vCPUs (default 1), MIB of RAM (default 256) and qemu's user-mode network,
where the host's loopback is 10.0.2.2. The CPU is qemu's "max" model without
ERMS and FSRM (GUEST_CPU, --cpu to change it): TCG runs `rep movsb` and
`rep stosb` one byte per step, which CPUs with those features run at the
speed of wide stores, and with them glibc takes that path for every memset
and memcpy over 2 KiB (liblz4 clears its 16 KiB state that way for each page
it compresses) and the kernel for copies to and from user memory, so under
emulation they cost more than the work around them. GUEST_DIR/opt.img, when
build_guest.py made one (--ztier), is attached read-only as /dev/vda and
mounted at /opt: ztier and fio run inside the guest from /opt/bin. SCRIPT
becomes /test.sh, with lib.sh beside it as /lib.sh; its console output comes
back line by line.

The guest's second serial port (/dev/ttyS1) is a channel to the host: lib.sh's
`host ARGS...` writes ARGS as one line, and the host answers with the output
of `ztier ARGS` (run with --ctl SOCK added after `ctl` and `status`, and only
for the subcommands ctl and status) and a last line "@@RC <status>". A
script asks the host for ztier's own view this way (mm_stat, writeback)
while it drives the device from the guest.

If qemu cannot start, or the guest does not print "@@EXIT <status>" within
the timeout, the result says why and its status is not 0.
"""
import os
import select
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build_guest import Cpio  # noqa: E402


class GuestResult:
    def __init__(self, status, output, why=""):
        self.status = status  # the script's exit status; -1 when it never ended
        self.output = output  # the console, script output included
        self.why = why        # why there is no status, if there is none

    def lines(self, prefix):
        return [l[len(prefix):].strip() for l in self.output.splitlines()
                if l.startswith(prefix)]


def _serve_channel(sock_path, ztier, ctl, stop, log):
    conn = None
    # qemu makes the socket as it starts, and runs the guest only once this
    # has connected (wait=on).
    while conn is None and not stop.is_set():
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(sock_path)
        except OSError:
            conn.close()
            conn = None
            time.sleep(0.05)
    if conn is None:
        return
    buf = b""
    while not stop.is_set():
        r, _, _ = select.select([conn], [], [], 0.2)
        if not r:
            continue
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            words = shlex.split(line.decode(errors="replace").strip("\r"))
            if not words:
                continue
            if words[0] not in ("ctl", "status") or ztier is None:
                out, rc = "host: refused: %s\n" % " ".join(words), 127
            else:
                cmd = [ztier, words[0]] + (["--ctl", ctl] if ctl else []) + words[1:]
                p = subprocess.run(cmd, text=True, capture_output=True)
                out, rc = p.stdout + p.stderr, p.returncode
            log.append("host> %s -> %d" % (" ".join(words), rc))
            if out and not out.endswith("\n"):
                out += "\n"
            conn.sendall((out + "@@RC %d\n" % rc).encode())


# qemu's -cpu for every guest (the module comment says why).
GUEST_CPU = "max,-erms,-fsrm"


def run_guest(guest_dir, script, ztier=None, ctl=None, mem_mib=256,
              timeout=600, echo=False, files=(), smp=1, cpu=GUEST_CPU):
    """Boots the guest with `script` (text) as /test.sh; `files` adds
    (guest_path, bytes) pairs to the initramfs."""
    for f in ("vmlinuz", "initrd.cpio.gz"):
        if not os.path.exists(os.path.join(guest_dir, f)):
            return GuestResult(-1, "", "no %s in %s: run build_guest.py first"
                               % (f, guest_dir))
    qemu = "qemu-system-x86_64"
    tmp = tempfile.mkdtemp(prefix="ztier-guest.")
    extra = Cpio()
    extra.file("test.sh", script.encode(), 0o755)
    extra.file("lib.sh", open(os.path.join(HERE, "lib.sh"), "rb").read(), 0o644)
    for path, data in files:
        extra.file(path.lstrip("/"), data, 0o755)
    initrd = os.path.join(tmp, "initrd")
    with open(initrd, "wb") as f:
        f.write(open(os.path.join(guest_dir, "initrd.cpio.gz"), "rb").read())
        import gzip
        f.write(gzip.compress(extra.close(), 1))
    chan = os.path.join(tmp, "chan.sock")
    cmd = [qemu, "-accel", "tcg", "-cpu", cpu, "-smp", str(smp),
           "-m", str(mem_mib), "-kernel", os.path.join(guest_dir, "vmlinuz"),
           "-initrd", initrd,
           # rootfstype=ramfs: the initramfs is not swappable, so what
           # swap holds is the tests' own memory.
           "-append", "console=ttyS0 panic=-1 quiet loglevel=4 "
                      "rootfstype=ramfs mitigations=off",
           "-display", "none", "-monitor", "none", "-no-reboot",
           "-serial", "stdio",
           # wait=on: qemu starts the guest once the host's end of the
           # channel is connected; with wait=off it would drop what the
           # guest wrote before that, and the guest would wait for an
           # answer until the timeout.
           "-serial", "unix:%s,server=on,wait=on" % chan,
           "-nic", "user,model=virtio-net-pci"]
    opt = os.path.join(guest_dir, "opt.img")
    if os.path.exists(opt):
        cmd += ["-drive", "file=%s,if=virtio,format=raw,readonly=on" % opt]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except OSError as e:
        return GuestResult(-1, "", "cannot start %s: %s (make test-kernel "
                           "installs qemu-system-x86)" % (qemu, e))
    stop = threading.Event()
    log = []
    chan_thread = threading.Thread(target=_serve_channel,
                                   args=(chan, ztier, ctl, stop, log),
                                   daemon=True)
    chan_thread.start()
    out = []
    status, why = -1, ""
    deadline = time.time() + timeout
    try:
        fd = proc.stdout.fileno()
        pending = b""
        while True:
            left = deadline - time.time()
            if left <= 0:
                why = "the guest did not finish within %d s" % timeout
                break
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not r:
                continue
            data = os.read(fd, 65536)
            if not data:
                why = why or "qemu exited (status %s) before the script ended" % (
                    proc.poll())
                break
            pending += data
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                line = raw.decode(errors="replace").rstrip("\r")
                out.append(line)
                if echo:
                    print(line, flush=True)
                if line.startswith("@@EXIT "):
                    status = int(line.split()[1])
            if status != -1:
                why = ""
                break
    finally:
        stop.set()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(out + log)
    if status == -1 and not any(l.startswith("@@BOOTED") for l in out):
        why += "; the guest never booted (qemu's output above)"
    return GuestResult(status, text, why)


def main():
    args = sys.argv[1:]
    opts = {"--ctl": None, "--ztier": None, "--mem": "256", "--smp": "1",
            "--cpu": GUEST_CPU, "--timeout": "600"}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    r = run_guest(args[0], open(args[1]).read(), ztier=opts["--ztier"],
                  ctl=opts["--ctl"], mem_mib=int(opts["--mem"]),
                  timeout=int(opts["--timeout"]), echo=True,
                  smp=int(opts["--smp"]), cpu=opts["--cpu"])
    if r.why:
        print("run_guest: " + r.why, file=sys.stderr)
    sys.exit(r.status if r.status >= 0 else 1)


if __name__ == "__main__":
    main()
