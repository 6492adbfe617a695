"""How the binding finds the library, each case in a fresh interpreter:
an explicit path, IO_HARNESS_LIB, a copy inside the package, and a clear
error when there is none."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import library_path  # noqa: E402

PACKAGE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "io_harness"))
LIB = library_path()


def run_python(code: str, path: str, env_lib):
    env = {k: v for k, v in os.environ.items() if k != "IO_HARNESS_LIB"}
    env["LD_LIBRARY_PATH"] = ""
    if env_lib:
        env["IO_HARNESS_LIB"] = env_lib
    env["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, cwd=path)


class TestLoading(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ioh-load-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        shutil.copytree(PACKAGE, os.path.join(self.tmp, "io_harness"), ignore=shutil.ignore_patterns("_native", "__pycache__"))

    def test_explicit_path(self) -> None:
        p = run_python(f"import io_harness; print(io_harness.load({LIB!r}).path)", self.tmp, None)
        self.assertEqual(p.stdout.strip(), LIB, p.stderr)

    def test_environment_variable(self) -> None:
        p = run_python("import io_harness; print(io_harness.load().path)", self.tmp, LIB)
        self.assertEqual(p.stdout.strip(), LIB, p.stderr)

    def test_inside_the_package(self) -> None:
        native = os.path.join(self.tmp, "io_harness", "_native")
        os.makedirs(native)
        shutil.copy(LIB, os.path.join(native, "libio_harness.so.1"))
        p = run_python("import io_harness; print(io_harness.load().path); print(io_harness.version()['abi'])", self.tmp, None)
        self.assertIn(os.path.join(native, "libio_harness.so.1"), p.stdout, p.stderr)

    def test_not_found(self) -> None:
        p = run_python("import io_harness\ntry:\n io_harness.load()\nexcept io_harness.LibraryNotFound as e:\n print('NOTFOUND', e)",
                       self.tmp, None)
        self.assertIn("NOTFOUND", p.stdout, p.stderr)
        self.assertIn("IO_HARNESS_LIB", p.stdout)


if __name__ == "__main__":
    unittest.main()
