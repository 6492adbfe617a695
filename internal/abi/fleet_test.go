package abi

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/internal/pgtest"
)

// pg is this binary's PostgreSQL server, started on first use.
var pg = &pgtest.Server{}

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// A postgres:// store opens through harness.open like a file does, and
// the fleet's methods work on it: run.submit queues a run and returns its
// id, runs.list says where it stands, trace.get shows the queue's
// actions, approval.decide and run.fetch name what they cannot find.
func TestFleetMethods(t *testing.T) {
	a := New(nil)
	dsn := pg.DSN(t)
	h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": dsn}), "harness")
	defer a.Close(h, 10*time.Second)
	root := t.TempDir()
	spec := mustJSON(map[string]any{"task": map[string]any{"goal": "g", "root": root,
		"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m"}})
	res := call(t, a, "run.submit", map[string]any{"harness": h, "spec": spec})
	id, _ := res["run_id"].(string)
	if !strings.HasPrefix(id, "run_") || res["state"] != "queued" {
		t.Fatalf("run.submit = %v", res)
	}
	runs := call(t, a, "runs.list", map[string]any{"harness": h})
	list, _ := runs["runs"].([]any)
	if runs["fleet"] != true || len(list) != 1 {
		t.Fatalf("runs.list = %v", runs)
	}
	if r := list[0].(map[string]any); r["id"] != id || r["state"] != "queued" || r["status"] != "queued" {
		t.Errorf("the run in runs.list: %v", r)
	}
	tr := call(t, a, "trace.get", map[string]any{"harness": h, "run_id": id, "format": "text"})
	if text, _ := tr["text"].(string); !strings.Contains(text, "queue\n") || !strings.Contains(text, "submitted") {
		t.Errorf("the text trace:\n%s", text)
	}
	tj := call(t, a, "trace.get", map[string]any{"harness": h, "run_id": id})
	if q, _ := tj["queue"].([]any); len(q) != 1 {
		t.Errorf("the JSON trace's queue: %v", tj["queue"])
	}
	if e := callErr(t, a, "approval.decide", map[string]any{"harness": h, "run_id": id, "request_id": "apr_nope",
		"decision": map[string]any{"kind": "approve"}}); e.Code != CodeNotFound {
		t.Errorf("approval.decide of an unknown request: %v", e)
	}
	if e := callErr(t, a, "run.fetch", map[string]any{"harness": h, "run_id": id, "dir": t.TempDir()}); e.Code != CodeNotFound {
		t.Errorf("run.fetch of a run that was not uploaded: %v", e)
	}
	keyed := mustJSON(map[string]any{"task": map[string]any{"goal": "g", "root": root,
		"verification": []any{map[string]any{"kind": "workspace_file_contains", "file": "a", "text": "b"}}},
		"provider": map[string]any{"name": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "sk-1"}})
	if e := callErr(t, a, "run.submit", map[string]any{"harness": h, "spec": keyed}); e.Code != CodeInvalidArgument || e.Details["field"] != "spec.provider.api_key" {
		t.Errorf("run.submit of a spec with a key: %+v", e)
	}
	// A file store has no queue.
	file := handleOf(t, call(t, a, "harness.open", map[string]any{"store": filepath.Join(t.TempDir(), "t.db")}), "harness")
	defer a.Close(file, 10*time.Second)
	for _, m := range []string{"run.submit", "run.fetch"} {
		e := callErr(t, a, m, map[string]any{"harness": file, "spec": spec, "run_id": "run_x", "dir": t.TempDir()})
		if e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "postgres://") {
			t.Errorf("%s on a file store: %v", m, e)
		}
	}
}

// harness.open names a store it cannot open without the DSN's password,
// in its message and in its details.
func TestOpenRedactsTheDSN(t *testing.T) {
	a := New(nil)
	u, _ := url.Parse(pg.Admin(t))
	const wrong = "Not-The-Password-4471"
	u.User = url.UserPassword("ioh", wrong)
	dsn := u.String()
	if !strings.Contains(dsn, wrong) {
		t.Fatal("the DSN does not hold the password: the test tests nothing")
	}
	e := callErr(t, a, "harness.open", map[string]any{"store": dsn})
	if e.Code != CodeUnavailable || !strings.Contains(e.Message, "password authentication failed") {
		t.Errorf("harness.open with a wrong password: %+v", e)
	}
	if strings.Contains(e.Error(), wrong) || strings.Contains(string(mustJSON(e.Details)), wrong) {
		t.Errorf("the error holds the password: %+v", e)
	}
	if store, _ := e.Details["store"].(string); store != "postgres://ioh@"+u.Host+u.Path+"?sslmode=disable" {
		t.Errorf("details.store = %q", store)
	}
	if e := callErr(t, a, "store.check", map[string]any{"store": dsn}); e.Code != CodeInvalidArgument || strings.Contains(e.Message, wrong) {
		t.Errorf("store.check of a DSN: %+v", e)
	}
}
