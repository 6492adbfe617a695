'use strict';
// Shared test support: the library under test and the shared fixtures.
const fs = require('fs');
const os = require('os');
const path = require('path');

const REPO = path.resolve(__dirname, '..', '..', '..');
const FIXTURES = path.join(REPO, 'internal', 'abi', 'testdata', 'fixtures');

// libraryPath is the library under test: IO_HARNESS_LIB, or the
// repository's bin/. A relative IO_HARNESS_LIB is made absolute here,
// against the directory the tests were started in, and exported so: the
// tests' child processes run in other directories.
function libraryPath() {
  const p = path.resolve(process.env.IO_HARNESS_LIB || path.join(REPO, 'bin', 'libio_harness.so.1'));
  if (!fs.existsSync(p)) throw new Error(`no library at ${p}: build it first (make lib) or set IO_HARNESS_LIB`);
  process.env.IO_HARNESS_LIB = p;
  return p;
}

function readJSON(p) {
  return fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, 'utf8')) : null;
}

function workspace() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-node-'));
}

function fixtures() {
  return fs.readdirSync(FIXTURES).sort()
    .filter((n) => fs.existsSync(path.join(FIXTURES, n, 'spec.json')))
    .map((name) => {
      const dir = path.join(FIXTURES, name);
      const text = fs.readFileSync(path.join(dir, 'spec.json'), 'utf8');
      return {
        name,
        spec: () => JSON.parse(text.replace('"$WORKSPACE"', JSON.stringify(workspace()))),
        approve: readJSON(path.join(dir, 'approve.json')),
        resume: readJSON(path.join(dir, 'resume.json')),
        golden: fs.readFileSync(path.join(dir, 'events.golden'), 'utf8').split(/\s+/).filter(Boolean),
      };
    });
}

function fixture(name) {
  const f = fixtures().find((x) => x.name === name);
  if (!f) throw new Error(`no fixture ${name}`);
  return f;
}

function slowSpec(latencyMs = 60000) {
  return {
    task: { goal: 'wait', root: workspace(), verification: [{ kind: 'workspace_file_contains', file: 'x.txt', text: 'x' }] },
    provider: { name: 'scripted', script: { turns: [{ text: 'slow', latency_ms: latencyMs }] } },
  };
}

module.exports = { REPO, libraryPath, fixtures, fixture, slowSpec, workspace };
