package window

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// step makes committed step n: a read of path (or a write when path is
// empty) and its result of size bytes.
func step(n int, path string, size int) store.Step {
	id := fmt.Sprintf("c%d", n)
	call := provider.ToolCall{ID: id, Name: "write_file", Arguments: json.RawMessage(`{"path":"out.txt","content":"x"}`)}
	if path != "" {
		call = provider.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":%q}`, path))}
	}
	return store.Step{Step: n, Assistant: provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("turn %d", n), ToolCalls: []provider.ToolCall{call}},
		Observations: []store.Observation{
			{Kind: store.ObservationTool, CallID: id, Tool: call.Name, Output: strings.Repeat(fmt.Sprint(n%10), size)},
			{Kind: store.ObservationVerification, Output: "not yet"},
		}}
}

// Between folds the transcript only grows at its end: every request
// starts with the one before it, so a vendor's prompt cache keeps hitting.
func TestAppendOnlyBetweenFolds(t *testing.T) {
	tr := New("the task", Options{})
	var prev []provider.Message
	for n := 1; n <= 20; n++ {
		st := step(n, "a.go", 100)
		tr.Append(&st)
		msgs, fold := tr.Messages(nil, 0)
		if fold != nil {
			t.Fatal("a fold without a limit")
		}
		// The last message of the previous request may have had the next
		// notes merged into it; everything before it is unchanged.
		if len(prev) > 1 && !cmp.Equal(prev[:len(prev)-1], msgs[:len(prev)-1]) {
			t.Fatalf("step %d changed the prefix", n)
		}
		prev = msgs
	}
}

// A transcript past its limit asks for a fold of all but the last steps;
// folded, it fits, starts with the task and the summary, and what a later
// read superseded is a stub.
func TestFold(t *testing.T) {
	tr := New("the task", Options{Keep: 3})
	for n := 1; n <= 12; n++ {
		path := "a.go"
		if n%2 == 0 {
			path = "b.go"
		}
		st := step(n, path, 4000)
		tr.Append(&st)
	}
	const limit = 6000
	msgs, fold := tr.Messages(nil, limit)
	if msgs != nil || fold == nil || fold.Through != 9 || fold.After >= fold.Tokens {
		t.Fatalf("fold request %+v", fold)
	}
	if len(fold.Messages) == 0 || !strings.Contains(Digest(fold.Messages), "you called read_file") {
		t.Errorf("digest of the folded steps:\n%s", Digest(fold.Messages))
	}
	tr.Fold(fold.Through, "SUMMARY OF 1-9")
	msgs, again := tr.Messages(nil, limit)
	if again != nil {
		t.Fatalf("still too big after folding: %+v", again)
	}
	if !strings.HasPrefix(msgs[0].Content, "the task") || !strings.Contains(msgs[0].Content, "SUMMARY OF 1-9") {
		t.Errorf("head %q", msgs[0].Content)
	}
	var tool []string
	for _, m := range msgs {
		if m.Role == provider.RoleTool {
			tool = append(tool, m.Content[:min(len(m.Content), 40)])
		}
	}
	// Steps 10 (b.go), 11 (a.go), 12 (b.go): step 10's read of b.go is
	// superseded by step 12's.
	if len(tool) != 3 || !strings.Contains(tool[0], "superseded") || strings.Contains(tool[1], "superseded") || strings.Contains(tool[2], "superseded") {
		t.Errorf("tool results after the fold: %q", tool)
	}
}

// A fold recorded with the step it happened before is replayed by Append:
// a transcript rebuilt from the committed steps sends what the original
// sent.
func TestFoldReplays(t *testing.T) {
	live := New("the task", Options{Keep: 2})
	var history []store.Step
	for n := 1; n <= 9; n++ {
		st := step(n, "f.go", 3000)
		if _, fold := live.Messages(nil, 4000); fold != nil {
			f := Fold{Through: fold.Through, Method: "digest", Summary: Digest(fold.Messages)}
			live.Fold(f.Through, f.Summary)
			st.Observations = append([]store.Observation{f.Observation()}, st.Observations...)
		}
		live.Append(&st)
		history = append(history, st)
	}
	rebuilt := New("the task", Options{Keep: 2})
	for i := range history {
		rebuilt.Append(&history[i])
	}
	a, _ := live.Messages(nil, 0)
	b, _ := rebuilt.Messages(nil, 0)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("rebuilt transcript differs (-live +rebuilt):\n%s", diff)
	}
	if !strings.Contains(a[0].Content, "What happened in steps") {
		t.Errorf("no fold happened: %q", a[0].Content)
	}
}

// Roles alternate whatever the steps hold: notes after a turn and notes
// before the next merge into one user message.
func TestRolesAlternate(t *testing.T) {
	tr := New("task", Options{})
	for n := 1; n <= 5; n++ {
		st := step(n, "", 10)
		st.Observations = append([]store.Observation{{Kind: store.ObservationInDoubt, Output: "in doubt"}}, st.Observations...)
		tr.Append(&st)
	}
	msgs, _ := tr.Messages([]provider.Message{{Role: provider.RoleUser, Content: "pre"}}, 0)
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Role == provider.RoleUser && msgs[i-1].Role == provider.RoleUser {
			t.Fatalf("two user messages in a row at %d", i)
		}
	}
	if msgs[len(msgs)-1].Role != provider.RoleUser || !strings.HasSuffix(msgs[len(msgs)-1].Content, "pre") {
		t.Errorf("last message %+v", msgs[len(msgs)-1])
	}
}

// Assembling a request costs the same at step 2,000 as at step 10: the
// steps are rendered once. (The cost is counted in allocations, not time.)
func BenchmarkMessages(b *testing.B) {
	for _, steps := range []int{10, 2000} {
		b.Run(fmt.Sprint(steps), func(b *testing.B) {
			tr := New("task", Options{})
			for n := 1; n <= steps; n++ {
				st := step(n, "a.go", 200)
				tr.Append(&st)
			}
			b.ReportAllocs()
			for b.Loop() {
				tr.Messages(nil, 0)
			}
		})
	}
}
