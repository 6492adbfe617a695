'use strict';
// Watching a run another process drives, and deciding its approvals from
// here (run.watch, approval.decide); a fleet's methods on a file store; the
// model catalogue and the store check (models.list, store.check).
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const fs = require('node:fs');

const ioh = require('..');
const { libraryPath, fixture, workspace, slowSpec, Postgres } = require('../testing/support');

const LIB = libraryPath();
const CHILD = path.join(__dirname, '..', 'testing', 'watch_child.js');
const kinds = (evs) => evs.map((e) => e.kind);
const storeFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-node-db-')), 'trace.db');

// Every test closes its harnesses, then proves through debug.stats that
// every string the library handed out was freed.
async function withHarnesses(n, store, fn) {
  const hs = Array.from({ length: n }, () => new ioh.Harness({ library: LIB, store }));
  try {
    return await fn(...hs);
  } finally {
    for (const h of hs) await h.close();
    const st = ioh.debugStats({ library: LIB });
    assert.equal(st.strings_live, 0, `strings not freed: ${JSON.stringify(st)}`);
    assert.equal(st.runs, 0, `runs left: ${JSON.stringify(st)}`);
  }
}

// driver starts watch_child.js: another process that drives a run which
// waits for a person (approvals 'wait') over the store file. It resolves
// once the run has its id; done() resolves to the child's last line once
// it exited 0.
function driver(store, ws) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CHILD, store, ws], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let started = false;
    const exited = new Promise((res) => p.on('exit', (code) => res(code)));
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000);
    exited.then(() => clearTimeout(timer));
    p.stderr.on('data', (d) => { err += d; });
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^RUN (\S+)\n/);
      if (m && !started) {
        started = true;
        resolve({
          runId: m[1],
          kill: () => p.kill('SIGKILL'),
          done: async () => {
            const code = await exited;
            assert.equal(code, 0, `the driver exited ${code}\n${out}\n${err}`);
            return out.trim().split('\n').pop();
          },
        });
      }
    });
    exited.then((code) => { if (!started) reject(new Error(`the driver did not start its run (${code})\n${out}\n${err}`)); });
  });
}

// Another process drives a run that pauses for a person; this one watches
// it, sees the request, decides it, and follows the run to its end.
async function watchAndDecide(decision) {
  const store = storeFile();
  const ws = workspace();
  const d = await driver(store, ws);
  try {
    return await withHarnesses(1, store, async (h) => {
      const run = await h.watch(d.runId, { pollMs: 50 });
      assert.equal(run.watched, true);
      assert.equal(run.runId, d.runId);
      const pending = [];
      for await (const ev of run) {
        if (ev.kind !== 'approval_pending') continue;
        pending.push(ev);
        assert.deepEqual([ev.request.act, ev.request.target, ev.request.run_id], ['write', 'config.toml', d.runId]);
        assert.match(ev.request.shown, /\+mode = "on"/);
        assert.equal(await h.decide(d.runId, ev.request_id, decision), 'decided');
        // One decision per request, from any process.
        await assert.rejects(run.decide(ev.request_id, decision === 'approve' ? 'deny' : 'approve'), (e) => e.code === 'conflict');
      }
      const res = await run.result();
      assert.equal(pending.length, 1, kinds(res.events).join(' '));
      // The watcher saw every stored event once, in order.
      const seqs = res.events.filter((e) => e.seq).map((e) => e.seq);
      assert.deepEqual(seqs, seqs.map((_, i) => i + 1));
      return { res, last: await d.done(), ws };
    });
  } finally {
    d.kill();
  }
}

test('watch a run another process drives, and approve what it waits on', async () => {
  const { res, last, ws } = await watchAndDecide('approve');
  assert.ok(res.ok, JSON.stringify(res.outcome));
  assert.equal(res.status, 'ok');
  assert.equal(last, 'DONE ok success');
  assert.equal(fs.readFileSync(path.join(ws, 'config.toml'), 'utf8'), 'mode = "on"\n');
});

