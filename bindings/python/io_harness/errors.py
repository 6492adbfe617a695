"""Typed errors: one exception class per error code of the C ABI's envelope."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class HarnessError(Exception):
    """An error envelope of the library: ``code``, ``message``, ``retryable``
    and ``details`` as docs/abi.md specifies them."""

    code: str = "internal"

    def __init__(self, code: str, message: str, retryable: bool = False, details: Optional[Dict[str, Any]] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details or {}


class InvalidJSON(HarnessError):
    """invalid_json: the request was not a JSON object."""


class InvalidArgument(HarnessError):
    """invalid_argument: a parameter or the run spec is invalid."""


class UnknownMethod(HarnessError):
    """unknown_method: no such method."""


class NotFound(HarnessError):
    """not_found: an unknown handle, run or approval request."""


class Conflict(HarnessError):
    """conflict: the request contradicts the current state."""


class Cancelled(HarnessError):
    """cancelled: the operation was cancelled."""


class DeadlineExceeded(HarnessError):
    """deadline_exceeded: the operation ran out of time."""


class PermissionDenied(HarnessError):
    """permission_denied: the policy refused."""


class Unavailable(HarnessError):
    """unavailable: the store, workspace, provider or sandbox failed, or the harness is closed."""


class ABIMismatch(HarnessError):
    """abi_mismatch: the library speaks another ABI major version."""


class InternalError(HarnessError):
    """internal: a bug in the library (a recovered panic)."""


class ForkError(RuntimeError):
    """The library was loaded before this process forked: it cannot be used here."""


class LibraryNotFound(OSError):
    """libio_harness could not be found or loaded."""


_BY_CODE: Dict[str, Type[HarnessError]] = {
    "invalid_json": InvalidJSON,
    "invalid_argument": InvalidArgument,
    "unknown_method": UnknownMethod,
    "not_found": NotFound,
    "conflict": Conflict,
    "cancelled": Cancelled,
    "deadline_exceeded": DeadlineExceeded,
    "permission_denied": PermissionDenied,
    "unavailable": Unavailable,
    "abi_mismatch": ABIMismatch,
    "internal": InternalError,
}


def error_from(obj: Dict[str, Any]) -> HarnessError:
    """Builds the typed exception of an envelope's error object."""
    code = str(obj.get("code", "internal"))
    cls = _BY_CODE.get(code, HarnessError)
    return cls(code, str(obj.get("message", "")), bool(obj.get("retryable", False)), obj.get("details"))
