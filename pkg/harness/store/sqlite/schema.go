package sqlite

// migrations returns the schema's history. Entry i brings a file from
// version i to version i+1, and the file's PRAGMA user_version is the
// number of entries applied. Every entry is additive: it creates tables,
// indexes or columns and never drops or rewrites what an older version
// wrote, so an old file migrates in place and keeps every row.
//
// Never edit an entry that has shipped; append a new one and raise
// SchemaVersion.
func migrations() []string {
	return []string{schemaV1, schemaV2, schemaV3, schemaV4, schemaV5, schemaV6}
}

// SchemaVersion is the schema version this code writes and the newest it
// can read.
const SchemaVersion = 6

// schemaV1 holds runs, committed steps, their observations, and the event
// trace.
const schemaV1 = `
CREATE TABLE runs (
	id            TEXT PRIMARY KEY,
	parent_id     TEXT NOT NULL DEFAULT '',
	agent_path    TEXT NOT NULL DEFAULT 'root',
	task          TEXT NOT NULL,
	provider      TEXT NOT NULL DEFAULT '',
	status        TEXT NOT NULL DEFAULT 'running',
	outcome       TEXT NOT NULL DEFAULT '',
	outcome_json  TEXT NOT NULL DEFAULT '',
	started_at    INTEGER NOT NULL,
	finished_at   INTEGER NOT NULL DEFAULT 0,
	steps         INTEGER NOT NULL DEFAULT 0,
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	cost_usd      REAL NOT NULL DEFAULT 0,
	cost_known    INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX runs_parent ON runs(parent_id);

CREATE TABLE steps (
	run_id        TEXT NOT NULL REFERENCES runs(id),
	step          INTEGER NOT NULL,
	started_at    INTEGER NOT NULL,
	finished_at   INTEGER NOT NULL,
	assistant     TEXT NOT NULL,
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	cost_usd      REAL NOT NULL DEFAULT 0,
	cost_known    INTEGER NOT NULL DEFAULT 1,
	verified      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE observations (
	run_id     TEXT NOT NULL,
	step       INTEGER NOT NULL,
	idx        INTEGER NOT NULL,
	kind       TEXT NOT NULL,
	call_id    TEXT NOT NULL DEFAULT '',
	tool       TEXT NOT NULL DEFAULT '',
	arguments  TEXT NOT NULL DEFAULT '',
	output     TEXT NOT NULL DEFAULT '',
	is_error   INTEGER NOT NULL DEFAULT 0,
	refusal    TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, step, idx),
	FOREIGN KEY (run_id, step) REFERENCES steps(run_id, step)
) WITHOUT ROWID;

CREATE TABLE events (
	run_id TEXT NOT NULL REFERENCES runs(id),
	seq    INTEGER NOT NULL,
	step   INTEGER NOT NULL,
	kind   TEXT NOT NULL,
	at     INTEGER NOT NULL,
	data   TEXT NOT NULL,
	PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
`

// schemaV2 adds intent rows for effects that are not idempotent, one row
// per provider attempt (retries and fallbacks), and the provider that
// answered each step.
const schemaV2 = `
CREATE TABLE intents (
	id         INTEGER PRIMARY KEY,
	run_id     TEXT NOT NULL REFERENCES runs(id),
	step       INTEGER NOT NULL,
	call_id    TEXT NOT NULL,
	tool       TEXT NOT NULL,
	arguments  TEXT NOT NULL,
	state      TEXT NOT NULL DEFAULT 'open',
	created_at INTEGER NOT NULL
);
CREATE INDEX intents_open ON intents(run_id, state);

CREATE TABLE attempts (
	id         INTEGER PRIMARY KEY,
	run_id     TEXT NOT NULL REFERENCES runs(id),
	step       INTEGER NOT NULL,
	attempt    INTEGER NOT NULL,
	provider   TEXT NOT NULL,
	error_kind TEXT NOT NULL DEFAULT '',
	error      TEXT NOT NULL DEFAULT '',
	status     INTEGER NOT NULL DEFAULT 0,
	latency_ms INTEGER NOT NULL DEFAULT 0,
	wait_ms    INTEGER NOT NULL DEFAULT 0,
	at         INTEGER NOT NULL
);
CREATE INDEX attempts_run ON attempts(run_id, step);

ALTER TABLE steps ADD COLUMN provider TEXT NOT NULL DEFAULT '';
`

// schemaV3 adds approval requests, with the exact action a person is
// shown and its hash, and each run's policy and remembered rules.
const schemaV3 = `
CREATE TABLE approvals (
	id         TEXT PRIMARY KEY,
	run_id     TEXT NOT NULL REFERENCES runs(id),
	step       INTEGER NOT NULL,
	call_id    TEXT NOT NULL,
	tool       TEXT NOT NULL,
	arguments  TEXT NOT NULL,
	act        TEXT NOT NULL,
	target     TEXT NOT NULL,
	content    TEXT NOT NULL,
	shown      TEXT NOT NULL,
	hash       TEXT NOT NULL,
	rule       TEXT NOT NULL DEFAULT '',
	layer      TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL DEFAULT 'pending',
	decision   TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	decided_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX approvals_run ON approvals(run_id, state);

ALTER TABLE runs ADD COLUMN policy TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN remembered TEXT NOT NULL DEFAULT '';
`

// schemaV4 adds each run's lease (one driver at a time, fenced by a
// generation), provider spend recorded as each call completes (so a crash
// before the commit loses no spend from the accounts), the spend of steps
// that never committed, the time a run spent paused, and the result of a
// decided approval carried out before the model is told.
const schemaV4 = `
CREATE TABLE leases (
	run_id     TEXT PRIMARY KEY REFERENCES runs(id),
	host       TEXT NOT NULL,
	pid        INTEGER NOT NULL,
	started    INTEGER NOT NULL,
	generation INTEGER NOT NULL,
	expires    INTEGER NOT NULL,
	ttl_ms     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE spend (
	id                 INTEGER PRIMARY KEY,
	run_id             TEXT NOT NULL REFERENCES runs(id),
	step               INTEGER NOT NULL,
	attempt            INTEGER NOT NULL,
	provider           TEXT NOT NULL,
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	cost_usd           REAL NOT NULL DEFAULT 0,
	cost_known         INTEGER NOT NULL DEFAULT 1,
	state              TEXT NOT NULL DEFAULT 'open',
	at                 INTEGER NOT NULL
);
CREATE INDEX spend_open ON spend(run_id, state);

ALTER TABLE runs ADD COLUMN lost_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lost_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lost_cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lost_cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lost_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lost_cost_known INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN paused_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN paused_at INTEGER NOT NULL DEFAULT 0;

ALTER TABLE approvals ADD COLUMN result TEXT NOT NULL DEFAULT '';
`

// schemaV5 adds trees of agents: each run's root (its own id for a run
// that is no agent; empty in rows older than trees, which are roots), the
// containment a root's tree runs under, and the files each tool call
// wrote.
const schemaV5 = `
ALTER TABLE runs ADD COLUMN root_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN containment TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_root ON runs(root_id);

ALTER TABLE observations ADD COLUMN changed TEXT NOT NULL DEFAULT '';
`

// schemaV6 adds where a run's driver serves its live events (the lease
// owner's Live address), so that a watcher in another process finds it.
const schemaV6 = `
ALTER TABLE leases ADD COLUMN live TEXT NOT NULL DEFAULT '';
`
