#!/usr/bin/env python3
"""Do two `make bench` runs agree? Compares every median of one run's JSON
results with the other's spread.

  tools/bench/compare_runs.py [--all] [--tolerance PCT] FIRST_RESULTS_DIR SECOND_RESULTS_DIR

Each directory holds the NAME.json files of one `make bench` (its
BENCH_RESULTS). In every experiment present in both, each figure (the keys
X_median, X_min and X_max of an object: the one shape in which every
experiment writes a figure, tools/ztier/bench_stats.h) is found in both runs
by its place in the document; list items are matched by their identifying fields (the string,
integer and boolean values beside the figures: codec, corpus, job, threads,
...). A figure agrees when either run's median lies within the other's
[min, max]: the second run's median is inside the first's spread, or the
other way round. A result written as a single number (a Number cell of
tools/ztier/bench_report.h: a size, a ratio of one run's medians; an
integer result such as a page count) has no spread: it agrees when the
two are within PCT percent of each other (--tolerance, default 5). The
conditions of a run ("machine", "conditions": the cross-CPU round trip)
are not compared.

Prints, per experiment, how many figures agree and how far apart the two
medians are (median, 90th percentile and largest relative difference),
then the five figures that disagree most (--all: every one), with both
runs' median (min-max). Where the results record the conditions of their
runs (the machine's cross-CPU round trip; bench engine's per-case
tables "CODEC CORPUS conditions"), it prints them too, and how many figures agree among the
cases that ran in the same vCPU placement in both runs and among the
others.
Exit status: 0 (a report, agreeing or not); 2 bad usage or unreadable input.
"""

import json
import math
import os
import statistics
import sys


# Keys whose figures describe the conditions of a run, not its results:
# the machine (cross_cpu_rtt_ns) and what an experiment measured of it
# during its runs.
CONDITION_KEYS = {"machine", "conditions"}


def is_condition(key):
    """A key whose figures are conditions: those above, and bench engine's
    per-case tables "CODEC CORPUS conditions"."""
    return key in CONDITION_KEYS or key.endswith(" conditions")

# Integer fields that name a measurement (the others are results).
ID_INTS = {"threads", "batch", "iodepth", "block_size", "cpus", "workers",
           "page_cluster", "pages", "run"}

# Text fields that state a result, so they do not identify a row: whether
# a target was met (a verdict that flips between runs is the same row), a
# share of the ideal ("87%"), a change between variants ("+3.12%"), the
# kernel's and ztier's huge and same page counts ("91/91").
VERDICT_KEYS = {"met", "of_ideal", "change", "huge_k_z", "same_k_z"}


def identity(item):
    """The identifying fields of a list item, as a sorted tuple."""
    if not isinstance(item, dict):
        return None
    keys = []
    for k, v in item.items():
        if k in VERDICT_KEYS:
            continue
        if isinstance(v, bool) or isinstance(v, str):
            keys.append((k, v))
        elif isinstance(v, int) and k in ID_INTS:
            keys.append((k, v))
    return tuple(sorted(keys))


def walk(node, path, visit):
    """Calls visit(obj, path) on every object under node, with its path:
    object keys, and for list items their identity (identity()) and how
    many items before them had the same one. Conditions are not entered."""
    if isinstance(node, dict):
        visit(node, path)
        for k, v in node.items():
            if isinstance(v, (dict, list)) and not is_condition(k):
                walk(v, path + (k,), visit)
    elif isinstance(node, list):
        seen = {}
        for i, item in enumerate(node):
            ident = identity(item)
            key = ident if ident else ("#", i)
            n = seen.get(key, 0)
            seen[key] = n + 1
            walk(item, path + ((key, n),), visit)


def triplets(node, path, out):
    """Collects path -> (median, min, max) for every figure under node."""
    def visit(obj, at):
        for k, v in obj.items():
            if k.endswith("_median"):
                base = k[: -len("_median")]
                lo, hi = obj.get(base + "_min"), obj.get(base + "_max")
                if all(isinstance(x, (int, float)) and not isinstance(x, bool)
                       for x in (v, lo, hi)):
                    out[at + (base,)] = (v, lo, hi)
    walk(node, path, visit)