test('watch a run another process drives, and deny: nothing is written', async () => {
  const { res, last, ws } = await watchAndDecide('deny');
  assert.equal(res.ok, false);
  assert.equal(res.status, 'ok');
  assert.equal(last, `DONE ok ${res.outcomeKind}`);
  assert.ok(!fs.existsSync(path.join(ws, 'config.toml')), fs.readdirSync(ws).join(' '));
  assert.ok(kinds(res.events).includes('approval_resolved'));
});

test("a watch's approver decides", async () => {
  // Two harnesses over one store file, as two processes would open it.
  const ws = workspace();
  await withHarnesses(2, storeFile(), async (drv, watcher) => {
    const spec = fixture('defer_resume').spec();
    spec.task.root = ws;
    const driven = await drv.start(spec, { approvals: 'wait' });
    const asked = [];
    const watched = await watcher.watch(driven.runId, { pollMs: 50, approver: async (req) => { asked.push(req); return { kind: 'approve' }; } });
    const res = await watched.result();
    assert.ok(res.ok, JSON.stringify(res.outcome));
    assert.deepEqual(asked.map((r) => r.target), ['config.toml']);
    assert.ok((await driven.result()).ok);
    assert.equal(fs.readFileSync(path.join(ws, 'config.toml'), 'utf8'), 'mode = "on"\n');
  });
});

test('cancelling a watch stops watching, not the run', async () => {
  const ws = workspace();
  await withHarnesses(2, storeFile(), async (drv, watcher) => {
    const spec = fixture('defer_resume').spec();
    spec.task.root = ws;
    const driven = await drv.start(spec, { approvals: 'wait' });
    const run = await watcher.watch(driven.runId, { pollMs: 50 });
    let requestId = '';
    for await (const ev of run) {
      if (ev.kind === 'approval_pending') {
        requestId = ev.request_id;
        run.cancel();
      }
    }
    assert.equal((await run.result()).status, 'cancelled');
    assert.ok(requestId);
    // The run still waits; a decision from here finishes it.
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(!fs.existsSync(path.join(ws, 'config.toml')));
    assert.equal(await watcher.decide(driven.runId, requestId, 'defer'), 'pending');
    assert.equal(await watcher.decide(driven.runId, requestId, true), 'decided');
    assert.ok((await driven.result()).ok);
  });
});

test('watch a finished run', async () => {
  const store = storeFile();
  await withHarnesses(2, store, async (h, watcher) => {
    const first = await h.run(fixture('success').spec());
    const res = await (await watcher.watch(first.runId)).result();
    assert.ok(res.ok);
    assert.equal(res.runId, first.runId);
    assert.equal(kinds(res.events)[0], 'run_started');
    assert.deepEqual(kinds(res.events).slice(-2), ['outcome', 'done']);
  });
});

test('watch and decide: typed errors', async () => {
  await withHarnesses(1, storeFile(), async (h) => {
    await assert.rejects(h.watch('run_nope'), (e) => e instanceof ioh.HarnessError && e.code === 'not_found');
    await assert.rejects(h.watch('run_nope', { pollMs: -1 }), (e) => e.code === 'invalid_argument');
    await assert.rejects(h.decide('run_nope', 'apr_nope', 'approve'), (e) => e.code === 'not_found');
    await assert.rejects(h.decide('run_nope', 'apr_nope', 'maybe'), (e) => e.code === 'invalid_argument');
  });
});

