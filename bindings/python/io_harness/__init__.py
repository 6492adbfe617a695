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

from typing import Any, Dict, List, Optional, Union

from . import types
from ._harness import Approver, Decision, DecisionLike, Event, Harness, Run, RunResult
from ._lib import ABI_MAJOR, ABI_MINOR, ENV_LIBRARY, Library, load
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
    "ABIMismatch", "ABI_MAJOR", "ABI_MINOR", "Approver", "Cancelled", "Conflict", "DeadlineExceeded", "Decision",
    "DecisionLike", "ENV_LIBRARY", "Event", "ForkError", "Harness", "HarnessError", "InternalError", "InvalidArgument",
    "InvalidJSON", "Library", "LibraryNotFound", "NotFound", "PermissionDenied", "Run", "RunResult", "Unavailable",
    "Tool", "UnknownMethod", "call", "debug_stats", "load", "policy_explain", "sandbox_backends", "sandbox_exec",
    "schema_of", "tool", "types", "version",
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
