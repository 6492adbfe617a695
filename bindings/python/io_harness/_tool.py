"""Host-language tools: a Python function the model can call, described to
it by a JSON Schema built from the function's signature and docstring."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import sys
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple, Union, overload

__all__ = ["Tool", "tool", "schema_of"]

_NoneType = type(None)


class Tool:
    """A function registered as a tool: its name, the description the model
    reads, the JSON Schema of its arguments, and the function itself.

    Build one with the :func:`tool` decorator. Calling a Tool calls the
    function. ``timeout`` (seconds) bounds one call as the harness waits for
    it; ``idempotent`` tells the harness that a repeated call is harmless,
    so it records no intent before each call.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parameters: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        idempotent: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        doc_summary, doc_params = _parse_docstring(inspect.getdoc(fn) or "")
        self.description = description or doc_summary or self.name
        self.parameters = parameters if parameters is not None else schema_of(fn, doc_params)
        self.timeout = timeout
        self.idempotent = idempotent
        self.is_async = inspect.iscoroutinefunction(fn)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def spec(self) -> Dict[str, Any]:
        """The registration sent with run.start (docs/abi.md, host tools)."""
        out: Dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.timeout is not None:
            out["timeout_ms"] = int(self.timeout * 1000)
        if self.idempotent:
            out["idempotent"] = True
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


F = typing.TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: Callable[..., Any]) -> Tool: ...


