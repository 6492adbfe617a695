package harness_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
)

// The spec is validated against the one schema the project publishes
// (docs/spec.schema.json): an enum's unknown value, which the Go types
// take as any string, is refused with its field, at ParseSpec (the front
// door of the Go API, the ABI and the CLI) and at ParseResumeSpec.
func TestSpecValidatedAgainstTheSchema(t *testing.T) {
	scripted := func(turn string) string {
		return `{"task":{"goal":"g","root":"/"},"provider":{"name":"scripted","script":{"turns":[` + turn + `]}}}`
	}
	for _, tc := range []struct {
		name, spec, field, want string
		resume                  bool
	}{
		{"failure kind", scripted(`{"text":"x","fail":{"kind":"server_error"}}`), "provider.script.turns[0].fail.kind", "server_error", false},
		{"failure kind on resume", `{"provider":{"name":"scripted","script":{"turns":[{"text":"x","fail":{"kind":"server_error"}}]}}}`, "provider.script.turns[0].fail.kind", "server_error", true},
		{"check kind", `{"task":{"goal":"g","root":"/","verification":[{"kind":"file_exists","file":"a"}]},"provider":{"name":"scripted","script":{"turns":[]}}}`, "task.verification[0].kind", "file_exists", false},
		{"policy effect", `{"task":{"goal":"g","root":"/"},"provider":{"name":"scripted","script":{"turns":[]}},"policy":{"version":1,"defaults":{"read":"maybe"}}}`, "policy.defaults.read", "maybe", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := harness.ParseSpec
			if tc.resume {
				parse = harness.ParseResumeSpec
			}
			_, err := parse([]byte(tc.spec))
			var he *harness.Error
			if !errors.As(err, &he) || he.Kind != harness.ErrConfig || he.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v (field %s), want an ErrConfig at %s naming %q", err, fieldOf(he), tc.field, tc.want)
			}
		})
	}
	for _, ok := range []string{
		scripted(`{"text":"x","fail":{"kind":"server"}}`),
		`{"provider":{"name":"scripted","script":{"turns":[]}}}`,
	} {
		if _, err := harness.ParseResumeSpec([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
