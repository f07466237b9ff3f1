#!/usr/bin/python3
"""The README and `ztier ... --help` say the same things.

For every command `ztier --help` lists (and every `ztier bench` experiment
and `ztier corpus` subcommand), its usage line, as --help prints it, must be
in README.md (whitespace may differ: the README wraps it), and every flag
its --help lists must be named in README.md. The README names no path
outside the repository.

usage: help_readme_test.py ZTIER_BINARY README.md
"""
import re
import subprocess
import sys


def run_help(ztier, words):
    out = subprocess.run([ztier] + words + ["--help"], capture_output=True,
                         text=True, check=True).stdout
    return out


def commands(ztier, words):
    text = run_help(ztier, words)
    block = text.split("commands:", 1)[1] if "commands:" in text else ""
    names = []
    for line in block.splitlines():
        if not line.startswith("  "):
            if names:
                break
            continue
        m = re.match(r"\s+([a-z][a-z-]*)\s", line)
        if m and m.group(1) != "help":
            names.append(m.group(1))
    return names


def squash(s):
    return " ".join(s.split())


def main():
    ztier, readme_path = sys.argv[1], sys.argv[2]
    readme = open(readme_path, encoding="utf-8").read()
    flat = squash(readme)
    problems = []
    targets = []
    helps = {}  # command words -> the flags its --help lists
    for c in commands(ztier, []):
        subs = commands(ztier, [c]) if c in ("bench", "corpus") else []
        targets += [[c, s] for s in subs] or [[c]]
    for words in targets:
        text = run_help(ztier, words)
        usage = [l for l in text.splitlines() if l.startswith("usage: ")]
        if not usage:
            problems.append("%s --help has no usage line" % " ".join(words))
            continue
        line = squash(usage[0][len("usage: "):])
        if line not in flat:
            problems.append("README.md lacks the usage line of `%s`:\n    %s"
                            % (" ".join(words), line))
        # A flag's line: "  -o, --output FILE  ..." or "  --quiet  -q: ...".
        lines = re.findall(r"^\s+((?:-\w, )?(--[a-z][a-z0-9-]*).*)$", text,
                           re.M)
        short = {flag: re.findall(r"(?<![\w-])(-\w)(?![\w-])", line)
                 for line, flag in lines}
        flags = set(short)
        helps[" ".join(words)] = flags
        for flag in sorted(flags):
            if flag in ("--help",):
                continue
            if not re.search(re.escape(flag) + r"(?![a-z0-9-])", readme):
                problems.append("README.md does not name `%s %s`"
                                % (" ".join(words), flag))
            names = [flag] + short[flag]
            if not any(re.search(re.escape(n) + r"(?![a-z0-9-])", usage[0])
                       for n in names):
                problems.append("the usage line of `%s` lacks %s"
                                % (" ".join(words), flag))
    # Every flag a README command line gives is one its command takes.
    for line in re.findall(r"^\s*(?:sudo )?(?:build/|\./build/)?ztier "
                           r"([^\n]*)", readme, re.M):
        words = line.split()
        name = next((n for n in sorted(helps, key=len, reverse=True)
                     if words[:len(n.split())] == n.split()), None)
        if name is None:
            continue
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line):
            if flag not in helps[name] | {"--help"}:
                problems.append("README.md runs `ztier %s` with %s, which "
                                "it does not take" % (name, flag))
    for m in re.finditer(r"\.\./shared|/work/", readme):
        problems.append("README.md names a path outside the repository: %s"
                        % readme[max(0, m.start() - 20):m.end() + 20])
    for p in problems:
        print(p)
    print("%d command(s) checked, %d problem(s)" % (len(targets), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
