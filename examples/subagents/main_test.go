package main

import (
	"context"
	"strings"
	"testing"
)

// The example runs to success: three children spawned in one turn and
// collected, each module done, the parent's gate passed.
func TestSubagents(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"root spawned root/1.0", "root spawned root/1.1", "root spawned root/1.2",
		"root collected root/1.0: success", "root collected root/1.2: success",
		"alpha.txt: status: done", "beta.txt: status: done", "gamma.txt: status: done",
		"root ended success after 1 step(s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
