"""Tests of the Python binding against the real library (unittest; pytest runs them too)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import io_harness  # noqa: E402
from support import HANG_GUARD, HOUR_MS, fixture, fixtures, library_path, slow_spec  # noqa: E402

LIB = library_path()


def kinds(events):
    return [e["kind"] for e in events]


class Base(unittest.TestCase):
    """Every test closes its harnesses and then proves, through
    debug.stats, that every string the library handed out was freed."""

    def setUp(self) -> None:
        self.harnesses = []

    def harness(self, store: str = ":memory:", **kw) -> io_harness.Harness:
        h = io_harness.Harness(store, library=LIB, **kw)
        self.harnesses.append(h)
        return h

    def tearDown(self) -> None:
        for h in self.harnesses:
            h.close()
        stats = io_harness.debug_stats(library=LIB)
        self.assertEqual(stats["strings_live"], 0, f"strings not freed: {stats}")
        self.assertEqual(stats["runs"], 0, f"runs left: {stats}")


class TestBasics(Base):
    def test_version_and_abi(self) -> None:
        v = io_harness.version(library=LIB)
        self.assertEqual(v["abi"]["major"], io_harness.ABI_MAJOR)
        self.assertIn("run.start", v["methods"])
        self.assertIn("approval_pending", v["event_kinds"])
        self.assertEqual(len(v["error_codes"]), 11)

    def test_bad_json_is_a_typed_error(self) -> None:
        lib = io_harness.load(LIB)
        env = lib.call_raw(b"{not json")
        self.assertFalse(env["ok"])
        self.assertEqual(env["error"]["code"], "invalid_json")
        with self.assertRaises(io_harness.UnknownMethod) as cm:
            io_harness.call("no.such.method", library=LIB)
        self.assertEqual(cm.exception.code, "unknown_method")
        h = self.harness()
        with self.assertRaises(io_harness.InvalidArgument) as cm:
            h.start({"task": {"goal": ""}, "provider": {"name": "scripted"}})
        self.assertIn("goal", cm.exception.message)
        with self.assertRaises(io_harness.InvalidArgument):
            h.start("{\"task\": 1}")
        with self.assertRaises(io_harness.NotFound):
            h.resolve("run_nope", "apr_nope", "approve")

    def test_policy_explain(self) -> None:
        v = io_harness.policy_explain("default", "read", ".env", library=LIB)
        self.assertEqual((v["effect"], v["layer"]), ("deny", "builtin-secrets"))
        with self.assertRaises(io_harness.InvalidArgument):
            io_harness.policy_explain("default", "delete", "x", library=LIB)

    def test_sandbox_backends(self) -> None:
        backends = io_harness.sandbox_backends(library=LIB)
        names = [b["name"] for b in backends]
        self.assertIn("host", names)
        for b in backends:
            self.assertEqual(b["available"], "enforcement" in b, b)

    def test_load_is_once_per_process(self) -> None:
        self.assertIs(io_harness.load(LIB), io_harness.load())
        with self.assertRaises(io_harness.LibraryNotFound):
            io_harness.load("/nonexistent/libio_harness.so.1")


class TestRuns(Base):
    def test_scripted_run_to_success(self) -> None:
        h = self.harness(os.path.join(tempfile.mkdtemp(), "trace.db"))
        seen = []
        res = h.run(fixture("success").spec(), on_event=seen.append, timeout=30)
        self.assertTrue(res.ok, res)
        self.assertEqual(res.status, "ok")
        self.assertEqual(kinds(seen), fixture("success").golden)
        self.assertEqual(res.events[-1]["kind"], "done")
        self.assertIn("outcome: success", h.trace(res.run_id, "text"))
        self.assertEqual(h.trace(res.run_id)["run"]["id"], res.run_id)
        self.assertEqual([r["id"] for r in h.runs()], [res.run_id])

    def test_approval_callback(self) -> None:
        h = self.harness()
        asked = []

        def approver(req):
            asked.append(req)
            return io_harness.Decision.approve()

        res = h.run(fixture("approve").spec(), approver=approver, timeout=30)
        self.assertTrue(res.ok, res)
        self.assertEqual(len(asked), 1)
        self.assertEqual((asked[0]["act"], asked[0]["target"]), ("write", "config.toml"))
        self.assertIn("+mode = \"on\"", asked[0]["shown"])

    def test_defer_then_resolve(self) -> None:
        store = os.path.join(tempfile.mkdtemp(), "trace.db")
        f = fixture("defer_resume")
        spec = f.spec()
        h = self.harness(store)
        first = h.run(spec, approver=lambda req: io_harness.Decision.defer(), timeout=30)
        self.assertEqual(first.outcome_kind, "awaiting_approval")
        request_id = first.outcome["request_id"]
        h.close()
        # Another harness over the same store, as another process would.
        h2 = self.harness(store)
        second = h2.resume_with_decision(first.run_id, request_id, "approve", spec).wait(30)
        self.assertTrue(second.ok, second)
        self.assertEqual(second.run_id, first.run_id)
        with self.assertRaises(io_harness.Conflict):
            h2.resume_with_decision(first.run_id, request_id, "approve", spec)

    def test_resolve_from_another_thread(self) -> None:
        h = self.harness()
        # approvals="host": no approver, the caller answers from the events.
        run = h.start(fixture("approve").spec(), approvals="host")
        got = []
        for ev in run.events(timeout=30):
            got.append(ev["kind"])
            if ev["kind"] == "approval_pending":
                t = threading.Thread(target=run.resolve, args=(ev["request_id"], {"kind": "approve"}))
                t.start()
                t.join(10)
        self.assertTrue(run.wait().ok)
        self.assertEqual(got, fixture("approve").golden)

    def test_cancel_midway(self) -> None:
        """The model's turn takes an hour: the run ends (within the guard,
        far from the second it takes) only if the cancel interrupted it."""
        h = self.harness()
        run = h.start(slow_spec(latency_ms=HOUR_MS))
        for ev in run.events(timeout=HANG_GUARD):
            if ev["kind"] == "step_started":
                run.cancel()
        res = run.wait(HANG_GUARD)
        self.assertEqual(res.status, "cancelled")
        self.assertEqual(res.outcome_kind, "cancelled")

    def test_budget_then_resume(self) -> None:
        h = self.harness()
        spec = fixture("step_cap").spec()
        res = h.run(spec, timeout=30)
        self.assertEqual(res.outcome_kind, "verification_failed")
        again = h.resume(res.run_id, spec, budgets={"max_steps": 3}).wait(30)
        self.assertTrue(again.ok, again)

    def test_close_ends_waiters(self) -> None:
        h = io_harness.Harness(library=LIB)
        run = h.start(slow_spec())
        h.close()
        with self.assertRaises(io_harness.HarnessError):
            for ev in run.events(timeout=10):
                if ev["kind"] == "done":
                    break
            else:
                raise io_harness.HarnessError("unavailable", "ended")
        with self.assertRaises(io_harness.HarnessError):
            h.start(slow_spec())


class TestFixtures(Base):
    def test_fixtures_match_golden(self) -> None:
        for f in fixtures():
            with self.subTest(f.name):
                h = self.harness()
                spec = f.spec()
                approver = (lambda d: (lambda req: d))(f.approve) if f.approve else None
                res = h.run(spec, approver=approver, timeout=30)
                got = kinds(res.events)
                if f.resume:
                    self.assertEqual(res.outcome_kind, "awaiting_approval")
                    again = h.resume_with_decision(res.run_id, res.outcome["request_id"], f.resume, spec).wait(30)
                    got += kinds(again.events)
                self.assertEqual(got, f.golden)


class TestAsync(Base):
    def test_run_async_with_async_approver(self) -> None:
        h = self.harness()

        async def approver(req):
            await asyncio.sleep(0.01)
            return io_harness.Decision.approve()

        async def main():
            seen = []
            res = await asyncio.wait_for(h.run_async(fixture("approve").spec(), approver=approver, on_event=seen.append), 30)
            return res, seen

        res, seen = asyncio.run(main())
        self.assertTrue(res.ok, res)
        self.assertEqual(kinds(seen), fixture("approve").golden)

    def test_concurrent_async_runs(self) -> None:
        h = self.harness()

        async def main():
            runs = [h.start(fixture("success").spec()) for _ in range(5)]
            return await asyncio.wait_for(asyncio.gather(*(r.result() for r in runs)), 30)

        results = asyncio.run(main())
        self.assertTrue(all(r.ok for r in results), results)
        self.assertEqual(len({r.run_id for r in results}), 5)


if __name__ == "__main__":
    unittest.main()
