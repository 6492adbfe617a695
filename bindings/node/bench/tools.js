'use strict';
// Benchmark: the cost of one host-language tool call over the C ABI. A
// scripted run whose first turn makes N calls to a JavaScript tool, and one
// with no call; prints (T(N) - T(0)) / N in seconds, the best of a few
// rounds. capi's BenchmarkHostToolCall compares it with a Go tool measured
// in the same run.
//
//   IO_HARNESS_LIB=bin/libio_harness.so.1 node bench/tools.js N
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Harness, tool } = require('..');

const echo = tool({ name: 'echo', description: 'Returns its text.', idempotent: true,
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute: ({ text }) => text });

function spec(n) {
  const calls = Array.from({ length: n }, () => ({ name: 'echo', arguments: { text: 'x' } }));
  return { task: { goal: 'g', root: fs.mkdtempSync(path.join(os.tmpdir(), 'ioh-bench-')),
    verification: [{ kind: 'workspace_file_contains', file: 'a', text: 'b' }], budgets: { max_steps: 1 } },
  provider: { name: 'scripted', script: { turns: [{ text: 't', tool_calls: calls, usage: { input_tokens: 1, output_tokens: 1 } }] } } };
}

async function timed(h, n) {
  const s = spec(n);
  const t0 = process.hrtime.bigint();
  const res = await h.run(s, { tools: [echo] });
  const took = Number(process.hrtime.bigint() - t0) / 1e9;
  if (res.outcomeKind !== 'verification_failed') throw new Error(JSON.stringify(res.outcome));
  return took;
}

(async () => {
  const n = Number(process.argv[2] || 200);
  const h = new Harness({ store: ':memory:' });
  await timed(h, 10);
  let best = Infinity;
  for (let i = 0; i < 3; i++) best = Math.min(best, (await timed(h, n)) - (await timed(h, 0)));
  await h.close();
  console.log(Math.max(best, 0) / n);
})();
