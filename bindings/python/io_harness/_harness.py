"""Harness, Run and their results: the typed API over the JSON methods."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import json
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterator,
    List,
    Optional,
    Union,
)

from ._lib import Library, load
from .errors import HarnessError, error_from

#: An event: the JSON object docs/abi.md describes, decoded.
Event = Dict[str, Any]

#: What an approver may return: a Decision, a decision object, "approve" /
#: "deny" / "defer", or a bool (True approves, False denies).
DecisionLike = Union["Decision", Dict[str, Any], str, bool]

#: An approver receives the approval request (approve.Request as a dict:
#: id, run_id, step, tool, act, target, content, shown, hash, rule, layer).
Approver = Callable[[Dict[str, Any]], Union[DecisionLike, Awaitable[DecisionLike]]]

# How long one blocking wait lasts before Python gets control back (so that
# Ctrl-C is handled promptly), and how many events one poll takes.
_SLICE = 0.1
_POLL_MS = 100
_BATCH = 1000


@dataclass
class Decision:
    """An answer to an approval request (approve.Decision)."""

    kind: str
    reason: Optional[str] = None
    rewrite: Optional[Dict[str, Any]] = None
    remember: Optional[List[Dict[str, Any]]] = None

    @classmethod
    def approve(cls, rewrite: Optional[Dict[str, Any]] = None, remember: Optional[List[Dict[str, Any]]] = None) -> "Decision":
        return cls("approve", rewrite=rewrite, remember=remember)

    @classmethod
    def deny(cls, reason: str = "") -> "Decision":
        return cls("deny", reason=reason or None)

    @classmethod
    def defer(cls) -> "Decision":
        return cls("defer")

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"kind": self.kind}
        if self.reason:
            out["reason"] = self.reason
        if self.rewrite:
            out["rewrite"] = self.rewrite
        if self.remember:
            out["remember"] = self.remember
        return out


def _decision(d: DecisionLike) -> Dict[str, Any]:
    if isinstance(d, Decision):
        return d.to_json()
    if isinstance(d, bool):
        return {"kind": "approve"} if d else {"kind": "deny", "reason": "denied by the approver"}
    if isinstance(d, str):
        return {"kind": d}
    if isinstance(d, dict):
        return d
    raise TypeError(f"an approver returns a Decision, a dict, a str or a bool, not {type(d).__name__}")


@dataclass
class RunResult:
    """How a run ended: its done event, decoded."""

    run: int
    run_id: str
    #: "ok", "cancelled" or "error".
    status: str
    #: The outcome (kind, steps, usage, cost, reason, request_id...), when
    #: the run reached one.
    outcome: Optional[Dict[str, Any]] = None
    #: Why the run could not be driven (status "error").
    error: Optional[HarnessError] = None
    remembered: List[Dict[str, Any]] = field(default_factory=list)
    #: Every event of the run, done included.
    events: List[Event] = field(default_factory=list)

    @property
    def outcome_kind(self) -> Optional[str]:
        return self.outcome.get("kind") if self.outcome else None

    @property
    def ok(self) -> bool:
        """True when the run succeeded."""
        return self.outcome_kind == "success"

    @classmethod
    def from_done(cls, ev: Event, events: List[Event]) -> "RunResult":
        err = error_from(ev["error"]) if ev.get("error") else None
        return cls(
            run=int(ev.get("run", 0)),
            run_id=str(ev.get("run_id", "")),
            status=str(ev.get("status", "")),
            outcome=ev.get("outcome"),
            error=err,
            remembered=list(ev.get("remembered") or []),
            events=events,
        )


_END = object()


class Run:
    """A run driven by a :class:`Harness`. Its events are read with
    :meth:`events` (or :meth:`aevents` in asyncio), and :meth:`wait` returns
    its :class:`RunResult`. Approval requests go to the run's approver when
    it has one; otherwise read them from the events and call
    :meth:`resolve`. Thread-safe."""

    def __init__(self, harness: "Harness", handle: int, run_id: str, approver: Optional[Approver]) -> None:
        self.harness = harness
        self.handle = handle
        self.run_id = run_id
        self.approver = approver
        self._q: "queue.Queue[Any]" = queue.Queue()
        self._lock = threading.Lock()
        self._aloop: Optional[asyncio.AbstractEventLoop] = None
        self._aq: Optional["asyncio.Queue[Any]"] = None
        self._seen: List[Event] = []
        self._result: Optional[RunResult] = None
        self._ended = False

    # Called by the harness's poller thread.
    def _deliver(self, ev: Any) -> None:
        with self._lock:
            if self._aq is not None and self._aloop is not None:
                try:
                    self._aloop.call_soon_threadsafe(self._aq.put_nowait, ev)
                except RuntimeError:  # the loop is closed
                    pass
            else:
                self._q.put(ev)

    def resolve(self, request_id: str, decision: DecisionLike) -> str:
        """Answers an approval request of this run; returns "delivered",
        "stored" (an early answer) or "already_resolved"."""
        return self.harness.resolve(self.run_id, request_id, decision)

    def cancel(self) -> None:
        """Cancels the run; its done event still arrives."""
        self.harness._lib.cancel(self.handle)

    def _handle(self, ev: Event) -> None:
        self._seen.append(ev)
        if ev.get("kind") == "approval_pending" and self.approver is not None:
            d = self.approver(ev.get("request") or {})
            if inspect.isawaitable(d):
                raise TypeError("an async approver needs the asyncio API (Harness.run_async or Run.aevents)")
            self.resolve(ev["request_id"], d)  # type: ignore[arg-type]
        if ev.get("kind") == "done":
            self._result = RunResult.from_done(ev, self._seen)

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """Yields the run's events, up to and including its done event.

        Waits in short slices, so Ctrl-C interrupts it promptly. A
        ``timeout`` (seconds) bounds the whole iteration (TimeoutError)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.run_id}: no done event within {timeout}s")
            try:
                ev = self._q.get(timeout=_SLICE)
            except queue.Empty:
                self.harness._check_poller()
                continue
            if ev is _END:
                self._ended = True
                raise HarnessError("unavailable", f"harness closed before run {self.run_id} ended")
            self._handle(ev)
            yield ev
            if ev.get("kind") == "done":
                self._ended = True

    def wait(self, timeout: Optional[float] = None) -> RunResult:
        """Waits for the run to end (answering approvals with the run's
        approver) and returns its result."""
        for _ in self.events(timeout):
            pass
        assert self._result is not None
        return self._result

    async def aevents(self) -> AsyncIterator[Event]:
        """The asyncio form of :meth:`events`; an async approver is awaited.

        Use it in ``async with contextlib.aclosing(run.aevents()) as it``
        when you may break out early."""
        loop = asyncio.get_running_loop()
        aq: "asyncio.Queue[Any]" = asyncio.Queue()
        with self._lock:
            # Events already delivered to the thread queue move over first.
            while True:
                try:
                    aq.put_nowait(self._q.get_nowait())
                except queue.Empty:
                    break
            self._aloop, self._aq = loop, aq
        try:
            while not self._ended:
                ev = await aq.get()
                if ev is _END:
                    self._ended = True
                    raise HarnessError("unavailable", f"harness closed before run {self.run_id} ended")
                self._seen.append(ev)
                if ev.get("kind") == "approval_pending" and self.approver is not None:
                    d = self.approver(ev.get("request") or {})
                    if inspect.isawaitable(d):
                        d = await d
                    self.resolve(ev["request_id"], d)  # type: ignore[arg-type]
                if ev.get("kind") == "done":
                    self._result = RunResult.from_done(ev, self._seen)
                    self._ended = True
                yield ev
        finally:
            with self._lock:
                # Hand undelivered events back to the thread queue.
                while not aq.empty():
                    self._q.put(aq.get_nowait())
                self._aloop, self._aq = None, None

    async def result(self) -> RunResult:
        """The asyncio form of :meth:`wait`."""
        async for _ in self.aevents():
            pass
        assert self._result is not None
        return self._result


