'use strict';
// Shared test support: the library under test and the shared fixtures.
const fs = require('fs');
const os = require('os');
const path = require('path');
const crypto = require('crypto');
const net = require('net');
const { spawn, spawnSync } = require('child_process');

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

// Postgres is a throwaway PostgreSQL server for the tests of a fleet's
// methods, as internal/pgtest starts one for the Go tests: the
// distribution's own initdb and postgres, a cluster in a temporary
// directory, a random password, a loopback port; run as the unprivileged
// user nobody when the tests run as root (PostgreSQL refuses root), and
// killed with the test process (setpriv --pdeathsig). start() resolves to
// the DSN, or to null with this.skip saying why PostgreSQL is missing.
class Postgres {
  constructor() {
    this.dir = '';
    this.proc = null;
    this.skip = '';
  }

  static binaries() {
    for (const d of (process.env.PATH || '').split(path.delimiter)) {
      const initdb = path.join(d, 'initdb');
      if (!d || !fs.existsSync(initdb)) continue;
      const real = path.dirname(fs.realpathSync(initdb));
      if (fs.existsSync(path.join(real, 'postgres'))) return real;
    }
    const root = '/usr/lib/postgresql';
    const versions = fs.existsSync(root) ? fs.readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a) : [];
    for (const v of versions) {
      const d = path.join(root, v, 'bin');
      if (fs.existsSync(path.join(d, 'initdb'))) return d;
    }
    return null;
  }

  // sweep removes the clusters of test processes killed before they could
  // stop their server (as pgtest does): a directory whose postmaster is
  // gone, or that never got one and is an hour old.
  static sweep() {
    for (const name of fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('io-harness-pg-'))) {
      const d = path.join(os.tmpdir(), name);
      let pid = 0;
      try {
        pid = parseInt(fs.readFileSync(path.join(d, 'data', 'postmaster.pid'), 'utf8').split('\n')[0], 10);
      } catch (_) {
        try {
          if (Date.now() - fs.statSync(d).mtimeMs > 3600e3) fs.rmSync(d, { recursive: true, force: true });
        } catch (_) { /* gone meanwhile */ }
        continue;
      }
      if (!(pid > 0)) continue;
      try {
        process.kill(pid, 0);
      } catch (e) {
        if (e.code === 'ESRCH') fs.rmSync(d, { recursive: true, force: true });
      }
    }
  }

  _as() {
    const o = { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C', TZ: 'UTC' }, cwd: this.dir };
    if (process.getuid() === 0) Object.assign(o, { uid: Postgres.NOBODY, gid: Postgres.NOBODY });
    return o;
  }

  async start() {
    const bin = Postgres.binaries();
    if (!bin) {
      this.skip = 'no PostgreSQL for this test: initdb and postgres are not installed (make deps installs them)';
      return null;
    }
    if (spawnSync('setpriv', ['--version']).status !== 0) {
      this.skip = 'no PostgreSQL for this test: setpriv (util-linux) is not installed';
      return null;
    }
    Postgres.sweep();
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'io-harness-pg-'));
    const pw = crypto.randomBytes(12).toString('hex');
    const pwfile = path.join(this.dir, 'pw');
    fs.writeFileSync(pwfile, pw + '\n', { mode: 0o600 });
    if (process.getuid() === 0) {
      for (const p of [this.dir, pwfile]) fs.chownSync(p, Postgres.NOBODY, Postgres.NOBODY);
    }
    const data = path.join(this.dir, 'data');
    const init = spawnSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'ioh', `--pwfile=${pwfile}`, '--auth=scram-sha-256',
      '-E', 'UTF8', '--locale=C', '--no-sync'], Object.assign({ encoding: 'utf8', timeout: 120000 }, this._as()));
    fs.rmSync(pwfile, { force: true });
    if (init.status !== 0) {
      this.stop();
      throw new Error(`initdb: ${init.status}: ${String(init.stdout).slice(-500)}${String(init.stderr).slice(-500)}`);
    }
    const port = await new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.on('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const p = srv.address().port;
        srv.close(() => resolve(p));
      });
    });
    this.proc = spawn('setpriv', ['--pdeathsig', 'KILL', '--', path.join(bin, 'postgres'), '-D', data, '-p', String(port), '-k', this.dir,
      '-c', 'listen_addresses=127.0.0.1', '-c', 'shared_buffers=32MB', '-c', 'log_min_messages=warning'],
    Object.assign({ stdio: ['ignore', 'ignore', 'pipe'] }, this._as()));
    let log = '';
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`postgres did not start within 2 minutes: ${log.slice(-500)}`)), 120000);
      // Read the server's log to its end, so that it never blocks on the pipe.
      this.proc.stderr.on('data', (d) => {
        if (log.length < 65536) log += d;
        if (log.includes('ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      this.proc.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`postgres exited ${code}: ${log.slice(-500)}`));
      });
    }).catch((e) => {
      this.stop();
      throw e;
    });
    return `postgres://ioh:${pw}@127.0.0.1:${port}/postgres?sslmode=disable`;
  }

  async stop() {
    const p = this.proc;
    this.proc = null;
    if (p && p.exitCode === null && p.signalCode === null) {
      // SIGQUIT is the immediate shutdown: the cluster is thrown away.
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGQUIT');
      const timer = setTimeout(() => p.kill('SIGKILL'), 30000);
      await exited;
      clearTimeout(timer);
    }
    if (this.dir) {
      fs.rmSync(this.dir, { recursive: true, force: true });
      this.dir = '';
    }
  }
}
Postgres.NOBODY = 65534;

module.exports = { REPO, libraryPath, fixtures, fixture, slowSpec, workspace, Postgres };
