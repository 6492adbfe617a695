'use strict';
// The driver process of watch.test.js: it starts a run whose write waits
// for a person (approvals 'wait') over a store file, prints its id, drives
// it to its end and prints the outcome. Another process watches the run
// and decides the request.
//
//   node watch_child.js STORE WORKSPACE
const ioh = require('..');
const { libraryPath, fixture } = require('./support');

const [store, ws] = process.argv.slice(2);
(async () => {
  const h = new ioh.Harness({ library: libraryPath(), store });
  const spec = fixture('defer_resume').spec();
  spec.task.root = ws;
  const run = await h.start(spec, { approvals: 'wait' });
  console.log('RUN', run.runId);
  const res = await run.result();
  console.log('DONE', res.status, res.outcomeKind);
  await h.close();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
