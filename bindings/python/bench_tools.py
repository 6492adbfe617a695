"""Benchmark: the cost of one host-language tool call over the C ABI.

Runs a scripted run whose first turn makes N calls to a Python tool, and
one with no call, and prints the seconds per call, (T(N) - T(0)) / N, the
best of a few rounds. capi's BenchmarkHostToolCall compares it with a Go
tool measured in the same run.

    IO_HARNESS_LIB=bin/libio_harness.so.1 python3 bench_tools.py N
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import io_harness  # noqa: E402


@io_harness.tool(idempotent=True)
def echo(text: str) -> str:
    """Returns its text."""
    return text


def spec(n: int):
    calls = [{"name": "echo", "arguments": {"text": "x"}} for _ in range(n)]
    return {"task": {"goal": "g", "root": tempfile.mkdtemp(prefix="ioh-bench-"),
                     "verification": [{"kind": "workspace_file_contains", "file": "a", "text": "b"}],
                     "budgets": {"max_steps": 1}},
            "provider": {"name": "scripted", "script": {"turns": [{"text": "t", "tool_calls": calls, "usage": {"input_tokens": 1, "output_tokens": 1}}]}}}


def timed(h: io_harness.Harness, n: int) -> float:
    s = spec(n)
    t0 = time.perf_counter()
    res = h.run(s, tools=[echo], timeout=300)
    took = time.perf_counter() - t0
    assert res.outcome_kind == "verification_failed", res
    return took


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with io_harness.Harness(":memory:") as h:
        timed(h, 10)  # warm up
        best = min(timed(h, n) - timed(h, 0) for _ in range(3))
    print(max(best, 0.0) / n)


if __name__ == "__main__":
    main()
