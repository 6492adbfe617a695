"""Watching a run another process drives, and deciding its approvals from
here (run.watch, approval.decide); a fleet's methods on a file store; the
model catalogue and the store check (models.list, store.check)."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402
from support import HANG_GUARD, HOUR_MS, Postgres, fixture, library_path, slow_spec  # noqa: E402
from test_binding import Base, kinds  # noqa: E402

LIB = library_path()
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watch_child.py")


def store_file() -> str:
    return os.path.join(tempfile.mkdtemp(prefix="ioh-py-db-"), "trace.db")


class Driver:
    """watch_child.py: another process that drives a run which waits for a
    person (approvals="wait") over the store file."""

    def __init__(self, store: str, workspace: str) -> None:
        self.p = subprocess.Popen([sys.executable, CHILD, store, workspace], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line.startswith("RUN "):
            self.p.kill()
            _, err = self.p.communicate()
            raise AssertionError(f"the driver did not start its run: {line!r}\n{err}")
        self.run_id = line.split()[1]

    def finish(self, timeout: float = 60) -> str:
        """The driver's last line ("DONE status outcome"), once it exited 0."""
        try:
            out, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
            raise AssertionError(f"the driver hung (killed after {timeout}s)\nstdout: {out}\nstderr: {err}")
        if self.p.returncode != 0:
            raise AssertionError(f"the driver exited {self.p.returncode}\nstdout: {out}\nstderr: {err}")
        return out.strip().splitlines()[-1]

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate()


class TestWatch(Base):
    def watch_and_decide(self, decision: str):
        """Another process drives a run that pauses for a person; this one
        watches it, sees the request, decides it, and follows the run to
        its end. Returns the watch's result, the driver's last line and the
        workspace."""
        store, ws = store_file(), tempfile.mkdtemp(prefix="ioh-py-")
        driver = Driver(store, ws)
        try:
            h = self.harness(store)
            run = h.watch(driver.run_id, poll_ms=50)
            self.assertTrue(run.watched)
            self.assertEqual(run.run_id, driver.run_id)
            pending = []
            for ev in run.events(timeout=60):
                if ev["kind"] == "approval_pending":
                    pending.append(ev)
                    req = ev["request"]
                    self.assertEqual((req["act"], req["target"], req["run_id"]), ("write", "config.toml", driver.run_id))
                    self.assertIn('+mode = "on"', req["shown"])
                    self.assertEqual(h.decide(driver.run_id, ev["request_id"], decision), "decided")
                    # One decision per request, from any process.
                    with self.assertRaises(io_harness.Conflict):
                        run.decide(ev["request_id"], "deny" if decision == "approve" else "approve")
            res = run.wait()
            self.assertEqual(len(pending), 1, kinds(res.events))
            last = driver.finish()
        finally:
            driver.kill()
        # The watcher saw every stored event once, in order.
        seqs = [e["seq"] for e in res.events if e.get("seq")]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)))
        return res, last, ws

    def test_watch_and_approve_from_another_process(self) -> None:
        res, last, ws = self.watch_and_decide("approve")
        self.assertTrue(res.ok, res)
        self.assertEqual(res.status, "ok")
        self.assertEqual(last, "DONE ok success")
        with open(os.path.join(ws, "config.toml")) as f:
            self.assertEqual(f.read(), 'mode = "on"\n')

    def test_watch_and_deny_from_another_process(self) -> None:
        # The negative control: the same run, denied, writes nothing.
        res, last, ws = self.watch_and_decide("deny")
        self.assertFalse(res.ok, res)
        self.assertEqual(res.status, "ok")
        self.assertEqual(last, f"DONE ok {res.outcome_kind}")
        self.assertFalse(os.path.exists(os.path.join(ws, "config.toml")), os.listdir(ws))
        self.assertIn("approval_resolved", kinds(res.events))

    def test_a_watch_approver_decides(self) -> None:
        # Two harnesses over one store file, as two processes would open it:
        # the watch's approver is answered with approval.decide.
        store, ws = store_file(), tempfile.mkdtemp(prefix="ioh-py-")
        driver, watcher = self.harness(store), self.harness(store)
        driven = driver.start(fixture("defer_resume").spec(ws), approvals="wait")
        asked = []

        def approver(req):
            asked.append(req)
            return io_harness.Decision.approve()

        res = watcher.watch(driven.run_id, approver=approver, poll_ms=50).wait(60)
        self.assertTrue(res.ok, res)
        self.assertEqual([r["target"] for r in asked], ["config.toml"])
        self.assertTrue(driven.wait(60).ok)
        with open(os.path.join(ws, "config.toml")) as f:
            self.assertEqual(f.read(), 'mode = "on"\n')

    def test_cancel_stops_watching_not_the_run(self) -> None:
        store, ws = store_file(), tempfile.mkdtemp(prefix="ioh-py-")
        driver, watcher = self.harness(store), self.harness(store)
        driven = driver.start(fixture("defer_resume").spec(ws), approvals="wait")
        run = watcher.watch(driven.run_id, poll_ms=50)
        request_id = ""
        for ev in run.events(timeout=60):
            if ev["kind"] == "approval_pending":
                request_id = ev["request_id"]
                run.cancel()
        res = run.wait()
        self.assertEqual(res.status, "cancelled")
        self.assertTrue(request_id)
        # The run still waits; a decision from here finishes it.
        time.sleep(0.3)
        self.assertFalse(os.path.exists(os.path.join(ws, "config.toml")))
        self.assertEqual(watcher.decide(driven.run_id, request_id, io_harness.Decision.defer()), "pending")
        self.assertEqual(watcher.decide(driven.run_id, request_id, io_harness.Decision.approve()), "decided")
        self.assertTrue(driven.wait(60).ok)

    def test_watch_a_finished_run_in_asyncio(self) -> None:
        store = store_file()
        h = self.harness(store)
        first = h.run(fixture("success").spec(), timeout=30)

        async def main():
            return await asyncio.wait_for(self.harness(store).watch(first.run_id).result(), 30)

        res = asyncio.run(main())
        self.assertTrue(res.ok, res)
        self.assertEqual(res.run_id, first.run_id)
        self.assertEqual(kinds(res.events)[0], "run_started")
        self.assertEqual(kinds(res.events)[-2:], ["outcome", "done"])

    def test_watch_and_decide_errors(self) -> None:
        h = self.harness(store_file())
        with self.assertRaises(io_harness.NotFound):
            h.watch("run_nope")
        with self.assertRaises(io_harness.InvalidArgument):
            h.watch("run_nope", poll_ms=-1)
        with self.assertRaises(io_harness.NotFound):
            h.decide("run_nope", "apr_nope", "approve")
        with self.assertRaises(io_harness.InvalidArgument):
            h.decide("run_nope", "apr_nope", "maybe")


