"""The driver process of test_watch.py: it starts a run whose write waits
for a person (approvals="wait") over a store file, prints its id, drives
it to its end and prints the outcome. Another process watches the run and
decides the request.

    python3 watch_child.py STORE WORKSPACE
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402
from support import fixture, library_path  # noqa: E402


def main() -> None:
    store, workspace = sys.argv[1], sys.argv[2]
    with io_harness.Harness(store, library=library_path()) as h:
        run = h.start(fixture("defer_resume").spec(workspace), approvals="wait")
        print("RUN", run.run_id, flush=True)
        res = run.wait(timeout=120)
        print("DONE", res.status, res.outcome_kind, flush=True)


if __name__ == "__main__":
    main()
