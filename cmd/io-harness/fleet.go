package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/fleet"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// needFleet says why a command that needs a fleet's store cannot use
// where.
func (e *env) needFleet(fs interface{ Name() string }, where string) int {
	if postgres.IsDSN(where) {
		return exitOK
	}
	fmt.Fprintf(e.stderr, "io-harness %s: --store must be a fleet's database, a postgres:// URL, not %s\n", fs.Name(), where)
	return exitUsage
}

const submitUsage = `Usage: io-harness submit --store postgres://... [--upload] [--json] SPEC.json

Enqueues the run spec in SPEC.json for a fleet's workers (io-harness
worker) and prints the run's id at once, without waiting for a worker.
The spec is stored for the workers, so it must not carry an api_key: the
workers read keys from their own environment.

The task's workspace must be on a filesystem every worker mounts at the
same path; each worker checks it can reach it when it claims the run.
With --upload the workspace is stored with the submission instead, and
the worker materialises it under its --workspaces directory; fetch the
result with io-harness fetch once the run is finished.

Follow the run with io-harness runs and io-harness trace.`

func (e *env) submitCmd(args []string) int {
	fs := e.flags("submit", submitUsage)
	store := fs.String("store", "", "the fleet's database: a postgres:// URL")
	upload := fs.Bool("upload", false, "store the workspace with the submission, for workers that do not share it")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want exactly one SPEC.json, got %d arguments", len(pos))
	}
	if code := e.needFleet(fs, *store); code != exitOK {
		return code
	}
	spec, err := e.readSpec(pos[0])
	if err != nil {
		return e.fail("read the spec", err)
	}
	h, code := e.openFleet(*store, false)
	if h == 0 {
		return code
	}
	defer e.a.Close(h, 5*time.Second)
	var res struct {
		RunID string `json:"run_id"`
		State string `json:"state"`
	}
	if err := e.call("run.submit", map[string]any{"harness": h, "spec": spec, "upload": *upload}, &res); err != nil {
		return e.fail("submit", err)
	}
	if *asJSON {
		e.printJSON(res)
	} else {
		fmt.Fprintln(e.stdout, res.RunID)
	}
	return exitOK
}

// openFleet opens a harness over a fleet's database.
func (e *env) openFleet(where string, readOnly bool) (uint64, int) {
	var opened struct {
		Harness uint64 `json:"harness"`
	}
	if err := e.call("harness.open", map[string]any{"store": where, "read_only": readOnly}, &opened); err != nil {
		return 0, e.fail("open the store "+harness.StoreName(where), err)
	}
	return opened.Harness, exitOK
}

const fetchUsage = `Usage: io-harness fetch --store postgres://... RUN_ID DIR

Writes the workspace an uploaded run (submit --upload) left when it
finished into DIR, which must not exist or be empty.`

func (e *env) fetchCmd(args []string) int {
	fs := e.flags("fetch", fetchUsage)
	store := fs.String("store", "", "the fleet's database: a postgres:// URL")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		return usageError(fs, "want RUN_ID and DIR, got %d arguments", len(pos))
	}
	if code := e.needFleet(fs, *store); code != exitOK {
		return code
	}
	h, code := e.openFleet(*store, true)
	if h == 0 {
		return code
	}
	defer e.a.Close(h, 5*time.Second)
	var res struct {
		Dir   string `json:"dir"`
		Files int    `json:"files"`
	}
	if err := e.call("run.fetch", map[string]any{"harness": h, "run_id": pos[0], "dir": pos[1]}, &res); err != nil {
		return e.fail("fetch "+pos[0], err)
	}
	fmt.Fprintf(e.stdout, "%d files of run %s in %s\n", res.Files, pos[0], res.Dir)
	return exitOK
}

const workerUsage = `Usage: io-harness worker --store postgres://... [--concurrency N] [--workspaces DIR]
                         [--lease 30s] [--grace 30s] [--health 127.0.0.1:PORT] [--name NAME]
                         [--roots DIR,...] [--mcp-env NAME,...]

Works a fleet's queue: drives the runs submitted with io-harness submit,
up to N at once, and resumes the runs whose worker died. Provider keys
come from this process's environment (OPENAI_API_KEY, ...), but never for
a spec that names its own base_url: the key would go to a server the
submitter chose. MCP servers of submitted specs see only the variables
--mcp-env lends them, and with --roots a shared workspace must be inside
one of those directories (links resolved).

A run that pauses for a person's decision frees its worker; answer it
from any machine with io-harness approve --store postgres://... and a
worker continues it. SIGTERM or Ctrl-C stops the worker: it takes no more
runs, hands each run it drives back to the queue at the run's next step
boundary (or mid-step after --grace, which another worker resumes as
after a crash), and exits 0. A second Ctrl-C quits at once.

--health serves the worker's state as JSON on a loopback address (200
while it works and reaches the database, 503 otherwise). Every action of
the queue on a run is in its queue log, shown by io-harness trace.`

