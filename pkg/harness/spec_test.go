package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

// specJSON returns a valid spec whose task works in a fresh directory,
// with the provider and the other top-level members given.
func specJSON(t *testing.T, budgets, providerJSON, rest string) string {
	t.Helper()
	if budgets == "" {
		budgets = `{"max_steps": 3}`
	}
	if rest != "" {
		rest = ", " + rest
	}
	return fmt.Sprintf(`{"task": {"goal": "g", "root": %q, "verification": [{"kind": "workspace_file_contains", "file": "a", "text": "b"}],
		"budgets": %s}, "provider": %s%s}`, t.TempDir(), budgets, providerJSON, rest)
}

func configErr(t *testing.T, err error) *harness.Error {
	t.Helper()
	var he *harness.Error
	if !errors.As(err, &he) || !errors.Is(err, harness.ErrConfig) {
		t.Fatalf("err = %v, want a harness config error", err)
	}
	return he
}

// TestSpecFieldPaths checks that a spec error names its field by its
// whole JSON path, and says what is wrong once.
func TestSpecFieldPaths(t *testing.T) {
	scripted := `{"name": "scripted", "script": {"turns": [{"text": "ok"}]}}`
	tests := []struct {
		name, budgets, provider, rest string
		field, msg                    string
	}{
		{"misspelt budget", `{"max_step": 3}`, scripted, "", "task.budgets.max_step", "unknown field"},
		{"misspelt provider field", "", `{"name": "anthropic", "modle": "claude-sonnet-4-5"}`, "", "provider.modle", "unknown field"},
		{"misspelt fallback field", "", scripted, `"fallbacks": [{"name": "anthropic", "model": "m"}, {"name": "openai", "modle": "gpt-4o"}]`, "fallbacks[1].modle", "unknown field"},
		{"misspelt top-level field", "", scripted, `"fallback": []`, "fallback", "unknown field"},
		{"misspelt script field", "", `{"name": "scripted", "script": {"turns": [{"txt": "ok"}]}}`, "", "provider.script.turns[0].txt", "unknown field"},
		{"mistyped duration", `{"time": "3x"}`, scripted, "", "task.budgets.time", `invalid duration "3x"`},
		{"a duration given as a number", "", `{"name": "anthropic", "model": "m", "stall_timeout": 90}`, "", "provider.stall_timeout", "a duration is a string"},
		{"a fallback's duration", "", scripted, `"fallbacks": [{"name": "openai", "request_timeout": "ten minutes"}]`, "fallbacks[0].request_timeout", "invalid duration"},
		{"wrong type in an array", "", scripted, `"fallbacks": [{"name": "openai", "max_output_tokens": "4096"}]`, "fallbacks[0].max_output_tokens", "want int64, got JSON string"},
		{"wrong type in a map", "", `{"name": "openai", "headers": {"X-Team": 5}}`, "", "provider.headers.X-Team", "want string, got JSON number"},
		{"an object where an array goes", "", scripted, `"fallbacks": {"name": "openai"}`, "fallbacks", "want a JSON array, got an object"},
		{"deep in the policy", "", scripted, `"policy": {"version": 1, "layers": [{"name": "l", "rules": [{"act": "read", "efect": "deny", "pattern": "x"}]}]}`, "policy.layers[0].rules[0].efect", "unknown field"},
		{"after a key matched ignoring case", `{"Max_Steps": 3, "max_stepz": 4}`, scripted, "", "task.budgets.max_stepz", "unknown field"},
		{"in the price", "", `{"name": "openai", "price": {"input": 1, "output": 2, "cach_read": 1}}`, "", "provider.price.cach_read", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := harness.ParseSpec([]byte(specJSON(t, tt.budgets, tt.provider, tt.rest)))
			he := configErr(t, err)
			if he.Field != tt.field || !strings.Contains(he.Error(), tt.msg) {
				t.Errorf("field %q, error %q; want field %q and %q", he.Field, he.Error(), tt.field, tt.msg)
			}
			if n := strings.Count(he.Error(), tt.msg); n != 1 {
				t.Errorf("the error says %q %d times: %s", tt.msg, n, he.Error())
			}
		})
	}
	// JSON that does not parse names no field, but says where.
	_, err := harness.ParseSpec([]byte(`{"task": {"goal": "g",}`))
	if he := configErr(t, err); he.Field != "" || !strings.Contains(he.Error(), "invalid JSON at byte") {
		t.Errorf("syntax error: %v", err)
	}
}

