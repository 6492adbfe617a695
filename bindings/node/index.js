'use strict';
// io-harness for Node: a binding of libio_harness.so.1 over koffi.
//
// Every operation is a JSON method of the C ABI (docs/abi.md). Events of
// all runs of a harness are read by ONE outstanding asynchronous batch
// poll per harness (io_harness_poll on a koffi worker thread), kept only
// while the harness has live runs: that keeps the process alive exactly as
// long as a run is going, never blocks the event loop, and is as fast as a
// native push path. Nothing here registers a C callback: a Go thread
// waiting on the JS thread would deadlock against any synchronous call.

const fs = require('fs');
const path = require('path');
const koffi = require('koffi');

const ABI_MAJOR = 1;
const ABI_MINOR = 1;
const ENV_LIBRARY = 'IO_HARNESS_LIB';
const SONAME = 'libio_harness.so.1';
const POLL_MS = 250;
const BATCH = 1000;

class HarnessError extends Error {
  constructor(code, message, retryable = false, details = {}) {
    super(`${code}: ${message}`);
    this.name = 'HarnessError';
    this.code = code;
    this.retryable = retryable;
    this.details = details || {};
    this.detail = message;
  }
}

const CODES = ['invalid_json', 'invalid_argument', 'unknown_method', 'not_found', 'conflict', 'cancelled',
  'deadline_exceeded', 'permission_denied', 'unavailable', 'abi_mismatch', 'internal'];

function errorFrom(obj) {
  obj = obj || {};
  return new HarnessError(String(obj.code || 'internal'), String(obj.message || ''), Boolean(obj.retryable), obj.details);
}

let loaded = null;

class Library {
  constructor(file) {
    this.path = file;
    let lib;
    try {
      lib = koffi.load(file);
    } catch (e) {
      const err = new Error(`cannot load ${file}: ${e.message}`);
      err.code = 'ENOLIB';
      throw err;
    }
    const free = lib.func('void io_harness_free(void *s)');
    // A returned string is decoded, then handed back to io_harness_free.
    const Owned = koffi.disposable('IoHarnessOwnedStr', 'str', free);
    this._version = lib.func('uint32_t io_harness_abi_version(void)');
    this._call = lib.func('io_harness_call', Owned, ['str']);
    this._poll = lib.func('io_harness_poll', Owned, ['uint64_t', 'int32_t', 'int32_t']);
    this._cancel = lib.func('int32_t io_harness_cancel(uint64_t handle)');
    this._close = lib.func('int32_t io_harness_close(uint64_t harness, int32_t timeout_ms)');
    const v = this._version();
    const major = v >>> 16;
    const minor = v & 0xffff;
    if (major !== ABI_MAJOR || minor < ABI_MINOR) {
      throw new HarnessError('abi_mismatch', `${file} speaks ABI ${major}.${minor}; this binding needs ${ABI_MAJOR}.${ABI_MINOR} or a later ${ABI_MAJOR}.x`);
    }
    this.abi = [major, minor];
  }

  /** Sends raw request text; returns the decoded envelope. */
  callRaw(text) {
    const out = this._call(text);
    if (out == null) throw new HarnessError('internal', 'io_harness_call returned NULL');
    return JSON.parse(out);
  }

  /** Calls a method synchronously (every method but sandbox.exec is non-blocking or bounded). */
  call(method, params) {
    const env = this.callRaw(JSON.stringify(params === undefined ? { method } : { method, params }));
    if (env.ok) return env.result;
    throw errorFrom(env.error);
  }

