package postgres

// migrations returns the schema's history. Entry i brings a database from
// version i to version i+1; ioh_schema holds the number applied. Entries
// are additive, like the SQLite store's: they create and add, and never
// drop or rewrite what an older version wrote.
//
// Never edit an entry that has shipped; append one and raise
// SchemaVersion.
//
// Every table is named ioh_*, so that the store can share a schema with
// an application's own tables and with River's river_* tables; the
// schema is the first of the connection's search_path.
func migrations() []string { return []string{schemaV1, schemaV2, schemaV3} }

// SchemaVersion is the schema version this code writes and the newest it
// can read.
const SchemaVersion = 3

// schemaV1 is the SQLite store's version 4 (runs, steps, observations,
// events, intents, attempts, approvals, leases, spend) in PostgreSQL's
// types — timestamps are timestamptz, flags boolean — and the fleet's
// records: submissions, workspace snapshots and the queue log. Two
// functions let a batch of statements check a condition and abort its
// transaction with a code the store maps to its errors.
const schemaV1 = `
CREATE TABLE ioh_runs (
	id                 text PRIMARY KEY,
	parent_id          text NOT NULL DEFAULT '',
	agent_path         text NOT NULL DEFAULT 'root',
	task               text NOT NULL,
	provider           text NOT NULL DEFAULT '',
	status             text NOT NULL DEFAULT 'running',
	outcome            text NOT NULL DEFAULT '',
	outcome_json       text NOT NULL DEFAULT '',
	started_at         timestamptz NOT NULL,
	finished_at        timestamptz,
	steps              integer NOT NULL DEFAULT 0,
	input_tokens       bigint NOT NULL DEFAULT 0,
	output_tokens      bigint NOT NULL DEFAULT 0,
	cache_read_tokens  bigint NOT NULL DEFAULT 0,
	cache_write_tokens bigint NOT NULL DEFAULT 0,
	cost_usd           double precision NOT NULL DEFAULT 0,
	cost_known         boolean NOT NULL DEFAULT true,
	policy             text NOT NULL DEFAULT '',
	remembered         text NOT NULL DEFAULT '',
	lost_input_tokens       bigint NOT NULL DEFAULT 0,
	lost_output_tokens      bigint NOT NULL DEFAULT 0,
	lost_cache_read_tokens  bigint NOT NULL DEFAULT 0,
	lost_cache_write_tokens bigint NOT NULL DEFAULT 0,
	lost_cost_usd      double precision NOT NULL DEFAULT 0,
	lost_cost_known    boolean NOT NULL DEFAULT true,
	paused_ms          bigint NOT NULL DEFAULT 0,
	paused_at          timestamptz
);
CREATE INDEX ioh_runs_parent ON ioh_runs (parent_id);
CREATE INDEX ioh_runs_started ON ioh_runs (started_at DESC, id DESC);
CREATE INDEX ioh_runs_open ON ioh_runs (status) WHERE status IN ('queued', 'running');

CREATE TABLE ioh_steps (
	run_id             text NOT NULL REFERENCES ioh_runs (id),
	step               integer NOT NULL,
	started_at         timestamptz NOT NULL,
	finished_at        timestamptz NOT NULL,
	assistant          text NOT NULL,
	input_tokens       bigint NOT NULL DEFAULT 0,
	output_tokens      bigint NOT NULL DEFAULT 0,
	cache_read_tokens  bigint NOT NULL DEFAULT 0,
	cache_write_tokens bigint NOT NULL DEFAULT 0,
	cost_usd           double precision NOT NULL DEFAULT 0,
	cost_known         boolean NOT NULL DEFAULT true,
	verified           boolean NOT NULL DEFAULT false,
	provider           text NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, step)
);

CREATE TABLE ioh_observations (
	run_id    text NOT NULL,
	step      integer NOT NULL,
	idx       integer NOT NULL,
	kind      text NOT NULL,
	call_id   text NOT NULL DEFAULT '',
	tool      text NOT NULL DEFAULT '',
	arguments text NOT NULL DEFAULT '',
	output    text NOT NULL DEFAULT '',
	is_error  boolean NOT NULL DEFAULT false,
	refusal   text NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, step, idx),
	FOREIGN KEY (run_id, step) REFERENCES ioh_steps (run_id, step)
);

CREATE TABLE ioh_events (
	run_id text NOT NULL REFERENCES ioh_runs (id),
	seq    bigint NOT NULL,
	step   integer NOT NULL,
	kind   text NOT NULL,
	at     timestamptz NOT NULL,
	data   text NOT NULL,
	PRIMARY KEY (run_id, seq)
);

CREATE TABLE ioh_intents (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id     text NOT NULL REFERENCES ioh_runs (id),
	step       integer NOT NULL,
	call_id    text NOT NULL,
	tool       text NOT NULL,
	arguments  text NOT NULL,
	state      text NOT NULL DEFAULT 'open',
	created_at timestamptz NOT NULL
);
CREATE INDEX ioh_intents_open ON ioh_intents (run_id, state);

CREATE TABLE ioh_attempts (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id     text NOT NULL REFERENCES ioh_runs (id),
	step       integer NOT NULL,
	attempt    integer NOT NULL,
	provider   text NOT NULL,
	error_kind text NOT NULL DEFAULT '',
	error      text NOT NULL DEFAULT '',
	status     integer NOT NULL DEFAULT 0,
	latency_ms bigint NOT NULL DEFAULT 0,
	wait_ms    bigint NOT NULL DEFAULT 0,
	at         timestamptz NOT NULL
);
CREATE INDEX ioh_attempts_run ON ioh_attempts (run_id, step);

CREATE TABLE ioh_approvals (
	id         text NOT NULL,
	run_id     text NOT NULL REFERENCES ioh_runs (id),
	step       integer NOT NULL,
	call_id    text NOT NULL,
	tool       text NOT NULL,
	arguments  text NOT NULL,
	act        text NOT NULL,
	target     text NOT NULL,
	content    text NOT NULL,
	shown      text NOT NULL,
	hash       text NOT NULL,
	rule       text NOT NULL DEFAULT '',
	layer      text NOT NULL DEFAULT '',
	state      text NOT NULL DEFAULT 'pending',
	decision   text NOT NULL DEFAULT '',
	result     text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	decided_at timestamptz,
	PRIMARY KEY (run_id, id)
);

CREATE TABLE ioh_leases (
	run_id     text PRIMARY KEY REFERENCES ioh_runs (id),
	host       text NOT NULL,
	pid        integer NOT NULL,
	started    timestamptz,
	generation bigint NOT NULL,
	expires    timestamptz NOT NULL,
	ttl_ms     bigint NOT NULL
);

CREATE TABLE ioh_spend (
	id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id             text NOT NULL REFERENCES ioh_runs (id),
	step               integer NOT NULL,
	attempt            integer NOT NULL,
	provider           text NOT NULL,
	input_tokens       bigint NOT NULL DEFAULT 0,
	output_tokens      bigint NOT NULL DEFAULT 0,
	cache_read_tokens  bigint NOT NULL DEFAULT 0,
	cache_write_tokens bigint NOT NULL DEFAULT 0,
	cost_usd           double precision NOT NULL DEFAULT 0,
	cost_known         boolean NOT NULL DEFAULT true,
	state              text NOT NULL DEFAULT 'open',
	at                 timestamptz NOT NULL
);
CREATE INDEX ioh_spend_open ON ioh_spend (run_id, state);

CREATE TABLE ioh_submissions (
	run_id       text PRIMARY KEY REFERENCES ioh_runs (id),
	spec         text NOT NULL,
	workspace    text NOT NULL,
	submitted_by text NOT NULL,
	submitted_at timestamptz NOT NULL
);

CREATE TABLE ioh_snapshots (
	run_id text NOT NULL REFERENCES ioh_runs (id),
	kind   text NOT NULL,
	data   bytea NOT NULL,
	files  integer NOT NULL,
	bytes  bigint NOT NULL,
	at     timestamptz NOT NULL,
	PRIMARY KEY (run_id, kind)
);

CREATE TABLE ioh_queue_log (
	id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id  text NOT NULL REFERENCES ioh_runs (id),
	at      timestamptz NOT NULL DEFAULT clock_timestamp(),
	action  text NOT NULL,
	worker  text NOT NULL DEFAULT '',
	job     bigint NOT NULL DEFAULT 0,
	attempt integer NOT NULL DEFAULT 0,
	detail  text NOT NULL DEFAULT ''
);
CREATE INDEX ioh_queue_log_run ON ioh_queue_log (run_id, id);

-- ioh_check aborts the transaction with the SQLSTATE code when ok is not
-- true: the store's way to make one statement of a batch a condition of
-- the whole.
CREATE FUNCTION ioh_check(ok boolean, code text, msg text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	IF ok IS NOT TRUE THEN
		RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg;
	END IF;
	RETURN true;
END $$;

-- ioh_fence holds a run's lease row shared for the transaction and aborts
-- it (IH001) unless the lease is still at generation gen: a takeover,
-- which updates the row, waits for the writes that hold it, and a write
-- that comes after a takeover is fenced out.
CREATE FUNCTION ioh_fence(run text, gen bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM ioh_leases WHERE run_id = run AND generation = gen FOR SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = 'IH001', MESSAGE = 'run ' || run || ': this driver''s lease generation ' || gen || ' was taken over';
	END IF;
	RETURN true;
END $$;

CREATE TABLE ioh_schema (version integer NOT NULL);
INSERT INTO ioh_schema (version) VALUES (0);
`

