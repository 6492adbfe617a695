package harness_test

import (
	"context"
	"sync"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// A sandbox the caller made serves the runs it is given to: their
// commands run in it, its own observer sees them, and each run's trace
// gets its own commands' sandbox events.
func TestNativeSandboxIsShared(t *testing.T) {
	var mu sync.Mutex
	var seen []sandbox.Event
	sb, err := sandbox.New(context.Background(), &sandbox.Options{Observer: func(e sandbox.Event) {
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	for i := range 2 {
		dir := workspace(t, nil)
		var ev events
		res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir,
			Verification: []verify.Check{contains("out.txt", "ran")}},
			harness.Options{Provider: script(t, calls(call("exec", map[string]any{"argv": []string{"sh", "-c", "echo ran > out.txt"}}))),
				Store: memStore(t), Observer: ev.observe, NativeSandbox: sb})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome.Kind != harness.Success {
			t.Fatalf("run %d: %+v", i, res.Outcome)
		}
		execs := 0
		for _, e := range ev.of(harness.EventSandbox) {
			if e.Sandbox.Kind == sandbox.EventExec {
				execs++
				if e.Sandbox.Backend != sb.Name() {
					t.Errorf("run %d ran on %s, not the caller's %s", i, e.Sandbox.Backend, sb.Name())
				}
			}
		}
		if execs != 1 {
			t.Errorf("run %d traced %d sandbox execs, want its one", i, execs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, e := range seen {
		if e.Kind == sandbox.EventExec {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the caller's observer saw %d execs, want the two runs'", n)
	}
}
