package replay

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
)

func req(user string, tools ...provider.ToolSpec) *provider.Request {
	return &provider.Request{System: "sys", Messages: []provider.Message{{Role: provider.RoleUser, Content: user}}, Tools: tools}
}

func TestRecordThenReplay(t *testing.T) {
	sp, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{Text: "hello"}},
		Price: &provider.Price{Input: 1, Output: 2}})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(sp)
	ctx := context.Background()
	tool := provider.ToolSpec{Name: "t", Description: "d", Parameters: json.RawMessage(`{ "type": "object" }`)}
	want, err := rec.Complete(ctx, req("a", tool), nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cassette.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	rp, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Name() != "replay(scripted)" {
		t.Errorf("Name = %q", rp.Name())
	}
	// Whitespace inside embedded JSON does not change the key.
	tool.Parameters = json.RawMessage(`{"type":"object"}`)
	var text strings.Builder
	got, err := rp.Complete(ctx, req("a", tool), func(s string) { text.WriteString(s) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replayed response (-recorded +replayed):\n%s", diff)
	}
	if text.String() != "hello" {
		t.Errorf("replayed deltas = %q", text.String())
	}
}

func TestMissIsLoudAndTerminal(t *testing.T) {
	rp, err := New(&Cassette{Version: Version, Provider: "p", Entries: []Entry{
		{Request: *req("a"), Response: &provider.Response{Text: "x"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := req("a")
	r.Messages = append(r.Messages, provider.Message{Role: provider.RoleAssistant, Content: "y"})
	_, err = rp.Complete(context.Background(), r, nil)
	pe := provider.AsError(err)
	if pe == nil || pe.Kind != provider.KindNotRecorded || pe.Transient() {
		t.Fatalf("miss = %v, want a terminal not_recorded error", err)
	}
	if !strings.Contains(pe.Message, "closest recording has 1 messages") {
		t.Errorf("miss message does not locate the difference: %q", pe.Message)
	}
}

func TestDuplicatesInOrderThenLastRepeats(t *testing.T) {
	rp, err := New(&Cassette{Version: Version, Provider: "p", Entries: []Entry{
		{Request: *req("a"), Error: &Failure{Kind: provider.KindServer, Status: 503, Message: "down", RetryAfterMS: 5}},
		{Request: *req("a"), Response: &provider.Response{Text: "first"}},
		{Request: *req("a"), Response: &provider.Response{Text: "second"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = rp.Complete(ctx, req("a"), nil)
	if pe := provider.AsError(err); pe == nil || pe.Kind != provider.KindServer || pe.Status != 503 || pe.RetryAfter.Milliseconds() != 5 {
		t.Fatalf("first answer = %v, want the recorded 503", err)
	}
	var got []string
	for range 3 {
		r, err := rp.Complete(ctx, req("a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Text)
	}
	if diff := cmp.Diff([]string{"first", "second", "second"}, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

func TestCassetteValidation(t *testing.T) {
	if _, err := New(&Cassette{Version: Version + 1}); err == nil {
		t.Error("a cassette of another version was accepted")
	}
	if _, err := New(&Cassette{Version: Version, Entries: []Entry{{Request: *req("a")}}}); err == nil {
		t.Error("an entry with neither response nor error was accepted")
	}
}
