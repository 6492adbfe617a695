"""The build backend of the io-harness Python package (PEP 517), standard
library only, so that it builds offline with no build requirements.

A wheel carries the native library, libio_harness.so.1, inside the package
(io_harness/_native/), and is tagged for the platform that library is for:
``py3-none-manylinux_2_X_ARCH`` when it needs only glibc (X is the newest
glibc symbol version it uses, read from its ELF version needs), else
``py3-none-linux_ARCH``. The Python code itself is pure (ctypes), hence
py3-none.

Where the library comes from, in order:

1. the file named by IO_HARNESS_LIB;
2. io_harness/_native/libio_harness.so.1 (``make bindings-native``);
3. a build with Go and a C compiler, from the Go module beside the package:
   the repository (``../..``) in a checkout, or ``go/`` in an sdist.

Without any of them the build stops and says what to do.

The sdist carries the Go module's sources (go/) so that ``pip install
io-harness-*.tar.gz`` builds the library where Go is installed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from typing import Dict, List, Optional, Tuple

NAME = "io_harness"
DIST = "io-harness"
VERSION = "0.1.0"
SONAME = "libio_harness.so.1"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bindings/python, or the sdist root

SUMMARY = "Python binding of io-harness, an embeddable AI-agent harness (ctypes over libio_harness)"

# The libraries a manylinux wheel may link against (PEP 600's policy for
# glibc systems), without their versions.
_MANYLINUX_OK = {"libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6", "librt.so.1", "libgcc_s.so.1",
                 "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
_MACHINES = {62: "x86_64", 183: "aarch64", 3: "i686", 40: "armv7l", 243: "riscv64", 21: "ppc64le", 22: "s390x"}


class BuildError(Exception):
    """A build that cannot go on, with what to do about it."""


# -- PEP 517 hooks ----------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings=None) -> str:
    d = os.path.join(metadata_directory, f"{NAME}-{VERSION}.dist-info")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return os.path.basename(d)


def build_wheel(wheel_directory: str, config_settings=None, metadata_directory=None) -> str:
    lib = _library()
    tag = platform_tag(lib)
    files: Dict[str, bytes] = {}
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(pkg, name), "rb") as f:
                files[f"{NAME}/{name}"] = f.read()
    with open(lib, "rb") as f:
        files[f"{NAME}/_native/{SONAME}"] = f.read()
    di = f"{NAME}-{VERSION}.dist-info"
    files[f"{di}/METADATA"] = _metadata().encode()
    files[f"{di}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: io-harness backend\nRoot-Is-Purelib: false\nTag: py3-none-{tag}\n").encode()
    lic = os.path.join(HERE, "LICENSE")
    if os.path.exists(lic):
        with open(lic, "rb") as f:
            files[f"{di}/LICENSE"] = f.read()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{di}/RECORD,,")
    files[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = os.path.join(wheel_directory, f"{NAME}-{VERSION}-py3-none-{tag}.whl")
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(SONAME) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return os.path.basename(out)


def build_sdist(sdist_directory: str, config_settings=None) -> str:
    root = f"{DIST.replace('-', '_')}-{VERSION}"
    out = os.path.join(sdist_directory, root + ".tar.gz")
    os.makedirs(sdist_directory, exist_ok=True)
    module = _go_module()
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        def add(path: str, arc: str) -> None:
            tar.add(path, arcname=f"{root}/{arc}", recursive=False, filter=_reset)

        for name in ("pyproject.toml", "README.md"):
            add(os.path.join(HERE, name), name)
        add(os.path.join(HERE, "_build", "backend.py"), "_build/backend.py")
        for name in sorted(os.listdir(os.path.join(HERE, NAME))):
            if name.endswith(".py") or name == "py.typed":
                add(os.path.join(HERE, NAME, name), f"{NAME}/{name}")
        info = tarfile.TarInfo(f"{root}/PKG-INFO")
        data = _metadata().encode()
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
        if module is None:
            raise BuildError("an sdist carries the Go sources of the library: build it from a checkout of io-harness-go")
        for rel in _go_sources(module):
            add(os.path.join(module, rel), "go/" + rel)
    return os.path.basename(out)


# -- the library ------------------------------------------------------------


def _library() -> str:
    env = os.environ.get("IO_HARNESS_LIB")
    if env:
        if not os.path.isfile(env):
            raise BuildError(f"IO_HARNESS_LIB={env}: no such file")
        return env
    native = os.path.join(HERE, NAME, "_native", SONAME)
    if os.path.isfile(native):
        return native
    module = _go_module()
    if module is None:
        raise BuildError(
            "io-harness: no libio_harness.so.1 to put in the package. In a checkout of io-harness-go run "
            "`make bindings-native` (or `make wheel`), or set IO_HARNESS_LIB=/path/to/libio_harness.so.1.")
    go = shutil.which("go")
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if go is None or cc is None:
        missing = " and ".join(n for n, v in (("Go (1.26 or later)", go), ("a C compiler", cc)) if v is None)
        raise BuildError(
            f"io-harness: building libio_harness.so.1 needs {missing}, which this machine lacks. Install them and "
            "retry, or, in a checkout of io-harness-go, run `make bindings-native` first, or set "
            "IO_HARNESS_LIB=/path/to/libio_harness.so.1 (a library built elsewhere for this platform).")
    out = os.path.join(tempfile.mkdtemp(prefix="io-harness-build-"), SONAME)
    cmd = [go, "build", "-buildmode=c-shared", "-trimpath",
           "-ldflags=-extldflags '-Wl,--version-script=" + os.path.join(module, "capi", "exports.map") +
           " -Wl,-soname," + SONAME + "'", "-o", out, "./capi"]
    env2 = dict(os.environ, CGO_ENABLED="1")
    print("io-harness: building " + SONAME + " with " + go + " (a first build takes a few minutes)", file=sys.stderr)
    r = subprocess.run(cmd, cwd=module, env=env2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise BuildError("io-harness: go build of " + SONAME + " failed:\n" + r.stdout)
    return out


def _go_module() -> Optional[str]:
    """The Go module the library is built from: go/ in an sdist, or the
    repository two levels up in a checkout."""
    for cand in (os.path.join(HERE, "go"), os.path.dirname(os.path.dirname(HERE))):
        gomod = os.path.join(cand, "go.mod")
        if os.path.isfile(gomod):
            with open(gomod, encoding="utf-8") as f:
                if "module github.com/initorigin/io-harness-go" in f.read():
                    return cand
    return None


def _go_sources(module: str) -> List[str]:
    """The files a build of ./capi needs: go.mod, go.sum, the header, and
    every file of every package but its tests and test data (go:embed
    files included), and the docs package, which embeds the spec's schema."""
    out = ["go.mod", "go.sum", "LICENSE", "include/io_harness.h", "capi/exports.map",
           "docs/schema.go", "docs/spec.schema.json"]
    for top in ("capi", "internal", "pkg", "cmd/io-harness-sandbox-exec"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(module, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "testdata" and not d.startswith("."))
            for f in sorted(filenames):
                if not f.endswith("_test.go") and not f.startswith("."):
                    rel = os.path.relpath(os.path.join(dirpath, f), module)
                    if rel not in out:
                        out.append(rel)
    return [p for p in out if os.path.exists(os.path.join(module, p))]


def _reset(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.mtime = 1577836800
    return ti


def _metadata() -> str:
    readme = ""
    p = os.path.join(HERE, "README.md")
    if os.path.exists(p):
        with open(p, encoding="utf-8") as f:
            readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\nSummary: {SUMMARY}\nLicense: Apache-2.0\n"
            "Requires-Python: >=3.10\nDescription-Content-Type: text/markdown\n\n" + readme)


# -- the platform tag -------------------------------------------------------


def platform_tag(lib: str) -> str:
    """The wheel platform tag of a Linux shared library: manylinux_2_X_ARCH
    from its glibc version needs when it links only what manylinux allows,
    else linux_ARCH."""
    with open(lib, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise BuildError(f"{lib} is not an ELF file: this backend tags Linux wheels only")
    arch, needed, versions = _elf_needs(data)
    glibc = [v for v in versions if v.startswith("GLIBC_2.")]
    if not glibc or any(n not in _MANYLINUX_OK for n in needed):
        return f"linux_{arch}"
    minor = max(int(v.split(".")[1]) for v in glibc)
    # Old glibcs need at least manylinux2014 on the newer architectures.
    floor = 17
    return f"manylinux_2_{max(minor, floor)}_{arch}"


def _elf_needs(data: bytes) -> Tuple[str, List[str], List[str]]:
    """The architecture, the DT_NEEDED libraries and the version names
    (GLIBC_2.34, ...) a 64-bit little-endian ELF file needs."""
    if data[4] != 2 or data[5] != 1:
        raise BuildError("only 64-bit little-endian ELF libraries are tagged here")
    e_machine = struct.unpack_from("<H", data, 18)[0]
    arch = _MACHINES.get(e_machine)
    if arch is None:
        raise BuildError(f"unknown ELF machine {e_machine}")
    e_shoff, = struct.unpack_from("<Q", data, 40)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 58)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize = \
            struct.unpack_from("<IIQQQQIIQQ", data, off)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info))

    def cstr(strtab: int, at: int) -> str:
        start = sections[strtab][1] + at
        end = data.index(b"\0", start)
        return data[start:end].decode()

    needed: List[str] = []
    versions: List[str] = []
    for sh_type, off, size, link, info in sections:
        if sh_type == 6:  # SHT_DYNAMIC
            for j in range(0, size, 16):
                tag, val = struct.unpack_from("<qQ", data, off + j)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    needed.append(cstr(link, val))
        elif sh_type == 0x6FFFFFFE:  # SHT_GNU_verneed
            at = off
            for _ in range(info):
                vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, at)
                aux = at + vn_aux
                for _ in range(vn_cnt):
                    vna_hash, vna_flags, vna_other, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
                    versions.append(cstr(link, vna_name))
                    aux += vna_next
                at += vn_next
    return arch, needed, versions


if __name__ == "__main__":
    # python3 _build/backend.py wheel|sdist|tag OUT_DIR|LIB
    try:
        if sys.argv[1] == "tag":
            print(platform_tag(sys.argv[2]))
        elif sys.argv[1] == "wheel":
            print(os.path.join(sys.argv[2], build_wheel(sys.argv[2])))
        elif sys.argv[1] == "sdist":
            print(os.path.join(sys.argv[2], build_sdist(sys.argv[2])))
        else:
            raise SystemExit("usage: backend.py wheel|sdist OUT_DIR, or backend.py tag LIB")
    except BuildError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