@overload
def tool(
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    parameters: Optional[Dict[str, Any]] = None,
    timeout: Optional[float] = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    parameters: Optional[Dict[str, Any]] = None,
    timeout: Optional[float] = None,
    idempotent: bool = False,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """Makes a function a tool the model can call::

        @io_harness.tool
        def add(a: int, b: int) -> int:
            \"\"\"Adds two integers.

            Args:
                a: The first addend.
                b: The second addend.
            \"\"\"
            return a + b

    The name is the function's; the description is the docstring's first
    paragraph; the parameters' JSON Schema comes from the signature (str,
    int, float, bool, None, list, dict, Optional, Union, Literal, Enum,
    TypedDict and dataclasses) with each parameter's line of the docstring
    (Google "Args:" or reST ":param x:" style) as its description. A
    parameter with a default is optional. ``async def`` functions work too.

    What the function returns is what the model sees: a str as it is,
    anything else as JSON. An exception it raises is an observation the
    model sees (its type and message), never the end of the run.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, parameters=parameters, timeout=timeout, idempotent=idempotent)

    if fn is not None:
        return wrap(fn)
    return wrap


# -- docstrings ----------------------------------------------------------

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?|Attributes)\s*:\s*$")
_GOOGLE_PARAM = re.compile(r"^\s*\**(\w+)\**\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], .|]+\s+)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> Tuple[str, Dict[str, str]]:
    """The summary (the first paragraph) and each parameter's description."""
    lines = doc.splitlines()
    summary: List[str] = []
    i = 0
    while i < len(lines) and lines[i].strip():
        if _SECTION.match(lines[i].strip()) or _REST_PARAM.match(lines[i]):
            break
        summary.append(lines[i].strip())
        i += 1
    params: Dict[str, str] = {}
    current: Optional[str] = None
    in_args = False
    base_indent: Optional[int] = None
    for line in lines:
        stripped = line.strip()
        m = _REST_PARAM.match(line)
        if m:
            current = m.group(1)
            params[current] = m.group(2).strip()
            continue
        sec = _SECTION.match(stripped)
        if sec:
            in_args = sec.group(1) in ("Args", "Arguments", "Parameters", "Params")
            current, base_indent = None, None
            continue
        if not stripped:
            current = None
            continue
        if stripped.startswith(":"):
            current = None
            continue
        indent = len(line) - len(line.lstrip())
        if in_args:
            g = _GOOGLE_PARAM.match(line)
            if g and (base_indent is None or indent <= base_indent):
                base_indent = indent
                current = g.group(1)
                params[current] = g.group(2).strip()
                continue
        if current is not None:
            params[current] = (params[current] + " " + stripped).strip()
    return " ".join(summary), params


# -- types to JSON Schema -------------------------------------------------


def schema_of(fn: Callable[..., Any], descriptions: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The JSON Schema (type "object") of a function's keyword arguments."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=False)
    except Exception:  # an annotation that does not resolve: fall back to the raw ones
        hints = {k: p.annotation for k, p in sig.parameters.items()}
    props: Dict[str, Any] = {}
    required: List[str] = []
    for pname, p in sig.parameters.items():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if p.kind == inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"tool {fn.__name__}: parameter {pname} is positional-only; a tool is called with keywords")
        ann = hints.get(pname, p.annotation)
        s = _schema(ann, f"{fn.__name__}({pname})") if ann is not inspect.Parameter.empty else {}
        if descriptions and descriptions.get(pname):
            s = dict(s, description=descriptions[pname])
        if p.default is inspect.Parameter.empty:
            required.append(pname)
        elif _jsonable(p.default):
            s = dict(s, default=p.default)
        props[pname] = s
    out: Dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _is_typeddict(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, dict) and hasattr(t, "__annotations__") and hasattr(t, "__total__")


def _schema(t: Any, where: str) -> Dict[str, Any]:
    if t is Any or t is object:
        return {}
    if t is _NoneType or t is None:
        return {"type": "null"}
    if t is str:
        return {"type": "string"}
    if t is bool:
        return {"type": "boolean"}
    if t is int:
        return {"type": "integer"}
    if t is float:
        return {"type": "number"}
    if t in (list, List, tuple):
        return {"type": "array"}
    if t in (dict, Dict):
        return {"type": "object"}
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return {"enum": [m.value for m in t]}
    if _is_typeddict(t):
        hints = typing.get_type_hints(t)
        req = sorted(getattr(t, "__required_keys__", set(hints) if t.__total__ else set()))
        obj: Dict[str, Any] = {"type": "object", "properties": {k: _schema(v, f"{where}.{k}") for k, v in hints.items()},
                               "additionalProperties": False}
        if req:
            obj["required"] = req
        return obj
    if dataclasses.is_dataclass(t) and isinstance(t, type):
        hints = typing.get_type_hints(t)
        props = {}
        req = []
        for f in dataclasses.fields(t):
            props[f.name] = _schema(hints.get(f.name, Any), f"{where}.{f.name}")
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                req.append(f.name)
        obj = {"type": "object", "properties": props, "additionalProperties": False}
        if req:
            obj["required"] = req
        return obj
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is Union or (sys.version_info >= (3, 10) and _is_union_type(t)):
        members = [a for a in args if a is not _NoneType]
        schemas = [_schema(a, where) for a in members]
        if len(members) < len(args):
            schemas.append({"type": "null"})
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin in (list, List, typing.Sequence, set, frozenset) or (origin is not None and origin.__name__ in ("Sequence", "Iterable")):
        return {"type": "array", "items": _schema(args[0], where)} if args else {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], where)}
        return {"type": "array", "prefixItems": [_schema(a, where) for a in args], "minItems": len(args), "maxItems": len(args)}
    if origin in (dict, Dict) or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        if args and args[0] is not str:
            raise TypeError(f"tool {where}: a mapping's keys must be str for JSON, not {args[0]!r}")
        return {"type": "object", "additionalProperties": _schema(args[1], where)} if args else {"type": "object"}
    raise TypeError(f"tool {where}: no JSON Schema for the type {t!r}; annotate with str, int, float, bool, list, dict, "
                    "Optional, Union, Literal, an Enum, a TypedDict or a dataclass, or pass parameters= explicitly")


def _is_union_type(t: Any) -> bool:
    import types as _types

    return isinstance(t, getattr(_types, "UnionType", ()))


def result_text(value: Any) -> str:
    """What the model sees of a tool's return value."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, ensure_ascii=False, default=str)
