"""Crash behaviour, each case in a subprocess with a timeout: SIGINT during
a run, fork after loading, exit in the middle of runs. None may hang or end
the host with a Go crash dump."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from support import HANG_GUARD  # noqa: E402

CHILD = os.path.join(HERE, "crash_child.py")


def start(mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, CHILD, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen, timeout: float):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"child hung (killed after {timeout}s)\nstdout: {out}\nstderr: {err}")
    return out, err


class TestCrash(unittest.TestCase):
    def assertNoGoCrash(self, err: str) -> None:
        for marker in ("goroutine ", "fatal error:", "panic:", "SIGSEGV"):
            self.assertNotIn(marker, err, f"Go crash output:\n{err}")

    def test_sigint_during_run(self) -> None:
        p = start("sigint")
        try:
            line = ""
            # readline blocks; the guard in finish ends a child that hangs.
            while "READY" not in line:
                line = p.stdout.readline()
                if not line:
                    break
            self.assertIn("READY", line)
            p.send_signal(signal.SIGINT)
            out, err = finish(p, HANG_GUARD)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertIn("INTERRUPTED", out, err)
        self.assertIn("CLOSED 0", out, err)
        self.assertEqual(p.returncode, 0, err)
        self.assertNoGoCrash(err)

    def test_fork_is_detected(self) -> None:
        out, err = finish(start("fork"), HANG_GUARD)
        self.assertIn("CHILD 0", out, err)
        self.assertIn("PARENT ok", out, err)
        self.assertNoGoCrash(err)

    def test_exit_in_the_middle_of_runs(self) -> None:
        p = start("exit")
        out, err = finish(p, HANG_GUARD)
        self.assertIn("EXITING", out, err)
        self.assertEqual(p.returncode, 0, err)
        self.assertNoGoCrash(err)


if __name__ == "__main__":
    unittest.main()
