#!/usr/bin/env python3
"""scripts/check-resources on synthetic ptxas reports: it passes a clean build and fails one with a
spill, with a stack frame (local memory) or with wgmma that ptxas serialized (each case a folder of
*.ptxas.log files).

usage: check_resources_test.py PATH_TO_check-resources
"""
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = None
KERNEL = "_Z6kernelv"


def report(arch, spill_bytes=0, serialized=False, stack_bytes=0):
    lines = [
        f"ptxas info    : Compiling entry function '{KERNEL}' for '{arch}'",
        f"ptxas info    : Function properties for {KERNEL}",
        f"    {stack_bytes} bytes stack frame, {spill_bytes} bytes spill stores, {spill_bytes} bytes spill loads",
        "ptxas info    : Used 168 registers, used 16 barriers",
    ]
    if serialized:
        lines.append(
            "ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized "
            f"due to program dependence on compiler-inserted WG.AR in divergent path in the function '{KERNEL}'")
    return "\n".join(lines) + "\n"


def run_on(sm90_report):
    with tempfile.TemporaryDirectory() as build:
        folder = pathlib.Path(build, "objects")
        folder.mkdir()
        (folder / "a.cu.o.ptxas.log").write_text(report("sm_80"))
        (folder / "b.cu.o.ptxas.log").write_text(sm90_report)
        return subprocess.run([sys.executable, SCRIPT, build], capture_output=True, text=True)


class CheckResources(unittest.TestCase):
    def test_a_clean_build_passes(self):
        result = run_on(report("sm_90a"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("0 with spills; 0 with a stack frame; 0 with serialized wgmma", result.stdout)

    def test_a_spill_fails(self):
        result = run_on(report("sm_90a", spill_bytes=8))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("SPILL: kernel() on sm_90a", result.stderr)

    def test_a_stack_frame_without_spills_fails(self):
        result = run_on(report("sm_90a", stack_bytes=8))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("STACK FRAME: kernel() on sm_90a: 8 B of local memory", result.stderr)

    def test_serialized_wgmma_fails(self):
        result = run_on(report("sm_90a", serialized=True))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("SERIALIZED WGMMA: kernel() on sm_90a", result.stderr)
        self.assertIn("WG.AR in divergent path", result.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    SCRIPT = sys.argv.pop(1)
    unittest.main()
