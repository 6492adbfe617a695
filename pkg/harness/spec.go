package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/replay"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Spec is the JSON run spec: everything a run needs that is data. The Go
// API, the C ABI, the bindings and the CLI all accept this same document.
//
// A spec may carry API keys. The harness never stores a spec: the store
// holds the task and the provider's name only.
type Spec struct {
	Task      TaskContract   `json:"task"`
	Provider  ProviderSpec   `json:"provider"`
	Fallbacks []ProviderSpec `json:"fallbacks,omitempty"`
	Backoff   Backoff        `json:"backoff,omitzero"`
	// Policy is the run's permission boundary; absent means none.
	Policy *policy.Policy `json:"policy,omitempty"`
	// Sandbox selects the sandbox backend; absent means the strongest
	// that works here.
	Sandbox *sandbox.Options `json:"sandbox,omitempty"`
	// WasmTools are WebAssembly tools the agent may call beside the
	// built-in ones.
	WasmTools []tool.Wasm `json:"wasm_tools,omitempty"`
}

// ProviderSpec names a provider and configures it. It is flat: each field
// applies to the providers its comment names, and a field set for a
// provider that does not use it is an error.
type ProviderSpec struct {
	// Name is the provider: "openai", "anthropic", "openrouter",
	// "openai_compatible", "scripted" or "replay".
	Name string `json:"name"`

	// Model is the vendor's model id. For openai, anthropic and
	// openrouter it defaults to OPENAI_MODEL, ANTHROPIC_MODEL or
	// OPENROUTER_MODEL; there is no built-in default model.
	Model string `json:"model,omitempty"`
	// APIKey is the vendor key; it defaults to OPENAI_API_KEY,
	// ANTHROPIC_API_KEY or OPENROUTER_API_KEY. It is never stored, logged
	// or put in an error.
	APIKey provider.Secret `json:"api_key,omitempty"`
	// BaseURL overrides the API root, for proxies, gateways and tests; it
	// defaults to OPENAI_BASE_URL, ANTHROPIC_BASE_URL or
	// OPENROUTER_BASE_URL, then to the vendor's. Required for
	// openai_compatible without a preset.
	BaseURL string `json:"base_url,omitempty"`
	// Preset picks a local server for openai_compatible: "ollama",
	// "vllm", "llamacpp" or "lmstudio".
	Preset string `json:"preset,omitempty"`
	// MaxOutputTokens is the output cap of a request the budgets do not
	// cap.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// StallTimeout fails a stream that sends no bytes for this long
	// (a transient failure); zero means 90s.
	StallTimeout Duration `json:"stall_timeout,omitempty"`
	// RequestTimeout bounds one call; zero means 10m.
	RequestTimeout Duration `json:"request_timeout,omitempty"`
	// Headers are extra request headers; they cannot replace the auth
	// headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Price overrides the embedded list price, in USD per million tokens.
	Price *provider.Price `json:"price,omitempty"`
	// Referer and Title are OpenRouter's attribution headers.
	Referer string `json:"referer,omitempty"`
	Title   string `json:"title,omitempty"`
	// Models is OpenRouter's fallback model list.
	Models []string `json:"models,omitempty"`
	// Routing is OpenRouter's provider-preferences object, passed on as is.
	Routing json.RawMessage `json:"routing,omitempty"`

	// Script is the scripted provider's script.
	Script *scripted.Script `json:"script,omitempty"`
	// Cassette is the replay provider's cassette file.
	Cassette string `json:"cassette,omitempty"`
}

// ParseSpec reads a run spec from JSON and validates it, task included.
// Unknown fields are errors.
//
// # Errors
//
// Every problem is an *Error of kind ErrConfig naming its field.
func ParseSpec(data []byte) (Spec, error) {
	var s Spec
	if err := decodeStrict(data, &s); err != nil {
		return Spec{}, err
	}
	if err := s.Task.Validate(); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Field != "" {
			e.Field = "task." + e.Field
		}
		return Spec{}, err
	}
	if s.Policy != nil {
		if err := s.Policy.Validate(); err != nil {
			var pe *policy.Error
			if errors.As(err, &pe) {
				return Spec{}, &Error{Kind: ErrConfig, Field: "policy." + pe.Field, Message: pe.Reason}
			}
			return Spec{}, &Error{Kind: ErrConfig, Field: "policy", Err: err}
		}
	}
	return s, nil
}

// Options builds the providers the spec names and returns Options for
// [Run] with them; the caller adds the store and the observer. lookup
// reads the environment (os.LookupEnv, typically) for the keys, models and
// base URLs the spec leaves empty; nil reads nothing.
func (s *Spec) Options(lookup func(string) (string, bool)) (Options, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	p, err := s.Provider.build("provider", lookup)
	if err != nil {
		return Options{}, err
	}
	opts := Options{Provider: p, Backoff: s.Backoff, Policy: s.Policy, Sandbox: s.Sandbox}
	for i := range s.WasmTools {
		w := s.WasmTools[i]
		opts.Tools = append(opts.Tools, &w)
	}
	for i := range s.Fallbacks {
		f, err := s.Fallbacks[i].build(fmt.Sprintf("fallbacks[%d]", i), lookup)
		if err != nil {
			return Options{}, err
		}
		opts.Fallbacks = append(opts.Fallbacks, f)
	}
	return opts, nil
}