// FuzzSpecFieldPath checks that ParseSpec never panics and that an error
// it reports for a document encoding/json refuses names a field that the
// document really has.
func FuzzSpecFieldPath(f *testing.F) {
	f.Add([]byte(`{"task": {"budgets": {"max_step": 3}}, "provider": {"name": "x"}}`))
	f.Add([]byte(`{"fallbacks": [{"modle": 1}, {"headers": {"a": [1]}}], "policy": {"layers": [{"rules": [{"x": 1}]}]}}`))
	f.Add([]byte(`{"task": {"budgets": {"time": 5}}}`))
	f.Add([]byte(`{"Task": {"Budgets": {"TIME": "1h", "max_cost_usd": "1"}}}`))
	f.Add([]byte(`[1, 2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := harness.ParseSpec(data)
		if err == nil {
			return
		}
		var he *harness.Error
		if !errors.As(err, &he) || he.Kind != harness.ErrConfig {
			t.Fatalf("err = %v, want a config error", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if !json.Valid(data) || dec.Decode(new(harness.Spec)) == nil {
			return // not a decoding error: validation names fields the document lacks
		}
		if he.Field == "" {
			t.Fatalf("a decoding error names no field: %v", err)
		}
		// Every plain key of a reported path is in the document.
		for _, part := range strings.FieldsFunc(he.Field, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
			if strings.Contains(part, `"`) {
				continue // a quoted key: empty, or holding . [ ] " or a control
			}
			if part == "(top level)" || strings.Trim(part, "0123456789") == "" || strings.ContainsRune(part, utf8.RuneError) {
				continue
			}
			if !strings.Contains(string(data), part) {
				t.Fatalf("field %q: %q is not in the document %q", he.Field, part, data)
			}
		}
	})
}

