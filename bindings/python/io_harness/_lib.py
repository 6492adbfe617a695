"""Loading libio_harness and the raw calls: the only module that touches ctypes.

The library is a Go c-shared library. Its runtime starts when it is loaded,
can never be unloaded, and does not survive fork(): this module records the
process that loaded it and refuses every call from a forked child
(:class:`ForkError`), and closes every open harness at interpreter exit.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

from .errors import ABIMismatch, ForkError, HarnessError, LibraryNotFound, error_from

#: The ABI major version this binding speaks, and the least minor it needs.
ABI_MAJOR = 1
ABI_MINOR = 1

#: The one environment variable the binding reads (the library reads none).
ENV_LIBRARY = "IO_HARNESS_LIB"

_SONAME = "libio_harness.so.1"

_lock = threading.Lock()
_loaded: Optional["Library"] = None
_forked = False


def _mark_forked() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


class Library:
    """The loaded libio_harness: typed wrappers of its seven C functions.

    Use :func:`load` to get it; there is at most one per process.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryNotFound(f"cannot load {path}: {e}") from e
        # Owned strings come back as c_void_p so that the pointer is kept
        # for io_harness_free (c_char_p would copy and lose it: a leak).
        lib.io_harness_abi_version.argtypes = []
        lib.io_harness_abi_version.restype = ctypes.c_uint32
        lib.io_harness_call.argtypes = [ctypes.c_char_p]
        lib.io_harness_call.restype = ctypes.c_void_p
        lib.io_harness_free.argtypes = [ctypes.c_void_p]
        lib.io_harness_free.restype = None
        lib.io_harness_poll.argtypes = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32]
        lib.io_harness_poll.restype = ctypes.c_void_p
        lib.io_harness_poll2.argtypes = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
        lib.io_harness_poll2.restype = ctypes.c_void_p
        lib.io_harness_cancel.argtypes = [ctypes.c_uint64]
        lib.io_harness_cancel.restype = ctypes.c_int32
        lib.io_harness_close.argtypes = [ctypes.c_uint64, ctypes.c_int32]
        lib.io_harness_close.restype = ctypes.c_int32
        self._lib = lib
        lib.io_harness_abi_version.argtypes = []
        v = lib.io_harness_abi_version()
        major, minor = v >> 16, v & 0xFFFF
        if major != ABI_MAJOR or minor < ABI_MINOR:
            raise ABIMismatch(
                "abi_mismatch",
                f"{path} speaks ABI {major}.{minor}; this binding needs {ABI_MAJOR}.{ABI_MINOR} or a later {ABI_MAJOR}.x",
            )
        self.abi = (major, minor)

    def check(self) -> None:
        """Raises ForkError in a process forked after the library was loaded."""
        if _forked or os.getpid() != self.pid:
            raise ForkError(
                "io_harness was loaded before this process forked; the Go runtime inside it does not "
                "survive fork(). Use the spawn or forkserver start method of multiprocessing, or "
                "subprocess, and load io_harness in the new process."
            )

    def _take(self, ptr: Optional[int]) -> Optional[bytes]:
        if not ptr:
            return None
        try:
            return ctypes.string_at(ptr)
        finally:
            self._lib.io_harness_free(ptr)

    def call_raw(self, request: bytes) -> Dict[str, Any]:
        """Sends one request (JSON bytes) and returns the decoded envelope."""
        self.check()
        out = self._take(self._lib.io_harness_call(request))
        if out is None:
            raise HarnessError("internal", "io_harness_call returned NULL (out of memory?)")
        env: Dict[str, Any] = json.loads(out)
        return env

    def call(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """Calls a method and returns its result, or raises its typed error."""
        req: Dict[str, Any] = {"method": method}
        if params is not None:
            req["params"] = params
        env = self.call_raw(json.dumps(req).encode())
        if env.get("ok"):
            return env.get("result")
        raise error_from(env.get("error") or {})

    def poll(self, harness: int, timeout_ms: int, max_events: int) -> Tuple[Optional[List[Dict[str, Any]]], int]:
        """One batch poll: a list of events (or None) and the status of
        io_harness_poll2: 0 with events, -3 on timeout, -2 once the harness
        is closed, -1 for an unknown handle."""
        self.check()
        st = ctypes.c_int32(0)
        out = self._take(self._lib.io_harness_poll2(harness, timeout_ms, max_events, ctypes.byref(st)))
        if out is None:
            return None, st.value
        return json.loads(out), st.value

    def poll_raw(self, harness: int, timeout_ms: int, max_events: int) -> Optional[bytes]:
        """One batch poll, undecoded (for benchmarks)."""
        self.check()
        return self._take(self._lib.io_harness_poll(harness, timeout_ms, max_events))

    def cancel(self, handle: int) -> int:
        self.check()
        return int(self._lib.io_harness_cancel(handle))

    def close(self, harness: int, timeout_ms: int) -> int:
        self.check()
        return int(self._lib.io_harness_close(harness, timeout_ms))


def _candidates(path: Optional[str]) -> List[str]:
    if path:
        return [os.path.abspath(path) if os.sep in path else path]
    env = os.environ.get(ENV_LIBRARY)
    if env:
        # A relative path means the working directory of now, not of a
        # later chdir.
        return [os.path.abspath(env) if os.sep in env else env]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", _SONAME)
    out = []
    if os.path.exists(here):
        out.append(here)
    out.append(_SONAME)  # LD_LIBRARY_PATH, rpath, ldconfig
    return out


def load(path: Optional[str] = None) -> Library:
    """Loads the library once per process and returns it.

    The library is found, in order: at ``path``; at the path in the
    ``IO_HARNESS_LIB`` environment variable; inside the package
    (``io_harness/_native/libio_harness.so.1``); then as
    ``libio_harness.so.1`` on the dynamic loader's search path. A second
    call with another explicit path than the loaded one is an error: a Go
    runtime cannot be unloaded or loaded twice.
    """
    global _loaded
    with _lock:
        if _loaded is not None:
            _loaded.check()
            if path and os.path.realpath(path) != os.path.realpath(_loaded.path):
                raise LibraryNotFound(
                    f"io_harness is already loaded from {_loaded.path}; a process can load only one copy"
                )
            return _loaded
        errors = []
        for cand in _candidates(path):
            try:
                _loaded = Library(cand)
                return _loaded
            except LibraryNotFound as e:
                errors.append(str(e))
        raise LibraryNotFound(
            "libio_harness.so.1 not found. Install a wheel that carries it (make wheel), or, in a checkout of "
            "io-harness-go, run `make bindings-native` to copy it into the package; or pass its path as library=, "
            "or set IO_HARNESS_LIB=/path/to/libio_harness.so.1. Tried: " + "; ".join(errors)
        )
