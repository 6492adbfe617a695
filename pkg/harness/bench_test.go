package harness_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/telemetry"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
)

// benchTurns is the Rust original's benchmark shape: a 4-step scripted
// run, one tool call a step, the last step satisfying the gate.
func benchTurns() []scripted.Turn {
	return []scripted.Turn{
		{Text: "look", ToolCalls: []scripted.Call{call("list_dir", map[string]string{})}},
		{Text: "read", ToolCalls: []scripted.Call{call("read_file", map[string]string{"path": "main.go"})}},
		{Text: "search", ToolCalls: []scripted.Call{call("grep", map[string]string{"pattern": "func"})}},
		{Text: "fix", ToolCalls: []scripted.Call{call("write_file", map[string]string{"path": "main.go", "content": "package main\n\nfunc main() { println(\"fixed\") }\n"})}},
	}
}

const benchSteps = 4

// direct does a run's work by hand, with no harness around it: the same
// requests to the same scripted model, the same tool calls and the same
// gate, but no store, no events, no budgets. It is the baseline the
// harness's overhead is measured against.
func direct(b *testing.B, p provider.Provider, dir string, task *harness.TaskContract) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	tools := map[string]tool.Tool{}
	var specs []provider.ToolSpec
	for _, t := range tool.Workspace() {
		tools[t.Spec().Name] = t
		specs = append(specs, t.Spec())
	}
	env := &tool.Env{Root: root}
	req := &provider.Request{System: "s", Tools: specs, Messages: []provider.Message{{Role: provider.RoleUser, Content: "task"}}}
	for range benchSteps {
		resp, err := p.Complete(context.Background(), req, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Messages = append(req.Messages, provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		for _, c := range resp.ToolCalls {
			res := tools[c.Name].Call(context.Background(), env, c.Arguments)
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, Content: res.Output})
		}
		verify.Run(context.Background(), &verify.Env{Root: root}, &task.Verification[0])
	}
}

// BenchmarkStepOverhead measures what the harness adds to a step: a
// 4-step scripted run with an in-memory store and with a store file (WAL,
// synchronous=FULL), against the same work done by hand, the three arms
// interleaved in one loop so that machine noise falls on all of them.
func BenchmarkStepOverhead(b *testing.B) {
	files := map[string]string{"main.go": "package main\n\nfunc main() {}\n", "README.md": "hello\n"}
	p, err := scripted.New(scripted.Script{Turns: benchTurns()})
	if err != nil {
		b.Fatal(err)
	}
	mem, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	disk, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer disk.Close()

	var tDirect, tMem, tDisk time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dirs := [3]string{workspace(b, files), workspace(b, files), workspace(b, files)}
		task := func(d string) harness.TaskContract {
			return harness.TaskContract{Goal: "fix main", Root: d,
				Verification: []verify.Check{contains("main.go", "fixed")}}
		}
		base := task(dirs[0])
		b.StartTimer()

		t0 := time.Now()
		direct(b, p, dirs[0], &base)
		t1 := time.Now()
		res, err := harness.Run(context.Background(), task(dirs[1]), harness.Options{Provider: p, Store: mem})
		t2 := time.Now()
		if err != nil || res.Outcome.Steps != benchSteps {
			b.Fatalf("%v %+v", err, res)
		}
		res, err = harness.Run(context.Background(), task(dirs[2]), harness.Options{Provider: p, Store: disk})
		t3 := time.Now()
		if err != nil || res.Outcome.Steps != benchSteps {
			b.Fatalf("%v %+v", err, res)
		}
		tDirect += t1.Sub(t0)
		tMem += t2.Sub(t1)
		tDisk += t3.Sub(t2)
	}
	perStep := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*benchSteps) }
	b.ReportMetric(perStep(tDirect), "direct-µs/step")
	b.ReportMetric(perStep(tMem), "memory-µs/step")
	b.ReportMetric(perStep(tDisk), "disk-µs/step")
	b.ReportMetric(perStep(tMem-tDirect), "memory-overhead-µs/step")
	b.ReportMetric(perStep(tDisk-tDirect), "disk-overhead-µs/step")
	b.ReportMetric(float64(tMem)/float64(tDirect), "memory/direct")
}

// BenchmarkLiveEvents measures what serving live events and exporting
// telemetry add to a step: the 4-step run of BenchmarkStepOverhead on an
// in-memory store (where a step is cheapest, so an overhead shows most)
// with no sink; with a live hub nobody watches; with a hub and a watcher
// reading every event over loopback; and with an OpenTelemetry exporter
// whose collector is a local server. The arms are interleaved in one loop;
// each is reported as a ratio to the first.
func BenchmarkLiveEvents(b *testing.B) {
	files := map[string]string{"main.go": "package main\n\nfunc main() {}\n", "README.md": "hello\n"}
	p, err := scripted.New(scripted.Script{Turns: benchTurns()})
	if err != nil {
		b.Fatal(err)
	}
	mem, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	idle, err := watch.Listen(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer idle.Close()
	watched, err := watch.Listen(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer watched.Close()
	// A watcher of every run the hub serves, reading and dropping lines.
	resp, err := http.Get(watched.AllURL())
	if err != nil {
		b.Fatal(err)
	}
	var lines atomic.Int64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			lines.Add(1)
		}
	}()
	defer func() { resp.Body.Close(); <-readDone }()
	for !watched.Wants("any") {
		time.Sleep(time.Millisecond)
	}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer collector.Close()
	exp, err := telemetry.New(telemetry.Config{Endpoint: collector.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer exp.Shutdown(context.Background())

	arms := []struct {
		name string
		opts func(o *harness.Options)
	}{
		{"none", func(*harness.Options) {}},
		{"hub", func(o *harness.Options) { o.Live = idle }},
		{"watched", func(o *harness.Options) { o.Live = watched }},
		{"telemetry", func(o *harness.Options) { o.Sinks = []harness.Sink{exp} }},
	}
	took := make([]time.Duration, len(arms))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, arm := range arms {
			b.StopTimer()
			task := harness.TaskContract{Goal: "fix main", Root: workspace(b, files), Verification: []verify.Check{contains("main.go", "fixed")}}
			o := harness.Options{Provider: p, Store: mem}
			arm.opts(&o)
			b.StartTimer()
			t0 := time.Now()
			res, err := harness.Run(context.Background(), task, o)
			took[k] += time.Since(t0)
			if err != nil || res.Outcome.Steps != benchSteps {
				b.Fatalf("%s: %v %+v", arm.name, err, res)
			}
		}
	}
	b.StopTimer()
	if lines.Load() == 0 {
		b.Fatal("the watcher read nothing")
	}
	perStep := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*benchSteps) }
	b.ReportMetric(perStep(took[0]), "none-µs/step")
	for k := 1; k < len(arms); k++ {
		b.ReportMetric(float64(took[k])/float64(took[0]), arms[k].name+"/none")
	}
}
