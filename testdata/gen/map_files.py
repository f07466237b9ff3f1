"""A process that maps real files as a page cache holds them, for
`ztier corpus capture --mappings file` (the files-mixed corpus).

Five groups of file pages: ELF executables directly in /usr/bin and ELF
shared libraries under /usr/lib/x86_64-linux-gnu, 16 MiB each; C headers
under /usr/include and Python sources under /usr/lib/python3*, 32 MiB each;
Perl modules under /usr/share/perl*, up to 24 MiB. With the interpreter's
own mappings, about a third is machine code and data, two thirds text. In
each group
the candidate files are sorted by path, files with identical contents are
kept once, and every k-th file is taken so that the group spreads over the
whole list; each file maps at most its first 64 pages. Every mapped page is
read once, so that it is present. Then prints "ready PID PAGES" and sleeps
until it is killed.
"""
import glob
import hashlib
import mmap
import os
import time

PAGE = 4096
ELF_PAGES = 16 << 20 >> 12
TEXT_PAGES = 32 << 20 >> 12
PERL_PAGES = 24 << 20 >> 12
FILE_PAGES = 64


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def regular(paths):
    out = []
    for p in sorted(set(paths)):
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        try:
            if os.path.getsize(p) == 0:
                continue
        except OSError:
            continue
        out.append(p)
    return out


def groups():
    bins = [p for p in regular(glob.glob("/usr/bin/*")) if is_elf(p)]
    libs = [p for p in regular(glob.glob("/usr/lib/x86_64-linux-gnu/**/*.so*",
                                         recursive=True)) if is_elf(p)]
    headers = regular(glob.glob("/usr/include/**/*.h", recursive=True))
    python = regular(glob.glob("/usr/lib/python3*/**/*.py", recursive=True))
    perl = regular(glob.glob("/usr/share/perl*/**/*.pm", recursive=True))
    return [(bins, ELF_PAGES), (libs, ELF_PAGES), (headers, TEXT_PAGES),
            (python, TEXT_PAGES), (perl, PERL_PAGES)]


def pages_of(path):
    size = os.path.getsize(path)
    return min(FILE_PAGES, (size + PAGE - 1) // PAGE)


maps = []
total = 0
for files, group_pages in groups():
    seen = set()
    unique = []
    for p in files:
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).digest()
        if digest not in seen:
            seen.add(digest)
            unique.append(p)
    want = sum(pages_of(p) for p in unique)
    step = max(1, want // group_pages)
    taken = 0
    for p in unique[::step]:
        if taken >= group_pages:
            break
        n = pages_of(p)
        with open(p, "rb") as f:
            m = mmap.mmap(f.fileno(), n * PAGE if n * PAGE <= os.path.getsize(p)
                          else 0, access=mmap.ACCESS_READ)
        for off in range(0, len(m), PAGE):
            m[off]
        maps.append(m)
        taken += n
    total += taken

print("ready", os.getpid(), total, flush=True)
while True:
    time.sleep(3600)
