package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// fanOut is a tree of n children spawned in the background by the root in
// one turn and collected in the next; each child writes its file and
// answers. Every turn of every agent answers after latency.
func fanOut(b *testing.B, n int, latency time.Duration) *scripted.Provider {
	ms := int(latency / time.Millisecond)
	turns := spawnTurns(n)
	for i := range turns {
		turns[i].LatencyMS = ms
	}
	p, err := scripted.New(scripted.Script{
		Turns: append(turns, scripted.Turn{ToolCalls: []scripted.Call{call("collect_agents", map[string]any{})}, LatencyMS: ms}, scripted.Turn{Text: "done", LatencyMS: ms}),
		Agents: []scripted.AgentScript{{Path: "root/*", Turns: []scripted.Turn{
			{ToolCalls: []scripted.Call{call("write_file", map[string]any{"path": "out/{agent}.txt", "content": "x"})}, LatencyMS: ms},
			{Text: "ok", LatencyMS: ms},
		}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// spawnTurns spawns n children in the background, at most 1,000 a turn
// (a turn holds at most provider.MaxToolCalls calls).
func spawnTurns(n int) []scripted.Turn {
	var turns []scripted.Turn
	for n > 0 {
		k := min(n, 1000)
		turns = append(turns, spawns(k, false))
		n -= k
	}
	return turns
}

// runTree runs a fan-out of n children under concurrency c on st and
// checks that every agent finished.
func runTree(b *testing.B, st store.Store, n, c int, latency time.Duration) time.Duration {
	dir := ramWorkspace(b)
	t0 := time.Now()
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "fan out", Root: dir, Budgets: harness.Budgets{MaxSteps: 40}},
		harness.Options{Provider: fanOut(b, n, latency), Store: st, Containment: &harness.Containment{MaxAgents: n + 1, MaxConcurrent: c}})
	d := time.Since(t0)
	if err != nil || res.Outcome.Kind != harness.Finished {
		b.Fatalf("%v %+v", err, res)
	}
	runs, err := st.Runs(context.Background(), store.RunFilter{RootID: res.RunID, Limit: -1})
	if err != nil || len(runs) != n+1 {
		b.Fatalf("%d runs, %v", len(runs), err)
	}
	return d
}

// BenchmarkTree1000 runs a 1,000-agent tree whose scripted model answers
// every turn after 100 ms, 100 agents at once, on an in-memory store and
// on a store file. The ideal is the model's time alone: the root's three
// turns and ten waves of children, two turns each. It reports the wall
// time as a ratio of that ideal (the goal is at most 1.1).
func BenchmarkTree1000(b *testing.B) {
	const n, c, latency = 1000, 100, 100 * time.Millisecond
	waves := (n + c - 1) / c
	// The root's spawn turn, ten waves of children, and its last turn (its
	// collect turn runs beside the first wave).
	ideal := time.Duration(2+2*waves) * latency
	for _, arm := range []string{"memory", "file"} {
		b.Run(arm, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				var st store.Store
				if arm == "memory" {
					st = memStore(b)
				} else {
					f, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "tree.db"))
					if err != nil {
						b.Fatal(err)
					}
					st = f
				}
				total += runTree(b, st, n, c, latency)
				st.Close()
			}
			wall := total / time.Duration(b.N)
			b.ReportMetric(wall.Seconds(), "wall-s")
			b.ReportMetric(ideal.Seconds(), "ideal-s")
			b.ReportMetric(float64(wall)/float64(ideal), "wall/ideal")
		})
	}
}

// BenchmarkTreeWaitingAgent measures the memory an agent costs while it
// waits in the queue for a concurrency slot: 2,000 agents are spawned
// under a concurrency of 1 while the one agent working holds its slot,
// and the live heap is read before and after, collected.
func BenchmarkTreeWaitingAgent(b *testing.B) {
	const n = 2000
	for range b.N {
		dir := workspace(b, nil)
		release := make(chan struct{})
		var before, during runtime.MemStats
		p, err := scripted.New(scripted.Script{
			Turns:  append(spawnTurns(n), calls(call("collect_agents", map[string]any{})), text("done")),
			Agents: []scripted.AgentScript{{Path: "root/*", Turns: []scripted.Turn{text("ok")}}},
		})
		if err != nil {
			b.Fatal(err)
		}
		// The first child's turn holds the only slot until the heap is read.
		gate := &gatedChild{Provider: p, release: release, first: make(chan struct{})}
		runtime.GC()
		runtime.ReadMemStats(&before)
		done := make(chan error, 1)
		go func() {
			_, err := harness.Run(context.Background(), harness.TaskContract{Goal: "queue", Root: dir, Budgets: harness.Budgets{MaxSteps: 40}},
				harness.Options{Provider: gate, Store: memStore(b), Containment: &harness.Containment{MaxAgents: n + 1, MaxConcurrent: 1}})
			done <- err
		}()
		<-gate.first
		runtime.GC()
		runtime.ReadMemStats(&during)
		close(release)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(int64(during.HeapInuse)-int64(before.HeapInuse))/n/1024, "KiB/waiting-agent")
		b.ReportMetric(float64(during.StackInuse-before.StackInuse)/n/1024, "stack-KiB/waiting-agent")
	}
}

// BenchmarkTreeLargest runs a tree of 10,000 agents in one process, its
// model answering at once, 100 at a time: it shows the size runs, and
// what it takes.
func BenchmarkTreeLargest(b *testing.B) {
	const n = 10_000
	for range b.N {
		var ms runtime.MemStats
		d := runTree(b, memStore(b), n, 100, 0)
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(n), "agents")
		b.ReportMetric(d.Seconds(), "wall-s")
		b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
	}
}

// ramWorkspace is an empty workspace in RAM when the machine has
// /dev/shm: the children's thousand file creations then measure the
// harness, not the disk under the test (on a shared, loaded disk one
// creation costs from 50 µs to over a millisecond).
func ramWorkspace(b *testing.B) string {
	dir, err := os.MkdirTemp("/dev/shm", "io-harness-tree-")
	if err != nil {
		return workspace(b, nil)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// gatedChild holds the first child's turn until release, and says when it
// got there: every other child is then in the queue.
type gatedChild struct {
	*scripted.Provider
	release chan struct{}
	first   chan struct{}
	once    bool
}

func (g *gatedChild) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if req.Agent != "root" && req.Agent != "" && !g.once {
		g.once = true // only one child steps at a time (concurrency 1)
		close(g.first)
		<-g.release
	}
	return g.Provider.Complete(ctx, req, onText)
}
