package wire_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
)

// key62 has the 62 characters of the key in the report of the partial
// leak.
const key62 = "sk-proj-Zq7vN2xW9tL4pR8kM1cY6hJ3gF5dS0aQwErTyUiOpAsDfGhJkLzXcV"

// leak returns the first run of MinSecretRun characters of key that
// survives in s, or "". A "[redacted]" mark is not the key's, even where
// the key has the same letters.
func leak(s, key string) string {
	s = strings.ReplaceAll(s, "[redacted]", "\x00")
	n := min(wire.MinSecretRun, len(key))
	for i := 0; i+n <= len(key); i++ {
		if strings.Contains(s, key[i:i+n]) {
			return key[i : i+n]
		}
	}
	return ""
}

func TestClean(t *testing.T) {
	long := strings.Repeat("x", wire.MaxMessage)
	tests := []struct {
		name, in, secret, want string
	}{
		{"no secret", "Incorrect API key", "", "Incorrect API key"},
		{"whole key", "bad key " + key62 + ".", key62, "bad key [redacted]."},
		{"key twice, back to back", key62 + key62, key62, "[redacted]"},
		{"a prefix the vendor cut", "key: " + key62[:45] + "…", key62, "key: [redacted]…"},
		{"a suffix", "…" + key62[40:], key62, "…[redacted]"},
		{"a middle piece", "x" + key62[20:30] + "y", key62, "x[redacted]y"},
		{"OpenAI's masked key", "Incorrect API key provided: sk-proj-********wxyz.", "sk-proj-abcdefghwxyz", "Incorrect API key provided: [redacted]********wxyz."},
		{"a key split by a separator", key62[:30] + ": " + key62[30:], key62, "[redacted]: [redacted]"},
		{"seven characters stay", "…" + key62[10:17] + "…", key62, "…" + key62[10:17] + "…"},
		{"a short key, whole only", "k=abc123 abc12", "abc123", "k=[redacted] abc12"},
		{"control characters do not join pieces", key62[:5] + "\x00\x1b" + key62[5:13], key62, key62[:5] + "\ufffd\ufffd" + "[redacted]"},
		{"invalid UTF-8 does not join pieces", key62[:6] + "\xff" + key62[6:13], key62, key62[:6] + "\ufffd" + key62[6:13]},
		{"zero-width characters do not join pieces", key62[:6] + "\u200b" + key62[6:13], key62, key62[:6] + "\ufffd" + key62[6:13]},
		{"line ends become spaces", "a\nb\r\nc\td", "", "a b  c d"},
		{"URL user info", "dial https://user:hunter2@proxy.example:3128/x failed", "", "dial https://[redacted]@proxy.example:3128/x failed"},
		{"URL query credentials", `GET "https://g.example/v1?alt=sse&key=AIzaSy123&Token=t0k#frag" 400`, "", `GET "https://g.example/v1?alt=sse&key=[redacted]&Token=[redacted]#frag" 400`},
		{"URL without credentials", "see https://platform.openai.com/account/api-keys?tab=1.", "", "see https://platform.openai.com/account/api-keys?tab=1."},
		{"cut after redaction", long + key62, key62, long[:wire.MaxMessage-len("…")] + "…"},
		{"cut never splits a mark", long[:wire.MaxMessage-8] + key62, key62, long[:wire.MaxMessage-8] + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := wire.Clean(tt.in, tt.secret)
			if got != tt.want {
				t.Errorf("Clean(%q) =\n%q, want\n%q", tt.in, got, tt.want)
			}
			if len(got) > wire.MaxMessage || !utf8.ValidString(got) {
				t.Errorf("Clean gave %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if tt.secret != "" && leak(got, tt.secret) != "" && !strings.HasPrefix(tt.name, "seven") && !strings.Contains(tt.name, "join") {
				t.Errorf("%q survives", leak(got, tt.secret))
			}
		})
	}
}

// TestCutFirstLeaks is the negative control of the order Clean keeps: the
// old code cut a message to 200 bytes and then replaced the whole key,
// which a cut key no longer matched, so 45 of its 62 characters survived.
func TestCutFirstLeaks(t *testing.T) {
	msg := strings.Repeat("m", 155) + key62 + " was rejected"
	cutFirst := strings.ReplaceAll(msg[:200], key62, "[redacted]")
	if leak(cutFirst, key62) == "" {
		t.Fatal("cutting first should have left part of the key: the detector is broken")
	}
	if got := wire.Clean(msg, key62); leak(got, key62) != "" {
		t.Errorf("Clean leaks %q: %q", leak(got, key62), got)
	}
}