_open: "weakref.WeakSet[Harness]" = weakref.WeakSet()


class Harness:
    """A harness over one store: a file path, or ``":memory:"``.

    Runs started on it share one event queue, drained by one poller thread
    that the harness owns; :meth:`close` (or leaving a ``with`` block, or
    interpreter exit) cancels the runs and joins the thread.
    """

    def __init__(
        self,
        store: str = ":memory:",
        *,
        library: Optional[str] = None,
        use_environment: bool = False,
        queue_size: Optional[int] = None,
    ) -> None:
        self._lib: Library = load(library)
        params: Dict[str, Any] = {"store": store}
        if use_environment:
            params["use_environment"] = True
        if queue_size:
            params["queue_size"] = queue_size
        self.handle: int = self._lib.call("harness.open", params)["harness"]
        self.store = store
        self._lock = threading.Lock()
        self._runs: Dict[int, Run] = {}
        self._orphans: Dict[int, List[Event]] = {}
        self._closed = False
        self._poller: Optional[threading.Thread] = None
        self._poller_error: Optional[BaseException] = None
        _open.add(self)

    # -- runs -----------------------------------------------------------

    def _begin(self, method: str, params: Dict[str, Any], approver: Optional[Approver]) -> Run:
        if self._closed:
            raise HarnessError("unavailable", "the harness is closed")
        self._ensure_poller()
        res = self._lib.call(method, dict(params, harness=self.handle))
        run = Run(self, int(res["run"]), str(res["run_id"]), approver)
        with self._lock:
            self._runs[run.handle] = run
            for ev in self._orphans.pop(run.handle, []):
                run._deliver(ev)
        return run

    @staticmethod
    def _spec(spec: Union[str, bytes, Dict[str, Any]]) -> Any:
        if isinstance(spec, (str, bytes)):
            return json.loads(spec)
        return spec

    def start(self, spec: Union[str, bytes, Dict[str, Any]], *, approver: Optional[Approver] = None, approvals: str = "host") -> Run:
        """Starts a run of a spec (harness.Spec as a dict or JSON text) and
        returns at once. ``approvals`` may be "host" (ask the approver, or
        wait for :meth:`Run.resolve`), "approve", "deny" or "defer"."""
        p: Dict[str, Any] = {"spec": self._spec(spec)}
        if approvals != "host":
            p["approvals"] = approvals
        return self._begin("run.start", p, approver)

    def run(
        self,
        spec: Union[str, bytes, Dict[str, Any]],
        *,
        approver: Optional[Approver] = None,
        on_event: Optional[Callable[[Event], None]] = None,
        timeout: Optional[float] = None,
    ) -> RunResult:
        """Runs a spec to its end and returns the result. Ctrl-C (or any
        exception) cancels the run before it propagates."""
        run = self.start(spec, approver=approver)
        return self._follow(run, on_event, timeout)

    def _follow(self, run: Run, on_event: Optional[Callable[[Event], None]], timeout: Optional[float]) -> RunResult:
        try:
            for ev in run.events(timeout):
                if on_event is not None:
                    on_event(ev)
        except BaseException:
            try:
                run.cancel()
            except Exception:
                pass
            raise
        assert run._result is not None
        return run._result

    async def run_async(
        self,
        spec: Union[str, bytes, Dict[str, Any]],
        *,
        approver: Optional[Approver] = None,
        on_event: Optional[Callable[[Event], Any]] = None,
    ) -> RunResult:
        """The asyncio form of :meth:`run`; approver and on_event may be
        coroutines. Cancelling the task cancels the run."""
        run = self.start(spec, approver=approver)
        try:
            async for ev in run.aevents():
                if on_event is not None:
                    r = on_event(ev)
                    if inspect.isawaitable(r):
                        await r
        except BaseException:
            try:
                run.cancel()
            except Exception:
                pass
            raise
        assert run._result is not None
        return run._result

    def resume(
        self,
        run_id: str,
        spec: Union[str, bytes, Dict[str, Any]],
        *,
        budgets: Optional[Dict[str, Any]] = None,
        reopen: bool = False,
        approver: Optional[Approver] = None,
    ) -> Run:
        """Continues a stored run (run.resume): ``budgets`` replaces its
        budgets; ``reopen`` drives an escalated or cancelled run again."""
        p: Dict[str, Any] = {"run_id": run_id, "spec": self._spec(spec)}
        if budgets is not None:
            p["budgets"] = budgets
        if reopen:
            p["reopen"] = True
        return self._begin("run.resume", p, approver)

    def resume_with_decision(
        self,
        run_id: str,
        request_id: str,
        decision: DecisionLike,
        spec: Union[str, bytes, Dict[str, Any]],
        *,
        budgets: Optional[Dict[str, Any]] = None,
        approver: Optional[Approver] = None,
    ) -> Run:
        """Answers the approval a stored run awaits (it ended
        awaiting_approval, here or in another process) and continues it."""
        p: Dict[str, Any] = {"run_id": run_id, "request_id": request_id, "decision": _decision(decision), "spec": self._spec(spec)}
        if budgets is not None:
            p["budgets"] = budgets
        return self._begin("run.resume_with_decision", p, approver)

    def resolve(self, run_id: str, request_id: str, decision: DecisionLike) -> str:
        """Answers an approval request of a live run, from any thread, at
        any time (an answer that comes before the request is kept)."""
        res = self._lib.call(
            "approval.resolve",
            {"harness": self.handle, "run_id": run_id, "request_id": request_id, "decision": _decision(decision)},
        )
        return str(res["state"])

    def cancel(self) -> None:
        """Cancels every live run of the harness."""
        self._lib.cancel(self.handle)

    # -- queries ----------------------------------------------------------

    def trace(self, run_id: str, format: str = "json") -> Any:
        """A run's trace: the trace object ("json") or its text ("text")."""
        res = self._lib.call("trace.get", {"harness": self.handle, "run_id": run_id, "format": format})
        return res["text"] if format == "text" else res["trace"]

    def runs(self, limit: int = 0) -> List[Dict[str, Any]]:
        """The store's runs, newest first."""
        p: Dict[str, Any] = {"harness": self.handle}
        if limit:
            p["limit"] = limit
        return list(self._lib.call("runs.list", p)["runs"])

    # -- the poller -------------------------------------------------------

    def _ensure_poller(self) -> None:
        with self._lock:
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll_loop, name=f"io_harness-poll-{self.handle}", daemon=True)
                self._poller.start()

    def _check_poller(self) -> None:
        if self._poller_error is not None:
            raise HarnessError("internal", f"the event poller failed: {self._poller_error!r}")

    def _poll_loop(self) -> None:
        try:
            while True:
                batch = self._lib.poll(self.handle, _POLL_MS, _BATCH)
                if batch is None:
                    if self._closed:
                        break
                    continue
                for ev in batch:
                    if ev.get("kind") == "closed":
                        return
                    h = int(ev.get("run", 0))
                    with self._lock:
                        run = self._runs.get(h)
                        if run is None:
                            self._orphans.setdefault(h, []).append(ev)
                            continue
                        if ev.get("kind") == "done":
                            del self._runs[h]
                    run._deliver(ev)
        except BaseException as e:  # noqa: BLE001 - reported to waiters
            self._poller_error = e
        finally:
            with self._lock:
                runs = list(self._runs.values())
                self._runs.clear()
            for run in runs:
                run._deliver(_END)

    # -- lifecycle --------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Cancels the runs, waits up to ``timeout`` seconds for them to
        end, and joins the poller thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        ms = int(timeout * 1000)
        deadline = time.monotonic() + timeout
        # Close in short slices so Ctrl-C is handled while we wait.
        st = self._lib.close(self.handle, min(ms, 100))
        while st == -3 and time.monotonic() < deadline:
            st = self._lib.close(self.handle, 100)
        if self._poller is not None and self._poller is not threading.current_thread():
            self._poller.join(max(0.0, deadline - time.monotonic()) + 1.0)
        _open.discard(self)

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "Harness":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)


@atexit.register
def _close_all() -> None:
    """At interpreter exit, close every open harness (cancel its runs,
    wait briefly), so that exit never hangs on a run."""
    for h in list(_open):
        try:
            h._lib.check()
        except Exception:
            continue  # a forked child: the parent owns these handles
        try:
            h.close(timeout=2.0)
        except Exception:
            pass
