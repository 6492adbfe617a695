package traceview

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// The page lists a run's agents in the order they were spawned, whatever
// order they started in: a child queued for a slot starts after a later
// sibling, and the page read 1.0, 1.2, 1.1.
func TestAgentsInTheOrderSpawned(t *testing.T) {
	st := fileStore(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	root := &store.Run{ID: "run_root", AgentPath: "root", Task: json.RawMessage(`{"goal":"g"}`), StartedAt: t0}
	lease, err := st.CreateRun(ctx, root, nil, store.Self(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Spawned w0, w1, w2, w1 started last (it was queued).
	for _, c := range []struct {
		id, path string
		start    time.Duration
	}{{"run_w0", "root/w0", 1}, {"run_w1", "root/w1", 3}, {"run_w2", "root/w2", 2}} {
		r := &store.Run{ID: c.id, ParentID: "run_root", RootID: "run_root", AgentPath: c.path, Status: store.StatusRunning,
			Task: json.RawMessage(`{"goal":"g"}`), StartedAt: t0.Add(c.start * time.Second)}
		if err := st.CreateAgent(ctx, lease, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	v, err := Load(ctx, st, "run_root")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range v.Agents {
		got = append(got, a.Path)
	}
	if diff := cmp.Diff([]string{"root", "root/w0", "root/w1", "root/w2"}, got); diff != "" {
		t.Errorf("agents (-spawned +page):\n%s", diff)
	}
}