FIGURE_SUFFIXES = ("_median", "_min", "_max", "_stddev", "_cv")


def numbers(node, path, out):
    """Collects path -> value for every single-number result under node: a
    number that is neither part of a figure (FIGURE_SUFFIXES) nor an
    identifying integer (ID_INTS)."""
    def visit(obj, at):
        for k, v in obj.items():
            if isinstance(v, bool) or k.endswith(FIGURE_SUFFIXES):
                continue
            if isinstance(v, float) or (isinstance(v, int) and
                                        k not in ID_INTS):
                out[at + (k,)] = v
    walk(node, path, visit)


def case_of(path):
    """The (codec, corpus) a figure's path names, or None: a list item's
    codec and corpus fields, or bench engine's table "CODEC CORPUS ..."."""
    for p in path:
        if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], tuple):
            d = dict(p[0])
            if "codec" in d and "corpus" in d:
                return (d["codec"], d["corpus"])
    if len(path) > 1 and path[0] == "tables" and isinstance(path[1], str):
        words = path[1].split(" ")
        if len(words) >= 2:
            return (words[0], words[1])
    return None


def case_conditions(doc):
    """(codec, corpus) -> the object of its conditions: an item of a list
    "conditions" with codec and corpus, or the row of bench engine's table
    "CODEC CORPUS conditions"."""
    c = {}
    for item in doc.get("conditions", []) or []:
        if isinstance(item, dict) and "codec" in item and "corpus" in item:
            c[(item["codec"], item["corpus"])] = item
    for name, rows in (doc.get("tables", {}) or {}).items():
        words = name.split(" ")
        if len(words) == 3 and words[2] == "conditions" and rows:
            c[(words[0], words[1])] = rows[0]
    return c


def condition_lines(docs, common, bad):
    """What the two runs saw of the machine, and whether the figures agree
    where they saw the same. Cases (codec, corpus) with a "conditions" entry
    count as run in the same vCPU placement when their median cross-CPU
    round trips are within a factor of 2 of each other."""
    lines = []
    rtts = [d.get("machine", {}).get("cross_cpu_rtt_ns") for d in docs]
    if all(isinstance(r, (int, float)) and r > 0 for r in rtts):
        lines.append(f"cross-CPU round trip at the start: {rtts[0]:.0f} vs "
                     f"{rtts[1]:.0f} ns")
    conds = [case_conditions(d) for d in docs]
    cases = [k for k in conds[0] if k in conds[1]]
    if not cases:
        return lines
    same = set()
    for k in cases:
        r = [conds[i][k].get("cross_cpu_rtt_ns_median") for i in (0, 1)]
        if all(isinstance(x, (int, float)) and x > 0 for x in r):
            if max(r) / min(r) < 2:
                same.add(k)
    counts = {True: [0, 0], False: [0, 0]}
    for p in common:
        k = case_of(p)
        if k is None or k not in cases:
            continue
        c = counts[k in same]
        c[0] += p not in bad
        c[1] += 1
    lines.append(
        f"cases run in the same vCPU placement in both runs (median cross-CPU "
        f"round trips within 2x): {len(same)} of {len(cases)}; their figures "
        f"agree {counts[True][0]} of {counts[True][1]}, the others' "
        f"{counts[False][0]} of {counts[False][1]}")
    return lines


def label(path):
    parts = []
    for p in path:
        if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], tuple):
            parts.append(" ".join(str(v) for _, v in p[0]))
        elif isinstance(p, tuple):
            parts.append(str(p[1]))
        else:
            parts.append(str(p))
    return " / ".join(x for x in parts if x)


def percentile(ascending, q):
    """The q-quantile by nearest rank, the rule of tools/ztier/bench_stats.h
    (PercentileIndex): the smallest value with at least q of them at or
    below it."""
    rank = math.ceil(q * len(ascending) - 1e-9)
    return ascending[min(max(rank, 1), len(ascending)) - 1]


def fmt(t):
    med, lo, hi = t
    return f"{med:.4g} ({lo:.4g}-{hi:.4g})"


