"""The package as users install it: pip install of the source tree without
a library says what to do; the backend tags wheels from the library's ELF
needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import REPO, library_path  # noqa: E402

PKG = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(PKG, "_build"))
import backend  # noqa: E402


def copy_package(dst: str) -> str:
    shutil.copytree(PKG, dst, ignore=shutil.ignore_patterns("_native", "__pycache__", "tests", "*.egg-info", "build"))
    return dst


def pip_install(src: str, path_env: str) -> subprocess.CompletedProcess:
    d = tempfile.mkdtemp(prefix="ioh-venv-")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(d, "venv")], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("IO_HARNESS_LIB",)}
    env["PATH"] = path_env
    return subprocess.run([sys.executable, "-m", "pip", "--python", os.path.join(d, "venv", "bin", "python"), "install",
                           "--no-index", "--no-build-isolation", src], capture_output=True, text=True, env=env, timeout=600)


class TestPackaging(unittest.TestCase):
    def test_source_install_without_library_names_make_bindings_native(self) -> None:
        # Issue 15: pip install bindings/python succeeded but could not find
        # the library. Now, with no library and no Go, it stops and says so.
        tmp = tempfile.mkdtemp(prefix="ioh-pkg-")
        shutil.copy(os.path.join(REPO, "go.mod"), os.path.join(tmp, "go.mod"))  # a checkout...
        src = copy_package(os.path.join(tmp, "bindings", "python"))
        empty = tempfile.mkdtemp(prefix="ioh-nogo-")  # ...on a machine without Go
        r = pip_install(src, empty)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("make bindings-native", r.stdout + r.stderr)
        self.assertIn("Go", r.stdout + r.stderr)
        # Outside a checkout the message says the same.
        src2 = copy_package(os.path.join(tempfile.mkdtemp(prefix="ioh-pkg-"), "a", "python"))
        r = pip_install(src2, empty)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("make bindings-native", r.stdout + r.stderr)

    def test_source_install_with_a_library(self) -> None:
        # Negative control: the same install with the library given works,
        # and the installed package finds it without any variable.
        src = copy_package(os.path.join(tempfile.mkdtemp(prefix="ioh-pkg-"), "python"))
        os.makedirs(os.path.join(src, "io_harness", "_native"))
        shutil.copy(library_path(), os.path.join(src, "io_harness", "_native", "libio_harness.so.1"))
        r = pip_install(src, os.environ.get("PATH", ""))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_sdist_builds_the_library_where_go_is(self) -> None:
        go = shutil.which("go")
        if go is None or shutil.which("gcc") is None:
            self.skipTest("no Go or gcc here: the sdist cannot build the library (the test above covers that message)")
        out = tempfile.mkdtemp(prefix="ioh-sdist-")
        sdist = os.path.join(out, backend.build_sdist(out))
        # Without Go on PATH it stops and says what to do...
        r = pip_install(sdist, tempfile.mkdtemp(prefix="ioh-nogo-"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("make bindings-native", r.stdout + r.stderr)
        # ...with Go it builds the library from the Go sources it carries.
        path = os.pathsep.join([os.path.dirname(go), os.path.dirname(shutil.which("gcc") or ""), "/usr/bin", "/bin"])
        d = tempfile.mkdtemp(prefix="ioh-venv-")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(d, "venv")], check=True)
        env = {k: v for k, v in os.environ.items() if k != "IO_HARNESS_LIB"}
        env["PATH"] = path
        py = os.path.join(d, "venv", "bin", "python")
        r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "--no-index", "--no-build-isolation", sdist],
                           capture_output=True, text=True, env=env, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run([py, "-c", "import io_harness; print(io_harness.version()['abi']['major'], io_harness.load().path)"],
                           capture_output=True, text=True, env=env, cwd=d, timeout=60)
        self.assertIn("1 ", r.stdout, r.stderr)
        self.assertIn("_native", r.stdout)

    def test_platform_tag_from_the_elf_needs(self) -> None:
        tag = backend.platform_tag(library_path())
        objdump = shutil.which("objdump")
        if objdump is None:
            self.skipTest("no objdump to cross-check the glibc version")
        out = subprocess.run([objdump, "-T", library_path()], capture_output=True, text=True).stdout
        newest = max(int(v.split(".")[1]) for v in __import__("re").findall(r"GLIBC_2\.(\d+)", out) and
                     ["2." + x for x in __import__("re").findall(r"GLIBC_2\.(\d+)", out)])
        arch = os.uname().machine
        self.assertEqual(tag, f"manylinux_2_{max(newest, 17)}_{arch}")
        with self.assertRaises(backend.BuildError):
            backend.platform_tag(os.path.join(PKG, "pyproject.toml"))


if __name__ == "__main__":
    unittest.main()
