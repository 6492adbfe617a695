package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// The fault suite: every misbehaviour of a server ends the call with the
// right observation (or, at start, the right error), and the session goes
// on where it should. What is checked is that the call ends, and how; the
// guard on each only turns a hang into a failure.

// hangGuard bounds a wait only so that a hung test fails instead of
// hanging: it is far beyond what any call here takes, however loaded the
// machine, and no test judges a duration by it.
const hangGuard = 2 * time.Minute

// bounded fails the test when fn takes longer than d.
func bounded(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not end within %s", what, d)
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name    string
		tool    string
		args    string
		want    string // in the observation
		outcome string // of the mcp_call event
		fault   string // an mcp_fault event of this kind, if any
		after   string // in echo's observation afterwards
	}{
		{"crash mid-call", "crash", `{}`, "the server exited (exit status 3) during the call; the call may have acted, and is not repeated", "crashed", "", "echo: after"},
		{"hang", "hang", `{}`, "no answer within the call timeout of 2s (call_timeout)", "timeout", "", "echo: after"},
		{"flood", "flood", `{"bytes": 300000}`, "over the 65536-byte output cap (max_output)", "cap", "oversize", "echo: after"},
		{"debug line on stdout", "noise", `{}`, "answered after the noise", "ok", "not_json", "echo: after"},
		{"only a non-JSON line", "garbage", `{}`, "no answer within the call timeout", "timeout", "not_json", "echo: after"},
		{"malformed response", "badframe", `{}`, "the server answered with a malformed message: a response with neither a result nor an error", "malformed", "not_jsonrpc", "echo: after"},
		{"response to another id", "wrongid", `{}`, "no answer within the call timeout", "timeout", "unknown_id", "echo: after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			srv := fake("fk")
			srv.MaxOutput = 64 << 10
			c := connect(t, mcp.Options{Servers: []mcp.Server{srv}, Observer: rec.observe,
				Restart: mcp.Restart{Base: 50 * time.Millisecond}})
			var r = call(t, find(t, c, "mcp__fk__echo"), `{"text":"before"}`)
			if r.Output != "echo: before" {
				t.Fatalf("echo before: %+v", r)
			}
			bounded(t, hangGuard, tt.tool, func() { r = call(t, find(t, c, "mcp__fk__"+tt.tool), tt.args) })
			if !strings.Contains(r.Output, tt.want) || r.IsError != (tt.outcome != "ok") {
				t.Errorf("%s: %+v; want %q", tt.tool, r, tt.want)
			}
			calls := rec.of(mcp.EventCall)
			if last := calls[len(calls)-1]; last.Outcome != tt.outcome {
				t.Errorf("the call's outcome is %q; want %q", last.Outcome, tt.outcome)
			}
			if tt.fault != "" {
				found := false
				for _, f := range rec.of(mcp.EventFault) {
					found = found || f.Outcome == tt.fault
				}
				if !found {
					t.Errorf("no %s fault traced: %+v", tt.fault, rec.of(mcp.EventFault))
				}
			}
			// The session goes on: a crashed server is restarted first.
			bounded(t, hangGuard, "echo after", func() { r = call(t, find(t, c, "mcp__fk__echo"), `{"text":"after"}`) })
			if r.Output != tt.after {
				t.Errorf("echo after %s: %+v", tt.tool, r)
			}
		})
	}
}

// TestCrashEvidence: a crash is traced (exit, stderr, restart) and the
// observation quotes the server's last words.
func TestCrashEvidence(t *testing.T) {
	rec := &recorder{}
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}, Observer: rec.observe, Restart: mcp.Restart{Base: 10 * time.Millisecond}})
	r := call(t, find(t, c, "mcp__fk__crash"), `{}`)
	if !strings.Contains(r.Output, "Its stderr ends: panic: crash requested by the test") {
		t.Errorf("crash: %q", r.Output)
	}
	call(t, find(t, c, "mcp__fk__echo"), `{}`)
	if len(rec.of(mcp.EventExit)) == 0 || len(rec.of(mcp.EventRestart)) != 1 || len(rec.of(mcp.EventConnect)) != 2 {
		t.Errorf("exit %d, restart %d, connect %d events; want ≥1, 1, 2", len(rec.of(mcp.EventExit)), len(rec.of(mcp.EventRestart)), len(rec.of(mcp.EventConnect)))
	}
	// The restart is a fresh process whose list is offered again.
	if !c.Refresh(context.Background()) && len(c.Tools()) == 0 {
		t.Errorf("no tools after the restart")
	}
}