class TestFleetOnAFile(Base):
    """run.submit and run.fetch need a harness over a
    postgres:// store; over a file each is a typed error that says so."""

    def test_fleet_methods_need_postgres(self) -> None:
        h = self.harness(store_file())
        calls = {
            "submit": lambda: h.submit(fixture("success").spec(), upload=True),
            "fetch": lambda: h.fetch("run_x", tempfile.mkdtemp()),
        }
        for name, fn in calls.items():
            with self.subTest(name):
                with self.assertRaises(io_harness.InvalidArgument) as cm:
                    fn()
                self.assertIn("postgres://", cm.exception.message)
                self.assertFalse(cm.exception.retryable)
        self.assertEqual(h.runs(), [])


class TestFleetOnPostgres(Base):
    """The same methods over a postgres:// store, on a throwaway server (as
    internal/pgtest starts one; skipped, saying why, without PostgreSQL).
    No worker runs here: a worker is the io-harness CLI or Go, not the C
    ABI, so a submitted run stays queued and no run's result is ever
    stored for fetch."""

    pg: Postgres
    dsn: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.pg = Postgres()
        cls.dsn = cls.pg.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.pg.stop()

    def fleet(self) -> io_harness.Harness:
        # The server logs that it is ready a moment before it serves.
        deadline = time.monotonic() + 30
        while True:
            try:
                return self.harness(self.dsn)
            except io_harness.Unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def test_submit_decide_and_fetch(self) -> None:
        h = self.fleet()
        spec = fixture("defer_resume").spec()
        sub = h.submit(spec, upload=True)
        self.assertEqual(sub["state"], "queued")
        self.assertTrue(sub["run_id"].startswith("run_"), sub)
        self.assertEqual([r.get("state") for r in h.runs() if r["id"] == sub["run_id"]], ["queued"])
        # A submitted spec is stored: one with a key is refused.
        keyed = json.loads(json.dumps(spec))
        keyed["provider"]["api_key"] = "sk-not-a-key"
        with self.assertRaises(io_harness.InvalidArgument) as cm:
            h.submit(keyed)
        self.assertEqual(cm.exception.details.get("field"), "spec.provider.api_key")
        # No worker has finished it: there is no result to fetch.
        with self.assertRaises(io_harness.NotFound):
            h.fetch(sub["run_id"], tempfile.mkdtemp())
        with self.assertRaises(io_harness.NotFound):
            h.decide(sub["run_id"], "apr_nope", "approve")
        # A run this store holds that was not submitted has no worker: its
        # decision is recorded for its next driver, once (queueing it would
        # strand the run: no worker drives what was not submitted). The
        # queued path (a submitted run a worker paused) needs a worker,
        # which the ABI does not run: cmd/io-harness
        # TestFleetApprovalFromAnotherProcess covers it.
        paused = [h.run(fixture("defer_resume").spec(), approvals="defer", timeout=60) for _ in range(2)]
        for res in paused:
            self.assertEqual(res.outcome_kind, "awaiting_approval", res)
        first, second = ((r.run_id, r.outcome["request_id"]) for r in paused if r.outcome is not None)
        self.assertEqual(h.decide(*first, "approve", by="binding-tests"), "decided")
        with self.assertRaises(io_harness.Conflict):
            h.decide(*first, io_harness.Decision.deny("changed my mind"))
        self.assertEqual(h.trace(first[0]).get("queue", []), [])
        # A defer changes nothing.
        self.assertEqual(h.decide(*second, "defer"), "pending")
        self.assertEqual(h.decide(*second, "approve"), "decided")


