package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// BenchmarkStep measures what a step costs the store — RecordSpend for
// its provider call, then CommitStep — on the memory store and on the
// SQLite store in memory (sqlite.OpenMemory, the default it replaces),
// in rounds of 100 steps of one run, the two interleaved so that both see
// the same machine. It reports the best round of each per step, and
// SQLite's cost as a multiple of the memory store's.
//
//	go test -run '^$' -bench Step -benchtime 20x ./pkg/harness/store/memory/
func BenchmarkStep(b *testing.B) {
	const steps = 100
	ctx := context.Background()
	commits := make([]*store.Commit, steps)
	for i := range commits {
		commits[i] = benchCommit(i + 1)
	}
	opens := []struct {
		name string
		open func() store.Store
	}{
		{"memory", func() store.Store { return New() }},
		{"sqlite", func() store.Store {
			s, err := sqlite.OpenMemory(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	best := map[string]float64{}
	for _, o := range opens {
		best[o.name] = math.Inf(1)
	}
	for b.Loop() {
		for _, o := range opens {
			s := o.open()
			l, err := s.CreateRun(ctx, &store.Run{ID: "r", Task: json.RawMessage(`{"goal":"g"}`), StartedAt: t0},
				nil, store.Self(), time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for _, c := range commits {
				sp := &store.Spend{RunID: "r", Step: c.Step.Step, Attempt: 1, Provider: "scripted", Usage: c.Step.Usage, Cost: c.Step.Cost, At: t0}
				if err := s.RecordSpend(ctx, l, sp); err != nil {
					b.Fatal(err)
				}
				if err := s.CommitStep(ctx, l, c); err != nil {
					b.Fatal(err)
				}
			}
			best[o.name] = min(best[o.name], float64(time.Since(start).Nanoseconds())/steps)
			s.Close()
		}
	}
	b.ReportMetric(best["memory"]/1e3, "memory-µs/step")
	b.ReportMetric(best["sqlite"]/1e3, "sqlite-µs/step")
	b.ReportMetric(best["sqlite"]/best["memory"], "sqlite/memory")
}

// benchCommit is step n of a run that writes one file per step, as the
// harness commits it: the assistant's turn with its tool call, the call's
// observation and the gate's, one provider attempt, and six events whose
// data repeat the step's content.
func benchCommit(n int) *store.Commit {
	args := json.RawMessage(fmt.Sprintf(`{"path":"notes/%d.txt","content":%q}`, n, strings.Repeat("a line of the file\n", 8)))
	c := &store.Commit{Step: store.Step{RunID: "r", Step: n, StartedAt: t0, FinishedAt: t0.Add(time.Millisecond), Provider: "scripted",
		Assistant: provider.Message{Role: provider.RoleAssistant, Content: "I will write the next note.",
			ToolCalls: []provider.ToolCall{{ID: fmt.Sprintf("call_%d", n), Name: "write_file", Arguments: args}}},
		Observations: []store.Observation{
			{Kind: store.ObservationTool, CallID: fmt.Sprintf("call_%d", n), Tool: "write_file", Arguments: args,
				Output: fmt.Sprintf("wrote notes/%d.txt (152 bytes)", n), Changed: []string{fmt.Sprintf("notes/%d.txt", n)}},
			{Kind: store.ObservationVerification, Output: "check notes: 1 of 2 files missing", IsError: true},
		},
		Usage:    provider.Usage{InputTokens: 1200 + 90*int64(n), OutputTokens: 80},
		Cost:     provider.Cost{USD: 0.001, Known: true},
		Attempts: []store.Attempt{{Step: n, Attempt: 1, Provider: "scripted", Latency: time.Millisecond, At: t0}},
	}}
	for i, kind := range []string{"step_started", "model_response", "tool_call", "tool_result", "verification", "checkpoint"} {
		seq := int64(6*n + i)
		data, _ := json.Marshal(map[string]any{"kind": kind, "seq": seq, "step": n, "arguments": args})
		c.Events = append(c.Events, store.Event{Seq: seq, Step: n, Kind: kind, At: t0, Data: data})
	}
	return c
}
