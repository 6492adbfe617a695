package harness_test

import (
	"context"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// TestCutTurnNote runs a step whose turn the output cap cut inside a
// write_file call, and reads the note the model is told after it from the
// trace: the cut and the call that did not run, never "You did not call a
// tool". The control is a step without a call, which is told exactly that.
//
// The note comes from turnNote in prompt.go.
func TestCutTurnNote(t *testing.T) {
	note := func(turn scripted.Turn) string {
		st := memStore(t)
		task := harness.TaskContract{Goal: "g", Root: workspace(t, nil), Budgets: harness.Budgets{MaxSteps: 1},
			Verification: []verify.Check{contains("never.txt", "x")}}
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, turn), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		steps, err := st.Steps(context.Background(), res.RunID)
		if err != nil || len(steps) != 1 {
			t.Fatalf("steps %v %v", steps, err)
		}
		var notes []string
		for _, o := range steps[0].Observations {
			if o.Kind == store.ObservationNote {
				notes = append(notes, o.Output)
			}
		}
		return strings.Join(notes, "\n")
	}
	control := note(scripted.Turn{Text: "I am done."})
	if !strings.Contains(control, "You did not call a tool") {
		t.Fatalf("a turn without a call is told %q", control)
	}
	cut := note(scripted.Turn{Text: "Writing it.", Truncated: true, DroppedCalls: []string{"write_file"}})
	if strings.Contains(cut, "You did not call a tool") || !strings.Contains(cut, "cut off at the output limit") || !strings.Contains(cut, `"write_file"`) {
		t.Errorf("a turn cut inside write_file is told %q", cut)
	}
}
