#!/usr/bin/python3
"""Assembles the test guest: a Debian 6.12 kernel and a busybox initramfs.

usage: build_guest.py OUT_DIR [--ztier PATH]

Writes OUT_DIR/vmlinuz and OUT_DIR/initrd.cpio.gz (and OUT_DIR/VERSION), all
from Debian packages that `apt-get download` fetches into OUT_DIR/debs:
- the newest linux-image-6.12.*-amd64-unsigned that apt offers, and the
  modules the tests need (nbd, zram, ublk_drv, ext4, crc32c, loop,
  virtio_net, virtio_blk, lz4, zstd, deflate
  and what they depend on, read from each module's .modinfo);
- busybox-static, for the shell and the tools;
- nbd-client and its libraries (libnl-3, libnl-genl-3; the rest come from
  this machine's Debian libraries, found with ldd);
- mke2fs from this machine's e2fsprogs, with its libraries;
- the workload programs of testing/guest/*.c, built static;
- with --ztier, OUT_DIR/opt.img: an ext4 image, attached read-only and
  mounted at /opt by /init, that holds the ztier binary and this machine's
  fio, with every library they load, for tests that run them inside the
  guest (/opt/bin/ztier, /opt/bin/fio). On an image, not in the initramfs:
  the initramfs lives in the guest's RAM, and fio's libraries alone are
  about 80 MiB.
A second run with the same kernel version reuses OUT_DIR/debs and downloads
nothing. The initramfs's /init (testing/guest/init.sh) mounts the usual
file systems, loads the modules, brings up the network (10.0.2.15, the host
as 10.0.2.2), runs /test.sh and powers off; run_guest.py adds /test.sh.
"""
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["nbd", "zram", "ublk_drv", "ext4", "virtio_net", "virtio_blk",
           "lz4_compress", "lz4hc_compress", "zstd_compress", "deflate", "lz4",
           "lz4hc", "zstd", "crc32c_generic", "loop"]
PACKAGES = ["busybox-static", "nbd-client", "libnl-3-200", "libnl-genl-3-200"]
KERNEL_RE = re.compile(r"^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$")


def die(msg):
    sys.exit("build_guest: " + msg)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def kernel_packages():
    out = subprocess.run(["apt-cache", "search", "--names-only",
                          r"^linux-image-6\.12\..*-amd64-unsigned$"],
                         text=True, capture_output=True).stdout
    return [l.split()[0] for l in out.splitlines()
            if l and KERNEL_RE.match(l.split()[0])]


def newest_kernel():
    names = kernel_packages()
    if not names:  # no package lists yet
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        names = kernel_packages()
    if not names:
        die("apt offers no linux-image-6.12.*-amd64-unsigned "
            "(is this Debian 12 with apt working?)")

    def key(n):
        return int(re.search(r"6\.12\.([0-9]+)", n).group(1))
    return max(names, key=key)


def download(debs_dir, packages):
    """Downloads what debs_dir lacks of `packages`; apt's error, or None."""
    os.makedirs(debs_dir, exist_ok=True)
    have = os.listdir(debs_dir)
    missing = [p for p in packages
               if not any(f.startswith(p.replace("+", "%2b") + "_") or
                          f.startswith(p + "_") for f in have)]
    if missing:
        r = subprocess.run(["apt-get", "download", "-q"] + missing,
                           cwd=debs_dir, text=True, capture_output=True)
        if r.returncode != 0:
            return "apt-get download %s failed:\n%s" % (" ".join(missing),
                                                        r.stderr)
    return None


def modinfo_depends(path):
    data = open(path, "rb").read()
    if path.endswith(".xz"):
        data = lzma.decompress(data)
    m = re.search(rb"depends=([^\0]*)\0", data)
    deps = m.group(1).decode().split(",") if m and m.group(1) else []
    return [d for d in deps if d], data