// envNames returns the environment variables of a vendor's key, model and
// base URL.
func envNames(vendor string) (names [3]string, ok bool) {
	switch vendor {
	case "openai":
		return [3]string{openai.EnvAPIKey, openai.EnvModel, openai.EnvBaseURL}, true
	case "anthropic":
		return [3]string{anthropic.EnvAPIKey, anthropic.EnvModel, anthropic.EnvBaseURL}, true
	case "openrouter":
		return [3]string{openrouter.EnvAPIKey, openrouter.EnvModel, openrouter.EnvBaseURL}, true
	}
	return names, false
}

// build constructs the provider p names. p is a copy: the keys and models
// it reads from the environment do not end up in the caller's spec.
func (p ProviderSpec) build(field string, lookup func(string) (string, bool)) (provider.Provider, error) {
	if err := p.unused(field); err != nil {
		return nil, err
	}
	if names, ok := envNames(p.Name); ok {
		get := func(k string) string { v, _ := lookup(k); return v }
		if p.APIKey == "" {
			p.APIKey = provider.Secret(get(names[0]))
		}
		if p.Model == "" {
			p.Model = get(names[1])
		}
		if p.BaseURL == "" {
			p.BaseURL = get(names[2])
		}
	}
	var (
		prov provider.Provider
		err  error
	)
	switch p.Name {
	case "openai", "openai_compatible":
		cfg := openai.Config{APIKey: p.APIKey, Model: p.Model, BaseURL: p.BaseURL, Preset: openai.Preset(p.Preset),
			MaxOutputTokens: p.MaxOutputTokens, StallTimeout: time.Duration(p.StallTimeout),
			RequestTimeout: time.Duration(p.RequestTimeout), Headers: p.Headers, Price: p.Price}
		if p.Name == "openai" {
			prov, err = openai.New(cfg)
		} else {
			prov, err = openai.NewCompatible(cfg)
		}
	case "anthropic":
		prov, err = anthropic.New(anthropic.Config{APIKey: p.APIKey, Model: p.Model, BaseURL: p.BaseURL,
			MaxOutputTokens: p.MaxOutputTokens, StallTimeout: time.Duration(p.StallTimeout),
			RequestTimeout: time.Duration(p.RequestTimeout), Headers: p.Headers, Price: p.Price})
	case "openrouter":
		prov, err = openrouter.New(openrouter.Config{APIKey: p.APIKey, Model: p.Model, BaseURL: p.BaseURL,
			Referer: p.Referer, Title: p.Title, Models: p.Models, Provider: p.Routing,
			MaxOutputTokens: p.MaxOutputTokens, StallTimeout: time.Duration(p.StallTimeout),
			RequestTimeout: time.Duration(p.RequestTimeout), Headers: p.Headers, Price: p.Price})
	case "scripted":
		if p.Script == nil {
			return nil, configError(field+".script", "required for the scripted provider")
		}
		field += ".script"
		prov, err = scripted.New(*p.Script)
	case "replay":
		if p.Cassette == "" {
			return nil, configError(field+".cassette", "required for the replay provider")
		}
		field += ".cassette"
		prov, err = replay.Load(p.Cassette)
	case "":
		return nil, configError(field+".name", "required")
	default:
		return nil, configError(field+".name", "unknown provider %q; want openai, anthropic, openrouter, openai_compatible, scripted or replay", p.Name)
	}
	if err != nil {
		return nil, &Error{Kind: ErrConfig, Field: field, Err: err}
	}
	return prov, nil
}

// unused refuses a field set for a provider that does not use it, so that
// a setting is never silently ignored.
func (p *ProviderSpec) unused(field string) error {
	vendor := p.Name == "openai" || p.Name == "anthropic" || p.Name == "openrouter" || p.Name == "openai_compatible"
	checks := []struct {
		name string
		set  bool
		ok   bool
	}{
		{"model", p.Model != "", vendor},
		{"api_key", p.APIKey != "", vendor},
		{"base_url", p.BaseURL != "", vendor},
		{"preset", p.Preset != "", p.Name == "openai_compatible"},
		{"max_output_tokens", p.MaxOutputTokens != 0, vendor},
		{"stall_timeout", p.StallTimeout != 0, vendor},
		{"request_timeout", p.RequestTimeout != 0, vendor},
		{"headers", len(p.Headers) > 0, vendor},
		{"price", p.Price != nil, vendor},
		{"referer", p.Referer != "", p.Name == "openrouter"},
		{"title", p.Title != "", p.Name == "openrouter"},
		{"models", len(p.Models) > 0, p.Name == "openrouter"},
		{"routing", len(p.Routing) > 0, p.Name == "openrouter"},
		{"script", p.Script != nil, p.Name == "scripted"},
		{"cassette", p.Cassette != "", p.Name == "replay"},
	}
	for _, c := range checks {
		if c.set && !c.ok {
			return configError(field+"."+c.name, "does not apply to the %s provider", p.Name)
		}
	}
	return nil
}