test("a fleet's methods over a file store are typed errors naming postgres://", async () => {
  await withHarnesses(1, storeFile(), async (h) => {
    const calls = {
      submit: () => h.submit(fixture('success').spec(), { upload: true }),
      fetch: () => h.fetch('run_x', workspace()),
    };
    for (const [name, fn] of Object.entries(calls)) {
      await assert.rejects(fn(), (e) => e.code === 'invalid_argument' && !e.retryable && /postgres:\/\//.test(e.detail), name);
    }
    assert.deepEqual(await h.runs(), []);
  });
});

// The same methods over a postgres:// store, on a throwaway server (as
// internal/pgtest starts one; skipped, saying why, without PostgreSQL). No
// worker runs here: a worker is the io-harness CLI or Go, not the C ABI,
// so a submitted run stays queued and no run's result is ever stored for
// fetch.
test("a fleet's methods over a postgres:// store", async (t) => {
  const pg = new Postgres();
  t.after(() => pg.stop());
  const dsn = await pg.start();
  if (!dsn) return t.skip(pg.skip);
  // The server logs that it is ready a moment before it serves.
  const deadline = Date.now() + 30000;
  for (;;) {
    try {
      await withHarnesses(1, dsn, () => {});
      break;
    } catch (e) {
      if (e.code !== 'unavailable' || Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await withHarnesses(1, dsn, async (h) => {
    const spec = fixture('defer_resume').spec();
    const sub = await h.submit(spec, { upload: true });
    assert.equal(sub.state, 'queued');
    assert.match(sub.run_id, /^run_/);
    assert.deepEqual((await h.runs()).filter((r) => r.id === sub.run_id).map((r) => r.state), ['queued']);
    // A submitted spec is stored: one with a key is refused.
    const keyed = JSON.parse(JSON.stringify(spec));
    keyed.provider.api_key = 'sk-not-a-key';
    await assert.rejects(h.submit(keyed), (e) => e.code === 'invalid_argument' && e.details.field === 'spec.provider.api_key');
    // No worker has finished it: there is no result to fetch.
    await assert.rejects(h.fetch(sub.run_id, workspace()), (e) => e.code === 'not_found');
    await assert.rejects(h.decide(sub.run_id, 'apr_nope', 'approve'), (e) => e.code === 'not_found');
    // A run this store holds that was not submitted has no worker: its
    // decision is recorded for its next driver, once (queueing it would
    // strand the run). The queued path (a submitted run a worker paused)
    // needs a worker, which the ABI does not run: cmd/io-harness
    // TestFleetApprovalFromAnotherProcess covers it.
    const paused = [];
    for (let i = 0; i < 2; i++) paused.push(await h.run(fixture('defer_resume').spec(), { approvals: 'defer' }));
    for (const res of paused) assert.equal(res.outcomeKind, 'awaiting_approval');
    const [first, second] = paused.map((r) => [r.runId, r.outcome.request_id]);
    assert.equal(await h.decide(...first, 'approve', { by: 'binding-tests' }), 'decided');
    await assert.rejects(h.decide(...first, { kind: 'deny', reason: 'changed my mind' }), (e) => e.code === 'conflict');
    assert.deepEqual((await h.trace(first[0])).queue || [], []);
    // A defer changes nothing.
    assert.equal(await h.decide(...second, 'defer'), 'pending');
    assert.equal(await h.decide(...second, 'approve'), 'decided');
  });
});

test('the model catalogue, and an override file', async () => {
  const cat = await ioh.modelsList({ library: LIB });
  assert.ok(cat.as_of);
  assert.equal(cat.override, '');
  const keys = cat.models.map((m) => `${m.vendor}\u0000${m.id}`);
  assert.deepEqual(keys, keys.slice().sort());
  const gpt = cat.models.find((m) => m.vendor === 'openai' && m.id === 'gpt-4o');
  assert.deepEqual([gpt.context_window, gpt.max_output_tokens, gpt.tools, gpt.price.input], [128000, 16384, true, 2.5]);
  const dir = workspace();
  const file = path.join(dir, 'models.json');
  fs.writeFileSync(file, JSON.stringify({ version: 1, models: [{ vendor: 'openai_compatible', id: 'team/llama', context_window: 8192,
    price: { input: 0.5, output: 0.5 }, tools: true }] }));
  const over = await ioh.modelsList({ file, library: LIB });
  assert.equal(over.override, file);
  assert.equal(over.models.find((m) => m.id === 'team/llama').context_window, 8192);
  // Negative control: the built-in catalogue has no such model.
  assert.ok(!cat.models.some((m) => m.id === 'team/llama'));
  fs.writeFileSync(path.join(dir, 'bad.json'), '{not json');
  await assert.rejects(ioh.modelsList({ file: path.join(dir, 'bad.json'), library: LIB }),
    (e) => e.code === 'invalid_argument' && e.details.field === 'models');
});

test('check a store file', async () => {
  const store = storeFile();
  await withHarnesses(1, store, async (h) => {
    assert.ok((await h.run(fixture('success').spec())).ok);
  });
  const chk = await ioh.storeCheck(store, { library: LIB });
  assert.ok(chk.ok, chk.text);
  assert.deepEqual(chk.report.integrity, ['ok']);
  assert.equal(chk.report.path, store);
  assert.deepEqual(chk.report.runs, { finished: 1 });
  assert.ok(store in chk.report.files);
  assert.match(chk.text, /integrity: ok/);
  await assert.rejects(ioh.storeCheck(path.join(workspace(), 'none.db'), { library: LIB }), (e) => e.code === 'not_found');
  await assert.rejects(ioh.storeCheck('postgres://u@127.0.0.1:9/db', { library: LIB }), (e) => e.code === 'invalid_argument');
  // Negative control: a file that is no store is refused, not passed.
  const junk = path.join(workspace(), 'junk.db');
  fs.writeFileSync(junk, Buffer.alloc(7168, 'not a database'));
  await assert.rejects(ioh.storeCheck(junk, { library: LIB }), (e) => e instanceof ioh.HarnessError);
});

// harness.open's readOnly: the store's runs are read, a run is refused,
// and a file that is not a store is refused and left as it was.
test('a read-only harness reads and writes nothing', async () => {
  const file = storeFile();
  await withHarnesses(1, file, async (h) => {
    assert.equal(h.live, false);
    assert.ok((await h.run(fixture('success').spec())).ok);
  });
  const ro = new ioh.Harness({ library: LIB, store: file, readOnly: true });
  try {
    assert.equal((await ro.runs()).length, 1);
    await assert.rejects(ro.run(fixture('success').spec()), (e) => e.code === 'unavailable');
  } finally {
    await ro.close();
  }
  const junk = storeFile();
  fs.writeFileSync(junk, '');
  assert.throws(() => new ioh.Harness({ library: LIB, store: junk, readOnly: true }), ioh.HarnessError);
  assert.equal(fs.statSync(junk).size, 0);
});

// harness.open's live: a watcher of a run its live driver is in the middle
// of sees the step under way (step_started) before it commits — the model's
// turn takes 60 s, so nothing of the step is stored yet. The control is the
// same run driven without live: in 3 s a watcher sees only run_started.
test('a live driver shows its step to a watcher before it commits', async () => {
  for (const live of [true, false]) {
    const file = storeFile();
    const drv = new ioh.Harness({ library: LIB, store: file, live });
    const watcher = new ioh.Harness({ library: LIB, store: file });
    try {
      assert.equal(drv.live, live);
      const run = await drv.start(slowSpec());
      const w = await watcher.watch(run.runId, { pollMs: 50 });
      const seen = [];
      const stop = setTimeout(() => w.cancel(), live ? 50000 : 3000);
      for await (const ev of w) {
        seen.push(ev.kind);
        if (ev.kind === 'step_started') break;
      }
      clearTimeout(stop);
      w.cancel();
      run.cancel();
      assert.equal(seen.includes('step_started'), live, `live=${live}: ${seen}`);
      assert.ok(seen.includes('run_started'), `live=${live}: ${seen}`);
    } finally {
      await watcher.close();
      await drv.close();
    }
  }
});

// A second harness resuming a run the first still drives is refused with
// conflict, naming the holder, and is not retryable; the control is force,
// which takes the run over.
test('a resume of a live run is a conflict; force takes it over', async () => {
  const file = storeFile();
  const spec = slowSpec();
  await withHarnesses(2, file, async (a, b) => {
    const run = await a.start(spec);
    for await (const ev of run) if (ev.kind === 'step_started') break;
    await assert.rejects(async () => (await b.resume(run.runId, spec)).result(),
      (e) => e.code === 'conflict' && !e.retryable && /pid/.test(e.detail));
    const taken = await b.resume(run.runId, spec, { force: true });
    for await (const ev of taken) if (ev.kind === 'step_started') break;
    taken.cancel();
    run.cancel();
  });
});
