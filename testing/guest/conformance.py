"""The comparison behind kernel_tests.py's conformance test.

tests/conformance.sh prints, for each step and side (the guest kernel's zram,
ztier), "@@CONF <step> <side> <status> <output>". Here every step's status
(0 or the errno) must be the same on both sides, and so must its output:
field by field for the stat attributes (every field either side prints),
as text otherwise. A difference is
allowed only where KNOWN_DIFFERENCES lists it with its reason; any other
fails the test. table() writes the result as Markdown (docs/conformance.md).
"""
import fnmatch

STAT_FIELDS = {
    "mm_stat": ["orig_data_size", "compr_data_size", "mem_used_total",
                "mem_limit", "mem_used_max", "same_pages", "pages_compacted",
                "huge_pages", "huge_pages_since"],
    "io_stat": ["failed_reads", "failed_writes", "invalid_io", "notify_free"],
    "bd_stat": ["bd_count", "bd_reads", "bd_writes"],
}

# (step pattern, field or "status" or "output") -> (why ztier differs there,
# how far it may differ: for a number ("abs", n) or ("rel", fraction); for
# an output ("without", WORD): the same once ztier's WORD is left out; for a
# status or an output ("exact", KERNEL, ZTIER): those two, as
# docs/conformance.md's table of differences says; None for any value of a
# field both sides print).
LZ4_WHY = ("Linux's lib/lz4 and Debian's liblz4 1.9.4 compress some pages to "
           "a few bytes more or less; so one page may fall on the other side "
           "of the huge-page size")
LATER_WB_WHY = ("ztier's writeback takes the tokens of later kernels' "
                "writeback_store() (several tokens, page_indexes=LO-HI, ERANGE "
                "for an index past the end); 6.12 takes one page_index= and "
                "answers EINVAL for the rest")
KNOWN_DIFFERENCES = {
    ("*mm_stat", "mem_used_total"):
        ("the pools differ: zsmalloc's zspages against ztier's pool "
         "(docs/benchmarks.md compares their memory)", None),
    ("*mm_stat", "mem_used_max"):
        ("the peak of mem_used_total, which differs for the same reason", None),
    ("*mm_stat", "pages_compacted"):
        ("what compaction moves depends on the pool's layout", None),
    ("*mm_stat", "compr_data_size"): (LZ4_WHY, ("rel", 0.001)),
    ("*mm_stat", "huge_pages"): (LZ4_WHY, ("abs", 2)),
    ("*mm_stat", "huge_pages_since"): (LZ4_WHY, ("abs", 2)),
    ("wb.huge*bd_stat", "bd_count"): (LZ4_WHY, ("abs", 2)),
    ("wb.huge*bd_stat", "bd_writes"): (LZ4_WHY, ("abs", 2)),
    ("limited.bd_stat", "bd_count"): (LZ4_WHY, ("abs", 2)),
    ("limited.bd_stat", "bd_writes"): (LZ4_WHY, ("abs", 2)),
    ("list.comp_algorithm", "output"):
        ("Debian's 6.12 is built without CONFIG_ZRAM_BACKEND_LZO; ztier always "
         "has lzo", ("without", "lzo")),
    ("read.comp_algorithm", "output"):
        ("Debian's 6.12 is built without CONFIG_ZRAM_BACKEND_LZO; ztier always "
         "has lzo", ("without", "lzo")),
    ("bad.algorithm_params", "status"):
        ("6.12 ignores a key it does not know; ztier refuses it (EINVAL), so "
         "that a typo is not taken silently", ("exact", "0", "EINVAL")),
    ("bad.writeback?page_index=99999999?", "status"):
        (LATER_WB_WHY, ("exact", "EINVAL", "ERANGE")),
    ("bad.writeback?page_indexes=5-3?", "status"):
        (LATER_WB_WHY, ("exact", "EINVAL", "ERANGE")),
    ("later.writeback*", "status"): (LATER_WB_WHY, ("exact", "EINVAL", "0")),
    ("trailing.disksize", "status"):
        ("6.12's memparse() reads the number and ignores what follows, so "
         "'12Q' makes a 4 KiB device; ztier refuses a malformed size (EINVAL)",
         ("exact", "0", "EINVAL")),
    ("trailing.read_disksize", "output"):
        ("follows from trailing.disksize", ("exact", "4096", "0")),
}

