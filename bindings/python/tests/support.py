"""Shared test support: where the library and the shared fixtures are."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.join(REPO, "internal", "abi", "testdata", "fixtures")


def library_path() -> str:
    """The library under test: IO_HARNESS_LIB, or the repository's bin/.

    A relative IO_HARNESS_LIB is made absolute here, against the directory
    the tests were started in, and exported so: the tests' child processes
    run in other directories, where it would point nowhere."""
    p = os.path.abspath(os.environ.get("IO_HARNESS_LIB") or os.path.join(REPO, "bin", "libio_harness.so.1"))
    if not os.path.exists(p):
        raise RuntimeError(f"no library at {p}: build it first (make lib) or set IO_HARNESS_LIB")
    os.environ["IO_HARNESS_LIB"] = p
    return p


@dataclass
class Fixture:
    name: str
    spec_text: str
    approve: Optional[Dict[str, Any]]
    resume: Optional[Dict[str, Any]]
    golden: List[str]

    def spec(self, workspace: Optional[str] = None) -> Dict[str, Any]:
        ws = workspace or tempfile.mkdtemp(prefix="ioh-py-")
        return json.loads(self.spec_text.replace('"$WORKSPACE"', json.dumps(ws)))


def _read_json(path: str) -> Optional[Dict[str, Any]]:
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fixtures() -> List[Fixture]:
    out = []
    for name in sorted(os.listdir(FIXTURES)):
        d = os.path.join(FIXTURES, name)
        if not os.path.isfile(os.path.join(d, "spec.json")):
            continue
        with open(os.path.join(d, "spec.json")) as f:
            spec = f.read()
        with open(os.path.join(d, "events.golden")) as f:
            golden = f.read().split()
        out.append(Fixture(name, spec, _read_json(os.path.join(d, "approve.json")), _read_json(os.path.join(d, "resume.json")), golden))
    if not out:
        raise RuntimeError(f"no fixtures in {FIXTURES}")
    return out


def fixture(name: str) -> Fixture:
    for f in fixtures():
        if f.name == name:
            return f
    raise KeyError(name)


def slow_spec(latency_ms: int = 60000) -> Dict[str, Any]:
    """A spec whose first model turn takes latency_ms (it honours cancellation)."""
    ws = tempfile.mkdtemp(prefix="ioh-py-")
    return {
        "task": {"goal": "wait", "root": ws,
                 "verification": [{"kind": "workspace_file_contains", "file": "x.txt", "text": "x"}]},
        "provider": {"name": "scripted", "script": {"turns": [{"text": "slow", "latency_ms": latency_ms}]}},
    }
