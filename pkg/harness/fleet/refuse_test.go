package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// stateOf is run id's state as Runs reports it.
func stateOf(t *testing.T, st *postgres.Store, id string) string {
	t.Helper()
	all, err := Runs(context.Background(), st, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range all {
		if rs.ID == id {
			return rs.State
		}
	}
	t.Fatalf("run %s is not listed", id)
	return ""
}

// A run every worker refuses — here, a worker without the key the spec
// leaves to the environment — has its only job cancelled, and shows as
// stalled, not queued: nothing will ever drive it.
func TestRefusedRunIsStalled(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	spec := fmt.Appendf(nil, `{"task": {"goal": "g", "root": %q,
		"verification": [{"kind": "workspace_file_contains", "file": "a", "text": "b"}]},
		"provider": {"name": "openai", "model": "gpt-x"}}`, t.TempDir())
	id, err := Submit(ctx, st, spec, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := stateOf(t, st, id); s != StateQueued {
		t.Fatalf("a submitted run no worker has seen is %s, want queued", s)
	}
	startWorker(t, st, WorkerOptions{Concurrency: 1}) // no LookupEnv: no key
	waitAction(t, st, id, ActionRefused)
	// The refusal happened, and cancelled the run's only job (River
	// records the cancel after the queue log's line): the fault this test
	// is about fired.
	// Polled until it is (a job never cancelled hangs until go test's
	// own timeout: no clock of this test's decides).
	for ; ; time.Sleep(50 * time.Millisecond) {
		jobs, err := jobsOf(ctx, st, []string{id}, []rivertype.JobState{rivertype.JobStateCancelled})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs[id]) == 1 {
			break
		}
	}
	if left, _ := withJobs(ctx, st, []string{id}, append([]rivertype.JobState{rivertype.JobStateRunning}, waiting...)); left[id] {
		t.Fatal("a job still waits for, or runs, the refused run")
	}
	if s := stateOf(t, st, id); s != StateStalled {
		t.Errorf("a run every worker refused is %s, want stalled", s)
	}
}

// Submit refuses what run refuses, even with every key and model the
// environment could give, with the same typed error naming the same
// field, and queues nothing; a spec whose key and model are left to
// the workers' environment is queued.
func TestSubmitRefusesWhatRunRefuses(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	ws := t.TempDir()
	task := fmt.Sprintf(`"task": {"goal": "g", "root": %q, "verification": [{"kind": "workspace_file_contains", "file": "a", "text": "b"}]}`, ws)
	for _, c := range []struct {
		name, provider string
	}{
		{"unknown vendor", `{"name": "no-such-vendor", "model": "m"}`},
		{"unknown vendor without a model", `{"name": "no-such-vendor"}`},
		{"field of another vendor", `{"name": "anthropic", "model": "m", "preset": "groq"}`},
		{"scripted without a script", `{"name": "scripted"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := []byte(`{` + task + `, "provider": ` + c.provider + `}`)
			// What run does with the spec: it parses (against the schema),
			// then builds options; either may refuse it.
			s, err := harness.ParseSpec(spec)
			if err == nil {
				_, err = s.Options(anyWorker)
			}
			var runErr *harness.Error
			if !errors.As(err, &runErr) {
				t.Fatalf("run, with every key and model set, gives %v: the case proves nothing", err)
			}
			before, _ := st.Runs(ctx, store.RunFilter{})
			_, err = Submit(ctx, st, spec, SubmitOptions{})
			var he *harness.Error
			if !errors.As(err, &he) || he.Kind != harness.ErrConfig {
				t.Fatalf("submit: %v, want a *harness.Error of kind ErrConfig", err)
			}
			if he.Field != runErr.Field {
				t.Errorf("submit names %q, run names %q", he.Field, runErr.Field)
			}
			if after, _ := st.Runs(ctx, store.RunFilter{}); len(after) != len(before) {
				t.Errorf("a refused spec was queued: %d runs, then %d", len(before), len(after))
			}
		})
	}
	spec := []byte(`{` + task + `, "provider": {"name": "anthropic"}}`)
	if _, err := Submit(ctx, st, spec, SubmitOptions{}); err != nil {
		t.Errorf("a spec that leaves its key and model to the workers: %v", err)
	}
}
