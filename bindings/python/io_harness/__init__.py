"""io_harness — Python binding of io-harness, an embeddable AI-agent harness.

A caller hands the harness a run spec (a task contract, a provider, an
optional policy and sandbox) and it drives an agent to a verified result::

    import io_harness

    @io_harness.tool
    def add(a: int, b: int) -> int:
        "Adds two integers."
        return a + b

    with io_harness.Harness("trace.db") as h:
        result = h.run(spec, tools=[add], approver=lambda req: io_harness.Decision.approve())
        print(result.outcome_kind, result.run_id)

The binding is pure Python over ``libio_harness.so.1`` through ctypes (no
dependency). It finds the library from an explicit ``library=`` path, the
``IO_HARNESS_LIB`` environment variable, a copy inside the package
(``io_harness/_native/``), or the dynamic loader's search path.

Host constraints (docs/abi.md): the library cannot be unloaded and does not
survive ``fork()`` — a forked child that touches it gets :class:`ForkError`;
use ``subprocess`` or the ``spawn`` start method. Open harnesses are closed
at interpreter exit.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union, cast

from . import types
from ._harness import Approver, Decision, DecisionLike, Event, Harness, Run, RunResult
from ._lib import ABI_MAJOR, ABI_MINOR, ENV_LIBRARY, Library, load
from ._results import DecideState, Fetched, Model, ModelList, StoreCheck, StoreReport, Submitted
from ._tool import Tool, schema_of, tool
from .errors import (
    ABIMismatch,
    Cancelled,
    Conflict,
    DeadlineExceeded,
    ForkError,
    HarnessError,
    InternalError,
    InvalidArgument,
    InvalidJSON,
    LibraryNotFound,
    NotFound,
    PermissionDenied,
    Unavailable,
    UnknownMethod,
)

__all__ = [
    "ABIMismatch", "ABI_MAJOR", "ABI_MINOR", "Approver", "Cancelled", "Conflict", "DeadlineExceeded", "DecideState",
    "Decision", "DecisionLike", "ENV_LIBRARY", "Event", "Fetched", "ForkError", "Harness", "HarnessError", "InternalError",
    "InvalidArgument", "InvalidJSON", "Library", "LibraryNotFound", "Model", "ModelList", "NotFound", "PermissionDenied",
    "Run", "RunResult", "StoreCheck", "StoreReport", "Submitted", "Unavailable", "Tool", "UnknownMethod",
    "call", "debug_stats", "load", "models_list", "policy_explain", "sandbox_backends", "sandbox_exec", "schema_of",
    "store_check", "tool", "types", "version",
]

__version__ = "0.1.0"


def call(method: str, params: Optional[Dict[str, Any]] = None, *, library: Optional[str] = None) -> Any:
    """Calls any JSON method of docs/abi.md and returns its result (or
    raises its typed error)."""
    return load(library).call(method, params)


def version(*, library: Optional[str] = None) -> Dict[str, Any]:
    """The library's version, ABI, methods, event kinds and error codes."""
    return dict(call("version", library=library))


def debug_stats(*, library: Optional[str] = None) -> Dict[str, Any]:
    """Strings handed out and freed, live handles and goroutines."""
    return dict(call("debug.stats", library=library))


def policy_explain(policy: Union[str, Dict[str, Any]], act: str, target: str, *, library: Optional[str] = None) -> Dict[str, Any]:
    """The verdict of a policy ("default", "permissive" or a policy object)
    on an act (read, write, exec, net) and target."""
    return dict(call("policy.explain", {"policy": policy, "act": act, "target": target}, library=library))


def sandbox_exec(
    spec: Union[List[str], Dict[str, Any]],
    *,
    backend: Optional[str] = None,
    library: Optional[str] = None,
) -> Dict[str, Any]:
    """Runs a command in a sandbox: ``spec`` is an argv list or a
    sandbox.Spec dict. Returns the sandbox result (stdout/stderr base64)."""
    s = {"argv": spec} if isinstance(spec, list) else spec
    p: Dict[str, Any] = {"spec": s}
    if backend:
        p["backend"] = backend
    return dict(call("sandbox.exec", p, library=library))


def sandbox_backends(*, library: Optional[str] = None) -> List[Dict[str, Any]]:
    """Every sandbox backend of this OS, probed, with what it enforces."""
    return list(call("sandbox.backends", library=library)["backends"])


def models_list(
    *, file: Optional[Union[str, "os.PathLike[str]"]] = None, use_environment: bool = False, library: Optional[str] = None
) -> ModelList:
    """The model catalogue as a run sees it (models.list), sorted by vendor
    and id: the built-in one, with ``file`` (an override file, as a spec's
    ``models``) merged in; with ``use_environment`` and no ``file``, the
    file ``IO_HARNESS_MODELS`` names (as the process environment was when
    the library loaded: the Go runtime reads it then, and does not see
    ``os.environ`` changed later). A bad file is :class:`InvalidArgument`
    (``details["field"]`` "models")."""
    p: Dict[str, Any] = {}
    if file is not None:
        p["file"] = os.fspath(file)
    if use_environment:
        p["use_environment"] = True
    return cast(ModelList, call("models.list", p, library=library))


def store_check(path: Union[str, "os.PathLike[str]"], *, library: Optional[str] = None) -> StoreCheck:
    """Checks a SQLite store file (store.check), reading only: SQLite's
    integrity check over the whole file, the store's three files and its
    runs by status. No harness needs to be open on it. A PostgreSQL URL is
    :class:`InvalidArgument` (the server checks its own database); a
    missing file :class:`NotFound`."""
    return cast(StoreCheck, call("store.check", {"store": os.fspath(path)}, library=library))