# Steps that must succeed on both sides (the data written, trimmed and read
# back): the same failure on both is no agreement.
MUST_SUCCEED = ["*.data", "trim.*", "read.past_end"]


def _within(a, b, tol):
    if tol is None:
        return True
    kind, amount = tol[0], tol[1]
    if kind == "without":
        return a.split() == [w for w in b.split() if w != amount]
    if kind == "exact":
        return (a, b) == (tol[1], tol[2])
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if kind == "abs":
        return abs(x - y) <= amount
    return abs(x - y) <= amount * max(abs(x), abs(y))


def parse(lines):
    steps, order = {}, []
    for line in lines:
        parts = line.split(" ", 3)
        if len(parts) < 3:
            continue
        step, side, status = parts[0], parts[1], parts[2]
        out = parts[3] if len(parts) > 3 else ""
        if step not in steps:
            steps[step] = {}
            order.append(step)
        steps[step][side] = (status, out.strip(" |"))
    return order, steps


def _known(step, what, a, b):
    """The reason the difference of `a` (the kernel's) and `b` (ztier's) at
    (step, what) is allowed, or None."""
    for (pattern, field), (why, tol) in KNOWN_DIFFERENCES.items():
        if field == what and fnmatch.fnmatch(step, pattern):
            if _within(a, b, tol):
                return why
    return None


def _compare_fields(step, names, z, t):
    """Rows of a stat attribute's fields, `names` and any further field
    either side prints; a field only one side prints differs."""
    zf, tf = z.split(), t.split()
    rows = []
    for i in range(max(len(names), len(zf), len(tf))):
        name = names[i] if i < len(names) else "field %d" % (i + 1)
        a = zf[i] if i < len(zf) else "-"
        b = tf[i] if i < len(tf) else "-"
        if a == b:
            rows.append((step + " " + name, a, b, "same", ""))
            continue
        why = _known(step, name, a, b) if "-" not in (a, b) else None
        rows.append((step + " " + name, a, b,
                     "differs (listed)" if why else "DIFFERS",
                     why or ("printed by one side only"
                             if "-" in (a, b) else "")))
    return rows


def compare(order, steps):
    """Rows of (step, kernel, ztier, verdict, reason); verdict is "same",
    "differs (listed)" or "DIFFERS"."""
    rows = []
    for step in order:
        z = steps[step].get("zram", ("missing", ""))
        t = steps[step].get("ztier", ("missing", ""))
        attr = step.split(".")[-1]
        if (any(fnmatch.fnmatch(step, p) for p in MUST_SUCCEED) and
                (z[0], t[0]) != ("0", "0")):
            rows.append((step, z[0], t[0], "DIFFERS",
                         "must succeed on both sides"))
            continue
        if z[0] != t[0]:
            why = _known(step, "status", z[0], t[0])
            rows.append((step, z[0], t[0], "differs (listed)" if why else
                         "DIFFERS", why or "a different status"))
            continue
        if attr in STAT_FIELDS and z[0] == "0":
            rows += _compare_fields(step, STAT_FIELDS[attr], z[1], t[1])
            continue
        if z[1] == t[1]:
            rows.append((step, z[0] + (": " + z[1] if z[1] else ""),
                         t[0] + (": " + t[1] if t[1] else ""), "same", ""))
        else:
            why = _known(step, "output", z[1], t[1])
            rows.append((step, z[0] + ": " + z[1], t[0] + ": " + t[1],
                         "differs (listed)" if why else "DIFFERS", why or ""))
    return rows


def table(rows, kernel):
    out = ["| step (attribute) | kernel %s zram | ztier | | why |" % kernel,
           "|---|---|---|---|---|"]
    for step, a, b, verdict, why in rows:
        cell = lambda s: s.replace("|", "\\|") if s else ""
        out.append("| `%s` | %s | %s | %s | %s |" % (
            step, cell(a), cell(b), verdict, cell(why)))
    return "\n".join(out) + "\n"
