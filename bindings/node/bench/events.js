'use strict';
// Times the delivery of N events of one harness queue to Node through the
// binding's path: one outstanding asynchronous batch poll (1000 per call),
// each batch parsed. Prints seconds. capi's BenchmarkEvents20k runs it
// beside a pure-Go baseline.
//
//   IO_HARNESS_LIB=bin/libio_harness.so.1 node bindings/node/bench/events.js 20000
const ioh = require('..');

async function main() {
  const n = Number(process.argv[2] || 20000);
  const lib = ioh.load();
  const h = lib.call('harness.open', { store: ':memory:' }).harness;
  const t0 = process.hrtime.bigint();
  lib.call('debug.emit', { harness: h, count: n });
  let got = 0;
  for (;;) {
    const text = await lib.pollAsync(h, 1000, 1000);
    if (text == null) throw new Error(`stalled after ${got} events`);
    const evs = JSON.parse(text);
    if (evs[evs.length - 1].kind === 'debug_done') {
      got += evs.length - 1;
      break;
    }
    got += evs.length;
  }
  const took = Number(process.hrtime.bigint() - t0) / 1e9;
  lib.close(h, 5000);
  if (got !== n) throw new Error(`${got} events, want ${n}`);
  console.log(took.toFixed(4));
}

main().catch((e) => { console.error(e); process.exit(1); });
