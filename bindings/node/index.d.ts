// Type declarations of the io-harness Node binding. The JSON shapes (the
// run spec, the events, the results) are in ./types, generated from
// docs/spec.schema.json; docs/abi.md specifies the methods.

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

import type { Spec, Event, Outcome, ApprovalRequest, Decision, DoneEvent, Rule, ErrorObject, Price } from './types';
export * from './types';

export type DecisionLike = Decision | 'approve' | 'deny' | 'defer' | boolean;
export type Approver = (request: ApprovalRequest) => DecisionLike | Promise<DecisionLike>;

export class RunResult {
  run: number;
  runId: string;
  status: DoneEvent['status'];
  outcome: Outcome | null;
  error: HarnessError | null;
  remembered: Rule[];
  events: Event[];
  readonly outcomeKind: Outcome['kind'] | null;
  /** True when the run succeeded. */
  readonly ok: boolean;
}

export class Run implements AsyncIterable<Event> {
  readonly harness: Harness;
  readonly handle: number;
  readonly runId: string;
  approver: Approver | null;
  /** True for a run followed with Harness.watch: another process drives it; answer its approvals with decide. */
  readonly watched: boolean;
  /** Answers an approval request of this run, which this harness drives. */
  resolve(requestId: string, decision: DecisionLike): 'delivered' | 'stored' | 'already_resolved';
  /** Records a decision on a request the run waits on in the store (Harness.decide): how a watched run is answered. */
  decide(requestId: string, decision: DecisionLike): Promise<DecideState>;
  /** Cancels the run (a watched run: stops watching, and leaves the run alone); its done event still arrives. */
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
  /** Open an existing store file for reading only (trace, runs): a missing, empty or foreign file is refused. */
  readOnly?: boolean;
  /** Serve the events of the runs this harness drives, as they happen, to watchers in other processes on this host. */
  live?: boolean;
}

/** What a tool's execute receives beside its arguments. */
export interface ToolContext {
  runId: string;
  callId?: string;
}

/** A tool written in JavaScript; make one with tool(). */
export interface Tool<A = any> {
  readonly name: string;
  readonly description: string;
  /** The JSON Schema (type "object") the arguments are validated against before execute sees them. */
  readonly parameters: Record<string, unknown>;
  /** What the model sees: a string as it is, anything else as JSON. A throw or a rejection is an observation. */
  readonly execute: (args: A, ctx: ToolContext) => unknown | Promise<unknown>;
  /** Bounds one call (default 60000). */
  readonly timeoutMs?: number;
  /** A repeated call is harmless: the harness records no intent before each. */
  readonly idempotent?: boolean;
}

/** Declares a tool the model can call. */
export function tool<A = any>(def: {
  name: string;
  description: string;
  parameters?: Record<string, unknown>;
  execute: (args: A, ctx: ToolContext) => unknown | Promise<unknown>;
  timeoutMs?: number;
  idempotent?: boolean;
}): Tool<A>;

export interface StartOptions {
  approver?: Approver;
  /** Tools written in JavaScript the model may call. */
  tools?: Tool[];
  /**
   * "host" (the approver answers, or Run.resolve), "approve", "deny",
   * "defer", or "wait" (defer, and instead of ending, wait paused until
   * some process decides the request in the store: Harness.decide, from a
   * watch of the run here or elsewhere). Default: "host" with an
   * approver, "deny" without one.
   */
  approvals?: 'host' | 'approve' | 'deny' | 'defer' | 'wait';
}

export interface WatchOptions {
  /** Asked for each request the watched run waits on; its answer is recorded with Harness.decide. */
  approver?: Approver;
  /** How often the store is read, 0 to 60000 ms (default 250). */
  pollMs?: number;
}

/** What Harness.decide did: "decided" (recorded for the run's next driver), "queued" (a fleet's run: queued for a worker), or "pending" for a defer (which changes nothing). */
export type DecideState = 'decided' | 'queued' | 'pending';

/** The result of Harness.submit: the run's id, queued. */
export interface Submitted {
  run_id: string;
  state: 'queued';
}

/** The result of Harness.fetch: the directory (absolute) and how many files were written into it. */
export interface Fetched {
  dir: string;
  files: number;
}

/** One entry of the model catalogue. A field left out is unknown. */
export interface Model {
  vendor: string;
  id: string;
  aliases?: string[];
  context_window?: number;
  max_output_tokens?: number;
  price?: Price;
  tools: boolean;
  images: boolean;
  note?: string;
}

/** The result of modelsList: the catalogue as a run sees it, sorted by vendor and id. */
export interface ModelList {
  as_of: string;
  sources: string[];
  /** The override file merged in, or "". */
  override: string;
  models: Model[];
}

/** The result of storeCheck. */
export interface StoreCheck {
  ok: boolean;
  /** The report as text, as `io-harness store check` prints it. */
  text: string;
  report: {
    path: string;
    /** The store's files (database, -wal, -shm) and their sizes in bytes. */
    files: Record<string, number>;
    schema: number;
    /** SQLite's integrity check: ["ok"], or the problems found. */
    integrity: string[];
    /** The runs by status. */
    runs: Record<string, number>;
    /** How many runs a driver holds now. */
    leased: number;
  };
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
  /** True when the harness serves its runs' events live (opts.live). */
  readonly live: boolean;
  start(spec: Spec | string, opts?: StartOptions): Promise<Run>;
  run(spec: Spec | string, opts?: RunOptions): Promise<RunResult>;
  /** Continues a stored run (run.resume). A run another live process drives rejects with conflict; force takes it over. */
  resume(runId: string, spec: Spec | string, opts?: StartOptions & { budgets?: Record<string, unknown>; reopen?: boolean; force?: boolean }): Promise<Run>;
  resumeWithDecision(runId: string, requestId: string, decision: DecisionLike, spec: Spec | string,
    opts?: StartOptions & { budgets?: Record<string, unknown> }): Promise<Run>;
  resolve(runId: string, requestId: string, decision: DecisionLike): 'delivered' | 'stored' | 'already_resolved';
  /** Follows a run another harness or process drives (run.watch). */
  watch(runId: string, opts?: WatchOptions): Promise<Run>;
  /** Answers a deferred request of any run of the store (approval.decide): recorded for its next driver, or queued for a worker when the run was submitted to a fleet (opts.by names who decided). */
  decide(runId: string, requestId: string, decision: DecisionLike, opts?: { by?: string }): Promise<DecideState>;
  /** Queues a run for a fleet's workers (run.submit; a postgres:// store). */
  submit(spec: Spec | string, opts?: { upload?: boolean }): Promise<Submitted>;
  /** Writes an uploaded submitted run's finished workspace into dir (run.fetch; a postgres:// store). */
  fetch(runId: string, dir: string): Promise<Fetched>;
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
  callRaw(text: string): { ok: boolean; result?: unknown; error?: ErrorObject; id?: unknown };
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
/**
 * The model catalogue as a run sees it (models.list): the built-in one, with an override file merged in; with
 * useEnvironment and no file, the one IO_HARNESS_MODELS names in the environment as it was when the library loaded
 * (the Go runtime reads it then, and does not see process.env changed later).
 */
export function modelsList(opts?: { file?: string; useEnvironment?: boolean; library?: string }): Promise<ModelList>;
/** Checks a SQLite store file, reading only (store.check). */
export function storeCheck(store: string, opts?: { library?: string }): Promise<StoreCheck>;
export function sandboxBackends(opts?: { library?: string }): Promise<Array<{ name: string; available: boolean; enforcement?: Record<string, unknown>; reason?: string }>>;
