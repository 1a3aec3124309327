#!/usr/bin/env python3
"""The fusekit CLI on bad input: every bad option is refused by name with a non-zero exit before any
work (no uncaught exception, no signal), and a valid command that needs no GPU still runs; and
`fusekit version` (or --version) names the build without a GPU.

usage: cli_test.py PATH_TO_fusekit
"""
import re
import subprocess
import sys
import unittest

FUSEKIT = None


def run(*args):
    done = subprocess.run([FUSEKIT, *args], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


class BadInput(unittest.TestCase):
    def refused(self, args, names):
        code, out = run(*args)
        with self.subTest(args=args):
            self.assertGreater(code, 0, out)  # an exit code, not a signal (negative) or success
            self.assertNotIn("terminate called", out)
            self.assertIn(names, out)

    def test_extents_out_of_range_are_refused_by_name(self):
        self.refused(["bench", "linear", "--m", "0"], "--m")
        self.refused(["bench", "layernorm", "--rows", "-5", "--cols", "4096"], "--rows")
        self.refused(["bench", "attention", "--seqlen", "0"], "--seqlen")
        self.refused(["explain", "linear", "--m", "99999999999999999999"], "--m")
        self.refused(["explain", "layernorm", "--rows", "3", "--cols", str(2**30 + 1)], "--cols")
        self.refused(["verify", "rmsnorm", "--cols", "-1"], "--cols")

    def test_other_options_are_refused_by_name(self):
        self.refused(["bench", "layernorm", "--runs", "0"], "--runs")
        self.refused(["bench", "layernorm", "--dtype", "int4"], "--dtype")
        self.refused(["bench", "layernorm", "--sms", "0"], "--sms")
        self.refused(["bench", "softmax", "--sms", "-3"], "--sms")
        self.refused(["bench", "softmax", "--sms", "96", "--sms-scope", "all"], "--sms-scope")
        self.refused(["bench", "softmax", "--sms-scope", "partition"], "--sms-scope")  # needs --sms

    def test_a_valid_command_without_a_gpu_runs(self):
        code, out = run("explain", "layernorm", "--rows", "3", "--cols", "5")
        self.assertEqual(code, 0, out)


class Version(unittest.TestCase):
    LINE = re.compile(r"fusekit [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\), "
                      r"CUDA [0-9]+\.[0-9]+, machine code sm_[0-9]+a?(, sm_[0-9]+a?)*\n")

    def test_names_the_build_without_a_gpu(self):
        code, out = run("version")
        self.assertEqual(code, 0, out)
        self.assertTrue(self.LINE.fullmatch(out), out)

    def test_the_flag_prints_the_same_line(self):
        self.assertEqual(run("--version"), run("version"))


if __name__ == "__main__":
    FUSEKIT = sys.argv.pop(1)
    unittest.main()
