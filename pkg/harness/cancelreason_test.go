package harness_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
)

// A cancelled run's reason says who cancelled it in words, not Go's
// "context canceled"; a cause the caller gave is kept.
func TestCancelledReasonReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		want  string
	}{
		{"plain", nil, "cancelled by the caller"},
		{"cause", errors.New("the operator pressed Ctrl-C"), "the operator pressed Ctrl-C"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{Text: "x"}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			res, err := harness.Run(ctx, harness.TaskContract{Goal: "g", Root: t.TempDir()}, harness.Options{Provider: p})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome.Kind != harness.Cancelled || !strings.Contains(res.Outcome.Reason, tc.want) || strings.Contains(res.Outcome.Reason, "context canceled") {
				t.Errorf("outcome %s (%s), want cancelled saying %q", res.Outcome.Kind, res.Outcome.Reason, tc.want)
			}
		})
	}
}
