package store

// migrations returns the schema's history. Entry i brings a file from
// version i to version i+1, and the file's PRAGMA user_version is the
// number of entries applied. Every entry is additive: it creates tables,
// indexes or columns and never drops or rewrites what an older version
// wrote, so an old file migrates in place and keeps every row.
//
// Never edit an entry that has shipped; append a new one and raise
// SchemaVersion.
func migrations() []string { return []string{schemaV1, schemaV2, schemaV3} }

// SchemaVersion is the schema version this code writes and the newest it
// can read.
const SchemaVersion = 3

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
