'use strict';
// Runs the example of bindings/node/README.md (the block after its
// "<!-- example" marker) in the current directory, where io-harness is
// installed: make test-npm runs it in a fresh project that installed the
// packed tarball.
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
const m = readme.match(/<!-- example[^>]*-->\s*```js\n([\s\S]*?)```/);
if (!m) throw new Error('no example block in README.md');
fs.writeFileSync('readme_example.js', m[1]);
const env = Object.assign({}, process.env);
delete env.IO_HARNESS_LIB;
delete env.LD_LIBRARY_PATH;
const r = spawnSync(process.execPath, ['readme_example.js'], { encoding: 'utf8', env, timeout: 300000 });
process.stdout.write(r.stdout);
if (r.status !== 0 || !r.stdout.includes('success')) {
  console.error(r.stderr);
  process.exit(1);
}
console.log('ran with', require(require.resolve('io-harness', { paths: [process.cwd()] })).load().path);