def print_worst(apart, show_all, line, indent):
    """Prints line(difference, path) for the (difference, path) pairs in
    `apart`, largest difference first: all with show_all, else five and how
    many more there are."""
    worst = sorted(apart, key=lambda t: t[0], reverse=True)  # paths: no order
    for d, p in worst if show_all else worst[:5]:
        print(indent + line(d, p))
    if not show_all and len(worst) > 5:
        print(f"{indent}({len(worst) - 5} more; --all lists them)")


def main(argv):
    show_all = "--all" in argv
    argv = [a for a in argv if a != "--all"]
    tolerance = 5.0
    if "--tolerance" in argv:
        i = argv.index("--tolerance")
        try:
            tolerance = float(argv[i + 1])
        except (IndexError, ValueError):
            sys.stderr.write("--tolerance takes a percentage\n")
            return 2
        del argv[i:i + 2]
    if len(argv) != 3 or not all(os.path.isdir(d) for d in argv[1:]):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    first, second = argv[1], argv[2]
    names = sorted(
        n for n in os.listdir(first)
        if n.endswith(".json") and os.path.exists(os.path.join(second, n)))
    if not names:
        sys.stderr.write("no NAME.json in both directories\n")
        return 2
    total = agree_total = n_total = n_agree_total = 0
    for name in names:
        runs = []
        docs = []
        nums = []
        for d in (first, second):
            try:
                with open(os.path.join(d, name)) as f:
                    doc = json.load(f)
            except (OSError, ValueError) as e:
                sys.stderr.write(f"{d}/{name}: {e}\n")
                return 2
            figs = {}
            triplets(doc, (), figs)
            runs.append(figs)
            docs.append(doc)
            single = {}
            numbers(doc, (), single)
            nums.append(single)
        a, b = runs
        common = [p for p in a if p in b]
        bad = []
        for p in common:
            (m1, lo1, hi1), (m2, lo2, hi2) = a[p], b[p]
            if lo1 <= m2 <= hi1 or lo2 <= m1 <= hi2:
                continue
            apart = abs(m2 - m1) / abs(m1) * 100 if m1 else float("inf")
            bad.append((apart, p))
        agree = len(common) - len(bad)
        total += len(common)
        agree_total += agree
        apart = sorted(
            abs(b[p][0] - a[p][0]) / abs(a[p][0]) * 100 for p in common
            if a[p][0])
        spread = ""
        if apart:
            spread = (f"; medians apart: median {statistics.median(apart):.1f}%,"
                      f" 90th percentile {percentile(apart, 0.9):.1f}%,"
                      f" max {apart[-1]:.1f}%")
        print(f"{name[:-5]}: {agree} of {len(common)} medians agree{spread}")
        for line in condition_lines(docs, common, {p for _, p in bad}):
            print("  " + line)
        print_worst(bad, show_all, lambda d, p: f"{label(p)}: {fmt(a[p])} vs "
                    f"{fmt(b[p])}, medians {d:.1f}% apart", "  ")
        x, y = nums
        same = [p for p in x if p in y]
        apart_n = []
        for p in same:
            if x[p] == y[p]:
                continue
            d = (abs(y[p] - x[p]) / abs(x[p]) * 100 if x[p]
                 else float("inf"))
            if d > tolerance:
                apart_n.append((d, p))
        if same:
            print(f"  single numbers: {len(same) - len(apart_n)} of "
                  f"{len(same)} within {tolerance:g}%")
            print_worst(apart_n, show_all, lambda d, p: f"{label(p)}: "
                        f"{x[p]:.4g} vs {y[p]:.4g}, {d:.1f}% apart", "    ")
        n_total += len(same)
        n_agree_total += len(same) - len(apart_n)
    print(f"all: {agree_total} of {total} medians agree "
          f"({100.0 * agree_total / max(total, 1):.1f}%)")
    if n_total:
        print(f"all: {n_agree_total} of {n_total} single numbers within "
              f"{tolerance:g}% "
              f"({100.0 * n_agree_total / n_total:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
