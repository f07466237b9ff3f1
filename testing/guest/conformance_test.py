#!/usr/bin/python3
"""Test of the conformance comparison (conformance.py) and its judge
(kernel_tests.py's judge_conformance), on made-up @@CONF lines: what
docs/conformance.md says passes passes, and every other difference fails.
Run by CTest; needs no guest.

usage: conformance_test.py
"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conformance  # noqa: E402
from kernel_tests import judge_conformance  # noqa: E402
from run_guest import GuestResult  # noqa: E402

MM_STAT = "7340032 3412541 4980736 0 4980736 262144 0 411 411"


def verdicts(lines):
    """{row name: verdict} of the comparison of `lines` (@@CONF without the
    prefix)."""
    order, steps = conformance.parse(lines)
    return {r[0]: r[3] for r in conformance.compare(order, steps)}


def pair(step, kernel, ztier):
    """The @@CONF lines of one step: "STATUS OUTPUT" for each side."""
    return ["%s zram %s" % (step, kernel), "%s ztier %s" % (step, ztier)]


class CompareTest(unittest.TestCase):
    def test_the_same_output_is_the_same(self):
        v = verdicts(pair("read.disksize", "0 33554432", "0 33554432") +
                     pair("written.mm_stat", "0 " + MM_STAT, "0 " + MM_STAT))
        self.assertEqual(set(v.values()), {"same"}, v)

    def test_a_different_output_differs(self):
        v = verdicts(pair("read.disksize", "0 33554432", "0 33554433"))
        self.assertEqual(v["read.disksize"], "DIFFERS")

    def test_a_different_status_differs(self):
        v = verdicts(pair("busy.reset", "EBUSY", "0"))
        self.assertEqual(v["busy.reset"], "DIFFERS")

    def test_a_stat_field_differs_beyond_its_tolerance(self):
        ztier = MM_STAT.replace("3412541", "3500000", 1)
        v = verdicts(pair("written.mm_stat", "0 " + MM_STAT, "0 " + ztier))
        self.assertEqual(v["written.mm_stat compr_data_size"], "DIFFERS")
        ztier = MM_STAT.replace("3412541", "3411958", 1)
        v = verdicts(pair("written.mm_stat", "0 " + MM_STAT, "0 " + ztier))
        self.assertEqual(v["written.mm_stat compr_data_size"],
                         "differs (listed)")

    def test_a_stat_field_more_or_less_differs(self):
        v = verdicts(pair("written.mm_stat", "0 " + MM_STAT,
                          "0 " + MM_STAT + " 7"))
        self.assertIn("DIFFERS", v.values(), v)
        # A field of a listed difference (mem_used_total, any value) that
        # one side does not print at all.
        v = verdicts(pair("written.mm_stat", "0 " + MM_STAT,
                          "0 7340032 3412541"))
        self.assertEqual(v["written.mm_stat mem_used_total"], "DIFFERS")

    def test_a_listed_status_difference_passes_only_as_listed(self):
        # docs/conformance.md's table of differences: these pairs, no other.
        listed = [("bad.algorithm_params", "0", "EINVAL"),
                  ("bad.writeback[page_index=99999999]", "EINVAL", "ERANGE"),
                  ("bad.writeback[page_indexes=5-3]", "EINVAL", "ERANGE"),
                  ("later.writeback[page_indexes=2-10]", "EINVAL", "0"),
                  ("later.writeback[two_tokens]", "EINVAL", "0"),
                  ("trailing.disksize", "0", "EINVAL")]
        for step, kernel, ztier in listed:
            v = verdicts(pair(step, kernel, ztier))
            self.assertEqual(v[step], "differs (listed)", step)
            for other in ("EIO", "E?(ztier ctl: killed)"):
                v = verdicts(pair(step, kernel, other))
                self.assertEqual(v[step], "DIFFERS", (step, other))

    def test_a_missing_side_differs(self):
        v = verdicts(["later.writeback[two_tokens] zram EINVAL"])
        self.assertEqual(v["later.writeback[two_tokens]"], "DIFFERS")

    def test_the_data_must_be_written_on_both_sides(self):
        v = verdicts(pair("write.data", "1", "1"))
        self.assertEqual(v["write.data"], "DIFFERS")

    def test_the_lzo_listing_passes_only_with_lzo_added(self):
        kernel = "0 [lz4] lz4hc zstd deflate"
        v = verdicts(pair("list.comp_algorithm", kernel,
                          "0 lzo [lz4] lz4hc zstd deflate"))
        self.assertEqual(v["list.comp_algorithm"], "differs (listed)")
        v = verdicts(pair("list.comp_algorithm", kernel,
                          "0 lzo lz4 [lz4hc] zstd deflate"))
        self.assertEqual(v["list.comp_algorithm"], "DIFFERS")


class JudgeTest(unittest.TestCase):
    def judge(self, output):
        with tempfile.TemporaryDirectory() as results:
            return judge_conformance(GuestResult(0, output), results)

    def test_every_line_counted_passes(self):
        lines = ["@@BOOTED 6.12"] + ["@@CONF " + l for l in
                                     pair("read.disksize", "0 4096", "0 4096")]
        self.assertEqual(self.judge("\n".join(lines + ["@@CONF_DONE 2"])), [])

    def test_a_lost_line_fails(self):
        # The console mixed a kernel message into one step's lines, both of
        # them: the step is gone, though the sequence ran to its end.
        lines = ["@@CONF " + l for l in
                 pair("read.disksize", "0 4096", "0 4096")]
        self.assertNotEqual(self.judge("\n".join(lines + ["@@CONF_DONE 4"])),
                            [])

    def test_an_unfinished_sequence_fails(self):
        lines = ["@@CONF " + l for l in
                 pair("read.disksize", "0 4096", "0 4096")]
        self.assertNotEqual(self.judge("\n".join(lines)), [])


if __name__ == "__main__":
    unittest.main()
