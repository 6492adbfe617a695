'use strict';
// How the binding finds the library, each case in a fresh process: an
// explicit path, IO_HARNESS_LIB, a copy inside the package, and a clear
// error when there is none.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { libraryPath } = require('../testing/support');

const LIB = libraryPath();
const PKG = path.resolve(__dirname, '..');

// A copy of the package in a temporary directory, sharing node_modules.
function packageCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-node-load-'));
  for (const f of ['index.js', 'package.json']) fs.copyFileSync(path.join(PKG, f), path.join(dir, f));
  fs.symlinkSync(path.join(PKG, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

function runNode(dir, code, envLib) {
  const env = Object.assign({}, process.env, { LD_LIBRARY_PATH: '' });
  delete env.IO_HARNESS_LIB;
  if (envLib) env.IO_HARNESS_LIB = envLib;
  return spawnSync(process.execPath, ['-e', code], { cwd: dir, env, encoding: 'utf8', timeout: 60000 });
}

test('an explicit path', () => {
  const dir = packageCopy();
  const r = runNode(dir, `console.log(require('./').load(${JSON.stringify(LIB)}).path)`);
  assert.equal(r.stdout.trim(), LIB, r.stderr);
});

test('IO_HARNESS_LIB', () => {
  const r = runNode(packageCopy(), "console.log(require('./').load().path)", LIB);
  assert.equal(r.stdout.trim(), LIB, r.stderr);
});

test('a copy inside the package', () => {
  const dir = packageCopy();
  fs.mkdirSync(path.join(dir, 'native'));
  fs.copyFileSync(LIB, path.join(dir, 'native', 'libio_harness.so.1'));
  const r = runNode(dir, "const m = require('./'); console.log(m.load().path, m.version().abi.major)");
  assert.equal(r.stdout.trim(), `${path.join(dir, 'native', 'libio_harness.so.1')} 1`, r.stderr);
});

test('not found is a clear error', () => {
  const r = runNode(packageCopy(), "try { require('./').load() } catch (e) { console.log(e.code, e.message) }");
  assert.match(r.stdout, /^ENOLIB .*IO_HARNESS_LIB/, r.stderr);
});