class TestCatalogueAndStore(Base):
    def test_models_list(self) -> None:
        cat = io_harness.models_list(library=LIB)
        self.assertTrue(cat["as_of"])
        self.assertEqual(cat["override"], "")
        keys = [(m["vendor"], m["id"]) for m in cat["models"]]
        self.assertEqual(keys, sorted(keys))
        gpt = next(m for m in cat["models"] if (m["vendor"], m["id"]) == ("openai", "gpt-4o"))
        self.assertEqual((gpt["context_window"], gpt["max_output_tokens"], gpt["tools"]), (128000, 16384, True))
        self.assertEqual(gpt.get("price", {}).get("input"), 2.5)

    def test_models_list_with_an_override(self) -> None:
        d = tempfile.mkdtemp()
        path = os.path.join(d, "models.json")
        with open(path, "w") as f:
            json.dump({"version": 1, "models": [{"vendor": "openai_compatible", "id": "team/llama", "context_window": 8192,
                                                 "price": {"input": 0.5, "output": 0.5}, "tools": True}]}, f)
        cat = io_harness.models_list(file=path, library=LIB)
        self.assertEqual(cat["override"], path)
        self.assertIn(("openai_compatible", "team/llama", 8192), [(m["vendor"], m["id"], m.get("context_window")) for m in cat["models"]])
        # Negative control: the built-in catalogue has no such model.
        self.assertNotIn("team/llama", [m["id"] for m in io_harness.models_list(library=LIB)["models"]])
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        with self.assertRaises(io_harness.InvalidArgument) as cm:
            io_harness.models_list(file=bad, library=LIB)
        self.assertEqual(cm.exception.details.get("field"), "models")

    def test_store_check(self) -> None:
        store = store_file()
        h = self.harness(store)
        self.assertTrue(h.run(fixture("success").spec(), timeout=30).ok)
        chk = io_harness.store_check(store, library=LIB)
        self.assertTrue(chk["ok"], chk)
        self.assertEqual(chk["report"]["integrity"], ["ok"])
        self.assertEqual(chk["report"]["path"], store)
        self.assertEqual(chk["report"]["runs"], {"finished": 1})
        self.assertIn(store, chk["report"]["files"])
        self.assertIn("integrity: ok", chk["text"])
        with self.assertRaises(io_harness.NotFound):
            io_harness.store_check(os.path.join(tempfile.mkdtemp(), "none.db"), library=LIB)
        with self.assertRaises(io_harness.InvalidArgument):
            io_harness.store_check("postgres://u@127.0.0.1:9/db", library=LIB)
        # Negative control: a file that is no store is refused, not passed.
        junk = os.path.join(tempfile.mkdtemp(), "junk.db")
        with open(junk, "wb") as f:
            f.write(b"not a database" * 512)
        with self.assertRaises(io_harness.HarnessError):
            io_harness.store_check(junk, library=LIB)


if __name__ == "__main__":
    unittest.main()