// TestRestartGivesUp: a server that keeps dying is given up after the
// bounded number of restarts; every call then fails at once, without
// another attempt to start it (no connect event).
func TestRestartGivesUp(t *testing.T) {
	rec := &recorder{}
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}, Observer: rec.observe,
		Restart: mcp.Restart{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond, Attempts: 2}})
	crash := find(t, c, "mcp__fk__crash")
	for i := 0; i < 3; i++ {
		r := call(t, crash, `{}`)
		if !strings.Contains(r.Output, "exited") {
			t.Fatalf("crash %d: %q", i, r.Output)
		}
	}
	var r = call(t, crash, `{}`)
	if !strings.Contains(r.Output, "given up after 2 restarts in a row") {
		t.Fatalf("after 3 crashes: %q", r.Output)
	}
	connects := len(rec.of(mcp.EventConnect))
	r = call(t, find(t, c, "mcp__fk__echo"), `{}`)
	if !strings.Contains(r.Output, "is not available") {
		t.Errorf("echo on a server given up: %q", r.Output)
	}
	if n := len(rec.of(mcp.EventConnect)) - connects; n != 0 {
		t.Errorf("a call on a server given up tried %d more connects", n)
	}
}

// TestStartFaults: a server that exits at start, stays silent, or starts
// too slowly stops Connect with ErrStart naming it and quoting its
// stderr; a slow start within the timeout is fine. A server that had not
// yet written its stderr line when the start timeout ended it (a loaded
// machine, slow to start the process) is not the case under test: it is
// tried again with twice the timeout, up to hangGuard.
func TestStartFaults(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		timeout time.Duration
		ok      bool
		stderr  string
	}{
		{"exits at start", []string{"FAKE_START=exit"}, 10 * time.Second, false, "fatal: the configuration file /etc/fake.conf is missing"},
		{"silent", []string{"FAKE_START=silent"}, time.Second, false, "starting, slowly"},
		{"slower than the start timeout", []string{"FAKE_START=slow", "FAKE_DELAY=3s"}, time.Second, false, ""},
		{"slow within the start timeout", []string{"FAKE_START=slow", "FAKE_DELAY=300ms"}, hangGuard, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake("fk", tt.env...)
			var c *mcp.Client
			var err error
			for timeout := tt.timeout; ; timeout *= 2 {
				srv.StartTimeout = sandbox.Duration(timeout)
				bounded(t, timeout+hangGuard, "Connect", func() { c, err = mcp.Connect(context.Background(), mcp.Options{Servers: []mcp.Server{srv}}) })
				var me *mcp.Error
				if tt.stderr == "" || !errors.As(err, &me) || me.Stderr != "" || timeout >= hangGuard {
					break
				}
				t.Logf("the server wrote nothing in the %s start timeout; again with twice that", timeout)
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				c.Close()
				return
			}
			var me *mcp.Error
			if !errors.Is(err, mcp.ErrStart) || !errors.As(err, &me) || me.Server != "fk" {
				t.Fatalf("Connect: %v; want ErrStart naming fk", err)
			}
			if !strings.Contains(me.Stderr, tt.stderr) || !strings.Contains(err.Error(), tt.stderr) {
				t.Errorf("the error does not quote the stderr %q: %v", tt.stderr, err)
			}
		})
	}
}

// TestStderrBounded: a server that writes megabytes on stderr is traced
// up to the bound, and the call is not held up by it.
func TestStderrBounded(t *testing.T) {
	rec := &recorder{}
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}, Observer: rec.observe})
	r := call(t, find(t, c, "mcp__fk__stderr"), `{"bytes": 4000000}`)
	if r.Output != "wrote stderr" {
		t.Fatalf("stderr: %+v", r)
	}
	total := 0
	for _, e := range rec.of(mcp.EventStderr) {
		total += len(e.Text)
	}
	if total > 80<<10 {
		t.Errorf("%d bytes of stderr traced; the bound is 64 KiB", total)
	}
	last := rec.of(mcp.EventStderr)
	if !strings.Contains(last[len(last)-1].Text, "the rest is not") {
		t.Errorf("no note of the bound: %q", last[len(last)-1].Text)
	}
}

// TestConcurrentCalls: one session serves calls from many goroutines
// (a tree of agents); a hang in one does not hold up the others.
func TestConcurrentCalls(t *testing.T) {
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}})
	echo, hang := find(t, c, "mcp__fk__echo"), find(t, c, "mcp__fk__hang")
	errs := make(chan string, 101)
	go func() { errs <- call(t, hang, `{}`).Output }()
	for i := 0; i < 100; i++ {
		go func() {
			want := "echo: " + strings.Repeat("x", i)
			if r := call(t, echo, `{"text":"`+strings.Repeat("x", i)+`"}`); r.Output != want {
				errs <- "mismatch: " + r.Output
				return
			}
			errs <- ""
		}()
	}
	for i := 0; i < 101; i++ {
		if s := <-errs; strings.HasPrefix(s, "mismatch") {
			t.Error(s)
		}
	}
}
