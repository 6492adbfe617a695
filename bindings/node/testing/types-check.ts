// Type-checked by make typecheck (tsc --strict, never run): the declarations
// must let a TypeScript program build a Spec, register a tool, and narrow
// events on their kind.
import { Harness, tool, type Spec, type Event, type RunResult } from '..';
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
}
main();
