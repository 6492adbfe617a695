"""Times the delivery of N events of one harness queue to Python by batch
polling (1000 per call), decoding each batch as the binding does. Prints
the seconds. capi's BenchmarkEvents20k runs it beside a pure-Go baseline.

    IO_HARNESS_LIB=bin/libio_harness.so.1 python3 bindings/python/bench_events.py 20000
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    lib = io_harness.load()
    h = lib.call("harness.open", {"store": ":memory:"})["harness"]
    t0 = time.perf_counter()
    lib.call("debug.emit", {"harness": h, "count": n})
    got = 0
    while True:
        batch = lib.poll_raw(h, 1000, 1000)
        if batch is None:
            raise SystemExit(f"stalled after {got} events")
        events = json.loads(batch)
        if events[-1]["kind"] == "debug_done":
            got += len(events) - 1
            break
        got += len(events)
    took = time.perf_counter() - t0
    lib.close(h, 5000)
    if got != n:
        raise SystemExit(f"{got} events, want {n}")
    print(f"{took:.4f}")


if __name__ == "__main__":
    main()