func (e *env) workerCmd(args []string) int {
	fs := e.flags("worker", workerUsage)
	store := fs.String("store", "", "the fleet's database: a postgres:// URL")
	concurrency := fs.Int("concurrency", 4, "how many runs to drive at once")
	workspaces := fs.String("workspaces", "", "where to materialise uploaded workspaces; empty: refuse uploaded runs")
	lease := fs.Duration("lease", 30*time.Second, "how long a run's lease holds without a renewal")
	grace := fs.Duration("grace", 30*time.Second, "on stop, how long runs may go on to a step boundary before they are handed back mid-step")
	health := fs.String("health", "", "serve the worker's health on this loopback address (e.g. 127.0.0.1:8809)")
	name := fs.String("name", "", "the worker's name in the queue log (default host:pid)")
	roots := fs.String("roots", "", "comma-separated directories a shared workspace must be in; empty: anywhere this user can reach")
	mcpEnv := fs.String("mcp-env", "", "comma-separated environment variables lent to the MCP servers of submitted specs")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "worker takes no arguments")
	}
	if code := e.needFleet(fs, *store); code != exitOK {
		return code
	}
	if *health != "" {
		if err := loopback(*health); err != nil {
			return usageError(fs, "--health: %v", err)
		}
	}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := postgres.Open(ctx, withPool(*store, *concurrency))
	if err != nil {
		return e.fail("open the store "+harness.StoreName(*store), err)
	}
	defer st.Close()
	w, err := fleet.NewWorker(st, fleet.WorkerOptions{Concurrency: *concurrency, LeaseTTL: *lease, Grace: *grace,
		Workspaces: *workspaces, Name: *name, LookupEnv: e.lookup, Roots: list(*roots), MCPEnv: list(*mcpEnv),
		Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return e.fail("worker", err)
	}
	if *health != "" {
		l, err := net.Listen("tcp", *health)
		if err != nil {
			return e.fail("serve health", err)
		}
		srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 5 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			srv.Serve(l)
		}()
		defer func() {
			srv.Close()
			<-served
		}()
		fmt.Fprintf(e.stderr, "io-harness worker: health at http://%s/healthz\n", l.Addr())
	}
	fmt.Fprintf(e.stderr, "io-harness worker %s: working on %s, %d at once\n", w.Name(), st.Name(), *concurrency)
	// After the first signal the worker drains; a second one quits.
	go func() {
		<-ctx.Done()
		if e.ctx.Err() != nil {
			return
		}
		fmt.Fprintf(e.stderr, "io-harness worker %s: stopping; runs are handed back at their next step\n", w.Name())
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt)
		<-again
		fmt.Fprintln(e.stderr, "io-harness worker: interrupted twice; quitting")
		os.Exit(exitCancelled)
	}()
	if err := w.Run(ctx); err != nil {
		return e.fail("worker", err)
	}
	fmt.Fprintf(e.stderr, "io-harness worker %s: stopped\n", w.Name())
	return exitOK
}

// list splits a comma-separated flag.
func list(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// withPool gives a worker's DSN a connection pool its runs fit in — each
// run renews its lease beside its commits, and the job engine holds a
// few — unless the DSN sets one.
func withPool(dsn string, concurrency int) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Query().Has("pool_max_conns") || 2*concurrency+8 <= 32 {
		return dsn
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(2*concurrency+8))
	u.RawQuery = q.Encode()
	return u.String()
}

// decideFleet answers a request of a run in a fleet's database: a
// submitted run's decision is queued for a worker to carry out; any other
// run's is recorded for its next driver.
func (e *env) decideFleet(where, runID, requestID string, decision map[string]any, jsonOut bool) int {
	h, code := e.openFleet(where, false)
	if h == 0 {
		return code
	}
	defer e.a.Close(h, 5*time.Second)
	var res struct {
		State string `json:"state"`
	}
	if err := e.call("approval.decide", map[string]any{"harness": h, "run_id": runID, "request_id": requestID, "decision": decision}, &res); err != nil {
		return e.fail("approve", err)
	}
	if jsonOut {
		e.printJSON(res)
		return exitOK
	}
	switch res.State {
	case "queued":
		fmt.Fprintf(e.stdout, "the decision on %s is queued; a worker carries it out and continues run %s\n", requestID, runID)
	case "decided":
		fmt.Fprintf(e.stdout, "the decision on %s is recorded; run %s's next driver carries it out (io-harness resume)\n", requestID, runID)
	default:
		fmt.Fprintf(e.stdout, "request %s still waits for a decision\n", requestID)
	}
	return exitOK
}