// TestSpecRequiredNamesItsVariable checks that a missing key, model or
// base URL names the spec field and the environment variable.
func TestSpecRequiredNamesItsVariable(t *testing.T) {
	empty := func(string) (string, bool) { return "", false }
	tests := []struct {
		name, provider, rest string
		lookup               func(string) (string, bool)
		field, msg           string
	}{
		{"anthropic key", `{"name": "anthropic", "model": "claude-sonnet-4-5"}`, "", empty, "provider.api_key", "required: set it here, or in ANTHROPIC_API_KEY"},
		{"anthropic key, environment not allowed", `{"name": "anthropic", "model": "claude-sonnet-4-5"}`, "", nil, "provider.api_key", "ANTHROPIC_API_KEY is read only when the host lets the environment be read"},
		{"anthropic model", `{"name": "anthropic", "api_key": "sk-ant-x"}`, "", empty, "provider.model", "ANTHROPIC_MODEL"},
		{"openai key", `{"name": "openai", "model": "gpt-4o"}`, "", empty, "provider.api_key", "OPENAI_API_KEY"},
		{"openrouter key of a fallback", `{"name": "scripted", "script": {"turns": [{"text": "ok"}]}}`, `"fallbacks": [{"name": "openrouter", "model": "qwen/qwen3-coder"}]`, empty, "fallbacks[0].api_key", "OPENROUTER_API_KEY"},
		{"compatible model", `{"name": "openai_compatible", "preset": "ollama"}`, "", empty, "provider.model", "OPENAI_COMPATIBLE_MODEL"},
		{"compatible base URL", `{"name": "openai_compatible", "model": "m"}`, "", empty, "provider.base_url", "OPENAI_COMPATIBLE_BASE_URL, or a preset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := harness.ParseSpec([]byte(specJSON(t, "", tt.provider, tt.rest)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Options(tt.lookup)
			he := configErr(t, err)
			if he.Field != tt.field || !strings.Contains(he.Error(), tt.msg) {
				t.Errorf("field %q, error %q; want field %q and %q", he.Field, he.Error(), tt.field, tt.msg)
			}
			if strings.Contains(he.Error(), "APIKey is required") {
				t.Errorf("the error speaks Go, not the spec: %v", he)
			}
		})
	}
	// A compatible server needs no key.
	s, err := harness.ParseSpec([]byte(specJSON(t, "", `{"name": "openai_compatible", "preset": "ollama", "model": "qwen3-coder"}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Options(empty); err != nil {
		t.Errorf("a compatible server without a key: %v", err)
	}
}

// server is a local Chat Completions and Messages server that records
// the path and the Authorization header of each request.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	auth  []string
}

func newServer(t *testing.T) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.auth = append(s.auth, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) last() (path, auth string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[len(s.paths)-1], s.auth[len(s.auth)-1]
}

func complete(t *testing.T, spec string, lookup func(string) (string, bool)) provider.Provider {
	t.Helper()
	s, err := harness.ParseSpec([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := s.Options(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opts.Provider.Complete(context.Background(), &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	return opts.Provider
}

// TestSpecCompatibleEnvironment: openai_compatible reads its own
// variables, and OpenAI's key never reaches its server. The negative
// control is the openai provider, which the same environment gives
// OpenAI's key.
func TestSpecCompatibleEnvironment(t *testing.T) {
	srv := newServer(t)
	env := map[string]string{
		"OPENAI_API_KEY": "sk-openai-secret-0123", "OPENAI_BASE_URL": srv.URL,
		"OPENAI_COMPATIBLE_BASE_URL": srv.URL, "OPENAI_COMPATIBLE_MODEL": "qwen3-coder",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	p := complete(t, specJSON(t, "", `{"name": "openai_compatible"}`, ""), lookup)
	if path, auth := srv.last(); path != "/v1/chat/completions" || auth != "" || p.Name() != "openai_compatible:qwen3-coder" {
		t.Errorf("compatible: %s %s, path %s, auth %q; want OPENAI_COMPATIBLE_* and no key", p.Name(), srv.URL, path, auth)
	}
	// Negative control: the same environment gives openai OpenAI's key.
	complete(t, specJSON(t, "", `{"name": "openai", "model": "gpt-4o"}`, ""), lookup)
	if _, auth := srv.last(); auth != "Bearer sk-openai-secret-0123" {
		t.Errorf("openai: auth %q; the control should carry OPENAI_API_KEY", auth)
	}
	env["OPENAI_COMPATIBLE_API_KEY"] = "local-key-0123"
	complete(t, specJSON(t, "", `{"name": "openai_compatible"}`, ""), lookup)
	if _, auth := srv.last(); auth != "Bearer local-key-0123" {
		t.Errorf("compatible with its key: auth %q", auth)
	}
}

// TestSpecBaseURLs checks every vendor against every spelling of its
// base URL, from the spec and from the environment.
func TestSpecBaseURLs(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		vendor, env, suffix, path string
	}{
		{"anthropic", "ANTHROPIC_BASE_URL", "", "/v1/messages"},
		{"anthropic", "ANTHROPIC_BASE_URL", "/v1", "/v1/messages"},
		{"anthropic", "ANTHROPIC_BASE_URL", "/v1/", "/v1/messages"},
		{"openai", "OPENAI_BASE_URL", "", "/v1/chat/completions"},
		{"openai", "OPENAI_BASE_URL", "/v1/", "/v1/chat/completions"},
		{"openrouter", "OPENROUTER_BASE_URL", "/api", "/api/v1/chat/completions"},
		{"openrouter", "OPENROUTER_BASE_URL", "/api/v1/", "/api/v1/chat/completions"},
		{"openai_compatible", "OPENAI_COMPATIBLE_BASE_URL", "", "/v1/chat/completions"},
		{"openai_compatible", "OPENAI_COMPATIBLE_BASE_URL", "/v1/", "/v1/chat/completions"},
	}
	for _, tt := range tests {
		base := srv.URL + tt.suffix
		fromSpec := fmt.Sprintf(`{"name": %q, "model": "m", "api_key": "k-0123456789", "base_url": %q}`, tt.vendor, base)
		complete(t, specJSON(t, "", fromSpec, ""), nil)
		if path, _ := srv.last(); path != tt.path {
			t.Errorf("%s base_url …%s: path %s, want %s", tt.vendor, tt.suffix, path, tt.path)
		}
		env := map[string]string{tt.env: base}
		complete(t, specJSON(t, "", fmt.Sprintf(`{"name": %q, "model": "m", "api_key": "k-0123456789"}`, tt.vendor), ""),
			func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if path, _ := srv.last(); path != tt.path {
			t.Errorf("%s %s=…%s: path %s, want %s", tt.vendor, tt.env, tt.suffix, path, tt.path)
		}
	}
}

// TestSpecModelsOverride checks the catalogue override file: from the
// spec, from IO_HARNESS_MODELS when the environment is read (and only
// then), and a bad one as a config error naming the file's field.
func TestSpecModelsOverride(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "models.json")
	os.WriteFile(good, []byte(`{"version": 1, "models": [{"vendor": "anthropic", "id": "claude-next", "context_window": 300000, "max_output_tokens": 100000, "price": {"input": 4, "output": 20}, "tools": true}]}`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "models": [{"vendor": "anthropic", "id": "x", "price": {"inptu": 4, "output": 20}}]}`), 0o600)
	anth := `{"name": "anthropic", "model": "claude-next", "api_key": "sk-ant-0123456789"}`
	price := func(p provider.Provider) provider.Cost {
		return p.(provider.Pricer).Price(provider.Usage{InputTokens: 1e6, OutputTokens: 1e6})
	}
	build := func(spec string, lookup func(string) (string, bool)) (provider.Provider, error) {
		s, err := harness.ParseSpec([]byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		opts, err := s.Options(lookup)
		return opts.Provider, err
	}

	p, err := build(specJSON(t, "", anth, fmt.Sprintf(`"models": %q`, good)), nil)
	if err != nil || price(p).USD != 24 {
		t.Fatalf("override from the spec: %v, %v; want $24", err, price(p))
	}
	if l, ok := provider.LimitsOf(p); !ok || l.ContextWindow != 300000 {
		t.Errorf("override's limits: %+v, %v", l, ok)
	}
	env := map[string]string{"IO_HARNESS_MODELS": good}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if p, err = build(specJSON(t, "", anth, ""), lookup); err != nil || price(p).USD != 24 {
		t.Errorf("override from IO_HARNESS_MODELS: %v, %v", err, price(p))
	}
	// Not read when the environment is not: the model is then unknown.
	if p, err = build(specJSON(t, "", anth, ""), nil); err != nil || price(p).Known {
		t.Errorf("IO_HARNESS_MODELS read without the environment: %v, %v", err, price(p))
	}
	for _, src := range []struct {
		spec   string
		lookup func(string) (string, bool)
	}{
		{specJSON(t, "", anth, fmt.Sprintf(`"models": %q`, bad)), nil},
		{specJSON(t, "", anth, ""), func(k string) (string, bool) {
			return map[string]string{"IO_HARNESS_MODELS": bad}[k], k == "IO_HARNESS_MODELS"
		}},
		{specJSON(t, "", anth, fmt.Sprintf(`"models": %q`, filepath.Join(dir, "missing.json"))), nil},
	} {
		_, err := build(src.spec, src.lookup)
		he := configErr(t, err)
		var me *models.Error
		if he.Field != "models" || !errors.As(err, &me) || !strings.Contains(err.Error(), me.File) {
			t.Errorf("bad override: %v; want field models wrapping a *models.Error that names the file", err)
		}
		if me != nil && me.File == bad && me.Field != "models[0].price.inptu" {
			t.Errorf("the override's field is %q", me.Field)
		}
	}
}

// TestFirstProblemMatchesDecoder checks the walk against encoding/json:
// on documents the decoder accepts, the walk finds nothing. The decoder
// folds the case of keys; the published schema does not, and ParseSpec
// follows the schema.
func TestFirstProblemMatchesDecoder(t *testing.T) {
	folded := specJSON(t, `{"MAX_STEPS": 3, "Time": "1m"}`, `{"Name": "scripted", "script": {"turns": [{"text": "ok"}]}}`, `"backoff": {"base": "1s"}, "policy": null`)
	ok := specJSON(t, "", `{"name": "openai", "headers": {"A": "b"}, "price": {"input": 1, "output": 2, "long_context": {"above_input_tokens": 5, "input": 2, "output": 4}}}`, `"wasm_tools": []`)
	for _, doc := range []string{folded, ok} {
		if field, problem := harness.FirstProblem([]byte(doc)); field != "" {
			t.Errorf("FirstProblem(%s) = %s: %s", doc, field, problem)
		}
	}
	if _, err := harness.ParseSpec([]byte(ok)); err != nil {
		t.Errorf("ParseSpec(%s): %v", ok, err)
	}
	if _, err := harness.ParseSpec([]byte(folded)); err == nil || configErr(t, err).Field != "task.budgets" {
		t.Errorf("ParseSpec(%s) = %v, want the schema's refusal of the keys", folded, err)
	}
}

// TestSpecNamesBuiltinPolicy checks that a spec may name a built-in
// policy, as `io-harness policy explain` does, in ParseSpec (which the
// CLI, the ABI and a fleet's submit share) and in ParseResumeSpec.
// Negative control: an unknown name is refused naming the field.
func TestSpecNamesBuiltinPolicy(t *testing.T) {
	scripted := `{"name": "scripted", "script": {"turns": [{"text": "ok"}]}}`
	for _, tt := range []struct{ name, want string }{
		{"default", "default"},
		{"permissive", "permissive"},
		{"strict", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := harness.ParseSpec([]byte(specJSON(t, "", scripted, `"policy": "`+tt.name+`"`)))
			if tt.want == "" {
				if he := configErr(t, err); he.Field != "policy" || !strings.Contains(he.Error(), `unknown built-in policy "strict"`) {
					t.Errorf("field %q: %v", he.Field, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _ := policy.Named(tt.want)
			want.Validate()
			if diff := cmp.Diff(want, *s.Policy); diff != "" {
				t.Errorf("the %s policy (-want +got):\n%s", tt.name, diff)
			}
		})
	}
	// A resume's spec has no task; a run's must.
	resume := []byte(`{"provider": ` + scripted + `, "policy": "default"}`)
	if s, err := harness.ParseResumeSpec(resume); err != nil || s.Policy == nil || s.Policy.IsPermissive() {
		t.Errorf("a resume spec: %v %v", s.Policy, err)
	}
	if _, err := harness.ParseSpec(resume); err == nil {
		t.Error("a run's spec without a task parsed")
	}
}
