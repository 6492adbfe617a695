'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const os = require('os');
const path = require('path');
const fs = require('fs');

const ioh = require('..');
const { libraryPath, fixtures, fixture, slowSpec } = require('../testing/support');

const LIB = libraryPath();
const kinds = (evs) => evs.map((e) => e.kind);

// Every test closes its harnesses, then proves through debug.stats that
// every string the library handed out was freed.
async function withHarness(opts, fn) {
  const h = new ioh.Harness(Object.assign({ library: LIB }, opts));
  try {
    return await fn(h);
  } finally {
    await h.close();
    const st = ioh.debugStats({ library: LIB });
    assert.equal(st.strings_live, 0, `strings not freed: ${JSON.stringify(st)}`);
    assert.equal(st.runs, 0, `runs left: ${JSON.stringify(st)}`);
  }
}

test('version and ABI', () => {
  const v = ioh.version({ library: LIB });
  assert.equal(v.abi.major, ioh.ABI_MAJOR);
  assert.ok(v.methods.includes('run.start'));
  assert.deepEqual(v.error_codes, ioh.CODES);
});

test('bad JSON and bad specs are typed errors', async () => {
  const lib = ioh.load(LIB);
  const env = lib.callRaw('{not json');
  assert.equal(env.ok, false);
  assert.equal(env.error.code, 'invalid_json');
  assert.throws(() => ioh.call('no.such.method', undefined, { library: LIB }), (e) => e instanceof ioh.HarnessError && e.code === 'unknown_method');
  await withHarness({}, async (h) => {
    await assert.rejects(h.start({ task: { goal: '' }, provider: { name: 'scripted' } }),
      (e) => e instanceof ioh.HarnessError && e.code === 'invalid_argument');
    assert.throws(() => h.resolve('run_nope', 'apr_nope', 'approve'), (e) => e.code === 'not_found');
  });
});

test('policy explain', () => {
  const v = ioh.policyExplain('default', 'read', '.env', { library: LIB });
  assert.equal(v.effect, 'deny');
  assert.equal(v.layer, 'builtin-secrets');
});

test('sandbox backends', async () => {
  const list = await ioh.sandboxBackends({ library: LIB });
  assert.ok(list.some((b) => b.name === 'host'));
  for (const b of list) assert.equal(b.available, b.enforcement !== undefined);
});

test('a scripted run to success, read back from the store', async () => {
  const store = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-node-db-')), 'trace.db');
  await withHarness({ store }, async (h) => {
    const seen = [];
    const res = await h.run(fixture('success').spec(), { onEvent: (e) => seen.push(e) });
    assert.ok(res.ok, JSON.stringify(res.outcome));
    assert.deepEqual(kinds(seen), fixture('success').golden);
    assert.match(await h.trace(res.runId, 'text'), /outcome: success/);
    assert.deepEqual((await h.runs()).map((r) => r.id), [res.runId]);
  });
});

test('an approval callback', async () => {
  await withHarness({}, async (h) => {
    const asked = [];
    const res = await h.run(fixture('approve').spec(), {
      approver: async (req) => { asked.push(req); return { kind: 'approve' }; },
    });
    assert.ok(res.ok);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].target, 'config.toml');
  });
});

test('defer an approval, then resolve it from another harness', async () => {
  const store = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-node-db-')), 'trace.db');
  const f = fixture('defer_resume');
  const spec = f.spec();
  const first = await withHarness({ store }, (h) => h.run(spec, { approver: () => 'defer' }));
  assert.equal(first.outcomeKind, 'awaiting_approval');
  await withHarness({ store }, async (h) => {
    const run = await h.resumeWithDecision(first.runId, first.outcome.request_id, 'approve', spec);
    const res = await run.result();
    assert.ok(res.ok);
    assert.equal(res.runId, first.runId);
    await assert.rejects(h.resumeWithDecision(first.runId, first.outcome.request_id, 'approve', spec), (e) => e.code === 'conflict');
  });
});

// The model's turn takes an hour: the run ends (within the test timeout,
// far from the second it takes) only if the cancel interrupted it.
test('cancel a run midway', async () => {
  await withHarness({}, async (h) => {
    const run = await h.start(slowSpec(3_600_000));
    for await (const ev of run) {
      if (ev.kind === 'step_started') run.cancel();
    }
    const res = await run.result();
    assert.equal(res.status, 'cancelled');
    assert.equal(res.outcomeKind, 'cancelled');
  });
});

test('an AbortSignal cancels a run', async () => {
  await withHarness({}, async (h) => {
    const ac = new AbortController();
    const p = h.run(slowSpec(), { signal: ac.signal, onEvent: (e) => { if (e.kind === 'step_started') ac.abort(); } });
    assert.equal((await p).status, 'cancelled');
  });
});

test('resolve from the iterator, not a callback', async () => {
  await withHarness({}, async (h) => {
    // approvals 'host': no approver, the caller answers from the events.
    const run = await h.start(fixture('approve').spec(), { approvals: 'host' });
    const got = [];
    for await (const ev of run.events()) {
      got.push(ev.kind);
      if (ev.kind === 'approval_pending') assert.equal(run.resolve(ev.request_id, { kind: 'approve' }), 'delivered');
    }
    assert.deepEqual(got, fixture('approve').golden);
  });
});

test('concurrent runs on one harness', async () => {
  await withHarness({}, async (h) => {
    const results = await Promise.all(Array.from({ length: 6 }, () => h.run(fixture('success').spec())));
    assert.ok(results.every((r) => r.ok));
    assert.equal(new Set(results.map((r) => r.runId)).size, 6);
  });
});

test('the shared fixtures produce their golden event kinds', async () => {
  for (const f of fixtures()) {
    await withHarness({}, async (h) => {
      const spec = f.spec();
      const res = await h.run(spec, { approver: f.approve ? () => f.approve : undefined });
      let got = kinds(res.events);
      if (f.resume) {
        assert.equal(res.outcomeKind, 'awaiting_approval', f.name);
        const again = await (await h.resumeWithDecision(res.runId, res.outcome.request_id, f.resume, spec)).result();
        got = got.concat(kinds(again.events));
      }
      assert.deepEqual(got, f.golden, f.name);
    });
  }
});

test('close ends a live run with an error', async () => {
  const h = new ioh.Harness({ library: LIB });
  const run = await h.start(slowSpec());
  await h.close();
  await assert.rejects(run.result(), (e) => e.code === 'unavailable');
  await assert.rejects(h.start(slowSpec()), (e) => e.code === 'unavailable');
});
