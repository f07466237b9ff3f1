#!/usr/bin/env python3
"""tools/bench/nbd_idle_rss.py: a `ztier serve` process's resident memory
once clients that sent large requests have gone.

    tools/bench/nbd_idle_rss.py ZTIER [--rounds N] [--clients N]

Starts ZTIER serve with a 256 MiB zram0 on a Unix socket in a temporary
folder. Each round, --clients clients (default 20), one after the other,
each negotiate (NBD_OPT_GO), send 64 READs of 4 MiB without reading a
reply, and close. After each round and a second's rest, it prints the
server's VmRSS, threads and open files: with every client gone they should
come back to where they were, not grow round by round (src/nbd/connection.h,
"Memory"). The server is stopped at the end.
"""
import argparse
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

REQUEST_MAGIC = 0x25609513
OPT_MAGIC = b"IHAVEOPT"
OPT_GO = 7
REP_ACK = 1
CMD_READ = 0
EXPORT = b"zram0"


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data


def negotiate(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    recv_exact(s, 18)  # NBDMAGIC, IHAVEOPT, handshake flags
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    payload = struct.pack(">I", len(EXPORT)) + EXPORT + struct.pack(">H", 0)
    s.sendall(OPT_MAGIC + struct.pack(">II", OPT_GO, len(payload)) + payload)
    while True:
        _, _, reply, length = struct.unpack(">QIII", recv_exact(s, 20))
        recv_exact(s, length)
        if reply == REP_ACK:
            return s
        if reply & 0x80000000:
            raise RuntimeError("NBD_OPT_GO refused (%#x)" % reply)


def greedy_client(path):
    """64 READs of 4 MiB, none of whose replies is read."""
    s = negotiate(path)
    try:
        for i in range(64):
            offset = (i * (4 << 20)) % (200 << 20)
            s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ,
                                  random.getrandbits(64), offset, 4 << 20))
        time.sleep(0.02)
    finally:
        s.close()


def sample(pid):
    status = open("/proc/%d/status" % pid).read().splitlines()
    field = lambda name: next(l.split()[1] for l in status if l.startswith(name))
    return (int(field("VmRSS:")), int(field("Threads:")),
            len(os.listdir("/proc/%d/fd" % pid)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ztier")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nbd-idle-rss-") as tmp:
        path = os.path.join(tmp, "nbd.sock")
        server = subprocess.Popen(
            [args.ztier, "serve", "--device", "zram0:256M", "--unix", path,
             "--ctl", os.path.join(tmp, "ctl.sock")],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
        try:
            for _ in range(100):
                if os.path.exists(path) or server.poll() is not None:
                    break
                time.sleep(0.1)
            if not os.path.exists(path):
                sys.exit("%s: the server did not start; its log:\n%s" %
                         (sys.argv[0], open(os.path.join(tmp, "log")).read()))
            print("round  clients  VmRSS_kB  threads  fds")
            print("%5d  %7d  %8d  %7d  %3d" % ((0, 0) + sample(server.pid)))
            for r in range(1, args.rounds + 1):
                for _ in range(args.clients):
                    try:
                        greedy_client(path)
                    except (OSError, EOFError):
                        pass  # the server may close first: it is told to
                time.sleep(1)
                print("%5d  %7d  %8d  %7d  %3d" %
                      ((r, r * args.clients) + sample(server.pid)), flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
