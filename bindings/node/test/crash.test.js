'use strict';
// Crash behaviour, each case in a subprocess with a timeout.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

const CHILD = path.join(__dirname, '..', 'testing', 'crash_child.js');

function runChild(mode, timeoutMs, onLine) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CHILD, mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`child ${mode} hung (killed after ${timeoutMs}ms)\n${out}\n${err}`));
    }, timeoutMs);
    p.stdout.on('data', (d) => {
      out += d;
      if (onLine) onLine(out, p);
    });
    p.stderr.on('data', (d) => { err += d; });
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out, err });
    });
  });
}

function assertNoGoCrash(err) {
  for (const marker of ['goroutine ', 'fatal error:', 'panic:', 'SIGSEGV']) {
    assert.ok(!err.includes(marker), `Go crash output:\n${err}`);
  }
}

test('exit with runs in flight is clean', async () => {
  const r = await runChild('exit', 30000);
  assert.match(r.out, /EXITING/);
  assert.equal(r.code, 0, r.err);
  assertNoGoCrash(r.err);
});

test('the process stays alive until the run ends, then exits', async () => {
  const r = await runChild('alive', 30000);
  assert.match(r.out, /DONE success/);
  assert.equal(r.code, 0, r.err);
});

test('SIGINT with a handler cancels the run', async () => {
  let sent = false;
  const r = await runChild('sigint', 30000, (out, p) => {
    if (!sent && out.includes('READY')) {
      sent = true;
      p.kill('SIGINT');
    }
  });
  assert.match(r.out, /CANCELLED/);
  assert.match(r.out, /STATUS cancelled/);
  assert.equal(r.code, 0, r.err);
  assertNoGoCrash(r.err);
});