class TestOpenOptions(Base):
    """harness.open's read_only and live, as the binding passes them."""

    def test_read_only(self) -> None:
        path = store_file()
        with io_harness.Harness(path, library=LIB) as h:
            self.assertFalse(h.live)
            self.assertTrue(h.run(fixture("success").spec(), timeout=60).ok)
        with io_harness.Harness(path, library=LIB, read_only=True) as ro:
            self.assertEqual(len(ro.runs()), 1)
            # Nothing is written through a read-only harness: a run is
            # refused, as unavailable (the store is read-only).
            with self.assertRaises(io_harness.Unavailable):
                ro.run(fixture("success").spec(), timeout=60)
        self.assertEqual(len(self.harness(path).runs()), 1)
        # A file that is not a store is refused, and left as it was.
        junk = store_file()
        with open(junk, "wb"):
            pass
        with self.assertRaises(io_harness.HarnessError):
            io_harness.Harness(junk, library=LIB, read_only=True)
        self.assertEqual(os.path.getsize(junk), 0)

    def test_live(self) -> None:
        """A watcher of a run its live driver is in the middle of sees the
        step under way (step_started) before it commits: the model's turn
        takes an hour, so nothing of the step is in the store yet. The
        control is the same run driven without live: once its watcher has
        what is stored (run_started) and the driver is in the step, a
        moment more shows it nothing else (a loaded machine can only make
        it see less, never step_started)."""
        for live in (True, False):
            with self.subTest(live=live):
                path = store_file()
                with io_harness.Harness(path, library=LIB, live=live) as driver:
                    self.assertEqual(driver.live, live)
                    run = driver.start(slow_spec(latency_ms=HOUR_MS))
                    w = self.harness(path).watch(run.run_id, poll_ms=50)
                    seen = []
                    until = "step_started" if live else "run_started"
                    for ev in w.events(timeout=HANG_GUARD):
                        seen.append(ev["kind"])
                        if ev["kind"] == until:
                            break
                    if not live:
                        for ev in run.events(timeout=HANG_GUARD):
                            if ev["kind"] == "step_started":
                                break
                        try:
                            for ev in w.events(timeout=1):
                                seen.append(ev["kind"])
                        except TimeoutError:
                            pass
                    w.cancel()
                    run.cancel()
                    self.assertEqual("step_started" in seen, live, seen)
                    self.assertIn("run_started", seen)


# The holder a conflict names: the message of store.LeaseError.
HOLDER = re.compile(
    r"is driven by (?P<host>\S+) \(pid (?P<pid>\d+), since (?P<since>[^,]+), "
    r"lease generation (?P<generation>\d+), expires (?P<expires>[^)]+)\)"
)


def rfc3339(s: str) -> float:
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class TestLease(Base):
    def assertHolder(self, err: io_harness.Conflict, pid: int, asked: float) -> None:
        """The conflict names the lease as it is: the host and pid of the
        process that drives the run, since when that driver runs, the
        lease's generation, and an expiry still ahead of the moment it was
        asked."""
        self.assertFalse(err.retryable)
        m = HOLDER.search(err.message)
        self.assertIsNotNone(m, err.message)
        assert m is not None
        self.assertEqual(m["host"], socket.gethostname(), err.message)
        self.assertEqual(int(m["pid"]), pid, err.message)
        self.assertGreaterEqual(int(m["generation"]), 1, err.message)
        since, expires = rfc3339(m["since"]), rfc3339(m["expires"])
        # RFC 3339 in whole seconds: a second of slack each way.
        self.assertLessEqual(since, asked + 1, err.message)
        self.assertGreater(expires + 1, asked, f"the lease had expired when it was refused: {err.message}")
        self.assertLess(since, expires + 1, err.message)

    def test_resume_of_a_live_run_is_a_conflict(self) -> None:
        """A second harness resuming a run the first still drives gets
        Conflict, naming the holder (this process), and the first run goes
        on; the control is force=True, which takes the run over."""
        path = store_file()
        spec = slow_spec()
        with io_harness.Harness(path, library=LIB) as a, io_harness.Harness(path, library=LIB) as b:
            run = a.start(spec)
            for ev in run.events(timeout=60):
                if ev["kind"] == "step_started":
                    break
            with self.assertRaises(io_harness.Conflict) as cm:
                asked = time.time()
                b.resume(run.run_id, spec).wait(timeout=60)
            self.assertHolder(cm.exception, os.getpid(), asked)
            taken = b.resume(run.run_id, spec, force=True)
            for ev in taken.events(timeout=60):
                if ev["kind"] == "step_started":
                    break
            taken.cancel()
            run.cancel()

    def test_resume_of_a_run_another_process_drives(self) -> None:
        """The holder a conflict names is the process that drives the run:
        another process's pid, not this one's."""
        store = store_file()
        child = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(CHILD), "lease_child.py"), store],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            self.assertTrue(line.startswith("RUN "), f"the driver did not start its run: {line!r}")
            _, run_id, spec = line.split(" ", 2)
            h = self.harness(store)
            with self.assertRaises(io_harness.Conflict) as cm:
                asked = time.time()
                h.resume(run_id, json.loads(spec)).wait(timeout=60)
            self.assertNotEqual(child.pid, os.getpid())
            self.assertHolder(cm.exception, child.pid, asked)
        finally:
            child.kill()
            child.communicate()