// schemaV2 adds trees of agents (each run's root, the order runs were
// made in, a root's containment, the files each tool call wrote, and a
// fence for a write for an agent under its root's lease) and the address
// where a lease's driver serves live events (the SQLite store's versions
// 5 and 6).
const schemaV2 = `
ALTER TABLE ioh_runs ADD COLUMN root_id text NOT NULL DEFAULT '';
ALTER TABLE ioh_runs ADD COLUMN containment text NOT NULL DEFAULT '';
ALTER TABLE ioh_runs ADD COLUMN made bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX ioh_runs_root ON ioh_runs (root_id, made);

ALTER TABLE ioh_observations ADD COLUMN changed text NOT NULL DEFAULT '';

ALTER TABLE ioh_leases ADD COLUMN live text NOT NULL DEFAULT '';

-- ioh_fence_agent is ioh_fence for a write for agent, a run of the tree
-- whose root's lease is (run, gen): it aborts (IH001) unless agent is of
-- that tree.
CREATE FUNCTION ioh_fence_agent(run text, gen bigint, agent text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM ioh_fence(run, gen);
	PERFORM 1 FROM ioh_runs WHERE id = agent AND root_id = run;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = 'IH001', MESSAGE = 'run ' || agent || ' is not an agent of the tree of ' || run;
	END IF;
	RETURN true;
END $$;
`

// schemaV3 indexes the decisions that wait to be carried out, which a
// fleet's workers look for (Store.Decided). A read sees nothing new.
const schemaV3 = `
CREATE INDEX ioh_approvals_decided ON ioh_approvals (run_id) WHERE state IN ('approved', 'denied', 'refused');
`
