"""The driver process of TestLease: it starts a run whose first model turn
takes a minute over a store file, prints the run's id and spec once the
step has started, and drives it until it is killed.

    python3 lease_child.py STORE
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402
from support import library_path, slow_spec  # noqa: E402


def main() -> None:
    spec = slow_spec()
    with io_harness.Harness(sys.argv[1], library=library_path()) as h:
        run = h.start(spec)
        for ev in run.events(timeout=60):
            if ev["kind"] == "step_started":
                break
        print("RUN", run.run_id, json.dumps(spec), flush=True)
        run.wait(timeout=120)


if __name__ == "__main__":
    main()
