// Type declarations of the io-harness Node binding. The JSON shapes are
// specified in docs/abi.md (methods, events, errors) and docs/spec.md (the
// run spec).

/** The error codes of the envelope. */
export type ErrorCode =
  | 'invalid_json' | 'invalid_argument' | 'unknown_method' | 'not_found' | 'conflict' | 'cancelled'
  | 'deadline_exceeded' | 'permission_denied' | 'unavailable' | 'abi_mismatch' | 'internal';

export const ABI_MAJOR: number;
export const ABI_MINOR: number;
export const CODES: ErrorCode[];
/** The one environment variable the binding reads: the library's path. */
export const ENV_LIBRARY: 'IO_HARNESS_LIB';

/** An error envelope of the library. */
export class HarnessError extends Error {
  constructor(code: string, message: string, retryable?: boolean, details?: Record<string, unknown>);
  code: ErrorCode | string;
  /** The envelope's message, without the code prefix. */
  detail: string;
  retryable: boolean;
  details: Record<string, unknown>;
}

/** The run spec (harness.Spec); see docs/spec.md. */
export interface Spec {
  task: Record<string, unknown>;
  provider: { name: string; [field: string]: unknown };
  fallbacks?: Array<{ name: string; [field: string]: unknown }>;
  backoff?: { base?: string; max?: string };
  policy?: Record<string, unknown>;
  sandbox?: { backend?: string; helper_path?: string };
}

/** An event; every event has a kind, run events also run (handle) and run_id. */
export interface Event {
  kind: string;
  run?: number;
  run_id?: string;
  seq?: number;
  step?: number;
  request_id?: string;
  request?: ApprovalRequest;
  status?: 'ok' | 'cancelled' | 'error';
  outcome?: Outcome;
  error?: { code: ErrorCode; message: string; retryable: boolean; details?: Record<string, unknown> };
  [field: string]: unknown;
}

export interface Outcome {
  kind: 'success' | 'step_cap_reached' | 'time_budget_exceeded' | 'cost_budget_exceeded' | 'escalated' |
    'cancelled' | 'awaiting_approval' | string;
  steps: number;
  usage: { input_tokens: number; output_tokens: number; cache_read_tokens?: number; cache_write_tokens?: number };
  cost: { usd: number; known: boolean };
  budget?: string;
  retryable?: boolean;
  reason?: string;
  request_id?: string;
}

/** approve.Request: the action waiting for a decision. */
export interface ApprovalRequest {
  id: string;
  run_id: string;
  step: number;
  tool: string;
  call_id: string;
  act: 'read' | 'write' | 'exec' | 'net';
  target: string;
  content?: string;
  shown?: string;
  hash: string;
  rule?: string;
  layer?: string;
}

/** approve.Decision. */
export interface Decision {
  kind: 'approve' | 'deny' | 'defer';
  reason?: string;
  rewrite?: { target?: string; content?: string };
  remember?: Array<{ act: string; effect: string; pattern: string }>;
}

export type DecisionLike = Decision | 'approve' | 'deny' | 'defer' | boolean;
export type Approver = (request: ApprovalRequest) => DecisionLike | Promise<DecisionLike>;

export class RunResult {
  run: number;
  runId: string;
  status: 'ok' | 'cancelled' | 'error';
  outcome: Outcome | null;
  error: HarnessError | null;
  remembered: Array<Record<string, unknown>>;
  events: Event[];
  readonly outcomeKind: string | null;
  /** True when the run succeeded. */
  readonly ok: boolean;
}

export class Run implements AsyncIterable<Event> {
  readonly harness: Harness;
  readonly handle: number;
  readonly runId: string;
  approver: Approver | null;
  /** Answers an approval request of this run. */
  resolve(requestId: string, decision: DecisionLike): 'delivered' | 'stored' | 'already_resolved';
  /** Cancels the run; its done event still arrives. */
  cancel(): void;
  /** The run's events, up to and including its done event. */
  events(): AsyncGenerator<Event, void, undefined>;
  [Symbol.asyncIterator](): AsyncGenerator<Event, void, undefined>;
  /** Resolves once the run ends. */
  result(): Promise<RunResult>;
}

export interface HarnessOptions {
  /** A store file path, or ":memory:" (the default). */
  store?: string;
  /** The library's path; else IO_HARNESS_LIB, the package's native/, the loader's path. */
  library?: string;
  /** Let the spec builder read provider keys and models from the environment. */
  useEnvironment?: boolean;
  /** The event queue's capacity (default 1024). */
  queueSize?: number;
}

export interface StartOptions {
  approver?: Approver;
  /** "host" (the default: the approver, or Run.resolve), "approve", "deny" or "defer". */
  approvals?: 'host' | 'approve' | 'deny' | 'defer';
}

export interface RunOptions extends StartOptions {
  onEvent?: (event: Event) => void | Promise<void>;
  /** Aborting cancels the run. */
  signal?: AbortSignal;
}

export class Harness {
  constructor(opts?: HarnessOptions);
  readonly handle: number;
  readonly store: string;
  start(spec: Spec | string, opts?: StartOptions): Promise<Run>;
  run(spec: Spec | string, opts?: RunOptions): Promise<RunResult>;
  resume(runId: string, spec: Spec | string, opts?: { budgets?: Record<string, unknown>; reopen?: boolean; approver?: Approver }): Promise<Run>;
  resumeWithDecision(runId: string, requestId: string, decision: DecisionLike, spec: Spec | string,
    opts?: { budgets?: Record<string, unknown>; approver?: Approver }): Promise<Run>;
  resolve(runId: string, requestId: string, decision: DecisionLike): 'delivered' | 'stored' | 'already_resolved';
  cancel(): void;
  trace(runId: string, format?: 'json'): Promise<Record<string, unknown>>;
  trace(runId: string, format: 'text'): Promise<string>;
  runs(opts?: { limit?: number }): Promise<Array<Record<string, unknown>>>;
  close(timeoutMs?: number): Promise<void>;
  closeSync(timeoutMs?: number): void;
}

export class Library {
  readonly path: string;
  readonly abi: [number, number];
  callRaw(text: string): { ok: boolean; result?: unknown; error?: Event['error']; id?: unknown };
  call(method: string, params?: Record<string, unknown>): any;
  callAsync(method: string, params?: Record<string, unknown>): Promise<any>;
  pollAsync(harness: number, timeoutMs: number, max: number): Promise<string | null>;
  cancel(handle: number): number;
  close(harness: number, timeoutMs: number): number;
  closeAsync(harness: number, timeoutMs: number): Promise<number>;
}

export function load(file?: string): Library;
export function call(method: string, params?: Record<string, unknown>, opts?: { library?: string }): any;
export function version(opts?: { library?: string }): {
  version: string; abi: { major: number; minor: number }; methods: string[]; event_kinds: string[]; error_codes: ErrorCode[];
  [field: string]: unknown;
};
export function debugStats(opts?: { library?: string }): {
  strings_out: number; strings_freed: number; strings_live: number; callback_strings: number;
  harnesses: number; runs: number; goroutines: number; all_goroutines: number;
};
export function policyExplain(policy: 'default' | 'permissive' | Record<string, unknown>, act: string, target: string,
  opts?: { library?: string }): { act: string; target: string; effect: 'allow' | 'ask' | 'deny'; rule?: string; layer?: string };
export function sandboxExec(spec: string[] | Record<string, unknown>, opts?: { backend?: string; library?: string }): Promise<Record<string, unknown>>;
export function sandboxBackends(opts?: { library?: string }): Promise<Array<{ name: string; available: boolean; enforcement?: Record<string, unknown>; reason?: string }>>;
