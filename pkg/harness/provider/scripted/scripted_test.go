package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

func request(assistantTurns int) *provider.Request {
	req := &provider.Request{System: "s", Messages: []provider.Message{{Role: provider.RoleUser, Content: "task"}}}
	for i := range assistantTurns {
		req.Messages = append(req.Messages,
			provider.Message{Role: provider.RoleAssistant, Content: "x"},
			provider.Message{Role: provider.RoleUser, Content: strings.Repeat("y", i)})
	}
	return req
}

func TestTurnChosenByRequest(t *testing.T) {
	p, err := Parse([]byte(`{"turns":[
		{"text":"one two  three","usage":{"input_tokens":10,"output_tokens":3}},
		{"tool_calls":[{"name":"read_file","arguments":{"path":"a.go"}},{"id":"mine","name":"list_dir"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var deltas []string
	r1, err := p.Complete(ctx, request(0), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"one ", "two  ", "three"}, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if r1.Text != "one two  three" || r1.Usage.Total() != 13 || r1.Cost != (provider.Cost{Known: true}) || r1.StopReason != provider.StopEnd {
		t.Errorf("turn 1 = %+v", r1)
	}
	// The same request again gets the same turn: no hidden counter.
	again, _ := p.Complete(ctx, request(0), nil)
	if again.Text != r1.Text {
		t.Errorf("repeated request got %q", again.Text)
	}
	r2, err := p.Complete(ctx, request(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{
		{ID: "call_2_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)},
		{ID: "mine", Name: "list_dir", Arguments: json.RawMessage(`{}`)},
	}
	if diff := cmp.Diff(want, r2.ToolCalls); diff != "" {
		t.Errorf("turn 2 calls (-want +got):\n%s", diff)
	}
	if r2.StopReason != provider.StopToolUse || r2.Usage.InputTokens == 0 || r2.Usage.OutputTokens == 0 {
		t.Errorf("turn 2 = %+v; want tool_use with estimated usage", r2)
	}
	_, err = p.Complete(ctx, request(2), nil)
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindNotRecorded || pe.Transient() {
		t.Errorf("request past the script: %v, want a terminal not_recorded error", err)
	}
}

func TestInjectedFailures(t *testing.T) {
	p, err := New(Script{Turns: []Turn{{Text: "ok", Fail: &Failure{Kind: provider.KindRateLimited, Status: 429, RetryAfterMS: 7, Times: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := p.Complete(context.Background(), request(0), nil)
		pe := provider.AsError(err)
		if pe == nil || pe.Kind != provider.KindRateLimited || pe.Status != 429 || pe.RetryAfter != 7*time.Millisecond {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
	}
	if r, err := p.Complete(context.Background(), request(0), nil); err != nil || r.Text != "ok" {
		t.Fatalf("third attempt: %v %v", r, err)
	}
}

func TestPricesAndCost(t *testing.T) {
	cost := 0.5
	p, err := New(Script{Price: &provider.Price{Input: 3, Output: 15}, Turns: []Turn{
		{Text: "a", Usage: &provider.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}},
		{Text: "b", CostUSD: &cost},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := p.Complete(context.Background(), request(0), nil)
	if r.Cost != (provider.Cost{USD: 4.5, Known: true}) {
		t.Errorf("priced cost = %+v, want $4.5", r.Cost)
	}
	r, _ = p.Complete(context.Background(), request(1), nil)
	if r.Cost != (provider.Cost{USD: 0.5, Known: true}) {
		t.Errorf("explicit cost = %+v", r.Cost)
	}
}

// A turn's latency ends with its context: the turn takes an hour, so
// Complete returns before a two-minute guard (which no loaded machine
// needs to notice a 20 ms deadline) only if the deadline ended its wait.
func TestLatencyHonoursCancellation(t *testing.T) {
	p, _ := New(Script{Turns: []Turn{{Text: "slow", LatencyMS: 3_600_000}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx, request(0), nil)
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Complete still waits out the turn's latency after its context ended")
	}
}

func TestInvalidScripts(t *testing.T) {
	for name, js := range map[string]string{
		"no turns":          `{"turns":[]}`,
		"empty turn":        `{"turns":[{}]}`,
		"call without name": `{"turns":[{"tool_calls":[{"arguments":{}}]}]}`,
		"array arguments":   `{"turns":[{"tool_calls":[{"name":"x","arguments":[1]}]}]}`,
		"unknown field":     `{"turns":[{"text":"a","txet":"b"}]}`,
		"fail without kind": `{"turns":[{"text":"a","fail":{"times":1}}]}`,
		"not json":          `{"turns":`,
	} {
		if _, err := Parse([]byte(js)); err == nil {
			t.Errorf("%s: Parse accepted %s", name, js)
		}
	}
}

// TestTruncatedTurn scripts a turn the output cap cut inside a call, for
// tests of what the loop tells the model.
func TestTruncatedTurn(t *testing.T) {
	p, err := Parse([]byte(`{"turns": [
		{"text": "Writing.", "truncated": true, "dropped_calls": ["write_file"], "usage": {"input_tokens": 10, "output_tokens": 4096}},
		{"truncated": true, "dropped_calls": ["edit_file"]},
		{"text": "Cut mid-sentence", "truncated": true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{{"write_file"}, {"edit_file"}, nil} {
		resp, err := p.Complete(context.Background(), request(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Truncated() || len(resp.ToolCalls) != 0 || !slices.Equal(resp.DroppedCalls, want) {
			t.Errorf("turn %d: stop %s, calls %v, dropped %v; want cut, none, %v", i+1, resp.StopReason, resp.ToolCalls, resp.DroppedCalls, want)
		}
	}
	for _, bad := range []string{
		`{"turns": [{"dropped_calls": ["x"]}]}`,
		`{"turns": [{"truncated": true}]}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) succeeded", bad)
		}
	}
}
