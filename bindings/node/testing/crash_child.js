'use strict';
// The child processes of crash.test.js.
const ioh = require('..');
const { libraryPath, slowSpec, fixture } = require('./support');

const mode = process.argv[2];
const h = new ioh.Harness({ library: libraryPath() });

if (mode === 'exit') {
  // Runs are live and a poll is outstanding when the process exits.
  (async () => {
    const runs = await Promise.all([1, 2, 3, 4].map(() => h.start(slowSpec())));
    for await (const ev of runs[0]) {
      if (ev.kind === 'step_started') break;
    }
    console.log('EXITING');
    process.exit(0);
  })();
} else if (mode === 'alive') {
  // Nothing awaits the run: the outstanding poll alone keeps the process
  // alive until the run ends; then the process exits by itself.
  h.start(fixture('success').spec()).then((run) => run.result()).then((res) => {
    console.log('DONE', res.outcomeKind);
  });
} else if (mode === 'sigint') {
  process.on('SIGINT', () => {
    h.cancel();
    console.log('CANCELLED');
  });
  h.run(slowSpec(), { onEvent: (e) => { if (e.kind === 'step_started') console.log('READY'); } }).then((res) => {
    console.log('STATUS', res.status);
    return h.close();
  });
}
