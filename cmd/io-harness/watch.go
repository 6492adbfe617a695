package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/internal/abi"
	"github.com/initorigin/io-harness-go/pkg/harness"
)

const watchUsage = `Usage: io-harness watch [--store PATH] [--json] [--allow | --deny REASON] RUN_ID

Follows a run that another process drives, until it finishes: each step as
it happens when the driver runs on this host and serves live events (io-harness
run does), else each step as it commits. --json prints every event as one
JSON line.

When the run waits for a person, watch shows the request — for a write, the
diff — and asks on the terminal, or answers with --allow or --deny REASON.
The decision is recorded in the store; a driver that waits for it
(io-harness run --approvals wait) carries it out at once, otherwise the
next resume does. Without an answer (no terminal and no flag) watch exits 5.
Ctrl-C stops watching; the run goes on.`

func (e *env) watchCmd(args []string) int {
	fs := e.flags("watch", watchUsage)
	storePath := fs.String("store", defaultStore, "the SQLite store that records the runs")
	asJSON := fs.Bool("json", false, "print every event as one JSON line instead of progress")
	allow := fs.Bool("allow", false, "approve what the run waits for")
	deny := fs.String("deny", "", "deny what the run waits for; the reason is told to the model")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 1:
		return usageError(fs, "want exactly one RUN_ID, got %d arguments", len(pos))
	case *allow && *deny != "":
		return usageError(fs, "give at most one of --allow and --deny REASON")
	}
	f := &runFlags{store: *storePath, json: *asJSON}
	if _, err := os.Stat(*storePath); err != nil {
		return e.failRun(f, pos[0], "open the store", fmt.Errorf("%w (choose the store with --store PATH)", err))
	}
	var opened struct {
		Harness uint64 `json:"harness"`
	}
	// Not read-only: a decision is written to the store.
	if err := e.call("harness.open", map[string]any{"store": *storePath}, &opened); err != nil {
		return e.failRun(f, pos[0], "open the store "+*storePath, err)
	}
	h := opened.Harness
	defer e.a.Close(h, 10*time.Second)
	var started struct {
		Run   uint64 `json:"run"`
		RunID string `json:"run_id"`
	}
	if err := e.call("run.watch", map[string]any{"harness": h, "run_id": pos[0]}, &started); err != nil {
		return e.failRun(f, pos[0], "watch "+pos[0], err)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	interrupted := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-sigs:
			close(interrupted)
			e.a.Cancel(started.Run)
		case <-stop:
		}
	}()

	p := newProgress(e, *asJSON, started.RunID)
	answers := newAnswers(e.stdin)
	if !*asJSON {
		fmt.Fprintf(e.stdout, "watching run %s in %s\n", started.RunID, *storePath)
	}
	code, err := e.eachEvent(h, started.Run, func(ev *event, raw json.RawMessage) (int, bool) {
		if ev.Kind != abi.KindDone {
			p.show(ev, raw)
		}
		if ev.Kind == abi.KindApprovalPending {
			var d map[string]any
			if ev.Request != nil && !*asJSON && (*allow || *deny != "") {
				r := ev.Request
				p.line("approval needed: %s wants to %s %s", r.Tool, r.Act, r.Target)
				if r.Shown != "" {
					p.line("%s", strings.TrimRight(r.Shown, "\n"))
				}
			}
			switch {
			case *allow:
				d = map[string]any{"kind": "approve"}
			case *deny != "":
				d = map[string]any{"kind": "deny", "reason": *deny}
			case e.stdinTTY && !*asJSON:
				d = e.ask(ev, answers, interrupted)
			default:
				p.finish()
				fmt.Fprintf(e.stderr, "io-harness: run %s waits for a decision on request %s; answer it with:\n  io-harness watch --store %s --allow %s   (or --deny REASON)\n",
					ev.RunID, ev.RequestID, *storePath, ev.RunID)
				return exitAwaiting, true
			}
			if d["kind"] == "defer" {
				p.finish()
				return exitAwaiting, true
			}
			if err := e.call("approval.decide", map[string]any{"harness": h, "run_id": ev.RunID,
				"request_id": ev.RequestID, "decision": d}, nil); err != nil {
				return e.fail("answer the approval", err), true
			}
			if !*asJSON {
				p.line("  decided %s: %s; the run's driver carries it out", ev.RequestID, d["kind"])
			}
		}
		if ev.Kind == abi.KindDone {
			p.finish()
			select {
			case <-interrupted:
				return exitCancelled, true
			default:
			}
			if *asJSON {
				fmt.Fprintln(e.stdout, string(raw))
			}
			if ev.Outcome != nil && ev.Outcome.Kind == harness.AwaitingApproval {
				return exitAwaiting, true
			}
			return e.doneCode(f, ev), true
		}
		return 0, false
	})
	if err != nil {
		p.finish()
		return e.failRun(f, started.RunID, "watch the run", err)
	}
	return code
}
