package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The example shows a refusal that never reaches the approver, an
// approval with its diff, and explanations naming rule and layer.
func TestPolicyRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		`read .env: deny by rule ".env" in layer "builtin-secrets"`,
		`write go.sum: deny by rule "go.sum" in layer "project"`,
		`write VERSION: ask by the write default`,
		`exec go: allow by rule "go" in layer "builtin-exec"`,
		`refused: deny by rule ".env" in layer "builtin-secrets"`,
		"-1.0.0\n+1.1.0\n",
		"outcome: success after 2 steps",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s, "do-not-leak") {
		t.Error("the secret was shown")
	}
	if strings.Count(s, "approval requested") != 1 {
		t.Errorf("want exactly one approval request (the denied read never reaches the approver):\n%s", s)
	}
}
