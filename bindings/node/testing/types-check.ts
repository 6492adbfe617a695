// Type-checked by make typecheck (tsc --strict, never run): the declarations
// must let a TypeScript program build a Spec, register a tool, and narrow
// events on their kind.
import { Harness, tool, modelsList, storeCheck, type Spec, type Event, type RunResult, type Run, type DecideState, type ModelList } from '..';
const add = tool<{ a: number; b: number }>({ name: 'add', description: 'Adds.', parameters: { type: 'object' }, execute: ({ a, b }) => a + b });
async function main(): Promise<void> {
  const spec: Spec = { task: { goal: 'g', root: '/tmp', verification: [{ kind: 'file_contains', file: 'a', text: 'b' }] }, provider: { name: 'scripted', script: { turns: [] } }, policy: 'default' };
  const h = new Harness({ store: ':memory:' });
  const res: RunResult = await h.run(spec, { tools: [add] });
  const k: 'success' | 'step_cap_reached' | 'time_budget_exceeded' | 'cost_budget_exceeded' | 'escalated' | 'cancelled' | 'awaiting_approval' |
    'finished' | 'verification_failed' | 'schema_unsatisfied' | 'budget_ceiling_reached' | null = res.outcomeKind;
  for (const ev of res.events) {
    const e: Event = ev;
    if (e.kind === 'host_tool_call') console.log(e.tool, e.arguments);
    if (e.kind === 'done') console.log(e.status, e.outcome?.steps);
  }
  console.log(k);
  // Watch a run another process drives; decide what it waits on.
  const watched: Run = await h.watch('run_x', { pollMs: 50, approver: (req) => (req.act === 'write' ? 'approve' : { kind: 'deny', reason: 'no' }) });
  for await (const ev of watched) {
    if (ev.kind === 'approval_pending') {
      const st: DecideState = await watched.decide(ev.request_id, 'approve');
      console.log(st, await h.decide(watched.runId, ev.request_id, { kind: 'deny', reason: 'late' }));
    }
  }
  const sub = await h.submit(spec, { upload: true });
  const q: DecideState = await h.decide(sub.run_id, 'apr_x', true, { by: 'me' });
  const f = await h.fetch(sub.run_id, '/tmp/out');
  console.log(sub.state, q, f.files, f.dir);
  const cat: ModelList = await modelsList({ file: 'models.json' });
  console.log(cat.models[0].price?.input, cat.models[0].context_window);
  const chk = await storeCheck('trace.db');
  console.log(chk.ok, chk.report.integrity[0], chk.report.runs['finished']);
}
main();
