package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// benchRuns and benchSteps are the shape of the concurrent-steps
// benchmark: 100 runs at once, four committed steps each.
const (
	benchRuns  = 100
	benchSteps = 4
)

func benchScript(b *testing.B) *scripted.Provider {
	args := func(v any) json.RawMessage {
		data, _ := json.Marshal(v)
		return data
	}
	p, err := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{Text: "look", ToolCalls: []scripted.Call{{Name: "list_dir", Arguments: args(map[string]string{})}}},
		{Text: "read", ToolCalls: []scripted.Call{{Name: "read_file", Arguments: args(map[string]string{"path": "main.go"})}}},
		{Text: "search", ToolCalls: []scripted.Call{{Name: "grep", Arguments: args(map[string]string{"pattern": "func"})}}},
		{Text: "fix", ToolCalls: []scripted.Call{{Name: "write_file", Arguments: args(map[string]string{"path": "main.go", "content": "package main // fixed\n"})}}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// concurrentRuns drives benchRuns scripted runs at once on st and returns
// how long they took together.
func concurrentRuns(b *testing.B, st store.Store) time.Duration {
	b.Helper()
	dirs := make([]string, benchRuns)
	for i := range dirs {
		dirs[i] = filepath.Join(b.TempDir(), fmt.Sprint(i))
		os.MkdirAll(dirs[i], 0o755)
		os.WriteFile(filepath.Join(dirs[i], "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	}
	var wg sync.WaitGroup
	errs := make([]error, benchRuns)
	start := time.Now()
	for i := range benchRuns {
		wg.Go(func() {
			task := harness.TaskContract{Goal: "fix main", Root: dirs[i],
				Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "main.go", Text: "fixed"}}}
			res, err := harness.Run(context.Background(), task, harness.Options{Provider: benchScript(b), Store: st})
			if err == nil && res.Outcome.Steps != benchSteps {
				err = fmt.Errorf("%d steps: %+v", res.Outcome.Steps, res.Outcome)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return elapsed
}

// BenchmarkConcurrentSteps measures steps committed per second with 100
// runs driven at once on one store: PostgreSQL against the SQLite file
// store (WAL, synchronous=FULL) on the same machine, the two arms
// alternating in one loop so that the machine's noise falls on both.
// Both stores wait for their log's flush at every step.
func BenchmarkConcurrentSteps(b *testing.B) {
	ctx := context.Background()
	pgStore, err := postgres.Open(ctx, pg.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pgStore.Close()
	lite, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer lite.Close()
	var tPG, tLite time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tPG += concurrentRuns(b, pgStore)
			tLite += concurrentRuns(b, lite)
		} else {
			tLite += concurrentRuns(b, lite)
			tPG += concurrentRuns(b, pgStore)
		}
	}
	steps := float64(b.N * benchRuns * benchSteps)
	b.ReportMetric(steps/tPG.Seconds(), "postgres-steps/s")
	b.ReportMetric(steps/tLite.Seconds(), "sqlite-steps/s")
	b.ReportMetric(tLite.Seconds()/tPG.Seconds(), "postgres/sqlite")
}

// workRuns submits runs to a fresh schema and returns how long workers
// in-process workers, each driving concurrency runs at once, take to
// finish them: each run three steps, each model turn 20ms.
func workRuns(b *testing.B, runs, workers, concurrency int) time.Duration {
	b.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pg.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	m, base := newModel(b)
	m.delay = func(string, int) time.Duration { return 20 * time.Millisecond }
	ids := make([]string, runs)
	for i := range runs {
		ws := filepath.Join(b.TempDir(), fmt.Sprint(i))
		os.MkdirAll(ws, 0o755)
		os.WriteFile(filepath.Join(ws, "log.txt"), []byte("<END>"), 0o644)
		key := fmt.Sprint("b", i)
		m.mu.Lock()
		m.runs[key] = &scriptedRun{ws: ws, steps: 3, requests: map[int]int{}}
		m.mu.Unlock()
		spec := fmt.Appendf(nil, `{"task": {"goal": "append", "root": %q,
			"verification": [{"kind": "workspace_file_contains", "file": "log.txt", "text": "step 3\n"}], "budgets": {"max_steps": 12}},
			"provider": {"name": "openai_compatible", "base_url": %q, "model": "m"}}`, ws, base+"/w/"+key+"/v1")
		if ids[i], err = Submit(ctx, st, spec, SubmitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		w, err := NewWorker(st, WorkerOptions{Concurrency: concurrency, LeaseTTL: 5 * time.Second, FetchPoll: 50 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			if err := w.Run(wctx); err != nil {
				b.Error(err)
			}
		})
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, id := range ids {
		for {
			if time.Now().After(deadline) {
				b.Fatalf("run %s did not finish in five minutes", id)
			}
			r, err := st.Run(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if r.Status == store.StatusFinished {
				if r.Outcome != string(harness.Success) {
					b.Fatalf("run %s: %s", id, r.Outcome)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	return elapsed
}

// BenchmarkWorkers measures what splitting the same work across workers
// costs or buys: the same 36 runs, twelve at a time in both arms, through
// one worker driving twelve at once and through three workers driving
// four each. Only the number of workers differs, so the ratio of their
// throughputs is what the workers themselves (their fetching, leasing
// and polling of one queue) cost or buy, not what more concurrency does.
// The arms alternate in one loop so that the machine's noise falls on
// both.
func BenchmarkWorkers(b *testing.B) {
	const runs, concurrency, workers = 36, 12, 3
	var t1, tn time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			t1 += workRuns(b, runs, 1, concurrency)
			tn += workRuns(b, runs, workers, concurrency/workers)
		} else {
			tn += workRuns(b, runs, workers, concurrency/workers)
			t1 += workRuns(b, runs, 1, concurrency)
		}
	}
	n := float64(b.N * runs)
	b.ReportMetric(n/t1.Seconds(), "1-worker-runs/s")
	b.ReportMetric(n/tn.Seconds(), "3-worker-runs/s")
	b.ReportMetric(t1.Seconds()/tn.Seconds(), "3/1-workers")
}
