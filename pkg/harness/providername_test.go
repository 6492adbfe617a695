package harness_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
)

// A provider name that is not one says so, names the nearest, and comes
// before any complaint about the fields the name would not take: the most
// common typo ({"name":"openia","model":"gpt-4.1"}) used to read
// "spec.provider.model: does not apply to the openia provider".
func TestUnknownProviderSuggestsTheNearest(t *testing.T) {
	for _, tc := range []struct {
		provider, field, want string
	}{
		{`{"name":"openia","model":"gpt-4.1"}`, "provider.name", `unknown provider "openia" (did you mean "openai"?)`},
		{`{"name":"OpenAI","model":"gpt-4.1"}`, "provider.name", `unknown provider "OpenAI" (did you mean "openai"?)`},
		{`{"name":"antropic","model":"claude"}`, "provider.name", `unknown provider "antropic" (did you mean "anthropic"?)`},
		{`{"name":"openai-compatible","base_url":"http://x"}`, "provider.name", `(did you mean "openai_compatible"?)`},
		{`{"name":"scriptd","script":{"turns":[]}}`, "provider.name", `(did you mean "scripted"?)`},
		{`{"name":"gemini","model":"g"}`, "provider.name", `unknown provider "gemini"; want openai, anthropic, openrouter, openai_compatible, scripted or replay`},
		{`{"model":"gpt-4.1"}`, "provider.name", "required"},
		{`{"name":"scripted","model":"gpt-4.1","script":{"turns":[]}}`, "provider.model", "does not apply to the scripted provider"},
	} {
		spec, err := harness.ParseSpec([]byte(`{"task":{"goal":"g","root":"/"},"provider":` + tc.provider + `}`))
		if err == nil {
			_, err = spec.Options(func(string) (string, bool) { return "", false })
		}
		var he *harness.Error
		if !errors.As(err, &he) || he.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (field %v), want %s: %q", tc.provider, err, fieldOf(he), tc.field, tc.want)
		}
		if !strings.Contains(tc.want, "did you mean") && err != nil && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%s: suggests a name far from it: %v", tc.provider, err)
		}
	}
}

func fieldOf(e *harness.Error) string {
	if e == nil {
		return "<none>"
	}
	return e.Field
}
