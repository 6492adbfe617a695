'use strict';
// Host-language tools, and the defects of issue 15 in the Node binding.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ioh = require('..');
const { libraryPath, fixture, workspace } = require('../testing/support');

const LIB = libraryPath();

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

// A scripted run: the first turn makes the calls, the second writes done.txt.
function toolSpec(calls, policy) {
  const spec = {
    task: { goal: 'Use the tools, then write done.txt.', root: workspace(),
      verification: [{ kind: 'workspace_file_contains', file: 'done.txt', text: 'done' }] },
    provider: { name: 'scripted', script: { turns: [
      { text: 'Calling.', tool_calls: calls },
      { text: 'Writing.', tool_calls: [{ name: 'write_file', arguments: { path: 'done.txt', content: 'done\n' } }] },
    ] } },
  };
  if (policy) spec.policy = policy;
  return spec;
}

const results = (res, name) => res.events.filter((e) => e.kind === 'tool_result' && e.tool === name);

const add = ioh.tool({
  name: 'add',
  description: 'Adds two integers.',
  parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'], additionalProperties: false },
  execute: ({ a, b }) => a + b,
});

test('tool() refuses a bad declaration', () => {
  assert.throws(() => ioh.tool({ name: '1x', description: 'd', execute() {} }), /tool name/);
  assert.throws(() => ioh.tool({ name: 'x', description: '', execute() {} }), /description/);
  assert.throws(() => ioh.tool({ name: 'x', description: 'd' }), /execute/);
  assert.throws(() => ioh.tool({ name: 'x', description: 'd', parameters: { type: 'string' }, execute() {} }), /parameters/);
});

test('a JavaScript tool called by the model', async () => {
  await withHarness({}, async (h) => {
    const res = await h.run(toolSpec([{ name: 'add', arguments: { a: 2, b: 3 } }]), { tools: [add] });
    assert.ok(res.ok, JSON.stringify(res.outcome));
    const r = results(res, 'add');
    assert.equal(r[0].output, '5');
    assert.ok(!r[0].is_error);
  });
});

test('arguments that break the schema never reach execute', async () => {
  let called = 0;
  const strict = ioh.tool(Object.assign({}, add, { execute: () => { called++; return 0; } }));
  await withHarness({}, async (h) => {
    const res = await h.run(toolSpec([{ name: 'add', arguments: { a: 'two', b: 3 } }]), { tools: [strict] });
    assert.ok(res.ok);
    assert.equal(called, 0);
    assert.match(results(res, 'add')[0].output, /do not match its parameters schema/);
  });
});

test('an async execute, and a rejection that becomes an observation', async () => {
  const slow = ioh.tool({ name: 'slow', description: 'Waits, then answers.', execute: async () => {
    await new Promise((r) => setTimeout(r, 10));
    return { ok: true };
  } });
  const boom = ioh.tool({ name: 'boom', description: 'Fails.', execute: async () => { throw new RangeError('out of range'); } });
  await withHarness({}, async (h) => {
    const res = await h.run(toolSpec([{ name: 'slow', arguments: {} }, { name: 'boom', arguments: {} }]), { tools: [slow, boom] });
    assert.ok(res.ok);
    assert.equal(results(res, 'slow')[0].output, '{"ok":true}');
    const b = results(res, 'boom')[0];
    assert.ok(b.is_error);
    assert.match(b.output, /RangeError: out of range/);
  });
});

test('a busy host: a call past its timeout fails cleanly and the run goes on', async () => {
  let release;
  const stuck = ioh.tool({ name: 'stuck', description: 'Never answers in time.', timeoutMs: 300,
    execute: () => new Promise((r) => { release = r; }) });
  await withHarness({}, async (h) => {
    const res = await h.run(toolSpec([{ name: 'stuck', arguments: {} }]), { tools: [stuck] });
    release('late');
    assert.ok(res.ok);
    assert.match(results(res, 'stuck')[0].output, /did not answer within 300ms/);
  });
});

test('the exec policy applies to a tool by its name', async () => {
  let called = 0;
  const rm = ioh.tool({ name: 'rm', description: 'Removes.', execute: () => { called++; return 'gone'; } });
  const policy = { version: 1, defaults: { read: 'allow', write: 'allow', exec: 'allow', net: 'deny' },
    layers: [{ name: 't', rules: [{ act: 'exec', effect: 'deny', pattern: 'rm' }] }] };
  await withHarness({}, async (h) => {
    const res = await h.run(toolSpec([{ name: 'rm', arguments: {} }], policy), { tools: [rm] });
    assert.equal(called, 0);
    assert.ok(res.events.some((e) => e.kind === 'refusal'));
  });
});

// Issue 15: run() with a policy that asks and no approver kept the process
// alive forever. An ask with no approver is a denial.
test('an ask with no approver is a denial', async () => {
  await withHarness({}, async (h) => {
    const res = await h.run(fixture('approve').spec());
    const resolved = res.events.find((e) => e.kind === 'approval_resolved');
    assert.equal(resolved.decision, 'deny');
    assert.ok(!res.events.some((e) => e.kind === 'approval_pending'));
  });
});

// Issue 15: start, resume, trace and runs called the synchronous C call on
// the event loop, so SQLite work blocked it. With the store's write lock
// held by another process, start() must leave the loop running.
test('start does not block the event loop while the store is busy', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-node-lock-'));
  const store = path.join(dir, 'trace.db');
  await withHarness({ store }, async (h) => {
    const locker = spawn('python3', ['-c', [
      'import sqlite3, sys',
      `c = sqlite3.connect(${JSON.stringify(store)}, isolation_level=None, timeout=30)`,
      'c.execute("BEGIN IMMEDIATE")',
      'print("LOCKED", flush=True)',
      'sys.stdin.readline()',
      'c.execute("COMMIT")',
    ].join('\n')], { stdio: ['pipe', 'pipe', 'inherit'] });
    t.after(() => locker.kill());
    await new Promise((resolve, reject) => {
      locker.stdout.on('data', (d) => { if (String(d).includes('LOCKED')) resolve(); });
      locker.on('exit', (code) => reject(new Error(`the locker exited with ${code}`)));
    });
    let settled = false;
    const started = h.start(fixture('success').spec());
    started.then(() => { settled = true; }, () => { settled = true; });
    await new Promise((r) => setImmediate(r));
    assert.equal(settled, false, 'start() settled while the store was locked: it ran on the event loop');
    const tracing = h.runs();
    await new Promise((r) => setImmediate(r));
    locker.stdin.end('go\n');
    const run = await started;
    assert.ok((await run.result()).ok);
    await tracing;
  });
});
