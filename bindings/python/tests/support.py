"""Shared test support: where the library and the shared fixtures are."""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
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


# HANG_GUARD bounds a wait (seconds) only so that a hung test fails instead
# of hanging: far beyond what any wait here takes, however loaded the
# machine; no test judges a duration by it.
HANG_GUARD = 120

# HOUR_MS is a model turn no test waits for: a run that ends before it
# ended because it was cancelled or interrupted.
HOUR_MS = 3_600_000


def slow_spec(latency_ms: int = 60000) -> Dict[str, Any]:
    """A spec whose first model turn takes latency_ms (it honours cancellation)."""
    ws = tempfile.mkdtemp(prefix="ioh-py-")
    return {
        "task": {"goal": "wait", "root": ws,
                 "verification": [{"kind": "workspace_file_contains", "file": "x.txt", "text": "x"}]},
        "provider": {"name": "scripted", "script": {"turns": [{"text": "slow", "latency_ms": latency_ms}]}},
    }


class Postgres:
    """A throwaway PostgreSQL server for the tests of a fleet's methods, as
    internal/pgtest starts one for the Go tests: the distribution's own
    initdb and postgres, a cluster in a temporary directory, a random
    password, a loopback port; run as the unprivileged user nobody when the
    tests run as root (PostgreSQL refuses root), and killed with the test
    process (setpriv --pdeathsig). :meth:`start` raises unittest.SkipTest,
    saying why, when PostgreSQL is not installed."""

    NOBODY = 65534

    def __init__(self) -> None:
        self.dir = ""
        self.proc: Optional["subprocess.Popen[str]"] = None
        self.dsn = ""

    @staticmethod
    def binaries() -> Optional[str]:
        p = shutil.which("initdb")
        if p:
            d = os.path.dirname(os.path.realpath(p))
            if os.path.exists(os.path.join(d, "postgres")):
                return d
        dirs = glob.glob("/usr/lib/postgresql/*/bin")
        dirs.sort(key=lambda d: int(os.path.basename(os.path.dirname(d))) if os.path.basename(os.path.dirname(d)).isdigit() else 0, reverse=True)
        for d in dirs:
            if os.path.exists(os.path.join(d, "initdb")):
                return d
        return None

    def _as(self) -> Dict[str, Any]:
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"}
        if os.geteuid() == 0:
            return {"user": self.NOBODY, "group": self.NOBODY, "extra_groups": [], "env": env}
        return {"env": env}

    def start(self) -> str:
        import unittest

        bin_dir = self.binaries()
        if bin_dir is None:
            raise unittest.SkipTest("no PostgreSQL for this test: initdb and postgres are not installed (make deps installs them)")
        if shutil.which("setpriv") is None:
            raise unittest.SkipTest("no PostgreSQL for this test: setpriv (util-linux) is not installed")
        self.sweep()
        self.dir = tempfile.mkdtemp(prefix="io-harness-pg-")
        pw = secrets.token_hex(12)
        pwfile = os.path.join(self.dir, "pw")
        with open(pwfile, "w") as f:
            f.write(pw + "\n")
        if os.geteuid() == 0:
            for p in (self.dir, pwfile):
                os.chown(p, self.NOBODY, self.NOBODY)
        data = os.path.join(self.dir, "data")
        r = subprocess.run([os.path.join(bin_dir, "initdb"), "-D", data, "-U", "ioh", f"--pwfile={pwfile}", "--auth=scram-sha-256",
                            "-E", "UTF8", "--locale=C", "--no-sync"], cwd=self.dir, capture_output=True, text=True, timeout=120, **self._as())
        os.remove(pwfile)
        if r.returncode != 0:
            self.stop()
            raise RuntimeError(f"initdb: {r.returncode}: {r.stdout[-500:]}{r.stderr[-500:]}")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", "--", os.path.join(bin_dir, "postgres"), "-D", data, "-p", str(port), "-k", self.dir,
             "-c", "listen_addresses=127.0.0.1", "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning"],
            cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **self._as())
        log: List[str] = []
        ready = threading.Event()

        def read(stream: Any) -> None:
            # Read the server's log to its end, so that it never blocks on the pipe.
            for line in stream:
                if len(log) < 1000:
                    log.append(line)
                if "ready to accept connections" in line:
                    ready.set()

        threading.Thread(target=read, args=(self.proc.stderr,), daemon=True).start()
        deadline = time.monotonic() + 120
        while not ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("postgres did not start: " + "".join(log[-5:]))
        self.dsn = f"postgres://ioh:{pw}@127.0.0.1:{port}/postgres?sslmode=disable"
        return self.dsn

    @staticmethod
    def sweep() -> None:
        """Removes the clusters of test processes killed before they could
        stop their server (as pgtest does): a directory whose postmaster is
        gone, or that never got one and is an hour old."""
        for d in glob.glob(os.path.join(tempfile.gettempdir(), "io-harness-pg-*")):
            try:
                with open(os.path.join(d, "data", "postmaster.pid")) as f:
                    pid = int(f.readline().strip() or 0)
            except (OSError, ValueError):
                try:
                    if time.time() - os.stat(d).st_mtime > 3600:
                        shutil.rmtree(d, ignore_errors=True)
                except OSError:
                    pass
                continue
            if pid <= 0:
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                shutil.rmtree(d, ignore_errors=True)
            except PermissionError:
                pass  # alive, another user's

    def stop(self) -> None:
        if self.proc is not None:
            # SIGQUIT is the immediate shutdown: the cluster is thrown away.
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""
