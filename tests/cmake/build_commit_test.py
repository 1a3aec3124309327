#!/usr/bin/env python3
"""cmake/build_commit.cmake on throwaway git repositories: the header names HEAD's commit, adds
"-dirty" for an edited tracked file and not for an untracked one, says "unknown" outside git, and
is not rewritten when nothing changed (so a build relinks nothing).

usage: build_commit_test.py PATH_TO_build_commit.cmake CMAKE GIT
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

SCRIPT = CMAKE = GIT = None
DEFINE = re.compile(r'#define FUSEKIT_BUILD_COMMIT "([^"]*)"')


def git(repo, *args):
    return subprocess.run([GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_of(source, header):
    subprocess.run([CMAKE, f"-DSOURCE_DIR={source}", f"-DOUTPUT={header}", "-P", SCRIPT], check=True,
                   capture_output=True, text=True)
    match = DEFINE.search(header.read_text())
    assert match, header.read_text()
    return match.group(1)


class BuildCommit(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = pathlib.Path(self.dir.name)
        self.repo, self.header = root / "repo", root / "out" / "fusekit_build_commit.h"
        self.repo.mkdir()
        git(self.repo, "init", "-q")
        (self.repo / "a.txt").write_text("one\n")
        git(self.repo, "add", "a.txt")
        git(self.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")

    def tearDown(self):
        self.dir.cleanup()

    def test_names_heads_commit(self):
        self.assertEqual(commit_of(self.repo, self.header), git(self.repo, "rev-parse", "--short=12", "HEAD"))

    def test_an_edited_tracked_file_is_dirty(self):
        (self.repo / "a.txt").write_text("two\n")
        self.assertEqual(commit_of(self.repo, self.header), git(self.repo, "rev-parse", "--short=12", "HEAD") + "-dirty")

    def test_an_untracked_file_is_not_dirty(self):
        (self.repo / "scratch.txt").write_text("build output\n")
        self.assertNotIn("dirty", commit_of(self.repo, self.header))

    def test_outside_git_is_unknown(self):
        plain = pathlib.Path(self.dir.name, "plain")
        plain.mkdir()
        self.assertEqual(commit_of(plain, self.header), "unknown")

    def test_an_unchanged_commit_leaves_the_header_untouched(self):
        commit_of(self.repo, self.header)
        past = 1_000_000_000
        os.utime(self.header, (past, past))
        commit_of(self.repo, self.header)
        self.assertEqual(self.header.stat().st_mtime, past)

    def test_a_new_commit_rewrites_the_header(self):
        first = commit_of(self.repo, self.header)
        (self.repo / "a.txt").write_text("two\n")
        git(self.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "two")
        second = commit_of(self.repo, self.header)
        self.assertNotEqual(first, second)
        self.assertEqual(second, git(self.repo, "rev-parse", "--short=12", "HEAD"))


if __name__ == "__main__":
    SCRIPT, CMAKE, GIT = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main()
