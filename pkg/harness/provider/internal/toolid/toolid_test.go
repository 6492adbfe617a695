package toolid

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// anthropicID is the pattern Anthropic's API checks a tool_use id
// against.
var anthropicID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func TestMap(t *testing.T) {
	tests := []struct {
		rule Rule
		id   string
		kept bool
	}{
		{Anthropic(), "toolu_01M8nJQQMxqpv1VaPYuJKT4j", true},
		{Anthropic(), "call_tyZNHs2AudCbG4XJUEmX5Waw", true},
		{Anthropic(), "chatcmpl-tool-8a1c0fd2e73b4b1f9d3e5a7c2b6f4e1d", true},
		{Anthropic(), "functions.read_file:0", false},
		{Anthropic(), "call 1", false},
		{Anthropic(), "", false},
		{Anthropic(), "x-habcdefghijklmnop", false}, // looks mapped
		{Anthropic(), "x-habcdefghijklmno1", true},  // '1' is not in the hash alphabet
		{Anthropic(), strings.Repeat("a", 64), true},
		{Anthropic(), strings.Repeat("a", 65), false},
		{OpenAI(), "call_tyZNHs2AudCbG4XJUEmX5Waw", true},
		{OpenAI(), "toolu_bdrk_01M8nJQQMxqpv1VaPYuJKT4jABCDEF", false}, // 41 bytes
		{OpenAI(), "ws_689e2d4880a0819d98acca37694989b00b15d90494fc6b87", false},
		{OpenRouter(), "functions.edit_file:12", false},
		{Rule{}, "functions.read_file:0", true},
		{Rule{}, "", true},
		{Rule{}, "x-habcdefghijklmnop", true},
	}
	for _, tt := range tests {
		got := tt.rule.Map(tt.id)
		if (got == tt.id) != tt.kept {
			t.Errorf("%+v.Map(%q) = %q; kept = %v, want %v", tt.rule, tt.id, got, got == tt.id, tt.kept)
		}
		if tt.rule != (Rule{}) && !tt.rule.accepts(got) {
			t.Errorf("%+v.Map(%q) = %q, which the rule refuses", tt.rule, tt.id, got)
		}
		if tt.rule.Safe && !anthropicID.MatchString(got) {
			t.Errorf("%+v.Map(%q) = %q does not match %s", tt.rule, tt.id, got, anthropicID)
		}
		if again := tt.rule.Map(tt.id); again != got {
			t.Errorf("Map(%q) is not deterministic: %q then %q", tt.id, got, again)
		}
	}
	// A mapped id keeps what it can of the original, for the reader.
	if got := Anthropic().Map("functions.read_file:0"); !strings.HasPrefix(got, "functions_read_file_0-h") {
		t.Errorf("Map(functions.read_file:0) = %q", got)
	}
}

// TestMapInjective is the property test: over ids built to collide (ids
// that sanitise to the same text, that share a long prefix, that look
// mapped, and the mapped ids themselves), distinct ids stay distinct
// under every rule, and every result is accepted.
func TestMapInjective(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 17))
	alphabet := []string{"a", "b", "_", "-", ".", ":", " ", "/", "é", "\x00", "h", "2", "7", "z"}
	var ids []string
	seen := map[string]bool{}
	push := func(s string) {
		if !seen[s] {
			seen[s] = true
			ids = append(ids, s)
		}
	}
	for n := 0; n < 1500; n++ {
		var b strings.Builder
		for range rng.IntN(80) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		push(b.String())
	}
	for i := range 100 {
		push(fmt.Sprintf("functions.read_file:%d", i)) // sanitise alike, differ only in the hash
		push(fmt.Sprintf("functions_read_file_%d", i))
		push(fmt.Sprintf("functions-read-file-%d", i))
		push(strings.Repeat("x", 60) + fmt.Sprint(i)) // same prefix once cut
	}
	for _, r := range []Rule{Anthropic(), OpenAI(), OpenRouter(), {MaxLen: 24}, {Safe: true}} {
		for _, id := range append([]string(nil), ids...) {
			push(r.Map(id)) // outputs as inputs: a kept id must never equal a mapped one
		}
	}
	for _, r := range []Rule{Anthropic(), OpenAI(), OpenRouter(), {MaxLen: 24}, {Safe: true}} {
		from := make(map[string]string, len(ids))
		for _, id := range ids {
			got := r.Map(id)
			if prev, dup := from[got]; dup {
				t.Fatalf("%+v maps %q and %q both to %q", r, prev, id, got)
			}
			from[got] = id
			if !r.accepts(got) {
				t.Fatalf("%+v.Map(%q) = %q, which the rule refuses", r, id, got)
			}
		}
	}
}

// FuzzMap checks the same properties on any pair of ids.
func FuzzMap(f *testing.F) {
	f.Add("functions.read_file:0", "functions_read_file_0")
	f.Add("a-haaaaaaaaaaaaaaaa", "a")
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, r := range []Rule{Anthropic(), OpenAI(), {MaxLen: 24}, {Safe: true}} {
			ma, mb := r.Map(a), r.Map(b)
			if !r.accepts(ma) || !r.accepts(mb) {
				t.Fatalf("%+v: %q → %q, %q → %q: refused", r, a, ma, b, mb)
			}
			if a != b && ma == mb {
				t.Fatalf("%+v maps %q and %q both to %q", r, a, b, ma)
			}
			if mm := r.Map(ma); a != ma && mm == ma && mapped(ma) {
				t.Fatalf("%+v: a mapped id %q is kept when mapped again, so it could equal a kept id", r, ma)
			}
		}
	})
}
