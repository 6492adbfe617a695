"""Host-language tools: Python functions the model calls through the ABI."""

from __future__ import annotations

import asyncio
import enum
import os
import sys
import tempfile
import threading
import unittest
from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, TypedDict

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402
from support import library_path  # noqa: E402
from test_binding import Base  # noqa: E402

LIB = library_path()


def tool_spec(calls, then_write: bool = True, policy=None):
    """A scripted run: the first turn makes the tool calls, the second writes
    done.txt, which the gate wants."""
    turns = [{"text": "Calling.", "tool_calls": calls}]
    if then_write:
        turns.append({"text": "Writing.", "tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}]})
    spec = {
        "task": {"goal": "Use the tools, then write done.txt.", "root": tempfile.mkdtemp(prefix="ioh-py-tool-"),
                 "verification": [{"kind": "workspace_file_contains", "file": "done.txt", "text": "done"}]},
        "provider": {"name": "scripted", "script": {"turns": turns}},
    }
    if policy is not None:
        spec["policy"] = policy
    return spec


def results(res, name):
    return [e for e in res.events if e["kind"] == "tool_result" and e.get("tool") == name]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Box:
    w: float
    label: str = "box"


class TestSchema(unittest.TestCase):
    def test_signature_and_docstring_to_schema(self) -> None:
        @io_harness.tool
        def paint(shape: str, color: Color, sides: int = 4, tags: Optional[List[str]] = None,
                  mode: Literal["fill", "line"] = "fill", at: Optional[Point] = None, box: Optional[Box] = None,
                  weights: Optional[Dict[str, float]] = None) -> str:
            """Paints a shape.

            More words that are not the summary.

            Args:
                shape: The shape's name,
                    on two lines.
                color: Its color.
                sides: How many sides.
            """
            return shape

        self.assertEqual(paint.name, "paint")
        self.assertEqual(paint.description, "Paints a shape.")
        p = paint.parameters
        self.assertEqual(p["required"], ["shape", "color"])
        self.assertFalse(p["additionalProperties"])
        props = p["properties"]
        self.assertEqual(props["shape"], {"type": "string", "description": "The shape's name, on two lines."})
        self.assertEqual(props["color"], {"enum": ["red", "blue"], "description": "Its color."})
        self.assertEqual(props["sides"], {"type": "integer", "description": "How many sides.", "default": 4})
        self.assertEqual(props["tags"]["anyOf"], [{"type": "array", "items": {"type": "string"}}, {"type": "null"}])
        self.assertEqual(props["mode"], {"enum": ["fill", "line"], "default": "fill"})
        self.assertEqual(props["at"]["anyOf"][0], {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                                                  "additionalProperties": False, "required": ["x", "y"]})
        self.assertEqual(props["box"]["anyOf"][0]["required"], ["w"])
        self.assertEqual(props["weights"]["anyOf"][0], {"type": "object", "additionalProperties": {"type": "number"}})

    def test_rest_docstring_and_options(self) -> None:
        @io_harness.tool(name="lookup", timeout=2.5, idempotent=True)
        async def find(key: str) -> str:
            """Finds a key.

            :param key: the key to find
            """
            return key

        self.assertTrue(find.is_async)
        self.assertEqual(find.spec()["name"], "lookup")
        self.assertEqual(find.spec()["timeout_ms"], 2500)
        self.assertTrue(find.spec()["idempotent"])
        self.assertEqual(find.parameters["properties"]["key"]["description"], "the key to find")

    def test_unsupported_annotation_is_a_clear_error(self) -> None:
        with self.assertRaises(TypeError) as cm:
            @io_harness.tool
            def bad(x: complex) -> None:
                """Bad."""
        self.assertIn("no JSON Schema", str(cm.exception))


class TestTools(Base):
    def test_sync_tool_round_trip(self) -> None:
        seen = []

        @io_harness.tool
        def add(a: int, b: int) -> int:
            """Adds two integers."""
            seen.append((a, b, threading.current_thread().name))
            return a + b

        h = self.harness()
        res = h.run(tool_spec([{"name": "add", "arguments": {"a": 2, "b": 3}}]), tools=[add], timeout=30)
        self.assertTrue(res.ok, res)
        self.assertEqual([s[:2] for s in seen], [(2, 3)])
        self.assertTrue(seen[0][2].startswith("io_harness-tool"), seen)
        r = results(res, "add")
        self.assertEqual((r[0]["output"], r[0].get("is_error", False)), ("5", False))
        self.assertIn("host_tool_call", [e["kind"] for e in res.events])

    def test_arguments_are_validated_before_the_function(self) -> None:
        called = []

        @io_harness.tool
        def add(a: int, b: int) -> int:
            """Adds."""
            called.append(1)
            return a + b

        h = self.harness()
        res = h.run(tool_spec([{"name": "add", "arguments": {"a": "two", "b": 3}}]), tools=[add], timeout=30)
        self.assertTrue(res.ok, res)
        self.assertEqual(called, [])
        self.assertIn("do not match its parameters schema", results(res, "add")[0]["output"])

    def test_exception_is_an_observation(self) -> None:
        @io_harness.tool
        def boom(x: int) -> str:
            """Fails."""
            raise ValueError(f"no {x}")

        h = self.harness()
        res = h.run(tool_spec([{"name": "boom", "arguments": {"x": 7}}]), tools=[boom], timeout=30)
        self.assertTrue(res.ok, res)
        r = results(res, "boom")[0]
        self.assertTrue(r["is_error"])
        self.assertIn("ValueError: no 7", r["output"])

    def test_async_tool_in_a_sync_run(self) -> None:
        @io_harness.tool
        async def slow_upper(text: str) -> Dict[str, str]:
            """Upper-cases, after a pause."""
            await asyncio.sleep(0.01)
            return {"text": text.upper()}

        h = self.harness()
        res = h.run(tool_spec([{"name": "slow_upper", "arguments": {"text": "hi"}}]), tools=[slow_upper], timeout=30)
        self.assertTrue(res.ok, res)
        self.assertEqual(results(res, "slow_upper")[0]["output"], '{"text": "HI"}')

    def test_async_tool_runs_on_the_callers_loop(self) -> None:
        loops = []

        @io_harness.tool
        async def where() -> str:
            """Says which loop runs it."""
            loops.append(asyncio.get_running_loop())
            return "here"

        h = self.harness()

        async def main():
            res = await asyncio.wait_for(h.run_async(tool_spec([{"name": "where", "arguments": {}}]), tools=[where]), 30)
            return res, asyncio.get_running_loop()

        res, loop = asyncio.run(main())
        self.assertTrue(res.ok, res)
        self.assertEqual(loops, [loop])

    def test_busy_host_fails_cleanly(self) -> None:
        # The function takes longer than the tool's timeout: the call fails
        # as an observation and the run goes on; the late answer is dropped.
        release = threading.Event()

        @io_harness.tool(timeout=0.3)
        def stuck() -> str:
            """Never answers in time."""
            release.wait(10)
            return "late"

        h = self.harness()
        try:
            res = h.run(tool_spec([{"name": "stuck", "arguments": {}}]), tools=[stuck], timeout=30)
        finally:
            release.set()
        self.assertTrue(res.ok, res)
        r = results(res, "stuck")[0]
        self.assertTrue(r["is_error"])
        self.assertIn("did not answer within 300ms", r["output"])

    def test_exec_policy_applies_to_the_tools_name(self) -> None:
        called = []

        @io_harness.tool
        def rm(path: str) -> str:
            """Removes a file."""
            called.append(path)
            return "removed"

        policy = {"version": 1, "defaults": {"read": "allow", "write": "allow", "exec": "allow", "net": "deny"},
                  "layers": [{"name": "t", "rules": [{"act": "exec", "effect": "deny", "pattern": "rm"}]}]}
        h = self.harness()
        res = h.run(tool_spec([{"name": "rm", "arguments": {"path": "x"}}], policy=policy), tools=[rm], timeout=30)
        self.assertTrue(res.ok, res)
        self.assertEqual(called, [])
        self.assertIn("refusal", [e["kind"] for e in res.events])


class TestDefects(Base):
    def test_ask_without_approver_is_a_denial(self) -> None:
        # Issue 15: run() with a policy that asks and no approver waited
        # forever. Now the ask is denied at once.
        from support import fixture

        h = self.harness()
        res = h.run(fixture("approve").spec(), timeout=30)
        kinds = [e["kind"] for e in res.events]
        self.assertIn("approval_resolved", kinds)
        self.assertNotIn("approval_pending", kinds)
        resolved = [e for e in res.events if e["kind"] == "approval_resolved"][0]
        self.assertEqual(resolved["decision"], "deny")

    def test_closed_harness_raises_unavailable(self) -> None:
        h = io_harness.Harness(library=LIB)
        h.close()
        with self.assertRaises(io_harness.Unavailable):
            h.start({"task": {}, "provider": {}})

    def test_approver_that_raises_denies(self) -> None:
        from support import fixture

        def approver(req):
            raise RuntimeError("the approver broke")

        h = self.harness()
        res = h.run(fixture("approve").spec(), approver=approver, timeout=30)
        resolved = [e for e in res.events if e["kind"] == "approval_resolved"][0]
        self.assertEqual(resolved["decision"], "deny")
        self.assertIn("RuntimeError: the approver broke", resolved["reason"])

    def test_async_approver_that_raises_denies(self) -> None:
        from support import fixture

        async def approver(req):
            raise RuntimeError("async approver broke")

        h = self.harness()
        res = asyncio.run(asyncio.wait_for(h.run_async(fixture("approve").spec(), approver=approver), 30))
        resolved = [e for e in res.events if e["kind"] == "approval_resolved"][0]
        self.assertEqual(resolved["decision"], "deny")
        self.assertIn("async approver broke", resolved["reason"])


if __name__ == "__main__":
    unittest.main()
