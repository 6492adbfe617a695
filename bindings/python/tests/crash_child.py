"""The child processes of test_crash.py: each mode does one thing that
could hang or kill a host, and prints what happened."""

from __future__ import annotations

import os
import signal
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402
from support import HOUR_MS, library_path, slow_spec  # noqa: E402


def sigint() -> None:
    """A run is going, its model's turn an hour long; the parent sends
    SIGINT. KeyboardInterrupt must arrive before the turn ends, and the run
    is cancelled."""
    h = io_harness.Harness(library=library_path())

    def on_event(ev):
        if ev["kind"] == "step_started":
            print("READY", flush=True)

    try:
        h.run(slow_spec(latency_ms=HOUR_MS), on_event=on_event)
        print("RUN ENDED WITHOUT INTERRUPT", flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    h.close()
    print("CLOSED", io_harness.debug_stats()["runs"], flush=True)


def fork() -> None:
    """After loading, the process forks: the child must get ForkError,
    not a hang; the parent keeps working."""
    h = io_harness.Harness(library=library_path())
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # a hang in the child must not outlive the test
        code = 3
        try:
            io_harness.version()
            code = 1  # should have raised
        except io_harness.ForkError:
            code = 0
        try:
            h.start(slow_spec())
            code = 1
        except io_harness.ForkError:
            pass
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(status), flush=True)
    res = h.run(slow_spec(latency_ms=10), timeout=30)
    print("PARENT", res.status, flush=True)
    h.close()


def exit_midrun() -> None:
    """Runs are going, their model's turns an hour long, and a poller is
    blocked when the interpreter exits: atexit closes the harness, which
    cancels them, and the process ends cleanly."""
    h = io_harness.Harness(library=library_path())
    runs = [h.start(slow_spec(latency_ms=HOUR_MS)) for _ in range(4)]
    for ev in runs[0].events(timeout=30):
        if ev["kind"] == "step_started":
            break
    print("EXITING", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    {"sigint": sigint, "fork": fork, "exit": exit_midrun}[sys.argv[1]]()