def resolve_modules(modroot):
    index = {}
    for dirpath, _, files in os.walk(os.path.join(modroot, "kernel")):
        for f in files:
            name = re.sub(r"\.ko(\.xz)?$", "", f)
            index[name.replace("-", "_")] = os.path.join(dirpath, f)
    builtin = set()
    with open(os.path.join(modroot, "modules.builtin")) as f:
        for line in f:
            builtin.add(os.path.basename(line.strip())[:-3].replace("-", "_"))
    order, blobs = [], {}

    def visit(name):
        name = name.replace("-", "_")
        if name in blobs or name in builtin:
            return
        if name not in index:
            die("module %s not found in the kernel package" % name)
        deps, data = modinfo_depends(index[name])
        blobs[name] = None  # visiting
        for d in deps:
            visit(d)
        blobs[name] = data
        order.append(name)
    for m in MODULES:
        visit(m)
    return order, blobs


def libs_of(binary, extra_lib_dirs):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(extra_lib_dirs)
    out = run(["ldd", binary], env=env).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s", line)
        if m:
            libs.append(m.group(1))
    return libs


class Cpio:
    """A newc cpio archive, written in memory."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.ino = 1000

    def _entry(self, name, mode, data=b"", nlink=1):
        self.ino += 1
        name_b = name.encode() + b"\0"
        hdr = "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x" % (
            self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0,
            len(name_b), 0)
        self.buf.write(hdr.encode() + name_b)
        self.buf.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * ((4 - len(data) % 4) % 4))

    def dir(self, name):
        self._entry(name, stat.S_IFDIR | 0o755, nlink=2)

    def file(self, name, data, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def close(self):
        self._entry("TRAILER!!!", 0)
        return self.buf.getvalue()


def build_opt(out, ztier):
    """OUT_DIR/opt.img: ztier and fio with their libraries, each program
    behind a wrapper in bin/ that runs it with /opt/lib first."""
    fio = shutil.which("fio")
    if not fio:
        die("fio not found (make test installs it)")
    img = os.path.join(out, "opt.img")
    if (os.path.exists(img) and
            os.path.getmtime(img) >= max(os.path.getmtime(ztier),
                                         os.path.getmtime(fio))):
        return
    tree = os.path.join(out, "opt")
    shutil.rmtree(tree, ignore_errors=True)
    for d in ("bin", "libexec", "lib"):
        os.makedirs(os.path.join(tree, d))
    for src, name in ((ztier, "ztier"), (fio, "fio")):
        shutil.copy(src, os.path.join(tree, "libexec", name))
        wrapper = os.path.join(tree, "bin", name)
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nLD_LIBRARY_PATH=/opt/lib exec /opt/libexec/%s "
                    "\"$@\"\n" % name)
        os.chmod(wrapper, 0o755)
        for lib in libs_of(src, []):
            dst = os.path.join(tree, "lib", os.path.basename(lib))
            if not os.path.exists(dst):
                shutil.copy(os.path.realpath(lib), dst)
    size_mib = 64 + sum(os.path.getsize(os.path.join(d, f))
                        for d, _, fs in os.walk(tree) for f in fs) // 2**20 * 5 // 4
    if os.path.exists(img):
        os.unlink(img)
    run(["mke2fs", "-q", "-t", "ext4", "-d", tree, "-L", "opt", img,
         "%dM" % size_mib])
    shutil.rmtree(tree)


def build(out, ztier):
    kernel_pkg = newest_kernel()
    debs = os.path.join(out, "debs")
    stamp = os.path.join(out, "VERSION")
    if ztier:
        build_opt(out, ztier)
    sources = [os.path.join(HERE, f) for f in sorted(os.listdir(HERE))]
    version = re.search(r"linux-image-(.*)-unsigned", kernel_pkg).group(1)
    if (os.path.exists(stamp) and open(stamp).read().strip() == version and
            os.path.exists(os.path.join(out, "initrd.cpio.gz")) and
            all(os.path.getmtime(s) <= os.path.getmtime(stamp)
                for s in sources)):
        print("build_guest: guest for %s is up to date in %s" % (version, out))
        return
    error = download(debs, [kernel_pkg] + PACKAGES)
    if error:
        # Package lists older than the archive (a security update replaced
        # the kernel they name): refreshed, and the newest kernel again.
        print("build_guest: %s\nbuild_guest: apt-get update, then again" % error)
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        kernel_pkg = newest_kernel()
        version = re.search(r"linux-image-(.*)-unsigned", kernel_pkg).group(1)
        error = download(debs, [kernel_pkg] + PACKAGES)
        if error:
            die(error)
    root = os.path.join(out, "root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for f in sorted(os.listdir(debs)):
        if f.startswith("linux-image-") and not f.startswith(kernel_pkg + "_"):
            continue  # an older kernel's package
        run(["dpkg-deb", "-x", os.path.join(debs, f), root])
    shutil.copy(os.path.join(root, "boot", "vmlinuz-" + version),
                os.path.join(out, "vmlinuz"))
    modroot = os.path.join(root, "lib", "modules", version)
    order, blobs = resolve_modules(modroot)

    c = Cpio()
    for d in ["bin", "sbin", "dev", "proc", "sys", "tmp", "mnt", "etc", "lib",
              "lib64", "lib/modules", "usr", "usr/bin", "run", "work"]:
        c.dir(d)
    c.file("bin/busybox", open(os.path.join(root, "bin", "busybox"), "rb").read(),
           0o755)
    c.file("init", open(os.path.join(HERE, "init.sh"), "rb").read(), 0o755)
    for name in order:
        c.file("lib/modules/%s.ko" % name, blobs[name])
    c.file("etc/modules", ("\n".join(order) + "\n").encode())
    lib_dirs = [os.path.join(root, "lib", "x86_64-linux-gnu"),
                os.path.join(root, "usr", "lib", "x86_64-linux-gnu")]
    binaries = [(os.path.join(root, "sbin", "nbd-client"), "sbin/nbd-client")]
    mke2fs = shutil.which("mke2fs") or "/sbin/mke2fs"
    if not os.path.exists(mke2fs):
        die("mke2fs not found (install e2fsprogs)")
    binaries.append((mke2fs, "sbin/mke2fs"))
    libs = {}
    for src, dst in binaries:
        c.file(dst, open(src, "rb").read(), 0o755)
        # lib_dirs: nbd-client's libnl libraries come from their packages,
        # not from this machine.
        for lib in libs_of(src, lib_dirs):
            libs[lib] = True
    made = {"lib", "lib64"}
    for lib in sorted(libs):
        real = os.path.realpath(lib)
        if lib.startswith(root + "/"):  # from an extracted package
            lib = lib[len(root):]
        dst = lib.lstrip("/")
        if dst.startswith("usr/lib/"):
            dst = "lib/" + dst[len("usr/lib/"):]
        parent = os.path.dirname(dst)
        if parent not in made:
            c.dir(parent)
            made.add(parent)
        c.file(dst, open(real, "rb").read(), 0o755)
    for tool in ["mkfs.ext4", "mkfs.ext2"]:
        c.symlink("sbin/" + tool, "mke2fs")
    # The workload programs, static.
    for f in sorted(os.listdir(HERE)):
        if f.endswith(".c"):
            exe = os.path.join(out, f[:-2])
            r = subprocess.run(["gcc", "-O2", "-static", "-Wall", "-o", exe,
                                os.path.join(HERE, f)],
                               text=True, capture_output=True)
            if r.returncode != 0:
                die("gcc %s:\n%s" % (f, r.stderr))
            c.file("bin/" + f[:-2], open(exe, "rb").read(), 0o755)
    with gzip.open(os.path.join(out, "initrd.cpio.gz"), "wb", 6) as g:
        g.write(c.close())
    shutil.rmtree(root)
    with open(stamp, "w") as f:
        f.write(version + "\n")
    print("build_guest: %s, %d modules, in %s" % (version, len(order), out))


def main():
    args = sys.argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return
    ztier = None
    if "--ztier" in args:
        i = args.index("--ztier")
        ztier = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    out = os.path.abspath(args[0])
    os.makedirs(out, exist_ok=True)
    build(out, ztier)


if __name__ == "__main__":
    main()
