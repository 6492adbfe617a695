package approve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"new file", "", "a\nb\n", "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"one line", "a\nb\nc\n", "a\nB\nc\n", "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"no newline at end", "a\n", "a\nb", "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1,2 @@\n a\n+b\n\\ No newline at end of file\n"},
		{"unchanged", "x\n", "x\n", "--- f.txt\n+++ f.txt\n(no change)\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n",
			"--- a/f.txt\n+++ b/f.txt\n@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Diff("f.txt", tt.old, tt.new)); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHashIdentifiesTheAction(t *testing.T) {
	a := Hash(policy.Write, "a.txt", "x")
	for _, other := range []string{Hash(policy.Write, "a.txt", "y"), Hash(policy.Write, "b.txt", "x"), Hash(policy.Read, "a.txt", "x"),
		Hash(policy.Write, "a.tx", "tx")} {
		if a == other {
			t.Error("two different actions have one hash")
		}
	}
	if a != Hash(policy.Write, "a.txt", "x") || len(a) != 64 {
		t.Errorf("Hash is not a stable SHA-256: %s", a)
	}
}

func TestValidate(t *testing.T) {
	good := []Decision{{Kind: Approve}, {Kind: Deny, Reason: "no"}, {Kind: Defer},
		{Kind: Approve, Remember: []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "/a"}}}}
	for _, d := range good {
		if err := d.Validate(); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
	}
	bad := []Decision{{Kind: "maybe"}, {Kind: Deny, Remember: []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "a"}}},
		{Kind: Approve, Remember: []policy.Rule{{Act: "delete", Effect: policy.Allow, Pattern: "a"}}},
		{Kind: Defer, Rewrite: &Rewrite{Target: "x"}}}
	for _, d := range bad {
		if err := d.Validate(); err == nil {
			t.Errorf("%+v is accepted", d)
		}
	}
}

func TestTerminal(t *testing.T) {
	req := &Request{ID: "apr_1", Tool: "write_file", Act: policy.Write, Target: "src/a.go", Shown: Diff("src/a.go", "x\n", "y\n"), Rule: "src/**", Layer: "project"}
	var out bytes.Buffer
	term := NewTerminal(strings.NewReader("what?\ny\na\nn too risky\nd\n"), &out)
	want := []Decision{
		{Kind: Approve},
		{Kind: Approve, Remember: []policy.Rule{{Act: policy.Write, Effect: policy.Allow, Pattern: "/src/a.go"}}},
		{Kind: Deny, Reason: "too risky"},
		{Kind: Defer},
		{Kind: Deny, Reason: "no answer: the terminal's input ended"},
	}
	for i, w := range want {
		got, err := term.Decide(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("answer %d (-want +got):\n%s", i, diff)
		}
	}
	shown := out.String()
	for _, s := range []string{"write src/a.go (by write_file)", `rule "src/**" in layer "project"`, "-x\n+y\n", "approve? [y]es"} {
		if !strings.Contains(shown, s) {
			t.Errorf("the terminal did not show %q:\n%s", s, shown)
		}
	}
}

func TestTerminalHonoursCancellation(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	term := NewTerminal(r, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := term.Decide(ctx, &Request{Act: policy.Write, Target: "a"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	// The answer typed for the withdrawn question arrives late; it must
	// not answer the next question, which gets its own.
	w.Write([]byte("y\n"))
	// Write returns once the reader has the bytes; give it a moment to
	// note which question was being asked, as a person's next question
	// would come moments later.
	time.Sleep(200 * time.Millisecond)
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("n\n"))
	}()
	d, err := term.Decide(context.Background(), &Request{Act: policy.Write, Target: "b"})
	if err != nil || d.Kind != Deny {
		t.Errorf("after a withdrawn question: %+v %v; want the new answer, a denial", d, err)
	}
}

func TestBuiltins(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		a    Approver
		want Kind
	}{{ApproveAll(), Approve}, {DenyAll(""), Deny}, {DeferAll(), Defer}} {
		d, err := tc.a.Decide(ctx, &Request{})
		if err != nil || d.Kind != tc.want {
			t.Errorf("%+v %v, want %s", d, err, tc.want)
		}
	}
	if d, _ := DenyAll("").Decide(ctx, &Request{}); d.Reason == "" {
		t.Error("DenyAll gives no reason")
	}
}