  /** Calls a method on a koffi worker thread. */
  callAsync(method, params) {
    const text = JSON.stringify(params === undefined ? { method } : { method, params });
    return new Promise((resolve, reject) => {
      this._call.async(text, (err, out) => {
        if (err) return reject(err);
        try {
          const env = JSON.parse(out);
          if (env.ok) resolve(env.result);
          else reject(errorFrom(env.error));
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  /** One asynchronous batch poll: resolves to the raw JSON array text, or null on timeout. */
  pollAsync(harness, timeoutMs, max) {
    return new Promise((resolve, reject) => {
      this._poll.async(harness, timeoutMs, max, (err, out) => (err ? reject(err) : resolve(out)));
    });
  }

  cancel(handle) {
    return this._cancel(handle);
  }

  close(harness, timeoutMs) {
    return this._close(harness, timeoutMs);
  }

  closeAsync(harness, timeoutMs) {
    return new Promise((resolve, reject) => {
      this._close.async(harness, timeoutMs, (err, st) => (err ? reject(err) : resolve(st)));
    });
  }
}

// abs makes a path with a directory in it absolute, against the working
// directory of now; a bare name is left to the dynamic loader.
function abs(p) {
  return p.includes(path.sep) ? path.resolve(p) : p;
}

function candidates(file) {
  if (file) return [abs(file)];
  if (process.env[ENV_LIBRARY]) return [abs(process.env[ENV_LIBRARY])];
  const out = [];
  const inPackage = path.join(__dirname, 'native', SONAME);
  if (fs.existsSync(inPackage)) out.push(inPackage);
  out.push(SONAME); // the dynamic loader's search path
  return out;
}

/**
 * Loads the library once per process: from `file`, from the IO_HARNESS_LIB
 * environment variable, from the package's native/ directory, or from the
 * dynamic loader's search path. A Go runtime cannot be unloaded or loaded
 * twice, so a second, different path is an error.
 */
function load(file) {
  if (loaded) {
    if (file && fs.realpathSync(file) !== fs.realpathSync(loaded.path)) {
      throw new Error(`io-harness is already loaded from ${loaded.path}; a process can load only one copy`);
    }
    return loaded;
  }
  const errors = [];
  for (const c of candidates(file)) {
    try {
      loaded = new Library(c);
      return loaded;
    } catch (e) {
      if (e instanceof HarnessError) throw e;
      errors.push(e.message);
    }
  }
  const err = new Error('libio_harness.so.1 not found. Install the package built for this platform (make npm-pack), or, in a ' +
    'checkout of io-harness-go, run `make bindings-native` to copy it into the package; or pass its path as library, or set ' +
    'IO_HARNESS_LIB=/path/to/libio_harness.so.1. Tried: ' + errors.join('; '));
  err.code = 'ENOLIB';
  throw err;
}

const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

/**
 * Declares a tool written in JavaScript: the model calls it by name with
 * arguments that match `parameters` (a JSON Schema of type "object",
 * checked before execute sees them), and sees what `execute` returns (a
 * string as it is, anything else as JSON; a Promise is awaited). An
 * exception or a rejection is an observation the model sees. `timeoutMs`
 * bounds one call; `idempotent` says a repeated call is harmless.
 */
function tool(def) {
  if (!def || typeof def !== 'object') throw new TypeError('tool({ name, description, parameters, execute })');
  const { name, description, parameters, execute } = def;
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new TypeError(`tool name ${JSON.stringify(name)}: want a letter, then up to 63 letters, digits, _ or -`);
  }
  if (typeof description !== 'string' || !description.trim()) throw new TypeError(`tool ${name}: description: required`);
  if (typeof execute !== 'function') throw new TypeError(`tool ${name}: execute: a function is required`);
  const params = parameters === undefined ? { type: 'object', properties: {} } : parameters;
  if (!params || params.type !== 'object') throw new TypeError(`tool ${name}: parameters: want a JSON Schema of type "object"`);
  const t = { name, description, parameters: params, execute };
  if (def.timeoutMs !== undefined) t.timeoutMs = def.timeoutMs;
  if (def.idempotent) t.idempotent = true;
  return Object.freeze(t);
}

function toolSpec(t) {
  const s = { name: t.name, description: t.description, parameters: t.parameters };
  if (t.timeoutMs !== undefined) s.timeout_ms = t.timeoutMs;
  if (t.idempotent) s.idempotent = true;
  return s;
}

function resultText(v) {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  return JSON.stringify(v);
}

function decisionOf(d) {
  if (d === true) return { kind: 'approve' };
  if (d === false) return { kind: 'deny', reason: 'denied by the approver' };
  if (typeof d === 'string') return { kind: d };
  if (d && typeof d === 'object' && typeof d.kind === 'string') return d;
  throw new TypeError('an approver returns a decision object, "approve", "deny", "defer" or a boolean');
}

/** How a run ended: its done event. */
class RunResult {
  constructor(done, events) {
    this.run = done.run;
    this.runId = done.run_id;
    this.status = done.status;
    this.outcome = done.outcome || null;
    this.error = done.error ? errorFrom(done.error) : null;
    this.remembered = done.remembered || [];
    this.events = events;
  }

  get outcomeKind() {
    return this.outcome ? this.outcome.kind : null;
  }

  get ok() {
    return this.outcomeKind === 'success';
  }
}

/** A run driven by a Harness, or followed with Harness.watch while another process drives it. */
class Run {
  constructor(harness, handle, runId, approver, tools, watched = false) {
    this.harness = harness;
    this.handle = handle;
    this.runId = runId;
    this.approver = approver || null;
    this.tools = tools || new Map();
    // A watched run's approvals are answered with approval.decide.
    this.watched = watched;
    this._events = [];
    this._waiters = [];
    this._ended = false;
    this._failure = null;
    this._result = null;
    this._resultWaiters = [];
  }

  _callTool(ev) {
    const t = this.tools.get(ev.tool);
    const answer = (p) => {
      try {
        this.harness._lib.call('tool.resolve', Object.assign({ harness: this.harness.handle, run_id: ev.run_id, request_id: ev.request_id }, p));
      } catch (_) { /* timed out or ended: nothing waits for it */ }
    };
    if (!t) {
      answer({ error: `no tool named ${JSON.stringify(ev.tool)} is registered with this run in this process` });
      return;
    }
    Promise.resolve()
      .then(() => t.execute(ev.arguments || {}, { runId: ev.run_id, callId: ev.call_id }))
      .then((v) => answer({ output: resultText(v) }), (e) => answer({ error: `${(e && e.name) || 'Error'}: ${e && e.message !== undefined ? e.message : e}` }));
  }

  _deliver(ev) {
    this._events.push(ev);
    if (ev.kind === 'host_tool_call') this._callTool(ev);
    if (ev.kind === 'approval_pending' && this.approver) {
      // A watched run's request is decided in the store; a driven run's resolved.
      const answer = (d) => (this.watched ? this.decide(ev.request_id, d) : this.resolve(ev.request_id, d));
      Promise.resolve()
        .then(() => this.approver(ev.request || {}))
        .then(answer)
        .catch((e) => {
          // An approver that fails denies, so that the run is never stuck.
          return Promise.resolve()
            .then(() => answer({ kind: 'deny', reason: `the approver failed: ${e && e.message}` }))
            .catch(() => { /* the run ended meanwhile, or another process decided first */ });
        });
    }
    if (ev.kind === 'done') {
      this._ended = true;
      this._result = new RunResult(ev, this._events);
      for (const w of this._resultWaiters.splice(0)) w.resolve(this._result);
    }
    for (const w of this._waiters.splice(0)) w();
  }

  _fail(err) {
    if (this._ended) return;
    this._ended = true;
    this._failure = err;
    for (const w of this._resultWaiters.splice(0)) w.reject(err);
    for (const w of this._waiters.splice(0)) w();
  }

  /** Answers an approval request of this run, which this harness drives. */
  resolve(requestId, decision) {
    return this.harness.resolve(this.runId, requestId, decision);
  }

  /** Records a decision on a request the run waits on in the store (Harness.decide): how a watched run is answered. */
  decide(requestId, decision) {
    return this.harness.decide(this.runId, requestId, decision);
  }

  /** Cancels the run (a watched run: stops watching, and leaves the run alone); its done event still arrives. */
  cancel() {
    this.harness._lib.cancel(this.handle);
  }

  /** The run's events, up to and including its done event. */
  async * events() {
    let i = 0;
    for (;;) {
      while (i < this._events.length) {
        const ev = this._events[i++];
        yield ev;
        if (ev.kind === 'done') return;
      }
      if (this._failure) throw this._failure;
      if (this._ended) return;
      await new Promise((r) => this._waiters.push(r));
    }
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  /** Resolves to the RunResult once the run ends. */
  result() {
    if (this._result) return Promise.resolve(this._result);
    if (this._failure) return Promise.reject(this._failure);
    return new Promise((resolve, reject) => this._resultWaiters.push({ resolve, reject }));
  }
}

const openHarnesses = new Set();

/** A harness over one store: a file path, or ":memory:". */
class Harness {
  constructor(opts = {}) {
    this._lib = load(opts.library);
    const params = { store: opts.store || ':memory:' };
    if (opts.useEnvironment) params.use_environment = true;
    if (opts.queueSize) params.queue_size = opts.queueSize;
    if (opts.readOnly) params.read_only = true;
    if (opts.live) params.live = true;
    const opened = this._lib.call('harness.open', params);
    this.handle = opened.harness;
    this.store = params.store;
    /** True when the harness serves its runs' events live to watchers in other processes on this host. */
    this.live = Boolean(opened.live);
    this._runs = new Map();
    this._orphans = new Map();
    this._polling = false;
    this._closed = false;
    openHarnesses.add(this);
  }

  // _begin starts (or resumes) a run on a koffi worker thread, so that the
  // store's work never blocks the event loop.
  async _begin(method, params, opts) {
    if (this._closed) throw new HarnessError('unavailable', 'the harness is closed');
    const p = Object.assign({}, params, { harness: this.handle });
    const tools = new Map();
    for (const t of opts.tools || []) {
      if (!t || typeof t.execute !== 'function') throw new TypeError('tools: each must come from tool({ name, description, parameters, execute })');
      tools.set(t.name, t);
    }
    if (tools.size) p.tools = Array.from(tools.values(), toolSpec);
    // No approver: what the policy asks about is denied, as in Go.
    const approvals = opts.approvals || (opts.approver ? 'host' : 'deny');
    if (approvals !== 'host') p.approvals = approvals;
    const res = await this._lib.callAsync(method, p);
    if (this._closed) throw new HarnessError('unavailable', 'the harness is closed');
    return this._adopt(new Run(this, res.run, res.run_id, opts.approver, tools));
  }

  // _adopt routes a new run handle's events to run, those that came first included.
  _adopt(run) {
    this._runs.set(run.handle, run);
    for (const ev of this._orphans.get(run.handle) || []) this._route(ev);
    this._orphans.delete(run.handle);
    this._pump();
    return run;
  }

  static _spec(spec) {
    return typeof spec === 'string' ? JSON.parse(spec) : spec;
  }

  /** Starts a run of a spec and resolves once it has an id. */
  async start(spec, opts = {}) {
    return this._begin('run.start', { spec: Harness._spec(spec) }, opts);
  }

  /** Runs a spec to its end. An AbortSignal in opts.signal cancels the run. */
  async run(spec, opts = {}) {
    const run = await this.start(spec, opts);
    const onAbort = () => run.cancel();
    if (opts.signal) opts.signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (opts.onEvent) {
        for await (const ev of run.events()) await opts.onEvent(ev);
      }
      return await run.result();
    } finally {
      if (opts.signal) opts.signal.removeEventListener('abort', onAbort);
    }
  }

  /** Continues a stored run (budgets replaces its budgets; reopen drives an escalated or cancelled run again). */
  async resume(runId, spec, opts = {}) {
    const p = { run_id: runId, spec: Harness._spec(spec) };
    if (opts.budgets) p.budgets = opts.budgets;
    if (opts.reopen) p.reopen = true;
    if (opts.force) p.force = true;
    return this._begin('run.resume', p, opts);
  }

  /** Answers the approval a stored run awaits and continues it. */
  async resumeWithDecision(runId, requestId, decision, spec, opts = {}) {
    const p = { run_id: runId, request_id: requestId, decision: decisionOf(decision), spec: Harness._spec(spec) };
    if (opts.budgets) p.budgets = opts.budgets;
    return this._begin('run.resume_with_decision', p, opts);
  }

  /** Answers an approval request of a live run; returns "delivered", "stored" or "already_resolved". */
  resolve(runId, requestId, decision) {
    return this._lib.call('approval.resolve', { harness: this.handle, run_id: runId, request_id: requestId, decision: decisionOf(decision) }).state;
  }

  /**
   * Follows a run of this harness's store that another harness or process
   * drives (run.watch), read on a worker thread, as a Run: its events end
   * with a done event carrying its outcome. When the run pauses for a
   * person (started with approvals 'wait'), an approval_pending event
   * names each pending request: answer it with Run.decide, or pass an
   * approver. Cancelling the Run stops watching, not the run.
   */
  async watch(runId, opts = {}) {
    if (this._closed) throw new HarnessError('unavailable', 'the harness is closed');
    const p = { harness: this.handle, run_id: runId };
    if (opts.pollMs !== undefined) p.poll_ms = opts.pollMs;
    const res = await this._lib.callAsync('run.watch', p);
    if (this._closed) throw new HarnessError('unavailable', 'the harness is closed');
    return this._adopt(new Run(this, res.run, res.run_id, opts.approver, null, true));
  }

  /**
   * Answers a deferred approval request of any run of the store, driven by
   * any process (approval.decide), on a worker thread. The decision is
   * recorded and the run's next driver carries it out: "decided". A run
   * submitted to a fleet has it queued for the worker that claims it,
   * which carries it out and continues the run: "queued" (opts.by names
   * who decided in its queue log). A defer changes nothing: "pending".
   */
  async decide(runId, requestId, decision, opts = {}) {
    const p = { harness: this.handle, run_id: runId, request_id: requestId, decision: decisionOf(decision) };
    if (opts.by) p.by = opts.by;
    return (await this._lib.callAsync('approval.decide', p)).state;
  }

  /** Cancels every live run of the harness. */
  cancel() {
    this._lib.cancel(this.handle);
  }

  /**
   * Queues a run of a spec for a fleet's workers (run.submit; the harness
   * must be open on a postgres:// store) and resolves to its id at once.
   * upload stores the workspace with the submission, for fetch.
   */
  async submit(spec, opts = {}) {
    const p = { harness: this.handle, spec: Harness._spec(spec) };
    if (opts.upload) p.upload = true;
    return this._lib.callAsync('run.submit', p);
  }

  /** Writes the workspace an uploaded submitted run left into dir (run.fetch), which must not exist or be empty. */
  async fetch(runId, dir) {
    return this._lib.callAsync('run.fetch', { harness: this.handle, run_id: runId, dir });
  }

  /** A run's trace, read on a worker thread; on a fleet's database with its queue log under queue. */
  async trace(runId, format = 'json') {
    const res = await this._lib.callAsync('trace.get', { harness: this.handle, run_id: runId, format });
    if (format === 'text') return res.text;
    return res.queue ? Object.assign({}, res.trace, { queue: res.queue }) : res.trace;
  }

  /** The store's runs, newest first, read on a worker thread. */
  async runs(opts = {}) {
    const p = { harness: this.handle };
    if (opts.limit) p.limit = opts.limit;
    return (await this._lib.callAsync('runs.list', p)).runs;
  }

  _route(ev) {
    const run = this._runs.get(ev.run);
    if (!run) {
      if (!this._orphans.has(ev.run)) this._orphans.set(ev.run, []);
      this._orphans.get(ev.run).push(ev);
      return;
    }
    if (ev.kind === 'done') this._runs.delete(ev.run);
    run._deliver(ev);
  }

  // _pump keeps exactly one asynchronous poll outstanding while runs are live.
  _pump() {
    if (this._polling || this._closed || this._runs.size === 0) return;
    this._polling = true;
    this._lib.pollAsync(this.handle, POLL_MS, BATCH).then((text) => {
      this._polling = false;
      if (text != null) {
        for (const ev of JSON.parse(text)) {
          if (ev.kind === 'closed') {
            this._endAll(new HarnessError('unavailable', 'the harness was closed'));
            return;
          }
          this._route(ev);
        }
      }
      this._pump();
    }, (err) => {
      this._polling = false;
      this._endAll(err);
    });
  }

  _endAll(err) {
    for (const run of this._runs.values()) run._fail(err);
    this._runs.clear();
  }

  /** Cancels the runs, waits up to timeoutMs for them to end, and closes the store. Idempotent. */
  async close(timeoutMs = 5000) {
    if (this._closed) return;
    this._closed = true;
    openHarnesses.delete(this);
    const st = await this._lib.closeAsync(this.handle, timeoutMs);
    this._endAll(new HarnessError('unavailable', 'the harness was closed'));
    if (st === -3) throw new HarnessError('deadline_exceeded', `runs still ending after ${timeoutMs}ms`, true);
  }

  /** Synchronous close, for process exit. */
  closeSync(timeoutMs = 1000) {
    if (this._closed) return;
    this._closed = true;
    openHarnesses.delete(this);
    this._lib.close(this.handle, timeoutMs);
    this._endAll(new HarnessError('unavailable', 'the harness was closed'));
  }
}

// At exit, close every open harness (cancel its runs) so no Go thread
// works for a dying process; bounded, so exit never hangs.
process.on('exit', () => {
  for (const h of Array.from(openHarnesses)) {
    try {
      h.closeSync(1000);
    } catch (_) { /* exiting anyway */ }
  }
});

function call(method, params, opts = {}) {
  return load(opts.library).call(method, params);
}

module.exports = {
  tool,
  ABI_MAJOR,
  ABI_MINOR,
  CODES,
  ENV_LIBRARY,
  Harness,
  HarnessError,
  Library,
  Run,
  RunResult,
  load,
  call,
  version: (opts = {}) => call('version', undefined, opts),
  debugStats: (opts = {}) => call('debug.stats', undefined, opts),
  policyExplain: (policy, act, target, opts = {}) => call('policy.explain', { policy, act, target }, opts),
  sandboxExec: (spec, opts = {}) => load(opts.library).callAsync('sandbox.exec',
    Object.assign({ spec: Array.isArray(spec) ? { argv: spec } : spec }, opts.backend ? { backend: opts.backend } : {})),
  sandboxBackends: async (opts = {}) => (await load(opts.library).callAsync('sandbox.backends')).backends,
  modelsList: (opts = {}) => load(opts.library).callAsync('models.list',
    Object.assign({}, opts.file !== undefined ? { file: opts.file } : {}, opts.useEnvironment ? { use_environment: true } : {})),
  storeCheck: (store, opts = {}) => load(opts.library).callAsync('store.check', { store }),
};
