"""Harness, Run and their results: the typed API over the JSON methods."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import json
import os
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
    Sequence,
    Union,
    cast,
)

from . import types
from ._lib import Library, load
from ._results import DecideState, Fetched, Submitted
from ._tool import Tool, result_text
from .errors import HarnessError, Unavailable, error_from

#: An event: the JSON object docs/abi.md describes, decoded, typed by the
#: generated :data:`io_harness.types.Event` (narrow it on ``ev["kind"]``).
Event = types.Event

# An event as the poller decodes it, before it is handed out typed.
_Raw = Dict[str, Any]

#: What an approver may return: a Decision, a decision object, "approve" /
#: "deny" / "defer", or a bool (True approves, False denies).
DecisionLike = Union["Decision", Dict[str, Any], str, bool]

#: An approver receives the approval request (approve.Request as a dict:
#: id, run_id, step, tool, act, target, content, shown, hash, rule, layer).
#: An approver that raises denies the request (the reason names the
#: exception), in the sync and the asyncio API alike, as in Node and Go.
#: A run with no approver denies what its policy asks about, unless it was
#: started with ``approvals="host"`` (then read approval_pending events and
#: answer them with :meth:`Run.resolve`).
Approver = Callable[[Dict[str, Any]], Union[DecisionLike, Awaitable[DecisionLike]]]

# How long one blocking wait lasts before Python gets control back (so that
# Ctrl-C is handled promptly), and how many events one poll takes.
_SLICE = 0.1
_POLL_MS = 100
_BATCH = 1000
# How many host tool calls of one harness run at once on its threads.
_TOOL_THREADS = 8

#: A run spec: a :class:`io_harness.types.Spec` (or any dict), or its JSON text.
SpecLike = Union[types.Spec, str, bytes, Dict[str, Any]]


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
    outcome: Optional[types.Outcome] = None
    #: Why the run could not be driven (status "error").
    error: Optional[HarnessError] = None
    remembered: List[types.Rule] = field(default_factory=list)
    #: Every event of the run, done included.
    events: List[Event] = field(default_factory=list)

    @property
    def outcome_kind(self) -> Optional[types.OutcomeKind]:
        return self.outcome["kind"] if self.outcome else None

    @property
    def ok(self) -> bool:
        """True when the run succeeded."""
        return self.outcome_kind == "success"

    @classmethod
    def from_done(cls, ev: _Raw, events: List[_Raw]) -> "RunResult":
        err = error_from(ev["error"]) if ev.get("error") else None
        return cls(
            run=int(ev.get("run", 0)),
            run_id=str(ev.get("run_id", "")),
            status=str(ev.get("status", "")),
            outcome=cast(Optional[types.Outcome], ev.get("outcome")),
            error=err,
            remembered=list(ev.get("remembered") or []),
            events=cast(List[types.Event], events),
        )


_END = object()


class Run:
    """A run driven by a :class:`Harness` (or, from :meth:`Harness.watch`,
    followed while another process drives it). Its events are read with
    :meth:`events` (or :meth:`aevents` in asyncio), and :meth:`wait` returns
    its :class:`RunResult`. Approval requests go to the run's approver when
    it has one; otherwise read them from the events and call
    :meth:`resolve` (a watched run: :meth:`decide`). Thread-safe."""

    def __init__(
        self,
        harness: "Harness",
        handle: int,
        run_id: str,
        approver: Optional[Approver],
        tools: Optional[Dict[str, Tool]] = None,
        *,
        watched: bool = False,
    ) -> None:
        self.harness = harness
        self.handle = handle
        self.run_id = run_id
        self.approver = approver
        #: True for a run followed with :meth:`Harness.watch`: another
        #: process drives it, and its approvals are answered with
        #: :meth:`decide`.
        self.watched = watched
        self.tools: Dict[str, Tool] = dict(tools or {})
        # The event loop async tools of this run run on: run_async's, set
        # before the run starts so that no call can come first; else the
        # loop of aevents, once it iterates.
        self._tool_loop: Optional[asyncio.AbstractEventLoop] = None
        self._q: "queue.Queue[Any]" = queue.Queue()
        self._lock = threading.Lock()
        self._aloop: Optional[asyncio.AbstractEventLoop] = None
        self._aq: Optional["asyncio.Queue[Any]"] = None
        self._seen: List[_Raw] = []
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
        """Answers an approval request of this run, which this harness
        drives; returns "delivered", "stored" (an early answer) or
        "already_resolved". A watched run is answered with :meth:`decide`."""
        return self.harness.resolve(self.run_id, request_id, decision)

    def decide(self, request_id: str, decision: DecisionLike) -> DecideState:
        """Records a decision on a request the run waits on in the store
        (:meth:`Harness.decide`): how a watched run is answered."""
        return self.harness.decide(self.run_id, request_id, decision)

    def cancel(self) -> None:
        """Cancels the run (a watched run: stops watching it, and leaves
        the run alone); its done event still arrives."""
        self.harness._lib.cancel(self.handle)

    def _answer(self, ev: _Raw, d: Any) -> None:
        """Answers an approval (a watched run's with decide); a failed
        approver or a bad answer denies."""
        try:
            dec = _decision(d)
        except Exception as e:  # noqa: BLE001 - a bad answer is the approver's failure
            dec = {"kind": "deny", "reason": f"the approver failed: {e}"}
        try:
            if self.watched:
                self.decide(ev["request_id"], dec)
            else:
                self.resolve(ev["request_id"], dec)
        except HarnessError:
            pass  # the run ended meanwhile, or another process decided first

    def _approve(self, ev: _Raw) -> None:
        assert self.approver is not None
        try:
            d: Any = self.approver(ev.get("request") or {})
            if inspect.isawaitable(d):
                if hasattr(d, "close"):
                    d.close()
                raise TypeError("an async approver needs the asyncio API (Harness.run_async or Run.aevents)")
        except Exception as e:  # noqa: BLE001 - an approver that raises denies
            d = {"kind": "deny", "reason": f"the approver failed: {type(e).__name__}: {e}"}
        self._answer(ev, d)

    def _handle(self, ev: _Raw) -> None:
        self._seen.append(ev)
        if ev.get("kind") == "approval_pending" and self.approver is not None:
            self._approve(ev)
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
                raise Unavailable("unavailable", f"harness closed before run {self.run_id} ended")
            self._handle(ev)
            yield cast(types.Event, ev)
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
            if self._tool_loop is None:
                self._tool_loop = loop
        try:
            while not self._ended:
                ev = await aq.get()
                if ev is _END:
                    self._ended = True
                    raise Unavailable("unavailable", f"harness closed before run {self.run_id} ended")
                self._seen.append(ev)
                if ev.get("kind") == "approval_pending" and self.approver is not None:
                    try:
                        d: Any = self.approver(ev.get("request") or {})
                        if inspect.isawaitable(d):
                            d = await d
                    except Exception as e:  # noqa: BLE001 - an approver that raises denies
                        d = {"kind": "deny", "reason": f"the approver failed: {type(e).__name__}: {e}"}
                    self._answer(ev, d)
                if ev.get("kind") == "done":
                    self._result = RunResult.from_done(ev, self._seen)
                    self._ended = True
                yield cast(types.Event, ev)
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
        read_only: bool = False,
        live: bool = False,
    ) -> None:
        self._lib: Library = load(library)
        params: Dict[str, Any] = {"store": store}
        if use_environment:
            params["use_environment"] = True
        if queue_size:
            params["queue_size"] = queue_size
        if read_only:
            params["read_only"] = True
        if live:
            params["live"] = True
        opened = self._lib.call("harness.open", params)
        self.handle: int = opened["harness"]
        self.store = store
        #: True when the harness serves its runs' events as they happen to
        #: watchers in other processes on this host (``live=True``).
        self.live: bool = bool(opened.get("live", False))
        self._lock = threading.Lock()
        self._runs: Dict[int, Run] = {}
        self._orphans: Dict[int, List[_Raw]] = {}
        self._closed = False
        # _route is held while an event is routed to its run and handed
        # over, by the poller and by _adopt: a run's early events (those
        # that came before it was registered) are delivered before any
        # later one, from whichever thread.
        self._route = threading.Lock()
        # Host tool answers under way; close waits for them, so that none
        # reaches the library after the harness is gone.
        self._answering = 0
        self._answered = threading.Condition(self._lock)
        self._poller: Optional[threading.Thread] = None
        self._poller_error: Optional[BaseException] = None
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[threading.Thread] = None
        _open.add(self)

    # -- runs -----------------------------------------------------------

    def _begin(
        self,
        method: str,
        params: Dict[str, Any],
        approver: Optional[Approver],
        tools: Optional[Sequence[Union[Tool, Callable[..., Any]]]] = None,
        approvals: Optional[str] = None,
        tool_loop: Optional[asyncio.AbstractEventLoop] = None,
    ) -> Run:
        if self._closed:
            raise Unavailable("unavailable", "the harness is closed")
        byname: Dict[str, Tool] = {}
        for t in tools or ():
            tl = t if isinstance(t, Tool) else Tool(t)
            byname[tl.name] = tl
        p = dict(params, harness=self.handle)
        if byname:
            p["tools"] = [t.spec() for t in byname.values()]
        if approvals is None:
            # No approver: what the policy asks about is denied, as in Go.
            approvals = "host" if approver is not None else "deny"
        if approvals != "host":
            p["approvals"] = approvals
        self._ensure_poller()
        res = self._lib.call(method, p)
        run = Run(self, int(res["run"]), str(res["run_id"]), approver, byname)
        run._tool_loop = tool_loop
        return self._adopt(run)

    def _adopt(self, run: Run) -> Run:
        """Routes a new run handle's events to run, those that came first
        included."""
        with self._route:
            with self._lock:
                self._runs[run.handle] = run
                early = self._orphans.pop(run.handle, [])
                if any(ev.get("kind") == "done" for ev in early):
                    del self._runs[run.handle]
            for ev in early:
                if ev.get("kind") == "host_tool_call":
                    self._call_tool(run, ev)
                run._deliver(ev)
        return run

    @staticmethod
    def _spec(spec: SpecLike) -> Any:
        if isinstance(spec, (str, bytes)):
            return json.loads(spec)
        return spec

    def start(
        self,
        spec: SpecLike,
        *,
        approver: Optional[Approver] = None,
        approvals: Optional[str] = None,
        tools: Optional[Sequence[Union[Tool, Callable[..., Any]]]] = None,
    ) -> Run:
        """Starts a run of a spec (a :class:`io_harness.types.Spec` dict or
        JSON text) and returns at once. ``tools`` are host tools the model
        may call (:func:`io_harness.tool` functions). ``approvals`` may be
        "host" (the approver answers, or :meth:`Run.resolve`), "approve",
        "deny", "defer", or "wait" (defer, and instead of ending, wait paused
        until some process decides the request in the store:
        :meth:`decide`, from a :meth:`watch` of the run here or elsewhere);
        by default "host" with an approver and "deny" without one."""
        return self._begin("run.start", {"spec": self._spec(spec)}, approver, tools, approvals)

    def run(
        self,
        spec: SpecLike,
        *,
        approver: Optional[Approver] = None,
        on_event: Optional[Callable[[Event], None]] = None,
        timeout: Optional[float] = None,
        tools: Optional[Sequence[Union[Tool, Callable[..., Any]]]] = None,
        approvals: Optional[str] = None,
    ) -> RunResult:
        """Runs a spec to its end and returns the result. Ctrl-C (or any
        exception) cancels the run before it propagates."""
        run = self.start(spec, approver=approver, tools=tools, approvals=approvals)
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
        spec: SpecLike,
        *,
        approver: Optional[Approver] = None,
        on_event: Optional[Callable[[Event], Any]] = None,
        tools: Optional[Sequence[Union[Tool, Callable[..., Any]]]] = None,
        approvals: Optional[str] = None,
    ) -> RunResult:
        """The asyncio form of :meth:`run`; approver, on_event and the tools
        may be coroutines (an async tool runs on this event loop). Cancelling
        the task cancels the run."""
        run = self._begin("run.start", {"spec": self._spec(spec)}, approver, tools, approvals, asyncio.get_running_loop())
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
        spec: SpecLike,
        *,
        budgets: Optional[Dict[str, Any]] = None,
        reopen: bool = False,
        force: bool = False,
        approver: Optional[Approver] = None,
        tools: Optional[Sequence[Union[Tool, Callable[..., Any]]]] = None,
        approvals: Optional[str] = None,
    ) -> Run:
        """Continues a stored run (run.resume): ``budgets`` raises its
        budgets field by field; ``reopen`` drives an escalated or cancelled
        run again. A run another live process drives is :class:`Conflict`,
        naming the holder; ``force`` takes it over (the other driver's
        commits then land nowhere). Pass the run's host tools again."""
        p: Dict[str, Any] = {"run_id": run_id, "spec": self._spec(spec)}
        if budgets is not None:
            p["budgets"] = budgets
        if reopen:
            p["reopen"] = True
        if force:
            p["force"] = True
        return self._begin("run.resume", p, approver, tools, approvals)

    def resume_with_decision(
        self,
        run_id: str,
        request_id: str,
        decision: DecisionLike,
        spec: SpecLike,
        *,
        budgets: Optional[Dict[str, Any]] = None,
        approver: Optional[Approver] = None,
        tools: Optional[Sequence[Union[Tool, Callable[..., Any]]]] = None,
        approvals: Optional[str] = None,
    ) -> Run:
        """Answers the approval a stored run awaits (it ended
        awaiting_approval, here or in another process) and continues it."""
        p: Dict[str, Any] = {"run_id": run_id, "request_id": request_id, "decision": _decision(decision), "spec": self._spec(spec)}
        if budgets is not None:
            p["budgets"] = budgets
        return self._begin("run.resume_with_decision", p, approver, tools, approvals)

    def resolve(self, run_id: str, request_id: str, decision: DecisionLike) -> str:
        """Answers an approval request of a live run, from any thread, at
        any time (an answer that comes before the request is kept)."""
        res = self._lib.call(
            "approval.resolve",
            {"harness": self.handle, "run_id": run_id, "request_id": request_id, "decision": _decision(decision)},
        )
        return str(res["state"])

    def watch(self, run_id: str, *, approver: Optional[Approver] = None, poll_ms: Optional[int] = None) -> Run:
        """Follows a run of this harness's store that another harness or
        process drives (run.watch) and returns it as a :class:`Run`: its
        events (the stored ones, then each as it is committed) end with a
        done event carrying its outcome. When the run pauses for a person
        (it was started with ``approvals="wait"``), an approval_pending
        event names each pending request: answer it with
        :meth:`Run.decide`, or pass an ``approver``, which is asked and
        answered so. Cancelling the returned run stops watching, not the
        run. ``poll_ms`` (default 250) is how often the store is read."""
        if self._closed:
            raise Unavailable("unavailable", "the harness is closed")
        p: Dict[str, Any] = {"harness": self.handle, "run_id": run_id}
        if poll_ms is not None:
            p["poll_ms"] = poll_ms
        self._ensure_poller()
        res = self._lib.call("run.watch", p)
        return self._adopt(Run(self, int(res["run"]), str(res["run_id"]), approver, watched=True))

    def decide(self, run_id: str, request_id: str, decision: DecisionLike, *, by: Optional[str] = None) -> DecideState:
        """Answers a deferred approval request of any run of the store,
        driven by any process (approval.decide). The decision is recorded,
        and the run's next driver carries it out (one waiting with
        ``approvals="wait"``, a :meth:`resume`): "decided". A run submitted
        to a fleet (:meth:`submit`) has its decision queued instead, for the
        worker that claims it, which carries it out and continues the run:
        "queued"; ``by`` names who decided in its queue log. A defer changes
        nothing: "pending". A request already decided is :class:`Conflict`;
        an unknown one :class:`NotFound`."""
        p: Dict[str, Any] = {"harness": self.handle, "run_id": run_id, "request_id": request_id, "decision": _decision(decision)}
        if by:
            p["by"] = by
        return cast(DecideState, self._lib.call("approval.decide", p)["state"])

    def cancel(self) -> None:
        """Cancels every live run of the harness."""
        self._lib.cancel(self.handle)

    # -- a fleet (a harness over a postgres:// store) -----------------------

    def submit(self, spec: SpecLike, *, upload: bool = False) -> Submitted:
        """Queues a run of a spec for a fleet's workers (run.submit; the
        harness must be open on a ``postgres://`` store: a file store is
        :class:`InvalidArgument`) and returns its id at once; no run of this
        harness starts. ``upload`` stores the workspace with the
        submission, so that a worker on another machine gets it and
        :meth:`fetch` gets its result back. The spec must not carry an
        ``api_key``: workers read keys from their own environment."""
        p: Dict[str, Any] = {"harness": self.handle, "spec": self._spec(spec)}
        if upload:
            p["upload"] = True
        return cast(Submitted, self._lib.call("run.submit", p))

    def fetch(self, run_id: str, directory: Union[str, "os.PathLike[str]"]) -> Fetched:
        """Writes the workspace an uploaded submitted run left when it
        finished into ``directory`` (which must not exist, or be empty)
        (run.fetch). A run with no stored result is :class:`NotFound`."""
        return cast(Fetched, self._lib.call("run.fetch", {"harness": self.handle, "run_id": run_id, "dir": os.fspath(directory)}))

    # -- queries ----------------------------------------------------------

    def trace(self, run_id: str, format: str = "json") -> Any:
        """A run's trace: the trace object ("json") or its text ("text").
        On a fleet's database the trace object also has the run's queue log
        under "queue" (the text ends with it)."""
        res = self._lib.call("trace.get", {"harness": self.handle, "run_id": run_id, "format": format})
        if format == "text":
            return res["text"]
        if "queue" in res:
            return dict(res["trace"], queue=res["queue"])
        return res["trace"]

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
                batch, status = self._lib.poll(self.handle, _POLL_MS, _BATCH)
                if batch is None:
                    if self._closed or status not in (0, -3):
                        break  # closed, or no such harness any more
                    continue
                for ev in batch:
                    if ev.get("kind") == "closed":
                        return
                    h = int(ev.get("run", 0))
                    with self._route:
                        with self._lock:
                            run = self._runs.get(h)
                            if run is None:
                                self._orphans.setdefault(h, []).append(ev)
                                continue
                            if ev.get("kind") == "done":
                                del self._runs[h]
                        if ev.get("kind") == "host_tool_call":
                            self._call_tool(run, ev)
                        run._deliver(ev)
        except BaseException as e:  # noqa: BLE001 - reported to waiters
            self._poller_error = e
        finally:
            with self._lock:
                runs = list(self._runs.values())
                self._runs.clear()
            for run in runs:
                run._deliver(_END)

    # -- host tools -------------------------------------------------------

    def _call_tool(self, run: Run, ev: _Raw) -> None:
        """Runs a host tool call off the poller thread: a plain function on
        the harness's thread pool; an async one on the event loop of the
        run's asyncio consumer, or else on the harness's own loop thread.
        Whatever happens is answered with tool.resolve."""
        t = run.tools.get(str(ev.get("tool")))
        args = ev.get("arguments") or {}
        if t is None:
            self._tool_answer(run, ev, None, f"no tool named {ev.get('tool')!r} is registered with this run in this process")
            return
        if t.is_async:
            loop = run._tool_loop
            if loop is None or loop.is_closed():
                loop = self._tool_loop()
            try:
                fut = asyncio.run_coroutine_threadsafe(t.fn(**args), loop)
            except Exception as e:  # noqa: BLE001 - the loop is gone
                self._tool_answer(run, ev, None, f"{type(e).__name__}: {e}")
                return
            fut.add_done_callback(lambda f: self._tool_done(run, ev, f))
            return
        try:
            pool = self._tool_pool()
            pool.submit(t.fn, **args).add_done_callback(lambda f: self._tool_done(run, ev, f))
        except RuntimeError as e:  # the pool is shut down: the harness is closing
            self._tool_answer(run, ev, None, f"the host is shutting down: {e}")

    def _tool_done(self, run: Run, ev: _Raw, f: "concurrent.futures.Future[Any]") -> None:
        try:
            value = f.result()
        except BaseException as e:  # noqa: BLE001 - an exception is the model's observation
            self._tool_answer(run, ev, None, f"{type(e).__name__}: {e}")
            return
        try:
            text = result_text(value)
        except Exception as e:  # noqa: BLE001
            self._tool_answer(run, ev, None, f"the result could not be encoded: {type(e).__name__}: {e}")
            return
        self._tool_answer(run, ev, text, None)

    def _tool_answer(self, run: Run, ev: _Raw, output: Optional[str], error: Optional[str]) -> None:
        p: Dict[str, Any] = {"harness": self.handle, "run_id": ev.get("run_id"), "request_id": ev.get("request_id")}
        if error is not None:
            p["error"] = error or "failed"
        else:
            p["output"] = output or ""
        with self._lock:
            if self._closed:
                return  # the harness is gone: nothing waits for the answer
            self._answering += 1
        try:
            self._lib.call("tool.resolve", p)
        except Exception:  # noqa: BLE001 - the call timed out or the run ended: nothing waits for it
            pass
        finally:
            with self._lock:
                self._answering -= 1
                self._answered.notify_all()

    def _tool_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=_TOOL_THREADS, thread_name_prefix=f"io_harness-tool-{self.handle}")
            return self._pool

    def _tool_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                t = threading.Thread(target=loop.run_forever, name=f"io_harness-tools-{self.handle}", daemon=True)
                t.start()
                self._loop, self._loop_thread = loop, t
            return self._loop

    # -- lifecycle --------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Cancels the runs, waits up to ``timeout`` seconds for them to
        end, and joins the poller thread. Idempotent."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
        ms = int(timeout * 1000)
        deadline = time.monotonic() + timeout
        # Close in short slices so Ctrl-C is handled while we wait.
        st = self._lib.close(self.handle, min(ms, 100))
        while st == -3 and time.monotonic() < deadline:
            st = self._lib.close(self.handle, 100)
        if self._poller is not None and self._poller is not threading.current_thread():
            self._poller.join(max(0.0, deadline - time.monotonic()) + 1.0)
        with self._lock:
            self._answered.wait_for(lambda: self._answering == 0, max(0.0, deadline - time.monotonic()) + 1.0)
            pool, loop, lt = self._pool, self._loop, self._loop_thread
        if pool is not None:
            pool.shutdown(wait=False)
        if loop is not None and lt is not None:
            loop.call_soon_threadsafe(loop.stop)
            if lt is not threading.current_thread():
                lt.join(1.0)
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
